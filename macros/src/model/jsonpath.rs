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
