//! OTLP's trace messages (`opentelemetry/proto/collector/trace/v1`), encoded by hand: the few
//! messages a span exporter sends do not need a protobuf code generator. Field numbers are the
//! `.proto` files'; the JSON form follows OTLP/JSON (hex ids, camelCase names, 64-bit integers
//! as strings, enums as numbers).

use std::fmt::Write as _;

/// An attribute value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    Str(String),
    Bool(bool),
    Int(i64),
    Double(f64),
}

/// A span event (a `tracing` event inside the span).
#[derive(Clone, Debug)]
pub(crate) struct SpanEvent {
    pub(crate) time: u64,
    pub(crate) name: String,
    pub(crate) attributes: Vec<(String, Value)>,
}

/// A finished span.
#[derive(Clone, Debug)]
pub(crate) struct FinishedSpan {
    pub(crate) trace: u128,
    pub(crate) span: u64,
    pub(crate) parent: u64,
    pub(crate) name: String,
    /// `SpanKind`: 1 internal, 3 client.
    pub(crate) kind: u32,
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) attributes: Vec<(String, Value)>,
    pub(crate) events: Vec<SpanEvent>,
    pub(crate) dropped_events: u32,
    /// `Some(message)`: status ERROR with that message.
    pub(crate) error: Option<String>,
}

/// Who sent the spans: the resource's attributes and the instrumentation scope.
pub(crate) struct Origin<'a> {
    pub(crate) resource: &'a [(String, Value)],
    pub(crate) scope: &'static str,
    pub(crate) version: &'static str,
}

// ---- protobuf ----

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;

fn key(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, u64::from(field << 3 | u32::from(wire)));
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn bytes(out: &mut Vec<u8>, field: u32, value: &[u8]) {
    key(out, field, LEN);
    varint(out, value.len() as u64);
    out.extend_from_slice(value);
}

fn string(out: &mut Vec<u8>, field: u32, value: &str) {
    if !value.is_empty() {
        bytes(out, field, value.as_bytes());
    }
}

fn fixed64(out: &mut Vec<u8>, field: u32, value: u64) {
    key(out, field, FIXED64);
    out.extend_from_slice(&value.to_le_bytes());
}

fn uint(out: &mut Vec<u8>, field: u32, value: u64) {
    if value != 0 {
        key(out, field, VARINT);
        varint(out, value);
    }
}

/// A nested message: encoded into a scratch buffer first for its length.
fn message(out: &mut Vec<u8>, field: u32, body: impl FnOnce(&mut Vec<u8>)) {
    let mut inner = Vec::new();
    body(&mut inner);
    bytes(out, field, &inner);
}

fn key_value(out: &mut Vec<u8>, field: u32, k: &str, v: &Value) {
    message(out, field, |kv| {
        string(kv, 1, k);
        message(kv, 2, |any| match v {
            // AnyValue's oneof: a string is written even when empty (it is set).
            Value::Str(s) => bytes(any, 1, s.as_bytes()),
            Value::Bool(b) => {
                key(any, 2, VARINT);
                varint(any, u64::from(*b));
            }
            Value::Int(i) => {
                key(any, 3, VARINT);
                varint(any, *i as u64);
            }
            Value::Double(d) => {
                key(any, 4, FIXED64);
                any.extend_from_slice(&d.to_le_bytes());
            }
        });
    });
}

fn span_message(out: &mut Vec<u8>, s: &FinishedSpan) {
    bytes(out, 1, &s.trace.to_be_bytes());
    bytes(out, 2, &s.span.to_be_bytes());
    if s.parent != 0 {
        bytes(out, 4, &s.parent.to_be_bytes());
    }
    string(out, 5, &s.name);
    uint(out, 6, u64::from(s.kind));
    fixed64(out, 7, s.start);
    fixed64(out, 8, s.end);
    for (k, v) in &s.attributes {
        key_value(out, 9, k, v);
    }
    for e in &s.events {
        message(out, 11, |ev| {
            fixed64(ev, 1, e.time);
            string(ev, 2, &e.name);
            for (k, v) in &e.attributes {
                key_value(ev, 3, k, v);
            }
        });
    }
    uint(out, 12, u64::from(s.dropped_events));
    if let Some(error) = &s.error {
        message(out, 15, |st| {
            string(st, 2, error);
            uint(st, 3, 2);
        });
    }
}

