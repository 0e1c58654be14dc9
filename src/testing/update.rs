//! `celgate test --update`: writes what cases observed into their `expect` (snapshot
//! testing), editing the suite's text in place so that comments, anchors, blank lines and
//! key order outside the edited values are kept.
//!
//! No YAML editor crate that keeps comments fits yet (the one lossless candidate is
//! pre-1.0 and documents known edit failures), so this is a targeted text edit of the
//! `cases:` block, with these limits (each refused with a message rather than guessed):
//! - `cases:` must be a block sequence under a top-level `cases:` key, and each `expect:` a
//!   key of its case's block mapping (the way every example is written);
//! - a block-style `expect` is edited key by key: a one-line value is replaced in place
//!   (its trailing comment kept); a value over several lines is replaced by a one-line flow
//!   value; comments inside such a multi-line value are lost;
//! - a flow-style `expect: {...}` is rewritten whole on one line (comments inside it lost);
//! - a case without `expect` gets a one-line `expect: {...}` after its last line.

use serde_json::Value as Json;

/// One change to a case's expectation: `key`'s value becomes `value`, and the key is
/// renamed to `new_key` (a failing `messageMatches` becomes an exact `message`).
#[derive(Debug, Clone, PartialEq)]
pub struct Edit {
    pub key: &'static str,
    pub new_key: &'static str,
    pub value: Json,
}

/// A YAML flow scalar or collection for `v`: JSON, with plain keys and words where they
/// are safe.
pub fn flow(v: &Json) -> String {
    match v {
        Json::Object(m) => flow_map(m.iter().map(|(k, v)| (k.as_str(), v))),
        Json::Array(a) => {
            let items: Vec<String> = a.iter().map(flow).collect();
            format!("[{}]", items.join(", "))
        }
        Json::String(s) => key(s),
        other => other.to_string(),
    }
}

/// A flow mapping with its entries in the order given.
fn flow_map<'a>(entries: impl Iterator<Item = (&'a str, &'a Json)>) -> String {
    let items: Vec<String> = entries
        .map(|(k, v)| format!("{}: {}", key(k), flow(v)))
        .collect();
    format!("{{{}}}", items.join(", "))
}

/// A mapping key or string: plain when it is a simple name (letters, digits, `.-_/`), else
/// quoted.
fn key(k: &str) -> String {
    let plain = !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '/'))
        && k.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && !matches!(
            k.to_ascii_lowercase().as_str(),
            "true" | "false" | "null" | "yes" | "no" | "on" | "off" | "y" | "n"
        );
    if plain {
        k.to_string()
    } else {
        Json::String(k.to_string()).to_string()
    }
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// Blank or comment-only.
fn is_trivia(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with('#')
}

/// Where a ` #` comment starts on a line, outside quotes (`line.len()` when none).
fn comment_start(line: &str) -> usize {
    let bytes = line.as_bytes();
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match quote {
            Some(b'"') if b == b'\\' => i += 1,
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'"' || b == b'\'' => quote = Some(b),
            None if b == b'#' && (i == 0 || bytes[i - 1] == b' ') => return i,
            None => {}
        }
        i += 1;
    }
    line.len()
}

/// Brace/bracket depth change of a line's flow text, outside quotes and comments.
fn depth_change(text: &str) -> i64 {
    let text = &text[..comment_start(text)];
    let mut depth = 0;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in text.chars() {
        match quote {
            Some('"') if escaped => escaped = false,
            Some('"') if c == '\\' => escaped = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                '"' | '\'' => quote = Some(c),
                '{' | '[' => depth += 1,
                '}' | ']' => depth -= 1,
                _ => {}
            },
        }
    }
    depth
}

