//! Kubernetes' IP and CIDR libraries (`library/ip.go`, `library/cidr.go`; compatibility 1.30).
//!
//! Parsing follows Go's `netip` with Kubernetes' restrictions: IPv4 dotted quads without
//! leading zeros, any RFC 4291 IPv6 form, no zones, no IPv4-mapped IPv6. Canonical forms are
//! Go's (RFC 5952 for IPv6, which Rust's `Ipv6Addr` display also follows). Predicates follow
//! Go: private ranges are global unicast; IPv6 link-local multicast is `ffX2::/16`.

use std::any::Any;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::error::EvalError;
use crate::overload::{since, str_arg, Cost, Imp, Register, R};
use crate::value::{Opaque, Value};

/// A `net.IP` value (`ip('10.0.0.1')`).
#[derive(Debug, Clone, PartialEq)]
pub struct Ip(pub IpAddr);

/// A `net.CIDR` value (`cidr('10.0.0.0/8')`).
#[derive(Debug, Clone, PartialEq)]
pub struct Cidr {
    /// The address as written (host bits kept).
    pub addr: IpAddr,
    /// The prefix length.
    pub prefix: u8,
}

impl Opaque for Ip {
    fn type_name(&self) -> &'static str {
        "net.IP"
    }
    fn equals(&self, other: &dyn Opaque) -> bool {
        other.as_any().downcast_ref::<Ip>() == Some(self)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn to_cel_string(&self) -> Option<String> {
        Some(self.0.to_string())
    }
}

impl Opaque for Cidr {
    fn type_name(&self) -> &'static str {
        "net.CIDR"
    }
    fn equals(&self, other: &dyn Opaque) -> bool {
        other.as_any().downcast_ref::<Cidr>() == Some(self)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn to_cel_string(&self) -> Option<String> {
        Some(format!("{}/{}", self.addr, self.prefix))
    }
}

/// Parses an address as Kubernetes' `ip()` does (`parseIPAddr`), with its error wording:
/// Go's `netip.ParseAddr` error wrapped, then its own refusals of zones and IPv4-mapped
/// IPv6 addresses, unwrapped.
pub fn parse_ip(s: &str) -> Result<IpAddr, EvalError> {
    let addr = parse_addr(s).map_err(|why| {
        EvalError::new(format!(
            "IP Address {s:?} parse error during conversion from string: {why}"
        ))
    })?;
    if s.contains('%') {
        return Err(EvalError::new(format!(
            "IP address {s:?} with zone value is not allowed"
        )));
    }
    if let IpAddr::V6(v6) = addr {
        if is_ipv4_mapped(&v6) {
            return Err(EvalError::new(format!(
                "IPv4-mapped IPv6 address {s:?} is not allowed"
            )));
        }
    }
    Ok(addr)
}

/// Go's `netip.ParseAddr`: the address (a zone after `%` is accepted and dropped), or Go's
/// error text, `ParseAddr("…"): <why>[ (at "…")]`.
fn parse_addr(s: &str) -> Result<IpAddr, String> {
    let fail = |msg: &str, at: Option<&str>| match at {
        Some(at) => format!("ParseAddr({s:?}): {msg} (at {at:?})"),
        None => format!("ParseAddr({s:?}): {msg}"),
    };
    let Some(kind) = s.bytes().find(|b| matches!(b, b'.' | b':' | b'%')) else {
        return Err(fail("unable to parse IP", None));
    };
    match kind {
        b'.' => go_ipv4_fields(s).map_err(|(m, at)| fail(m, at))?,
        b':' => go_ipv6_check(s).map_err(|(m, at)| fail(m, at))?,
        _ => return Err(fail("missing IPv6 address", None)),
    }
    let plain = s.split_once('%').map_or(s, |(a, _)| a);
    plain
        .parse::<IpAddr>()
        .map_err(|_| fail("unable to parse IP", None))
}

type GoParseError<'s> = (&'static str, Option<&'s str>);

/// Go's `parseIPv4Fields` over all of `s`: only its error matters here.
fn go_ipv4_fields(s: &str) -> Result<(), GoParseError<'_>> {
    let b = s.as_bytes();
    let (mut val, mut pos, mut digits) = (0u32, 0, 0);
    for (i, &c) in b.iter().enumerate() {
        if c.is_ascii_digit() {
            if digits == 1 && val == 0 {
                return Err(("IPv4 field has octet with leading zero", None));
            }
            val = val * 10 + u32::from(c - b'0');
            digits += 1;
            if val > 255 {
                return Err(("IPv4 field has value >255", None));
            }
        } else if c == b'.' {
            if i == 0 || i == b.len() - 1 || b[i - 1] == b'.' {
                return Err(("IPv4 field must have at least one digit", s.get(i..)));
            }
            if pos == 3 {
                return Err(("IPv4 address too long", None));
            }
            pos += 1;
            val = 0;
            digits = 0;
        } else {
            return Err(("unexpected character", s.get(i..)));
        }
    }
    if pos < 3 {
        return Err(("IPv4 address too short", None));
    }
    Ok(())
}

