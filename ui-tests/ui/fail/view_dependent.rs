use kubeforge::controller::Context;
use kubeforge::crd::Conditions;
use kubeforge::k8s_openapi::api::core::v1::Pod;
use kubeforge::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

#[kubeforge::custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Runner", namespaced, status = RunnerStatus)]
#[derive(Clone, Debug)]
pub struct RunnerSpec {
    pub image: String,
}

#[kubeforge::schema]
#[derive(Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RunnerStatus {
    #[serde(default)]
    pub conditions: Conditions,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

#[kubeforge::view(of = Pod)]
pub struct PodView {
    pub metadata: ObjectMeta,
}

pub struct Runs;

/// A dependent builds a child kubeforge applies: never a read-only view.
#[kubeforge::controller(for = Runner, dependents(pod))]
impl Runs {
    fn pod(&self, _runner: &Runner, _ctx: &Context<Runner>) -> PodView {
        PodView::default()
    }
}

fn main() {}
