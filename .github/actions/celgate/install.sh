#!/usr/bin/env bash
# The install step of the celgate action (action.yml beside this file): downloads the release
# CELGATE_VERSION of CELGATE_REPOSITORY for this runner (linux or macOS, x64 or arm64),
# verifies the archive against the release's SHA256SUMS, and puts `celgate` on the PATH of
# the job's next steps.
set -euo pipefail
version="${CELGATE_VERSION#v}"
if ! [[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?$ ]]; then
  echo "::error::celgate: version '$CELGATE_VERSION' is not a release version (X.Y.Z)" >&2
  exit 1
fi
case "${RUNNER_OS:-}/${RUNNER_ARCH:-}" in
  Linux/X64) target=x86_64-unknown-linux-musl ;;
  Linux/ARM64) target=aarch64-unknown-linux-musl ;;
  macOS/X64) target=x86_64-apple-darwin ;;
  macOS/ARM64) target=aarch64-apple-darwin ;;
  *)
    echo "::error::celgate: no release binary for runner ${RUNNER_OS:-?}/${RUNNER_ARCH:-?}" >&2
    exit 1
    ;;
esac
archive="celgate-$version-$target.tar.gz"
base="https://github.com/$CELGATE_REPOSITORY/releases/download/v$version"
dir="${RUNNER_TEMP:-/tmp}/celgate-$version"
mkdir -p "$dir"
cd "$dir"
curl --fail --silent --show-error --location --retry 3 --output "$archive" "$base/$archive"
curl --fail --silent --show-error --location --retry 3 --output SHA256SUMS "$base/SHA256SUMS"
# The archive's line of SHA256SUMS, checked; a missing line is a failure, not a skip.
if ! grep -E "^[0-9a-f]{64}  $archive\$" SHA256SUMS > archive.sha256; then
  echo "::error::celgate: $archive is not listed in the release's SHA256SUMS" >&2
  exit 1
fi
if command -v sha256sum > /dev/null; then
  sha256sum --check --strict archive.sha256
else
  shasum -a 256 --check archive.sha256
fi
tar -xzf "$archive"
bin="$dir/celgate-$version-$target"
"$bin/celgate" --version
echo "$bin" >> "$GITHUB_PATH"
echo "path=$bin/celgate" >> "$GITHUB_OUTPUT"
