#!/usr/bin/env bash
# Runs the tutorial (docs/tutorial.md) as a user would: every fenced block whose info string is
# `sh tutorial` (the local-mode and naaice-swnaa steps, Rust and C), in order, as one shell
# session from the repository root. A command that fails fails the run. Blocks marked plain
# `sh` (the RDMA step) are not run.
#
# The session runs in a process group of its own: whatever it left running (a background
# server) is stopped when it ends, fails or times out (TUTORIAL_TIMEOUT seconds, default 1800).
# The tutorial uses no fixed port: its server listens on a port the system picks
# (`--port 0`) and the commands read it from the banner, so runs of several users (or CI jobs)
# on one machine do not meet.
#
# Usage: .ci/tutorial.sh
set -euo pipefail
cd "$(dirname "$0")/.."

doc=docs/tutorial.md
limit=${TUTORIAL_TIMEOUT:-1800}
work=$(mktemp -d)
session="$work/session.sh"

# The blocks, in order: lines between "```sh tutorial" and the closing fence.
awk '
    /^```sh tutorial[[:space:]]*$/ { inside = 1; blocks++; next }
    inside && /^```[[:space:]]*$/ { inside = 0; next }
    inside { print }
    END {
        if (inside) { print "unclosed ```sh tutorial block" > "/dev/stderr"; exit 1 }
        if (blocks == 0) { print "no ```sh tutorial block" > "/dev/stderr"; exit 1 }
    }
' "$doc" >"$work/commands"
blocks=$(grep -c '^```sh tutorial' "$doc")
commands=$(grep -cv '^[[:space:]]*\(#.*\)\?$' "$work/commands" || true)

if grep -n -- '--port [1-9]' "$work/commands"; then
    echo "tutorial: a fixed port (above) can meet another user's server; use --port 0" >&2
    exit 1
fi

{
    echo 'set -euo pipefail'
    # Background jobs the commands left running (they stop their own servers; this is for
    # failures half-way).
    echo 'stop_jobs() { kill $(jobs -p) 2>/dev/null || true; }'
    echo 'trap stop_jobs EXIT'
    echo 'trap "exit 143" TERM INT'
    echo 'set -v'
    cat "$work/commands"
} >"$session"

echo "tutorial: $commands commands in $blocks blocks of $doc"
start=$SECONDS
# A session of its own (setsid): its process group is stopped as a whole below.
setsid bash "$session" &
pid=$!
cleanup() {
    kill -TERM -- "-$pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
(
    sleep "$limit"
    echo "tutorial: timed out after $limit s" >&2
    kill -TERM -- "-$pid" 2>/dev/null || true
) &
watchdog=$!
status=0
wait "$pid" || status=$?
kill "$watchdog" 2>/dev/null || true
if [ "$status" -ne 0 ]; then
    echo "tutorial: failed (exit status $status) after $((SECONDS - start)) s" >&2
    exit "$status"
fi
echo "tutorial: all commands succeeded in $((SECONDS - start)) s"
