#!/usr/bin/env bash
# check.sh -- self-test of the Soft-RoCE VM harness (run by .ci/run before the verbs tests).
#
#   tests/rxe-vm/check.sh
#
# Builds the image if needed, then checks in separate VM runs: the exit status, stdout and
# stderr of a command come back apart and intact, the timeout stops a hanging command with 124,
# the guest keeps the TSC as its clocksource (run.sh boots it with tsc=reliable), rping works between two processes over the guest address (guest-selftest.sh), and the smoke
# crate (a host-built Rust test binary linking libibverbs and librdmacm) passes with run.sh as
# the cargo runner. Prints the time of each step. Same environment as run.sh.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RUN=$HERE/run.sh
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rxe-vm-check.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

failed=0
t=$SECONDS
step() {
    printf '[check] %-58s' "$1"
    t=$SECONDS
}
ok() { echo "ok ($((SECONDS - t)) s)"; }
bad() {
    echo "FAILED: $*"
    failed=1
}

step "image (build if missing)"
"$RUN" --build
ok

step "exit status, stdout and stderr"
rc=0
"$RUN" sh -c 'echo to-stdout; echo to-stderr >&2; head -c 3000000 /dev/zero | tr "\0" x; exit 7' \
    > "$tmp/out" 2> "$tmp/err" || rc=$?
want_out=$( (echo to-stdout; head -c 3000000 /dev/zero | tr '\0' x) | sha256sum)
if [ "$rc" != 7 ]; then
    bad "exit status $rc, expected 7"
elif [ "$(sha256sum < "$tmp/out")" != "$want_out" ]; then
    bad "stdout differs ($(wc -c < "$tmp/out") bytes)"
elif [ "$(cat "$tmp/err")" != to-stderr ]; then
    bad "stderr: $(head -c 200 "$tmp/err")"
else
    ok
fi

step "timeout (a hanging command ends with 124)"
rc=0
RXE_VM_TIMEOUT=15 "$RUN" sleep 60 > /dev/null 2>&1 || rc=$?
if [ "$rc" = 124 ]; then ok; else bad "exit status $rc, expected 124"; fi

step "guest clock: the TSC, kept (tsc=reliable)"
clock=$("$RUN" cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2> /dev/null)
if [ "$clock" = tsc ]; then ok; else bad "guest clocksource is ${clock:-unknown}, expected tsc"; fi

step "guest selftest (device, port, rping)"
if "$RUN" "$HERE/guest-selftest.sh" > "$tmp/selftest" 2>&1; then ok; else
    bad "see below"
    cat "$tmp/selftest"
fi

step "smoke crate via the cargo runner (libibverbs, librdmacm)"
if CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER=$RUN \
    cargo test --manifest-path "$HERE/smoke/Cargo.toml" > "$tmp/smoke" 2>&1 \
    && grep -q 'test result: ok. 4 passed' "$tmp/smoke"; then
    ok
else
    bad "see below"
    cat "$tmp/smoke"
fi

[ $failed = 0 ] || {
    echo "[check] the Soft-RoCE VM harness FAILED" >&2
    exit 1
}
echo "[check] the Soft-RoCE VM harness works"
