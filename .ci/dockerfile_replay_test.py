"""Tests of the Dockerfile replay (.ci/dockerfile_replay.py), run by .ci/dockerfile-check
before the replay itself: `.dockerignore` as moby reads it, COPY as Docker runs it, and that
the check fails on a build stage that does not copy what the build needs (the workspace's
crates, as the Dockerfile once forgot)."""

import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dockerfile_replay import ReplayError, is_ignored, read_dockerignore, replay  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


class DockerignoreTest(unittest.TestCase):
    def patterns(self, text: str):
        with tempfile.TemporaryDirectory() as d:
            Path(d, ".dockerignore").write_text(text)
            return read_dockerignore(Path(d))

    def test_a_folder_pattern_leaves_out_what_it_holds(self):
        p = self.patterns("target\n# a comment\n/.git\n")
        self.assertTrue(is_ignored("target/debug/celgate", p))
        self.assertTrue(is_ignored(".git/HEAD", p))
        self.assertFalse(is_ignored("src/target.rs", p))

    def test_the_last_matching_line_wins(self):
        p = self.patterns("*\n!src\n!tests/*.rs\ntests/secret.rs\n")
        self.assertFalse(is_ignored("src/cli/mod.rs", p))
        self.assertFalse(is_ignored("tests/cli.rs", p))
        self.assertTrue(is_ignored("tests/secret.rs", p))
        self.assertTrue(is_ignored("tests/fixtures/a.yaml", p))
        self.assertTrue(is_ignored("README.md", p))

    def test_star_stays_in_one_folder_and_double_star_crosses_them(self):
        p = self.patterns("docs/*.md\n**/*.tmp\n")
        self.assertTrue(is_ignored("docs/a.md", p))
        self.assertFalse(is_ignored("docs/users/a.md", p))
        self.assertTrue(is_ignored("a.tmp", p))
        self.assertTrue(is_ignored("x/y/z.tmp", p))


class CopyReplayTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.context = Path(self.dir.name, "context")
        self.rootfs = Path(self.dir.name, "rootfs")
        tree(
            self.context,
            {
                "Cargo.toml": "",
                "src/main.rs": "",
                "src/nested/mod.rs": "",
                "benches/cel.rs": "",
                "benches/load/run.sh": "",
                ".dockerignore": "benches/load\n",
            },
        )

    def tearDown(self):
        self.dir.cleanup()

    def run_dockerfile(self, text: str):
        dockerfile = Path(self.dir.name, "Dockerfile")
        dockerfile.write_text(text)
        return replay(dockerfile, self.context, self.rootfs)

    def test_copies_folders_contents_files_and_wildcards_relative_to_workdir(self):
        result = self.run_dockerfile(
            "FROM rust AS build\nWORKDIR /w\nCOPY Cargo.toml ./\nCOPY src ./src\n"
            "COPY benches ./b\nCOPY [\"src/*.rs\", \"/abs/\"]\nENV A=1 B=\"two words\"\n"
            "RUN --mount=type=cache,target=/w/target cargo build --release --bin x && cp a b\n"
        )
        self.assertEqual(result.workdir, "/w")
        self.assertEqual(result.env, {"A": "1", "B": "two words"})
        self.assertEqual(result.command, ["cargo", "check", "--release", "--bin", "x"])
        self.assertEqual(
            listing(self.rootfs),
            [
                "abs/main.rs",
                "w/Cargo.toml",
                "w/b/cel.rs",
                "w/src/main.rs",
                "w/src/nested/mod.rs",
            ],
        )

    def test_a_source_left_out_by_dockerignore_is_not_found(self):
        with self.assertRaisesRegex(ReplayError, "line 3: COPY benches/load: not found"):
            self.run_dockerfile(
                "FROM rust AS build\nRUN cargo build\nCOPY benches/load /x/\n"
            )

    def test_a_copy_in_another_stage_must_name_what_exists(self):
        with self.assertRaisesRegex(ReplayError, "line 4: COPY examples: not found"):
            self.run_dockerfile("FROM rust AS build\nRUN cargo build\nFROM scratch\nCOPY examples /e\n")

    def test_a_stage_without_cargo_build_is_refused(self):
        with self.assertRaisesRegex(ReplayError, "no stage runs `cargo build`"):
            self.run_dockerfile("FROM rust\nCOPY src /src\n")


class ProjectDockerfileTest(unittest.TestCase):
    def test_the_check_fails_when_the_build_stage_leaves_out_the_crates(self):
        text = (REPO / "Dockerfile").read_text()
        self.assertIn("COPY crates ./crates\n", text)
        with tempfile.TemporaryDirectory() as d:
            broken = Path(d, "Dockerfile")
            broken.write_text(text.replace("COPY crates ./crates\n", ""))
            done = subprocess.run(
                [
                    sys.executable,
                    str(REPO / ".ci/dockerfile_replay.py"),
                    "--dockerfile",
                    str(broken),
                    "--out",
                    str(Path(d, "rootfs")),
                ],
                capture_output=True,
                text=True,
                env={**os.environ, "CARGO_TARGET_DIR": str(Path(d, "target"))},
            )
        self.assertEqual(done.returncode, 1, done.stderr)
        self.assertIn("celgate-cel", done.stderr)
        self.assertIn("does not compile from what it copies", done.stderr)


if __name__ == "__main__":
    unittest.main()
