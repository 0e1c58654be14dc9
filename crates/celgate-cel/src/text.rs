//! Text measures shared by the JSON reader, projections and the values built from them; a
//! leaf of `cel`.

/// The number of code points of `s`. Nearly every string of a Kubernetes object is ASCII,
/// which the standard library checks with whole-word reads, where `chars().count()` spends its
/// time in set-up on short strings.
#[inline]
pub fn char_count(s: &str) -> usize {
    if s.is_ascii() {
        s.len()
    } else {
        s.chars().count()
    }
}

/// The first eight bytes of a key as one integer (zero-padded): object keys are compared by
/// it before their text, in documents and in projections alike.
#[inline]
pub fn key_prefix(key: &str) -> u64 {
    let mut b = [0u8; 8];
    let n = key.len().min(8);
    b[..n].copy_from_slice(&key.as_bytes()[..n]);
    u64::from_le_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn char_count_counts_code_points() {
        for (s, n) in [
            ("", 0),
            ("a", 1),
            ("é", 1),
            ("日本語", 3),
            ("a😀b", 3),
            ("abcdefghé", 9),
        ] {
            assert_eq!(char_count(s), n, "{s}");
        }
    }

    #[test]
    fn a_key_prefix_is_its_first_eight_bytes() {
        assert_eq!(key_prefix(""), 0);
        assert_eq!(key_prefix("a"), u64::from(b'a'));
        assert_eq!(key_prefix("metadata"), key_prefix("metadata.name.x"));
        assert_ne!(key_prefix("metadat"), key_prefix("metadata"));
    }
}
