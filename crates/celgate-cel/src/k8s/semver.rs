//! Kubernetes' semver library (`library/semverlib.go`, version 1; compatibility 1.33).
//!
//! Parsing is blang/semver v4's strict `Parse` (with its error messages); `semver(s, true)`
//! first applies Kubernetes' `normalizeAndParse` (one leading `v` dropped, leading zeros
//! dropped, a missing minor or patch filled with 0). Comparison is SemVer precedence: build
//! metadata is ignored, so two versions differing only in build metadata are equal.

use std::any::Any;
use std::cmp::Ordering;

use crate::error::EvalError;
use crate::overload::{since, str_arg, Cost, Register, R};
use crate::value::{Opaque, Value};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Pre {
    Num(u64),
    Str(String),
}

/// A `kubernetes.Semver` value (`semver('1.2.3')`).
#[derive(Debug, Clone)]
pub struct Semver {
    major: u64,
    minor: u64,
    patch: u64,
    pre: Vec<Pre>,
    build: Vec<String>,
}

impl Semver {
    fn precedence(&self, o: &Semver) -> Ordering {
        let core = (self.major, self.minor, self.patch).cmp(&(o.major, o.minor, o.patch));
        if core != Ordering::Equal {
            return core;
        }
        match (self.pre.is_empty(), o.pre.is_empty()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Greater,
            (false, true) => return Ordering::Less,
            _ => {}
        }
        for (a, b) in self.pre.iter().zip(&o.pre) {
            let c = match (a, b) {
                (Pre::Num(x), Pre::Num(y)) => x.cmp(y),
                (Pre::Num(_), Pre::Str(_)) => Ordering::Less,
                (Pre::Str(_), Pre::Num(_)) => Ordering::Greater,
                (Pre::Str(x), Pre::Str(y)) => x.cmp(y),
            };
            if c != Ordering::Equal {
                return c;
            }
        }
        self.pre.len().cmp(&o.pre.len())
    }

    fn text(&self) -> String {
        let mut s = format!("{}.{}.{}", self.major, self.minor, self.patch);
        if !self.pre.is_empty() {
            let parts: Vec<String> = self
                .pre
                .iter()
                .map(|p| match p {
                    Pre::Num(n) => n.to_string(),
                    Pre::Str(t) => t.clone(),
                })
                .collect();
            s.push('-');
            s.push_str(&parts.join("."));
        }
        if !self.build.is_empty() {
            s.push('+');
            s.push_str(&self.build.join("."));
        }
        s
    }
}

impl Opaque for Semver {
    fn type_name(&self) -> &'static str {
        "kubernetes.Semver"
    }
    fn equals(&self, other: &dyn Opaque) -> bool {
        other
            .as_any()
            .downcast_ref::<Semver>()
            .is_some_and(|o| self.precedence(o) == Ordering::Equal)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn to_cel_string(&self) -> Option<String> {
        Some(self.text())
    }
}

fn only(s: &str, f: fn(u8) -> bool) -> bool {
    s.bytes().all(f)
}

fn alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}

/// A numeric element of the version core, as blang/semver names it in its errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The major version.
    Major,
    /// The minor version.
    Minor,
    /// The patch version.
    Patch,
}

impl Part {
    /// The name in lower case, as an error names it mid-sentence.
    fn name(self) -> &'static str {
        match self {
            Part::Major => "major",
            Part::Minor => "minor",
            Part::Patch => "patch",
        }
    }

    /// The name starting a sentence.
    fn title(self) -> &'static str {
        match self {
            Part::Major => "Major",
            Part::Minor => "Minor",
            Part::Patch => "Patch",
        }
    }
}

