//! The JSONPath of a printer column as the apiserver reads it. The apiserver's validation only
//! wants a leading `.`; its table printer (`tableconvertor.New`) then parses `{<path>}` with
//! client-go's `k8s.io/client-go/util/jsonpath`, column by column, and at the first that does not
//! parse silently gives up: that column and the ones after it are not shown. This is a port of
//! that parser (`parser.go`: the same grammar, the same error messages), and the lowering of what
//! it parses into the steps kubeforge resolves at compile time.

/// A node of client-go's parse tree (inside an action `{...}`).
#[derive(Clone, Debug, PartialEq)]
enum Node {
    /// A quoted string (unquoted).
    Text(String),
    /// `.name` or `['name']` (backslash escapes removed).
    Field(String),
    /// `.*`
    Wildcard,
    /// A bare word other than `true`/`false`.
    Identifier,
    Int,
    Float,
    Bool,
    /// `[n]`, `[a:b]`, `[a:b:c]`, `[*]`.
    Array,
    /// `[a,b]`
    Union,
    /// `[?(...)]`: `raw` is the source text, `op` is `exists` without an operator.
    Filter {
        raw: String,
        left: Vec<Node>,
        op: String,
        right: Vec<Node>,
    },
    /// `..`
    Recursive,
}

/// What the top level of a template holds: text, and actions `{...}`.
#[derive(Debug, PartialEq)]
enum Top {
    Text,
    Action(Vec<Node>),
}

struct Parser {
    input: Vec<char>,
    pos: usize,
    start: usize,
    width: usize,
}

fn is_terminator(c: Option<char>) -> bool {
    matches!(
        c,
        None | Some(' ' | '\t' | '\r' | '\n' | '.' | ',' | '[' | ']' | '$' | '@' | '{' | '}')
    )
}

fn is_alphanumeric(c: char) -> bool {
    c == '_' || c.is_alphabetic() || c.is_numeric()
}

/// Go's `%#U`: `U+007B '{'`.
fn go_char(c: char) -> String {
    format!("U+{:04X} '{c}'", u32::from(c))
}

impl Parser {
    fn new(text: &str) -> Self {
        Parser {
            input: text.chars().collect(),
            pos: 0,
            start: 0,
            width: 0,
        }
    }

    fn next(&mut self) -> Option<char> {
        let c = self.input.get(self.pos).copied();
        self.width = usize::from(c.is_some());
        self.pos += self.width;
        c
    }

    fn peek(&mut self) -> Option<char> {
        let c = self.next();
        self.backup();
        c
    }

    fn backup(&mut self) {
        self.pos -= self.width;
    }

    fn starts_with(&self, prefix: &str) -> bool {
        let rest = &self.input[self.pos.min(self.input.len())..];
        prefix.chars().count() <= rest.len() && prefix.chars().zip(rest).all(|(a, b)| a == *b)
    }

    fn consume(&mut self) -> String {
        let value = self.input[self.start..self.pos].iter().collect();
        self.start = self.pos;
        value
    }

    /// Whether the character before the last one read is a backslash (Go: `input[pos-2]`).
    fn escaped(&self) -> bool {
        self.pos >= 2 && self.input[self.pos - 2] == '\\'
    }

    /// `Parse`: text and actions.
    fn parse(mut self) -> Result<Vec<Top>, String> {
        let mut root = Vec::new();
        loop {
            loop {
                if self.starts_with("{") {
                    if self.pos > self.start {
                        self.consume();
                        root.push(Top::Text);
                    }
                    break;
                }
                if self.next().is_none() {
                    if self.pos > self.start {
                        self.consume();
                        root.push(Top::Text);
                    }
                    return Ok(root);
                }
            }
            self.pos += 1;
            self.consume();
            let mut action = Vec::new();
            self.inside_action(&mut action)?;
            root.push(Top::Action(action));
        }
    }

    /// `parseInsideAction`, up to and including the closing `}`.
    fn inside_action(&mut self, cur: &mut Vec<Node>) -> Result<(), String> {
        loop {
            if self.starts_with("}") {
                self.pos += 1;
                self.consume();
                return Ok(());
            }
            if self.starts_with("[?(") {
                self.filter(cur)?;
                continue;
            }
            if self.starts_with("..") {
                self.recursive(cur)?;
                continue;
            }
            match self.next() {
                None | Some('\r' | '\n') => return Err("unclosed action".into()),
                Some(' ' | '@' | '$') => {
                    self.consume();
                }
                Some('[') => self.array(cur)?,
                Some(quote @ ('"' | '\'')) => self.quote(cur, quote)?,
                Some('.') => self.field(cur),
                Some(c) if c == '+' || c == '-' || c.is_ascii_digit() => {
                    self.backup();
                    self.number(cur)?;
                }
                Some(c) if is_alphanumeric(c) => {
                    self.backup();
                    self.identifier(cur);
                }
                Some(c) => {
                    return Err(format!("unrecognized character in action: {}", go_char(c)));
                }
            }
        }
    }

