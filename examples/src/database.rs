//! The `Database` operator, written with dependents: each Database gets a generated password
//! (a Secret made once, never overwritten), a headless Service, a StatefulSet that waits for
//! both, and a backup CronJob while `backup` is set. The framework applies them in that order,
//! keeps `Ready` / `Progressing` / `Degraded` and `observedGeneration` in the status, publishes
//! the events and derives the RBAC; the `status` method adds the phase and ready replicas.
//! ConfigMaps labelled `db.kubeforge.dev/database=<name>` are mounted into the pods, and a change
//! to one rolls them (the StatefulSet's template carries a digest of their data). The finalizer
//! deletes the instances' volumes, which the StatefulSet leaves behind.

// ANCHOR: database
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use kubeforge::crd::Conditions;
use kubeforge::dependents::{Readiness, Reconciled, State};
use kubeforge::k8s_openapi::api::apps::v1::StatefulSet;
use kubeforge::k8s_openapi::api::batch::v1::CronJob;
use kubeforge::k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Secret, Service};
use kubeforge::kube::api::{DeleteParams, ListParams};
use kubeforge::prelude::*;
use kubeforge::serde_json::{from_value, json};

/// A PostgreSQL database.
#[kubeforge::custom_resource(
    group = "apps.kubeforge.dev",
    version = "v1",
    kind = "Database",
    namespaced,
    status = DatabaseStatus,
    shortname = "db",
    printcolumn(name = "Version", json_path = ".spec.version", type = "string"),
    printcolumn(name = "Replicas", json_path = ".spec.replicas", type = "integer"),
    printcolumn(name = "Phase", json_path = ".status.phase", type = "string"),
    printcolumn(name = "Age", json_path = ".metadata.creationTimestamp", type = "date"),
    // The backup CronJob, `<name>-backup`, may have at most 52 characters.
    admission_rule(cel = "object.metadata.name.size() <= 45",
        message = "a Database's name has at most 45 characters")
)]
#[derive(Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DatabaseSpec {
    /// PostgreSQL major version.
    #[validate(enum = ["15", "16", "17"])]
    pub version: String,
    /// Number of instances.
    #[serde(default = "one")]
    #[validate(minimum = 1, maximum = 5)]
    pub replicas: i32,
    /// Storage per instance, e.g. `10Gi`.
    #[validate(pattern = r"^[0-9]+(Mi|Gi|Ti)$")]
    pub storage: String,
    /// Backups on this cron schedule, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<String>,
}

fn one() -> i32 {
    1
}

/// What the operator observed.
#[kubeforge::schema]
#[derive(Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DatabaseStatus {
    /// `Provisioning`, `Running` or `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Instances ready.
    #[serde(default)]
    pub ready_replicas: i32,
    /// The generation last acted upon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `Progressing`, `Degraded`.
    #[serde(default)]
    pub conditions: Conditions,
}

/// The label that ties ConfigMaps and pods to their Database.
pub const LABEL: &str = "db.kubeforge.dev/database";

/// The Database controller.
pub struct DatabaseController;

#[kubeforge::controller(
    for = Database,
    dependents(
        password(create_only),
        service(ready),
        statefulset(depends_on(password, service), ready),
        backup(when = has_backup),
    ),
    watches(ConfigMap, map = config_owner, labels = "db.kubeforge.dev/database"),
    finalizer = "apps.kubeforge.dev/volumes",
    rbac(group = "", resources = ["persistentvolumeclaims"], verbs = ["list", "delete"]),
)]
impl DatabaseController {
    fn password(&self, db: &Database, _: &Context<Database>) -> Result<Secret, BoxError> {
        // 24 characters from the system's CSPRNG, 6 bits each (64 symbols: no modulo bias).
        let mut bytes = [0u8; 24];
        std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom")?, &mut bytes)?;
        const SYMBOLS: &[u8; 64] =
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let password: String = bytes
            .iter()
            .map(|b| SYMBOLS[usize::from(b & 63)] as char)
            .collect();
        let mut secret = Secret::default();
        secret.metadata.name = Some(format!("{}-password", db.name_any()));
        secret.string_data = Some([("password".to_owned(), password)].into());
        Ok(secret)
    }

