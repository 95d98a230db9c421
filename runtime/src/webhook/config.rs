//! The `ValidatingWebhookConfiguration` and `MutatingWebhookConfiguration` of the registered
//! kinds: built from the wiring (what `crdgen` prints), and kept applied with the current CA
//! bundle by the running manager (managed configurations).
//!
//! Nothing here removes a configuration or weakens a CRD's conversion: when the operator is
//! stopped or gone, the apiserver fails the requests its webhooks would have answered (a
//! `Fail` webhook refuses, a conversion cannot be done), loudly and naming the operator (its
//! name is the first segment of every webhook path), and never stores what the operator would
//! have refused or converted.
//!
//! What the webhooks are *not* asked about is an update that changes nothing but `metadata`
//! (the [`METADATA_ONLY`] match condition): a finalizer added or removed (the garbage
//! collector's `foregroundDeletion` and `orphan`, another controller's, a user's), labels,
//! annotations, owner references. Neither the defaulter nor the validator has anything to say
//! about those, and asking them made a stopped operator block cascading deletes, the removal of
//! other parties' finalizers and so the deletion of whole namespaces.

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations,
    ServiceReference, ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::Api;
use kube::api::{Patch, PatchParams};

use super::KindWebhooks;

/// Where the apiserver reaches the webhook server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// A Service in the cluster (what a deployed operator uses): namespace, name, port.
    Service {
        /// The Service's namespace.
        namespace: String,
        /// The Service's name.
        name: String,
        /// The Service's port (443 by default).
        port: i32,
    },
    /// A URL base, `https://host:port` (local development: the operator runs outside the
    /// cluster, the apiserver calls it on loopback).
    Url(String),
}

/// What the configurations are built from besides the registered kinds.
#[derive(Clone, Debug)]
pub struct Configurations {
    /// The configurations' name (the operator's name).
    pub name: String,
    /// Where the apiserver calls.
    pub endpoint: Endpoint,
    /// Only objects in namespaces matching this (a namespaced operator: its namespace).
    pub namespace_selector: Option<LabelSelector>,
    /// The PEM CA bundle the apiserver trusts (`None`: injected later by the running manager).
    pub ca_bundle: Option<Vec<u8>>,
}

impl Configurations {
    /// `path` under the operator's name (`/<name>/validate/...`): the URL the apiserver quotes
    /// when it cannot call the webhook names the operator.
    #[must_use]
    pub fn path(&self, path: &str) -> String {
        format!("/{}{path}", self.name)
    }

    pub(crate) fn client_config(&self, path: &str) -> WebhookClientConfig {
        let path = self.path(path);
        let ca_bundle = self.ca_bundle.clone().map(ByteString);
        match &self.endpoint {
            Endpoint::Service {
                namespace,
                name,
                port,
            } => WebhookClientConfig {
                ca_bundle,
                service: Some(ServiceReference {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    path: Some(path),
                    port: Some(*port),
                }),
                url: None,
            },
            Endpoint::Url(base) => WebhookClientConfig {
                ca_bundle,
                service: None,
                url: Some(format!("{}{path}", base.trim_end_matches('/'))),
            },
        }
    }

    fn metadata(&self) -> ObjectMeta {
        ObjectMeta {
            name: Some(self.name.clone()),
            labels: Some(
                [(
                    "app.kubernetes.io/managed-by".to_owned(),
                    "kubeforge".to_owned(),
                )]
                .into(),
            ),
            ..ObjectMeta::default()
        }
    }

    /// The validating configuration (`None` when no kind validates): per kind version, one
    /// webhook for its `Validator` (the operations of its settings, `CREATE` and `UPDATE` by
    /// default) and one for its `DeleteValidator` (`DELETE`), each only when implemented; per
    /// kind of `conversions`, the check of the annotations its conversions keep fields in
    /// ([`Configurations::kept_annotations`]).
    #[must_use]
    pub fn validating(
        &self,
        kinds: &[KindWebhooks],
        conversions: &[super::KindConversions],
    ) -> Option<ValidatingWebhookConfiguration> {
        let webhook =
            |k: &KindWebhooks, what: &str, path: String, operations: &[&str]| ValidatingWebhook {
                admission_review_versions: vec!["v1".to_owned()],
                client_config: self.client_config(&path),
                failure_policy: Some(k.settings.failure_policy.to_owned()),
                match_policy: Some(k.settings.match_policy.to_owned()),
                name: k.webhook_name(what),
                namespace_selector: self.namespace_selector_of(k),
                object_selector: k.settings.object_selector.map(|s| s.label_selector()),
                match_conditions: spec_changes(k, operations),
                rules: Some(vec![k.rule(operations)]),
                side_effects: k.settings.side_effects.to_owned(),
                timeout_seconds: Some(i32::from(k.settings.timeout_seconds)),
            };
        let mut webhooks = Vec::new();
        for k in kinds {
            if k.hooks.validate.is_some() {
                webhooks.push(webhook(
                    k,
                    "validate",
                    k.validate_path(),
                    k.settings.operations,
                ));
            }
            if k.hooks.validate_delete.is_some() {
                webhooks.push(webhook(
                    k,
                    "validate-delete",
                    k.validate_delete_path(),
                    &["DELETE"],
                ));
            }
        }
        webhooks.extend(conversions.iter().map(|c| self.kept_annotations(c)));
        (!webhooks.is_empty()).then(|| ValidatingWebhookConfiguration {
            metadata: self.metadata(),
            webhooks: Some(webhooks),
        })
    }