    fn identifier(&mut self, cur: &mut Vec<Node>) {
        loop {
            let c = self.next();
            if is_terminator(c) {
                self.backup();
                break;
            }
        }
        let value = self.consume();
        cur.push(match value.as_str() {
            "true" | "false" => Node::Bool,
            _ => Node::Identifier,
        });
    }

    fn recursive(&mut self, cur: &mut Vec<Node>) -> Result<(), String> {
        if cur.last() == Some(&Node::Recursive) {
            return Err("invalid multiple recursive descent".into());
        }
        self.pos += 2;
        self.consume();
        cur.push(Node::Recursive);
        if self.peek().is_some_and(is_alphanumeric) {
            self.field(cur);
        }
        Ok(())
    }

    fn number(&mut self, cur: &mut Vec<Node>) -> Result<(), String> {
        if matches!(self.peek(), Some('+' | '-')) {
            self.next();
        }
        loop {
            match self.next() {
                Some(c) if c == '.' || c.is_ascii_digit() => {}
                _ => {
                    self.backup();
                    break;
                }
            }
        }
        let value = self.consume();
        if value.parse::<i64>().is_ok() {
            cur.push(Node::Int);
        } else if value.parse::<f64>().is_ok() {
            cur.push(Node::Float);
        } else {
            return Err(format!("cannot parse number {value}"));
        }
        Ok(())
    }

    fn array(&mut self, cur: &mut Vec<Node>) -> Result<(), String> {
        loop {
            match self.next() {
                None | Some('\n') => return Err("unterminated array".into()),
                Some(']') => break,
                Some(_) => {}
            }
        }
        let text = self.consume();
        let mut text = text[1..text.len() - 1].to_owned();
        if text == "*" {
            text = ":".into();
        }
        let parts: Vec<&str> = text.split(',').collect();
        if parts.len() > 1 {
            for part in parts {
                parse_action(&format!("[{}]", part.trim_matches(' ')))?;
            }
            cur.push(Node::Union);
            return Ok(());
        }
        // `['key']`: a field.
        if let Some(key) = text
            .strip_prefix('\'')
            .and_then(|t| t.strip_suffix('\''))
            .filter(|k| !k.contains('\''))
        {
            cur.extend(parse_action(&format!(".{key}"))?);
            return Ok(());
        }
        slice(&text)?;
        cur.push(Node::Array);
        Ok(())
    }

    fn filter(&mut self, cur: &mut Vec<Node>) -> Result<(), String> {
        let raw_start = self.pos;
        self.pos += 3;
        self.consume();
        let (mut begin, mut end, mut pair) = (false, false, '"');
        loop {
            let c = self.next();
            match c {
                None | Some('\n') => return Err("unterminated filter".into()),
                Some(q @ ('"' | '\'')) => {
                    if !begin {
                        begin = true;
                        pair = q;
                        continue;
                    }
                    if !self.escaped() && q == pair {
                        end = true;
                    }
                }
                Some(')') if begin == end => break,
                Some(_) => {}
            }
        }
        if self.next() != Some(']') {
            return Err("unclosed array expect ]".into());
        }
        let raw: String = self.input[raw_start..self.pos].iter().collect();
        let text = self.consume();
        let text: String = {
            let chars: Vec<char> = text.chars().collect();
            chars[..chars.len() - 2].iter().collect()
        };
        let node = match split_comparison(&text) {
            None => Node::Filter {
                raw,
                left: parse_action(&text)?,
                op: "exists".into(),
                right: Vec::new(),
            },
            Some((left, op, right)) => Node::Filter {
                raw,
                left: parse_action(left)?,
                op: op.into(),
                right: parse_action(right)?,
            },
        };
        cur.push(node);
        Ok(())
    }

    fn quote(&mut self, cur: &mut Vec<Node>, end: char) -> Result<(), String> {
        loop {
            match self.next() {
                None | Some('\n') => return Err("unterminated quoted string".into()),
                Some(c) if c == end && !self.escaped() => break,
                Some(_) => {}
            }
        }
        let value = self.consume();
        let text = unquote(&value)
            .ok_or_else(|| format!("unquote string {value} error invalid syntax"))?;
        cur.push(Node::Text(text));
        Ok(())
    }

    fn field(&mut self, cur: &mut Vec<Node>) {
        self.consume();
        loop {
            let c = self.next();
            if c == Some('\\') {
                self.next();
            } else if is_terminator(c) {
                self.backup();
                break;
            }
        }
        let value = self.consume();
        cur.push(if value == "*" {
            Node::Wildcard
        } else {
            Node::Field(value.replace('\\', ""))
        });
    }
}

/// `parseAction`: the nodes of `{text}`.
fn parse_action(text: &str) -> Result<Vec<Node>, String> {
    let root = Parser::new(&format!("{{{text}}}")).parse()?;
    match root.into_iter().next() {
        Some(Top::Action(nodes)) => Ok(nodes),
        _ => Ok(Vec::new()),
    }
}

