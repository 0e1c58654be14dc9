//! The deterministic fake authorizer of the CEL differential cases
//! (`../shared/cel-differential/README.md`, "The fake authorizer"): its decision depends only on
//! the attributes, and its reason spells them out, so a case shows exactly what celgate's authz
//! library passed to the authorizer.
//!
//! The field and label selectors are parsed here as Kubernetes' authz library parses them
//! before calling its authorizer (`fields.ParseSelector`, `labels.ParseToRequirements` of
//! apimachinery 1.32), with their error texts: celgate hands the raw selector text to the
//! authorizer, and parsing it is the authorizer's business.

use std::sync::OnceLock;

use celgate::cel::k8s::authz::{
    Attributes, AuthorizeError, Authorizer, Decision, Target, UserInfo, Verdict,
};

/// Answers from the attributes alone, for the request's user.
#[derive(Debug)]
pub struct FakeAuthorizer {
    /// The request's user; empty when the case has no request.
    pub user: UserInfo,
}

impl Authorizer for FakeAuthorizer {
    fn authorize(&self, attributes: &Attributes) -> Result<Decision, AuthorizeError> {
        // celgate's own mapping from the principal to a user (`serviceAccount()`), so the
        // reason shows what celgate would send.
        let user = attributes.principal.user(&self.user);
        let mut desc = format!(
            "user={} groups={} verb={}",
            user.username,
            user.groups.join(","),
            attributes.verb
        );
        let (verdict, failed) = match &attributes.target {
            Target::Path(path) => {
                desc.push_str(&format!(" path={path}"));
                if path == "/error" {
                    (Verdict::NoOpinion, true)
                } else if path.starts_with("/admin") {
                    (Verdict::Deny, false)
                } else if path == "/healthz" && attributes.verb == "get" {
                    (Verdict::Allow, false)
                } else {
                    (Verdict::NoOpinion, false)
                }
            }
            Target::Resource(r) => {
                desc.push_str(&format!(
                    " group={} version=* resource={} subresource={} namespace={} name={}",
                    r.group, r.resource, r.subresource, r.namespace, r.name
                ));
                // The library parses a selector only when it is non-empty.
                if let Some(s) = r.field_selector.as_deref().filter(|s| !s.is_empty()) {
                    match parse_field_selector(s) {
                        Err(e) => desc.push_str(&format!(" fieldSelectorError={e}")),
                        Ok(reqs) if !reqs.is_empty() => {
                            desc.push_str(&format!(" fieldSelector={}", reqs.join(",")))
                        }
                        Ok(_) => {}
                    }
                }
                if let Some(s) = r.label_selector.as_deref().filter(|s| !s.is_empty()) {
                    match parse_label_selector(s) {
                        Err(e) => desc.push_str(&format!(" labelSelectorError={e}")),
                        Ok(reqs) if !reqs.is_empty() => {
                            desc.push_str(&format!(" labelSelector={}", reqs.join(",")))
                        }
                        Ok(_) => {}
                    }
                }
                let verb = attributes.verb.as_str();
                if r.resource == "errors" {
                    (Verdict::NoOpinion, true)
                } else if verb == "delete" || r.resource == "secrets" {
                    (Verdict::Deny, false)
                } else if matches!(verb, "get" | "list" | "watch")
                    || (user.username.starts_with("system:serviceaccount:") && verb == "create")
                {
                    (Verdict::Allow, false)
                } else {
                    (Verdict::NoOpinion, false)
                }
            }
        };
        let prefix = match (failed, verdict) {
            (true, _) => "fake error",
            (false, Verdict::Allow) => "fake allow",
            (false, Verdict::Deny) => "fake deny",
            (false, Verdict::NoOpinion) => "fake no opinion",
        };
        Ok(Decision {
            verdict,
            reason: format!("{prefix}: {desc}"),
            error: failed.then(|| "fake authorizer failure".to_string()),
        })
    }
}

// ---- fields.ParseSelector -------------------------------------------------------------------

/// The requirements of a field selector, each `<field><op><value>` (`=` or `!=`), in the
/// order apimachinery keeps them (terms sorted as text), or its error text.
pub fn parse_field_selector(selector: &str) -> Result<Vec<String>, String> {
    let mut parts = split_terms(selector);
    parts.sort();
    let mut out = Vec::new();
    for part in parts.iter().filter(|p| !p.is_empty()) {
        let Some((lhs, op, rhs)) = split_term(part) else {
            return Err(format!(
                "invalid selector: '{selector}'; can't understand '{part}'"
            ));
        };
        let value = unescape_value(rhs)?;
        // `==` and `=` are both `selection.Equals`.
        let op = if op == "!=" { "!=" } else { "=" };
        out.push(format!("{lhs}{op}{value}"));
    }
    Ok(out)
}