/// An `ExportTraceServiceRequest` in protobuf.
pub(crate) fn protobuf(origin: &Origin<'_>, spans: &[FinishedSpan]) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 * spans.len() + 256);
    message(&mut out, 1, |rs| {
        message(rs, 1, |resource| {
            for (k, v) in origin.resource {
                key_value(resource, 1, k, v);
            }
        });
        message(rs, 2, |ss| {
            message(ss, 1, |scope| {
                string(scope, 1, origin.scope);
                string(scope, 2, origin.version);
            });
            for s in spans {
                message(ss, 2, |span| span_message(span, s));
            }
        });
    });
    out
}

// ---- JSON ----

fn json_value(v: &Value) -> serde_json::Value {
    match v {
        Value::Str(s) => serde_json::json!({ "stringValue": s }),
        Value::Bool(b) => serde_json::json!({ "boolValue": b }),
        Value::Int(i) => serde_json::json!({ "intValue": i.to_string() }),
        Value::Double(d) => serde_json::json!({ "doubleValue": d }),
    }
}

fn json_attributes(attributes: &[(String, Value)]) -> serde_json::Value {
    attributes
        .iter()
        .map(|(k, v)| serde_json::json!({ "key": k, "value": json_value(v) }))
        .collect()
}

fn hex(value: impl std::fmt::LowerHex, width: usize) -> String {
    let mut s = String::with_capacity(width);
    let _ = write!(s, "{value:0width$x}");
    s
}

