//! Markers on struct-variant fields: in the schema, and checked by validate() at the path serde
//! gives them for each tagging.
use kubeforge::crd::Validate;

#[kubeforge::schema]
#[derive(Clone, Debug)]
#[serde(rename_all = "camelCase")]
pub enum External {
    GitRepo {
        #[validate(pattern = "^https://")]
        url: String,
    },
}

#[kubeforge::schema]
#[derive(Clone, Debug)]
#[serde(tag = "type")]
pub enum Internal {
    Sleep {
        #[validate(minimum = 1)]
        seconds: i32,
    },
}

#[kubeforge::schema]
#[derive(Clone, Debug)]
#[serde(tag = "kind", content = "spec", rename_all_fields = "camelCase")]
pub enum Adjacent {
    Retry {
        #[validate(max_items = 1)]
        back_off: Vec<i32>,
    },
}

#[kubeforge::schema]
#[derive(Clone, Debug)]
#[serde(untagged)]
pub enum Untagged {
    Named {
        #[validate(min_length = 2)]
        name: String,
    },
}

#[kubeforge::custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Task", namespaced)]
#[derive(Clone, Debug)]
pub struct TaskSpec {
    pub external: External,
    pub internal: Internal,
    pub adjacent: Adjacent,
    pub untagged: Untagged,
}

pub fn main() {
    let task = Task::new(
        "t",
        TaskSpec {
            external: External::GitRepo {
                url: "ftp://x".into(),
            },
            internal: Internal::Sleep { seconds: 0 },
            adjacent: Adjacent::Retry {
                back_off: vec![1, 2],
            },
            untagged: Untagged::Named { name: "x".into() },
        },
    );
    let report = task.validate().unwrap_err().to_string();
    for expected in [
        "spec.external.gitRepo.url: should match '^https://'",
        "spec.internal.seconds: should be greater than or equal to 1",
        "spec.adjacent.spec.backOff: must have at most 1 item",
        "spec.untagged.name: should be at least 2 chars long",
    ] {
        assert!(report.contains(expected), "{expected} not in {report}");
    }
    let schema = <Task as kubeforge::crd::CustomResource>::schema();
    let spec = &schema["properties"]["spec"]["properties"];
    assert_eq!(
        spec["external"]["properties"]["gitRepo"]["properties"]["url"]["pattern"],
        "^https://"
    );
    assert_eq!(spec["internal"]["properties"]["seconds"]["minimum"], 1.0);
    assert_eq!(spec["untagged"]["properties"]["name"]["minLength"], 2);
}