/// `sliceOperatorRex` (`^(-?[\d]*)(:-?[\d]*)?(:-?[\d]*)?$`) and `strconv.Atoi` of each part.
fn slice(text: &str) -> Result<(), String> {
    let parts: Vec<&str> = text.split(':').collect();
    let well_formed = parts.len() <= 3
        && parts.iter().all(|p| {
            let digits = p.strip_prefix('-').unwrap_or(p);
            digits.chars().all(|c| c.is_ascii_digit())
        });
    if !well_formed {
        return Err(format!("invalid array index {text}"));
    }
    for part in parts.iter().filter(|p| !p.is_empty()) {
        if part.parse::<i64>().is_err() {
            return Err(format!("array index {part} is not a number"));
        }
    }
    Ok(())
}

/// The filter regex `^([^!<>=]+)([!<>=]+)(.+?)$`: `(left, operator, right)`.
fn split_comparison(text: &str) -> Option<(&str, &str, &str)> {
    let is_op = |c: char| "!<>=".contains(c);
    let op_at = text.find(is_op)?;
    if op_at == 0 {
        return None;
    }
    let rest = &text[op_at..];
    let op_len = rest.find(|c: char| !is_op(c)).unwrap_or(rest.len());
    // `.+?` needs one character: the operator gives its last one back.
    let op_len = if op_len == rest.len() {
        if op_len < 2 {
            return None;
        }
        op_len - 1
    } else {
        op_len
    };
    Some((&text[..op_at], &rest[..op_len], &rest[op_len..]))
}

/// `UnquoteExtend` (Go's `strconv.Unquote` with single quotes): `None` on invalid syntax.
fn unquote(s: &str) -> Option<String> {
    let quote = s.chars().next()?;
    let inner = s.strip_prefix(quote)?.strip_suffix(quote)?;
    if s.chars().count() < 2 || !matches!(quote, '"' | '\'') {
        return None;
    }
    let mut out = String::new();
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        if c == quote {
            return None;
        }
        if c != '\\' {
            out.push(c);
            continue;
        }
        let escape = chars.next()?;
        let mut hex = |n: usize| -> Option<u32> {
            (0..n).try_fold(0u32, |v, _| Some(v << 4 | chars.next()?.to_digit(16)?))
        };
        match escape {
            'a' => out.push('\u{7}'),
            'b' => out.push('\u{8}'),
            'f' => out.push('\u{c}'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'v' => out.push('\u{b}'),
            '\\' => out.push('\\'),
            'x' => out.push(char::from_u32(hex(2)?)?),
            'u' => out.push(char::from_u32(hex(4)?)?),
            'U' => out.push(char::from_u32(hex(8)?)?),
            '0'..='7' => {
                let mut v = escape.to_digit(8)?;
                for _ in 0..2 {
                    v = v << 3 | chars.next()?.to_digit(8)?;
                }
                out.push(char::from_u32(v).filter(|_| v <= 255)?);
            }
            '\'' | '"' if escape == quote => out.push(escape),
            _ => return None,
        }
    }
    Some(out)
}

/// One step of a printer column's JSONPath, as kubeforge resolves it.
#[derive(Clone, Debug, PartialEq)]
pub enum ColumnStep {
    /// `.name`, `['name']`: a field (or a map key).
    Field(String),
    /// `[n]`, `[a:b]`, `[*]`: elements of a list.
    Elements,
    /// `[?(...)]`: the elements of a list that pass the filter.
    Filter(Filter),
    /// What the apiserver parses but kubeforge cannot resolve at compile time (it needs
    /// `unchecked`): how to name it in a message.
    Opaque(String),
}

/// A filter `[?(@.a.b OP literal)]`, `[?(@.a == @.b)]` or `[?(@.a)]` (the field exists).
#[derive(Clone, Debug, PartialEq)]
pub struct Filter {
    /// The filter as written, `[?(...)]`.
    pub raw: String,
    /// The fields of the element the left side reads (empty: the element itself).
    pub left: Vec<String>,
    /// The comparison; `None` for an existence test.
    pub compare: Option<(CompareOp, Operand)>,
}

/// A comparison operator of a filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CompareOp {
    fn parse(op: &str) -> Option<Self> {
        Some(match op {
            "==" => CompareOp::Eq,
            "!=" => CompareOp::Ne,
            "<" => CompareOp::Lt,
            "<=" => CompareOp::Le,
            ">" => CompareOp::Gt,
            ">=" => CompareOp::Ge,
            _ => return None,
        })
    }

    /// `<`, `<=`, `>`, `>=`: they do not apply to booleans.
    pub fn orders(self) -> bool {
        !matches!(self, CompareOp::Eq | CompareOp::Ne)
    }
}

/// The right side of a comparison.
#[derive(Clone, Debug, PartialEq)]
pub enum Operand {
    /// `@.a.b`: fields of the element (empty: the element itself).
    Path(Vec<String>),
    Str(String),
    Int,
    Float,
    Bool,
}

const OPERATORS: &str = "==, !=, <, <=, >, >=";

