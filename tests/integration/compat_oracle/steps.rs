//! The oracle's steps on the plane: apply a CRD and wait until it is served, store objects under
//! the old CRD, then the round trips, creates and updates under the new one, each problem noted.

use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use super::cases::Case;
use super::{LABEL, WAIT};

/// `crd` with `@G` replaced by `group`.
pub(super) fn instantiate(crd: &Value, group: &str) -> Value {
    serde_json::from_str(&crd.to_string().replace("@G", group)).unwrap()
}

/// `crd` with a printer column named after `generation` in every version: a version serves the
/// CRD of that generation once a Table of it shows the column.
pub(super) fn probed(crd: &Value, generation: u32) -> Value {
    let mut crd = crd.clone();
    for version in crd["spec"]["versions"].as_array_mut().unwrap() {
        let column = json!({"name": format!("oracle-{generation}"), "type": "string",
                            "jsonPath": ".metadata.name"});
        match version["additionalPrinterColumns"].as_array_mut() {
            Some(columns) => columns.push(column),
            None => version["additionalPrinterColumns"] = json!([column]),
        }
    }
    crd
}

/// The parts of a CRD the oracle uses.
#[derive(Clone)]
pub(super) struct Shape {
    pub(super) name: String,
    pub(super) group: String,
    pub(super) plural: String,
    pub(super) kind: String,
    pub(super) list_kind: String,
    pub(super) namespaced: bool,
    /// (name, served, storage, status subresource, scale subresource).
    pub(super) versions: Vec<(String, bool, bool, bool, bool)>,
}

impl Shape {
    pub(super) fn of(crd: &Value) -> Self {
        let spec = &crd["spec"];
        let kind = spec["names"]["kind"].as_str().unwrap().to_owned();
        Shape {
            name: crd["metadata"]["name"].as_str().unwrap().to_owned(),
            group: spec["group"].as_str().unwrap().to_owned(),
            plural: spec["names"]["plural"].as_str().unwrap().to_owned(),
            list_kind: spec["names"]["listKind"]
                .as_str()
                .map_or_else(|| format!("{kind}List"), str::to_owned),
            kind,
            namespaced: spec["scope"] == "Namespaced",
            versions: (spec["versions"].as_array().unwrap().iter())
                .map(|v| {
                    (
                        v["name"].as_str().unwrap().to_owned(),
                        v["served"] == true,
                        v["storage"] == true,
                        v["subresources"].get("status").is_some(),
                        v["subresources"].get("scale").is_some(),
                    )
                })
                .collect(),
        }
    }

    pub(super) fn served(&self) -> Vec<String> {
        (self.versions.iter())
            .filter(|v| v.1)
            .map(|v| v.0.clone())
            .collect()
    }

    pub(super) fn version(&self, name: &str) -> Option<&(String, bool, bool, bool, bool)> {
        self.versions.iter().find(|v| v.0 == name)
    }

    pub(super) fn storage(&self) -> String {
        (self.versions.iter().find(|v| v.2))
            .map(|v| v.0.clone())
            .unwrap_or_default()
    }

    pub(super) fn api(&self, client: &Client, ns: &str, version: &str) -> Api<DynamicObject> {
        let resource = ApiResource {
            group: self.group.clone(),
            version: version.to_owned(),
            api_version: format!("{}/{version}", self.group),
            kind: self.kind.clone(),
            plural: self.plural.clone(),
        };
        if self.namespaced {
            Api::namespaced_with(client.clone(), ns, &resource)
        } else {
            Api::all_with(client.clone(), &resource)
        }
    }

    pub(super) fn path(&self, ns: &str, version: &str) -> String {
        if self.namespaced {
            format!(
                "/apis/{}/{version}/namespaces/{ns}/{}",
                self.group, self.plural
            )
        } else {
            format!("/apis/{}/{version}/{}", self.group, self.plural)
        }
    }
}

/// A short form of an API error: `422 Invalid` (with the message of a server error).
pub(super) fn said(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) if status.code >= 500 => {
            format!("{} {}", status.code, status.message)
        }
        // A 404 of a path that serves nothing (a removed CRD) has no Status body, or has one,
        // depending on how far the apiserver's handlers have caught up: both are NotFound.
        kube::Error::Api(status) if status.code == 404 => "404 NotFound".to_owned(),
        kube::Error::Api(status) => format!("{} {}", status.code, status.reason),
        other => other.to_string(),
    }
}

