#!/usr/bin/env bash
# Quick start, part two: the whole test suite, as CI runs it. Needs root for
# the namespace tests (CI runs as root). Tests that cannot run here (no root,
# a tool missing) say so; the closing summary counts them beside the passes.
set -euo pipefail
cd "$(dirname "$0")/.."
# What the build needs (clang, libbpf, a Rust toolchain) first; the tools
# only the tests call install while the code builds, and the tests wait
# for them: on a fresh machine the download and the compile overlap.
scripts/deps.sh
skips=$(mktemp)
times=$(mktemp)
out=$(mktemp)
deps_log=$(mktemp)
fuzz_log=$(mktemp)
fuzz_work=$(mktemp -d -t linerate-fuzz.XXXXXX)
fuzz_pid=
deps_pid=
cleanup() {
    # The fuzzing runs in a session of its own: end all of it.
    [ -n "$fuzz_pid" ] && kill -- "-$fuzz_pid" 2>/dev/null
    [ -n "$deps_pid" ] && wait "$deps_pid" 2>/dev/null
    rm -rf "$skips" "$times" "$out" "$deps_log" "$fuzz_log" "$fuzz_work"
}
trap cleanup EXIT
scripts/deps.sh chromium python3-prometheus-client openssh-server curl nginx tcpdump qemu-system-x86 busybox-static \
    </dev/null >"$deps_log" 2>&1 &
deps_pid=$!
# Fuzzing: every fuzz target FUZZ_SECONDS (default 30) on this code, at the
# lowest priority beside the build and the tests, so it costs them little
# time. FUZZ_SECONDS=0 leaves it out. setsid gives it a session of its own
# (to stop it as a group), and with the kernel's autogroup scheduling
# (sched_autogroup_enabled) a session is a group that gets an equal share
# of the CPUs whatever its processes' nice: the fuzzers took a whole core
# from the build and the rate tests. The group's own nice (its
# /proc/PID/autogroup) is what lowers it.
fuzz_secs=${FUZZ_SECONDS:-30}
if [ "$fuzz_secs" != 0 ]; then
    FUZZ_WORK="$fuzz_work" setsid bash -c \
        'echo 19 2>/dev/null >/proc/self/autogroup; exec nice -n 19 scripts/fuzz.sh "$1"' \
        fuzz "$fuzz_secs" >"$fuzz_log" 2>&1 &
    fuzz_pid=$!
fi
status=0
# The integration tests hold the suite's lock (tests/util.rs) over the
# machine's two cores: exclusive (both) for those that measure at the
# machine's limit, one core for those that measure but hold with a core
# busy beside them, shared (together one core) for those that only check
# behaviour. Shared tests overlap on these threads, two one-core tests run
# side by side, an exclusive one runs alone whatever the count.
# TEST_THREADS=N changes it.
threads=${TEST_THREADS:-4}
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --release --locked --no-run
built_at=$SECONDS
if ! wait "$deps_pid"; then
    deps_pid=
    cat "$deps_log" >&2
    echo "test.sh: installing the tests' tools failed (above); the tests need them" >&2
    exit 1
fi
deps_pid=
cat "$deps_log" >&2
echo "test.sh: format, clippy and the build done at ${built_at}s, the tests start at ${SECONDS}s" >&2
LINERATE_SKIP_LOG="$skips" LINERATE_TEST_TIMES="$times" cargo test --workspace --release --locked --no-fail-fast -- --test-threads="$threads" 2>&1 | tee "$out" || status=$?
# Where the suite's time went: the slowest tests under the lock, with how
# busy the host's cores were meanwhile and which kind of lock they held.
if [ -s "$times" ]; then
    echo
    awk '{n[$3]++; s[$3] += $1} END {printf "under the lock: %d exclusive tests took %.0f s, %d one-core tests %.0f s (two side by side), %d shared tests %.0f s (side by side)\n", n["exclusive"], s["exclusive"], n["one-core"], s["one-core"], n["shared"], s["shared"]}' "$times"
    echo "tests that took 5 s or more under the lock (seconds, host CPU busy, lock, test; for exclusive ones the CPU seconds of the test's own processes):"
    # awk reads all of sort's output: head would close the pipe early, and
    # sort's SIGPIPE (141) ended the script under pipefail with every test green.
    sort -rn "$times" | awk '$1 >= 5 {print "  " $0}'
fi
fuzz_status=0
if [ -n "$fuzz_pid" ]; then
    wait "$fuzz_pid" || fuzz_status=$?
    fuzz_pid=
    echo
    echo "fuzzing (scripts/fuzz.sh $fuzz_secs, niced beside the tests):"
    grep -E '^(== |fuzz.sh:|Done [0-9]+ runs)|deadly signal|panicked|^error' "$fuzz_log" | sed 's/^/  /'
    [ "$fuzz_status" = 0 ] || { tail -40 "$fuzz_log" | sed 's/^/  /'; status=1; }
fi
passed=$(sed -n 's/^test result: .* \([0-9][0-9]*\) passed.*/\1/p' "$out" | awk '{s += $1} END {print s + 0}')
failed=$(sed -n 's/^test result: .* \([0-9][0-9]*\) failed.*/\1/p' "$out" | awk '{s += $1} END {print s + 0}')
skipped=$(wc -l <"$skips")
echo
fuzzed=$([ "$fuzz_secs" = 0 ] && echo "not fuzzed (FUZZ_SECONDS=0)" || { [ "$fuzz_status" = 0 ] && echo "every fuzz target ${fuzz_secs}s without a crash" || echo "FUZZING FAILED"; })
echo "time: ${SECONDS}s in all, ${built_at}s of them to build"
echo "summary: ${passed:-0} passed, ${failed:-0} failed, $skipped skipped; $fuzzed"
if [ "$skipped" -gt 0 ]; then
    sed 's/^/  /' "$skips"
    echo "  (a skipped test proves nothing: run as root with the tools installed, as CI does)"
fi
# The failures in short, last, where a log's tail shows them: each failing
# test's name and its panic message (at most 14 lines of it).
if [ "$status" != 0 ]; then
    echo
    echo "failures in short:"
    awk '/^---- .* stdout ----$/ {name = $2; on = 0}
         /panicked at/ && name != "" {print "  " name ":"; on = 1; n = 0}
         on && /^note: run with|^stack backtrace:|^   [0-9]+: / {on = 0}
         on && n < 14 {print "    " $0; n++}' "$out"
fi
exit "$status"
