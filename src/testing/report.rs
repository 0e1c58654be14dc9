//! The output formats of `celgate test`: a table for people, JSON, JUnit XML and TAP for CI.

use std::fmt::Write;
use std::time::Duration;

use serde_json::json;

use super::{Report, Status};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
    Junit,
    Tap,
}

pub fn render(report: &Report, format: Format) -> String {
    match format {
        Format::Table => table(report),
        Format::Json => json_report(report),
        Format::Junit => junit(report),
        Format::Tap => tap(report),
    }
}

/// `1.234ms`: milliseconds with microsecond precision.
pub fn time(d: Duration) -> String {
    format!("{:.3}ms", d.as_secs_f64() * 1000.0)
}

fn summary(report: &Report) -> String {
    let mut s = format!(
        "{} passed, {} failed",
        report.count(Status::Pass),
        report.count(Status::Fail)
    );
    let skipped = report.count(Status::Skip);
    if skipped > 0 {
        let _ = write!(s, ", {skipped} skipped");
    }
    if !report.invalid.is_empty() {
        let n = report.invalid.len();
        let _ = write!(s, ", {n} invalid file{}", if n == 1 { "" } else { "s" });
    }
    s
}

fn table(report: &Report) -> String {
    let mut out = String::new();
    for f in &report.invalid {
        let _ = writeln!(
            out,
            "! invalid test file {}",
            f.message.replace('\n', "\n    ")
        );
    }
    for c in &report.cases {
        let mark = match c.status {
            Status::Pass => "✓",
            Status::Fail => "✗",
            Status::Skip => "-",
        };
        let _ = writeln!(out, "{mark} {}  {}  ({})", c.file, c.name, time(c.elapsed));
        for f in &c.failures {
            let _ = writeln!(out, "    {}", f.replace('\n', "\n    "));
        }
    }
    let _ = writeln!(out, "{}", summary(report));
    if let Some(c) = &report.coverage {
        out.push_str(&c.table());
        if report.coverage_too_low() {
            let _ = writeln!(
                out,
                "coverage {:.1}% is below --min-coverage {}",
                c.percent(),
                report.min_coverage.unwrap_or_default()
            );
        }
    }
    out
}

fn status_name(s: Status) -> &'static str {
    match s {
        Status::Pass => "pass",
        Status::Fail => "fail",
        Status::Skip => "skip",
    }
}

fn json_report(report: &Report) -> String {
    let cases: Vec<_> = report
        .cases
        .iter()
        .map(|c| {
            json!({
                "file": c.file,
                "name": c.name,
                "status": status_name(c.status),
                "seconds": c.elapsed.as_secs_f64(),
                "failures": c.failures,
            })
        })
        .collect();
    let invalid: Vec<_> = report
        .invalid
        .iter()
        .map(|f| json!({"file": f.file, "message": f.message}))
        .collect();
    let mut v = json!({
        "cases": cases,
        "invalidFiles": invalid,
        "passed": report.count(Status::Pass),
        "failed": report.count(Status::Fail),
        "skipped": report.count(Status::Skip),
    });
    if let Some(c) = &report.coverage {
        let mut cov = c.to_json();
        if let Some(min) = report.min_coverage {
            cov["minimum"] = json!(min);
            cov["belowMinimum"] = json!(report.coverage_too_low());
        }
        v["coverage"] = cov;
    }
    let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
    s.push('\n');
    s
}

fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 cannot carry other control characters, even escaped.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// JUnit XML: one `<testsuite>` per suite file, an invalid file as a suite with one error.
fn junit(report: &Report) -> String {
    let mut files: Vec<&str> = Vec::new();
    for c in &report.cases {
        if !files.contains(&c.file.as_str()) {
            files.push(&c.file);
        }
    }
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let total: Duration = report.cases.iter().map(|c| c.elapsed).sum();
    let _ = writeln!(
        out,
        "<testsuites name=\"celgate\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{:.6}\">",
        report.cases.len() + report.invalid.len(),
        report.count(Status::Fail),
        report.invalid.len(),
        report.count(Status::Skip),
        total.as_secs_f64()
    );
    for f in &report.invalid {
        let _ = writeln!(
            out,
            "  <testsuite name=\"{0}\" tests=\"1\" failures=\"0\" errors=\"1\" skipped=\"0\" time=\"0\">\n    <testcase name=\"(test file)\" classname=\"{0}\" time=\"0\">\n      <error message=\"invalid test file\">{1}</error>\n    </testcase>\n  </testsuite>",
            xml(&f.file),
            xml(&f.message)
        );
    }
    for file in files {
        let cases: Vec<_> = report.cases.iter().filter(|c| c.file == file).collect();
        let time: Duration = cases.iter().map(|c| c.elapsed).sum();
        let count = |s: Status| cases.iter().filter(|c| c.status == s).count();
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{:.6}\">",
            xml(file),
            cases.len(),
            count(Status::Fail),
            count(Status::Skip),
            time.as_secs_f64()
        );
        for c in cases {
            let _ = write!(
                out,
                "    <testcase name=\"{}\" classname=\"{}\" time=\"{:.6}\"",
                xml(&c.name),
                xml(file),
                c.elapsed.as_secs_f64()
            );
            match c.status {
                Status::Pass => out.push_str("/>\n"),
                Status::Skip => out.push_str(">\n      <skipped/>\n    </testcase>\n"),
                Status::Fail => {
                    let first = c.failures.first().map_or("", String::as_str);
                    let _ = write!(
                        out,
                        ">\n      <failure message=\"{}\">{}</failure>\n    </testcase>\n",
                        xml(first),
                        xml(&c.failures.join("\n"))
                    );
                }
            }
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// TAP version 13, with failures as YAML diagnostics.
fn tap(report: &Report) -> String {
    let mut out = String::from("TAP version 13\n");
    let _ = writeln!(out, "1..{}", report.cases.len() + report.invalid.len());
    let mut n = 0;
    for f in &report.invalid {
        n += 1;
        let _ = writeln!(out, "not ok {n} - {} (invalid test file)", f.file);
        let _ = writeln!(out, "  ---\n  message: {}\n  ...", yaml_string(&f.message));
    }
    for c in &report.cases {
        n += 1;
        let title = format!("{}: {}", c.file, c.name);
        match c.status {
            Status::Pass => {
                let _ = writeln!(out, "ok {n} - {title}");
            }
            Status::Skip => {
                let _ = writeln!(out, "ok {n} - {title} # SKIP");
            }
            Status::Fail => {
                let _ = writeln!(out, "not ok {n} - {title}");
                out.push_str("  ---\n  failures:\n");
                for f in &c.failures {
                    let _ = writeln!(out, "  - {}", yaml_string(f));
                }
                out.push_str("  ...\n");
            }
        }
    }
    out
}

/// A YAML double-quoted scalar (JSON strings are valid ones).
fn yaml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}
