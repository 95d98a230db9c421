//! The `tracing` layer: gives each span OTLP ids (its parent's trace, or the ids the worker chose
//! for a reconcile), collects its fields and the events inside it, and hands it to the exporter
//! when it closes.

use std::time::{SystemTime, UNIX_EPOCH};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use super::config::Sampler;
use super::encode::{FinishedSpan, SpanEvent, Value};
use super::export::Exporter;
use super::ids::{self, TraceIds};

/// Events kept per span; more are counted as dropped.
const MAX_EVENTS: usize = 64;

/// The layer [`super::layer`] returns; add it to a `tracing_subscriber` registry.
pub struct OtlpLayer {
    pub(super) exporter: Exporter,
    pub(super) sampler: Sampler,
}

/// What the layer keeps in a span's extensions until it closes.
struct Building {
    ids: TraceIds,
    sampled: bool,
    span: FinishedSpan,
}

pub(super) fn now_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Records fields into a span (or an event): `otel.name`, `otel.kind` and `error` are
/// understood, the rest become attributes.
struct Fields<'a> {
    name: Option<&'a mut String>,
    kind: Option<&'a mut u32>,
    error: Option<&'a mut Option<String>>,
    message: Option<&'a mut String>,
    attributes: &'a mut Vec<(String, Value)>,
}

impl<'a> Fields<'a> {
    /// Records a span's fields: `otel.name`, `otel.kind` and `error` set its name, kind and
    /// status.
    fn of_span(span: &'a mut FinishedSpan) -> Self {
        let FinishedSpan {
            name,
            kind,
            error,
            attributes,
            ..
        } = span;
        Self {
            name: Some(name),
            kind: Some(kind),
            error: Some(error),
            message: None,
            attributes,
        }
    }

    fn put(&mut self, field: &Field, value: Value) {
        let text = |value: &Value| match value {
            Value::Str(s) => s.clone(),
            Value::Bool(b) => b.to_string(),
            Value::Int(i) => i.to_string(),
            Value::Double(d) => d.to_string(),
        };
        match field.name() {
            "otel.name" if self.name.is_some() => {
                if let Some(name) = self.name.as_deref_mut() {
                    *name = text(&value);
                }
            }
            "otel.kind" if self.kind.is_some() => {
                if let Some(kind) = self.kind.as_deref_mut() {
                    *kind = match text(&value).to_ascii_lowercase().as_str() {
                        "server" => 2,
                        "client" => 3,
                        "producer" => 4,
                        "consumer" => 5,
                        _ => 1,
                    };
                }
            }
            "error" if self.error.is_some() => {
                if let Some(error) = self.error.as_deref_mut() {
                    *error = Some(text(&value));
                }
                self.attributes.push(("error".to_owned(), value));
            }
            "message" if self.message.is_some() => {
                if let Some(message) = self.message.as_deref_mut() {
                    *message = text(&value);
                }
            }
            name => {
                // A field recorded again (`Span::record`) replaces its value.
                if let Some(slot) = self.attributes.iter_mut().find(|(k, _)| k == name) {
                    slot.1 = value;
                } else {
                    self.attributes.push((name.to_owned(), value));
                }
            }
        }
    }
}

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::Str(value.to_owned()));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::Bool(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::Int(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::Int(i64::try_from(value).unwrap_or(i64::MAX)));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, Value::Double(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, Value::Str(value.to_string()));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.put(field, Value::Str(format!("{value:?}")));
    }
}

impl<S> tracing_subscriber::Layer<S> for OtlpLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let parent = span.parent().and_then(|parent| {
            parent
                .extensions()
                .get::<Building>()
                .map(|b| (b.ids, b.sampled))
        });
        let (ids, sampled) = match (ids::take_pending(), parent) {
            (Some(ids), _) => (ids, self.sampler.keeps(ids.trace)),
            (None, Some((parent, sampled))) => {
                (TraceIds::child_of(parent.trace, parent.span), sampled)
            }
            (None, None) => {
                let ids = TraceIds::root();
                (ids, self.sampler.keeps(ids.trace))
            }
        };
        let mut building = Building {
            ids,
            sampled,
            span: FinishedSpan {
                trace: ids.trace,
                span: ids.span,
                parent: ids.parent,
                name: attrs.metadata().name().to_owned(),
                kind: 1,
                start: now_nanos(),
                end: 0,
                attributes: Vec::new(),
                events: Vec::new(),
                dropped_events: 0,
                error: None,
            },
        };
        if sampled {
            attrs.record(&mut Fields::of_span(&mut building.span));
        }
        span.extensions_mut().insert(building);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        let Some(building) = extensions.get_mut::<Building>() else {
            return;
        };
        if !building.sampled {
            return;
        }
        values.record(&mut Fields::of_span(&mut building.span));
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.event_span(event) else {
            return;
        };
        let mut extensions = span.extensions_mut();
        let Some(building) = extensions.get_mut::<Building>() else {
            return;
        };
        if !building.sampled {
            return;
        }
        if building.span.events.len() >= MAX_EVENTS {
            building.span.dropped_events += 1;
            return;
        }
        let mut message = String::new();
        let mut attributes = vec![(
            "level".to_owned(),
            Value::Str(event.metadata().level().as_str().to_owned()),
        )];
        event.record(&mut Fields {
            name: None,
            kind: None,
            error: None,
            message: Some(&mut message),
            attributes: &mut attributes,
        });
        if message.is_empty() {
            event.metadata().name().clone_into(&mut message);
        }
        building.span.events.push(SpanEvent {
            time: now_nanos(),
            name: message,
            attributes,
        });
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(building) = span.extensions_mut().remove::<Building>() else {
            return;
        };
        if building.sampled {
            let mut finished = building.span;
            finished.end = now_nanos();
            self.exporter.send(finished);
        }
    }
}
