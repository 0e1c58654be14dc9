//! Kubernetes' format library (`library/format.go`, type `kubernetes.NamedFormat`;
//! compatibility 1.31).
//!
//! `format.<name>()` returns a named format; `format.named(s)` the same as an optional;
//! `f.validate(s)` is `optional.none()` when `s` is valid and `optional.of([errors])` when not.
//! The validators and their messages are apimachinery's (`IsDNS1123Label`, `IsQualifiedName`,
//! `RegexError` with its double space..., in [`crate::apimachinery::names`]) and strfmt's for
//! the CRD formats. The `...Prefix` formats validate a generateName prefix the way
//! apimachinery's `maskTrailingDash` does.

use std::any::Any;
use std::sync::OnceLock;

use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;
use regex::Regex;

use crate::apimachinery::names::{
    dns1035_label, dns1123_label, dns1123_subdomain, label_value, mask_trailing_dash,
    qualified_name,
};
use crate::error::EvalError;
use crate::overload::{since, str_arg, Cost, Register, R};
use crate::value::{Opaque, Value};

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
        Some(go_name(self.name).to_string())
    }
}

/// The `Name` of the format in Kubernetes' `library/format.go`, how the value prints.
fn go_name(name: &'static str) -> &'static str {
    match name {
        "dns1123Label" => "DNS1123Label",
        "dns1123Subdomain" => "DNS1123Subdomain",
        "dns1035Label" => "DNS1035Label",
        "qualifiedName" => "QualifiedName",
        "dns1123LabelPrefix" => "DNS1123LabelPrefix",
        "dns1123SubdomainPrefix" => "DNS1123SubdomainPrefix",
        "dns1035LabelPrefix" => "DNS1035LabelPrefix",
        "labelValue" => "LabelValue",
        "uri" => "URI",
        other => other,
    }
}

/// kube-openapi's `strfmt.UUIDPattern` (dashes optional), which Kubernetes validates with
/// and prices `validate` by.
const UUID_PATTERN: &str = "(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$";
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

/// strfmt's patterns, compiled on first use.
struct Patterns {
    date_time: Regex,
    uuid: Regex,
}

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| Patterns {
        // Constants of this file; a failure is a programming error caught by the tests below.
        date_time: Regex::new(DATE_TIME_PATTERN).expect("constant pattern compiles"),
        uuid: Regex::new(UUID_PATTERN).expect("constant pattern compiles"),
    })
}

/// Go's `base64.StdEncoding`: the standard alphabet with padding required, and (Go's
/// encodings are not `Strict`) any value in the unused bits of the last character.
const GO_STD_ENCODING: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
);

/// strfmt's `byte` check in Kubernetes (govalidator's `IsBase64`, a regular expression):
/// whole groups of four standard characters, the last one possibly padded; so not empty and
/// no line breaks (recorded from Kubernetes 1.32: `format.byte().validate('')` fails). Any
/// value in the unused bits of the last character passes, as the expression does not look.
fn is_base64(s: &str) -> bool {
    !s.is_empty() && !s.contains(['\r', '\n']) && GO_STD_ENCODING.decode(s).is_ok()
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
    let Some(c) = patterns().date_time.captures(parts[1]) else {
        return false;
    };
    let field = |i: usize| c.get(i).map_or("", |m| m.as_str());
    field(1) <= "23" && field(2) <= "59" && field(3) <= "59"
}

/// A validator: the errors of a text, none when it is valid.
type Validator = fn(&str) -> Vec<String>;

/// The validator of a format name; `None` for a name that is not in [`FORMATS`].
fn validator(name: &str) -> Option<Validator> {
    Some(match name {
        "dns1123Label" => dns1123_label,
        "dns1123Subdomain" => dns1123_subdomain,
        "dns1035Label" => dns1035_label,
        "qualifiedName" => qualified_name,
        "dns1123LabelPrefix" => |s| dns1123_label(&mask_trailing_dash(s)),
        "dns1123SubdomainPrefix" => |s| dns1123_subdomain(&mask_trailing_dash(s)),
        "dns1035LabelPrefix" => |s| dns1035_label(&mask_trailing_dash(s)),
        "labelValue" => label_value,
        "uri" => |s| {
            super::url::parse_request_uri(s)
                .err()
                .map(|e| e.to_string())
                .into_iter()
                .collect()
        },
        "uuid" => |s| {
            one(
                patterns().uuid.is_match(s),
                "does not match the UUID format",
            )
        },
        "byte" => |s| one(is_base64(s), "invalid base64"),
        "date" => |s| one(is_date(s), "invalid date"),
        "datetime" => |s| one(is_date_time(s), "invalid datetime"),
        _ => return None,
    })
}

/// No error when `ok`, else `msg`.
fn one(ok: bool, msg: &str) -> Vec<String> {
    if ok {
        Vec::new()
    } else {
        vec![msg.to_string()]
    }
}

/// The errors of `s` in format `name`. Every [`NamedFormat`] is built from a name in
/// [`FORMATS`], each of which has a validator (tested); an unknown name would find no error.
fn validate_named(name: &str, s: &str) -> Vec<String> {
    validator(name).map_or_else(Vec::new, |v| v(s))
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
    crate::stdlib::regex::regex_cost(a[1].cost_size(), size)
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
        patterns();
        for (name, _) in FORMATS {
            assert!(validator(name).is_some(), "no validator for format {name}");
        }
        assert!(validator("dns1123label").is_none());
    }

    /// Every `format.<name>()` constructor builds a format that `format.named` knows.
    #[test]
    fn every_constructor_names_a_known_format() {
        let mut names = Vec::new();
        register_constructors(&mut |fn_name, _, imp, _| {
            let v = imp(&[]).unwrap();
            let f = v.as_opaque::<NamedFormat>().expect("a named format");
            assert_eq!(fn_name.strip_prefix("format."), Some(f.name));
            names.push(f.name);
        });
        let known: Vec<&str> = FORMATS.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, known);
    }

    #[test]
    fn prefixes_and_crd_formats() {
        assert!(validate_named("dns1123LabelPrefix", "my-prefix-").is_empty());
        assert!(!validate_named("dns1123Label", "my-prefix-").is_empty());
        assert!(validate_named("uuid", "123e4567-e89b-12d3-a456-426614174000").is_empty());
        assert!(!validate_named("uuid", "123e4567").is_empty());
        assert!(validate_named("byte", "aGVsbG8=").is_empty());
        assert!(!validate_named("byte", "").is_empty());
        assert!(!validate_named("byte", "aGVs\nbG8=").is_empty());
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