/// The line ranges `[start, end)` of each item of the top-level `cases:` block sequence.
fn case_items(lines: &[&str]) -> Result<Vec<(usize, usize)>, String> {
    let start = lines
        .iter()
        .position(|l| l.starts_with("cases:"))
        .ok_or("--update: no top-level `cases:` key")?;
    let rest = lines.get(start).map_or("", |l| &l["cases:".len()..]);
    if !is_trivia(rest) {
        return Err("--update: `cases:` must be a block sequence (one `- ` per case)".into());
    }
    let mut items: Vec<(usize, usize)> = Vec::new();
    let mut dash: Option<usize> = None;
    let mut end = lines.len();
    for (i, line) in lines.iter().enumerate().skip(start + 1) {
        if is_trivia(line) {
            continue;
        }
        let ind = indent(line);
        let is_item = line[ind..].starts_with("- ") || line[ind..].trim_end() == "-";
        match dash {
            None if is_item => dash = Some(ind),
            None => return Err(format!("--update: line {}: expected a case (`- `)", i + 1)),
            Some(d) if ind == d && is_item => {}
            Some(d) if ind > d => continue,
            Some(_) => {
                end = i;
                break;
            }
        }
        if let Some(last) = items.last_mut() {
            last.1 = i;
        }
        items.push((i, lines.len()));
    }
    if let Some(last) = items.last_mut() {
        last.1 = end;
    }
    // An item ends at its last content line: trailing blank lines and comments stay.
    for item in &mut items {
        while item.1 > item.0 + 1 && lines.get(item.1 - 1).is_some_and(|l| is_trivia(l)) {
            item.1 -= 1;
        }
    }
    Ok(items)
}

/// A key at column `col` of line `line` (`- key:` on the item's first line included): the
/// column of the key's text.
fn key_at(line: &str, col: usize, name: &str) -> bool {
    line.len() > col
        && line.is_char_boundary(col)
        && line[col..].starts_with(name)
        && line[col + name.len()..].starts_with(':')
        && (col == 0 || line[..col].trim_end_matches(' ').ends_with('-') || indent(line) == col)
}

/// Applies `edits` to the expectation of case `index` in `text`.
pub(crate) fn apply(text: &str, index: usize, edits: &[Edit]) -> Result<String, String> {
    let lines: Vec<&str> = text.split('\n').collect();
    let items = case_items(&lines)?;
    let &(start, end) = items
        .get(index)
        .ok_or_else(|| format!("--update: no case {index} in the text"))?;
    let first = lines.get(start).copied().unwrap_or("");
    // The column of the case's keys: after `- `.
    let col = indent(first) + 2;
    let expect_line = (start..end).find(|&i| {
        lines
            .get(i)
            .is_some_and(|l| key_at(l, col, "expect") && (i == start || indent(l) == col))
    });
    let mut out: Vec<String> = lines[..start].iter().map(|s| s.to_string()).collect();
    match expect_line {
        None => {
            out.extend(lines[start..end].iter().map(|s| s.to_string()));
            let m = edits
                .iter()
                .map(|e| (e.new_key.to_string(), e.value.clone()))
                .collect::<serde_json::Map<_, _>>();
            out.push(format!(
                "{}expect: {}",
                " ".repeat(col),
                flow(&Json::Object(m))
            ));
            out.extend(lines[end..].iter().map(|s| s.to_string()));
        }
        Some(e) => {
            let line = lines.get(e).copied().unwrap_or("");
            let after = &line[col + "expect:".len()..];
            let value = after[..comment_start(after)].trim();
            // The expect value's lines: [e, value_end).
            let mut value_end = e + 1;
            if value.starts_with('{') {
                let mut depth = depth_change(after);
                while depth > 0 && value_end < end {
                    depth += depth_change(lines.get(value_end).copied().unwrap_or(""));
                    value_end += 1;
                }
                let original: Vec<&str> = lines[e..value_end].to_vec();
                let joined = original.join("\n");
                let parsed: serde_yaml_ng::Value =
                    serde_yaml_ng::from_str(joined.get(col..).unwrap_or(""))
                        .map_err(|err| format!("--update: line {}: {err}", e + 1))?;
                let old = parsed
                    .get("expect")
                    .cloned()
                    .unwrap_or(serde_yaml_ng::Value::Null);
                let merged = merge(&old, edits);
                out.extend(lines[start..e].iter().map(|s| s.to_string()));
                let prefix = &line[..col];
                let comment = &line[comment_start(line)..];
                let comment = if comment.is_empty() || value_end > e + 1 {
                    String::new()
                } else {
                    format!("  {comment}")
                };
                out.push(format!("{prefix}expect: {merged}{comment}"));
                out.extend(lines[value_end..].iter().map(|s| s.to_string()));
            } else if value.is_empty() {
                while value_end < end
                    && lines
                        .get(value_end)
                        .is_some_and(|l| is_trivia(l) || indent(l) > col)
                {
                    value_end += 1;
                }
                while value_end > e + 1 && lines.get(value_end - 1).is_some_and(|l| is_trivia(l)) {
                    value_end -= 1;
                }
                out.extend(lines[start..=e].iter().map(|s| s.to_string()));
                out.extend(block(&lines[e + 1..value_end], edits)?);
                out.extend(lines[value_end..].iter().map(|s| s.to_string()));
            } else {
                return Err(format!(
                    "--update: line {}: `expect:` must be a mapping",
                    e + 1
                ));
            }
        }
    }
    Ok(out.join("\n"))
}