/// Go's `parseIPv6` checks, in its order (`in` is the whole text, zone included).
fn go_ipv6_check(input: &str) -> Result<(), GoParseError<'_>> {
    let mut s = input;
    if let Some(i) = s.find('%') {
        if i + 1 == s.len() {
            return Err(("zone must be a non-empty string", None));
        }
        s = &s[..i];
    }
    let end = s.len();
    let mut ellipsis: Option<usize> = None;
    if s.starts_with("::") {
        ellipsis = Some(0);
        s = &s[2..];
        if s.is_empty() {
            return Ok(());
        }
    }
    let mut i = 0;
    while i < 16 {
        let b = s.as_bytes();
        let mut off = 0;
        let mut acc = 0u32;
        while off < b.len() {
            let Some(d) = char::from(b[off]).to_digit(16) else {
                break;
            };
            acc = (acc << 4) + d;
            if off > 3 {
                return Err(("each group must have 4 or less digits", Some(s)));
            }
            if acc > 0xffff {
                return Err(("IPv6 field has value >=2^16", Some(s)));
            }
            off += 1;
        }
        if off == 0 {
            return Err((
                "each colon-separated field must have at least one digit",
                Some(s),
            ));
        }
        if b.get(off) == Some(&b'.') {
            if ellipsis.is_none() && i != 12 {
                return Err((
                    "embedded IPv4 address must replace the final 2 fields of the address",
                    Some(s),
                ));
            }
            if i + 4 > 16 {
                return Err((
                    "too many hex fields to fit an embedded IPv4 at the end of the address",
                    Some(s),
                ));
            }
            // `s` is the tail of `input[..end]`.
            let start = end - s.len();
            go_ipv4_fields(input.get(start..end).unwrap_or(s))?;
            s = "";
            i += 4;
            break;
        }
        i += 2;
        s = &s[off..];
        if s.is_empty() {
            break;
        }
        if !s.starts_with(':') {
            return Err(("unexpected character, want colon", Some(s)));
        } else if s.len() == 1 {
            return Err(("colon must be followed by more characters", Some(s)));
        }
        s = &s[1..];
        if s.starts_with(':') {
            if ellipsis.is_some() {
                return Err(("multiple :: in address", Some(s)));
            }
            ellipsis = Some(i);
            s = &s[1..];
            if s.is_empty() {
                break;
            }
        }
    }
    if !s.is_empty() {
        return Err(("trailing garbage after address", Some(s)));
    }
    if i < 16 {
        if ellipsis.is_none() {
            return Err(("address string too short", None));
        }
    } else if ellipsis.is_some() {
        return Err(("the :: must expand to at least one field of zeros", None));
    }
    Ok(())
}

fn is_ipv4_mapped(v6: &Ipv6Addr) -> bool {
    let s = v6.segments();
    s[..5] == [0, 0, 0, 0, 0] && s[5] == 0xffff
}

/// Parses a prefix as Kubernetes' `cidr()` does: Go's `netip.ParsePrefix`, whose error
/// Kubernetes wraps twice, then its refusal of IPv4-mapped IPv6 addresses, wrapped once
/// (`parseCIDR` and `stringToCIDR` of staging/src/k8s.io/apiserver/pkg/cel/library/cidr.go).
pub fn parse_cidr(s: &str) -> Result<Cidr, EvalError> {
    const WRAP: &str = "network address parse error during conversion from string";
    let err =
        |why: &str| EvalError::new(format!("{WRAP}: {WRAP}: netip.ParsePrefix({s:?}): {why}"));
    let (addr_text, bits_text) = s.rsplit_once('/').ok_or_else(|| err("no '/'"))?;
    let addr = parse_addr(addr_text).map_err(|why| err(&why))?;
    if addr_text.contains('%') {
        return Err(err("IPv6 zones cannot be present in a prefix"));
    }
    let bad_bits = || err(&format!("bad bits after slash: {bits_text:?}"));
    let first = bits_text.bytes().next();
    if bits_text.len() > 1 && !matches!(first, Some(b'1'..=b'9')) {
        return Err(bad_bits());
    }
    // Go's `strconv.Atoi`: an optional sign, then digits.
    let digits = bits_text.strip_prefix(['+', '-']).unwrap_or(bits_text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad_bits());
    }
    let bits: i64 = bits_text.parse().map_err(|_| bad_bits())?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let prefix = u8::try_from(bits)
        .ok()
        .filter(|p| i64::from(*p) <= max)
        .ok_or_else(|| err("prefix length out of range"))?;
    if let IpAddr::V6(v6) = addr {
        if is_ipv4_mapped(&v6) {
            // `stringToCIDR` wraps every error of `parseCIDR`, this one included.
            return Err(EvalError::new(format!(
                "{WRAP}: IPv4-mapped IPv6 address {s:?} is not allowed"
            )));
        }
    }
    Ok(Cidr { addr, prefix })
}

