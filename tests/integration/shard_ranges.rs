//! Server-side sharding (hash ranges, `shardSelector`) with `shard-operator` processes against a
//! dedicated control plane whose apiserver runs with the `ShardedListAndWatch` feature gate:
//! the split (each replica caches only its ranges' objects, as the apiserver filters them),
//! a replica joining while every object changes, one killed, and no object ever written to
//! move it or reconciled by two replicas at once. On the shared plane (gate off) the default
//! mode falls back to labels, and mode `ranges` refuses to start.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use kubeforge::shard::ranges::{ASSIGNMENT_ANNOTATION, Assignment, fnv1a64, slot_of};
use kubeforge::testing::{ControlPlane, TestNamespace};

use crate::sharding::{
    GROUP, LEASE, Pace, RETRY, Replica, assert_no_overlap, create_objects, logs_dir, members_up,
    now_us, operator_rules, renewals_of, renewed_us, sharder, update_objects,
};
use crate::support::load::progressing;
use crate::support::{configmap, rbac};

/// The plane with the gate on, shared by this module's tests (stopped when the test process
/// exits).
async fn gated_plane() -> &'static ControlPlane {
    static PLANE: tokio::sync::OnceCell<ControlPlane> = tokio::sync::OnceCell::const_new();
    PLANE
        .get_or_init(|| async {
            tokio::task::spawn_blocking(|| {
                ControlPlane::dedicated_with_gates("ranges", "ShardedListAndWatch=true")
            })
            .await
            .unwrap()
            .unwrap()
        })
        .await
}

async fn namespace(client: &Client, name: &str) -> Api<ConfigMap> {
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({ "metadata": { "name": name } })).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    Api::namespaced(client.clone(), name)
}

/// The group's assignment, once every slot is served (no slot free or moving).
async fn settled(leases: &Api<Lease>) -> Option<Assignment> {
    let lease = leases.get_opt(&format!("{GROUP}-ranges")).await.ok()??;
    let text = lease.metadata.annotations?.remove(ASSIGNMENT_ANNOTATION)?;
    let assignment: Assignment = serde_json::from_str(&text).ok()?;
    assignment
        .slots
        .iter()
        .all(|slot| slot.server().is_some())
        .then_some(assignment)
}

/// The member the assignment gives an object to.
fn server<'a>(assignment: &'a Assignment, cm: &ConfigMap) -> Option<&'a str> {
    let uid = cm.metadata.uid.as_deref()?;
    assignment.slots[slot_of(fnv1a64(uid.as_bytes()))].server()
}

fn annotation<'a>(cm: &'a ConfigMap, key: &str) -> Option<&'a str> {
    cm.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// The objects done (`<name>=<member>`: carrying `value`, stamped by the member of `members`
/// serving its range), and once the assignment is settled on `members` and every one of the
/// `count` objects is done, the objects per member.
async fn converged(
    api: &Api<ConfigMap>,
    leases: &Api<Lease>,
    count: usize,
    value: &str,
    members: &[&str],
) -> (Vec<String>, Option<HashMap<String, usize>>) {
    let Some(assignment) = settled(leases).await else {
        return (Vec::new(), None);
    };
    let objects = api
        .list(&ListParams::default().labels("shard-test=true"))
        .await
        .map(|list| list.items)
        .unwrap_or_default();
    let mut done = Vec::new();
    let mut per_member: HashMap<String, usize> = HashMap::new();
    for cm in &objects {
        let Some(owner) = server(&assignment, cm) else {
            continue;
        };
        if members.contains(&owner)
            && annotation(cm, "shard/by") == Some(owner)
            && annotation(cm, "shard/value") == Some(value)
        {
            done.push(format!(
                "{}={owner}",
                cm.metadata.name.as_deref().unwrap_or("")
            ));
            *per_member.entry(owner.to_owned()).or_default() += 1;
        }
    }
    let all = objects.len() == count && done.len() == count;
    (done, all.then_some(per_member))
}

