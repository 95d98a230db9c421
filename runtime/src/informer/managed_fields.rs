//! Dropping `metadata.managedFields` from list and watch responses before they are decoded.
//!
//! An informer that does not keep managedFields (the default) used to decode them and throw them
//! away: for a typical object they are the largest part of its metadata (a tree of
//! `serde_json::Value` maps, about 2.9 KiB per object for the benchmark's kind), so decoding them
//! cost CPU at every list page and watch event, and the freed trees left the allocator's heap
//! fragmented between the cached objects after the initial list.
//!
//! [`Filtered`] wraps a response body and copies its JSON through a small streaming scanner that
//! leaves out the `managedFields` member of an object's metadata — and only there: in a single
//! object (`metadata`), a list (`items[*].metadata`) and a watch event (`object.metadata`). The
//! scanner keeps its state between the body's chunks (a watch streams events split anywhere),
//! keeps the newlines between watch events, and drops other whitespace outside strings (the
//! apiserver sends none). A body that is not JSON passes through unchanged in meaning: the
//! scanner only removes members at those paths.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

const MANAGED_FIELDS: &[u8] = b"managedFields";

/// What an object or array is, for deciding which members go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// The response itself: an object, a list or a watch event.
    Root,
    /// An object of the API (a list's item, a watch event's object).
    Resource,
    /// A resource's `metadata`: `managedFields` goes.
    Metadata,
    /// A list's `items`.
    Items,
    /// Anything else.
    Other,
}

impl Role {
    /// The role of the value of member `key` of an object of this role.
    fn member(self, key: &[u8]) -> Role {
        match (self, key) {
            (Role::Root | Role::Resource, b"metadata") => Role::Metadata,
            (Role::Root, b"items") => Role::Items,
            (Role::Root, b"object") => Role::Resource,
            _ => Role::Other,
        }
    }

