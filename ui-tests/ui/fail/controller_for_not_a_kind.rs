use std::sync::Arc;

use kubeforge::controller::{Action, Context};

#[derive(Debug)]
pub struct Error;
impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("error")
    }
}
impl std::error::Error for Error {}

pub struct Copier;

pub struct NotAKind;

#[kubeforge::controller(for = NotAKind)]
impl Copier {
    async fn reconcile(&self, _obj: Arc<NotAKind>, _ctx: &Context<NotAKind>) -> Result<Action, Error> {
        Ok(Action::Done)
    }
}

fn main() {}