/// Why a text is not a semantic version, with blang/semver v4's (and Kubernetes')
/// wording; `semver(s)` reports it as its error value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SemverError {
    /// The text is empty.
    #[error("Version string empty")]
    Empty,
    /// Fewer than three dot-separated elements.
    #[error("No Major.Minor.Patch elements found")]
    NoMajorMinorPatch,
    /// A core number with a character other than a digit.
    #[error("Invalid character(s) found in {} number {text:?}", part.name())]
    InvalidNumber {
        /// Which number.
        part: Part,
        /// The element as written.
        text: String,
    },
    /// A core number with a leading zero.
    #[error("{} number must not contain leading zeroes {text:?}", part.title())]
    LeadingZeroes {
        /// Which number.
        part: Part,
        /// The element as written.
        text: String,
    },
    /// A core number Go's `strconv.ParseUint` refuses (empty or too large).
    #[error("strconv.ParseUint: parsing {0:?}: invalid syntax")]
    NumberSyntax(String),
    /// An empty pre-release identifier.
    #[error("Prerelease is empty")]
    EmptyPrerelease,
    /// A numeric pre-release identifier with a leading zero.
    #[error("Numeric PreRelease version must not contain leading zeroes {0:?}")]
    PrereleaseLeadingZeroes(String),
    /// A numeric pre-release identifier too large for 64 bits.
    #[error("strconv.ParseUint: parsing {0:?}: value out of range")]
    PrereleaseOutOfRange(String),
    /// A pre-release identifier with a character other than `[0-9A-Za-z-]`.
    #[error("Invalid character(s) found in prerelease {0:?}")]
    InvalidPrerelease(String),
    /// An empty build metadata identifier.
    #[error("Build meta data is empty")]
    EmptyBuild,
    /// A build metadata identifier with a character other than `[0-9A-Za-z-]`.
    #[error("Invalid character(s) found in build meta data {0:?}")]
    InvalidBuild(String),
    /// `normalizeAndParse`: a version of one or two elements with a suffix.
    #[error("short version cannot contain PreRelease/Build meta data")]
    ShortWithSuffix,
}

fn number(text: &str, part: Part) -> Result<u64, SemverError> {
    if !only(text, |b| b.is_ascii_digit()) {
        return Err(SemverError::InvalidNumber {
            part,
            text: text.into(),
        });
    }
    if text.len() > 1 && text.starts_with('0') {
        return Err(SemverError::LeadingZeroes {
            part,
            text: text.into(),
        });
    }
    text.parse()
        .map_err(|_| SemverError::NumberSyntax(text.into()))
}

/// blang/semver v4 `Parse`.
pub fn parse(s: &str) -> Result<Semver, SemverError> {
    if s.is_empty() {
        return Err(SemverError::Empty);
    }
    let parts: Vec<&str> = s.splitn(3, '.').collect();
    if parts.len() != 3 {
        return Err(SemverError::NoMajorMinorPatch);
    }
    let major = number(parts[0], Part::Major)?;
    let minor = number(parts[1], Part::Minor)?;
    let mut patch_str = parts[2];
    let mut build = Vec::new();
    if let Some(i) = patch_str.find('+') {
        build = patch_str[i + 1..].split('.').map(str::to_string).collect();
        patch_str = &patch_str[..i];
    }
    let mut pre_parts: Vec<&str> = Vec::new();
    if let Some(i) = patch_str.find('-') {
        pre_parts = patch_str[i + 1..].split('.').collect();
        patch_str = &patch_str[..i];
    }
    let patch = number(patch_str, Part::Patch)?;
    let mut pre = Vec::new();
    for p in pre_parts {
        if p.is_empty() {
            return Err(SemverError::EmptyPrerelease);
        }
        if only(p, |b| b.is_ascii_digit()) {
            if p.len() > 1 && p.starts_with('0') {
                return Err(SemverError::PrereleaseLeadingZeroes(p.into()));
            }
            pre.push(Pre::Num(
                p.parse()
                    .map_err(|_| SemverError::PrereleaseOutOfRange(p.into()))?,
            ));
        } else if only(p, alnum) {
            pre.push(Pre::Str(p.to_string()));
        } else {
            return Err(SemverError::InvalidPrerelease(p.into()));
        }
    }
    for b in &build {
        if b.is_empty() {
            return Err(SemverError::EmptyBuild);
        }
        if !only(b, alnum) {
            return Err(SemverError::InvalidBuild(b.clone()));
        }
    }
    Ok(Semver {
        major,
        minor,
        patch,
        pre,
        build,
    })
}

/// Kubernetes' `normalizeAndParse`.
pub fn normalize_and_parse(s: &str) -> Result<Semver, SemverError> {
    let s = s.strip_prefix('v').unwrap_or(s);
    let mut parts: Vec<String> = s.splitn(3, '.').map(str::to_string).collect();
    for p in parts.iter_mut() {
        if p.len() > 1 {
            let mut t = p.trim_start_matches('0').to_string();
            if t.is_empty() || !t.as_bytes()[0].is_ascii_digit() {
                t.insert(0, '0');
            }
            *p = t;
        }
    }
    if parts.len() < 3 {
        if parts.last().is_some_and(|l| l.contains(['+', '-'])) {
            return Err(SemverError::ShortWithSuffix);
        }
        while parts.len() < 3 {
            parts.push("0".into());
        }
    }
    parse(&parts.join("."))
}

