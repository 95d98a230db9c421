//! The SecretMirror operator of `secret_mirror.rs` written by hand, as a controller without
//! dependents would be: the same targets, children, status and mappers (shared with the
//! declarative version), with the applying, the ownership checks, the pruning, the conditions
//! and the events written out. The book (docs/src/controllers.md) compares the two controllers'
//! lengths; the integration test runs this one too.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kubeforge::crd::{PROGRESSING, READY};
use kubeforge::dependents::DEGRADED;
use kubeforge::events::{EventType, Recorder};
use kubeforge::k8s_openapi::api::core::v1::{Namespace, Secret};
use kubeforge::k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kubeforge::kube;
use kubeforge::kube::api::{DeleteParams, Preconditions};
use kubeforge::prelude::*;
use kubeforge::serde_json::json;

use crate::secret_mirror::{
    MirrorError, SecretMirror, copy_of, every_mirror, mirrors_of_source, reader_binding,
    reader_role, set_status, source, targets,
};

// ANCHOR: controller
/// The label naming which child of a mirror an object is.
const CHILD: &str = "apps.kubeforge.dev/mirror-child";

/// The SecretMirror controller, written by hand.
pub struct ImperativeSecretMirrorController;

#[kubeforge::controller(
    for = SecretMirror,
    owns(Secret),
    owns(Role),
    owns(RoleBinding),
    watches(Secret, map_async = mirrors_of_source),
    watches(Namespace, map_async = every_mirror),
)]
impl ImperativeSecretMirrorController {
    async fn reconcile(
        &self,
        mirror: Arc<SecretMirror>,
        ctx: &Context<SecretMirror>,
    ) -> Result<Action, MirrorError> {
        let recorder = Recorder::new(ctx.client(), ctx.controller_name());
        let wanted = targets(&mirror, ctx.cache()).await?;
        let source = source(&mirror, ctx.cache(), ctx).await?;
        // Per namespace, each child's outcome: `None` when in place, else why not.
        let mut problems: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut failed = false;
        for namespace in &wanted {
            let mut problem = |child: &str, error: String, failure: bool| {
                failed |= failure;
                let entry = problems.entry(namespace.clone()).or_default();
                entry.push(format!("{namespace}: {child}: {error}"));
            };
            match copy_of(&mirror, source.as_deref(), namespace) {
                Ok(copy) => {
                    if let Err(e) = apply(&mirror, ctx, &recorder, "copy", copy).await {
                        problem("copy", e.0, e.1);
                    }
                }
                Err(e) => problem("copy", e.to_string(), true),
            }
            let role = reader_role(&mirror, namespace);
            match apply(&mirror, ctx, &recorder, "reader", role).await {
                Ok(()) => {
                    let binding = reader_binding(&mirror, namespace);
                    if let Err(e) = apply(&mirror, ctx, &recorder, "reader_binding", binding).await
                    {
                        problem("reader_binding", e.0, e.1);
                    }
                }
                Err(e) => {
                    problem("reader", e.0, e.1);
                    problem("reader_binding", "waits for reader".to_owned(), false);
                }
            }
        }
        let wanted: BTreeSet<&String> = wanted.iter().collect();
        prune::<Secret>(&mirror, ctx, &wanted).await?;
        prune::<Role>(&mirror, ctx, &wanted).await?;
        prune::<RoleBinding>(&mirror, ctx, &wanted).await?;

        let mut status = mirror.status.clone().unwrap_or_default();
        let before = status.clone();
        let generation = mirror.meta().generation.unwrap_or(0);
        let served = wanted.iter().filter(|ns| !problems.contains_key(**ns));
        let served: Vec<String> = served.map(|ns| (*ns).clone()).collect();
        let not_ready: Vec<String> = problems.values().flatten().cloned().collect();
        let message = not_ready.join("; ");
        let (ok, reason) = match (not_ready.is_empty(), failed) {
            (true, _) => (true, "AllDependentsReady"),
            (false, true) => (false, "ChildrenFailed"),
            (false, false) => (false, "ChildrenNotReady"),
        };
        let conditions = &mut status.conditions;
        conditions.mark(READY, ok, reason, &message, generation);
        conditions.mark(PROGRESSING, !ok && !failed, reason, &message, generation);
        conditions.mark(DEGRADED, failed, reason, &message, generation);
        status.observed_generation = Some(generation);
        set_status(&mirror, &mut status, served, not_ready);
        if status != before {
            ctx.patch_status(&Patch::Merge(json!({ "status": status })))
                .await?;
        }
        match failed {
            true => Err(MirrorError::Children(message)),
            false => Ok(Action::Done),
        }
    }
}