/// Splits on commas not escaped by a backslash (escapes kept).
fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(&s[start..i]);
            start = i + 1;
        }
    }
    terms.push(&s[start..]);
    terms
}

/// The first `!=`, `==` or `=`, tried in that order at each position.
fn split_term(term: &str) -> Option<(&str, &'static str, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for op in ["!=", "==", "="] {
            if let Some(value) = rest.strip_prefix(op) {
                return Some((&term[..i], op, value));
            }
        }
    }
    None
}

fn unescape_value(s: &str) -> Result<String, String> {
    if !s.contains(['\\', ',', '=']) {
        return Ok(s.to_string());
    }
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            match c {
                '\\' | ',' | '=' => out.push(c),
                other => {
                    return Err(format!(
                        "invalid field selector: invalid escape sequence: \\{other}"
                    ))
                }
            }
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            // Go prints the rune with %v: its code point.
            ',' | '=' => {
                return Err(format!(
                    "invalid field selector: unescaped character in value: {}",
                    c as u32
                ))
            }
            other => out.push(other),
        }
    }
    if in_slash {
        return Err("invalid field selector: invalid escape sequence: \\".into());
    }
    Ok(out)
}

// ---- labels.ParseToRequirements ---------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    Error,
    End,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn keyword(s: &[u8]) -> Option<Tok> {
    Some(match s {
        b")" => Tok::ClosedPar,
        b"," => Tok::Comma,
        b"!" => Tok::DoesNotExist,
        b"==" => Tok::DoubleEquals,
        b"=" => Tok::Equals,
        b">" => Tok::GreaterThan,
        b"in" => Tok::In,
        b"<" => Tok::LessThan,
        b"!=" => Tok::NotEquals,
        b"notin" => Tok::NotIn,
        b"(" => Tok::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// apimachinery's byte-wise lexer: a NUL byte reads as the end, as there.
struct Lexer<'s> {
    s: &'s [u8],
    pos: usize,
}

impl Lexer<'_> {
    fn read(&mut self) -> u8 {
        match self.s.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                b
            }
            None => 0,
        }
    }

    fn unread(&mut self) {
        self.pos = self.pos.saturating_sub(1);
    }

    fn lex(&mut self) -> (Tok, String) {
        let mut ch = self.read();
        while is_whitespace(ch) {
            ch = self.read();
        }
        if ch == 0 {
            return (Tok::End, String::new());
        }
        self.unread();
        if is_special(ch) {
            self.special()
        } else {
            self.identifier()
        }
    }

    fn identifier(&mut self) -> (Tok, String) {
        let mut buf = Vec::new();
        loop {
            let ch = self.read();
            if ch == 0 {
                break;
            }
            if is_special(ch) || is_whitespace(ch) {
                self.unread();
                break;
            }
            buf.push(ch);
        }
        let text = String::from_utf8_lossy(&buf).into_owned();
        (keyword(&buf).unwrap_or(Tok::Identifier), text)
    }

    fn special(&mut self) -> (Tok, String) {
        let mut buf = Vec::new();
        let mut last: Option<(Tok, usize)> = None;
        loop {
            let ch = self.read();
            if ch == 0 {
                break;
            }
            if !is_special(ch) {
                self.unread();
                break;
            }
            buf.push(ch);
            if let Some(t) = keyword(&buf) {
                last = Some((t, buf.len()));
            } else if last.is_some() {
                self.unread();
                break;
            }
        }
        match last {
            Some((t, n)) => (t, String::from_utf8_lossy(&buf[..n]).into_owned()),
            None => (
                Tok::Error,
                format!(
                    "error expected: keyword found '{}'",
                    String::from_utf8_lossy(&buf)
                ),
            ),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Exists,
    DoesNotExist,
    In,
    NotIn,
    Equals,
    DoubleEquals,
    NotEquals,
    GreaterThan,
    LessThan,
}

struct Requirement {
    key: String,
    op: Op,
    /// Sorted and without duplicates (apimachinery's `sets.String.List()`).
    values: Vec<String>,
}

impl Requirement {
    /// `Requirement.String()`.
    fn render(&self) -> String {
        let mut s = String::new();
        if self.op == Op::DoesNotExist {
            s.push('!');
        }
        s.push_str(&self.key);
        let op = match self.op {
            Op::Exists | Op::DoesNotExist => return s,
            Op::Equals => "=",
            Op::DoubleEquals => "==",
            Op::NotEquals => "!=",
            Op::In => " in ",
            Op::NotIn => " notin ",
            Op::GreaterThan => ">",
            Op::LessThan => "<",
        };
        s.push_str(op);
        let set = matches!(self.op, Op::In | Op::NotIn);
        if set {
            s.push('(');
        }
        s.push_str(&self.values.join(","));
        if set {
            s.push(')');
        }
        s
    }
}

struct Parser {
    items: Vec<(Tok, String)>,
    position: usize,
}

/// In the values context `in` and `notin` are identifiers.
fn in_values(t: Tok) -> Tok {
    match t {
        Tok::In | Tok::NotIn => Tok::Identifier,
        other => other,
    }
}

impl Parser {
    fn lookahead(&self, values: bool) -> (Tok, String) {
        let (t, l) = self
            .items
            .get(self.position)
            .cloned()
            .unwrap_or((Tok::End, String::new()));
        (if values { in_values(t) } else { t }, l)
    }

    fn consume(&mut self, values: bool) -> (Tok, String) {
        let r = self.lookahead(values);
        self.position += 1;
        r
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut out = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(true);
            match tok {
                Tok::Identifier | Tok::DoesNotExist => {
                    let r = self
                        .requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    out.push(r);
                    let (t, l) = self.consume(true);
                    match t {
                        Tok::End => return Ok(out),
                        Tok::Comma => {
                            let (t2, l2) = self.lookahead(true);
                            if t2 != Tok::Identifier && t2 != Tok::DoesNotExist {
                                return Err(format!(
                                    "found '{l2}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => return Err(format!("found '{l}', expected: ',' or 'end of string'")),
                    }
                }
                Tok::End => return Ok(out),
                _ => {
                    return Err(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    ))
                }
            }
        }
    }

    fn requirement(&mut self) -> Result<Requirement, String> {
        let (key, op) = self.key_and_operator()?;
        if let Some(op @ (Op::Exists | Op::DoesNotExist)) = op {
            return new_requirement(key, op, Vec::new());
        }
        let op = self.operator()?;
        let values = match op {
            Op::In | Op::NotIn => self.set_values()?,
            _ => self.exact_value()?,
        };
        new_requirement(key, op, values)
    }

    fn key_and_operator(&mut self) -> Result<(String, Option<Op>), String> {
        let mut op = None;
        let (mut tok, mut lit) = self.consume(true);
        if tok == Tok::DoesNotExist {
            op = Some(Op::DoesNotExist);
            (tok, lit) = self.consume(true);
        }
        if tok != Tok::Identifier {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        // The parser's own path is nil, which Go prints as `<nil>`.
        validate_label_key(&lit, "<nil>")?;
        let (next, _) = self.lookahead(true);
        if matches!(next, Tok::End | Tok::Comma) && op != Some(Op::DoesNotExist) {
            op = Some(Op::Exists);
        }
        Ok((lit, op))
    }

    fn operator(&mut self) -> Result<Op, String> {
        let (tok, lit) = self.consume(false);
        Ok(match tok {
            Tok::In => Op::In,
            Tok::Equals => Op::Equals,
            Tok::DoubleEquals => Op::DoubleEquals,
            Tok::GreaterThan => Op::GreaterThan,
            Tok::LessThan => Op::LessThan,
            Tok::NotIn => Op::NotIn,
            Tok::NotEquals => Op::NotEquals,
            _ => {
                return Err(format!(
                    "found '{lit}', expected: in, notin, =, ==, !=, gt, lt"
                ))
            }
        })
    }

    fn set_values(&mut self) -> Result<Vec<String>, String> {
        let (tok, lit) = self.consume(true);
        if tok != Tok::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.lookahead(true);
        match tok {
            Tok::Identifier | Tok::Comma => {
                let s = self.identifiers()?;
                if self.consume(true).0 != Tok::ClosedPar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(s)
            }
            Tok::ClosedPar => {
                self.consume(true);
                Ok(vec![String::new()])
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    fn identifiers(&mut self) -> Result<Vec<String>, String> {
        let mut s = std::collections::BTreeSet::new();
        loop {
            let (tok, lit) = self.consume(true);
            match tok {
                Tok::Identifier => {
                    s.insert(lit);
                    let (t2, l2) = self.lookahead(true);
                    match t2 {
                        Tok::Comma => continue,
                        Tok::ClosedPar => return Ok(s.into_iter().collect()),
                        _ => return Err(format!("found '{l2}', expected: ',' or ')'")),
                    }
                }
                Tok::Comma => {
                    if s.is_empty() {
                        s.insert(String::new());
                    }
                    let (t2, _) = self.lookahead(true);
                    if t2 == Tok::ClosedPar {
                        s.insert(String::new());
                        return Ok(s.into_iter().collect());
                    }
                    if t2 == Tok::Comma {
                        s.insert(String::new());
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    fn exact_value(&mut self) -> Result<Vec<String>, String> {
        let (tok, _) = self.lookahead(true);
        if matches!(tok, Tok::End | Tok::Comma) {
            return Ok(vec![String::new()]);
        }
        let (tok, lit) = self.consume(true);
        if tok == Tok::Identifier {
            return Ok(vec![lit]);
        }
        Err(format!("found '{lit}', expected: identifier"))
    }
}

/// `labels.NewRequirement`'s checks (the operator/value-count checks cannot fail on what the
/// parser produces), as one aggregate error text.
fn new_requirement(key: String, op: Op, values: Vec<String>) -> Result<Requirement, String> {
    let mut errors: Vec<String> = Vec::new();
    if let Err(e) = validate_label_key(&key, "key") {
        errors.push(e);
    }
    if matches!(op, Op::GreaterThan | Op::LessThan) {
        for (i, v) in values.iter().enumerate() {
            if v.parse::<i64>().is_err() {
                errors.push(format!(
                    "values[{i}]: Invalid value: {}: for 'Gt', 'Lt' operators, the value must be an integer",
                    go_quote(v)
                ));
            }
        }
    }
    for (i, v) in values.iter().enumerate() {
        let errs = label_value_errors(v);
        if !errs.is_empty() {
            errors.push(format!(
                "values[{i}][{key}]: Invalid value: {}: {}",
                go_quote(v),
                errs.join("; ")
            ));
        }
    }
    if errors.is_empty() {
        return Ok(Requirement { key, op, values });
    }
    // utilerrors.Aggregate: one error alone, else the distinct ones in brackets.
    let mut seen: Vec<String> = Vec::new();
    for e in errors {
        if !seen.contains(&e) {
            seen.push(e);
        }
    }
    if seen.len() == 1 {
        return Err(seen.remove(0));
    }
    Err(format!("[{}]", seen.join(", ")))
}

/// The requirements of a label selector, each `Requirement.String()`, sorted by key, or the
/// parse error text.
pub fn parse_label_selector(selector: &str) -> Result<Vec<String>, String> {
    let mut lexer = Lexer {
        s: selector.as_bytes(),
        pos: 0,
    };
    let mut items = Vec::new();
    loop {
        let item = lexer.lex();
        let end = item.0 == Tok::End;
        items.push(item);
        if end {
            break;
        }
    }
    let mut reqs = Parser { items, position: 0 }.parse()?;
    reqs.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(reqs.iter().map(Requirement::render).collect())
}

fn validate_label_key(key: &str, field: &str) -> Result<(), String> {
    let errs = qualified_name_errors(key);
    if errs.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{field}: Invalid value: {}: {}",
        go_quote(key),
        errs.join("; ")
    ))
}

fn regex(cell: &'static OnceLock<regex::Regex>, pattern: &str) -> &'static regex::Regex {
    cell.get_or_init(|| {
        // A fixed pattern of this file: it compiles, or every selector case fails loudly.
        regex::Regex::new(pattern).expect("fixed pattern")
    })
}

const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// apimachinery's `RegexError`.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let examples: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{msg} (e.g. {}regex used for validation is '{fmt}')",
        examples.join("or ")
    )
}

/// `validation.IsQualifiedName`.
fn qualified_name_errors(value: &str) -> Vec<String> {
    static NAME: OnceLock<regex::Regex> = OnceLock::new();
    static SUBDOMAIN: OnceLock<regex::Regex> = OnceLock::new();
    let name_re = regex(&NAME, &format!("^{QUALIFIED_NAME_FMT}$"));
    let subdomain_re = regex(&SUBDOMAIN, &format!("^{DNS1123_SUBDOMAIN_FMT}$"));
    let name_error = || {
        regex_error(
            QUALIFIED_NAME_MSG,
            QUALIFIED_NAME_FMT,
            &["MyName", "my.name", "123-abc"],
        )
    };
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                if prefix.len() > 253 {
                    errs.push("prefix part must be no more than 253 characters".to_string());
                }
                if !subdomain_re.is_match(prefix) {
                    errs.push(format!(
                        "prefix part {}",
                        regex_error(
                            DNS1123_SUBDOMAIN_MSG,
                            DNS1123_SUBDOMAIN_FMT,
                            &["example.com"]
                        )
                    ));
                }
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                name_error()
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".to_string());
    }
    if !name_re.is_match(name) {
        errs.push(format!("name part {}", name_error()));
    }
    errs
}

/// `validation.IsValidLabelValue`.
fn label_value_errors(value: &str) -> Vec<String> {
    static VALUE: OnceLock<regex::Regex> = OnceLock::new();
    let re = regex(&VALUE, &format!("^({QUALIFIED_NAME_FMT})?$"));
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !re.is_match(value) {
        errs.push(regex_error(
            LABEL_VALUE_MSG,
            &format!("({QUALIFIED_NAME_FMT})?"),
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// Go's `%q` for the strings a selector can hold.
fn go_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
