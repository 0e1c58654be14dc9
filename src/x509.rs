//! The validity window of a DER X.509 certificate, read with a minimal walk of its ASN.1
//! (tbsCertificate → validity), with RFC 5280's times (UTCTime years 50-99 are 19xx, as Go's
//! crypto/x509 reads them). Shared by the server's expiry metric and the certificate
//! controller's rotation schedule, so that neither needs a full X.509 parser.

/// When a certificate starts and stops being valid, in Unix seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    pub not_before: i64,
    pub not_after: i64,
}

/// The validity of a DER certificate; `None` when it is not one.
pub fn validity(der: &[u8]) -> Option<Validity> {
    let tbs = inner(inner(der)?)?;
    let mut rest = tbs;
    if rest.first() == Some(&0xa0) {
        rest = skip(rest)?; // version
    }
    rest = skip(rest)?; // serial
    rest = skip(rest)?; // signature algorithm
    rest = skip(rest)?; // issuer
    let window = inner(rest)?;
    let not_before = time(window)?;
    let not_after = time(skip(window)?)?;
    Some(Validity {
        not_before,
        not_after,
    })
}

/// Tag, header length and content length of the DER element at the start of `b`.
fn header(b: &[u8]) -> Option<(u8, usize, usize)> {
    let tag = *b.first()?;
    let first = *b.get(1)? as usize;
    if first < 0x80 {
        return Some((tag, 2, first));
    }
    let n = first & 0x7f;
    if n > std::mem::size_of::<usize>() {
        return None;
    }
    let mut len = 0usize;
    for i in 0..n {
        len = (len << 8) | *b.get(2 + i)? as usize;
    }
    Some((tag, 2 + n, len))
}

/// The content of the element at the start of `b`.
fn inner(b: &[u8]) -> Option<&[u8]> {
    let (_, h, l) = header(b)?;
    b.get(h..h.checked_add(l)?)
}

/// What follows the element at the start of `b`.
fn skip(b: &[u8]) -> Option<&[u8]> {
    let (_, h, l) = header(b)?;
    b.get(h.checked_add(l)?..)
}

/// A UTCTime (0x17) or GeneralizedTime (0x18) at the start of `b`, as Unix seconds.
fn time(b: &[u8]) -> Option<i64> {
    let (tag, h, l) = header(b)?;
    let text = std::str::from_utf8(b.get(h..h.checked_add(l)?)?).ok()?;
    let (year, rest) = match tag {
        0x17 => {
            let yy: i64 = text.get(0..2)?.parse().ok()?;
            (if yy < 50 { 2000 + yy } else { 1900 + yy }, text.get(2..)?)
        }
        0x18 => (text.get(0..4)?.parse().ok()?, text.get(4..)?),
        _ => return None,
    };
    let n = |r: std::ops::Range<usize>| -> Option<u32> { rest.get(r)?.parse().ok() };
    let days = celgate_cel::apimachinery::civil::days_from_civil(year, n(0..2)?, n(2..4)?);
    Some(days * 86_400 + i64::from(n(4..6)? * 3600 + n(6..8)? * 60 + n(8..10)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A DER certificate skeleton around `validity` (only what the walk reads).
    fn cert(validity: &[u8]) -> Vec<u8> {
        let mut tbs = vec![0xa0, 3, 2, 1, 2]; // version
        tbs.extend([2, 1, 7]); // serial
        tbs.extend([0x30, 0]); // signature algorithm
        tbs.extend([0x30, 0]); // issuer
        tbs.push(0x30);
        tbs.push(validity.len() as u8);
        tbs.extend(validity);
        let mut t = vec![0x30, tbs.len() as u8];
        t.extend(tbs);
        let mut c = vec![0x30, t.len() as u8];
        c.extend(t);
        c
    }

    fn element(tag: u8, text: &str) -> Vec<u8> {
        let mut e = vec![tag, text.len() as u8];
        e.extend(text.as_bytes());
        e
    }

    #[test]
    fn reads_utc_and_generalized_times() {
        let mut v = element(0x17, "491231235959Z");
        v.extend(element(0x18, "20500101000000Z"));
        let got = validity(&cert(&v)).unwrap();
        // 2049-12-31T23:59:59Z and 2050-01-01T00:00:00Z.
        assert_eq!(got.not_before, 2_524_607_999);
        assert_eq!(got.not_after, 2_524_608_000);
        let mut old = element(0x17, "700101000000Z");
        old.extend(element(0x17, "700101000001Z"));
        assert_eq!(validity(&cert(&old)).unwrap().not_after, 1);
    }

    #[test]
    fn refuses_what_is_not_a_certificate() {
        assert_eq!(validity(b""), None);
        assert_eq!(validity(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]), None);
        let mut v = element(0x04, "491231235959Z");
        v.extend(element(0x18, "20500101000000Z"));
        assert_eq!(validity(&cert(&v)), None);
    }
}