    /// The webhook that checks the annotations `conversions`' kind keeps another version's
    /// fields in (`conversion.kubeforge.dev/<version>`) when one is written ([`KEPT_CHANGED`]):
    /// every version of the kind (`Exact`: a conversion before the call would drop the
    /// annotation it is to check), `Fail` (the kind's reads need the operator anyway).
    #[must_use]
    pub fn kept_annotations(&self, conversions: &super::KindConversions) -> ValidatingWebhook {
        let hub = conversions.hub;
        ValidatingWebhook {
            admission_review_versions: vec!["v1".to_owned()],
            client_config: self.client_config(&conversions.kept_path()),
            failure_policy: Some("Fail".to_owned()),
            match_policy: Some("Exact".to_owned()),
            name: format!("kept-annotations.{}.{}", hub.plural, hub.group),
            namespace_selector: self.namespace_selector.clone(),
            object_selector: None,
            match_conditions: Some(vec![MatchCondition {
                name: KEPT_CHANGED_NAME.to_owned(),
                expression: KEPT_CHANGED.to_owned(),
            }]),
            rules: Some(vec![RuleWithOperations {
                api_groups: Some(vec![hub.group.to_owned()]),
                api_versions: Some(
                    conversions
                        .versions()
                        .into_iter()
                        .map(str::to_owned)
                        .collect(),
                ),
                operations: Some(vec!["CREATE".to_owned(), "UPDATE".to_owned()]),
                resources: Some(vec![hub.plural.to_owned()]),
                scope: Some(
                    if hub.namespaced {
                        "Namespaced"
                    } else {
                        "Cluster"
                    }
                    .to_owned(),
                ),
            }]),
            side_effects: "None".to_owned(),
            timeout_seconds: Some(10),
        }
    }

    /// The mutating configuration (`None` when no kind defaults).
    #[must_use]
    pub fn mutating(&self, kinds: &[KindWebhooks]) -> Option<MutatingWebhookConfiguration> {
        let webhooks: Vec<MutatingWebhook> = kinds
            .iter()
            .filter(|k| k.hooks.default.is_some())
            .map(|k| MutatingWebhook {
                admission_review_versions: vec!["v1".to_owned()],
                client_config: self.client_config(&k.mutate_path()),
                failure_policy: Some(k.settings.failure_policy.to_owned()),
                match_policy: Some(k.settings.match_policy.to_owned()),
                name: k.webhook_name("default"),
                namespace_selector: self.namespace_selector_of(k),
                object_selector: k.settings.object_selector.map(|s| s.label_selector()),
                match_conditions: spec_changes(k, k.settings.operations),
                reinvocation_policy: Some(k.settings.reinvocation_policy.to_owned()),
                rules: Some(vec![k.rule(k.settings.operations)]),
                side_effects: k.settings.side_effects.to_owned(),
                timeout_seconds: Some(i32::from(k.settings.timeout_seconds)),
            })
            .collect();
        (!webhooks.is_empty()).then(|| MutatingWebhookConfiguration {
            metadata: self.metadata(),
            webhooks: Some(webhooks),
        })
    }

    /// The operator's namespace selector and the kind's, both.
    fn namespace_selector_of(&self, kind: &KindWebhooks) -> Option<LabelSelector> {
        super::both(
            self.namespace_selector.clone(),
            kind.settings.namespace_selector.map(|s| s.label_selector()),
        )
    }

    /// Applies both configurations (server-side apply, field manager `kubeforge-webhooks`):
    /// every replica applies the same content, so they agree whoever applies last.
    ///
    /// # Errors
    ///
    /// The apiserver refused or could not be reached.
    pub async fn apply(
        &self,
        client: &kube::Client,
        kinds: &[KindWebhooks],
        conversions: &[super::KindConversions],
    ) -> kube::Result<()> {
        let params = PatchParams::apply("kubeforge-webhooks").force();
        if let Some(config) = self.validating(kinds, conversions) {
            let api = Api::<ValidatingWebhookConfiguration>::all(client.clone());
            api.patch(&self.name, &params, &Patch::Apply(typed(config)))
                .await?;
        }
        if let Some(config) = self.mutating(kinds) {
            let api = Api::<MutatingWebhookConfiguration>::all(client.clone());
            api.patch(&self.name, &params, &Patch::Apply(typed(config)))
                .await?;
        }
        Ok(())
    }
}

