#!/usr/bin/env bash
# Soak of naaice-swnaa (tests/examples/soak.rs): many clients running checked RPCs plus
# clients killed with SIGKILL, while the server's RSS, descriptors and threads are sampled.
# Usage: tests/soak/soak.sh [SECONDS] [-- extra soak options, e.g. --clients 32]
# CI runs a short one (tests/soak/ci.sh); the README has the figures of a longer one.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-45}
shift || true
[ "${1:-}" = "--" ] && shift
cargo build -q -p naaice-swnaa
cargo build -q -p naaice-tests --example soak
target/debug/examples/soak --server target/debug/naaice-swnaa --seconds "$seconds" "$@"
