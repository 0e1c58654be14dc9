"""The Dockerfile's build stage, replayed without a Docker engine.

Reads the Dockerfile (dockerfile-parse), finds the stage whose RUN calls `cargo build`, and
replays that stage's COPY instructions from the build context into an empty directory that
stands for the image's file system: the context is what Docker would send, so `.dockerignore`
applies (moby's pattern rules: `*`, `?`, `[...]`, `**`, `!` exceptions, the last matching line
wins, a pattern that matches a folder excludes what it holds). Then it runs the RUN's cargo
command as `cargo check` in the stage's WORKDIR, with the stage's ENV, so a file that the build
needs but the Dockerfile does not copy fails here as it would fail `docker build`.

Every COPY from the context in the other stages is checked too: its sources must exist in the
context after `.dockerignore`.

Usage: dockerfile_replay.py [--dockerfile PATH] [--context DIR] [--out DIR] [--no-cargo]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from dockerfile_parse import DockerfileParser


class ReplayError(Exception):
    """The Dockerfile cannot be replayed, or a COPY would fail in `docker build`."""


# --- .dockerignore -------------------------------------------------------------------------


@dataclass
class IgnorePattern:
    regex: re.Pattern[str]
    exception: bool
    text: str


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    """A moby patternmatcher pattern as a regex over slash-separated relative paths."""
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                i += 2
                if pattern.startswith("/", i):
                    # `**/` is zero or more whole folders.
                    out.append("(?:.*/)?")
                    i += 1
                else:
                    out.append(".*")
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                raise ReplayError(f".dockerignore: unterminated [ in {pattern!r}")
            body = pattern[i + 1 : end]
            if body.startswith("^"):
                body = "!" + body[1:]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body + "]")
            i = end
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z")


def read_dockerignore(context: Path) -> list[IgnorePattern]:
    path = context / ".dockerignore"
    if not path.exists():
        return []
    patterns = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        exception = line.startswith("!")
        if exception:
            line = line[1:].strip()
        # Moby cleans each pattern (filepath.Clean) and drops a leading slash.
        cleaned = os.path.normpath(line).lstrip("/")
        if cleaned == ".":
            continue
        patterns.append(IgnorePattern(_pattern_regex(cleaned), exception, line))
    return patterns


def is_ignored(rel: str, patterns: list[IgnorePattern]) -> bool:
    """Whether the context path `rel` (slash-separated) is left out of the context."""
    parts = rel.split("/")
    # The path itself and every folder above it: a pattern matching a folder excludes all
    # that it holds.
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    ignored = False
    for p in patterns:
        if any(p.regex.match(c) for c in candidates):
            ignored = not p.exception
    return ignored


# --- the Dockerfile --------------------------------------------------------------------------


@dataclass
class Instruction:
    name: str
    value: str
    line: int  # 1-based, as editors count


@dataclass
class Stage:
    name: str | None
    line: int
    instructions: list[Instruction] = field(default_factory=list)


def read_stages(dockerfile: Path) -> list[Stage]:
    with open(dockerfile, "rb") as f:
        # A file object: given a path, the parser takes any name but `Dockerfile` for a folder.
        structure = DockerfileParser(fileobj=f, env_replace=False).structure
    stages: list[Stage] = []
    for item in structure:
        name = item["instruction"]
        if name == "COMMENT":
            continue
        inst = Instruction(name, item["value"], item["startline"] + 1)
        if name == "FROM":
            words = inst.value.split()
            alias = words[-1] if len(words) >= 3 and words[-2].upper() == "AS" else None
            stages.append(Stage(alias, inst.line))
        elif not stages:
            if name != "ARG":
                raise ReplayError(f"line {inst.line}: {name} before the first FROM")
        else:
            stages[-1].instructions.append(inst)
    return stages


@dataclass
class Copy:
    sources: list[str]
    dest: str
    from_stage: str | None
    line: int


def parse_copy(inst: Instruction) -> Copy:
    value = inst.value.strip()
    flags: dict[str, str] = {}
    # Flags come first, `--name=value` each.
    while value.startswith("--"):
        flag, _, value = value.partition(" ")
        key, _, val = flag[2:].partition("=")
        flags[key] = val
        value = value.lstrip()
    if value.startswith("["):
        try:
            words = json.loads(value)
        except json.JSONDecodeError as e:
            raise ReplayError(f"line {inst.line}: {inst.name} JSON form: {e}") from e
    else:
        words = shlex.split(value)
    if len(words) < 2:
        raise ReplayError(f"line {inst.line}: {inst.name} needs a source and a destination")
    unsupported = set(flags) - {"from", "chown", "chmod", "link"}
    if unsupported:
        raise ReplayError(
            f"line {inst.line}: {inst.name} --{sorted(unsupported)[0]} is not replayed by this check"
        )
    return Copy(words[:-1], words[-1], flags.get("from"), inst.line)


def context_sources(copy: Copy, context: Path, ignore: list[IgnorePattern]) -> list[str]:
    """The context paths a COPY's sources name (wildcards expanded), less the ignored ones."""
    found: list[str] = []
    for source in copy.sources:
        rel = os.path.normpath(source).lstrip("/")
        if rel.startswith(".."):
            raise ReplayError(f"line {copy.line}: COPY {source}: outside the build context")
        if rel == ".":
            matches = ["."]
        elif glob.has_magic(rel):
            matches = sorted(glob.glob(rel, root_dir=context, include_hidden=True))
        else:
            matches = [rel] if (context / rel).exists() else []
        matches = [m for m in matches if m == "." or not is_ignored(m, ignore)]
        if not matches:
            raise ReplayError(
                f"line {copy.line}: COPY {source}: not found in the build context"
                " (missing, or left out by .dockerignore)"
            )
        found.extend(matches)
    return found