    /// The role of an element of an array of this role.
    fn element(self) -> Role {
        if self == Role::Items {
            Role::Resource
        } else {
            Role::Other
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// An object's key (or its end).
    Key,
    /// The colon after a key.
    Colon,
    /// A value.
    Value,
    /// A separator or the end of the container.
    Next,
}

#[derive(Debug)]
struct Level {
    object: bool,
    role: Role,
    expect: Expect,
    /// Role of the value after the current key.
    value_role: Role,
    /// An object member was written (a later separator is written too).
    written: bool,
    /// A comma was read and not written yet (the next member may be dropped).
    comma: bool,
    /// The current member is being dropped.
    dropping: bool,
}

/// The scanner's state between chunks.
#[derive(Debug, Default)]
pub(crate) struct Scanner {
    stack: Vec<Level>,
    /// Inside a string (a value, copied or skipped).
    string: bool,
    escape: bool,
    /// A key being read (its raw bytes, decided when it ends).
    key: Option<Vec<u8>>,
    /// Depth of the value being skipped (0: not skipping, or a scalar's characters).
    skip_depth: usize,
    /// Skipping a value's characters (a scalar, or the inside of containers).
    skipping: bool,
}

impl Scanner {
    /// Filters one chunk; the output is the input without the dropped members.
    pub(crate) fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) {
        let mut i = 0;
        while i < input.len() {
            i = self.step(input, i, out);
        }
    }

    /// Handles input from `i`; returns where to go on.
    fn step(&mut self, input: &[u8], i: usize, out: &mut Vec<u8>) -> usize {
        if self.skipping {
            return self.skip(input, i, out);
        }
        if let Some(key) = &mut self.key {
            // Up to the closing quote (keys are short; escapes are kept raw).
            let rest = &input[i..];
            match find_quote_or_escape(rest, &mut self.escape) {
                Some(end) => {
                    key.extend_from_slice(&rest[..end]);
                    let key = self.key.take().unwrap_or_default();
                    self.key_read(&key, out);
                    return i + end + 1;
                }
                None => {
                    key.extend_from_slice(rest);
                    return input.len();
                }
            }
        }
        if self.string {
            let rest = &input[i..];
            return match find_quote_or_escape(rest, &mut self.escape) {
                Some(end) => {
                    out.extend_from_slice(&rest[..=end]);
                    self.string = false;
                    i + end + 1
                }
                None => {
                    out.extend_from_slice(rest);
                    input.len()
                }
            };
        }
        let c = input[i];
        self.token(c, out);
        i + 1
    }

    /// One character outside strings and keys.
    fn token(&mut self, c: u8, out: &mut Vec<u8>) {
        if c.is_ascii_whitespace() {
            // Newlines between watch events (and any whitespace at the top) stay.
            if self.stack.is_empty() {
                out.push(c);
            }
            return;
        }
        let Some(top) = self.stack.last_mut() else {
            // A new document (a watch event, a response).
            self.open(c, Role::Root, out);
            return;
        };
        match (top.expect, c) {
            (Expect::Key, b'"') if top.object => {
                self.key = Some(Vec::new());
                self.escape = false;
            }
            (Expect::Key | Expect::Next, b'}') | (Expect::Value | Expect::Next, b']') => {
                self.stack.pop();
                out.push(c);
                self.value_done();
            }
            (Expect::Colon, b':') => {
                top.expect = Expect::Value;
                if top.dropping {
                    self.skipping = true;
                    self.skip_depth = 0;
                } else {
                    out.push(b':');
                }
            }
            (Expect::Next, b',') => {
                if top.object {
                    top.comma = true;
                    top.expect = Expect::Key;
                } else {
                    out.push(b',');
                    top.expect = Expect::Value;
                }
            }
            (Expect::Value, _) => {
                let role = if top.object {
                    top.value_role
                } else {
                    top.role.element()
                };
                self.open(c, role, out);
            }
            // Not JSON as expected: copy it and carry on.
            _ => out.push(c),
        }
    }

    /// The first character of a value whose role is `role`.
    fn open(&mut self, c: u8, role: Role, out: &mut Vec<u8>) {
        out.push(c);
        match c {
            b'{' | b'[' => self.stack.push(Level {
                object: c == b'{',
                role,
                expect: if c == b'{' {
                    Expect::Key
                } else {
                    Expect::Value
                },
                value_role: Role::Other,
                written: false,
                comma: false,
                dropping: false,
            }),
            b'"' => {
                self.string = true;
                self.escape = false;
                self.value_done();
            }
            // A scalar's first character: the rest are copied as tokens until a separator.
            _ => self.value_done(),
        }
    }

    /// A value ended (or a scalar began: its other characters are copied as they come).
    fn value_done(&mut self) {
        if let Some(top) = self.stack.last_mut() {
            top.expect = Expect::Next;
        }
    }

    /// A key was read: write it (with the pending comma) or drop its member.
    fn key_read(&mut self, key: &[u8], out: &mut Vec<u8>) {
        let Some(top) = self.stack.last_mut() else {
            return;
        };
        top.expect = Expect::Colon;
        if top.role == Role::Metadata && key == MANAGED_FIELDS {
            top.dropping = true;
            return;
        }
        top.dropping = false;
        top.value_role = top.role.member(key);
        if top.comma && top.written {
            out.push(b',');
        }
        top.comma = false;
        top.written = true;
        out.push(b'"');
        out.extend_from_slice(key);
        out.push(b'"');
    }

    /// Skips the value of a dropped member.
    fn skip(&mut self, input: &[u8], mut i: usize, out: &mut Vec<u8>) -> usize {
        while i < input.len() {
            let c = input[i];
            if self.string {
                let rest = &input[i..];
                match find_quote_or_escape(rest, &mut self.escape) {
                    Some(end) => {
                        self.string = false;
                        i += end + 1;
                        if self.skip_depth == 0 {
                            return self.skipped(i);
                        }
                        continue;
                    }
                    None => return input.len(),
                }
            }
            match c {
                b'"' => {
                    self.string = true;
                    self.escape = false;
                }
                b'{' | b'[' => self.skip_depth += 1,
                b'}' | b']' if self.skip_depth > 0 => {
                    self.skip_depth -= 1;
                    if self.skip_depth == 0 {
                        return self.skipped(i + 1);
                    }
                }
                // The end of a scalar: the separator is the member's container's.
                b',' | b'}' | b']' if self.skip_depth == 0 => {
                    self.skipping = false;
                    self.dropped();
                    self.token(c, out);
                    return i + 1;
                }
                _ => {}
            }
            i += 1;
        }
        input.len()
    }

    /// The dropped value ended before `i`.
    fn skipped(&mut self, i: usize) -> usize {
        self.skipping = false;
        self.dropped();
        i
    }

    fn dropped(&mut self) {
        if let Some(top) = self.stack.last_mut() {
            top.dropping = false;
            top.expect = Expect::Next;
        }
    }
}

/// The index of the closing quote in `s` (escapes skipped), carrying an escape across chunks.
fn find_quote_or_escape(s: &[u8], escape: &mut bool) -> Option<usize> {
    let mut i = 0;
    while i < s.len() {
        if *escape {
            *escape = false;
            i += 1;
            continue;
        }
        match memchr::memchr2(b'"', b'\\', &s[i..]) {
            None => return None,
            Some(j) => {
                if s[i + j] == b'"' {
                    return Some(i + j);
                }
                *escape = true;
                i += j + 1;
            }
        }
    }
    None
}

/// A response body without the `managedFields` of the objects in it (or unchanged, if not
/// `enabled`).
pub(crate) struct Filtered<B> {
    inner: B,
    scanner: Option<Scanner>,
}

impl<B> Filtered<B> {
    pub(crate) fn new(inner: B, enabled: bool) -> Self {
        Self {
            inner,
            scanner: enabled.then(Scanner::default),
        }
    }
}

impl<B> Body for Filtered<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.get_mut();
        loop {
            let frame = match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => frame,
                other => return other,
            };
            let Some(scanner) = &mut this.scanner else {
                return Poll::Ready(Some(Ok(frame)));
            };
            match frame.into_data() {
                Ok(data) => {
                    let mut out = Vec::with_capacity(data.len());
                    scanner.feed(&data, &mut out);
                    if out.is_empty() {
                        continue; // all of it dropped: read on
                    }
                    return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
                }
                Err(frame) => return Poll::Ready(Some(Ok(frame))),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        // Smaller than the inner body's by an unknown amount.
        let mut hint = SizeHint::new();
        if let Some(upper) = self.inner.size_hint().upper() {
            hint.set_upper(upper);
        }
        hint
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn filter_in_chunks(input: &str, chunk: usize) -> String {
        let mut scanner = Scanner::default();
        let mut out = Vec::new();
        for part in input.as_bytes().chunks(chunk) {
            scanner.feed(part, &mut out);
        }
        String::from_utf8(out).expect("utf-8 kept")
    }

    fn managed() -> Value {
        json!([{ "manager": "kubectl", "operation": "Apply", "fieldsType": "FieldsV1",
                 "fieldsV1": { "f:metadata": { "f:labels": { "f:a\"}]{[": {} } } } }])
    }

    fn object(name: &str, managed_first: bool) -> Value {
        let mut meta = serde_json::Map::new();
        if managed_first {
            meta.insert("managedFields".into(), managed());
        }
        meta.insert("name".into(), json!(name));
        meta.insert("labels".into(), json!({ "managedFields": "a label, kept" }));
        if !managed_first {
            meta.insert("managedFields".into(), managed());
        }
        json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
                "data": { "metadata": "{\"managedFields\": 1}", "managedFields": "x,}]" },
                "spec": { "metadata": { "managedFields": ["kept: not an object's metadata"] } } })
    }

    fn without_managed(mut v: Value) -> Value {
        v["metadata"]
            .as_object_mut()
            .expect("metadata")
            .remove("managedFields");
        v
    }

    #[test]
    fn managed_fields_should_go_from_objects_lists_and_watch_events_and_nothing_else() {
        let single = object("a", false);
        let list = json!({ "kind": "ConfigMapList", "metadata": { "resourceVersion": "7" },
                           "items": [object("a", true), object("b", false), { "metadata": { "managedFields": null } }] });
        let events = [
            json!({ "type": "ADDED", "object": object("a", false) }),
            json!({ "type": "MODIFIED", "object": object("b", true) }),
            json!({ "type": "BOOKMARK", "object": { "metadata": { "resourceVersion": "9" } } }),
        ];
        let stream: String = events.iter().map(|e| format!("{e}\n")).collect();
        for chunk in [1, 2, 3, 7, 64, 100_000] {
            let text = filter_in_chunks(&single.to_string(), chunk);
            let got: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
            assert_eq!(got, without_managed(single.clone()), "chunk {chunk}");

            let got: Value = serde_json::from_str(&filter_in_chunks(&list.to_string(), chunk))
                .expect("valid JSON");
            let mut want = list.clone();
            for item in want["items"].as_array_mut().expect("items") {
                *item = without_managed(item.clone());
            }
            assert_eq!(got, want, "chunk {chunk}");

            let filtered = filter_in_chunks(&stream, chunk);
            let lines: Vec<Value> = filtered
                .lines()
                .map(|l| serde_json::from_str(l).expect("one event per line"))
                .collect();
            assert_eq!(lines.len(), 3);
            for (got, sent) in lines.iter().zip(&events) {
                let mut want = sent.clone();
                want["object"] = without_managed(want["object"].clone());
                assert_eq!(got, &want, "chunk {chunk}");
            }
        }
    }

    #[test]
    fn a_status_or_text_should_pass_unchanged() {
        let status = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (2)","reason":"Expired","code":410}"#;
        assert_eq!(filter_in_chunks(status, 5), status);
        assert_eq!(
            filter_in_chunks("404 page not found\n", 3),
            "404 page not found\n"
        );
    }
}

