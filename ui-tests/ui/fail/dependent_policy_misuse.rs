use kubeforge::controller::Context;
use kubeforge::k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};

pub struct Tenant;

// `keep` cannot survive the owner's deletion (the garbage collector deletes by owner
// reference), a policy is a word of three, and a field manager needs dependents to apply.
#[kubeforge::controller(
    for = ConfigMap,
    dependents(
        namespace(on_owner_delete = keep),
        secret(prune = destroy),
    ),
)]
impl Tenant {
    fn namespace(&self, _cm: &ConfigMap, _ctx: &Context<ConfigMap>) -> Namespace {
        Namespace::default()
    }
    fn secret(&self, _cm: &ConfigMap, _ctx: &Context<ConfigMap>) -> Secret {
        Secret::default()
    }
}

pub struct Plain;

#[kubeforge::controller(for = Secret, field_manager = "legacy-operator")]
impl Plain {
    async fn reconcile(
        &self,
        _s: std::sync::Arc<Secret>,
        _ctx: &Context<Secret>,
    ) -> Result<kubeforge::controller::Action, kubeforge::BoxError> {
        Ok(kubeforge::controller::Action::Done)
    }
}

fn main() {}
