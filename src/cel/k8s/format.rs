//! Kubernetes' format library (`library/format.go`, type `kubernetes.NamedFormat`;
//! compatibility 1.31).
//!
//! `format.<name>()` returns a named format; `format.named(s)` the same as an optional;
//! `f.validate(s)` is `optional.none()` when `s` is valid and `optional.of([errors])` when not.
//! The validators and their messages are apimachinery's (`IsDNS1123Label`, `IsQualifiedName`,
//! `RegexError` with its double space...) and strfmt's for the CRD formats. The `...Prefix`
//! formats validate a generateName prefix the way apimachinery's `maskTrailingDash` does.

use std::any::Any;
use std::sync::OnceLock;

use regex::Regex;

use crate::cel::error::EvalError;
use crate::cel::functions::{str_arg, R};
use crate::cel::library::{since, Cost, Register};
use crate::cel::value::{Opaque, Value};

/// A named format, compared by name.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NamedFormat {
    name: &'static str,
}

impl Opaque for NamedFormat {
    fn type_name(&self) -> &'static str {
        "kubernetes.NamedFormat"
    }
    fn equals(&self, other: &dyn Opaque) -> bool {
        other.as_any().downcast_ref::<NamedFormat>() == Some(self)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn to_cel_string(&self) -> Option<String> {
        Some(self.name.to_string())
    }
}

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const UUID_PATTERN: &str =
    "(?i)(^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$)|(^[0-9a-f]{32}$)";
const DATE_TIME_PATTERN: &str =
    "^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$";

/// The format names, in `format.go`'s order, with their cost-model regex sizes.
const FORMATS: &[(&str, usize)] = &[
    ("dns1123Label", 30),
    ("dns1123Subdomain", 60),
    ("dns1035Label", 30),
    ("qualifiedName", 60),
    ("dns1123LabelPrefix", 30),
    ("dns1123SubdomainPrefix", 60),
    ("dns1035LabelPrefix", 30),
    ("labelValue", 40),
    ("uri", 1103),
    ("uuid", UUID_PATTERN.len()),
    ("byte", 84),
    ("date", DATE_TIME_PATTERN.len()),
    ("datetime", DATE_TIME_PATTERN.len()),
];

fn anchored(pattern: &str) -> Regex {
    // The patterns are constants of this file; a failure is a programming error caught by the
    // tests below.
    Regex::new(&format!("^(?:{pattern})$")).expect("constant pattern compiles")
}

/// The compiled patterns, each named for what it checks.
struct Regexes {
    dns1123_label: Regex,
    dns1123_subdomain: Regex,
    dns1035_label: Regex,
    qualified_name: Regex,
    label_value: Regex,
    /// The time part of a date-time, its fields captured (the pattern anchors itself).
    date_time: Regex,
    uuid: Regex,
}

fn regexes() -> &'static Regexes {
    static R: OnceLock<Regexes> = OnceLock::new();
    R.get_or_init(|| Regexes {
        dns1123_label: anchored(DNS1123_LABEL_FMT),
        dns1123_subdomain: anchored(DNS1123_SUBDOMAIN_FMT),
        dns1035_label: anchored(DNS1035_LABEL_FMT),
        qualified_name: anchored(QUALIFIED_NAME_FMT),
        label_value: anchored(LABEL_VALUE_FMT),
        date_time: Regex::new(DATE_TIME_PATTERN).expect("constant pattern compiles"),
        uuid: Regex::new(UUID_PATTERN).expect("constant pattern compiles"),
    })
}

/// apimachinery's `RegexError`, double space included.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut out = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push_str(&format!("'{e}', "));
    }
    out.push_str(&format!("regex used for validation is '{fmt}')"));
    out
}

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// apimachinery's `maskTrailingDash`: a generateName prefix may end in `-`. Go drops the
/// last two *bytes* (`name[:len(name)-2] + "a"`), which may cut a multi-byte character
/// (`é-`). Go's result then holds a stray byte that no validator pattern matches (they are
/// ASCII classes) and that counts one byte in the length limits; here the stray bytes become
/// as many `_`, which no DNS pattern matches either and which count the same, so every
/// check, and every message, is Go's.
fn mask_trailing_dash(s: &str) -> String {
    if s.len() > 1 && s.ends_with('-') {
        let cut = s.len() - 2;
        let mut boundary = cut;
        while !s.is_char_boundary(boundary) {
            boundary -= 1;
        }
        let stray = cut - boundary;
        return format!("{}{}a", &s[..boundary], "_".repeat(stray));
    }
    s.to_string()
}

