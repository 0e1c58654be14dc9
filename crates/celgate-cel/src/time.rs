//! CEL timestamps: a point in time in CEL's range, 0001-01-01T00:00:00Z to
//! 9999-12-31T23:59:59.999999999Z, with proleptic Gregorian calendar arithmetic. A
//! constructed `google.protobuf.Timestamp` may lie outside it ([`Timestamp::from_unix`]):
//! cel-go v0.22.0 does not range-check one (`common/types/provider.go`: `*tpb.Timestamp` is
//! `v.AsTime()`, Go's `time.Unix`), only the results of arithmetic (`overflow.go`).
//!
//! celgate keeps its own (seconds, nanoseconds) pair rather than `jiff::Timestamp`, whose
//! range ends a few hours before CEL's; jiff is used only to look up time zones.

use crate::apimachinery::civil::{civil_from_days, days_from_civil, valid_date};

const MIN_SECS: i64 = -62_135_596_800; // 0001-01-01T00:00:00Z
const MAX_SECS: i64 = 253_402_300_799; // 9999-12-31T23:59:59Z
const NANOS: i128 = 1_000_000_000;

/// Why [`Timestamp::parse_go_rfc3339`] refused a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TimestampError {
    /// Not a time Go's `time.Parse(time.RFC3339, ..)` reads.
    #[error("not an RFC 3339 timestamp")]
    Syntax,
    /// A valid time outside CEL's range (years 1 to 9999).
    #[error("timestamp out of range")]
    OutOfRange,
}

/// A point in time, with the UTC offset it was written with (cel-go keeps the offset a
/// timestamp was parsed with, and shows it in `string()`); equality and order ignore it.
#[derive(Debug, Clone, Copy)]
pub struct Timestamp {
    secs: i64,
    /// Always below 1e9.
    nanos: u32,
    /// Seconds east of UTC; 0 shows as `Z`.
    offset: i32,
}

impl PartialEq for Timestamp {
    fn eq(&self, other: &Self) -> bool {
        (self.secs, self.nanos) == (other.secs, other.nanos)
    }
}

impl Eq for Timestamp {}

impl std::hash::Hash for Timestamp {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (self.secs, self.nanos).hash(state);
    }
}

impl PartialOrd for Timestamp {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Timestamp {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.secs, self.nanos).cmp(&(other.secs, other.nanos))
    }
}

/// Calendar fields of a timestamp at some UTC offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Civil {
    /// The year (proleptic Gregorian, may be 0 or negative in a far offset).
    pub year: i64,
    /// 1-based.
    pub month: u32,
    /// 1-based.
    pub day: u32,
    /// 0 to 23.
    pub hour: u32,
    /// 0 to 59.
    pub minute: u32,
    /// 0 to 59.
    pub second: u32,
    /// 0 to 999,999,999.
    pub nanos: u32,
    /// 0-based.
    pub day_of_year: u32,
    /// 0 = Sunday.
    pub weekday: u32,
}

impl Timestamp {
    /// A timestamp in CEL's range.
    pub fn new(secs: i64, nanos: u32) -> Option<Timestamp> {
        (nanos < 1_000_000_000 && (MIN_SECS..=MAX_SECS).contains(&secs)).then_some(Timestamp {
            secs,
            nanos,
            offset: 0,
        })
    }

    /// Go's `time.Unix(secs, nanos)`, unchecked: nanoseconds outside `[0, 1e9)` carried into
    /// the seconds (wrapping as Go's int64 arithmetic does), any year kept.
    pub fn from_unix(secs: i64, nanos: i64) -> Timestamp {
        let carry = nanos.div_euclid(1_000_000_000);
        Timestamp {
            secs: secs.wrapping_add(carry),
            // `rem_euclid` of 1e9 fits in u32.
            nanos: nanos.rem_euclid(1_000_000_000) as u32,
            offset: 0,
        }
    }

    /// The same instant, shown at `offset` seconds east of UTC.
    pub fn with_offset(self, offset: i32) -> Timestamp {
        Timestamp { offset, ..self }
    }

    /// The UTC offset it is shown at, in seconds east.
    pub fn offset(&self) -> i32 {
        self.offset
    }

    /// The instant `n` nanoseconds after the Unix epoch, if within CEL's range.
    pub fn from_nanos(n: i128) -> Option<Timestamp> {
        let secs = i64::try_from(n.div_euclid(NANOS)).ok()?;
        Timestamp::new(secs, n.rem_euclid(NANOS) as u32)
    }

    /// Nanoseconds since the Unix epoch.
    pub fn as_nanos(&self) -> i128 {
        i128::from(self.secs) * NANOS + i128::from(self.nanos)
    }

    /// Whole seconds since the epoch, rounded down.
    pub fn secs(&self) -> i64 {
        self.secs
    }