fn parse_arg(a: &[Value<'_>]) -> Result<Result<Semver, SemverError>, EvalError> {
    let s = str_arg(&a[0])?;
    let normalize = match a.get(1) {
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(EvalError::no_such_overload()),
        None => false,
    };
    Ok(if normalize {
        normalize_and_parse(s)
    } else {
        parse(s)
    })
}

fn semver<'a>(a: &[Value<'a>]) -> R<'a> {
    // The error value is the parser's message, as Kubernetes returns `err` itself.
    parse_arg(a)?
        .map(Value::opaque)
        .map_err(|e| EvalError::new(e.to_string()))
}

fn is_semver<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Bool(parse_arg(a)?.is_ok()))
}

fn version(v: &Value<'_>) -> Result<Semver, EvalError> {
    v.as_opaque::<Semver>()
        .cloned()
        .ok_or_else(EvalError::no_such_overload)
}

fn major<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Int(version(&a[0])?.major as i64))
}

fn minor<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Int(version(&a[0])?.minor as i64))
}

fn patch<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Int(version(&a[0])?.patch as i64))
}

fn compare_to<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Int(
        version(&a[0])?.precedence(&version(&a[1])?) as i64
    ))
}

fn is_greater_than<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Bool(
        version(&a[0])?.precedence(&version(&a[1])?) == Ordering::Greater,
    ))
}

fn is_less_than<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Bool(
        version(&a[0])?.precedence(&version(&a[1])?) == Ordering::Less,
    ))
}

pub fn register(add: Register<'_>) {
    let v = since::SEMVER;
    add(
        "semver",
        &[
            ("(string) kubernetes.Semver", v),
            ("(string, bool) kubernetes.Semver", v),
        ],
        semver,
        Cost::Traverse(0, 0.1),
    );
    add(
        "isSemver",
        &[("(string) bool", v), ("(string, bool) bool", v)],
        is_semver,
        Cost::Traverse(0, 0.1),
    );
    add(
        "major",
        &[("kubernetes.Semver.() int", v)],
        major,
        Cost::One,
    );
    add(
        "minor",
        &[("kubernetes.Semver.() int", v)],
        minor,
        Cost::One,
    );
    add(
        "patch",
        &[("kubernetes.Semver.() int", v)],
        patch,
        Cost::One,
    );
    add(
        "compareTo",
        &[("kubernetes.Semver.(kubernetes.Semver) int", v)],
        compare_to,
        Cost::One,
    );
    add(
        "isGreaterThan",
        &[("kubernetes.Semver.(kubernetes.Semver) bool", v)],
        is_greater_than,
        Cost::One,
    );
    add(
        "isLessThan",
        &[("kubernetes.Semver.(kubernetes.Semver) bool", v)],
        is_less_than,
        Cost::One,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_parse() {
        assert!(parse("1.2.3-alpha.1+build.5").is_ok());
        assert_eq!(
            parse("v1.2.3").unwrap_err().to_string(),
            "Invalid character(s) found in major number \"v1\""
        );
        assert_eq!(
            parse("01.2.3").unwrap_err().to_string(),
            "Major number must not contain leading zeroes \"01\""
        );
        assert_eq!(
            parse("1.2").unwrap_err().to_string(),
            "No Major.Minor.Patch elements found"
        );
        assert_eq!(
            parse("1.2.3-01").unwrap_err().to_string(),
            "Numeric PreRelease version must not contain leading zeroes \"01\""
        );
        assert!(parse("1.2.3+").is_err());
    }

    #[test]
    fn normalized_parse() {
        assert_eq!(normalize_and_parse("v1.2").unwrap().text(), "1.2.0");
        assert_eq!(normalize_and_parse("v01.02.03").unwrap().text(), "1.2.3");
        assert_eq!(
            normalize_and_parse("1.2-beta").unwrap_err().to_string(),
            "short version cannot contain PreRelease/Build meta data"
        );
    }

    #[test]
    fn precedence_ignores_build() {
        let p = |s: &str| parse(s).unwrap();
        assert_eq!(p("1.0.0-alpha").precedence(&p("1.0.0")), Ordering::Less);
        assert_eq!(
            p("1.0.0-alpha.1").precedence(&p("1.0.0-alpha.beta")),
            Ordering::Less
        );
        assert_eq!(p("1.0.0-2").precedence(&p("1.0.0-10")), Ordering::Less);
        assert_eq!(p("1.0.0+a").precedence(&p("1.0.0+b")), Ordering::Equal);
        assert!(p("1.0.0+a").equals(&p("1.0.0+b")));
    }
}
