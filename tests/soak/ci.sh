#!/usr/bin/env bash
# CI's short soak of naaice-swnaa (about 40 s of load plus builds); fails on a wrong or failed
# RPC, a server crash, or descriptors, threads or memory that keep growing.
set -euo pipefail
exec "$(dirname "$0")/soak.sh" 40 -- --clients 12 --kills-per-second 3 --sample-every 4