/// The expectation `old` (in its key order, nested mappings too) with `edits` applied, as
/// a flow mapping; new keys at the end.
fn merge(old: &serde_yaml_ng::Value, edits: &[Edit]) -> String {
    let mut m: Vec<(String, String)> = Vec::new();
    if let Some(map) = old.as_mapping() {
        for (k, v) in map {
            let Some(k) = k.as_str() else { continue };
            match edits.iter().find(|e| e.key == k) {
                Some(e) => m.push((e.new_key.to_string(), in_order(Some(v), &e.value))),
                None => m.push((
                    k.to_string(),
                    flow(&serde_json::to_value(v).unwrap_or(Json::Null)),
                )),
            }
        }
    }
    for e in edits {
        if !m.iter().any(|(k, _)| k == e.new_key || k == e.key) {
            m.push((e.new_key.to_string(), flow(&e.value)));
        }
    }
    let items: Vec<String> = m.iter().map(|(k, v)| format!("{}: {v}", key(k))).collect();
    format!("{{{}}}", items.join(", "))
}

/// A block-style expectation's lines with `edits` applied key by key.
fn block(lines: &[&str], edits: &[Edit]) -> Result<Vec<String>, String> {
    let col = lines
        .iter()
        .find(|l| !is_trivia(l))
        .map(|l| indent(l))
        .unwrap_or(0);
    let mut out = Vec::new();
    let mut done: Vec<&'static str> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines.get(i).copied().unwrap_or("");
        if is_trivia(line) || indent(line) != col {
            out.push(line.to_string());
            i += 1;
            continue;
        }
        let rest = &line[col..];
        let name = rest.split(':').next().unwrap_or("");
        // The key's value lines: this one and the deeper ones that follow.
        let mut j = i + 1;
        // A compact block sequence (`- x` at the key's column) is the key's value too.
        while j < lines.len()
            && lines.get(j).is_some_and(|l| {
                let at = l.get(col..).unwrap_or("");
                is_trivia(l) || indent(l) > col || at.starts_with("- ") || at.trim_end() == "-"
            })
        {
            j += 1;
        }
        while j > i + 1 && lines.get(j - 1).is_some_and(|l| is_trivia(l)) {
            j -= 1;
        }
        match edits.iter().find(|e| e.key == name) {
            None => out.extend(lines[i..j].iter().map(|s| s.to_string())),
            Some(edit) => {
                done.push(edit.key);
                let after = &rest[name.len() + 1..];
                let comment = &after[comment_start(after)..];
                let comment = if comment.is_empty() || j > i + 1 {
                    String::new()
                } else {
                    format!("  {comment}")
                };
                out.push(format!(
                    "{}{}: {}{comment}",
                    " ".repeat(col),
                    edit.new_key,
                    ordered(&lines[i..j], col, name, &edit.value)
                ));
            }
        }
        i = j;
    }
    for e in edits.iter().filter(|e| !done.contains(&e.key)) {
        out.push(format!(
            "{}{}: {}",
            " ".repeat(col),
            e.new_key,
            flow(&e.value)
        ));
    }
    Ok(out)
}

/// `value` as flow text, a mapping's keys in the order the original text (the key `name`
/// and its value lines) had them.
fn ordered(original: &[&str], col: usize, name: &str, value: &Json) -> String {
    let text: Vec<&str> = original
        .iter()
        .map(|l| l.get(col..).unwrap_or(""))
        .collect();
    let parsed: Option<serde_yaml_ng::Value> = serde_yaml_ng::from_str(&text.join("\n")).ok();
    in_order(parsed.as_ref().and_then(|p| p.get(name)), value)
}