/// Parses a printer column's JSONPath as the apiserver does; `Err` when the apiserver would
/// refuse it (a missing leading `.`) or its table printer cannot parse it, and for what parses
/// but can never give a value (braces, bare words, unknown filter operators, empty field names).
pub fn parse_column_path(path: &str) -> Result<Vec<ColumnStep>, String> {
    if !path.starts_with('.') {
        return Err("expected a simple path like `.spec.replicas`".into());
    }
    let root = Parser::new(&format!("{{{path}}}")).parse().map_err(|e| {
        format!(
            "the apiserver cannot parse it ({e}) and would show neither this column nor the ones after it"
        )
    })?;
    let nodes = match <[Top; 1]>::try_from(root) {
        Ok([Top::Action(nodes)]) => nodes,
        _ => return Err("`{` and `}` are not part of a printer column's JSONPath".into()),
    };
    nodes.into_iter().map(lower).collect()
}

fn lower(node: Node) -> Result<ColumnStep, String> {
    Ok(match node {
        Node::Field(name) if name.is_empty() => {
            return Err("a field name is missing after a `.`".into());
        }
        Node::Field(name) => ColumnStep::Field(name),
        Node::Array => ColumnStep::Elements,
        Node::Wildcard => ColumnStep::Opaque("the wildcard `.*`".into()),
        Node::Union => ColumnStep::Opaque("a union `[a,b]`".into()),
        Node::Recursive => ColumnStep::Opaque("the recursive descent `..`".into()),
        Node::Filter {
            raw,
            left,
            op,
            right,
        } => lower_filter(raw, left, &op, right)?,
        Node::Text(_) | Node::Int | Node::Float | Node::Bool | Node::Identifier => {
            return Err(
                "a value outside of a filter; expected `.field`, `[index]`, `[*]` or `[?(filter)]`"
                    .into(),
            );
        }
    })
}

fn lower_filter(
    raw: String,
    left: Vec<Node>,
    op: &str,
    right: Vec<Node>,
) -> Result<ColumnStep, String> {
    let opaque = |raw: &str| Ok(ColumnStep::Opaque(format!("the filter `{raw}`")));
    let Some(left) = operand_path(&left)? else {
        return opaque(&raw);
    };
    if op == "exists" {
        return Ok(ColumnStep::Filter(Filter {
            raw,
            left,
            compare: None,
        }));
    }
    let Some(op) = CompareOp::parse(op) else {
        return Err(format!(
            "the filter `{raw}` compares with `{op}`, which the apiserver does not evaluate; expected one of {OPERATORS}"
        ));
    };
    let right = match right.as_slice() {
        [] => return Err(format!("the filter `{raw}` has nothing to compare with")),
        [Node::Text(s)] => Operand::Str(s.clone()),
        [Node::Int] => Operand::Int,
        [Node::Float] => Operand::Float,
        [Node::Bool] => Operand::Bool,
        nodes => match operand_path(nodes)? {
            Some(path) => Operand::Path(path),
            None => return opaque(&raw),
        },
    };
    Ok(ColumnStep::Filter(Filter {
        raw,
        left,
        compare: Some((op, right)),
    }))
}

