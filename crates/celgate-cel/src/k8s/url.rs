//! Kubernetes' URL library (`library/urls.go`, type `kubernetes.URL`), on a re-implementation
//! of the parts of Go's `net/url` it uses.
//!
//! `url(s)` accepts what Go's `url.ParseRequestURI` accepts (an absolute URI with a scheme, or
//! an absolute path), then keeps Go's `url.Parse` of it (which splits off the fragment). Go
//! does not normalise: the host keeps its case, default ports stay, paths are not cleaned;
//! only the scheme is lower-cased. A WHATWG parser (the `url` crate) would differ.

use std::any::Any;
use std::sync::Arc;

use crate::error::EvalError;
use crate::overload::{str_arg, Cost, Register, R};
use crate::value::{Map, Opaque, OwnedMap, Value};

use super::go_quote;

/// The fields of Go's `url.URL` that the library reads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GoUrl {
    /// The scheme, lower-cased.
    pub scheme: String,
    /// What follows `scheme:` when it does not start with `/` (`mailto:x@y`).
    pub opaque: String,
    /// The userinfo as written (before `@`), if any.
    pub user: Option<String>,
    /// The host and port as written.
    pub host: String,
    /// The unescaped path.
    pub path: String,
    /// The path as written, when it differs from the default encoding of `path`.
    pub raw_path: String,
    /// `scheme:/path`: a path with no authority.
    pub omit_host: bool,
    /// A `?` with nothing after it.
    pub force_query: bool,
    /// The query as written, without its `?`.
    pub raw_query: String,
    /// The fragment, unescaped, when there was a `#`.
    pub fragment: Option<String>,
}

/// Why Go's `net/url` refuses a URL, with its wording.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UrlProblem {
    /// A `%` not followed by two hex digits (or an escape a host may not hold); the escape's
    /// bytes, quoted as Go quotes them.
    #[error("invalid URL escape {0}")]
    InvalidEscape(String),
    /// A character a host name may not hold, quoted as Go quotes it.
    #[error("invalid character {0} in host name")]
    InvalidHostCharacter(String),
    /// The text starts with `:`.
    #[error("missing protocol scheme")]
    MissingScheme,
    /// An IPv6 literal host without its closing bracket.
    #[error("missing ']' in host")]
    MissingBracket,
    /// A port that is not digits, quoted as Go quotes it.
    #[error("invalid port {0} after host")]
    InvalidPort(String),
    /// A control character anywhere in the text.
    #[error("net/url: invalid control character in URL")]
    ControlCharacter,
    /// An empty request URI.
    #[error("empty url")]
    Empty,
    /// A request URI that is neither absolute nor an absolute path.
    #[error("invalid URI for request")]
    InvalidRequestUri,
    /// A relative path whose first segment holds a colon.
    #[error("first path segment in URL cannot contain colon")]
    ColonInFirstSegment,
    /// Userinfo with a character it may not hold.
    #[error("net/url: invalid userinfo")]
    InvalidUserinfo,
}

/// Go's `*url.Error` of a parse: the URL and why it was refused, shown as
/// `parse "<url>": <why>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("parse {}: {problem}", go_quote(url.as_bytes()))]
pub struct UrlError {
    /// The text that was parsed.
    pub url: String,
    /// Why it was refused (part of the message, as in Go, so not a `source`).
    pub problem: UrlProblem,
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Path,
    Host,
    QueryComponent,
    Fragment,
}

fn is_hex(b: u8) -> bool {
    b.is_ascii_hexdigit()
}

fn unhex(b: u8) -> u8 {
    match b {
        b'0'..=b'9' => b - b'0',
        b'a'..=b'f' => b - b'a' + 10,
        _ => b - b'A' + 10,
    }
}

/// Go's `shouldEscape`.
fn should_escape(c: u8, mode: Mode) -> bool {
    if c.is_ascii_alphanumeric() {
        return false;
    }
    if mode == Mode::Host && b"!$&'()*+,;=:[]<>\"".contains(&c) {
        return false;
    }
    match c {
        b'-' | b'_' | b'.' | b'~' => return false,
        b'$' | b'&' | b'+' | b',' | b'/' | b':' | b';' | b'=' | b'?' | b'@' => match mode {
            Mode::Path => return c == b'?',
            Mode::QueryComponent => return true,
            Mode::Fragment => return false,
            Mode::Host => {}
        },
        _ => {}
    }
    if mode == Mode::Fragment && matches!(c, b'!' | b'(' | b')' | b'*') {
        return false;
    }
    true
}