fn bits(addr: &IpAddr) -> (u128, u8) {
    match addr {
        IpAddr::V4(v4) => (u128::from(u32::from(*v4)) << 96, 32),
        IpAddr::V6(v6) => (u128::from(*v6), 128),
    }
}

fn mask(prefix: u8) -> u128 {
    if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(prefix))
    }
}

impl Cidr {
    /// The network with host bits cleared.
    pub fn masked(&self) -> Cidr {
        let (b, width) = bits(&self.addr);
        let m = b & mask(self.prefix);
        let addr = if width == 32 {
            IpAddr::V4(Ipv4Addr::from((m >> 96) as u32))
        } else {
            IpAddr::V6(Ipv6Addr::from(m))
        };
        Cidr {
            addr,
            prefix: self.prefix,
        }
    }

    /// Whether `ip` is in this range.
    pub fn contains_ip(&self, ip: &IpAddr) -> bool {
        if self.addr.is_ipv4() != ip.is_ipv4() {
            return false;
        }
        let m = mask(self.prefix);
        (bits(&self.addr).0 & m) == (bits(ip).0 & m)
    }

    /// Whether `other` is a sub-range of this one.
    pub fn contains_cidr(&self, other: &Cidr) -> bool {
        self.prefix <= other.prefix && self.contains_ip(&other.addr)
    }
}

fn ip_of(v: &Value<'_>) -> Result<IpAddr, EvalError> {
    match v {
        Value::String(s) => parse_ip(s.as_str()),
        other => other
            .as_opaque::<Ip>()
            .map(|ip| ip.0)
            .ok_or_else(EvalError::no_such_overload),
    }
}

fn cidr_of(v: &Value<'_>) -> Result<Cidr, EvalError> {
    match v {
        Value::String(s) => parse_cidr(s.as_str()),
        other => other
            .as_opaque::<Cidr>()
            .cloned()
            .ok_or_else(EvalError::no_such_overload),
    }
}

/// `ip(string)`, or `cidr.ip()`.
fn ip<'a>(a: &[Value<'a>]) -> R<'a> {
    if let Some(c) = a[0].as_opaque::<Cidr>() {
        return Ok(Value::opaque(Ip(c.addr)));
    }
    Ok(Value::opaque(Ip(parse_ip(str_arg(&a[0])?)?)))
}

fn is_ip<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Bool(parse_ip(str_arg(&a[0])?).is_ok()))
}

fn is_canonical<'a>(a: &[Value<'a>]) -> R<'a> {
    let s = str_arg(&a[0])?;
    let ip = parse_ip(s)?;
    Ok(Value::Bool(ip.to_string() == s))
}

fn ip_pred<'a>(a: &[Value<'a>], f: fn(&IpAddr) -> bool) -> R<'a> {
    Ok(Value::Bool(f(&ip_of(&a[0])?)))
}

fn family<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Int(if ip_of(&a[0])?.is_ipv4() { 4 } else { 6 }))
}

fn is_unspecified<'a>(a: &[Value<'a>]) -> R<'a> {
    ip_pred(a, |ip| ip.is_unspecified())
}

fn is_loopback<'a>(a: &[Value<'a>]) -> R<'a> {
    ip_pred(a, |ip| ip.is_loopback())
}

fn link_local_multicast(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.octets()[..3] == [224, 0, 0],
        IpAddr::V6(v6) => v6.segments()[0] & 0xff0f == 0xff02,
    }
}

fn link_local_unicast(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.octets()[..2] == [169, 254],
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    }
}

/// Go's `IsGlobalUnicast`: private ranges count as global.
fn global_unicast(ip: &IpAddr) -> bool {
    if let IpAddr::V4(v4) = ip {
        if *v4 == Ipv4Addr::BROADCAST {
            return false;
        }
    }
    !ip.is_unspecified() && !ip.is_loopback() && !ip.is_multicast() && !link_local_unicast(ip)
}