    /// The calendar fields at a UTC offset (seconds east).
    pub fn civil(&self, offset: i64) -> Civil {
        // Wide: a constructed timestamp may be near i64's ends.
        let local = i128::from(self.secs) + i128::from(offset);
        // |secs| / 86,400 fits in i64 with room for the calendar arithmetic (years ~2.9e11).
        let days = local.div_euclid(86_400) as i64;
        let rem = local.rem_euclid(86_400) as u32;
        let (year, month, day) = civil_from_days(days);
        let day_of_year = (days - days_from_civil(year, 1, 1)) as u32;
        // 1970-01-01 was a Thursday.
        let weekday = (days + 4).rem_euclid(7) as u32;
        Civil {
            year,
            month,
            day,
            hour: rem / 3600,
            minute: rem / 60 % 60,
            second: rem % 60,
            nanos: self.nanos,
            day_of_year,
            weekday,
        }
    }

    /// Go's `time.Parse(time.RFC3339, s)`: `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`.
    pub fn parse_rfc3339(s: &str) -> Option<Timestamp> {
        let b = s.as_bytes();
        let num = |r: std::ops::Range<usize>| -> Option<u32> {
            let part = s.get(r)?;
            part.bytes()
                .all(|c| c.is_ascii_digit())
                .then(|| part.parse().ok())?
        };
        if b.len() < 20
            || b[4] != b'-'
            || b[7] != b'-'
            || b[10] != b'T'
            || b[13] != b':'
            || b[16] != b':'
        {
            return None;
        }
        let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
        let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
        let mut i = 19;
        let mut nanos = 0u32;
        if b.get(i) == Some(&b'.') {
            let start = i + 1;
            i = start;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            let digits = &s[start..i];
            if digits.is_empty() || digits.len() > 9 {
                return None;
            }
            nanos = digits.parse::<u32>().ok()? * 10u32.pow(9 - digits.len() as u32);
        }
        let offset: i64 = match b.get(i)? {
            b'Z' if i + 1 == b.len() => 0,
            c @ (b'+' | b'-') if i + 6 == b.len() && b[i + 3] == b':' => {
                let (h, m) = (num(i + 1..i + 3)?, num(i + 4..i + 6)?);
                if h > 23 || m > 59 {
                    return None;
                }
                let v = i64::from(h * 3600 + m * 60);
                if *c == b'-' {
                    -v
                } else {
                    v
                }
            }
            _ => return None,
        };
        if hour > 23 || minute > 59 || second > 59 || !valid_date(i64::from(year), month, day) {
            return None;
        }
        let days = days_from_civil(i64::from(year), month, day);
        let secs = days * 86_400 + i64::from(hour * 3600 + minute * 60 + second) - offset;
        Timestamp::new(secs, nanos)
    }

    /// RFC 3339 at its own offset with the fraction trimmed, as Go's `RFC3339Nano`.
    pub fn to_rfc3339(&self) -> String {
        let c = self.civil(i64::from(self.offset));
        // Go's `appendInt(b, year, 4)`: a sign, then at least four digits.
        let sign = if c.year < 0 { "-" } else { "" };
        let mut s = format!(
            "{sign}{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
            c.year.unsigned_abs(),
            c.month,
            c.day,
            c.hour,
            c.minute,
            c.second
        );
        if c.nanos != 0 {
            let frac = format!("{:09}", c.nanos);
            s.push('.');
            s.push_str(frac.trim_end_matches('0'));
        }
        s.push_str(&self.offset_suffix());
        s
    }

    /// `Z`, or `±HH:MM`, as Go's `Z07:00`.
    pub fn offset_suffix(&self) -> String {
        if self.offset == 0 {
            return "Z".into();
        }
        let sign = if self.offset < 0 { '-' } else { '+' };
        let abs = self.offset.unsigned_abs();
        format!("{sign}{:02}:{:02}", abs / 3600, abs / 60 % 60)
    }