/// Go's `unescape`, with its errors.
fn unescape(s: &str, mode: Mode) -> Result<String, UrlProblem> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                // Go quotes the escape's three bytes, which may end inside a multi-byte
                // character (`%€`): they are cut as bytes, never as `str`.
                if i + 2 >= b.len() || !is_hex(b[i + 1]) || !is_hex(b[i + 2]) {
                    let end = (i + 3).min(b.len());
                    return Err(UrlProblem::InvalidEscape(go_quote(&b[i..end])));
                }
                if mode == Mode::Host && unhex(b[i + 1]) < 8 && &b[i..i + 3] != b"%25" {
                    return Err(UrlProblem::InvalidEscape(go_quote(&b[i..i + 3])));
                }
                i += 3;
            }
            c => {
                if mode == Mode::Host && c < 0x80 && should_escape(c, mode) {
                    return Err(UrlProblem::InvalidHostCharacter(go_quote(&[c])));
                }
                i += 1;
            }
        }
    }
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                out.push(unhex(b[i + 1]) << 4 | unhex(b[i + 2]));
                i += 3;
            }
            b'+' if mode == Mode::QueryComponent => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Go's `escape`.
fn escape(s: &str, mode: Mode) -> String {
    let mut out = String::with_capacity(s.len());
    for &c in s.as_bytes() {
        if should_escape(c, mode) {
            if c == b' ' && mode == Mode::QueryComponent {
                out.push('+');
            } else {
                out.push_str(&format!("%{c:02X}"));
            }
        } else {
            out.push(c as char);
        }
    }
    out
}

fn valid_optional_port(port: &str) -> bool {
    port.is_empty() || (port.starts_with(':') && port[1..].bytes().all(|b| b.is_ascii_digit()))
}

fn get_scheme(raw: &str) -> Result<(&str, &str), UrlProblem> {
    for (i, c) in raw.bytes().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' if i > 0 => {}
            b':' if i == 0 => return Err(UrlProblem::MissingScheme),
            b':' => return Ok((&raw[..i], &raw[i + 1..])),
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

fn parse_host(host: &str) -> Result<String, UrlProblem> {
    if host.starts_with('[') {
        let i = host.rfind(']').ok_or(UrlProblem::MissingBracket)?;
        let port = &host[i + 1..];
        if !valid_optional_port(port) {
            return Err(UrlProblem::InvalidPort(go_quote(port.as_bytes())));
        }
    } else if let Some(i) = host.rfind(':') {
        let port = &host[i..];
        if !valid_optional_port(port) {
            return Err(UrlProblem::InvalidPort(go_quote(port.as_bytes())));
        }
    }
    unescape(host, Mode::Host)
}

/// Go's internal `parse(rawURL, viaRequest)`.
fn parse(raw: &str, via_request: bool) -> Result<GoUrl, UrlProblem> {
    if raw.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err(UrlProblem::ControlCharacter);
    }
    if raw.is_empty() && via_request {
        return Err(UrlProblem::Empty);
    }
    let mut u = GoUrl::default();
    if raw == "*" {
        u.path = "*".into();
        return Ok(u);
    }
    let (scheme, mut rest) = get_scheme(raw)?;
    u.scheme = scheme.to_ascii_lowercase();
    let owned_rest;
    if rest.ends_with('?') && rest.matches('?').count() == 1 {
        u.force_query = true;
        owned_rest = rest[..rest.len() - 1].to_string();
        rest = &owned_rest;
    } else if let Some((r, q)) = rest.split_once('?') {
        u.raw_query = q.to_string();
        rest = r;
    }
    if !rest.starts_with('/') {
        if !u.scheme.is_empty() {
            u.opaque = rest.to_string();
            return Ok(u);
        }
        if via_request {
            return Err(UrlProblem::InvalidRequestUri);
        }
        let segment = rest.split('/').next().unwrap_or("");
        if segment.contains(':') {
            return Err(UrlProblem::ColonInFirstSegment);
        }
    }
    let mut path = rest;
    if (!u.scheme.is_empty() || !via_request && !rest.starts_with("///")) && rest.starts_with("//")
    {
        let authority_and_path = &rest[2..];
        let (authority, p) = match authority_and_path.find('/') {
            Some(i) => (&authority_and_path[..i], &authority_and_path[i..]),
            None => (authority_and_path, ""),
        };
        let (user, host_part) = match authority.rfind('@') {
            Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
            None => (None, authority),
        };
        u.host = parse_host(host_part)?;
        if let Some(user) = user {
            if !user
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"-._:~!$&'()*+,;=%@".contains(&c))
            {
                return Err(UrlProblem::InvalidUserinfo);
            }
            u.user = Some(user.to_string());
        }
        path = p;
    } else if !u.scheme.is_empty() && rest.starts_with('/') {
        u.omit_host = true;
    }
    u.path = unescape(path, Mode::Path)?;
    u.raw_path = if escape(&u.path, Mode::Path) == path {
        String::new()
    } else {
        path.to_string()
    };
    Ok(u)
}