/// Applies `child` unless an object of its name exists that the mirror does not own. The
/// error says why, and whether it is a failure (not a wait).
async fn apply<K>(
    mirror: &SecretMirror,
    ctx: &Context<SecretMirror>,
    recorder: &Recorder,
    child: &str,
    mut object: K,
) -> Result<(), (String, bool)>
where
    K: kubeforge::controller::Kind<Scope = kubeforge::k8s_openapi::NamespaceResourceScope>
        + kubeforge::views::Writable,
{
    object
        .labels_mut()
        .insert(CHILD.to_owned(), child.to_owned());
    let namespace = object.namespace().unwrap_or_default();
    let name = object.name_any();
    let api: Api<K> = Api::namespaced(ctx.client(), &namespace);
    let uid = mirror.meta().uid.clone().unwrap_or_default();
    let existing = api
        .get_opt(&name)
        .await
        .map_err(|e| (e.to_string(), true))?;
    if let Some(existing) = &existing
        && !existing.owner_references().iter().any(|r| r.uid == uid)
    {
        let note = format!(
            "{namespace}/{name} exists and is not owned by {}",
            mirror.name_any()
        );
        let _ = recorder
            .publish(
                mirror,
                EventType::Warning,
                "Conflict",
                "Apply",
                Some(note.clone()),
            )
            .await;
        return Err((note, true));
    }
    match ctx.apply_owned(mirror, ctx.controller_name(), object).await {
        Ok(_) if existing.is_none() => {
            let note = format!("created {} {namespace}/{name} ({child})", K::kind(&()));
            let _ = recorder
                .publish(mirror, EventType::Normal, "Created", "Create", Some(note))
                .await;
            Ok(())
        }
        Ok(_) => Ok(()),
        Err(e) => {
            let _ = recorder
                .publish(
                    mirror,
                    EventType::Warning,
                    "ApplyFailed",
                    "Apply",
                    Some(e.to_string()),
                )
                .await;
            Err((e.to_string(), true))
        }
    }
}

/// Deletes the mirror's children of kind `K` outside the wanted namespaces.
async fn prune<K>(
    mirror: &SecretMirror,
    ctx: &Context<SecretMirror>,
    wanted: &BTreeSet<&String>,
) -> Result<(), MirrorError>
where
    K: kubeforge::controller::Kind<Scope = kubeforge::k8s_openapi::NamespaceResourceScope>,
{
    let uid = mirror.meta().uid.clone().unwrap_or_default();
    let cached = ctx
        .cache()
        .store::<K>(&Lookup::namespaces(ctx.wiring().namespaces.clone()))?;
    for stale in cached.owned_by(&uid).await? {
        let namespace = stale.namespace().unwrap_or_default();
        if wanted.contains(&namespace) || !stale.labels().contains_key(CHILD) {
            continue;
        }
        let api: Api<K> = Api::namespaced(ctx.client(), &namespace);
        let mut params = DeleteParams::background();
        params.preconditions = Some(Preconditions {
            uid: stale.meta().uid.clone(),
            resource_version: None,
        });
        match api.delete(&stale.name_any(), &params).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
// ANCHOR_END: controller