def _copy_tree(src: Path, rel: str, dest: Path, context: Path, ignore: list[IgnorePattern]) -> None:
    """A context folder's contents into dest, leaving out what .dockerignore leaves out."""
    dest.mkdir(parents=True, exist_ok=True)
    for child in sorted(src.iterdir()):
        child_rel = child.name if rel == "." else f"{rel}/{child.name}"
        if child.is_dir():
            # An ignored folder may still hold a file that a `!` line brings back, so it is
            # walked; what it holds is tested file by file.
            _copy_tree(child, child_rel, dest / child.name, context, ignore)
        elif not is_ignored(child_rel, ignore):
            # copy2 keeps the modification time: cargo's fingerprints stay valid between runs.
            shutil.copy2(child, dest / child.name)
    if not any(dest.iterdir()):
        dest.rmdir()


def replay_copy(
    copy: Copy, workdir: str, rootfs: Path, context: Path, ignore: list[IgnorePattern]
) -> None:
    sources = context_sources(copy, context, ignore)
    dest = copy.dest if copy.dest.startswith("/") else f"{workdir.rstrip('/')}/{copy.dest}"
    as_dir = dest.endswith("/") or dest.endswith("/.")
    target = rootfs / os.path.normpath(dest).lstrip("/")
    many = len(sources) > 1 or any(glob.has_magic(s) for s in copy.sources)
    if many and not as_dir and not target.is_dir():
        raise ReplayError(
            f"line {copy.line}: COPY with more than one source needs a destination folder ending in /"
        )
    for rel in sources:
        src = context / rel
        if src.is_dir():
            _copy_tree(src, rel, target, context, ignore)
        elif as_dir or target.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target / src.name)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)


def cargo_command(run: str) -> list[str] | None:
    """The `cargo build ...` of a RUN, up to the next shell operator, or None."""
    words = shlex.split(run)
    for i in range(len(words) - 1):
        if words[i] == "cargo" and words[i + 1] == "build":
            rest = []
            for w in words[i + 2 :]:
                if w in ("&&", "||", ";", "|") or w.endswith(";"):
                    break
                rest.append(w)
            return ["cargo", "check", *rest]
    return None


