//! The fault suite: the operator under faults of the network, the control plane and its input,
//! each asserting that nothing is lost (every object converges, no cleanup runs twice, no
//! finalizer is left behind) within a bound.
//!
//! Network faults go through [`kubeforge::testing::FaultProxy`], a TCP proxy between the operator
//! and the apiserver that the test can black-hole. the book's "Failure behaviour" (docs/src/failures.md) lists every case
//! with its measured time.
//!
//! - `finalizers`: one name deleted and created again in a tight loop, with and without the
//!   finalizer on the manifest; a status writer racing slow cleanups; deletions while the operator
//!   is down; a finalizer added to an object deleted meanwhile.
//! - `network`: connections black-holed (existing ones, a request in flight, 41 reconciles in
//!   flight, all for 60 s); a
//!   dedicated plane with the controller-manager stopped, then the operator cut off while objects
//!   change, etcd is compacted and the apiserver is down (410 → relist).
//! - `decode`: undecodable objects in watch events and in lists, deleted while undecodable; one
//!   object failing for ever among 200; a reconcile stamping status every time.
//! - `signals`: SIGTERM during a burst, a second SIGTERM, SIGTERM while a Lease renewal hangs on
//!   a dead connection (a test operator run as a process).
//! - `fencing`: a leader frozen mid-work and thawed after its successor took over writes nothing
//!   more (checked in the apiserver's audit log, each replica under its own ServiceAccount).
//! - `sharding`: a shard member frozen mid-work past its Lease and thawed after its objects
//!   moved writes nothing more to them (audit log, each replica under its own ServiceAccount);
//!   a member killed while every object changes: all its objects move within a lease duration
//!   and a retry period of its last renewal (plus the patches' time).
//! - `logs`: an outage at the default log level — one `warn` when a watch fails, one `info` when
//!   it is back however many retries it took, an `info` with the reason when the informer
//!   relists (410 Gone) and when the relist is complete; a healthy watch quiet for longer than
//!   the watch-idle deadline logs nothing.
//! - `webhooks`: a stopped operator keeps its conversion and webhooks (writes refused loudly,
//!   nothing stored lossily); the defaulter's patch; deletes after a crash; objects the webhook
//!   cannot read are deletable and repairable; the operator under exactly the RBAC it prints.
//! - `stuck`: reconciles that never return (the reconcile timeout), every worker stuck (the
//!   liveness probe).

mod decode;
mod fencing;
mod finalizers;
mod logs;
mod network;
mod sharding;
mod signals;
mod stuck;
mod webhooks;
