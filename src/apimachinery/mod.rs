//! Kubernetes and Go conventions that several layers share and that are not CEL: object-name
//! validation, Go's duration syntax and calendar arithmetic. A leaf: it uses nothing of the
//! crate, and `cel`, `policy`, `matching`, `crd`, `server` and the CLI use it.

pub mod civil;
pub mod duration;
pub mod names;

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// The leaf stays a leaf: none of its files names another module of the crate.
    #[test]
    fn uses_nothing_of_the_crate() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/apimachinery");
        let mut files = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            files += 1;
            // The code, not its tests.
            let code_lines = text.lines().take_while(|l| l.trim() != "#[cfg(test)]");
            for (n, line) in code_lines.enumerate() {
                let code = line.split("//").next().unwrap_or("");
                assert!(
                    !code.contains("crate::") && !code.contains("super::super"),
                    "{}:{}: {line}",
                    path.display(),
                    n + 1
                );
            }
        }
        assert!(files > 1, "{files} files");
    }
}