/// The object's data: everything but `metadata` and `apiVersion`.
pub(super) fn data(object: &DynamicObject) -> Value {
    let mut value = serde_json::to_value(object).unwrap();
    let map = value.as_object_mut().unwrap();
    map.remove("metadata");
    map.remove("apiVersion");
    value
}

/// Where `actual` does not hold `expected`: a missing or different value (a `null` expected may
/// be absent); values only `actual` has are fine (defaults).
pub(super) fn lost(expected: &Value, actual: Option<&Value>, path: &str) -> Option<String> {
    match (expected, actual) {
        (Value::Null, None | Some(Value::Null)) => None,
        (_, None) => Some(format!("{path} lost")),
        (Value::Object(want), Some(Value::Object(have))) => want
            .iter()
            .find_map(|(k, v)| lost(v, have.get(k), &format!("{path}.{k}"))),
        (Value::Array(want), Some(Value::Array(have))) if want.len() == have.len() => want
            .iter()
            .zip(have)
            .enumerate()
            .find_map(|(i, (w, h))| lost(w, Some(h), &format!("{path}[{i}]"))),
        (want, Some(have)) if want == have => None,
        (want, Some(have)) => Some(format!("{path} changed from {want} to {have}")),
    }
}

/// JSON merge patch of `patch` onto `target`.
pub(super) fn merge(target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(target), Some(patch)) => {
            for (k, v) in patch {
                if v.is_null() {
                    target.remove(k);
                } else {
                    merge(target.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        _ => *target = patch.clone(),
    }
}

/// Applies `crd` (labelled with the run): creates it, or replaces the live one's spec.
pub(super) async fn apply(client: &Client, crd: &Value, run: &str) -> Result<(), kube::Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crd: CustomResourceDefinition = serde_json::from_value(crd.clone()).unwrap();
    crd.metadata
        .labels
        .get_or_insert_default()
        .insert(LABEL.to_owned(), run.to_owned());
    let name = crd.metadata.name.clone().unwrap();
    match api.get_opt(&name).await? {
        None => api.create(&PostParams::default(), &crd).await.map(|_| ()),
        Some(live) => {
            crd.metadata.resource_version = live.metadata.resource_version;
            api.replace(&name, &PostParams::default(), &crd)
                .await
                .map(|_| ())
        }
    }
}

/// Waits until every served version of `shape` serves the CRD of `generation` (its probe
/// column is in a Table); `Some` when the apiserver will not serve it (its names are refused:
/// `NamesAccepted` is False).
pub(super) async fn served(
    client: &Client,
    ns: &str,
    shape: &Shape,
    generation: u32,
) -> Result<Option<String>, String> {
    let column = format!("oracle-{generation}");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for version in shape.served() {
        let deadline = Instant::now() + WAIT;
        loop {
            let request = http::Request::get(shape.path(ns, &version))
                .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
                .body(Vec::new())
                .unwrap();
            let last = match client.request::<Value>(request).await {
                Ok(table) => {
                    let columns = table["columnDefinitions"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default();
                    if columns.iter().any(|c| c["name"] == column.as_str()) {
                        break;
                    }
                    "an older CRD".to_owned()
                }
                Err(e) => said(&e),
            };
            let conditions = crds
                .get(&shape.name)
                .await
                .ok()
                .and_then(|c| c.status?.conditions);
            let refused = (conditions.iter().flatten())
                .find(|c| c.type_ == "NamesAccepted" && c.status == "False");
            if let Some(refused) = refused {
                return Ok(Some(format!(
                    "the apiserver does not serve the new CRD: NamesAccepted False ({}: {})",
                    refused.reason.clone().unwrap_or_default(),
                    refused.message.clone().unwrap_or_default()
                )));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{} {version} not serving the CRD of generation {generation} after {WAIT:?}: {last}",
                    shape.name
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(None)
}

/// An object of `shape` through `version` named `name` with `spec`.
pub(super) fn object(
    shape: &Shape,
    version: &str,
    name: &str,
    kind: &str,
    body: &Value,
) -> DynamicObject {
    let mut value = body.clone();
    value["apiVersion"] = json!(format!("{}/{version}", shape.group));
    value["kind"] = json!(kind);
    value["metadata"] = json!({"name": name});
    serde_json::from_value(value).unwrap()
}

/// An object stored under the old CRD.
pub(super) struct Stored {
    pub(super) name: String,
    pub(super) version: String,
    /// What the client sent (its spec).
    pub(super) sent: Value,
    /// The object as stored (its data).
    pub(super) data: Value,
    /// The replicas `/scale` read, where the old version had it.
    pub(super) replicas: Option<i32>,
}

/// Creates the case's objects through every served version of the old CRD (`shape`).
pub(super) async fn store(
    client: &Client,
    ns: &str,
    case: &Case,
    shape: &Shape,
) -> Result<Vec<Stored>, String> {
    let mut stored = Vec::new();
    let through = shape.served();
    let all = case.objects.iter().enumerate();
    for ((i, spec), version) in all.flat_map(|o| through.iter().map(move |v| (o, v))) {
        let name = format!("o{i}-{version}");
        let api = shape.api(client, ns, version);
        let body = json!({"spec": spec});
        let request = object(shape, version, &name, &shape.kind, &body);
        let created = (api.create(&PostParams::default(), &request).await)
            .map_err(|e| format!("creating {name} through {version} under the old CRD: {e}"))?;
        let replicas = if shape.version(version).is_some_and(|v| v.4) {
            let scale = api.get_scale(&name).await.map_err(|e| e.to_string())?;
            scale.spec.and_then(|s| s.replicas)
        } else {
            None
        };
        stored.push(Stored {
            name,
            version: version.clone(),
            sent: body,
            data: data(&created),
            replicas,
        });
    }
    Ok(stored)
}

/// Deletes the CRD `name` and waits until it is gone (its objects with it).
pub(super) async fn delete(client: &Client, name: &str) -> Result<(), String> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    (crds.delete(name, &kube::api::DeleteParams::default()).await).map_err(|e| e.to_string())?;
    let deadline = Instant::now() + WAIT;
    while (crds.get_opt(name).await.map_err(|e| e.to_string())?).is_some() {
        if Instant::now() > deadline {
            return Err(format!("{name} still there {WAIT:?} after its deletion"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// The steps under the new CRD, noting every refusal and every loss.
pub(super) struct Oracle<'a> {
    pub(super) client: &'a Client,
    pub(super) ns: &'a str,
    pub(super) case: &'a Case,
    /// The old CRD, when there was one.
    pub(super) old: Option<&'a Shape>,
    /// The new CRD (the old one's shape with every version served, when it was deleted).
    pub(super) new: &'a Shape,
    /// The versions the new CRD serves (none when the apiserver refused it).
    pub(super) versions: Vec<String>,
    /// What was refused, lost or changed.
    pub(super) problems: Vec<String>,
}

impl Oracle<'_> {
    fn api(&self, version: &str) -> Api<DynamicObject> {
        self.new.api(self.client, self.ns, version)
    }

    /// The old CRD's version `name` (served, storage, status, scale).
    fn old_version(&self, name: &str) -> Option<(String, bool, bool, bool, bool)> {
        self.old.and_then(|s| s.version(name).cloned())
    }

    /// Notes a failed step.
    fn refused(&mut self, step: String, error: &kube::Error) {
        self.problems.push(format!("{step}: {}", said(error)));
    }

    /// Notes what `actual` lost of `expected`, if anything.
    fn compare(&mut self, step: String, expected: &Value, actual: &DynamicObject) {
        if let Some(loss) = lost(expected, Some(&data(actual)), "") {
            let loss = loss.trim_start_matches('.').to_owned();
            self.problems.push(format!("{step}: {loss}"));
        }
    }

    /// Reads `object` through `v`, writes it back unchanged, creates a copy, reads `/scale`.
    pub(super) async fn round_trip(&mut self, object_: &Stored, v: &str) {
        let name = &object_.name;
        let api = self.api(v);
        let read = match api.get(name).await {
            Ok(read) => read,
            Err(e) => return self.refused(format!("read {name} through {v}"), &e),
        };
        self.compare(format!("read {name} through {v}"), &object_.data, &read);
        // Looked at after the write: through the version it was created in, else the storage one.
        let home = if self.versions.contains(&object_.version) {
            object_.version.clone()
        } else {
            self.new.storage()
        };
        match api.replace(name, &PostParams::default(), &read).await {
            Err(e) => self.refused(format!("write {name} back through {v}"), &e),
            Ok(_) => match self.api(&home).get(name).await {
                Ok(after) => {
                    let step = format!("write {name} back through {v}, read through {home}");
                    self.compare(step, &object_.data, &after);
                }
                Err(e) => self.refused(format!("read {name} through {home}"), &e),
            },
        }
        let copy_name = format!("{name}-{v}-copy");
        let copy = object(self.new, v, &copy_name, &self.new.kind, &data(&read));
        match api.create(&PostParams::default(), &copy).await {
            Err(e) => self.refused(format!("create a copy of {name} through {v}"), &e),
            Ok(created) => {
                self.compare(
                    format!("create a copy of {name} through {v}"),
                    &data(&read),
                    &created,
                );
            }
        }
        if self.old_version(v).is_some_and(|o| o.4) {
            match api.get_scale(name).await {
                Err(e) => self.refused(format!("read /scale of {name} through {v}"), &e),
                Ok(scale) => {
                    let now = scale.spec.and_then(|s| s.replicas);
                    if now != object_.replicas {
                        let said = |r: Option<i32>| r.map_or("none".to_owned(), |r| r.to_string());
                        self.problems.push(format!(
                            "read /scale of {name} through {v}: replicas {} instead of {}",
                            said(now),
                            said(object_.replicas)
                        ));
                    }
                }
            }
        }
    }

    /// The client's original request again, through its version, with its kind: the same
    /// values must be stored (defaults the new schema adds aside).
    pub(super) async fn create_again(&mut self, object_: &Stored) {
        let (name, version) = (&object_.name, &object_.version);
        if !self.versions.contains(version) {
            let problem = format!("create {name} again through {version}: not served");
            self.problems.push(problem);
            return;
        }
        let old_kind = self.old.map_or("Widget", |s| s.kind.as_str());
        let again = format!("{name}-again");
        let body = object(self.new, version, &again, old_kind, &object_.sent);
        let step = format!("create {name} again through {version}");
        match self
            .api(version)
            .create(&PostParams::default(), &body)
            .await
        {
            Err(e) => self.refused(step, &e),
            Ok(created) => self.compare(step, &object_.data, &created),
        }
    }

    /// The spec fields the case updates through `v`, with `note` set to `note`.
    fn spec_update(&self, v: &str, note: String) -> Value {
        let mut spec = json!({"note": note});
        for (_, extra) in self.case.updates.iter().filter(|(uv, _)| *uv == v) {
            merge(&mut spec, extra);
        }
        spec
    }

    /// Updates a field of `object` through `v`: a merge patch of the spec (what most clients
    /// send), then server-side apply by another field manager (with the status where the old
    /// version had no status subresource, else through `/status`); each must hold what it set
    /// and keep the rest.
    pub(super) async fn update(&mut self, object_: &Stored, v: &str) {
        let name = &object_.name;
        let api = self.api(v);
        let Ok(current) = api.get(name).await else {
            return;
        };
        let patch = json!({"spec": self.spec_update(v, format!("patched through {v}"))});
        if let Err(e) = (api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))).await {
            self.refused(format!("patch {name} through {v}"), &e);
        } else {
            let mut expected = data(&current);
            merge(&mut expected, &patch);
            match api.get(name).await {
                Ok(after) => self.compare(format!("patch {name} through {v}"), &expected, &after),
                Err(e) => self.refused(format!("read {name} through {v}"), &e),
            }
        }
        let Ok(current) = api.get(name).await else {
            return;
        };
        let status_subresource = self.old_version(v).is_some_and(|o| o.3);
        let status = json!({"note": format!("status through {v}")});
        let mut body = json!({"spec": self.spec_update(v, format!("applied through {v}"))});
        if !status_subresource {
            body["status"] = status.clone();
        }
        let mut expected = data(&current);
        merge(&mut expected, &body);
        let apply = object(self.new, v, name, &self.new.kind, &body);
        let params = PatchParams::apply("compat-oracle").force();
        if let Err(e) = api.patch(name, &params, &Patch::Apply(&apply)).await {
            return self.refused(format!("apply {name} through {v}"), &e);
        }
        if status_subresource {
            let patch = json!({"status": status});
            let params = PatchParams::default();
            let merge_patch = Patch::Merge(&patch);
            match api.patch_status(name, &params, &merge_patch).await {
                Err(e) => self.refused(
                    format!("update the status of {name} through {v}/status"),
                    &e,
                ),
                Ok(_) => merge(&mut expected, &patch),
            }
        }
        match api.get(name).await {
            Ok(after) => self.compare(format!("apply {name} through {v}"), &expected, &after),
            Err(e) => self.refused(format!("read {name} through {v}"), &e),
        }
    }

    /// Lists through every served version: the list's kind must be the old one.
    pub(super) async fn lists(&mut self) {
        let Some(old) = self.old else {
            return;
        };
        for v in self.versions.clone() {
            match self.api(&v).list(&ListParams::default()).await {
                Ok(list) if list.types.kind != old.list_kind => self.problems.push(format!(
                    "list through {v}: a {} instead of a {}",
                    list.types.kind, old.list_kind
                )),
                Ok(_) => {}
                Err(e) => self.refused(format!("list through {v}"), &e),
            }
        }
    }
}
