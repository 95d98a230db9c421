//! A cluster-scoped kind using enums and nested marked structs.
use kubeforge::crd::Validate;

#[kubeforge::schema]
#[derive(Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub enum Tier {
    Free,
    Paid { seats: u32 },
}

#[kubeforge::schema(rule(cel = "self.min <= self.max", message = "min <= max"))]
#[derive(Clone, Debug)]
pub struct Range {
    #[validate(minimum = 0)]
    pub min: i64,
    pub max: i64,
}

#[kubeforge::custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Plan", cluster)]
#[derive(Clone, Debug)]
pub struct PlanSpec {
    pub tier: Tier,
    pub ranges: Vec<Range>,
}

pub fn main() {
    let plan = Plan::new(
        "p",
        PlanSpec {
            tier: Tier::Free,
            ranges: vec![Range { min: -1, max: 0 }],
        },
    );
    let report = plan.validate().unwrap_err().to_string();
    assert!(report.contains("spec.ranges[0].min"), "{report}");
}