    /// CEL's `timestamp(string)`: Go's `time.Parse(time.RFC3339, s)`, which also takes a
    /// comma before the fraction, any number of fraction digits (past nine truncated) and
    /// offsets up to ±24:59, keeping the offset. [`TimestampError::OutOfRange`] for a time outside CEL's
    /// range (cel-go's `timestamp overflow`), [`TimestampError::Syntax`] for text Go does not
    /// parse.
    pub fn parse_go_rfc3339(s: &str) -> Result<Timestamp, TimestampError> {
        let b = s.as_bytes();
        let num = |r: std::ops::Range<usize>| -> Result<u32, TimestampError> {
            let part = s.get(r).ok_or(TimestampError::Syntax)?;
            if !part.bytes().all(|c| c.is_ascii_digit()) {
                return Err(TimestampError::Syntax);
            }
            part.parse().map_err(|_| TimestampError::Syntax)
        };
        if b.len() < 20
            || b[4] != b'-'
            || b[7] != b'-'
            || b[10] != b'T'
            || b[13] != b':'
            || b[16] != b':'
        {
            return Err(TimestampError::Syntax);
        }
        let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
        let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
        let mut i = 19;
        let mut nanos = 0u32;
        if matches!(b.get(i), Some(b'.' | b',')) && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
            let start = i + 1;
            i = start;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            let digits = &s[start..i.min(start + 9)];
            nanos = num(start..start + digits.len())? * 10u32.pow(9 - digits.len() as u32);
        }
        let offset: i64 = match b.get(i).ok_or(TimestampError::Syntax)? {
            b'Z' if i + 1 == b.len() => 0,
            c @ (b'+' | b'-') if i + 6 == b.len() && b[i + 3] == b':' => {
                let (h, m) = (num(i + 1..i + 3)?, num(i + 4..i + 6)?);
                if h > 24 || m > 59 {
                    return Err(TimestampError::Syntax);
                }
                let v = i64::from(h * 3600 + m * 60);
                if *c == b'-' {
                    -v
                } else {
                    v
                }
            }
            _ => return Err(TimestampError::Syntax),
        };
        if !(1..=12).contains(&month)
            || hour > 23
            || minute > 59
            || second > 59
            || !valid_date(i64::from(year), month, day)
        {
            return Err(TimestampError::Syntax);
        }
        let days = days_from_civil(i64::from(year), month, day);
        let secs = days * 86_400 + i64::from(hour * 3600 + minute * 60 + second) - offset;
        let t = Timestamp::new(secs, nanos).ok_or(TimestampError::OutOfRange)?;
        // Go shows an offset of zero as UTC.
        Ok(t.with_offset(i32::try_from(offset).unwrap_or(0)))
    }

    /// The UTC offset (seconds east) of `zone` at this instant.
    pub fn offset_in(&self, zone: &jiff::tz::TimeZone) -> i64 {
        // jiff's range ends a little before CEL's; the offset at its end holds after it.
        let at = jiff::Timestamp::from_second(self.secs).unwrap_or(if self.secs > 0 {
            jiff::Timestamp::MAX
        } else {
            jiff::Timestamp::MIN
        });
        i64::from(zone.to_offset(at).seconds())
    }
}

/// A duration as cel-go prints it: `strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"`,
/// the shortest decimal of the seconds as a double (so nanoseconds past a double's
/// precision are rounded: `9223372036.854776s`).
pub(crate) fn format_duration(nanos: i64) -> String {
    // Go's `Duration.Seconds`: whole seconds plus the nanoseconds over 1e9.
    let secs = (nanos / 1_000_000_000) as f64 + (nanos % 1_000_000_000) as f64 / 1e9;
    format!("{secs}s")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_covers_cel_range() {
        let max = Timestamp::parse_rfc3339("9999-12-31T23:59:59.999999999Z").unwrap();
        assert_eq!(max.to_rfc3339(), "9999-12-31T23:59:59.999999999Z");
        let min = Timestamp::parse_rfc3339("0001-01-01T00:00:00Z").unwrap();
        assert_eq!(min.to_rfc3339(), "0001-01-01T00:00:00Z");
        assert!(Timestamp::from_nanos(min.as_nanos() - 1).is_none());
        let t = Timestamp::parse_rfc3339("2009-02-13T23:31:30.5-08:00").unwrap();
        assert_eq!(t.to_rfc3339(), "2009-02-14T07:31:30.5Z");
        assert!(Timestamp::parse_rfc3339("2024-02-30T00:00:00Z").is_none());
        assert!(Timestamp::parse_rfc3339("2024-01-01 00:00:00Z").is_none());
        let c = Timestamp::parse_rfc3339("2024-03-01T10:00:00Z")
            .unwrap()
            .civil(0);
        assert_eq!((c.day_of_year, c.weekday), (60, 5), "leap year; a Friday");
    }

    #[test]
    fn cel_timestamps_keep_their_offset_and_parse_as_go() {
        let t = Timestamp::parse_go_rfc3339("2024-01-01T10:30:00.5+02:00").unwrap();
        assert_eq!(t.to_rfc3339(), "2024-01-01T10:30:00.5+02:00");
        assert_eq!(
            t,
            Timestamp::parse_rfc3339("2024-01-01T08:30:00.5Z").unwrap()
        );
        let t = Timestamp::parse_go_rfc3339("2024-01-01T00:00:00,1234567891-24:00").unwrap();
        assert_eq!(t.to_rfc3339(), "2024-01-01T00:00:00.123456789-24:00");
        assert_eq!(
            Timestamp::parse_go_rfc3339("0000-12-31T23:59:59Z"),
            Err(TimestampError::OutOfRange),
            "parsed, then outside CEL's range"
        );
        for bad in [
            "2024-02-30T00:00:00Z",
            "2024-01-01T24:00:00Z",
            "2024-01-01T00:00:00.Z",
        ] {
            assert_eq!(
                Timestamp::parse_go_rfc3339(bad),
                Err(TimestampError::Syntax),
                "{bad}"
            );
        }
    }

    #[test]
    fn durations_print_in_seconds() {
        assert_eq!(format_duration(5_400_000_000_000), "5400s");
        assert_eq!(format_duration(1_000_000), "0.001s");
        assert_eq!(format_duration(-1_500_000_000), "-1.5s");
        assert_eq!(format_duration(0), "0s");
        assert_eq!(format_duration(i64::MAX), "9223372036.854776s");
    }
}