pub(crate) fn dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !regexes().dns1123_label.is_match(s) {
        if regexes().dns1123_subdomain.is_match(s) {
            errs.push("must not contain dots".into());
        } else {
            errs.push(regex_error(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

pub(crate) fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 253 {
        errs.push(max_len_error(253));
    }
    if !regexes().dns1123_subdomain.is_match(s) {
        errs.push(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

pub(crate) fn dns1035_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !regexes().dns1035_label.is_match(s) {
        errs.push(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

const QUALIFIED_NAME_MSG: &str =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

pub(crate) fn qualified_name(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".into());
            } else {
                errs.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|e| format!("prefix part {e}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".into());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len_error(63)));
    }
    if !regexes().qualified_name.is_match(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_MSG,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

pub(crate) fn label_value(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !regexes().label_value.is_match(s) {
        errs.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// Go's `base64.StdEncoding.DecodeString` acceptance (newlines are ignored).
fn is_base64(s: &str) -> bool {
    let data: Vec<u8> = s.bytes().filter(|b| *b != b'\r' && *b != b'\n').collect();
    if !data.len().is_multiple_of(4) {
        return false;
    }
    let padding = data.iter().rev().take_while(|b| **b == b'=').count();
    if padding > 2 {
        return false;
    }
    let body = &data[..data.len() - padding];
    body.iter()
        .all(|b| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/')
}

/// Go's `time.Parse("2006-01-02", s)`.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let num = |r: std::ops::Range<usize>| s[r].parse::<i32>().ok().filter(|_| b[..].is_ascii());
    let digits = [0, 1, 2, 3, 5, 6, 8, 9]
        .iter()
        .all(|i| b[*i].is_ascii_digit());
    match (digits, num(0..4), num(5..7), num(8..10)) {
        (true, Some(y), Some(m), Some(d)) => {
            jiff::civil::Date::new(y as i16, m as i8, d as i8).is_ok()
        }
        _ => false,
    }
}

/// strfmt's `IsDateTime`.
fn is_date_time(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_ascii_lowercase();
    let parts: Vec<&str> = lower.split('t').collect();
    if parts.len() < 2 || !is_date(parts[0]) {
        return false;
    }
    let Some(c) = regexes().date_time.captures(parts[1]) else {
        return false;
    };
    let field = |i: usize| c.get(i).map_or("", |m| m.as_str());
    field(1) <= "23" && field(2) <= "59" && field(3) <= "59"
}

fn validate_named(name: &str, s: &str) -> Vec<String> {
    let one = |ok: bool, msg: &str| {
        if ok {
            Vec::new()
        } else {
            vec![msg.to_string()]
        }
    };
    match name {
        "dns1123Label" => dns1123_label(s),
        "dns1123Subdomain" => dns1123_subdomain(s),
        "dns1035Label" => dns1035_label(s),
        "qualifiedName" => qualified_name(s),
        "dns1123LabelPrefix" => dns1123_label(&mask_trailing_dash(s)),
        "dns1123SubdomainPrefix" => dns1123_subdomain(&mask_trailing_dash(s)),
        "dns1035LabelPrefix" => dns1035_label(&mask_trailing_dash(s)),
        "labelValue" => label_value(s),
        "uri" => super::url::parse_request_uri(s).err().into_iter().collect(),
        "uuid" => one(regexes().uuid.is_match(s), "does not match the UUID format"),
        "byte" => one(is_base64(s), "invalid base64"),
        "date" => one(is_date(s), "invalid date"),
        "datetime" => one(is_date_time(s), "invalid datetime"),
        _ => Vec::new(),
    }
}

fn format_of(v: &Value<'_>) -> Result<NamedFormat, EvalError> {
    v.as_opaque::<NamedFormat>()
        .copied()
        .ok_or_else(EvalError::no_such_overload)
}

fn named<'a>(a: &[Value<'a>]) -> R<'a> {
    let name = str_arg(&a[0])?;
    let found = FORMATS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(n, _)| Value::opaque(NamedFormat { name: n }));
    Ok(Value::optional(found))
}

fn validate<'a>(a: &[Value<'a>]) -> R<'a> {
    let f = format_of(&a[0])?;
    let errs = validate_named(f.name, str_arg(&a[1])?);
    if errs.is_empty() {
        return Ok(Value::Optional(None));
    }
    Ok(Value::optional(Some(Value::list(
        errs.into_iter().map(Value::string).collect(),
    ))))
}

/// `validate`: ⌈0.1·(1+len)⌉ × ⌈0.25 × the format's regex size⌉.
fn cost_validate(a: &[Value<'_>]) -> u64 {
    let size = a[0]
        .as_opaque::<NamedFormat>()
        .and_then(|f| FORMATS.iter().find(|(n, _)| *n == f.name))
        .map_or(1, |(_, s)| *s as u64);
    crate::cel::library::regex_cost(a[1].cost_size(), size)
}

macro_rules! constructors {
    ($($fn_name:ident => $name:literal),* $(,)?) => {
        $(fn $fn_name<'a>(_: &[Value<'a>]) -> R<'a> { Ok(Value::opaque(NamedFormat { name: $name })) })*
        fn register_constructors(add: Register<'_>) {
            $(add(concat!("format.", $name), &[("() kubernetes.NamedFormat", since::FORMAT)], $fn_name, Cost::One);)*
        }
    };
}

constructors! {
    dns1123_label_format => "dns1123Label",
    dns1123_subdomain_format => "dns1123Subdomain",
    dns1035_label_format => "dns1035Label",
    qualified_name_format => "qualifiedName",
    dns1123_label_prefix_format => "dns1123LabelPrefix",
    dns1123_subdomain_prefix_format => "dns1123SubdomainPrefix",
    dns1035_label_prefix_format => "dns1035LabelPrefix",
    label_value_format => "labelValue",
    uri_format => "uri",
    uuid_format => "uuid",
    byte_format => "byte",
    date_format => "date",
    datetime_format => "datetime",
}

pub fn register(add: Register<'_>) {
    register_constructors(add);
    add(
        "format.named",
        &[("(string) optional(kubernetes.NamedFormat)", since::FORMAT)],
        named,
        Cost::One,
    );
    add(
        "validate",
        &[(
            "kubernetes.NamedFormat.(string) optional(list(string))",
            since::FORMAT,
        )],
        validate,
        Cost::Custom(cost_validate),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_name_is_known() {
        regexes();
        for (name, _) in FORMATS {
            let _ = validate_named(name, "x");
        }
    }

    #[test]
    fn apimachinery_messages() {
        assert!(dns1123_label("my-name").is_empty());
        assert_eq!(
            dns1123_label("My_Name"),
            vec!["a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"]
        );
        assert_eq!(dns1123_label("a.b"), vec!["must not contain dots"]);
        assert_eq!(
            qualified_name("contains a space"),
            vec!["name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"]
        );
        assert!(qualified_name("example.com/MyName").is_empty());
        assert_eq!(qualified_name("/x"), vec!["prefix part must be non-empty"]);
        assert!(label_value("").is_empty());
        assert_eq!(
            dns1123_label(&"a".repeat(64)),
            vec!["must be no more than 63 characters"]
        );
    }

    #[test]
    fn prefixes_and_crd_formats() {
        assert!(validate_named("dns1123LabelPrefix", "my-prefix-").is_empty());
        assert!(!validate_named("dns1123Label", "my-prefix-").is_empty());
        assert!(validate_named("uuid", "123e4567-e89b-12d3-a456-426614174000").is_empty());
        assert!(!validate_named("uuid", "123e4567").is_empty());
        assert!(validate_named("byte", "aGVsbG8=").is_empty());
        assert!(!validate_named("byte", "aGVsbG8").is_empty());
        assert!(validate_named("date", "2021-01-01").is_empty());
        assert!(!validate_named("date", "2021-02-30").is_empty());
        assert!(validate_named("datetime", "2021-01-01T00:00:00Z").is_empty());
        assert!(!validate_named("datetime", "2021-01-01T25:00:00Z").is_empty());
        assert!(validate_named("uri", "https://example.com").is_empty());
        assert_eq!(
            validate_named("uri", "x"),
            vec!["parse \"x\": invalid URI for request"]
        );
    }

    /// Go cuts the two bytes before a trailing dash even inside a character: the result is
    /// invalid (a stray byte), with the length Go counts, not a panic.
    #[test]
    fn prefixes_cut_inside_a_character() {
        let label = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
        assert_eq!(mask_trailing_dash("é-"), "_a");
        assert_eq!(mask_trailing_dash("a€-"), "a__a");
        assert_eq!(mask_trailing_dash("ab-"), "aa");
        assert_eq!(validate_named("dns1123LabelPrefix", "é-"), vec![label]);
        for name in [
            "dns1123LabelPrefix",
            "dns1123SubdomainPrefix",
            "dns1035LabelPrefix",
        ] {
            for s in ["é-", "-", "€-", "a😀-", "😀--"] {
                assert!(!validate_named(name, s).is_empty(), "{name} {s}");
            }
        }
        // Go: 61 ASCII bytes, `é`, `-` is 64 bytes; masked, 61 + 1 stray + `a` = 63: not
        // over the limit, only the pattern fails.
        let s = format!("{}é-", "a".repeat(61));
        assert_eq!(validate_named("dns1123LabelPrefix", &s), vec![label]);
        // One more byte and the length fails too.
        let s = format!("{}é-", "a".repeat(62));
        assert_eq!(
            validate_named("dns1123LabelPrefix", &s),
            vec!["must be no more than 63 characters", label]
        );
    }
}
