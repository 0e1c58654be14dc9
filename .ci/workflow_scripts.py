"""Every `run:` of the GitHub workflows and composite actions, written out as a shell script
for ShellCheck (actionlint's check, which .ci/workflow-lint cannot install).

Usage: workflow_scripts.py OUT_DIR FILE...  Writes OUT_DIR/<file>-<job>-<step>.sh (emptied
first) and prints their paths. `${{ ... }}` expressions become a plain word, as the runner
substitutes them before the shell sees the script; a step whose shell is not bash or sh is
refused, since nothing here checks it.
"""

import re
import shutil
import sys
from pathlib import Path

import yaml

EXPRESSION = re.compile(r"\$\{\{.*?\}\}", re.S)


def steps(doc: dict):
    """(job, step index, step, default shell) for a workflow or a composite action."""
    if "jobs" in doc:
        default = ((doc.get("defaults") or {}).get("run") or {}).get("shell")
        for job_id, job in doc["jobs"].items():
            job_default = ((job.get("defaults") or {}).get("run") or {}).get("shell", default)
            for i, step in enumerate(job.get("steps") or []):
                yield job_id, i, step, job_default
    elif (doc.get("runs") or {}).get("using") == "composite":
        for i, step in enumerate(doc["runs"].get("steps") or []):
            yield "runs", i, step, None


def main() -> int:
    out = Path(sys.argv[1])
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    failed = False
    for name in sys.argv[2:]:
        doc = yaml.safe_load(Path(name).read_text())
        stem = re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-")
        for job, i, step, default in steps(doc):
            if "run" not in step:
                continue
            shell = step.get("shell", default) or "bash"
            program = shell.split()[0]
            if program not in ("bash", "sh"):
                print(f"{name}: {job} step {i}: shell {shell!r} is not checked", file=sys.stderr)
                failed = True
                continue
            script = out / f"{stem}-{job}-{i}.sh"
            # GitHub runs bash as `bash -e -o pipefail`; the header says so to ShellCheck.
            header = "#!/usr/bin/env bash\nset -eo pipefail\n" if program == "bash" else "#!/bin/sh\nset -e\n"
            script.write_text(header + EXPRESSION.sub("GITHUB_EXPRESSION", step["run"]))
            print(script)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
