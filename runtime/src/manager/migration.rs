//! The manager's storage-version migration: a leader-elected runnable that, for each CRD of the
//! manager's kinds with several versions in this binary, migrates the stored objects to the
//! storage version when `status.storedVersions` lists another one (`crd::migrate`: rate-limited,
//! resumable, safe beside other writers), then prunes `storedVersions`. Failures (the conversion
//! webhook not answering yet, say) are retried with a backoff of 1 s doubling to 30 s.
//!
//! Observable: `kubeforge_storage_migration_objects_total{crd}` (objects written back),
//! `kubeforge_storage_migration_pending{crd}` (1 while a migration is needed and not done), an
//! event on the CRD (`StorageMigrated`, or `StorageMigrationFailed` once per streak of failures)
//! and a log line for each.

use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Api, Client};
use prometheus::proto::MetricFamily;
use prometheus::{IntCounterVec, IntGaugeVec, Registry};
use tokio_util::sync::CancellationToken;

use crate::BoxError;
use crate::crd::{MigrateOptions, Migration, migrate};
use crate::events::{EventType, Recorder};
use crate::runner::Runnable;

/// Migrates the stored objects of `crds` (CRD names) once per run of the leader.
#[derive(Clone)]
pub(crate) struct StorageMigration {
    client: Client,
    crds: Vec<String>,
    options: MigrateOptions,
    recorder: std::sync::Arc<Recorder>,
    registry: Registry,
    objects: IntCounterVec,
    pending: IntGaugeVec,
}

impl StorageMigration {
    pub(crate) fn new(client: Client, crds: Vec<String>, options: MigrateOptions) -> Self {
        let registry = Registry::new();
        let objects = crate::metrics::counter(
            &registry,
            "kubeforge_storage_migration_objects_total",
            "Objects written back in their CRD's storage version by the storage migration",
            &["crd"],
        );
        let pending = crate::metrics::gauge(
            &registry,
            "kubeforge_storage_migration_pending",
            "1 while the CRD's storedVersions lists another version than its storage version",
            &["crd"],
        );
        let recorder = std::sync::Arc::new(Recorder::new(client.clone(), "storage-migration"));
        Self {
            client,
            crds,
            options,
            recorder,
            registry,
            objects,
            pending,
        }
    }

    /// Migrates one CRD, retrying until it succeeds or `shutdown`.
    async fn migrate_one(&self, crd: &str, shutdown: &CancellationToken) {
        let mut delay = Duration::from_secs(1);
        let mut failing = false;
        let counted = self.objects.with_label_values(&[crd]);
        let pending = self.pending.with_label_values(&[crd]);
        loop {
            let mut last = 0;
            let run = migrate(&self.client, crd, &self.options, |total| {
                // `total` includes what a resumed run had done: count only this run's writes.
                if total > last {
                    counted.inc_by((total - last) as u64);
                    last = total;
                }
                pending.set(1);
            });
            let result = tokio::select! {
                () = shutdown.cancelled() => return,
                result = run => result,
            };
            match result {
                Ok(done) => {
                    pending.set(0);
                    if done.was_needed() {
                        self.report_done(crd, &done).await;
                    }
                    return;
                }
                // Without the rights (a namespaced Role, say) retrying cannot help: say what is
                // missing once and leave the migration to someone who has them.
                Err(kube::Error::Api(status)) if status.code == 403 => {
                    tracing::warn!(
                        crd,
                        error = %crate::client::readable(&kube::Error::Api(status)),
                        "no storage migration: the operator may not read or write the CRD or its \
                         objects (crdgen --rbac grants it; or Manager::storage_migration(None) \
                         and run crd::migrate_storage with other credentials)"
                    );
                    return;
                }
                Err(error) => {
                    pending.set(1);
                    let text = crate::text::concise(&error);
                    tracing::warn!(crd, error = %text, retry_in = ?delay, "storage migration failed");
                    if !failing {
                        failing = true;
                        self.event(crd, EventType::Warning, "StorageMigrationFailed", text)
                            .await;
                    }
                }
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(delay) => {}
            }
            delay = (delay * 2).min(Duration::from_secs(30));
        }
    }

    async fn report_done(&self, crd: &str, done: &Migration) {
        let note = if done.pruned {
            format!(
                "rewrote {} objects in {}; storedVersions was {:?}, now [{}]",
                done.rewritten, done.storage_version, done.stored_before, done.storage_version
            )
        } else {
            format!(
                "rewrote {} objects of {} in {}; storedVersions left as it was ({:?}): objects \
                 of other namespaces may still be stored in an older version",
                done.rewritten, self.options.namespaces, done.storage_version, done.stored_before
            )
        };
        tracing::info!(crd, %note, "storage migration done");
        self.event(crd, EventType::Normal, "StorageMigrated", note)
            .await;
    }

    /// An event about the CRD (best effort: logged when it fails).
    async fn event(&self, crd: &str, type_: EventType, reason: &str, note: String) {
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let Ok(object) = crds.get(crd).await else {
            return;
        };
        if let Err(error) = self
            .recorder
            .publish(&object, type_, reason, "Migrate", Some(note))
            .await
        {
            tracing::debug!(crd, error = %crate::text::concise(&error), "publishing the migration's event failed");
        }
    }
}

impl Runnable for StorageMigration {
    fn run(&self, shutdown: CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> {
        let this = self.clone();
        async move {
            for crd in &this.crds {
                this.migrate_one(crd, &shutdown).await;
            }
            // Done: a runnable that returns would stop the tree; wait for the shutdown.
            shutdown.cancelled().await;
            Ok(())
        }
        .boxed()
    }

    fn metrics(&self) -> Vec<MetricFamily> {
        self.registry.gather()
    }
}

/// The migration's metric families, each with one series (for the metrics reference).
#[cfg(test)]
pub(crate) fn reference(client: Client) -> Vec<MetricFamily> {
    let migration = StorageMigration::new(client, Vec::new(), MigrateOptions::default());
    migration.objects.with_label_values(&["_"]).inc();
    migration.pending.with_label_values(&["_"]).set(0);
    migration.metrics()
}
