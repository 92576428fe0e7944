#!/usr/bin/env bash
# ci.sh -- naaice-bench end to end (CI): a small sweep against its own in-process software NAA,
# then `naaice-bench --naa` against a separately started naaice-swnaa with the first run's
# low-level CSV as --compare and the server's CPU time per RPC read from its process (--naa-pid);
# check_outputs.py checks that the CSVs and the plots exist and parse. Also checks the server's
# log file (like a Slurm output file): no colour codes, and a summary (RPCs, CPU time per RPC)
# of every connection. Then, against the same naaice-swnaa, `naaice-bench --clients 1,2`: client
# threads of the Rust API (64 B and 64 KiB, with the wait_any overlap case and the isolation
# test), and client processes of the C ABI (64 B, with the naa_waitany overlap case);
# check_outputs.py --clients checks their CSV (a row per N and size, positive rates, the raw
# echo and the ratio, the fairness column), JSON and plot.
#
#   tests/bench/ci.sh [OUT]      (default OUT: target/bench-ci)
#
# The numbers of such a short run on a shared machine mean nothing; only the pipeline is checked.
# Last, `--idle 64`, `--pipeline`, `--local` and `--busy 2` print what idle connections cost,
# transfer/compute overlap, local mode in process, and both waiting policies beside busy loops.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
cd "$ROOT"
out=${1:-$ROOT/target/bench-ci}
rm -rf "$out"
mkdir -p "$out"

cargo build --locked -p naaice-swnaa -p naaice-bench
target=$(cargo metadata --format-version 1 --no-deps |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
bench="$target/debug/naaice-bench"
swnaa="$target/debug/naaice-swnaa"
sweep=(--max-size 70000 --reps 2 --steady 20)

echo "--- naaice-bench with its own software NAA"
"$bench" "${sweep[@]}" --out "$out/own" > "$out/own.txt" 2>&1 || {
    cat "$out/own.txt" >&2
    exit 1
}

echo "--- naaice-swnaa, then naaice-bench --naa against it"
# swnaa_start
. "$HERE/swnaa.sh"
# It sleeps in its waits: the kernel brings a spinning thread's CPU time up to date only at
# scheduler ticks, so a steady run of 20 RPCs would read no NAA CPU time at all.
swnaa_start "$swnaa" "$out/swnaa.log" --address 127.0.0.1 --max-connections 8 --wait sleep || exit 1
trap 'kill "$swnaa_pid" 2>/dev/null || true' EXIT
"$bench" --naa "127.0.0.1:$swnaa_port" --naa-pid "$swnaa_pid" "${sweep[@]}" --compare "$out/own/lowlevel.csv" \
    --out "$out/naa" > "$out/naa.txt" 2>&1 || {
    cat "$out/naa.txt" >&2
    exit 1
}

echo "--- naaice-bench --clients 1,2 against naaice-swnaa"
clients_start=$SECONDS
many=(--naa "127.0.0.1:$swnaa_port" --naa-pid "$swnaa_pid" --clients 1,2 --duration 1s)
"$bench" "${many[@]}" --size 64,64KiB --overlap --isolation --big-size 1MiB --out "$out/clients" \
    > "$out/clients.txt" 2>&1 || {
    cat "$out/clients.txt" >&2
    exit 1
}
cat "$out/clients.txt"
"$bench" "${many[@]}" --size 64 --api c --client-processes --overlap --no-plots --out "$out/clients-c" \
    > "$out/clients-c.txt" 2>&1 || {
    cat "$out/clients-c.txt" >&2
    exit 1
}
cat "$out/clients-c.txt"
echo "naaice-bench --clients: $((SECONDS - clients_start)) s"
kill -TERM "$swnaa_pid"
wait "$swnaa_pid" || { echo "naaice-swnaa exited with $? on SIGTERM" >&2; cat "$out/swnaa.log" >&2; exit 1; }
trap - EXIT
grep -q "client connected" "$out/swnaa.log" || { echo "the benchmark never reached naaice-swnaa" >&2; exit 1; }
# Each connection's summary: the steady-state one served the --steady RPCs and more.
most=$(sed -n 's/.*connection closed.* rpcs=\([0-9]*\) .*cpu_per_rpc_us=[0-9.]*.*/\1/p' "$out/swnaa.log" |
    sort -n | tail -n 1)
[ "${most:-0}" -ge 20 ] || {
    echo "naaice-swnaa's log has no summary (rpcs, cpu_per_rpc_us) of the steady-state connection:" >&2
    grep "connection closed" "$out/swnaa.log" >&2
    exit 1
}
if grep -q $'\x1b' "$out/swnaa.log"; then
    echo "colour codes in naaice-swnaa's log file" >&2
    exit 1
fi

python3 "$HERE/check_outputs.py" --max-size 70000 --reps 2 "$out/own"
python3 "$HERE/check_outputs.py" --max-size 70000 --reps 2 --compared --naa-cpu "$out/naa"
python3 "$HERE/check_outputs.py" --clients 1,2 --sizes 64,65536 --overlap --isolation --naa-cpu "$out/clients"
python3 "$HERE/check_outputs.py" --clients 1,2 --sizes 64 --mode processes --api c --overlap --no-plots --naa-cpu \
    "$out/clients-c"

# What idle connections cost (64 handles left alone for 10 s; the NAA in a process of its own)
# and the waiting policies beside busy loops: printed for the log. An idle connection arms no
# timer, so the figures hold on a shared runner too; the busy comparison is rough there.
echo "--- naaice-bench --idle 64 (10 s)"
"$bench" --idle 64 --duration 10s --out "$out/idle" > "$out/idle.txt" 2>&1 || {
    cat "$out/idle.txt" >&2
    exit 1
}
cat "$out/idle.txt"
echo "--- naaice-bench --pipeline 64MiB (transfer and compute overlapped; a debug build: rough)"
"$bench" --pipeline 64MiB --reps 2 --out "$out/pipeline" > "$out/pipeline.txt" 2>&1 || {
    cat "$out/pipeline.txt" >&2
    exit 1
}
cat "$out/pipeline.txt"
echo "--- naaice-bench --local (local mode in process against loopback and memcpy; a debug build: rough)"
"$bench" --local --steady 2000 --reps 3 --out "$out/local" > "$out/local.txt" 2>&1 || {
    cat "$out/local.txt" >&2
    exit 1
}
cat "$out/local.txt"
grep -q '^steady,in-process,64,' "$out/local/local.csv" || { echo "local.csv has no in-process row" >&2; exit 1; }
echo "--- naaice-bench --busy 2 (the default policy and sleep beside 2 busy loops)"
"$bench" --busy 2 --max-size 4096 --steady 200 --out "$out/busy" > "$out/busy.txt" 2>&1 || {
    cat "$out/busy.txt" >&2
    exit 1
}
cat "$out/busy.txt"