impl Configurations {
    /// The `spec.conversion` of the CRD of `conversions`' kind: a webhook at its path.
    #[must_use]
    pub fn crd_conversion(
        &self,
        conversions: &super::KindConversions,
    ) -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceConversion
    {
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;
        // The admission and the apiextensions types of a client config are the same object.
        let config = self.client_config(&conversions.path());
        crate::crd::conversion::webhook_conversion(ext::WebhookClientConfig {
            ca_bundle: config.ca_bundle,
            service: config.service.map(|s| ext::ServiceReference {
                name: s.name,
                namespace: s.namespace,
                path: s.path,
                port: s.port,
            }),
            url: config.url,
        })
    }

    /// Points the CRD of each of `conversions` at its conversion webhook, unless it already
    /// converts there: a merge patch of `spec.conversion` (whoever applies the CRD keeps the
    /// rest) written so that applying the CRD's manifest again replaces it
    /// (`crate::crd::repoint`). Never anything weaker: there is no call that turns a conversion
    /// off.
    ///
    /// # Errors
    ///
    /// The apiserver refused or could not be reached.
    pub async fn apply_conversions(
        &self,
        client: &kube::Client,
        conversions: &[super::KindConversions],
    ) -> kube::Result<()> {
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
        let api = Api::<CustomResourceDefinition>::all(client.clone());
        for kind in conversions {
            crate::crd::repoint::repoint(&api, &kind.crd_name(), &self.crd_conversion(kind))
                .await?;
        }
        Ok(())
    }
}

/// The expression of the match condition [`METADATA_NAME`]: true for every request but an
/// `UPDATE` whose object differs from the old one only in `metadata` (a top-level field other
/// than `metadata` added, removed or changed makes it true; `status` too, which a kind without
/// the status subresource writes through the main resource).
pub const METADATA_ONLY: &str = "request.operation != 'UPDATE' \
|| object.exists(k, k != 'metadata' && (!(k in oldObject) || object[k] != oldObject[k])) \
|| oldObject.exists(k, k != 'metadata' && !(k in object))";

/// The expression of the match condition of a kind's kept-annotations webhook
/// ([`Configurations::kept_annotations`]): a create, or an update, whose object has an
/// annotation `conversion.kubeforge.dev/*` that the old object does not have with that value.
pub const KEPT_CHANGED: &str = "has(object.metadata.annotations) && \
object.metadata.annotations.exists(k, k.startsWith('conversion.kubeforge.dev/') && \
(request.operation != 'UPDATE' || !has(oldObject.metadata.annotations) || \
!(k in oldObject.metadata.annotations) || \
oldObject.metadata.annotations[k] != object.metadata.annotations[k]))";

/// The name of that match condition.
pub const KEPT_CHANGED_NAME: &str = "kept-annotation-changed";

/// The name of the match condition every admission webhook of a `CREATE`/`UPDATE` rule carries.
pub const METADATA_NAME: &str = "not-metadata-only-update";

/// The match conditions of a webhook of `kind` for `operations`: none when it is not called on
/// `UPDATE` (a delete validator sees every delete) or the kind's hooks judge metadata too
/// (`metadata_updates = "Send"`), else [`METADATA_ONLY`].
fn spec_changes(kind: &KindWebhooks, operations: &[&str]) -> Option<Vec<MatchCondition>> {
    let skip = operations.contains(&"UPDATE") && !kind.settings.metadata_updates;
    skip.then(|| {
        vec![MatchCondition {
            name: METADATA_NAME.to_owned(),
            expression: METADATA_ONLY.to_owned(),
        }]
    })
}

/// `obj` with its `apiVersion` and `kind` (server-side apply needs them).
fn typed<K: kube::Resource<DynamicType = ()> + serde::Serialize>(obj: K) -> serde_json::Value {
    let mut value = serde_json::to_value(&obj).unwrap_or_default();
    if let Some(map) = value.as_object_mut() {
        map.insert("apiVersion".to_owned(), K::api_version(&()).into());
        map.insert("kind".to_owned(), K::kind(&()).into());
    }
    value
}

impl KindWebhooks {
    /// The rule of the kind's webhooks for `operations`: every version the kind converts to
    /// the hook's in process ([`super::HookVersion`]), so the apiserver converts nothing before
    /// the schema has checked the object; the hook's version alone when it does not convert.
    fn rule(&self, operations: &[&str]) -> RuleWithOperations {
        let versions = match super::HookVersion::of(self.group, self.kind, self.version) {
            Some(version) => version.conversions.versions(),
            None => vec![self.version],
        };
        RuleWithOperations {
            api_groups: Some(vec![self.group.to_owned()]),
            api_versions: Some(versions.into_iter().map(str::to_owned).collect()),
            operations: Some(operations.iter().map(|&o| o.to_owned()).collect()),
            resources: Some(vec![self.plural.to_owned()]),
            scope: Some(
                if self.namespaced {
                    "Namespaced"
                } else {
                    "Cluster"
                }
                .to_owned(),
            ),
        }
    }

    /// `validate-v1.webapps.demo.example.com` (`validate-delete-v1..`, `default-v1..`): the
    /// name the apiserver quotes in denials.
    pub(crate) fn webhook_name(&self, what: &str) -> String {
        format!("{what}-{}.{}.{}", self.version, self.plural, self.group)
    }
}
