//! `Slot`, a kind with two versions of different shapes, admission webhooks and a controller:
//! what the webhook lifecycle fault tests (`integration/faults/webhooks.rs`) run, in-process and
//! as the `webhook-operator` process under exactly the RBAC its own `crdgen` prints.
//!
//! v2 is the storage version: `instances`, `slot`, `tier` (serde default `standard`, which the
//! defaulter never touches). v1 names `instances` `replicas` and has a `legacyNote` v2 has no
//! field for (kept in an annotation by the generated conversion). A Slot's `slot` must be unique
//! in its namespace (the validator); `instances: 0` is defaulted to 1 (the defaulter).

use std::sync::Arc;

use kubeforge::BoxError;
use kubeforge::kube::api::ListParams;
use kubeforge::prelude::*;
use kubeforge::webhook::{AdmissionContext, Defaulter, Validator, Verdict};

/// The group of the kind.
pub const GROUP: &str = "faults-webhooks.kubeforge.dev";
/// The CRD's name.
pub const CRD: &str = "slots.faults-webhooks.kubeforge.dev";

/// The storage version.
pub mod v2 {
    /// The storage version.
    #[kubeforge::custom_resource(
        group = "faults-webhooks.kubeforge.dev",
        version = "v2",
        kind = "Slot",
        namespaced,
        webhooks(validate, default, timeout_seconds = 5)
    )]
    #[derive(Clone, Debug, Default, PartialEq)]
    pub struct SlotSpec {
        /// Number of instances.
        #[serde(default)]
        pub instances: i32,
        /// The slot, unique in the namespace.
        pub slot: i32,
        /// Service tier.
        #[serde(default = "standard")]
        pub tier: String,
    }

    fn standard() -> String {
        "standard".to_owned()
    }
}

/// The first version, converted through v2.
pub mod v1 {
    /// The first shape.
    #[kubeforge::custom_resource(
        group = "faults-webhooks.kubeforge.dev",
        version = "v1",
        kind = "Slot",
        namespaced,
        storage = false,
        conversion(hub = super::v2::Slot, generate)
    )]
    #[derive(Clone, Debug, Default, PartialEq)]
    #[serde(rename_all = "camelCase")]
    pub struct SlotSpec {
        /// Number of instances (`instances` in v2).
        #[convert(from = "instances")]
        #[serde(default)]
        pub replicas: i32,
        /// The slot.
        pub slot: i32,
        /// A note only v1 has.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub legacy_note: Option<String>,
    }
}

impl Validator for v2::Slot {
    async fn validate_create(&self, ctx: &AdmissionContext) -> Verdict {
        let slots: Api<v2::Slot> =
            Api::namespaced(ctx.client(), ctx.namespace().unwrap_or("default"));
        let taken = match slots.list(&ListParams::default()).await {
            Ok(list) => list
                .items
                .into_iter()
                .any(|s| s.spec.slot == self.spec.slot && s.metadata.name != self.metadata.name),
            Err(e) => return Verdict::deny(format!("cannot list the slots: {e}")),
        };
        if taken {
            return Verdict::deny(format!("spec.slot: {} is taken", self.spec.slot));
        }
        Verdict::allow()
    }

    async fn validate_update(&self, _: &Self, ctx: &AdmissionContext) -> Verdict {
        self.validate_create(ctx).await
    }
}

impl Defaulter for v2::Slot {
    async fn apply_defaults(&mut self, _: &AdmissionContext) -> Verdict {
        if self.spec.instances == 0 {
            self.spec.instances = 1;
        }
        Verdict::allow()
    }
}

/// Reconciles Slots (reads only: the traffic of the operator under its printed RBAC).
pub struct SlotController;

#[kubeforge::controller(for = v2::Slot)]
impl SlotController {
    async fn reconcile(
        &self,
        slot: Arc<v2::Slot>,
        _: &Context<v2::Slot>,
    ) -> Result<Action, BoxError> {
        kubeforge::tracing::info!(name = %slot.name_any(), slot = slot.spec.slot, "reconciled");
        Ok(Action::Done)
    }
}