def env_pairs(value: str) -> dict[str, str]:
    words = shlex.split(value)
    if len(words) == 2 and "=" not in words[0]:
        return {words[0]: words[1]}  # the old `ENV KEY VALUE` form
    pairs = {}
    for w in words:
        key, sep, val = w.partition("=")
        if not sep:
            raise ReplayError(f"ENV {value!r}: {w!r} is not KEY=VALUE")
        pairs[key] = val
    return pairs


@dataclass
class Replay:
    workdir: str
    env: dict[str, str]
    command: list[str]


def replay(dockerfile: Path, context: Path, rootfs: Path) -> Replay:
    """Replays the build stage into rootfs; checks every other stage's context COPYs."""
    stages = read_stages(dockerfile)
    ignore = read_dockerignore(context)
    build: tuple[Stage, Replay] | None = None
    for stage in stages:
        workdir, env, command = "/", {}, None
        for inst in stage.instructions:
            if inst.name == "WORKDIR":
                workdir = inst.value if inst.value.startswith("/") else f"{workdir}/{inst.value}"
            elif inst.name == "ENV":
                env.update(env_pairs(inst.value))
            elif inst.name == "RUN" and command is None:
                command = cargo_command(inst.value)
                if command is not None:
                    run_at = Replay(workdir, dict(env), command)
        if command is not None:
            if build is not None:
                raise ReplayError("more than one stage runs `cargo build`")
            build = (stage, run_at)
    if build is None:
        raise ReplayError("no stage runs `cargo build`")
    build_stage, result = build
    if rootfs.exists():
        shutil.rmtree(rootfs)
    rootfs.mkdir(parents=True)
    for stage in stages:
        workdir = "/"
        for inst in stage.instructions:
            if inst.name == "WORKDIR":
                workdir = inst.value if inst.value.startswith("/") else f"{workdir}/{inst.value}"
            elif inst.name == "ADD":
                raise ReplayError(f"line {inst.line}: ADD is not replayed by this check: use COPY")
            elif inst.name == "COPY":
                copy = parse_copy(inst)
                if copy.from_stage is not None:
                    continue
                if stage is build_stage:
                    # Only what the build stage copies before its cargo RUN matters to it;
                    # the replay copies every COPY of the stage, which is at least that.
                    replay_copy(copy, workdir, rootfs, context, ignore)
                else:
                    context_sources(copy, context, ignore)
    return result


def main() -> int:
    here = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dockerfile", type=Path, default=here / "Dockerfile")
    ap.add_argument("--context", type=Path, default=here)
    ap.add_argument(
        "--out",
        type=Path,
        default=here / "target" / "dockerfile-replay",
        help="the folder standing for the image's file system (emptied first)",
    )
    ap.add_argument("--no-cargo", action="store_true", help="replay the COPYs only")
    args = ap.parse_args()
    try:
        result = replay(args.dockerfile, args.context.resolve(), args.out.resolve())
    except ReplayError as e:
        print(f"{args.dockerfile}: {e}", file=sys.stderr)
        return 1
    cwd = args.out.resolve() / result.workdir.lstrip("/")
    print(f"replayed the build stage into {cwd}; running {' '.join(result.command)}")
    if args.no_cargo:
        return 0
    env = dict(os.environ)
    env.update(result.env)
    # The project's own target folder: the dependencies built for its tests are reused.
    env.setdefault("CARGO_TARGET_DIR", str(here / "target"))
    done = subprocess.run(result.command, cwd=cwd, env=env)
    if done.returncode != 0:
        print(
            f"{args.dockerfile}: the build stage does not compile from what it copies"
            f" (`{' '.join(result.command)}` exited {done.returncode})",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
