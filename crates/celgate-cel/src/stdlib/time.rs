//! Timestamps and durations: the `timestamp` and `duration` conversions and the calendar
//! accessors (`getFullYear`...), in UTC, an IANA time zone or a fixed offset.

use crate::apimachinery::duration::parse_go_duration;
use crate::error::EvalError;
use crate::overload::{no_overload, str_arg, Builder, Cost, Imp, R};
use crate::time::{Civil, Timestamp, TimestampError};
use crate::value::Value;

fn out_of_range<'a>() -> R<'a> {
    Err(EvalError::new("timestamp overflow"))
}

/// `t + d`, shown at `t`'s offset (Go's `Time.Add` keeps the location).
pub(super) fn timestamp_add<'a>(t: Timestamp, d: i64) -> R<'a> {
    Timestamp::from_nanos(t.as_nanos() + i128::from(d)).map_or_else(out_of_range, |r| {
        Ok(Value::Timestamp(r.with_offset(t.offset())))
    })
}

pub fn to_timestamp<'a>(a: &[Value<'a>]) -> R<'a> {
    match &a[0] {
        Value::Timestamp(_) => Ok(a[0].clone()),
        Value::Int(secs) => {
            Timestamp::new(*secs, 0).map_or_else(out_of_range, |t| Ok(Value::Timestamp(t)))
        }
        Value::String(s) => match Timestamp::parse_go_rfc3339(s.as_str()) {
            Ok(t) => Ok(Value::Timestamp(t)),
            Err(TimestampError::OutOfRange) => out_of_range(),
            Err(TimestampError::Syntax) => Err(EvalError::new(
                "type conversion error from 'string' to 'google.protobuf.Timestamp'",
            )),
        },
        _ => no_overload(),
    }
}

pub fn to_duration<'a>(a: &[Value<'a>]) -> R<'a> {
    match &a[0] {
        Value::Duration(_) => Ok(a[0].clone()),
        Value::String(s) => parse_go_duration(s.as_str())
            .map(Value::Duration)
            .ok_or_else(|| {
                EvalError::new("type conversion error from 'string' to 'google.protobuf.Duration'")
            }),
        Value::Int(_) => Err(EvalError::new(
            "type conversion error from 'int' to 'google.protobuf.Duration'",
        )),
        _ => no_overload(),
    }
}

/// Resolves a time-zone argument: an IANA name, `UTC`, or a fixed `±HH:MM` offset.
fn time_zone(name: &str) -> Result<jiff::tz::TimeZone, EvalError> {
    // A fixed offset `±HH:MM`; cel-go also takes `HH:MM` without a sign as positive.
    let (negative, unsigned) = match name.as_bytes().first() {
        Some(b'-') => (true, &name[1..]),
        Some(b'+') => (false, &name[1..]),
        _ => (false, name),
    };
    let bytes = unsigned.as_bytes();
    if bytes.len() == 5
        && bytes[2] == b':'
        && bytes
            .iter()
            .enumerate()
            .all(|(i, b)| i == 2 || b.is_ascii_digit())
    {
        let h: i32 = unsigned[0..2].parse().map_err(|_| bad_zone(name))?;
        let m: i32 = unsigned[3..5].parse().map_err(|_| bad_zone(name))?;
        let secs = (h * 3600 + m * 60) * if negative { -1 } else { 1 };
        let offset = jiff::tz::Offset::from_seconds(secs).map_err(|_| bad_zone(name))?;
        return Ok(jiff::tz::TimeZone::fixed(offset));
    }
    // Go's `time.LoadLocation`: `UTC` and the empty name, else an IANA name spelt exactly.
    if name == "UTC" || name.is_empty() {
        return Ok(jiff::tz::TimeZone::UTC);
    }
    let tz = jiff::tz::TimeZone::get(name).map_err(|_| bad_zone(name))?;
    if tz.iana_name().is_some_and(|n| n != name) {
        return Err(bad_zone(name));
    }
    Ok(tz)
}

fn bad_zone(name: &str) -> EvalError {
    EvalError::new(format!("unknown time zone {name}"))
}

fn civil<'a>(a: &[Value<'a>]) -> Result<Civil, EvalError> {
    let Value::Timestamp(t) = &a[0] else {
        return Err(EvalError::no_such_overload());
    };
    let offset = match a.get(1) {
        Some(z) => t.offset_in(&time_zone(str_arg(z)?)?),
        None => 0,
    };
    Ok(t.civil(offset))
}

macro_rules! accessor {
    ($name:ident, |$c:ident| $ts:expr, |$d:ident| $dur:expr) => {
        pub fn $name<'a>(a: &[Value<'a>]) -> R<'a> {
            if let Value::Duration($d) = &a[0] {
                let $d = *$d;
                return match $dur {
                    Some(v) => Ok(Value::Int(v)),
                    None => no_overload(),
                };
            }
            let $c = civil(a)?;
            Ok(Value::Int($ts))
        }
    };
}

// Months, days of the month and days of the year are 0-based in CEL; `getDate` is 1-based.
accessor!(get_full_year, |c| c.year, |_d| None);
accessor!(get_month, |c| i64::from(c.month) - 1, |_d| None);
accessor!(get_day_of_year, |c| i64::from(c.day_of_year), |_d| None);
accessor!(get_day_of_month, |c| i64::from(c.day) - 1, |_d| None);
accessor!(get_date, |c| i64::from(c.day), |_d| None);
accessor!(get_day_of_week, |c| i64::from(c.weekday), |_d| None);
accessor!(get_hours, |c| i64::from(c.hour), |d| Some(
    d / 3_600_000_000_000
));
accessor!(get_minutes, |c| i64::from(c.minute), |d| Some(
    d / 60_000_000_000
));
accessor!(get_seconds, |c| i64::from(c.second), |d| Some(
    d / 1_000_000_000
));
accessor!(get_milliseconds, |c| i64::from(c.nanos / 1_000_000), |d| {
    Some(d / 1_000_000)
});

pub(super) fn register(b: &mut Builder) {
    b.always(
        "duration",
        &["(duration) duration", "(string) duration", "(int) duration"],
        to_duration,
        Cost::One,
    );
    b.always(
        "timestamp",
        &[
            "(timestamp) timestamp",
            "(string) timestamp",
            "(int) timestamp",
        ],
        to_timestamp,
        Cost::One,
    );
    let ts_only: [(&'static str, Imp); 6] = [
        ("getFullYear", get_full_year),
        ("getMonth", get_month),
        ("getDayOfYear", get_day_of_year),
        ("getDayOfMonth", get_day_of_month),
        ("getDate", get_date),
        ("getDayOfWeek", get_day_of_week),
    ];
    for (name, imp) in ts_only {
        b.always(
            name,
            &["timestamp.() int", "timestamp.(string) int"],
            imp,
            Cost::One,
        );
    }
    let both: [(&'static str, Imp); 4] = [
        ("getHours", get_hours),
        ("getMinutes", get_minutes),
        ("getSeconds", get_seconds),
        ("getMilliseconds", get_milliseconds),
    ];
    for (name, imp) in both {
        b.always(
            name,
            &[
                "timestamp.() int",
                "timestamp.(string) int",
                "duration.() int",
            ],
            imp,
            Cost::One,
        );
    }
}