/// Each replica's cache holds exactly the objects of its ranges (the apiserver filtered them).
async fn caches_hold_their_shares(
    replicas: &[&Replica],
    per_member: &HashMap<String, usize>,
    stall: impl FnMut() -> Duration,
) {
    progressing("the caches to hold the shares", stall, async || {
        tokio::time::sleep(Duration::from_millis(600)).await;
        let holding: Vec<String> = replicas
            .iter()
            .filter(|r| r.owned() == Some(per_member.get(&r.name).copied().unwrap_or(0)))
            .map(|r| r.name.clone())
            .collect();
        let all = holding.len() == replicas.len();
        (holding, all.then_some(()))
    })
    .await;
}

/// The members the group's assignment gives a slot to (settled or not).
async fn serving(leases: &Api<Lease>) -> Vec<String> {
    let Ok(Some(lease)) = leases.get_opt(&format!("{GROUP}-ranges")).await else {
        return Vec::new();
    };
    let text = lease
        .metadata
        .annotations
        .and_then(|mut a| a.remove(ASSIGNMENT_ANNOTATION))
        .unwrap_or_default();
    let Ok(assignment) = serde_json::from_str::<Assignment>(&text) else {
        return Vec::new();
    };
    let mut members: Vec<String> = assignment
        .slots
        .iter()
        .filter_map(|slot| slot.server().map(str::to_owned))
        .collect();
    members.sort();
    members.dedup();
    members
}

/// `d` since `since_us` (µs since the epoch), until `at_us`.
fn between(since_us: u128, at_us: u128) -> Duration {
    Duration::from_micros(u64::try_from(at_us.saturating_sub(since_us)).unwrap())
}