/// Go's `*url.Error` for `raw`.
fn url_error(raw: &str) -> impl Fn(UrlProblem) -> UrlError + '_ {
    move |problem| UrlError {
        url: raw.to_string(),
        problem,
    }
}

/// Go's `url.ParseRequestURI`.
pub fn parse_request_uri(raw: &str) -> Result<GoUrl, UrlError> {
    parse(raw, true).map_err(url_error(raw))
}

/// Go's `url.Parse`: the fragment is split off first.
pub fn parse_url(raw: &str) -> Result<GoUrl, UrlError> {
    let (u, frag) = match raw.split_once('#') {
        Some((u, f)) => (u, Some(f)),
        None => (raw, None),
    };
    let mut url = parse(u, false).map_err(url_error(raw))?;
    if let Some(f) = frag {
        url.fragment = Some(unescape(f, Mode::Fragment).map_err(url_error(raw))?);
    }
    Ok(url)
}

fn valid_encoded(s: &str) -> bool {
    s.bytes()
        .all(|c| b"!$&'()*+,;=:@[]%".contains(&c) || !should_escape(c, Mode::Path))
}

impl GoUrl {
    /// Go's `EscapedPath`.
    pub fn escaped_path(&self) -> String {
        if !self.raw_path.is_empty() && valid_encoded(&self.raw_path) {
            if let Ok(p) = unescape(&self.raw_path, Mode::Path) {
                if p == self.path {
                    return self.raw_path.clone();
                }
            }
        }
        if self.path == "*" {
            return "*".into();
        }
        escape(&self.path, Mode::Path)
    }

    fn split_host_port(&self) -> (&str, &str) {
        let mut host = self.host.as_str();
        let mut port = "";
        if let Some(colon) = host.rfind(':') {
            if valid_optional_port(&host[colon..]) {
                port = &host[colon + 1..];
                host = &host[..colon];
            }
        }
        if host.starts_with('[') && host.ends_with(']') {
            host = &host[1..host.len() - 1];
        }
        (host, port)
    }

    /// Go's `URL.String`, which URL equality compares.
    pub fn to_go_string(&self) -> String {
        let mut s = String::new();
        if !self.scheme.is_empty() {
            s.push_str(&self.scheme);
            s.push(':');
        }
        if !self.opaque.is_empty() {
            s.push_str(&self.opaque);
        } else {
            let authority = !self.scheme.is_empty() || !self.host.is_empty() || self.user.is_some();
            let omitted = self.omit_host && self.host.is_empty() && self.user.is_none();
            if authority && !omitted {
                if !self.host.is_empty() || !self.path.is_empty() || self.user.is_some() {
                    s.push_str("//");
                }
                if let Some(u) = &self.user {
                    s.push_str(u);
                    s.push('@');
                }
                s.push_str(&escape(&self.host, Mode::Host));
            }
            let path = self.escaped_path();
            if !path.is_empty() && !path.starts_with('/') && !self.host.is_empty() {
                s.push('/');
            }
            if s.is_empty() && path.split('/').next().unwrap_or("").contains(':') {
                s.push_str("./");
            }
            s.push_str(&path);
        }
        if self.force_query || !self.raw_query.is_empty() {
            s.push('?');
            s.push_str(&self.raw_query);
        }
        if let Some(f) = &self.fragment {
            if !f.is_empty() {
                s.push('#');
                s.push_str(&escape(f, Mode::Fragment));
            }
        }
        s
    }

