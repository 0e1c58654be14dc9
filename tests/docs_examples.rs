//! The documentation checked against the program, so that it cannot drift: README.md and
//! every `.md` file under docs/ are read, and each fenced block is run or checked by kind.
//! No block is skipped silently: a block of a kind this file does not know fails the test.
//!
//! Block kinds, by the fence's info string:
//!
//! - ```` ```console ````: a terminal session. Each line starting with `$ ` is a `celgate`
//!   command (a line ending in `\` continues it), run by `sh` in the repository with the
//!   built binary first on `PATH`. The lines after it, up to the next `$ ` line, are what it
//!   prints, standard output and standard error together, compared line by line (trailing
//!   white space ignored). A line that is only `...` stands for any number of lines, and
//!   `...` inside a line for any text (timings). A command that exits with another code than
//!   0 ends with the comment `# exit N`.
//! - ```` ```sh ````: commands, one per line (`\` continues), `#` lines are comments. A
//!   `celgate` command is run (exit 0, or `# exit N`); its output is not compared. Other
//!   commands are checked without running: `celgate serve` and `cargo run -- serve` (a
//!   long-running server): every `--flag` shown is in `celgate serve --help`; `make T`: T is
//!   a target of the Makefile; `cargo install --path P`, `cargo run --example E`,
//!   `cargo test --test T`, `cargo bench --bench B`, `bash FILE`, `python3 FILE`,
//!   `valgrind ... target/release/examples/E ...`: what they name exists.
//! - ```` ```sh live ````: commands that need a cluster or a running celgate (kubectl, helm,
//!   docker, curl, besides the above), checked without running: every file they name
//!   (`kubectl -f`, `curl --data @FILE`, a helm chart or `-f` values file) exists, every
//!   helm `--set` key is a key of the chart's values.yaml (a list index stands for any item
//!   of the list), `docker build` has a Dockerfile.
//! - ```` ```usage ````: a synopsis, `celgate CMD [SUBCMD] ...`: the command exists and every
//!   `--flag` shown is in its `--help`.
//! - ```` ```yaml ```` and ```` ```json ````: must parse; a `celgate CMD ...` line inside a
//!   YAML block (a CI job) has its flags checked as a synopsis. ```` ```yaml celgate-test ````
//!   is a suite, run by `celgate test` from a folder beside a link to `examples/policies`
//!   (so `../policies/...` resolves as it does for a suite under `examples/tests/`).
//! - ```` ```text ````: figures quoted from a test or benchmark run that this file does not
//!   repeat (they take minutes); allowed only under docs/contributors/.
//!
//! Besides the blocks: every relative link (`[text](path#anchor)`) names a file that exists
//! and, with an anchor, a heading of it; every inline code span that names a repository path
//! (`src/...`, `tests/...`, `examples/...`, `../shared/...`, ...) exists; and every flag of
//! every command's `--help` is mentioned somewhere in the docs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One fenced block: the file it is in, its first line, its info string and its lines.
struct Block {
    file: String,
    line: usize,
    info: String,
    body: Vec<String>,
}

impl Block {
    fn at(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

/// README.md and docs/**/*.md, as paths relative to the repository.
fn doc_files() -> Vec<String> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<String>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, root, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(
                    path.strip_prefix(root)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
    }
    let root = repo();
    let mut files = vec!["README.md".to_string()];
    walk(&root.join("docs"), &root, &mut files);
    files
}

fn read(file: &str) -> String {
    std::fs::read_to_string(repo().join(file)).unwrap()
}

/// The fenced blocks of a file, and its text outside them (blocks replaced by empty lines).
fn split(file: &str) -> (Vec<Block>, String) {
    let text = read(file);
    let mut blocks = Vec::new();
    let mut prose = String::new();
    let mut open: Option<(usize, String, String, Vec<String>)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        match open.take() {
            None if trimmed.starts_with("```") => {
                open = Some((
                    i + 1,
                    indent.to_string(),
                    trimmed[3..].trim().to_string(),
                    Vec::new(),
                ));
                prose.push('\n');
            }
            None => {
                prose.push_str(line);
                prose.push('\n');
            }
            Some((start, _, info, body)) if trimmed == "```" => {
                blocks.push(Block {
                    file: file.to_string(),
                    line: start,
                    info,
                    body,
                });
                prose.push('\n');
            }
            Some((start, ind, info, mut body)) => {
                body.push(line.strip_prefix(ind.as_str()).unwrap_or(line).to_string());
                prose.push('\n');
                open = Some((start, ind, info, body));
            }
        }
    }
    assert!(open.is_none(), "{file}: a fence is not closed");
    (blocks, prose)
}

