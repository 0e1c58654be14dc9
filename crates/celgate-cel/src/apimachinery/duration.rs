//! Go's duration syntax (`time.ParseDuration`), as apimachinery's `metav1.Duration`, CEL's
//! `duration()` conversion and the CRD `duration` format all accept it.

/// Go's `time.ParseDuration`: `[-+]?([0-9]*(\.[0-9]*)?(ns|us|µs|μs|ms|s|m|h))+` or `0`.
pub fn parse_go_duration(s: &str) -> Option<i64> {
    let (neg, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let int_end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let int_part = &rest[..int_end];
        rest = &rest[int_end..];
        let mut frac_part = "";
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
            frac_part = &r[..end];
            rest = &r[end..];
        }
        if int_part.is_empty() && frac_part.is_empty() {
            return None;
        }
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit: u128 = match &rest[..unit_end] {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        rest = &rest[unit_end..];
        let whole: u128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse().ok()?
        };
        let mut v = whole.checked_mul(unit)?;
        if !frac_part.is_empty() {
            let digits = &frac_part[..frac_part.len().min(30)];
            let f: u128 = digits.parse().ok()?;
            let scale = 10u128.checked_pow(digits.len() as u32)?;
            v = v.checked_add(f.checked_mul(unit)? / scale)?;
        }
        total = total.checked_add(v)?;
        if total > 1u128 << 63 {
            return None;
        }
    }
    let signed = if neg { -(total as i128) } else { total as i128 };
    i64::try_from(signed).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("1h30m"), Some(5_400_000_000_000));
        assert_eq!(parse_go_duration("-1.5s"), Some(-1_500_000_000));
        assert_eq!(parse_go_duration("1µs"), Some(1_000));
        assert_eq!(parse_go_duration("1d"), None);
        assert_eq!(parse_go_duration(""), None);
        assert_eq!(parse_go_duration("3000000h"), None);
    }
}
