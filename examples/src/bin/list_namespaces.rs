//! Connects to the cluster of the current kubeconfig (or the in-cluster configuration) and lists
//! its namespaces with their phase: the smallest proof that the local control plane answers.

use kubeforge::k8s_openapi::api::core::v1::Namespace;
use kubeforge::kube::api::ListParams;
use kubeforge::prelude::*;

#[kubeforge::tokio::main(crate = "kubeforge::tokio")]
async fn main() -> anyhow::Result<()> {
    let client = Client::try_default().await?;
    let version = client.apiserver_version().await?;
    println!("connected to Kubernetes {}", version.git_version);
    for ns in Api::<Namespace>::all(client)
        .list(&ListParams::default())
        .await?
    {
        let name = ns.metadata.name.unwrap_or_default();
        let phase = ns.status.and_then(|s| s.phase).unwrap_or_default();
        println!("namespace {name:<24} {phase}");
    }
    Ok(())
}
