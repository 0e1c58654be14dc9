//! Runs the `celgate` binary as a user does: in a folder, with what it reads on standard
//! input; its exit code and what it printed.

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// What a run of the binary gave: exit code (-1 when killed by a signal), standard output,
/// standard error.
pub type Ran = (i32, String, String);

/// Runs `celgate args` in `cwd`, writing `stdin` to its standard input.
pub fn celgate_in(args: &[&str], cwd: &Path, stdin: &str) -> Ran {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_celgate"))
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    // A command refused before it reads its input (a usage error) closes the pipe first:
    // the refusal is what the test checks, so a broken pipe here is not a failure.
    if let Err(e) = input.write_all(stdin.as_bytes()) {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "{e}");
    }
    drop(input);
    ran(child.wait_with_output().unwrap())
}

/// Runs `celgate args` in `cwd` with nothing on standard input (it is closed).
pub fn celgate_no_input(args: &[&str], cwd: &Path) -> Ran {
    let out = Command::new(env!("CARGO_BIN_EXE_celgate"))
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    ran(out)
}

/// Runs celgate in `cwd` without input, killed (and the test failed) if it has not ended
/// within a minute: a command that blocks on a file must not hang the suite.
pub fn celgate_within(args: &[&str], cwd: &Path) -> Ran {
    let mut child = Command::new(env!("CARGO_BIN_EXE_celgate"))
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("celgate {args:?} did not end within a minute");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    ran(child.wait_with_output().unwrap())
}

fn ran(out: Output) -> Ran {
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