fn all_blocks() -> Vec<Block> {
    doc_files().iter().flat_map(|f| split(f).0).collect()
}

/// Joins `\`-continued lines; drops blank lines and, unless `keep_comments`, `#` lines.
fn logical_lines(body: &[String]) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in body.iter().enumerate() {
        let (start, mut acc) = pending.take().unwrap_or((i, String::new()));
        let t = line.trim();
        if acc.is_empty() && (t.is_empty() || t.starts_with('#')) {
            continue;
        }
        if let Some(head) = t.strip_suffix('\\') {
            acc.push_str(head);
            acc.push(' ');
            pending = Some((start, acc));
        } else {
            acc.push_str(t);
            out.push((start, acc));
        }
    }
    out
}

/// Splits `# exit N` off a command line.
fn exit_code(command: &str) -> (String, i32) {
    let re = regex::Regex::new(r"\s+#\s*exit\s+(\d+)\s*$").unwrap();
    match re.captures(command) {
        Some(c) => (
            command[..c.get(0).unwrap().start()].to_string(),
            c[1].parse().unwrap(),
        ),
        None => {
            // Any other trailing comment is prose for the reader.
            let re = regex::Regex::new(r"\s+#\s.*$").unwrap();
            (re.replace(command, "").into_owned(), 0)
        }
    }
}

/// Shell words, with single and double quotes removed (enough for the static checks).
fn words(command: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in command.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => cur.push(c),
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                any = true;
            }
            None if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            None => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The simple commands of a line: split at `&&`, `||`, `|`, `;` and `&`.