/// The same request in OTLP/JSON.
pub(crate) fn json(origin: &Origin<'_>, spans: &[FinishedSpan]) -> Vec<u8> {
    let spans: Vec<serde_json::Value> = spans
        .iter()
        .map(|s| {
            let mut span = serde_json::json!({
                "traceId": hex(s.trace, 32),
                "spanId": hex(s.span, 16),
                "name": s.name,
                "kind": s.kind,
                "startTimeUnixNano": s.start.to_string(),
                "endTimeUnixNano": s.end.to_string(),
                "attributes": json_attributes(&s.attributes),
                "events": s.events.iter().map(|e| serde_json::json!({
                    "timeUnixNano": e.time.to_string(),
                    "name": e.name,
                    "attributes": json_attributes(&e.attributes),
                })).collect::<Vec<_>>(),
                "droppedEventsCount": s.dropped_events,
            });
            if s.parent != 0 {
                span["parentSpanId"] = hex(s.parent, 16).into();
            }
            if let Some(error) = &s.error {
                span["status"] = serde_json::json!({ "code": 2, "message": error });
            }
            span
        })
        .collect();
    let body = serde_json::json!({
        "resourceSpans": [{
            "resource": { "attributes": json_attributes(origin.resource) },
            "scopeSpans": [{
                "scope": { "name": origin.scope, "version": origin.version },
                "spans": spans,
            }],
        }],
    });
    serde_json::to_vec(&body).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal protobuf reader: (field, wire type, bytes or number) of one message's fields.
    fn fields(mut data: &[u8]) -> Vec<(u32, u8, Vec<u8>, u64)> {
        fn read_varint(data: &mut &[u8]) -> u64 {
            let mut v = 0u64;
            let mut shift = 0;
            loop {
                let b = data[0];
                *data = &data[1..];
                v |= u64::from(b & 0x7f) << shift;
                if b < 0x80 {
                    return v;
                }
                shift += 7;
            }
        }
        let mut out = Vec::new();
        while !data.is_empty() {
            let k = read_varint(&mut data);
            let (field, wire) = ((k >> 3) as u32, (k & 7) as u8);
            match wire {
                0 => out.push((field, wire, Vec::new(), read_varint(&mut data))),
                1 => {
                    let v = u64::from_le_bytes(data[..8].try_into().expect("8 bytes"));
                    data = &data[8..];
                    out.push((field, wire, Vec::new(), v));
                }
                2 => {
                    let n = read_varint(&mut data) as usize;
                    out.push((field, wire, data[..n].to_vec(), 0));
                    data = &data[n..];
                }
                _ => panic!("unexpected wire type {wire}"),
            }
        }
        out
    }

    fn one(fields: &[(u32, u8, Vec<u8>, u64)], field: u32) -> (Vec<u8>, u64) {
        let found: Vec<_> = fields.iter().filter(|f| f.0 == field).collect();
        assert_eq!(found.len(), 1, "field {field} once in {fields:?}");
        (found[0].2.clone(), found[0].3)
    }

    fn sample() -> FinishedSpan {
        FinishedSpan {
            trace: 0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10,
            span: 0x1112_1314_1516_1718,
            parent: 0x2122_2324_2526_2728,
            name: "reconcile".into(),
            kind: 1,
            start: 1_700_000_000_000_000_000,
            end: 1_700_000_000_500_000_000,
            attributes: vec![
                ("controller".into(), Value::Str("webapp".into())),
                ("generation".into(), Value::Int(-3)),
            ],
            events: vec![SpanEvent {
                time: 1_700_000_000_100_000_000,
                name: "reconcile failed".into(),
                attributes: vec![("level".into(), Value::Str("WARN".into()))],
            }],
            dropped_events: 0,
            error: Some("boom".into()),
        }
    }

    #[test]
    fn protobuf_has_the_proto_files_field_numbers() {
        let resource = [("service.name".to_owned(), Value::Str("op".into()))];
        let origin = Origin {
            resource: &resource,
            scope: "kubeforge",
            version: "0.1.0",
        };
        let request = protobuf(&origin, &[sample()]);
        let (rs, _) = one(&fields(&request), 1);
        let rs = fields(&rs);
        let (resource, _) = one(&rs, 1);
        let (kv, _) = one(&fields(&resource), 1);
        let kv = fields(&kv);
        assert_eq!(one(&kv, 1).0, b"service.name");
        assert_eq!(one(&fields(&one(&kv, 2).0), 1).0, b"op");
        let (ss, _) = one(&rs, 2);
        let ss = fields(&ss);
        assert_eq!(one(&fields(&one(&ss, 1).0), 1).0, b"kubeforge");
        let span = fields(&one(&ss, 2).0);
        assert_eq!(one(&span, 1).0, (1u8..=16).collect::<Vec<_>>());
        assert_eq!(one(&span, 2).0, (0x11u8..=0x18).collect::<Vec<_>>());
        assert_eq!(one(&span, 4).0, (0x21u8..=0x28).collect::<Vec<_>>());
        assert_eq!(one(&span, 5).0, b"reconcile");
        assert_eq!(one(&span, 6).1, 1);
        assert_eq!(one(&span, 7).1, 1_700_000_000_000_000_000);
        assert_eq!(one(&span, 8).1, 1_700_000_000_500_000_000);
        let attributes: Vec<_> = span.iter().filter(|f| f.0 == 9).collect();
        assert_eq!(attributes.len(), 2);
        let generation = fields(&attributes[1].2);
        // -3 as a two's-complement varint: ten bytes.
        assert_eq!(one(&fields(&one(&generation, 2).0), 3).1, (-3i64) as u64);
        let event = fields(&one(&span, 11).0);
        assert_eq!(one(&event, 2).0, b"reconcile failed");
        let status = fields(&one(&span, 15).0);
        assert_eq!(one(&status, 2).0, b"boom");
        assert_eq!(one(&status, 3).1, 2);
    }

    #[test]
    fn a_root_span_has_no_parent_field_and_json_uses_hex_ids() {
        let mut root = sample();
        root.parent = 0;
        root.error = None;
        let origin = Origin {
            resource: &[],
            scope: "kubeforge",
            version: "0",
        };
        let request = protobuf(&origin, &[root.clone()]);
        let ss = fields(&one(&fields(&one(&fields(&request), 1).0), 2).0);
        let span = fields(&one(&ss, 2).0);
        assert!(span.iter().all(|f| f.0 != 4 && f.0 != 15));
        let body: serde_json::Value =
            serde_json::from_slice(&json(&origin, &[sample()])).expect("json");
        let span = &body["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
        assert_eq!(span["traceId"], "0102030405060708090a0b0c0d0e0f10");
        assert_eq!(span["spanId"], "1112131415161718");
        assert_eq!(span["parentSpanId"], "2122232425262728");
        assert_eq!(span["startTimeUnixNano"], "1700000000000000000");
        assert_eq!(span["attributes"][1]["value"]["intValue"], "-3");
        assert_eq!(span["status"]["code"], 2);
    }
}
