//! The fault suite: the operator under faults of the network, the control plane and its input,
//! each asserting that nothing is lost (every object converges, no cleanup runs twice, no
//! finalizer is left behind) within a bound.
//!
//! Network faults go through [`kubeforge::testing::FaultProxy`], a TCP proxy between the operator
//! and the apiserver that the test can black-hole.

mod decode;
mod finalizers;
mod network;
mod signals;