fn segments(command: &str) -> Vec<Vec<String>> {
    let mut out = vec![Vec::new()];
    for w in words(command) {
        if ["&&", "||", "|", ";", "&"].contains(&w.as_str()) {
            out.push(Vec::new());
        } else {
            out.last_mut().unwrap().push(w);
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

/// Runs a shell command in the repository with celgate first on PATH: exit code and the
/// output (standard output and error together).
fn run(command: &str) -> (i32, String) {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_celgate"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("{{ {command}\n}} 2>&1"))
        .current_dir(repo())
        .env("PATH", path)
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// `celgate <sub...> --help`, cached.
fn help(sub: &[String]) -> String {
    static CACHE: OnceLock<Mutex<HashMap<Vec<String>, String>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(h) = cache.lock().unwrap().get(sub) {
        return h.clone();
    }
    let out = Command::new(env!("CARGO_BIN_EXE_celgate"))
        .args(sub)
        .arg("--help")
        .output()
        .unwrap();
    let text = if out.status.success() {
        String::from_utf8_lossy(&out.stdout).into_owned()
    } else {
        String::new()
    };
    cache.lock().unwrap().insert(sub.to_vec(), text.clone());
    text
}

/// The subcommands a `--help` lists under `Commands:`.
fn subcommands(help: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in help.lines() {
        if line.starts_with("Commands:") {
            inside = true;
        } else if inside && line.starts_with("  ") {
            let name = line.split_whitespace().next().unwrap_or_default();
            if name != "help" {
                out.push(name.to_string());
            }
        } else if inside && !line.trim().is_empty() {
            inside = false;
        }
    }
    out
}

/// The long flags a `--help` lists.
fn help_flags(help: &str) -> Vec<String> {
    let re = regex::Regex::new(r"^\s+(?:-\w, )?(--[a-z][a-z0-9-]*)").unwrap();
    help.lines()
        .filter_map(|l| re.captures(l).map(|c| c[1].to_string()))
        .filter(|f| f != "--help" && f != "--version")
        .collect()
}

/// The command path of `celgate ARGS` (`["crd", "check"]`) and the rest of the words.
fn command_path(args: &[String]) -> (Vec<String>, Vec<String>) {
    let mut path: Vec<String> = Vec::new();
    let mut i = 0;
    while i < args.len() && subcommands(&help(&path)).contains(&args[i]) {
        path.push(args[i].clone());
        i += 1;
    }
    (path, args[i..].to_vec())
}

/// Every `--flag` of `text` is a flag of `celgate <path>`.
fn check_flags(path: &[String], text: &str, at: &str, failures: &mut Vec<String>) {
    if path.is_empty() {
        failures.push(format!("{at}: no celgate command in `{text}`"));
        return;
    }
    let known = help_flags(&help(path));
    let re = regex::Regex::new(r"(?:^|[\s\[(|])(--[a-z][a-z0-9-]*)").unwrap();
    for c in re.captures_iter(text) {
        let flag = &c[1];
        if flag != "--help" && !known.iter().any(|k| k == flag) {
            failures.push(format!(
                "{at}: `celgate {}` has no flag {flag}",
                path.join(" ")
            ));
        }
    }
}

/// Whether `actual` (lines) matches `expected` (lines, with `...` wildcards).
fn matches(expected: &[&str], actual: &[&str]) -> bool {
    fn line_matches(pattern: &str, line: &str) -> bool {
        let parts: Vec<&str> = pattern.split("...").collect();
        if parts.len() == 1 {
            return pattern == line;
        }
        let (first, last) = (parts[0], parts[parts.len() - 1]);
        if !line.starts_with(first)
            || line.len() < first.len() + last.len()
            || !line.ends_with(last)
        {
            return false;
        }
        let mut rest = &line[first.len()..line.len() - last.len()];
        for part in &parts[1..parts.len() - 1] {
            match rest.find(part) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
        true
    }
    match expected.split_first() {
        None => actual.is_empty(),
        Some((&"...", rest)) => (0..=actual.len()).any(|skip| matches(rest, &actual[skip..])),
        Some((first, rest)) => {
            !actual.is_empty() && line_matches(first, actual[0]) && matches(rest, &actual[1..])
        }
    }
}

fn trimmed_lines(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    while lines.last() == Some(&"") {
        lines.pop();
    }
    lines
}

/// Runs a `celgate` command line; with `expected` output lines, compares them.
fn run_celgate(command: &str, expected: Option<&[String]>, at: &str, failures: &mut Vec<String>) {
    let (command, want_code) = exit_code(command);
    let (code, output) = run(&command);
    if code != want_code {
        failures.push(format!(
            "{at}: `{command}` exited {code}, the doc says {want_code}:\n{output}"
        ));
        return;
    }
    if let Some(expected) = expected {
        let expected: Vec<&str> = expected.iter().map(|l| l.trim_end()).collect();
        let expected = trimmed_lines_of(&expected);
        let actual = trimmed_lines(&output);
        if !matches(&expected, &actual) {
            failures.push(format!(
                "{at}: `{command}` printed\n{}\nwhere the doc shows\n{}",
                actual.join("\n"),
                expected.join("\n")
            ));
        }
    }
}

fn trimmed_lines_of<'a>(lines: &[&'a str]) -> Vec<&'a str> {
    let mut lines = lines.to_vec();
    while lines.last() == Some(&"") {
        lines.pop();
    }
    lines
}

/// ```` ```console ```` blocks: each command run, its output compared.
#[test]
fn console_sessions_print_what_the_docs_show() {
    let mut failures = Vec::new();
    for block in all_blocks().iter().filter(|b| b.info == "console") {
        let mut i = 0;
        while i < block.body.len() {
            let at = format!("{}:{}", block.file, block.line + 1 + i);
            let Some(first) = block.body[i].strip_prefix("$ ") else {
                failures.push(format!("{at}: output before any `$ ` command"));
                i += 1;
                continue;
            };
            let mut command = first.trim().to_string();
            i += 1;
            while command.ends_with('\\') && i < block.body.len() {
                command.pop();
                command.push(' ');
                command.push_str(block.body[i].trim());
                i += 1;
            }
            let start = i;
            while i < block.body.len() && !block.body[i].starts_with("$ ") {
                i += 1;
            }
            if words(&command).first().map(String::as_str) != Some("celgate") {
                failures.push(format!(
                    "{at}: a console block runs celgate commands only: `{command}`"
                ));
                continue;
            }
            run_celgate(&command, Some(&block.body[start..i]), &at, &mut failures);
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
}

/// A command that is not run: what it names must exist.
fn check_static(segment: &[String], live: bool, at: &str, failures: &mut Vec<String>) {
    let root = repo();
    let exists = |p: &str| root.join(p).exists();
    let mut fail = |m: String| failures.push(format!("{at}: {m}"));
    let program = segment[0].as_str();
    let args = &segment[1..];
    // The value after a flag, if any.
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
    };
    match program {
        "celgate" => {
            let (path, rest) = command_path(args);
            if path.first().map(String::as_str) != Some("serve") {
                fail(format!(
                    "`celgate {}` can run: show it in a plain sh or console block",
                    args.join(" ")
                ));
            }
            let mut flags = Vec::new();
            check_flags(&path, &rest.join(" "), at, &mut flags);
            failures.extend(flags);
        }
        "cargo" => match args.first().map(String::as_str) {
            Some("install") => match value("--path") {
                Some(p) if exists(&format!("{p}/Cargo.toml")) => {}
                Some(p) => fail(format!("cargo install: no package at {p}")),
                None => fail("cargo install without --path".into()),
            },
            Some("run") => {
                if let Some(e) = value("--example") {
                    if !exists(&format!("examples/{e}.rs")) {
                        fail(format!("no example {e}"));
                    }
                } else if let Some(i) = args.iter().position(|a| a == "--") {
                    let rest = &args[i + 1..];
                    let (path, flags) = command_path(rest);
                    if path.is_empty() {
                        fail(format!("cargo run: no celgate command in {rest:?}"));
                    }
                    let mut found = Vec::new();
                    check_flags(&path, &flags.join(" "), at, &mut found);
                    failures.extend(found);
                } else {
                    fail("cargo run without a command".into());
                }
            }
            Some("test") => {
                if let Some(t) = value("--test") {
                    if !exists(&format!("tests/{t}.rs")) && !exists(&format!("tests/{t}/main.rs")) {
                        fail(format!("no test target {t}"));
                    }
                }
            }
            Some("bench") => match value("--bench") {
                Some(b) if exists(&format!("benches/{b}.rs")) => {}
                other => fail(format!("no bench target {other:?}")),
            },
            Some("build" | "fmt" | "clippy" | "doc") => {}
            other => fail(format!("cargo {other:?} is not a command this test knows")),
        },
        "make" => {
            let makefile = std::fs::read_to_string(root.join("Makefile")).unwrap();
            for target in args.iter().filter(|a| !a.contains('=')) {
                if !makefile
                    .lines()
                    .any(|l| l.starts_with(&format!("{target}:")))
                {
                    fail(format!("the Makefile has no target {target}"));
                }
            }
        }
        "bash" => {
            if !args.first().is_some_and(|f| exists(f)) {
                fail(format!("bash: no script {args:?}"));
            }
        }
        "grep" | "head" | "tail" | "jq" | "echo" => {}
        "python3" => {
            if !args.first().is_some_and(|f| exists(f)) {
                fail(format!("python3: no script {args:?}"));
            }
        }
        // A profiler around a built example: the example exists (root or engine crates).
        "valgrind" => match args.iter().find(|a| !a.starts_with("--")) {
            Some(bin) => {
                let example = bin.strip_prefix("target/release/examples/").filter(|e| {
                    exists(&format!("examples/{e}.rs"))
                        || exists(&format!("crates/celgate-cel/examples/{e}.rs"))
                        || exists(&format!("crates/celgate-engine/examples/{e}.rs"))
                });
                if example.is_none() {
                    fail(format!(
                        "valgrind: {bin} is not a built example of this tree"
                    ));
                }
            }
            None => fail("valgrind without a program".into()),
        },
        "kubectl" | "helm" | "docker" | "curl" if !live => fail(format!(
            "{program} needs a cluster or a server: tag the block `sh live`"
        )),
        "kubectl" => {
            if let Some(f) = value("-f") {
                if !f.contains("://") && !exists(f) {
                    fail(format!("kubectl -f {f}: no such file"));
                }
            }
        }
        "helm" => check_helm(args, at, failures),
        "docker" => {
            if args.first().map(String::as_str) == Some("build") && !exists("Dockerfile") {
                fail("docker build: no Dockerfile".into());
            }
        }
        "curl" => {
            for (i, a) in args.iter().enumerate() {
                if (a == "--data" || a == "-d" || a == "--data-binary") && i + 1 < args.len() {
                    if let Some(f) = args[i + 1].strip_prefix('@') {
                        if !exists(f) {
                            fail(format!("curl: no file {f}"));
                        }
                    }
                }
            }
        }
        other => fail(format!(
            "`{other}` is not a command this test knows how to check"
        )),
    }
}

/// `helm install|upgrade|template NAME CHART`: the chart exists; `--set` keys are values.
fn check_helm(args: &[String], at: &str, failures: &mut Vec<String>) {
    let with_value = ["--namespace", "-n", "--set", "-f", "--values", "--version"];
    let mut positional = Vec::new();
    let mut sets = Vec::new();
    let mut i = 1;
    while i < args.len() {
        let a = &args[i];
        if with_value.contains(&a.as_str()) {
            if a == "--set" {
                sets.extend(args.get(i + 1).cloned());
            }
            if (a == "-f" || a == "--values")
                && !args.get(i + 1).is_some_and(|f| repo().join(f).exists())
            {
                failures.push(format!("{at}: helm: no values file {:?}", args.get(i + 1)));
            }
            i += 2;
        } else {
            if !a.starts_with('-') {
                positional.push(a.clone());
            }
            i += 1;
        }
    }
    let sub = args.first().map(String::as_str).unwrap_or_default();
    if ["install", "upgrade", "template"].contains(&sub) {
        let Some(chart) = positional.get(1) else {
            failures.push(format!("{at}: helm {sub} without a chart"));
            return;
        };
        let values = repo().join(chart).join("values.yaml");
        let Ok(text) = std::fs::read_to_string(&values) else {
            failures.push(format!("{at}: no chart at {chart}"));
            return;
        };
        let values: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
        for set in &sets {
            let key = set.split('=').next().unwrap_or_default();
            if !has_key(&values, key) {
                failures.push(format!("{at}: {chart}/values.yaml has no key {key}"));
            }
        }
    } else if sub != "uninstall" {
        failures.push(format!("{at}: helm {sub} is not a command this test knows"));
    }
}

/// Whether a dotted key path (`a.b[1].c`) names a value; an index stands for any item.
fn has_key(values: &serde_yaml_ng::Value, key: &str) -> bool {
    let mut node = values;
    for part in key.split('.') {
        let (name, index) = match part.split_once('[') {
            Some((n, _)) => (n, true),
            None => (part, false),
        };
        match node.get(name) {
            Some(v) => node = v,
            None => return false,
        }
        if index {
            match node.as_sequence().and_then(|s| s.first()) {
                Some(item) => node = item,
                None => return false,
            }
        }
    }
    true
}

/// ```` ```sh ```` and ```` ```sh live ```` blocks.
#[test]
fn shell_commands_run_or_name_what_exists() {
    let mut failures = Vec::new();
    for block in all_blocks()
        .iter()
        .filter(|b| b.info == "sh" || b.info == "sh live")
    {
        let live = block.info == "sh live";
        for (i, line) in logical_lines(&block.body) {
            let at = format!("{}:{}", block.file, block.line + 1 + i);
            let (command, _) = exit_code(&line);
            let segs = segments(&command);
            let runnable = !live
                && segs.first().is_some_and(|s| {
                    s[0] == "celgate" && s.get(1).map(String::as_str) != Some("serve")
                });
            if runnable {
                run_celgate(&line, None, &at, &mut failures);
            } else {
                for seg in &segs {
                    check_static(seg, live, &at, &mut failures);
                }
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
}

/// ```` ```usage ```` synopses, and `celgate` lines of YAML blocks (CI jobs).
#[test]
fn synopses_name_real_commands_and_flags() {
    let mut failures = Vec::new();
    // In YAML, a `celgate CMD ...` up to the end of its shell command.
    let re = regex::Regex::new(r"\bcelgate\s+[a-z][^&|;>\]]*").unwrap();
    let commands = subcommands(&help(&[]));
    for block in all_blocks() {
        let synopses: Vec<(usize, String)> = match block.info.as_str() {
            "usage" => {
                // A line starting with white space continues the synopsis above it.
                let mut out: Vec<(usize, String)> = Vec::new();
                for (i, line) in block.body.iter().enumerate() {
                    match out.last_mut() {
                        Some(last) if line.starts_with(' ') => {
                            last.1.push(' ');
                            last.1.push_str(line.trim());
                        }
                        _ => out.push((i, line.clone())),
                    }
                }
                out
            }
            info if info.starts_with("yaml") => block
                .body
                .iter()
                .enumerate()
                .flat_map(|(i, l)| re.find_iter(l).map(move |m| (i, m.as_str().to_string())))
                .filter(|(_, c)| words(c).get(1).is_some_and(|w| commands.contains(w)))
                .collect(),
            _ => continue,
        };
        for (i, synopsis) in synopses {
            let at = format!("{}:{}", block.file, block.line + 1 + i);
            let Some(rest) = synopsis.trim().strip_prefix("celgate ") else {
                failures.push(format!(
                    "{at}: a synopsis starts with `celgate `: {synopsis}"
                ));
                continue;
            };
            let (path, rest) = command_path(&words(rest));
            check_flags(&path, &rest.join(" "), &at, &mut failures);
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
}

/// ```` ```yaml ````, ```` ```json ```` and ```` ```text ```` blocks, and that every block is
/// of a known kind.
#[test]
fn every_block_is_of_a_known_kind_and_data_parses() {
    let mut failures = Vec::new();
    for block in all_blocks() {
        let at = block.at();
        let text = block.body.join("\n");
        match block.info.as_str() {
            "console" | "sh" | "sh live" | "usage" => {}
            "yaml" => {
                for doc in text.split("\n---\n") {
                    if let Err(e) = serde_yaml_ng::from_str::<serde_yaml_ng::Value>(doc) {
                        failures.push(format!("{at}: YAML does not parse: {e}"));
                    }
                }
            }
            "yaml celgate-test" => run_suite(&text, &at, &mut failures),
            "json" => {
                if let Err(e) = serde_json::from_str::<serde_json::Value>(&text) {
                    failures.push(format!("{at}: JSON does not parse: {e}"));
                }
            }
            "text" if block.file.starts_with("docs/contributors/") => {}
            "text" => failures.push(format!(
                "{at}: a text block is figures quoted from a run: only under docs/contributors/ \
                 (show a command's output in a console block)"
            )),
            other => failures.push(format!("{at}: a block of unknown kind `{other}`")),
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
}

/// Runs a suite shown in the docs as if it lay in examples/tests/.
fn run_suite(text: &str, at: &str, failures: &mut Vec<String>) {
    let dir = std::env::temp_dir().join(format!(
        "celgate-docs-suite-{}-{}",
        std::process::id(),
        at.replace(['/', ':', '.'], "-")
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("tests")).unwrap();
    std::os::unix::fs::symlink(repo().join("examples/policies"), dir.join("policies")).unwrap();
    std::fs::write(dir.join("tests/doc.celgate-test.yaml"), text).unwrap();
    let command = format!("celgate test --root / {}", dir.join("tests").display());
    run_celgate(&command, None, at, failures);
    let _ = std::fs::remove_dir_all(&dir);
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces as `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(file: &Path) -> Vec<String> {
    let (_, prose) = split(file.strip_prefix(repo()).unwrap().to_str().unwrap());
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    for line in prose.lines() {
        let Some(heading) = line.strip_prefix('#').map(|h| h.trim_start_matches('#')) else {
            continue;
        };
        let base = slug(heading);
        let n = seen.entry(base.clone()).or_default();
        out.push(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// Relative links and inline code naming repository paths.
#[test]
fn links_and_paths_exist() {
    let mut failures = Vec::new();
    let link = regex::Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    let code = regex::Regex::new(r"`([^`\s]+)`").unwrap();
    let prefixes = [
        "src/",
        "tests/",
        "examples/",
        "charts/",
        "deploy/",
        "benches/",
        "scripts/",
        "assets/",
        "docs/",
        ".ci/",
        "../shared/",
    ];
    for file in doc_files() {
        let (_, prose) = split(&file);
        let dir = repo().join(&file).parent().unwrap().to_path_buf();
        for (n, line) in prose.lines().enumerate() {
            let at = format!("{file}:{}", n + 1);
            for c in link.captures_iter(line) {
                let target = &c[1];
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
                let resolved = if path.is_empty() {
                    repo().join(&file)
                } else {
                    dir.join(path)
                };
                if !resolved.exists() {
                    failures.push(format!("{at}: link to {target}: no such file"));
                } else if !anchor.is_empty()
                    && !anchors(&resolved.canonicalize().unwrap())
                        .iter()
                        .any(|a| a == anchor)
                {
                    failures.push(format!("{at}: link to {target}: no such heading"));
                }
            }
            for c in code.captures_iter(line) {
                let path = &c[1];
                if prefixes.iter().any(|p| path.starts_with(p))
                    && path
                        .chars()
                        .all(|ch| ch.is_alphanumeric() || "_./-".contains(ch))
                    && !repo().join(path).exists()
                {
                    failures.push(format!("{at}: `{path}`: no such file or folder"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// Every flag of every command is documented somewhere.
#[test]
fn every_flag_is_documented() {
    let docs: String = doc_files().iter().map(|f| read(f)).collect();
    let mut failures = Vec::new();
    let mut queue: Vec<Vec<String>> = vec![Vec::new()];
    while let Some(path) = queue.pop() {
        let h = help(&path);
        for sub in subcommands(&h) {
            let mut p = path.clone();
            p.push(sub);
            queue.push(p);
        }
        for flag in help_flags(&h) {
            let re =
                regex::Regex::new(&format!(r"{}(?:[^a-z0-9-]|$)", regex::escape(&flag))).unwrap();
            if !re.is_match(&docs) {
                failures.push(format!("`celgate {}` {flag}", path.join(" ")));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "flags no doc mentions:\n{}",
        failures.join("\n")
    );
}
