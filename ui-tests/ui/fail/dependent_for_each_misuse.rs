use kubeforge::controller::Context;
use kubeforge::k8s_openapi::api::core::v1::{ConfigMap, Secret};

pub struct Fanout;

#[kubeforge::controller(
    for = ConfigMap,
    dependents(
        no_item(for_each = targets),
        takes_item,
        misspelled(for_each = tragets),
        not_listed(for_each = not_a_list),
        many_per_item(for_each = targets),
        by_value(for_each = targets),
    ),
)]
impl Fanout {
    fn targets(&self, _cm: &ConfigMap, _ctx: &Context<ConfigMap>) -> Vec<String> {
        Vec::new()
    }

    fn not_a_list(&self, _cm: &ConfigMap, _ctx: &Context<ConfigMap>) -> String {
        String::new()
    }

    fn no_item(&self, _cm: &ConfigMap, _ctx: &Context<ConfigMap>) -> Secret {
        Secret::default()
    }

    fn takes_item(&self, _cm: &ConfigMap, _ns: &str, _ctx: &Context<ConfigMap>) -> Secret {
        Secret::default()
    }

    fn misspelled(&self, _cm: &ConfigMap, _ns: &str, _ctx: &Context<ConfigMap>) -> Secret {
        Secret::default()
    }

    fn not_listed(&self, _cm: &ConfigMap, _ns: &str, _ctx: &Context<ConfigMap>) -> Secret {
        Secret::default()
    }

    fn many_per_item(&self, _cm: &ConfigMap, _ns: &str, _ctx: &Context<ConfigMap>) -> Vec<Secret> {
        Vec::new()
    }

    fn by_value(&self, _cm: &ConfigMap, _ns: String, _ctx: &Context<ConfigMap>) -> Secret {
        Secret::default()
    }
}

fn main() {}
