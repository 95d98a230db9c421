//! `crate = "..."`: generated code reaches kubeforge through another path.
use ::kubeforge as kf;

#[kf::custom_resource(
    group = "ui.kubeforge.dev",
    version = "v1",
    kind = "Renamed",
    namespaced,
    crate = "kf"
)]
#[derive(Clone, Debug)]
pub struct RenamedSpec {
    #[validate(minimum = 1)]
    pub size: i32,
}

#[kf::schema(crate = "kf")]
#[derive(Clone, Debug)]
pub struct Part {
    #[validate(max_length = 3)]
    pub name: String,
}

pub fn main() {
    use kf::crd::Validate;
    assert!(
        Renamed::new("r", RenamedSpec { size: 0 })
            .validate()
            .is_err()
    );
    assert!(
        Part {
            name: "four".into()
        }
        .validate()
        .is_err()
    );
    assert_eq!(controller::name(), "configmap");
}

mod controller {
    use std::sync::Arc;

    use super::kf;
    use kf::controller::{Action, Context};
    use kf::k8s_openapi::api::core::v1::{ConfigMap, Secret};

    #[derive(Debug)]
    pub struct Error;
    impl std::fmt::Display for Error {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("error")
        }
    }
    impl std::error::Error for Error {}

    pub struct Copier;

    #[kf::controller(for = ConfigMap, owns(Secret, super::Renamed(metadata)), crate = "kf")]
    impl Copier {
        async fn reconcile(
            &self,
            _cm: Arc<ConfigMap>,
            _ctx: &Context<ConfigMap>,
        ) -> Result<Action, Error> {
            Ok(Action::Done)
        }
    }

    pub fn name() -> &'static str {
        <Copier as kf::controller::ControllerSpec>::NAME
    }
}
