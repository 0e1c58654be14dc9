# shellcheck shell=bash
# Sourced by the CI scripts that run Python tools from PyPI: `ci_venv NAME REQUIREMENTS`
# makes (or reuses) the virtualenv target/NAME for a pinned requirements file and sets $venv.
# It is rebuilt when the requirements change, as .ci/chart-test does for its own.
ci_venv() {
  venv="target/$1"
  local stamp="$venv/.requirements"
  if ! cmp -s "$2" "$stamp" 2>/dev/null; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check --only-binary=:all: -r "$2"
    cp "$2" "$stamp"
  fi
}