fn is_link_local_multicast<'a>(a: &[Value<'a>]) -> R<'a> {
    ip_pred(a, link_local_multicast)
}

fn is_link_local_unicast<'a>(a: &[Value<'a>]) -> R<'a> {
    ip_pred(a, link_local_unicast)
}

fn is_global_unicast<'a>(a: &[Value<'a>]) -> R<'a> {
    ip_pred(a, global_unicast)
}

fn cidr<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::opaque(parse_cidr(str_arg(&a[0])?)?))
}

fn is_cidr<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Bool(parse_cidr(str_arg(&a[0])?).is_ok()))
}

fn contains_ip<'a>(a: &[Value<'a>]) -> R<'a> {
    // Kubernetes answers an unparsable string argument with `no such overload`.
    let ip = match &a[1] {
        Value::String(s) => parse_ip(s.as_str()).map_err(|_| EvalError::no_such_overload())?,
        other => ip_of(other)?,
    };
    Ok(Value::Bool(cidr_of(&a[0])?.contains_ip(&ip)))
}

fn contains_cidr<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Bool(cidr_of(&a[0])?.contains_cidr(&cidr_of(&a[1])?)))
}

/// `containsCIDR` up to Kubernetes 1.32: the receiver's masked prefix compared with the
/// other's address unmasked (`netip.PrefixFrom(other.Addr(), bits)`), so a subnet whose
/// address has bits past the receiver's prefix is not contained.
fn contains_cidr_unmasked<'a>(a: &[Value<'a>]) -> R<'a> {
    let cidr = cidr_of(&a[0])?;
    let other = cidr_of(&a[1])?;
    let equal_masked = cidr.masked().addr == other.addr;
    Ok(Value::Bool(equal_masked && cidr.prefix <= other.prefix))
}

fn masked<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::opaque(cidr_of(&a[0])?.masked()))
}

fn prefix_length<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Int(i64::from(cidr_of(&a[0])?.prefix)))
}

