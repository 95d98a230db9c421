//! Spawning from generic code through one task type.
//!
//! Each future type handed to `tokio::spawn` compiles tokio's task machinery anew (a few
//! thousand lines of LLVM IR), and a future built in code that is generic over a kind is a type
//! of its own per kind — compiled in the user's crate, at every build of it. Boxed as a
//! `dyn Future` they all share one task type, compiled once, in kubeforge. A box per spawned task
//! is nothing next to the task itself.

use std::future::Future;
use std::pin::Pin;

use tokio::runtime::Handle;
use tokio::task::JoinHandle;

/// A spawned task of kubeforge.
type Task = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// `tokio::spawn`, through the one task type.
pub(crate) fn spawn(task: impl Future<Output = ()> + Send + 'static) -> JoinHandle<()> {
    spawn_task(Box::pin(task))
}

/// [`Handle::spawn`], through the one task type.
pub(crate) fn spawn_on(
    runtime: &Handle,
    task: impl Future<Output = ()> + Send + 'static,
) -> JoinHandle<()> {
    spawn_task_on(runtime, Box::pin(task))
}

fn spawn_task(task: Task) -> JoinHandle<()> {
    tokio::spawn(task)
}

fn spawn_task_on(runtime: &Handle, task: Task) -> JoinHandle<()> {
    runtime.spawn(task)
}