/// No object carries a shard label: moving it never wrote it.
async fn unlabelled(api: &Api<ConfigMap>) {
    for cm in api.list(&ListParams::default()).await.unwrap().items {
        let labels = cm.metadata.labels.unwrap_or_default();
        assert!(
            labels.keys().all(|k| !k.contains("shard.kubeforge.dev/")),
            "{:?} carries {labels:?}",
            cm.metadata.name
        );
    }
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, step by step: split, a join under changes, a kill"
)]
async fn hash_ranges_should_split_follow_a_join_and_a_kill_without_writing_any_object() {
    const COUNT: usize = 300;
    let plane = gated_plane().await;
    let client = plane.client().await.unwrap();
    let ns = "ranges-handoff";
    let api = namespace(&client, ns).await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    assert!(
        kubeforge::shard::serves_shard_selectors(&client, ns)
            .await
            .unwrap(),
        "the gated plane serves shard selectors"
    );
    let logs = std::env::temp_dir().join(format!("kubeforge-ranges-{}", std::process::id()));
    std::fs::create_dir_all(&logs).unwrap();
    // Long reconciles on many workers: ranges often move while reconciles of theirs run.
    let env = [
        ("SHARD_MODE", "ranges"),
        ("SHARD_RECONCILE_MS", "2000"),
        ("SHARD_WORKERS", "128"),
    ];
    // Each replica as a ServiceAccount of its own, bound to the rules kubeforge derives for the
    // operator's wiring: ranges mode also watches the group's Leases.
    rbac::grant_in(
        &client,
        ns,
        "shard-operator",
        operator_rules(),
        &["r0", "r1", "r2"],
    )
    .await;
    let mut kubeconfigs = HashMap::new();
    for name in ["r0", "r1", "r2"] {
        let path = plane.service_account_kubeconfig(ns, name).await.unwrap();
        kubeconfigs.insert(name, path);
    }
    let start = |name: &str| Replica::start(&kubeconfigs[name], ns, name, &logs, &env);
    let pace = Pace::new(client.clone(), ns, [LEASE, RETRY], Duration::from_secs(2));
    let mut replicas = vec![start("r0"), start("r1")];
    let refs: Vec<&Replica> = replicas.iter().collect();
    let stall = || pace.stall(&refs);
    members_up(&leases, &["r0", "r1"], stall).await;
    create_objects(&api, COUNT, "v1").await;
    let two = progressing("converged on 2", stall, async || {
        tokio::time::sleep(Duration::from_millis(300)).await;
        converged(&api, &leases, COUNT, "v1", &["r0", "r1"]).await
    })
    .await;
    caches_hold_their_shares(&refs, &two, stall).await;
    drop(refs);

    // A third replica joins while every object keeps changing.
    let churn = tokio_util::sync::CancellationToken::new();
    let churning = {
        let (api, stop) = (api.clone(), churn.clone());
        tokio::spawn(async move {
            let mut round = 0;
            while !stop.is_cancelled() {
                round += 1;
                update_objects(&api, COUNT, &format!("c{round}")).await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            round
        })
    };
    let joined = Instant::now();
    replicas.push(start("r2"));
    let refs: Vec<&Replica> = replicas.iter().collect();
    let stall = || pace.stall(&refs);
    progressing("r2 to serve a third of the ranges", stall, async || {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let Some(assignment) = settled(&leases).await else {
            return (Vec::new(), None);
        };
        let slots: Vec<String> = assignment
            .served_by("r2")
            .iter()
            .map(|slot| slot.to_string())
            .collect();
        let third = slots.len() >= 21;
        (slots, third.then_some(()))
    })
    .await;
    let assigned_in = joined.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    churn.cancel();
    let rounds = churning.await.unwrap();
    update_objects(&api, COUNT, "v3").await;
    let three = progressing("converged on 3", stall, async || {
        tokio::time::sleep(Duration::from_millis(300)).await;
        converged(&api, &leases, COUNT, "v3", &["r0", "r1", "r2"]).await
    })
    .await;
    let join_took = joined.elapsed();
    caches_hold_their_shares(&refs, &three, stall).await;
    for name in ["r0", "r1", "r2"] {
        let n = three.get(name).copied().unwrap_or(0);
        assert!(n >= COUNT / 6, "{name} serves {n} of {COUNT}: {three:?}");
    }

    // kill -9 a replica that is not the sharder, and change every object at once: its ranges
    // go to the others a lease duration after its last renewal.
    let sharder = sharder(&leases, stall).await;
    let victim = ["r1", "r2", "r0"]
        .into_iter()
        .find(|n| *n != sharder)
        .unwrap();
    let rest: Vec<&str> = ["r0", "r1", "r2"]
        .into_iter()
        .filter(|n| *n != victim)
        .collect();
    drop(refs);
    let killed = Instant::now();
    replicas
        .iter_mut()
        .find(|r| r.name == victim)
        .unwrap()
        .kill();
    let renewed = renewed_us(&leases, &format!("{GROUP}-member-{victim}")).await;
    update_objects(&api, COUNT, "v4").await;
    let refs: Vec<&Replica> = replicas.iter().collect();
    let stall = || pace.stall(&refs);
    let mut moved_at = None;
    let after = progressing("converged without the killed one", stall, async || {
        tokio::time::sleep(Duration::from_millis(250)).await;
        if moved_at.is_none() && !serving(&leases).await.iter().any(|m| m == victim) {
            moved_at = Some(now_us());
        }
        converged(&api, &leases, COUNT, "v4", &rest).await
    })
    .await;
    let moved_in = killed.elapsed();
    // Its ranges move a lease duration after its last renewal was first seen, never before,
    // and within a retry period of that plus the steps between.
    let moved = between(renewed, moved_at.unwrap());
    let latest = pace.first_move(&refs);
    assert!(
        moved >= LEASE,
        "{victim}'s ranges moved {moved:?} after its last renewal, before its Lease (lease {LEASE:?}) expired"
    );
    assert!(
        moved <= latest,
        "{victim}'s ranges moved {moved:?} after its last renewal, later than {latest:?} (lease {LEASE:?}, retry {RETRY:?}; {})",
        pace.delays.describe()
    );
    let living: Vec<&Replica> = replicas.iter().filter(|r| r.name != victim).collect();
    caches_hold_their_shares(&living, &after, stall).await;

    // A clean shutdown of the other one that is not the sharder: it releases its Lease after
    // its last reconcile, so its ranges move at once — not a lease duration later.
    let leaving = rest
        .iter()
        .copied()
        .find(|n| *n != sharder)
        .unwrap_or(rest[0]);
    let last: Vec<&str> = rest.iter().copied().filter(|n| *n != leaving).collect();
    let stopped = Instant::now();
    replicas
        .iter()
        .find(|r| r.name == leaving)
        .unwrap()
        .signal("-TERM");
    // It finishes its reconciles, then releases its Lease; its ranges move from then on, at
    // once: before the Lease could have expired (a lease duration after the release).
    let (mut released_at, leaving_lease) = (None, format!("{GROUP}-member-{leaving}"));
    let moved_at = progressing("the stopped member's ranges to move", stall, async || {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if released_at.is_none() {
            let holder = leases
                .get_opt(&leaving_lease)
                .await
                .ok()
                .flatten()
                .and_then(|l| l.spec?.holder_identity)
                .filter(|h| !h.is_empty());
            if holder.is_none() {
                released_at = Some(now_us());
            }
        }
        let all = settled(&leases)
            .await
            .is_some_and(|a| a.served_by(last[0]).len() == kubeforge::shard::ranges::SLOTS);
        (None, all.then(now_us))
    })
    .await;
    let released_in = stopped.elapsed();
    let released_at = released_at.expect("the stopped member released its Lease");
    let after_release = between(released_at, moved_at);
    update_objects(&api, COUNT, "v5").await;
    let one = progressing("converged on 1", stall, async || {
        tokio::time::sleep(Duration::from_millis(300)).await;
        converged(&api, &leases, COUNT, "v5", &last).await
    })
    .await;

    unlabelled(&api).await;
    let (audited, handed) = assert_no_overlap(&refs);
    println!(
        "hash ranges: on 2 {two:?}; r2 joined, was assigned its ranges in {assigned_in:?} and converged in {join_took:?} ({rounds} rounds of changes meanwhile): {three:?}; {victim} killed, its ranges moved {moved:?} after its last renewal (at most {latest:?}), moved and converged {moved_in:?} after the kill: {after:?}; {leaving} stopped, its ranges moved {released_in:?} after the signal, {after_release:?} after its release: {one:?}; {audited} reconciles audited, {handed} objects handed over, 0 objects written to move them; {}; {}",
        pace.delays.describe(),
        renewals_of(&refs)
    );
    assert!(
        after_release < LEASE,
        "a released member's ranges moved {after_release:?} after the release, not at once (lease {LEASE:?})"
    );
    assert!(
        handed >= COUNT / 6,
        "objects moved between replicas: {handed}"
    );
}

#[tokio::test]
async fn without_the_gate_the_default_mode_should_use_labels_and_mode_ranges_should_refuse_to_start()
 {
    use kubeforge::controller::Controller;
    use kubeforge::informer::InformerConfig;
    use kubeforge::manager::Manager;
    use kubeforge::shard::{Mode, ShardConfig, ShardMode};

    let ns = TestNamespace::new().await.unwrap();
    assert!(
        !kubeforge::shard::serves_shard_selectors(&ns.client(), ns.name())
            .await
            .unwrap(),
        "the shared plane runs without the gate"
    );
    let logs = logs_dir(&ns);
    let plane = ControlPlane::shared().unwrap();
    // The operator in the default mode: labels, and it says so.
    let replica = Replica::start(plane.kubeconfig_path(), ns.name(), "solo", &logs, &[]);
    let pace = Pace::new(
        ns.client(),
        ns.name(),
        [LEASE, RETRY],
        Duration::from_millis(5),
    );
    let mut cm = configmap("obj-0", &[("value", "v")]);
    cm.metadata.labels = Some([("shard-test".to_owned(), "true".to_owned())].into());
    ns.api::<ConfigMap>()
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    progressing(
        "the object labelled for its member",
        || pace.stall(&[&replica]),
        async || {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let cm = ns.api::<ConfigMap>().get("obj-0").await.ok();
            let done = cm.is_some_and(|cm| {
                crate::sharding::owner(&cm) == Some("solo")
                    && annotation(&cm, "shard/by") == Some("solo")
            });
            (None, done.then_some(()))
        },
    )
    .await;
    let log = std::fs::read_to_string(&replica.log).unwrap();
    assert!(
        log.contains("the apiserver ignores shardSelector"),
        "the fallback is logged:\n{log}"
    );
    drop(replica);

    // Mode `ranges` refuses to start, naming the gate.
    let config = ShardConfig::new(GROUP, ns.name())
        .identity("strict")
        .mode(ShardMode::Ranges(kubeforge::shard::RangeKey::Uid));
    let manager = Manager::new(ns.client()).shards(config);
    let membership = manager.wiring().shard().cloned().unwrap();
    let controller = Controller::new(
        "shard-test",
        manager.wiring(),
        ns.api::<ConfigMap>(),
        InformerConfig::default().labels("shard-test=true"),
    );
    struct Noop;
    impl kubeforge::controller::Reconciler<ConfigMap> for Noop {
        type Error = kube::Error;
        async fn reconcile(
            &self,
            _: std::sync::Arc<ConfigMap>,
            _: &kubeforge::controller::Context<ConfigMap>,
        ) -> Result<kubeforge::controller::Action, kube::Error> {
            Ok(kubeforge::controller::Action::Done)
        }
    }
    let error = manager
        .add_controller(controller, Noop)
        .run_until(tokio_util::sync::CancellationToken::new())
        .await
        .expect_err("refused");
    assert!(error.to_string().contains("ShardedListAndWatch"), "{error}");
    assert_eq!(membership.mode(), Mode::Labels, "undecided: nothing ran");
}

#[tokio::test]
async fn a_group_moving_from_labels_to_ranges_should_assign_no_range_while_a_labelled_member_lives()
{
    const COUNT: usize = 40;
    let plane = gated_plane().await;
    let client = plane.client().await.unwrap();
    let ns = "ranges-upgrade";
    let api = namespace(&client, ns).await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    let logs = std::env::temp_dir().join(format!("kubeforge-ranges-up-{}", std::process::id()));
    std::fs::create_dir_all(&logs).unwrap();
    // The release before: labels (what a kubeforge without range mode does).
    let old = Replica::start(
        plane.kubeconfig_path(),
        ns,
        "old",
        &logs,
        &[("SHARD_MODE", "labels")],
    );
    let pace = Pace::new(client.clone(), ns, [LEASE, RETRY], Duration::from_millis(5));
    members_up(&leases, &["old"], || pace.stall(&[&old])).await;
    create_objects(&api, COUNT, "v1").await;
    progressing(
        "the old member to serve everything",
        || pace.stall(&[&old]),
        async || {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let items = api
                .list(&ListParams::default().labels("shard-test=true"))
                .await
                .map(|list| list.items)
                .unwrap_or_default();
            let served: Vec<String> = items
                .iter()
                .filter(|cm| {
                    crate::sharding::owner(cm) == Some("old")
                        && annotation(cm, "shard/value") == Some("v1")
                })
                .filter_map(|cm| cm.metadata.name.clone())
                .collect();
            let all = items.len() == COUNT && served.len() == COUNT;
            (served, all.then_some(()))
        },
    )
    .await;
    // The new release joins, in range mode: while the old one lives, no range is assigned and
    // the new one reconciles nothing (the old one keeps the objects labelled for it).
    let new = Replica::start(
        plane.kubeconfig_path(),
        ns,
        "new",
        &logs,
        &[("SHARD_MODE", "ranges")],
    );
    members_up(&leases, &["old", "new"], || pace.stall(&[&old, &new])).await;
    update_objects(&api, COUNT, "v2").await;
    tokio::time::sleep(LEASE).await;
    let log = std::fs::read_to_string(&new.log).unwrap();
    assert!(
        !log.lines().any(|l| l.starts_with("start ")),
        "the new member reconciled while a labelled one lived:\n{log}"
    );
    assert!(
        settled(&leases).await.is_none(),
        "no range is served while a labelled member lives"
    );
    // The old one stops (a clean shutdown releases its Leases): the new one takes every range.
    old.signal("-TERM");
    let stopped = Instant::now();
    update_objects(&api, COUNT, "v3").await;
    let all = progressing(
        "the new member to serve everything",
        || pace.stall(&[&old, &new]),
        async || {
            tokio::time::sleep(Duration::from_millis(300)).await;
            converged(&api, &leases, COUNT, "v3", &["new"]).await
        },
    )
    .await;
    let took = stopped.elapsed();
    // A member sharding by labels joins the range-sharded group (a rollback begun, or
    // `--shard-mode labels` by mistake): the ranges stay where they are (giving it some would
    // strand their objects), and the new member keeps serving every object.
    let back = Replica::start(
        plane.kubeconfig_path(),
        ns,
        "back",
        &logs,
        &[("SHARD_MODE", "labels")],
    );
    let stall = || pace.stall(&[&old, &new, &back]);
    members_up(&leases, &["new", "back"], stall).await;
    tokio::time::sleep(LEASE).await;
    update_objects(&api, COUNT, "v4").await;
    progressing(
        "the new member to serve everything still",
        stall,
        async || {
            tokio::time::sleep(Duration::from_millis(300)).await;
            converged(&api, &leases, COUNT, "v4", &["new"]).await
        },
    )
    .await;
    let (audited, _) = assert_no_overlap(&[&old, &new, &back]);
    println!(
        "labels → ranges: the new member served nothing beside the old one, then {all:?} {took:?} after the old one stopped; a member by labels joining moved no range; {audited} reconciles audited"
    );
}

#[tokio::test]
async fn ranges_moving_away_from_a_killed_sharder_should_go_to_its_successor() {
    const COUNT: usize = 100;
    let plane = gated_plane().await;
    let client = plane.client().await.unwrap();
    let ns = "ranges-sharder-killed";
    let api = namespace(&client, ns).await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    let logs = std::env::temp_dir().join(format!("kubeforge-ranges-sk-{}", std::process::id()));
    std::fs::create_dir_all(&logs).unwrap();
    // Long reconciles: the first replica's drain takes seconds, so it is killed mid-move.
    let env = [
        ("SHARD_MODE", "ranges"),
        ("SHARD_RECONCILE_MS", "3000"),
        ("SHARD_WORKERS", "128"),
    ];
    let start = |name: &str| Replica::start(plane.kubeconfig_path(), ns, name, &logs, &env);
    let pace = Pace::new(client.clone(), ns, [LEASE, RETRY], Duration::from_secs(3));
    let mut first = start("s0");
    members_up(&leases, &["s0"], || pace.stall(&[&first])).await;
    create_objects(&api, COUNT, "v1").await;
    progressing(
        "converged on s0",
        || pace.stall(&[&first]),
        async || {
            tokio::time::sleep(Duration::from_millis(300)).await;
            converged(&api, &leases, COUNT, "v1", &["s0"]).await
        },
    )
    .await;
    // Every object changes (s0 reconciles them all, 3 s each), and s1 joins: half the ranges
    // start moving from s0, the sharder, which waits for its reconciles in them.
    update_objects(&api, COUNT, "v2").await;
    let second = start("s1");
    progressing(
        "ranges moving from s0",
        || pace.stall(&[&first, &second]),
        async || {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let moving = async {
                let lease = leases.get_opt(&format!("{GROUP}-ranges")).await.ok()??;
                let text = lease.metadata.annotations?.remove(ASSIGNMENT_ANNOTATION)?;
                let assignment: Assignment = serde_json::from_str(&text).ok()?;
                assignment
                    .slots
                    .iter()
                    .any(|slot| matches!(slot, kubeforge::shard::ranges::Slot::Moving { .. }))
                    .then_some(())
            };
            (None, moving.await)
        },
    )
    .await;
    let killed = Instant::now();
    first.kill();
    update_objects(&api, COUNT, "v3").await;
    // s1 takes the sharder Lease after its duration, counts s0 live for another before it
    // declares it gone: then every range is its own, the moves from s0 included. The work
    // may pause for that extra lease duration.
    let all = progressing(
        "converged on s1",
        || pace.stall(&[&first, &second]) + LEASE,
        async || {
            tokio::time::sleep(Duration::from_millis(300)).await;
            converged(&api, &leases, COUNT, "v3", &["s1"]).await
        },
    )
    .await;
    let took = killed.elapsed();
    let (audited, handed) = assert_no_overlap(&[&first, &second]);
    println!(
        "sharder killed mid-move: {all:?} {took:?} after the kill; {audited} reconciles audited, {handed} objects handed over; {}",
        pace.delays.describe()
    );
}