/// Property tests: random Kubernetes-like responses (objects, lists, watch streams; strings with
/// escapes, quotes, brackets and non-ASCII text; `managedFields` and `metadata` keys in places
/// where they must stay), cut into chunks at random bytes.
#[cfg(test)]
mod properties {
    use proptest::prelude::*;
    use proptest::sample::Index;
    use serde_json::{Map, Value, json};

    use super::*;

    /// Short strings, often with what a scanner must not take for structure.
    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => "[a-z]{0,6}",
            3 => "[a-zA-Z0-9 \"\\\\{}\\[\\]:,./\\x00-\\x1f\\x7fé☃😀]{0,10}",
            1 => Just("managedFields".to_owned()),
            1 => Just("metadata".to_owned()),
            1 => Just("\\\"}],{[".to_owned()),
        ]
    }

    /// Object keys: the ones that matter to the scanner, and anything else.
    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            1 => Just("metadata".to_owned()),
            1 => Just("managedFields".to_owned()),
            1 => Just("items".to_owned()),
            1 => Just("object".to_owned()),
            4 => text(),
        ]
    }

    fn object(members: Vec<(String, Value)>) -> Value {
        Value::Object(members.into_iter().collect())
    }

    /// Any JSON value, nested a few levels.
    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            prop::num::f64::NORMAL.prop_map(Value::from),
            text().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec((key(), inner), 0..4).prop_map(object),
            ]
        })
    }

    /// A `managedFields` value: usually the apiserver's entries, sometimes anything.
    fn managed_fields() -> impl Strategy<Value = Value> {
        let entry = (text(), any_json()).prop_map(|(manager, fields)| {
            json!({ "manager": manager, "operation": "Update", "apiVersion": "v1",
                    "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": fields })
        });
        prop_oneof![
            3 => prop::collection::vec(entry, 0..3).prop_map(Value::Array),
            1 => any_json(),
        ]
    }

    /// An object's metadata, with or without managedFields (among other members, anywhere).
    fn metadata() -> impl Strategy<Value = Value> {
        (
            "[a-z0-9-]{1,8}",
            prop::collection::vec((key(), any_json()), 0..3),
            prop::option::weighted(0.8, managed_fields()),
        )
            .prop_map(|(name, extra, managed)| {
                let mut meta = Map::new();
                meta.insert("name".into(), Value::String(name));
                meta.extend(extra);
                if let Some(managed) = managed {
                    meta.insert("managedFields".into(), managed);
                }
                Value::Object(meta)
            })
    }

    /// An object of the API; its extra members may replace its metadata with anything.
    fn resource() -> impl Strategy<Value = Value> {
        (
            metadata(),
            any_json(),
            any_json(),
            prop::collection::vec((key(), any_json()), 0..3),
        )
            .prop_map(|(metadata, spec, status, extra)| {
                let mut members = vec![
                    ("apiVersion".to_owned(), json!("example.dev/v1")),
                    ("kind".to_owned(), json!("Thing")),
                    ("metadata".to_owned(), metadata),
                    ("spec".to_owned(), spec),
                    ("status".to_owned(), status),
                ];
                members.extend(extra);
                object(members)
            })
    }

    /// One response document: an object, a list, a watch event or any JSON.
    fn document() -> impl Strategy<Value = Value> {
        let item = prop_oneof![4 => resource(), 1 => any_json()];
        let event = prop_oneof![
            Just("ADDED"),
            Just("MODIFIED"),
            Just("DELETED"),
            Just("BOOKMARK")
        ];
        prop_oneof![
            2 => resource(),
            2 => (metadata(), prop::collection::vec(item, 0..4)).prop_map(|(metadata, items)| {
                json!({ "kind": "ThingList", "apiVersion": "example.dev/v1", "metadata": metadata, "items": items })
            }),
            2 => (event, prop_oneof![4 => resource(), 1 => any_json()])
                .prop_map(|(kind, object)| json!({ "type": kind, "object": object })),
            1 => any_json(),
        ]
    }

    /// A response body: one document, or a watch stream of several, one a line (or pretty
    /// printed, for whitespace outside strings).
    fn body() -> impl Strategy<Value = Vec<u8>> {
        (
            prop::collection::vec(document(), 1..4),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(documents, pretty, trailing_newline)| {
                let mut body = Vec::new();
                for (i, document) in documents.iter().enumerate() {
                    if i > 0 {
                        body.push(b'\n');
                    }
                    let text = if pretty {
                        serde_json::to_vec_pretty(document)
                    } else {
                        serde_json::to_vec(document)
                    };
                    body.extend(text.expect("a Value serializes"));
                }
                if trailing_newline {
                    body.push(b'\n');
                }
                body
            })
    }

    /// Where the body is cut into chunks.
    #[derive(Clone, Debug)]
    enum Cuts {
        /// Chunks of this many bytes.
        Every(usize),
        /// At these places.
        At(Vec<Index>),
    }

    fn cuts() -> impl Strategy<Value = Cuts> {
        prop_oneof![
            1 => (1_usize..4).prop_map(Cuts::Every),
            3 => prop::collection::vec(any::<Index>(), 0..24).prop_map(Cuts::At),
        ]
    }

    fn chunks(body: &[u8], cuts: &Cuts) -> Vec<Vec<u8>> {
        match cuts {
            Cuts::Every(n) => body.chunks(*n).map(<[u8]>::to_vec).collect(),
            Cuts::At(at) => {
                let mut at: Vec<usize> = at.iter().map(|i| i.index(body.len() + 1)).collect();
                at.extend([0, body.len()]);
                at.sort_unstable();
                at.dedup();
                at.windows(2).map(|w| body[w[0]..w[1]].to_vec()).collect()
            }
        }
    }

    fn filter(chunks: &[Vec<u8>]) -> Vec<u8> {
        let mut scanner = Scanner::default();
        let mut out = Vec::new();
        for chunk in chunks {
            scanner.feed(chunk, &mut out);
        }
        out
    }

    fn documents(bytes: &[u8]) -> Result<Vec<Value>, serde_json::Error> {
        serde_json::Deserializer::from_slice(bytes)
            .into_iter::<Value>()
            .collect()
    }

    /// What serde sees without managedFields at the documented places: `metadata`,
    /// `items[*].metadata` and `object.metadata` of a document that is an object.
    fn without_managed_fields(mut document: Value) -> Value {
        fn strip(resource: &mut Value) {
            if let Some(metadata) = resource.get_mut("metadata").and_then(Value::as_object_mut) {
                metadata.remove("managedFields");
            }
        }
        strip(&mut document);
        if let Some(items) = document.get_mut("items").and_then(Value::as_array_mut) {
            items.iter_mut().for_each(strip);
        }
        if let Some(object) = document.get_mut("object") {
            strip(object);
        }
        document
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Cut anywhere, a body filters to the same bytes as whole, and those bytes decode to
        /// what serde decodes from the body with managedFields removed where documented (a
        /// `managedFields` anywhere else stays).
        #[test]
        fn filtered_chunks_should_decode_as_serde_without_managed_fields(body in body(), cuts in cuts()) {
            let whole = filter(std::slice::from_ref(&body));
            let cut = filter(&chunks(&body, &cuts));
            prop_assert_eq!(
                String::from_utf8_lossy(&cut),
                String::from_utf8_lossy(&whole),
                "the chunks' output differs from the whole body's"
            );
            let want: Vec<Value> = documents(&body)
                .expect("the body is JSON")
                .into_iter()
                .map(without_managed_fields)
                .collect();
            let got = documents(&cut);
            prop_assert!(got.is_ok(), "not JSON ({:?}): {}", got, String::from_utf8_lossy(&cut));
            prop_assert_eq!(got.expect("checked"), want);
        }
    }
}
