#!/usr/bin/env bash
# `make fuzz`: runs each fuzz target of tests/fuzz/ in a release build for FUZZ_SECONDS
# (default 60), one after the other. A failing input is shrunk and kept by the test itself
# under tests/fuzz-regressions/<target>/. A crash that no in-process handler sees (an abort,
# a stack overflow, the allocation ceiling, the hang watchdog) kills the process: the input
# it was running is then copied there from target/tmp/fuzz-current/<target>, and the target
# restarts for the rest of its time (at most 3 times).
set -u
cd "$(dirname "$0")/../.."
seconds=${FUZZ_SECONDS:-60}
targets=${FUZZ_TARGETS:-parse eval doc review policy mutate}
tmp=${CARGO_TARGET_DIR:-target}/tmp/fuzz-current
# The test binary is run directly: through cargo, a crash and a failed test both exit 101.
bin=$(cargo test --release --test fuzz --no-run 2>&1 | tee /dev/stderr | sed -n 's/.*Executable .*(\(.*\)).*/\1/p' | tail -1)
[ -x "$bin" ] || { echo "fuzz: cannot build or find the fuzz test binary" >&2; exit 2; }
status=0
for t in $targets; do
  case $t in
    parse) ext=cel ;; eval) ext=json ;; policy) ext=yaml ;; *) ext=bin ;;
  esac
  end=$(( $(date +%s) + seconds ))
  for attempt in 1 2 3 4; do
    left=$(( end - $(date +%s) ))
    [ "$left" -gt 0 ] || break
    rm -f "$tmp/$t"
    CELGATE_FUZZ_SECONDS=$left "$bin" --exact "$t" --test-threads=1 --nocapture
    rc=$?
    [ $rc -eq 0 ] && break
    status=1
    # 101: the test failed normally (its inputs are kept); anything else is a crash.
    [ $rc -eq 101 ] && break
    if [ -s "$tmp/$t" ]; then
      h=$(sha256sum "$tmp/$t" | cut -c1-16)
      mkdir -p "tests/fuzz-regressions/$t"
      cp "$tmp/$t" "tests/fuzz-regressions/$t/crash-$h.$ext"
      echo "fuzz $t: CRASH (exit $rc); the input is kept in tests/fuzz-regressions/$t/crash-$h.$ext" >&2
    else
      echo "fuzz $t: CRASH (exit $rc) with no input recorded" >&2
    fi
  done
done
exit $status
