"""Tests of the celgate action's install script (.github/actions/celgate/install.sh), run by
.ci/workflow-lint: a fake release (an archive holding a `celgate` script, and SHA256SUMS) is
served through a `curl` stand-in on PATH that maps the release URLs to local files, so the
script runs as on a runner, without a network. It must install the archive whose checksum
matches, and refuse one that was altered, one that SHA256SUMS does not list, a runner it has
no binary for and a version that is not X.Y.Z."""

import hashlib
import os
import subprocess
import tarfile
import tempfile
import textwrap
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
INSTALL = REPO / ".github/actions/celgate/install.sh"
TARGET = "x86_64-unknown-linux-musl"

# Answers `curl ... --output FILE URL` from $FAKE_RELEASES/<owner>/<repo>/<tag>/<name>.
CURL = textwrap.dedent(
    """\
    #!/usr/bin/env bash
    set -euo pipefail
    out=; url=
    while [ $# -gt 0 ]; do
      case "$1" in
        --output) out="$2"; shift 2 ;;
        --retry) shift 2 ;;
        -*) shift ;;
        *) url="$1"; shift ;;
      esac
    done
    path="${url#https://github.com/}"
    path="${path/\\/releases\\/download\\//\\/}"
    src="$FAKE_RELEASES/$path"
    [ -f "$src" ] || { echo "curl: (22) 404 $url" >&2; exit 22; }
    cp "$src" "$out"
    """
)


class InstallScriptTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        root = Path(self.tmp.name)
        self.bin = root / "bin"
        self.bin.mkdir()
        (self.bin / "curl").write_text(CURL)
        (self.bin / "curl").chmod(0o755)
        self.release = root / "releases/celgate/celgate/v1.2.3"
        self.release.mkdir(parents=True)
        self.runner_temp = root / "runner"
        self.runner_temp.mkdir()
        self.github_path = root / "github_path"
        self.github_output = root / "github_output"
        self.archive = self.release / f"celgate-1.2.3-{TARGET}.tar.gz"
        staged = root / f"celgate-1.2.3-{TARGET}"
        staged.mkdir()
        (staged / "celgate").write_text("#!/bin/sh\necho 'celgate 1.2.3'\n")
        (staged / "celgate").chmod(0o755)
        with tarfile.open(self.archive, "w:gz") as tar:
            tar.add(staged, arcname=staged.name)
        self.write_sums({self.archive.name: self.archive.read_bytes()})

    def tearDown(self):
        self.tmp.cleanup()

    def write_sums(self, files: dict[str, bytes]):
        lines = [f"{hashlib.sha256(b).hexdigest()}  {name}\n" for name, b in files.items()]
        (self.release / "SHA256SUMS").write_text("".join(lines))

    def install(self, version="1.2.3", os_name="Linux", arch="X64"):
        env = {
            **os.environ,
            "PATH": f"{self.bin}:{os.environ['PATH']}",
            "FAKE_RELEASES": str(Path(self.tmp.name, "releases")),
            "CELGATE_VERSION": version,
            "CELGATE_REPOSITORY": "celgate/celgate",
            "RUNNER_OS": os_name,
            "RUNNER_ARCH": arch,
            "RUNNER_TEMP": str(self.runner_temp),
            "GITHUB_PATH": str(self.github_path),
            "GITHUB_OUTPUT": str(self.github_output),
        }
        return subprocess.run(["bash", str(INSTALL)], env=env, capture_output=True, text=True)

    def test_installs_the_verified_archive_and_puts_it_on_the_path(self):
        done = self.install(version="v1.2.3")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("celgate 1.2.3", done.stdout)
        bin_dir = self.github_path.read_text().strip()
        self.assertTrue(Path(bin_dir, "celgate").is_file())
        self.assertEqual(self.github_output.read_text(), f"path={bin_dir}/celgate\n")

    def test_an_altered_archive_is_refused(self):
        self.archive.write_bytes(self.archive.read_bytes() + b"\0")
        done = self.install()
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("FAILED", done.stdout + done.stderr)
        self.assertFalse(self.github_path.exists())

    def test_an_archive_missing_from_the_checksums_is_refused(self):
        self.write_sums({"other.tar.gz": b""})
        done = self.install()
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("is not listed in the release's SHA256SUMS", done.stderr)
        self.assertFalse(self.github_path.exists())

    def test_a_runner_without_a_binary_and_a_bad_version_are_refused(self):
        done = self.install(os_name="Windows")
        self.assertIn("no release binary for runner Windows/X64", done.stderr)
        done = self.install(version="latest")
        self.assertIn("is not a release version", done.stderr)
        self.assertFalse(self.github_path.exists())


if __name__ == "__main__":
    unittest.main()
