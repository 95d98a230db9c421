use kubeforge::controller::Context;
use kubeforge::crd::Conditions;

#[kubeforge::custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Store", namespaced, status = StoreStatus)]
#[derive(Clone, Debug)]
pub struct StoreSpec {
    pub size: i32,
}

#[kubeforge::schema]
#[derive(Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StoreStatus {
    #[serde(default)]
    pub conditions: Conditions,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

pub struct Db;

#[kubeforge::controller(for = Store, dependents(copies))]
impl Db {
    fn copies(&self, _store: &Store, _ctx: &Context<Store>) -> Vec<String> {
        Vec::new()
    }
}

fn main() {}
