//! A ready `Condition` type for status structs, with the schema Kubernetes' `metav1.Condition`
//! has, and the `Conditions` list (`listType: map`, `listMapKeys: [type]`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The status of a condition.
#[crate::schema]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// The controller cannot tell.
    Unknown,
}

/// One aspect of an object's current state (`metav1.Condition`).
#[crate::schema]
#[derive(Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Type of condition in CamelCase or in foo.example.com/CamelCase.
    #[serde(rename = "type")]
    #[validate(
        max_length = 316,
        pattern = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
    )]
    pub type_: String,
    /// Status of the condition, one of True, False, Unknown.
    pub status: ConditionStatus,
    /// The `.metadata.generation` that the condition was set based upon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(minimum = 0)]
    pub observed_generation: Option<i64>,
    /// Last time the condition transitioned from one status to another.
    pub last_transition_time: Time,
    /// A programmatic identifier indicating the reason for the condition's last transition, in
    /// CamelCase.
    #[validate(
        min_length = 1,
        max_length = 1024,
        pattern = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
    )]
    pub reason: String,
    /// A human readable message indicating details about the transition.
    #[validate(max_length = 32768)]
    pub message: String,
}

impl Condition {
    /// A condition of `type_` with `status`, `reason` and `message`, transitioned now.
    #[must_use]
    pub fn new(
        type_: impl Into<String>,
        status: ConditionStatus,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            type_: type_.into(),
            status,
            observed_generation: None,
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::now()),
            reason: reason.into(),
            message: message.into(),
        }
    }

    /// Sets `observedGeneration`.
    #[must_use]
    pub fn observed_generation(mut self, generation: i64) -> Self {
        self.observed_generation = Some(generation);
        self
    }
}

/// The `Ready` condition type: the object's desired state is in effect.
pub const READY: &str = "Ready";
/// The `Progressing` condition type: the controller is moving toward the desired state.
pub const PROGRESSING: &str = "Progressing";
/// The `Degraded` condition type: something keeps the desired state from being reached.
pub const DEGRADED: &str = "Degraded";
/// The `Stalled` condition type (kstatus): the controller gave up on the object until it
/// changes; set by the runtime when the retry policy gives up, cleared by the next success.
pub const STALLED: &str = "Stalled";

/// The conditions of a status: a list keyed by `type` (`x-kubernetes-list-type: map`), so that
/// server-side apply merges conditions of different types from different managers.
#[crate::schema]
#[derive(Clone, Debug, Default, PartialEq)]
#[serde(transparent)]
#[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
pub struct Conditions {
    /// The conditions, at most one per type.
    pub items: Vec<Condition>,
}

impl Conditions {
    /// The condition of `type_`, if present.
    #[must_use]
    pub fn get(&self, type_: &str) -> Option<&Condition> {
        self.items.iter().find(|c| c.type_ == type_)
    }

    /// Whether the condition of `type_` is present with status `True`.
    #[must_use]
    pub fn is_true(&self, type_: &str) -> bool {
        self.get(type_)
            .is_some_and(|c| c.status == ConditionStatus::True)
    }

    /// Sets the condition `type_` to `status` for the object's `generation` (its
    /// `metadata.generation`, recorded as `observedGeneration`), keeping the transition time when
    /// the status did not change. Returns whether anything changed (whether a status write is due).
    ///
    /// # Examples
    ///
    /// ```
    /// use kubeforge::crd::{Conditions, READY};
    ///
    /// let mut conditions = Conditions::default();
    /// assert!(conditions.mark(READY, false, "Progressing", "0/3 pods ready", 4));
    /// assert!(!conditions.mark(READY, false, "Progressing", "0/3 pods ready", 4), "no change");
    /// assert!(conditions.mark(READY, true, "AllReady", "3/3 pods ready", 4));
    /// assert_eq!(conditions.get(READY).unwrap().observed_generation, Some(4));
    /// ```
    pub fn mark(
        &mut self,
        type_: &str,
        status: bool,
        reason: &str,
        message: &str,
        generation: i64,
    ) -> bool {
        let status = if status {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        };
        self.set(Condition::new(type_, status, reason, message).observed_generation(generation))
    }

    /// Adds or replaces the condition of `condition.type_`. The last transition time is kept when
    /// the status did not change (as `meta.SetStatusCondition` does). Returns whether anything
    /// changed.
    pub fn set(&mut self, mut condition: Condition) -> bool {
        match self.items.iter_mut().find(|c| c.type_ == condition.type_) {
            Some(existing) => {
                if existing.status == condition.status {
                    condition.last_transition_time = existing.last_transition_time.clone();
                }
                let changed = *existing != condition;
                *existing = condition;
                changed
            }
            None => {
                self.items.push(condition);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_should_keep_transition_time_when_status_is_unchanged() {
        let mut conditions = Conditions::default();
        assert!(conditions.set(Condition::new(
            "Ready",
            ConditionStatus::False,
            "Starting",
            ""
        )));
        let first = conditions
            .get("Ready")
            .map(|c| c.last_transition_time.clone());
        let mut again = Condition::new("Ready", ConditionStatus::False, "Starting", "still");
        again.last_transition_time = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        assert!(conditions.set(again));
        assert_eq!(
            conditions
                .get("Ready")
                .map(|c| c.last_transition_time.clone()),
            first
        );
        assert!(!conditions.is_true("Ready"));
        assert!(conditions.set(Condition::new("Ready", ConditionStatus::True, "Up", "")));
        assert!(conditions.is_true("Ready"));
        assert_eq!(conditions.items.len(), 1);
    }

    #[test]
    fn conditions_schema_should_be_a_list_map_keyed_by_type() {
        let schema = super::super::structural_schema(super::super::raw_schema::<Conditions>());
        assert_eq!(schema["type"], "array");
        assert_eq!(schema["x-kubernetes-list-type"], "map");
        assert_eq!(
            schema["x-kubernetes-list-map-keys"],
            serde_json::json!(["type"])
        );
        let item = &schema["items"];
        assert_eq!(
            item["properties"]["status"]["enum"],
            serde_json::json!(["True", "False", "Unknown"])
        );
        assert_eq!(
            item["required"],
            serde_json::json!(["type", "status", "lastTransitionTime", "reason", "message"])
        );
        assert_eq!(
            item["properties"]["lastTransitionTime"]["format"],
            "date-time"
        );
    }
}
