//! Writing a string as a JSON string literal, with serde_json's escapes (`\"`, `\\`, `\b`,
//! `\f`, `\n`, `\r`, `\t`, other control characters as `\u00xx`; everything else as it is),
//! so that what is written reads back the same and prints as serde_json prints it. The plain
//! runs between escapes are found sixteen bytes at a time by the parser's string scan
//! ([`super::scan::special_end`]): answers repeat long messages, and serde_json's writer looks at
//! each byte on its own. No Kubernetes counterpart (Go's encoding/json also escapes `<`, `>`,
//! `&`, which a reader does not need).

use super::scan::special_end;

/// Appends `s` to `out` as a JSON string, quotes included.
pub fn escape_into(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut at = 0;
    loop {
        let end = special_end(bytes, at);
        out.extend_from_slice(&bytes[at..end]);
        let Some(&b) = bytes.get(end) else {
            break;
        };
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 0xf)]);
            }
        }
        at = end + 1;
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn escaped(s: &str) -> String {
        let mut out = Vec::new();
        escape_into(&mut out, s);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn escapes_as_serde_json() {
        for s in [
            "",
            "plain",
            "\"quoted\" \\ back",
            "\u{0}\u{1}\u{8}\u{b}\u{c}\u{1f}\u{7f}\n\r\t",
            "é日\u{10ffff} <&> é",
            "a very long string past sixteen bytes with a \" quote near its end and \n more",
        ] {
            assert_eq!(escaped(s), serde_json::to_string(s).unwrap(), "{s:?}");
        }
    }

    proptest! {
        #[test]
        fn any_string_is_written_as_serde_json_writes_it(s in "(?s).{0,80}") {
            prop_assert_eq!(escaped(&s), serde_json::to_string(&s).unwrap());
        }

        #[test]
        fn strings_of_escapes_and_runs(parts in prop::collection::vec(
            prop::sample::select(vec!["\"", "\\", "\n", "\u{1}", "\u{1f}", "abcdefghijklmnop", "é", "x"]), 0..40)) {
            let s = parts.concat();
            prop_assert_eq!(escaped(&s), serde_json::to_string(&s).unwrap());
        }
    }
}
