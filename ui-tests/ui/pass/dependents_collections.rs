//! Collections of dependents: `-> Vec<Child>` (sync and async), and `for_each = items` with
//! items borrowed as `&str` or `&Item`, per-item `depends_on`, `ready` and `when`; deletion
//! policies (`prune`, `on_owner_delete`) and the applies' `field_manager`.

use kubeforge::BoxError;
use kubeforge::controller::Context;
use kubeforge::crd::Conditions;
use kubeforge::dependents::Reconciled;
use kubeforge::k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kubeforge::k8s_openapi::api::rbac::v1::{Role, RoleBinding};

#[kubeforge::custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Tenant", cluster, status = TenantStatus)]
#[derive(Clone, Debug)]
pub struct TenantSpec {
    pub namespaces: Vec<String>,
    pub enabled: bool,
}

#[kubeforge::schema]
#[derive(Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TenantStatus {
    #[serde(default)]
    pub conditions: Conditions,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default)]
    pub ready: u32,
}

/// An item with a name of its own.
pub struct Target {
    pub namespace: String,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.namespace)
    }
}

pub struct Tenants;

#[kubeforge::controller(
    for = Tenant,
    field_manager = "tenant-operator",
    dependents(
        settings(prune = orphan),
        tokens(ready = has_data, on_owner_delete = orphan),
        role(for_each = namespaces, when = enabled, prune = keep),
        binding(for_each = namespaces, depends_on(role), prune = delete, on_owner_delete = delete),
        quota_config(for_each = targets),
    ),
)]
impl Tenants {
    fn settings(&self, tenant: &Tenant, _: &Context<Tenant>) -> Vec<ConfigMap> {
        tenant
            .spec
            .namespaces
            .iter()
            .map(|ns| {
                let mut cm = ConfigMap::default();
                cm.metadata.name = Some("settings".into());
                cm.metadata.namespace = Some(ns.clone());
                cm
            })
            .collect()
    }

    async fn tokens(&self, _: &Tenant, _: &Context<Tenant>) -> Result<Vec<Secret>, BoxError> {
        Ok(Vec::new())
    }

    async fn namespaces(&self, tenant: &Tenant, _: &Context<Tenant>) -> Vec<String> {
        tenant.spec.namespaces.clone()
    }

    fn targets(&self, tenant: &Tenant, _: &Context<Tenant>) -> Result<Vec<Target>, BoxError> {
        Ok(tenant
            .spec
            .namespaces
            .iter()
            .map(|ns| Target {
                namespace: ns.clone(),
            })
            .collect())
    }

    fn role(&self, _: &Tenant, namespace: &str, _: &Context<Tenant>) -> Role {
        let mut role = Role::default();
        role.metadata.name = Some("tenant".into());
        role.metadata.namespace = Some(namespace.to_owned());
        role
    }

    async fn binding(
        &self,
        _: &Tenant,
        namespace: &String,
        _: &Context<Tenant>,
    ) -> Result<RoleBinding, BoxError> {
        let mut binding = RoleBinding::default();
        binding.metadata.name = Some("tenant".into());
        binding.metadata.namespace = Some(namespace.clone());
        Ok(binding)
    }

    fn quota_config(&self, _: &Tenant, target: &Target, _: &Context<Tenant>) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some("quota".into());
        cm.metadata.namespace = Some(target.namespace.clone());
        cm
    }

    fn status(&self, _: &Tenant, done: &Reconciled, status: &mut TenantStatus) {
        status.ready = done.objects::<Role>("role").len() as u32;
    }
}

fn has_data(secret: &Secret) -> bool {
    secret.data.is_some()
}

fn enabled(_: &Tenants, tenant: &Tenant) -> bool {
    tenant.spec.enabled
}

pub fn main() {
    let names: Vec<&str> = kubeforge::rbac::registered()
        .iter()
        .map(|r| r.name)
        .collect();
    assert!(!names.is_empty());
}