    /// Go's `URL.Query()`: errors are ignored, as Go does.
    pub fn query(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for pair in self.raw_query.split('&') {
            if pair.is_empty() || pair.contains(';') {
                continue;
            }
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let (Ok(k), Ok(v)) = (
                unescape(k, Mode::QueryComponent),
                unescape(v, Mode::QueryComponent),
            ) else {
                continue;
            };
            match out.iter_mut().find(|(key, _)| *key == k) {
                Some((_, vals)) => vals.push(v),
                None => out.push((k, vec![v])),
            }
        }
        out
    }
}

impl Opaque for GoUrl {
    fn type_name(&self) -> &'static str {
        "kubernetes.URL"
    }
    fn equals(&self, other: &dyn Opaque) -> bool {
        other
            .as_any()
            .downcast_ref::<GoUrl>()
            .is_some_and(|o| o.to_go_string() == self.to_go_string())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn to_cel_string(&self) -> Option<String> {
        Some(self.to_go_string())
    }
}

/// `url(s)`: must pass `ParseRequestURI`, then is kept as `Parse` reads it.
pub fn to_url(s: &str) -> Result<GoUrl, EvalError> {
    let err = |e: UrlError| {
        EvalError::new(format!(
            "URL parse error during conversion from string: {e}"
        ))
    };
    parse_request_uri(s).map_err(err)?;
    parse_url(s).map_err(err)
}

fn url<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::opaque(to_url(str_arg(&a[0])?)?))
}

fn is_url<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Bool(parse_request_uri(str_arg(&a[0])?).is_ok()))
}

fn get(v: &Value<'_>) -> Result<GoUrl, EvalError> {
    v.as_opaque::<GoUrl>()
        .cloned()
        .ok_or_else(EvalError::no_such_overload)
}

fn get_scheme_fn<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::string(get(&a[0])?.scheme))
}

fn get_host<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::string(get(&a[0])?.host))
}

fn get_hostname<'a>(a: &[Value<'a>]) -> R<'a> {
    let u = get(&a[0])?;
    Ok(Value::string(u.split_host_port().0))
}

fn get_port<'a>(a: &[Value<'a>]) -> R<'a> {
    let u = get(&a[0])?;
    Ok(Value::string(u.split_host_port().1))
}

fn get_escaped_path<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::string(get(&a[0])?.escaped_path()))
}

fn get_query<'a>(a: &[Value<'a>]) -> R<'a> {
    let entries = get(&a[0])?
        .query()
        .into_iter()
        .map(|(k, vs)| {
            (
                Value::string(k),
                Value::list(vs.into_iter().map(Value::string).collect()),
            )
        })
        .collect();
    Ok(Value::Map(Map::Owned(Arc::new(OwnedMap::from_entries(
        entries,
    )?))))
}