/// The string argument of `containsIP`/`containsCIDR`, parsed: ⌈0.1 · size⌉.
fn cost_parse_arg(a: &[Value<'_>]) -> u64 {
    match a.get(1) {
        Some(v @ Value::String(_)) => (v.cost_size() as f64 * 0.1).ceil() as u64,
        _ => 0,
    }
}

/// The size `cost.go` takes for the CIDR receiver: its prefix in bytes.
fn cidr_size(a: &[Value<'_>]) -> u64 {
    a.first()
        .and_then(|v| v.as_opaque::<Cidr>())
        .map_or(16, |c| u64::from(c.prefix).div_ceil(8))
}

/// `containsIP` as Kubernetes' `cost.go` prices it: ⌈0.1 · 2 · size(cidr)⌉ to compare the
/// prefix bytes.
fn cost_contains_ip(a: &[Value<'_>]) -> u64 {
    ((2 * cidr_size(a)) as f64 * 0.1).ceil() as u64
}

/// `containsCIDR`: `containsIP`'s comparison, plus ⌈0.1 · size(cidr)⌉ + 1 for masking.
fn cost_contains_cidr(a: &[Value<'_>]) -> u64 {
    let size = cidr_size(a);
    ((2 * size) as f64 * 0.1).ceil() as u64 + (size as f64 * 0.1).ceil() as u64 + 1
}

/// The string overloads add parsing the argument, by overload id: a call whose argument is
/// `dyn` matches both overloads, has no id, and is priced as the first (not parsing).
fn cost_contains_ip_string(a: &[Value<'_>]) -> u64 {
    cost_contains_ip(a) + cost_parse_arg(a)
}

fn cost_contains_cidr_string(a: &[Value<'_>]) -> u64 {
    cost_contains_cidr(a) + cost_parse_arg(a)
}

pub fn register(add: Register<'_>) {
    let v = since::IP_CIDR;
    add(
        "ip",
        &[("(string) net.IP", v), ("net.CIDR.() net.IP", v)],
        ip,
        Cost::Traverse(0, 0.1),
    );
    add(
        "isIP",
        &[("(string) bool", v)],
        is_ip,
        Cost::Traverse(0, 0.1),
    );
    add(
        "ip.isCanonical",
        &[("(string) bool", v)],
        is_canonical,
        Cost::Traverse(0, 0.2),
    );
    add("family", &[("net.IP.() int", v)], family, Cost::One);
    add(
        "isUnspecified",
        &[("net.IP.() bool", v)],
        is_unspecified,
        Cost::One,
    );
    add(
        "isLoopback",
        &[("net.IP.() bool", v)],
        is_loopback,
        Cost::One,
    );
    add(
        "isLinkLocalMulticast",
        &[("net.IP.() bool", v)],
        is_link_local_multicast,
        Cost::One,
    );
    add(
        "isLinkLocalUnicast",
        &[("net.IP.() bool", v)],
        is_link_local_unicast,
        Cost::One,
    );
    add(
        "isGlobalUnicast",
        &[("net.IP.() bool", v)],
        is_global_unicast,
        Cost::One,
    );
    add(
        "cidr",
        &[("(string) net.CIDR", v)],
        cidr,
        Cost::Traverse(0, 0.1),
    );
    add(
        "isCIDR",
        &[("(string) bool", v)],
        is_cidr,
        Cost::Traverse(0, 0.1),
    );
    add(
        "containsIP",
        &[("net.CIDR.(net.IP) bool", v)],
        contains_ip,
        Cost::Custom(cost_contains_ip),
    );
    add(
        "containsIP",
        &[("net.CIDR.(string) bool", v)],
        contains_ip,
        Cost::Custom(cost_contains_ip_string),
    );
    // kubernetes/kubernetes#130450 (1.33) masks the other prefix's address; the checker
    // takes the newest of two overloads with one signature.
    for (since, imp) in [
        (v, contains_cidr_unmasked as Imp),
        (since::CONTAINS_CIDR_MASKED, contains_cidr),
    ] {
        add(
            "containsCIDR",
            &[("net.CIDR.(net.CIDR) bool", since)],
            imp,
            Cost::Custom(cost_contains_cidr),
        );
        add(
            "containsCIDR",
            &[("net.CIDR.(string) bool", since)],
            imp,
            Cost::Custom(cost_contains_cidr_string),
        );
    }
    add("masked", &[("net.CIDR.() net.CIDR", v)], masked, Cost::One);
    add(
        "prefixLength",
        &[("net.CIDR.() int", v)],
        prefix_length,
        Cost::One,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsing_follows_kubernetes() {
        assert!(parse_ip("192.168.0.1").is_ok());
        assert!(parse_ip("192.168.00.1").is_err(), "leading zeros");
        assert!(parse_ip("fe80::1%eth0")
            .unwrap_err()
            .message()
            .contains("zone"));
        assert!(parse_ip("::ffff:1.2.3.4")
            .unwrap_err()
            .message()
            .contains("IPv4-mapped"));
        let c = parse_cidr("192.168.0.1/24").unwrap();
        assert_eq!(c.prefix, 24, "host bits are accepted");
        assert_eq!(c.masked().to_cel_string().unwrap(), "192.168.0.0/24");
        assert!(parse_cidr("10.0.0.0/33").is_err());
        assert!(parse_cidr("10.0.0.0").is_err());
    }

    /// `stringToCIDR` (staging/src/k8s.io/apiserver/pkg/cel/library/cidr.go) wraps whatever
    /// `parseCIDR` returns, so the IPv4-mapped refusal keeps the conversion prefix (once, where
    /// `netip.ParsePrefix` errors have it twice).
    #[test]
    fn an_ipv4_mapped_prefix_keeps_the_conversion_prefix() {
        assert_eq!(
            parse_cidr("::ffff:10.0.0.0/104").unwrap_err().message(),
            "network address parse error during conversion from string: \
             IPv4-mapped IPv6 address \"::ffff:10.0.0.0/104\" is not allowed"
        );
    }

    #[test]
    fn go_predicates() {
        let p = |s: &str| parse_ip(s).unwrap();
        assert!(
            global_unicast(&p("192.168.0.1")),
            "private ranges are global unicast"
        );
        assert!(!global_unicast(&p("255.255.255.255")));
        assert!(link_local_multicast(&p("ff02::1")));
        assert!(link_local_multicast(&p("ff12::1")));
        assert!(!link_local_multicast(&p("ff05::1")));
        assert!(link_local_unicast(&p("fe80::1")));
    }

    #[test]
    fn containment_and_equality() {
        let net = parse_cidr("10.0.0.0/8").unwrap();
        assert!(net.contains_cidr(&parse_cidr("10.1.0.0/16").unwrap()));
        assert!(!parse_cidr("10.1.0.0/16").unwrap().contains_cidr(&net));
        assert!(!net.contains_ip(&p6("::a00:1")));
        assert_ne!(
            parse_cidr("192.168.0.1/24").unwrap(),
            parse_cidr("192.168.0.0/24").unwrap()
        );
    }

    fn p6(s: &str) -> IpAddr {
        s.parse().unwrap()
    }
}
