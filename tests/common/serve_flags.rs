//! Checks of `celgate serve`'s flags that several test binaries make: a value that would
//! disable a limit or cannot work exits 2 naming the flag, before anything starts; `--help`
//! shows each flag's default.

use std::process::Command;

/// `celgate serve` (self-signed, on an ephemeral port, no metrics listener) with each case's
/// arguments exits 2, with the case's text on standard error.
pub fn serve_refuses<A: AsRef<[&'static str]>>(cases: &[(A, &str)]) {
    for (args, needle) in cases {
        let args = args.as_ref();
        let out = Command::new(env!("CARGO_BIN_EXE_celgate"))
            .args([
                "serve",
                "--self-signed",
                "--listen",
                "127.0.0.1:0",
                "--metrics-listen",
                "off",
            ])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// Each flag's own entry of `celgate serve --help` (from its name to the next flag) shows its
/// default.
pub fn serve_help_shows(defaults: &[(&str, &str)]) {
    let help = Command::new(env!("CARGO_BIN_EXE_celgate"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for (flag, default) in defaults {
        let entry = help
            .split_once(flag)
            .and_then(|(_, rest)| rest.split("\n      --").next())
            .unwrap_or_else(|| panic!("{flag} not in: {help}"));
        assert!(entry.contains(default), "{flag}: {entry}");
    }
}

/// The `[default: X]` of `--name` in `celgate serve --help` (`X`); `None` when its entry
/// shows none.
pub fn serve_help_default(name: &str) -> Option<String> {
    static HELP: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let help = HELP.get_or_init(|| {
        let out = Command::new(env!("CARGO_BIN_EXE_celgate"))
            .args(["serve", "--help"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    });
    let flag = format!("\n      --{name}");
    // The entry of `--name` itself, not of a flag it is the start of.
    let entry = help
        .split(&flag)
        .skip(1)
        .find(|rest| rest.starts_with([' ', '\n']))
        .unwrap_or_else(|| panic!("--{name} not in: {help}"));
    let entry = entry.split("\n      --").next().unwrap_or_default();
    let (_, default) = entry.split_once("[default: ")?;
    default.split_once(']').map(|(value, _)| value.to_string())
}