pub fn register(add: Register<'_>) {
    let v = 0;
    add(
        "url",
        &[("(string) kubernetes.URL", v)],
        url,
        Cost::Traverse(0, 0.1),
    );
    add(
        "isURL",
        &[("(string) bool", v)],
        is_url,
        // Kubernetes' `cost.go` prices `url` but not `isURL`: cel-go's default of 1.
        Cost::One,
    );
    add(
        "getScheme",
        &[("kubernetes.URL.() string", v)],
        get_scheme_fn,
        Cost::One,
    );
    add(
        "getHost",
        &[("kubernetes.URL.() string", v)],
        get_host,
        Cost::One,
    );
    add(
        "getHostname",
        &[("kubernetes.URL.() string", v)],
        get_hostname,
        Cost::One,
    );
    add(
        "getPort",
        &[("kubernetes.URL.() string", v)],
        get_port,
        Cost::One,
    );
    add(
        "getEscapedPath",
        &[("kubernetes.URL.() string", v)],
        get_escaped_path,
        Cost::One,
    );
    add(
        "getQuery",
        &[("kubernetes.URL.() map(string, list(string))", v)],
        get_query,
        Cost::One,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_uri_acceptance() {
        assert!(to_url("https://example.com/path").is_ok());
        assert!(to_url("/absolute/path").is_ok());
        assert!(to_url("relative/path")
            .unwrap_err()
            .message()
            .ends_with("invalid URI for request"));
        let e = to_url("https://a:b:c/").unwrap_err();
        assert_eq!(e.message(), "URL parse error during conversion from string: parse \"https://a:b:c/\": invalid port \":c\" after host");
        assert!(to_url("").is_err());
        assert!(to_url("https://[::1/")
            .unwrap_err()
            .message()
            .contains("missing ']' in host"));
        assert!(to_url("https://exa mple.com/")
            .unwrap_err()
            .message()
            .contains("invalid character \" \" in host name"));
    }

    /// Escapes and host names are cut as Go cuts them, in bytes: a cut inside a character is
    /// quoted with `\x` escapes, as `strconv.Quote` does, never a panic.
    #[test]
    fn escapes_cut_inside_a_character() {
        let msg = |s: &str| to_url(s).unwrap_err().message().to_string();
        let prefix = "URL parse error during conversion from string: ";
        assert_eq!(
            msg("/%€"),
            format!(r#"{prefix}parse "/%€": invalid URL escape "%\xe2\x82""#)
        );
        assert_eq!(
            msg("/%é"),
            format!(r#"{prefix}parse "/%é": invalid URL escape "%é""#)
        );
        assert_eq!(
            msg("/a%1€"),
            format!(r#"{prefix}parse "/a%1€": invalid URL escape "%1\xe2""#)
        );
        assert_eq!(
            msg("https://%€/"),
            format!(r#"{prefix}parse "https://%€/": invalid URL escape "%\xe2\x82""#)
        );
        assert_eq!(
            msg("https://h:€/"),
            format!(r#"{prefix}parse "https://h:€/": invalid port ":€" after host"#)
        );
        assert!(parse_request_uri("/%€").is_err());
        assert!(parse_url("/a#%€").is_err());
        assert!(parse_url("/a?x=%€").unwrap().query().is_empty());
    }

    #[test]
    fn accessors_follow_go() {
        let u = to_url("HTTPS://User@Example.COM:8443/a%20b/c?x=1&x=2&y=a+b#frag").unwrap();
        assert_eq!(u.scheme, "https", "only the scheme is lower-cased");
        assert_eq!(u.host, "Example.COM:8443");
        assert_eq!(u.split_host_port(), ("Example.COM", "8443"));
        assert_eq!(u.escaped_path(), "/a%20b/c");
        assert_eq!(
            u.query(),
            vec![
                ("x".to_string(), vec!["1".to_string(), "2".to_string()]),
                ("y".to_string(), vec!["a b".to_string()])
            ]
        );
        assert_eq!(u.fragment.as_deref(), Some("frag"));
        let v6 = to_url("https://[::1]:80/").unwrap();
        assert_eq!(v6.host, "[::1]:80");
        assert_eq!(v6.split_host_port(), ("::1", "80"));
        let spaces = to_url("https://example.com/path with spaces/").unwrap();
        assert_eq!(spaces.escaped_path(), "/path%20with%20spaces/");
        assert_eq!(to_url("https://example.com").unwrap().escaped_path(), "");
    }

    #[test]
    fn equality_is_go_string_equality() {
        let a = to_url("https://example.com/a?b=c").unwrap();
        assert_eq!(a.to_go_string(), "https://example.com/a?b=c");
        assert_ne!(
            to_url("https://example.com:443/").unwrap().to_go_string(),
            to_url("https://example.com/").unwrap().to_go_string()
        );
        assert_eq!(
            to_url("mailto:a@b.c").unwrap().to_go_string(),
            "mailto:a@b.c"
        );
    }
}