    fn service(&self, db: &Database, _: &Context<Database>) -> Result<Service, BoxError> {
        Ok(from_value(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": { "name": db.name_any() },
            "spec": { "clusterIP": "None", "selector": { LABEL: db.name_any() },
                      "ports": [{ "name": "postgres", "port": 5432 }] },
        }))?)
    }

    async fn statefulset(
        &self,
        db: &Database,
        ctx: &Context<Database>,
    ) -> Result<StatefulSet, BoxError> {
        let name = db.name_any();
        let lookup = Lookup::scope(db.namespace().as_deref()).labels(LABEL);
        let mut configs = ctx.cache().store::<ConfigMap>(&lookup)?.list().await?;
        configs.retain(|c| c.labels().get(LABEL) == Some(&name));
        configs.sort_by_key(|c| c.name_any());
        let mut digest = std::collections::hash_map::DefaultHasher::new();
        configs
            .iter()
            .for_each(|c| (c.name_any(), &c.data).hash(&mut digest));
        let volumes: Vec<_> = configs
            .iter()
            .map(|c| json!({ "configMap": { "name": c.name_any() } }))
            .collect();
        Ok(from_value(json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": { "name": name },
            "spec": {
                "serviceName": name, "replicas": db.spec.replicas,
                "selector": { "matchLabels": { LABEL: name } },
                "template": {
                    "metadata": { "labels": { LABEL: name },
                                  "annotations": { "db.kubeforge.dev/config": format!("{:x}", digest.finish()) } },
                    "spec": {
                        "containers": [{
                            "name": "postgres", "image": format!("postgres:{}", db.spec.version),
                            "env": [{ "name": "POSTGRES_PASSWORD", "valueFrom": { "secretKeyRef":
                                { "name": format!("{name}-password"), "key": "password" } } }],
                            "volumeMounts": [{ "name": "data", "mountPath": "/var/lib/postgresql/data" },
                                             { "name": "config", "mountPath": "/etc/postgresql/conf.d" }],
                        }],
                        "volumes": [{ "name": "config", "projected": { "sources": volumes } }],
                    },
                },
                "volumeClaimTemplates": [{
                    "metadata": { "name": "data" },
                    "spec": { "accessModes": ["ReadWriteOnce"],
                              "resources": { "requests": { "storage": db.spec.storage } } },
                }],
            },
        }))?)
    }

    fn backup(&self, db: &Database, _: &Context<Database>) -> Result<CronJob, BoxError> {
        let name = db.name_any();
        Ok(from_value(json!({
            "apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": { "name": format!("{name}-backup") },
            "spec": { "schedule": db.spec.backup, "jobTemplate": { "spec": { "template": { "spec": {
                "restartPolicy": "OnFailure",
                "containers": [{ "name": "backup", "image": format!("postgres:{}", db.spec.version),
                                 "args": ["pg_dumpall", "-h", name] }],
            }}}}},
        }))?)
    }

    fn has_backup(&self, db: &Database) -> bool {
        db.spec.backup.is_some()
    }

    fn status(&self, _: &Database, done: &Reconciled, status: &mut DatabaseStatus) {
        let sts = done.get::<StatefulSet>("statefulset");
        status.ready_replicas = sts
            .as_ref()
            .and_then(|s| s.status.as_ref()?.ready_replicas)
            .unwrap_or(0);
        let phase = match sts {
            _ if done
                .outcomes
                .iter()
                .any(|o| matches!(o.state, State::Failed(_))) =>
            {
                "Failed"
            }
            Some(sts) if sts.is_ready() => "Running",
            _ => "Provisioning",
        };
        status.phase = Some(phase.to_owned());
    }

    async fn cleanup(
        &self,
        db: Arc<Database>,
        ctx: &Context<Database>,
    ) -> Result<Action, BoxError> {
        // At-least-once (a failover can run it again on the next leader): a claim deleted
        // meanwhile is not an error.
        let claims = ctx.api::<PersistentVolumeClaim>();
        let selector = ListParams::default().labels(&format!("{LABEL}={}", db.name_any()));
        for claim in claims.list(&selector).await? {
            match claims
                .delete(&claim.name_any(), &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(kubeforge::kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Action::Done)
    }
}

/// The Database a labelled ConfigMap belongs to.
fn config_owner(cm: &ConfigMap, _: &Cache) -> Vec<ObjectKey> {
    let labels: &BTreeMap<String, String> = cm.labels();
    let namespace = cm.namespace().unwrap_or_default();
    labels
        .get(LABEL)
        .map(|db| ObjectKey::namespaced(namespace, db))
        .into_iter()
        .collect()
}
// ANCHOR_END: database
