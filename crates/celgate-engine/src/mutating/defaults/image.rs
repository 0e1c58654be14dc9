//! The image tag a container's `imagePullPolicy` default reads (`pkg/util/parsers`
//! `ParseImageName` over github.com/distribution/reference's `ParseNormalizedNamed`): the
//! tag written, `latest` when neither a tag nor a digest is, none when the reference does
//! not parse (the defaulter ignores the error and chooses `IfNotPresent`).

/// The tag `ParseImageName` returns for `image`, `None` when it fails.
pub(super) fn image_tag(image: &str) -> Option<&str> {
    // `anchoredIdentifierRegexp`: a bare 64-hex string is refused as a name.
    if image.len() == 64
        && image
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    {
        return None;
    }
    let (rest, digest) = match image.split_once('@') {
        Some((r, d)) => (r, Some(d)),
        None => (image, None),
    };
    if let Some(d) = digest {
        if !is_digest(d) {
            return None;
        }
    }
    // A `:` after the last `/` starts the tag (before it, it is the domain's port).
    let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match rest[last_slash..].rfind(':') {
        Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
        None => (rest, None),
    };
    if !is_name(name) || name.len() > 255 {
        return None;
    }
    match tag {
        Some(t) if is_tag(t) => Some(t),
        Some(_) => None,
        None if digest.is_none() => Some("latest"),
        None => Some(""),
    }
}

/// `[domain '/'] path-component ('/' path-component)*`, the remote name lower case.
fn is_name(name: &str) -> bool {
    let mut parts: Vec<&str> = name.split('/').collect();
    // `splitDockerDomain`: the first part is a domain when it has a `.` or `:`, is
    // `localhost`, or has upper case letters (and more parts follow).
    if parts.len() > 1 {
        let first = parts[0];
        if first.contains(['.', ':'])
            || first == "localhost"
            || first.bytes().any(|b| b.is_ascii_uppercase())
        {
            if !is_domain(first) {
                return false;
            }
            parts.remove(0);
        }
    }
    !parts.is_empty() && parts.iter().all(|p| is_path_component(p))
}

/// `host [':' port]`, the host dotted DNS labels or a bracketed IPv6 address.
fn is_domain(d: &str) -> bool {
    let (host_ok, port) = if let Some(rest) = d.strip_prefix('[') {
        let Some((ip, tail)) = rest.split_once(']') else {
            return false;
        };
        let ok = !ip.is_empty() && ip.bytes().all(|b| b.is_ascii_hexdigit() || b == b':');
        match tail {
            "" => (ok, None),
            t => match t.strip_prefix(':') {
                Some(p) => (ok, Some(p)),
                None => return false,
            },
        }
    } else {
        match d.split_once(':') {
            Some((h, p)) => (is_host(h), Some(p)),
            None => (is_host(d), None),
        }
    };
    host_ok && port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Dot-separated labels of letters, digits and inner `-`.
fn is_host(h: &str) -> bool {
    h.split('.').all(|c| {
        !c.is_empty()
            && c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !c.starts_with('-')
            && !c.ends_with('-')
    })
}

/// `[a-z0-9]+ ((\.|_|__|-+) [a-z0-9]+)*`.
fn is_path_component(p: &str) -> bool {
    let b = p.as_bytes();
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    if b.is_empty() || !alnum(b[0]) || !alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if alnum(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && !alnum(b[i]) {
            i += 1;
        }
        let sep = &p[start..i];
        let ok = sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|c| c == b'-');
        if !ok {
            return false;
        }
    }
    true
}

/// `[\w][\w.-]{0,127}`.
fn is_tag(t: &str) -> bool {
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let b = t.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && word(b[0])
        && b[1..].iter().all(|&c| word(c) || c == b'.' || c == b'-')
}

/// `algorithm ':' hex{32,}`, the algorithm `[A-Za-z][A-Za-z0-9]*([+.-_][A-Za-z][A-Za-z0-9]*)*`.
fn is_digest(d: &str) -> bool {
    let Some((alg, hex)) = d.split_once(':') else {
        return false;
    };
    let alg_ok = alg.split(['+', '.', '-', '_']).all(|c| {
        let b = c.as_bytes();
        !b.is_empty() && b[0].is_ascii_alphabetic() && b.iter().all(u8::is_ascii_alphanumeric)
    });
    alg_ok && hex.len() >= 32 && hex.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::image_tag;

    #[test]
    fn tags_as_parse_image_name_returns_them() {
        assert_eq!(image_tag("busybox:1.36"), Some("1.36"));
        assert_eq!(image_tag("busybox"), Some("latest"));
        assert_eq!(image_tag("busybox:latest"), Some("latest"));
        assert_eq!(image_tag("localhost:5000/app"), Some("latest"));
        assert_eq!(
            image_tag("registry.example.com:5000/team/app:v2"),
            Some("v2")
        );
        let digest = format!("app@sha256:{}", "a".repeat(64));
        assert_eq!(image_tag(&digest), Some(""));
        let both = format!("app:latest@sha256:{}", "b".repeat(64));
        assert_eq!(image_tag(&both), Some("latest"));
    }

    #[test]
    fn unparsable_references_have_no_tag() {
        assert_eq!(image_tag(""), None);
        assert_eq!(image_tag("BusyBox"), None);
        assert_eq!(image_tag("app:"), None);
        assert_eq!(image_tag("app@sha256:short"), None);
        assert_eq!(image_tag(&"a".repeat(64)), None);
        assert_eq!(image_tag("a//b"), None);
    }
}