/// `value` as flow text; when it and `old` are mappings, in `old`'s key order, new keys last.
fn in_order(old: Option<&serde_yaml_ng::Value>, value: &Json) -> String {
    let (Json::Object(new), Some(old)) = (value, old.and_then(|o| o.as_mapping())) else {
        return flow(value);
    };
    let mut keys: Vec<&str> = old
        .keys()
        .filter_map(|k| k.as_str())
        .filter(|k| new.contains_key(*k))
        .collect();
    let added: Vec<&str> = new
        .keys()
        .map(String::as_str)
        .filter(|k| !keys.contains(k))
        .collect();
    keys.extend(added);
    flow_map(keys.into_iter().filter_map(|k| new.get(k).map(|v| (k, v))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn edit(key: &'static str, value: Json) -> Edit {
        Edit {
            key,
            new_key: key,
            value,
        }
    }

    const TEXT: &str = "# head comment
apiVersion: celgate.dev/v1alpha1
kind: CelgateTest
cases:
# first
- name: a
  object: {a: 1}
  expect:
    allowed: true   # was wrong
    # between keys
    policies:
      z.example.com: pass
      a.example.com: pass
    warnings:
    - w

- name: b
  expect: {allowed: true, code: 200}  # flow
- name: c
  object: &o
    x: 1
# trailing comment
other: 1
";

    #[test]
    fn block_flow_and_missing_expectations_are_edited_in_place() {
        let edits = [
            edit("allowed", json!(false)),
            edit(
                "policies",
                json!({"a.example.com": "fail", "z.example.com": "pass"}),
            ),
            edit("warnings", json!([])),
        ];
        let t = apply(TEXT, 0, &edits).unwrap();
        assert_eq!(
            t,
            TEXT.replace(
                "    allowed: true   # was wrong\n",
                "    allowed: false  # was wrong\n"
            )
            .replace(
                "    policies:\n      z.example.com: pass\n      a.example.com: pass\n    warnings:\n    - w\n",
                "    policies: {z.example.com: pass, a.example.com: fail}\n    warnings: []\n"
            )
        );
        let edits = [
            edit("allowed", json!(false)),
            edit("code", json!(403)),
            Edit {
                key: "messageMatches",
                new_key: "message",
                value: json!("no \"x\""),
            },
        ];
        let t = apply(TEXT, 1, &edits).unwrap();
        assert!(
            t.contains("  expect: {allowed: false, code: 403, message: \"no \\\"x\\\"\"}  # flow\n- name: c"),
            "{t}"
        );
        let t = apply(TEXT, 2, &[edit("allowed", json!(true))]).unwrap();
        assert!(
            t.contains("    x: 1\n  expect: {allowed: true}\n# trailing comment\nother: 1\n"),
            "{t}"
        );
        // Every comment survives.
        for t in [&t] {
            for c in [
                "# head comment",
                "# first",
                "# between keys",
                "# flow",
                "# trailing comment",
            ] {
                assert!(t.contains(c), "{c}");
            }
        }
        let parsed: serde_yaml_ng::Value = serde_yaml_ng::from_str(&t).unwrap();
        assert_eq!(
            parsed["cases"][2]["expect"]["allowed"],
            serde_yaml_ng::Value::Bool(true)
        );
    }

    #[test]
    fn unsupported_layouts_are_refused() {
        assert_eq!(
            apply("cases: []\n", 0, &[]).unwrap_err(),
            "--update: `cases:` must be a block sequence (one `- ` per case)"
        );
        assert_eq!(
            apply("kind: x\n", 0, &[]).unwrap_err(),
            "--update: no top-level `cases:` key"
        );
        assert_eq!(
            apply("cases:\n- name: a\n  expect: x\n", 0, &[]).unwrap_err(),
            "--update: line 3: `expect:` must be a mapping"
        );
    }

    #[test]
    fn keys_are_quoted_only_when_needed() {
        assert_eq!(
            flow(&json!({"a.b/c-d": 1, "x y": "s", "true": [true, null], "Y": "No"})),
            "{\"Y\": \"No\", a.b/c-d: 1, \"true\": [true, null], \"x y\": s}"
        );
    }
}