/// The fields an operand reads (`@.a.b`; `@` alone reads the element); `None` when it is not
/// a path of fields.
fn operand_path(nodes: &[Node]) -> Result<Option<Vec<String>>, String> {
    let mut fields = Vec::new();
    for node in nodes {
        match node {
            Node::Field(name) if name.is_empty() => {
                return Err("a field name is missing after a `.` in a filter".into());
            }
            Node::Field(name) => fields.push(name.clone()),
            _ => return Ok(None),
        }
    }
    Ok(Some(fields))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(name: &str) -> ColumnStep {
        ColumnStep::Field(name.into())
    }

    #[test]
    fn simple_paths_should_be_fields_and_elements() {
        assert_eq!(
            parse_column_path(".spec.ports[0].number"),
            Ok(vec![
                field("spec"),
                field("ports"),
                ColumnStep::Elements,
                field("number")
            ])
        );
        for elements in ["[*]", "[-1]", "[1:3]", "[::2]", "[]"] {
            let path = format!(".spec.a{elements}");
            assert_eq!(
                parse_column_path(&path).map(|s| s.len()),
                Ok(3),
                "{elements}"
            );
        }
        assert_eq!(
            parse_column_path(r".spec.labels.app\.kubernetes\.io/name['x.y']"),
            Ok(vec![
                field("spec"),
                field("labels"),
                field("app.kubernetes.io/name"),
                field("x"),
                field("y"),
            ])
        );
    }

    #[test]
    fn the_ready_filter_should_read_type_and_compare_a_string() {
        let steps = parse_column_path(r#".status.conditions[?(@.type=="Ready")].status"#);
        assert_eq!(
            steps,
            Ok(vec![
                field("status"),
                field("conditions"),
                ColumnStep::Filter(Filter {
                    raw: r#"[?(@.type=="Ready")]"#.into(),
                    left: vec!["type".into()],
                    compare: Some((CompareOp::Eq, Operand::Str("Ready".into()))),
                }),
                field("status"),
            ])
        );
    }

    #[test]
    fn filters_should_take_every_operator_literal_and_spacing() {
        let compare = |path: &str| match parse_column_path(path).map(|mut s| s.remove(2)) {
            Ok(ColumnStep::Filter(f)) => f.compare,
            other => panic!("{path}: {other:?}"),
        };
        assert_eq!(
            compare(".spec.a[?(@.n >= 10)]"),
            Some((CompareOp::Ge, Operand::Int))
        );
        assert_eq!(
            compare(".spec.a[?(@.n<-1.5)]"),
            Some((CompareOp::Lt, Operand::Float))
        );
        assert_eq!(
            compare(".spec.a[?(@.on != false)]"),
            Some((CompareOp::Ne, Operand::Bool))
        );
        assert_eq!(
            compare(r".spec.a[?(@.s == 'it\'s )')]"),
            Some((CompareOp::Eq, Operand::Str("it's )".into())))
        );
        assert_eq!(
            compare(".spec.a[?(@.x.y == @.z)]"),
            Some((CompareOp::Eq, Operand::Path(vec!["z".into()])))
        );
        assert_eq!(compare(".spec.a[?(@.x)]"), None);
        assert_eq!(
            compare(".spec.a[?(@ == 'v')]"),
            Some((CompareOp::Eq, Operand::Str("v".into())))
        );
    }

    #[test]
    fn what_cannot_be_checked_should_be_opaque() {
        for path in [
            "..name",
            ".spec..name",
            ".spec.*",
            ".spec.a[0,1]",
            ".spec.a[?(@.b[0] == 1)]",
        ] {
            let steps = parse_column_path(path).unwrap_or_else(|e| panic!("{path}: {e}"));
            assert!(
                steps.iter().any(|s| matches!(s, ColumnStep::Opaque(_))),
                "{path}: {steps:?}"
            );
        }
    }

    #[test]
    fn what_the_apiserver_cannot_parse_should_be_refused_with_its_message() {
        for (path, message) in [
            (
                r#".status.conditions[?(@.type=="Ready").status"#,
                "the apiserver cannot parse it (unclosed array expect ])",
            ),
            (
                r#".status.conditions[?(@.type=="Ready)].status"#,
                "the apiserver cannot parse it (unterminated filter)",
            ),
            (
                ".spec.a[?(@.b == 1)x",
                "the apiserver cannot parse it (unclosed array expect ])",
            ),
            (
                ".spec.a[0",
                "the apiserver cannot parse it (unterminated array)",
            ),
            (
                ".spec.a[x]",
                "the apiserver cannot parse it (invalid array index x)",
            ),
            (
                ".spec.a[1:2:3:4]",
                "the apiserver cannot parse it (invalid array index 1:2:3:4)",
            ),
            (
                ".spec.a[?(@.b == \"x)]",
                "the apiserver cannot parse it (unterminated filter)",
            ),
            (
                ".spec.a[?(@.b == 'x\\q')]",
                r"the apiserver cannot parse it (unquote string 'x\q' error invalid syntax)",
            ),
            (
                ".spec.a[?(@.b == 1.2.3)]",
                "the apiserver cannot parse it (cannot parse number 1.2.3)",
            ),
            (
                ".spec.a[?(== 1)]",
                "the apiserver cannot parse it (unrecognized character in action: U+003D '=')",
            ),
            (
                ".spec.a[0]#",
                "the apiserver cannot parse it (unrecognized character in action: U+0023 '#')",
            ),
            (
                "....a",
                "the apiserver cannot parse it (invalid multiple recursive descent)",
            ),
            (
                ".spec.a}{.b",
                "`{` and `}` are not part of a printer column's JSONPath",
            ),
            ("spec.a", "expected a simple path like `.spec.replicas`"),
            (".spec.", "a field name is missing after a `.`"),
            (
                ".spec.a[?(@.b = 1)]",
                "the filter `[?(@.b = 1)]` compares with `=`, which the apiserver does not evaluate; expected one of ==, !=, <, <=, >, >=",
            ),
            (
                ".spec.a 'x'",
                "a value outside of a filter; expected `.field`, `[index]`, `[*]` or `[?(filter)]`",
            ),
        ] {
            let expected = if message.starts_with("the apiserver cannot parse it") {
                format!("{message} and would show neither this column nor the ones after it")
            } else {
                message.to_owned()
            };
            assert_eq!(parse_column_path(path), Err(expected), "{path}");
        }
    }

    #[test]
    fn split_comparison_should_match_the_filter_regex() {
        assert_eq!(split_comparison("@.a==1"), Some(("@.a", "==", "1")));
        assert_eq!(split_comparison("@.a=="), Some(("@.a", "=", "=")));
        assert_eq!(split_comparison("@.a="), None);
        assert_eq!(split_comparison("==1"), None);
        assert_eq!(split_comparison("@.a"), None);
    }
}

/// Property tests: printer-column paths generated together with the steps they must parse to
/// (escaped field names, `['key']`, indexes and slices, filters with every operator and kind of
/// literal, the forms kubeforge leaves opaque), simple paths that both parsers must read alike,
/// and arbitrary text (token soup, valid paths with random edits), which parses or is refused but
/// never panics.
#[cfg(test)]
mod properties {
    use proptest::prelude::*;
    use proptest::sample::{Index, select};

    use super::*;
    use crate::model::parse_path;

    /// A piece of a generated path: its text and the steps it parses to.
    #[derive(Clone, Debug)]
    struct Piece {
        text: String,
        steps: Vec<ColumnStep>,
    }

    impl Piece {
        fn new(text: impl Into<String>, steps: Vec<ColumnStep>) -> Self {
            Self {
                text: text.into(),
                steps,
            }
        }

        fn join(pieces: Vec<Piece>) -> Piece {
            pieces
                .into_iter()
                .fold(Piece::new("", Vec::new()), |mut all, p| {
                    all.text.push_str(&p.text);
                    all.steps.extend(p.steps);
                    all
                })
        }
    }

    /// What ends a field name unless escaped (`is_terminator`).
    const TERMINATORS: &str = " \t\r\n.,[]$@{}";

    fn chars(set: &str) -> impl Strategy<Value = char> + use<> {
        select(set.chars().collect::<Vec<_>>())
    }

    /// A name for the `['name']` and filter forms: letters, digits, `_`, `-`, `/`.
    fn plain_name() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9_/-]{1,6}"
    }

    /// `.name`: any character but a backslash, each escaped by chance and terminators always
    /// (a lone `*` too: unescaped it is the wildcard).
    fn dotted_field() -> impl Strategy<Value = Piece> {
        let c = prop_oneof![
            6 => prop::char::range('a', 'z'),
            2 => chars(TERMINATORS),
            2 => chars("-_/*'\"()?!=<>:~+0129"),
            1 => chars("éß☃😀Ω"),
        ];
        prop::collection::vec((c, prop::bool::weighted(0.1)), 1..8).prop_map(|name| {
            let lone_star = name.len() == 1 && name[0].0 == '*';
            let mut text = String::from(".");
            for &(c, escape) in &name {
                if escape || lone_star || TERMINATORS.contains(c) {
                    text.push('\\');
                }
                text.push(c);
            }
            let name: String = name.into_iter().map(|(c, _)| c).collect();
            Piece::new(text, vec![ColumnStep::Field(name)])
        })
    }

    /// `['a.b']`: a field per dotted part.
    fn bracket_field() -> impl Strategy<Value = Piece> {
        prop::collection::vec(plain_name(), 1..3).prop_map(|parts| {
            let text = format!("['{}']", parts.join("."));
            Piece::new(text, parts.into_iter().map(ColumnStep::Field).collect())
        })
    }

    fn bound() -> impl Strategy<Value = String> {
        prop_oneof![
            1 => Just(String::new()),
            3 => any::<i64>().prop_map(|n| n.to_string()),
            2 => (-5_i64..5).prop_map(|n| n.to_string()),
        ]
    }

    /// What a `[...]` of elements holds: an index, a slice, `*`, nothing.
    fn index() -> impl Strategy<Value = String> {
        prop_oneof![
            1 => Just("*".to_owned()),
            1 => Just(String::new()),
            3 => any::<i64>().prop_map(|n| n.to_string()),
            2 => (bound(), bound()).prop_map(|(a, b)| format!("{a}:{b}")),
            2 => (bound(), bound(), bound()).prop_map(|(a, b, c)| format!("{a}:{b}:{c}")),
        ]
    }

    fn elements() -> impl Strategy<Value = Piece> {
        index().prop_map(|i| Piece::new(format!("[{i}]"), vec![ColumnStep::Elements]))
    }

    /// `[a,b]`: indexes, slices and quoted names, with spaces around the commas.
    fn union() -> impl Strategy<Value = Piece> {
        let part = prop_oneof![index(), plain_name().prop_map(|n| format!("'{n}'"))];
        let spaced = (" {0,2}", part, " {0,2}").prop_map(|(a, p, b)| format!("{a}{p}{b}"));
        prop::collection::vec(spaced, 2..4).prop_map(|parts| {
            Piece::new(
                format!("[{}]", parts.join(",")),
                vec![ColumnStep::Opaque("a union `[a,b]`".into())],
            )
        })
    }

    fn wildcard() -> impl Strategy<Value = Piece> {
        Just(Piece::new(
            ".*",
            vec![ColumnStep::Opaque("the wildcard `.*`".into())],
        ))
    }

    /// `..name`
    fn recursive() -> impl Strategy<Value = Piece> {
        "[a-zA-Z0-9_][a-zA-Z0-9_-]{0,5}".prop_map(|name| {
            Piece::new(
                format!("..{name}"),
                vec![
                    ColumnStep::Opaque("the recursive descent `..`".into()),
                    ColumnStep::Field(name),
                ],
            )
        })
    }

    /// One piece of a quoted string: its source and the characters it stands for.
    fn string_atom(quote: char) -> impl Strategy<Value = (String, String)> {
        let other = if quote == '"' { '\'' } else { '"' };
        let same = (format!("\\{quote}"), quote.to_string());
        let escapes = vec![
            ("\\n", "\n"),
            ("\\t", "\t"),
            ("\\a", "\u{7}"),
            ("\\\\", "\\"),
            ("\\x41", "A"),
            ("\\101", "A"),
            ("\\u00e9", "é"),
            ("\\U0001F600", "😀"),
        ];
        let escapes: Vec<(String, String)> = escapes
            .into_iter()
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
            .collect();
        prop_oneof![
            6 => chars("abcXYZ019 ()[]{}@.=!<>,:*?$%é☃").prop_map(|c| (c.to_string(), c.to_string())),
            // What ends a filter outside of a string.
            2 => Just((")]".to_owned(), ")]".to_owned())),
            1 => Just((other.to_string(), other.to_string())),
            2 => Just(same),
            2 => select(escapes),
        ]
    }

    /// `'...'` or `"..."` and its value. client-go takes a quote after an escaped backslash for
    /// an escaped quote, so such a string never ends with `\\`.
    fn string() -> impl Strategy<Value = (String, String)> {
        select(vec!['\'', '"']).prop_flat_map(|quote| {
            prop::collection::vec(string_atom(quote), 0..8).prop_map(move |mut atoms| {
                if atoms.last().is_some_and(|(source, _)| source == "\\\\") {
                    atoms.push(("z".into(), "z".into()));
                }
                let (source, value): (String, String) = atoms.into_iter().unzip();
                (format!("{quote}{source}{quote}"), value)
            })
        })
    }

    /// The right side of a comparison, as text, and its operand.
    fn right() -> impl Strategy<Value = (String, Operand)> {
        prop_oneof![
            3 => string().prop_map(|(source, value)| (source, Operand::Str(value))),
            2 => (any::<i64>(), any::<bool>()).prop_map(|(n, plus)| {
                let sign = if plus && n >= 0 { "+" } else { "" };
                (format!("{sign}{n}"), Operand::Int)
            }),
            1 => "-?[0-9]{1,4}\\.[0-9]{1,4}".prop_map(|f| (f, Operand::Float)),
            1 => "-?[1-9][0-9]{19,24}".prop_map(|big| (big, Operand::Float)),
            1 => select(vec!["true", "false"]).prop_map(|b| (b.to_owned(), Operand::Bool)),
            2 => prop::collection::vec(plain_name(), 1..3).prop_map(|names| {
                (format!("@.{}", names.join(".")), Operand::Path(names))
            }),
        ]
    }

    /// `[?(@.a.b)]`, `[?(@.a OP literal)]`; with an index on the left, opaque.
    fn filter() -> impl Strategy<Value = Piece> {
        let op = select(vec![
            ("==", CompareOp::Eq),
            ("!=", CompareOp::Ne),
            ("<", CompareOp::Lt),
            ("<=", CompareOp::Le),
            (">", CompareOp::Gt),
            (">=", CompareOp::Ge),
        ]);
        let compare = prop::option::weighted(0.8, (" {0,2}", op, " {0,2}", right()));
        (
            prop::collection::vec(plain_name(), 0..3),
            prop::bool::weighted(0.1),
            compare,
        )
            .prop_map(|(left, indexed, compare)| {
                let mut body = String::from("@");
                for name in &left {
                    body.push('.');
                    body.push_str(name);
                }
                if indexed {
                    body.push_str("[0]");
                }
                let compare = compare.map(|(before, (op_text, op), after, (right_text, right))| {
                    body.push_str(&format!("{before}{op_text}{after}{right_text}"));
                    (op, right)
                });
                let raw = format!("[?({body})]");
                let step = if indexed {
                    ColumnStep::Opaque(format!("the filter `{raw}`"))
                } else {
                    ColumnStep::Filter(Filter {
                        raw: raw.clone(),
                        left,
                        compare,
                    })
                };
                Piece::new(raw, vec![step])
            })
    }

    /// A printer column's path: it starts with `.` (a field, `..` or `.*`), then anything.
    fn column_path() -> impl Strategy<Value = Piece> {
        let first = prop_oneof![6 => dotted_field(), 1 => recursive(), 1 => wildcard()];
        let rest = prop_oneof![
            4 => dotted_field(),
            2 => bracket_field(),
            3 => elements(),
            3 => filter(),
            1 => union(),
            1 => wildcard(),
            1 => recursive(),
        ];
        (first, prop::collection::vec(rest, 0..6)).prop_map(|(first, mut rest)| {
            rest.insert(0, first);
            Piece::join(rest)
        })
    }

    /// A simple path (scale, selectable fields): names and `[n]` indexes.
    fn simple_path() -> impl Strategy<Value = String> {
        let step = (
            "[a-zA-Z0-9_-]{1,8}",
            prop::collection::vec("[0-9]{1,4}", 0..3),
        );
        prop::collection::vec(step, 1..5).prop_map(|steps| {
            steps
                .into_iter()
                .map(|(name, indexes)| {
                    let indexes: String = indexes.iter().map(|i| format!("[{i}]")).collect();
                    format!(".{name}{indexes}")
                })
                .collect()
        })
    }

    fn token() -> impl Strategy<Value = &'static str> {
        select(vec![
            ".", "..", "a", "b1", "*", "[", "]", "[?(", ")]", "(", ")", "@", "'", "\"", "\\", "==",
            "!=", "<", ">=", "=", "!", "0", "-1", "1.5", "+", "true", ",", ":", " ", "{", "}", "$",
            "\n", "é", "[*]", "['x']",
        ])
    }

    /// Text that reaches deep into the parser: pieces of JSONPath in any order, mostly after
    /// the leading `.` without which nothing is parsed.
    fn token_soup() -> impl Strategy<Value = String> {
        let tokens = prop::collection::vec(token(), 0..14);
        (prop::bool::weighted(0.9), tokens).prop_map(|(dot, tokens)| {
            let dot = if dot { "." } else { "" };
            format!("{dot}{}", tokens.concat())
        })
    }

    /// Tokens in brackets, filters, quotes and parentheses, nested, often empty: `.[?('')]`.
    fn nested() -> impl Strategy<Value = String> {
        let leaf = token().prop_map(str::to_owned);
        let shape = leaf.prop_recursive(3, 24, 3, |inner| {
            let pair = select(vec![
                ("[", "]"),
                ("[?(", ")]"),
                ("'", "'"),
                ("\"", "\""),
                ("(", ")"),
                ("{", "}"),
            ]);
            let body = prop::collection::vec(inner, 0..3).prop_map(|parts| parts.concat());
            (pair, body).prop_map(|((open, close), body)| format!("{open}{body}{close}"))
        });
        prop::collection::vec(shape, 0..4).prop_map(|shapes| format!(".{}", shapes.concat()))
    }

    #[derive(Clone, Debug)]
    enum Edit {
        Delete(Index),
        Insert(Index, char),
        Replace(Index, char),
    }

    /// A valid path with a few characters deleted, inserted or replaced.
    fn edited_path() -> impl Strategy<Value = String> {
        let c = || chars(".[]()?@'\"\\=!<>*:,{}$ a0-\n");
        let edit = prop_oneof![
            any::<Index>().prop_map(Edit::Delete),
            (any::<Index>(), c()).prop_map(|(i, c)| Edit::Insert(i, c)),
            (any::<Index>(), c()).prop_map(|(i, c)| Edit::Replace(i, c)),
        ];
        let path = prop_oneof![column_path().prop_map(|p| p.text), simple_path()];
        (path, prop::collection::vec(edit, 1..4)).prop_map(|(path, edits)| {
            let mut text: Vec<char> = path.chars().collect();
            for edit in edits {
                match edit {
                    Edit::Delete(i) if !text.is_empty() => {
                        text.remove(i.index(text.len()));
                    }
                    Edit::Insert(i, c) => text.insert(i.index(text.len() + 1), c),
                    Edit::Replace(i, c) if !text.is_empty() => {
                        let at = i.index(text.len());
                        text[at] = c;
                    }
                    Edit::Delete(_) | Edit::Replace(..) => {}
                }
            }
            text.into_iter().collect()
        })
    }

    /// What `expand::paths` makes of a simple path: its steps as column steps.
    fn simple_steps(path: &str) -> Option<Vec<ColumnStep>> {
        let steps = parse_path(path)?;
        Some(
            steps
                .into_iter()
                .flat_map(|s| {
                    std::iter::once(ColumnStep::Field(s.name))
                        .chain(std::iter::repeat_n(ColumnStep::Elements, s.indexes))
                })
                .collect(),
        )
    }

    /// What holds of any text: both parsers return; a simple path is a column path with the
    /// same steps; an accepted column path starts with `.`, names no empty field and quotes its
    /// filters as written.
    fn check_any(text: &str) -> Result<(), TestCaseError> {
        let column = parse_column_path(text);
        if let Some(simple) = simple_steps(text) {
            prop_assert_eq!(
                &column,
                &Ok(simple),
                "a simple path the column parser reads otherwise"
            );
        }
        if let Ok(steps) = &column {
            prop_assert!(text.starts_with('.'));
            for step in steps {
                match step {
                    ColumnStep::Field(name) => prop_assert!(!name.is_empty(), "{:?}", steps),
                    ColumnStep::Filter(f) => prop_assert!(text.contains(&f.raw), "{:?}", f),
                    ColumnStep::Elements | ColumnStep::Opaque(_) => {}
                }
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// A generated path parses to the steps it was generated from.
        #[test]
        fn generated_column_paths_should_parse_to_their_steps(path in column_path()) {
            prop_assert_eq!(parse_column_path(&path.text), Ok(path.steps), "{}", path.text);
        }

        /// A simple path (scale, selectable fields) reads the same with both parsers.
        #[test]
        fn simple_paths_should_read_alike_with_both_parsers(path in simple_path()) {
            prop_assert!(parse_path(&path).is_some(), "{}", path);
            check_any(&path)?;
        }

        /// Any text parses or is refused, and what parses is sound.
        #[test]
        fn any_text_should_parse_or_be_refused(
            text in prop_oneof![
                2 => token_soup(),
                2 => nested(),
                2 => edited_path(),
                1 => any::<String>(),
                1 => "\\.?[a-z0-9_.\\[\\]-]{0,16}",
            ]
        ) {
            check_any(&text)?;
        }
    }
}
