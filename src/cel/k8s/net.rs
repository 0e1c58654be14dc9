//! Kubernetes' IP and CIDR libraries (`library/ip.go`, `library/cidr.go`; compatibility 1.30).
//!
//! Parsing follows Go's `netip` with Kubernetes' restrictions: IPv4 dotted quads without
//! leading zeros, any RFC 4291 IPv6 form, no zones, no IPv4-mapped IPv6. Canonical forms are
//! Go's (RFC 5952 for IPv6, which Rust's `Ipv6Addr` display also follows). Predicates follow
//! Go: private ranges are global unicast; IPv6 link-local multicast is `ffX2::/16`.

use std::any::Any;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::cel::error::EvalError;
use crate::cel::overload::{since, str_arg, Cost, Register, R};
use crate::cel::value::{Opaque, Value};

#[derive(Debug, Clone, PartialEq)]
pub struct Ip(pub IpAddr);

#[derive(Debug, Clone, PartialEq)]
pub struct Cidr {
    /// The address as written (host bits kept).
    pub addr: IpAddr,
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

/// Parses an address as Kubernetes' `ip()` does, with its error wording.
pub fn parse_ip(s: &str) -> Result<IpAddr, EvalError> {
    let err = |why: &str| {
        EvalError::new(format!(
            "IP Address {s:?} parse error during conversion from string: {why}"
        ))
    };
    if s.contains('%') {
        return Err(err(&format!(
            "IP address {s:?} with zone value is not allowed"
        )));
    }
    let addr: IpAddr = s
        .parse()
        .map_err(|_| err(&format!("ParseAddr({s:?}): unable to parse IP")))?;
    if let IpAddr::V6(v6) = addr {
        if is_ipv4_mapped(&v6) {
            return Err(err(&format!(
                "IPv4-mapped IPv6 address {s:?} is not allowed"
            )));
        }
    }
    Ok(addr)
}

fn is_ipv4_mapped(v6: &Ipv6Addr) -> bool {
    let s = v6.segments();
    s[..5] == [0, 0, 0, 0, 0] && s[5] == 0xffff
}

pub fn parse_cidr(s: &str) -> Result<Cidr, EvalError> {
    let err = |why: &str| {
        EvalError::new(format!(
            "network address parse error during conversion from string: {why}"
        ))
    };
    let (addr_text, bits_text) = s
        .split_once('/')
        .ok_or_else(|| err(&format!("netip.ParsePrefix({s:?}): no '/'")))?;
    if addr_text.contains('%') {
        return Err(err(&format!(
            "netip.ParsePrefix({s:?}): IPv6 zones cannot be present in a prefix"
        )));
    }
    let addr: IpAddr = addr_text.parse().map_err(|_| {
        err(&format!(
            "netip.ParsePrefix({s:?}): ParseAddr({addr_text:?}): unable to parse IP"
        ))
    })?;
    if let IpAddr::V6(v6) = addr {
        if is_ipv4_mapped(&v6) {
            return Err(err(&format!(
                "IPv4-mapped IPv6 address {s:?} is not allowed"
            )));
        }
    }
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let valid_digits = !bits_text.is_empty()
        && bits_text.bytes().all(|b| b.is_ascii_digit())
        && !(bits_text.len() > 1 && bits_text.starts_with('0'));
    let prefix: u8 = bits_text
        .parse()
        .ok()
        .filter(|p| valid_digits && *p <= max)
        .ok_or_else(|| {
            err(&format!(
                "netip.ParsePrefix({s:?}): bad bits after slash: {bits_text:?}"
            ))
        })?;
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

    pub fn contains_ip(&self, ip: &IpAddr) -> bool {
        if self.addr.is_ipv4() != ip.is_ipv4() {
            return false;
        }
        let m = mask(self.prefix);
        (bits(&self.addr).0 & m) == (bits(ip).0 & m)
    }

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
    Ok(Value::Bool(cidr_of(&a[0])?.contains_ip(&ip_of(&a[1])?)))
}

fn contains_cidr<'a>(a: &[Value<'a>]) -> R<'a> {
    Ok(Value::Bool(cidr_of(&a[0])?.contains_cidr(&cidr_of(&a[1])?)))
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
/// prefix bytes, plus parsing a string argument.
fn cost_contains_ip(a: &[Value<'_>]) -> u64 {
    ((2 * cidr_size(a)) as f64 * 0.1).ceil() as u64 + cost_parse_arg(a)
}

/// `containsCIDR`: `containsIP`'s comparison, plus ⌈0.1 · size(cidr)⌉ + 1 for masking.
fn cost_contains_cidr(a: &[Value<'_>]) -> u64 {
    let size = cidr_size(a);
    ((2 * size) as f64 * 0.1).ceil() as u64
        + (size as f64 * 0.1).ceil() as u64
        + 1
        + cost_parse_arg(a)
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
        &[("net.CIDR.(net.IP) bool", v), ("net.CIDR.(string) bool", v)],
        contains_ip,
        Cost::Custom(cost_contains_ip),
    );
    add(
        "containsCIDR",
        &[
            ("net.CIDR.(net.CIDR) bool", v),
            ("net.CIDR.(string) bool", v),
        ],
        contains_cidr,
        Cost::Custom(cost_contains_cidr),
    );
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
