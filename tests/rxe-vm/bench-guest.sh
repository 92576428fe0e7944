#!/bin/bash
# bench-guest.sh -- runs INSIDE the VM (bench.sh starts it through run.sh):
#
#   bench-guest.sh OUT ROUNDS "SIZES" TRANSPORT NAAICE_BENCH [naaice-bench args...]
#
# Interleaves perftest and the project's RPC benchmark (naaice-bench) so that the emulator's
# drift hits both:
#
#   perftest round 0, RPC round 1, perftest round 1, ..., RPC round N, perftest round N
#
# A perftest round runs ib_write_lat and ib_write_bw (server and client as two processes on the
# rxe device, over RXE_VM_ADDR) for every size in SIZES, and ib_send_lat for those up to 4 KiB; each run is retried up to 3 times, since
# perftest aborts ("r^2 < 0.9") or reports inf when emulation disturbs its clock calibration. An
# RPC round runs NAAICE_BENCH over TRANSPORT ("verbs": --transport verbs --address $RXE_VM_ADDR;
# "soft": no transport options, to try the pipeline) with its results written into OUT.
#
# With RPC_FLOOR set to an rpc_floor binary (tests/rxe-vm/floor), every perftest round also runs
# it for every size: the bare verbs operations of an RPC, the floor of what the RPC can reach.
#
# With NAAICE_SWNAA set to a naaice-swnaa binary, every RPC round starts it as its own process
# on RXE_VM_ADDR (as perftest's and rpc_floor's servers run, and as users run an NAA) and runs
# NAAICE_BENCH against it with --naa ADDR:PORT --naa-pid PID, so that the NAA's CPU time per RPC
# is its process's. A --wait or --busy-poll-us among the naaice-bench args is passed on to the
# NAA. Without it, naaice-bench starts its own NAA in its process.
#
# Files in OUT: perftest/<round>/<tool>-<size>.txt (client output of the successful run),
# rpc/<round>/{summary.txt,lowlevel.csv,middleware.csv,output.txt} (and naaice-bench's
# plots, and swnaa.log with NAAICE_SWNAA), timeline.txt. bench_report.py reads them.
set -u
# swnaa_start
. "$(dirname "${BASH_SOURCE[0]}")/../bench/swnaa.sh"
[ $# -ge 5 ] || {
    echo "usage: bench-guest.sh OUT ROUNDS SIZES TRANSPORT NAAICE_BENCH [args...]" >&2
    exit 2
}
out=$1 rounds=$2 sizes=$3 transport=$4
shift 4
dev=${RXE_VM_DEV:?run this inside tests/rxe-vm/run.sh}
addr=${RXE_VM_ADDR:?run this inside tests/rxe-vm/run.sh}
case "$transport" in
    verbs) transport_args=(--transport verbs) ;;
    soft) transport_args=(--transport soft) ;;
    *)
        echo "bench-guest: unknown transport $transport" >&2
        exit 2
        ;;
esac
mkdir -p "$out"
timeline=$out/timeline.txt
: > "$timeline"
failed=0
note() { echo "$(date +%s.%N) $*" >> "$timeline"; }

# Waits until a TCP port is listening (perftest's out-of-band exchange), at most ~10 s.
wait_listen() {
    local _
    for _ in $(seq 200); do
        ss -ltnH "sport = :$1" 2> /dev/null | grep -q . && return 0
        sleep 0.05
    done
    return 1
}

# Iterations for about the same time per size under emulation.
iterations() { # tool size
    local size=$2 n lo hi
    case "$1" in
        ib_write_lat | ib_send_lat) n=$((32 * 1048576 / size)) lo=20 hi=1000 ;;
        ib_write_bw) n=$((64 * 1048576 / size)) lo=20 hi=5000 ;;
        rpc_floor) n=$((32 * 1048576 / size)) lo=20 hi=2000 ;;
    esac
    [ $n -ge $lo ] || n=$lo
    [ $n -le $hi ] || n=$hi
    echo $n
}

port=18700
perftest() { # round tool size
    local round=$1 tool=$2 size=$3 n try rc server dir=$out/perftest/$1
    n=$(iterations "$tool" "$size")
    mkdir -p "$dir"
    for try in 1 2 3; do
        port=$((port + 1))
        timeout 300 "$tool" -d "$dev" -s "$size" -n "$n" -p $port > "$dir/.server" 2>&1 &
        server=$!
        if ! wait_listen $port; then
            kill $server 2> /dev/null
            wait $server 2> /dev/null
            rc=1
            echo "server did not listen" > "$dir/.client"
            continue
        fi
        timeout 300 "$tool" -d "$dev" -s "$size" -n "$n" -p $port "$addr" > "$dir/.client" 2>&1
        rc=$?
        wait $server 2> /dev/null
        # perftest also "succeeds" with inf/nan figures when its clock calibration failed.
        if [ $rc = 0 ] && grep -A1 -E '^ #bytes' "$dir/.client" | tail -n 1 | grep -qiE 'inf|nan'; then
            rc=1
        fi
        [ $rc != 0 ] || break
        note "retry $tool $size (try $try: status $rc: $(grep -m1 -iE 'r\^2|error|fail|can.t|inf' "$dir/.client"))"
    done
    if [ $rc = 0 ]; then
        mv "$dir/.client" "$dir/$tool-$size.txt"
        echo "  $tool $size B: $(grep -A1 -E '^ #bytes' "$dir/$tool-$size.txt" | tail -n 1 | tr -s ' \t' ' ')"
    else
        failed=1
        echo "  $tool $size B: FAILED after 3 tries:" >&2
        cat "$dir/.client" >&2
    fi
    rm -f "$dir/.client" "$dir/.server"
}

# The bare-verbs floor of an RPC of SIZE bytes (rpc_floor: server and client as two processes);
# retried like perftest, since a VM hiccup can make rdma_cm time out.
rpc_floor() { # round size
    local round=$1 size=$2 n try rc server dir=$out/perftest/$1
    n=$(iterations rpc_floor "$size")
    mkdir -p "$dir"
    for try in 1 2 3; do
        port=$((port + 1))
        timeout 300 "$RPC_FLOOR" -l "$addr" -p $port -s "$size" -r 5 > "$dir/.server" 2>&1 &
        server=$!
        # The server prints "listening" once rdma_listen returned.
        for _ in $(seq 200); do
            grep -q listening "$dir/.server" 2> /dev/null && break
            sleep 0.05
        done
        timeout 300 "$RPC_FLOOR" -c "$addr" -p $port -s "$size" -r 5 -n "$n" > "$dir/.client" 2>&1
        rc=$?
        [ $rc = 0 ] || kill $server 2> /dev/null
        wait $server 2> /dev/null
        [ $rc != 0 ] || break
        note "retry rpc_floor $size (try $try: status $rc: $(head -c 200 "$dir/.client"))"
    done
    if [ $rc = 0 ]; then
        mv "$dir/.client" "$dir/rpc_floor-$size.txt"
        echo "  rpc_floor $size B: $(tail -n 1 "$dir/rpc_floor-$size.txt")"
    else
        failed=1
        echo "  rpc_floor $size B: FAILED after 3 tries:" >&2
        cat "$dir/.client" "$dir/.server" >&2
    fi
    rm -f "$dir/.client" "$dir/.server"
}

perftest_round() {
    local round=$1 size
    note "perftest round $round start"
    echo "perftest round $round"
    for size in $sizes; do
        perftest "$round" ib_write_lat "$size"
        perftest "$round" ib_write_bw "$size"
        [ "$size" -gt 4096 ] || perftest "$round" ib_send_lat "$size"
        [ -z "${RPC_FLOOR:-}" ] || [ "$transport" != verbs ] || rpc_floor "$round" "$size"
    done
    note "perftest round $round end"
}

# The NAA's wait policy: naaice-bench's --wait or --busy-poll-us, if given.
naa_wait=()
args=("$@")
for i in "${!args[@]}"; do
    case "${args[$i]}" in
        --wait) naa_wait=(--wait "${args[$((i + 1))]:-}") ;;
        --wait=*) naa_wait=(--wait "${args[$i]#--wait=}") ;;
        --busy-poll-us | --busy-poll) naa_wait=(--wait "spin:${args[$((i + 1))]:-}") ;;
    esac
done

# Starts NAAICE_SWNAA for one round; sets naa_pid and naa_args (empty if it did not start).
start_naa() { # dir
    naa_pid= naa_args=()
    swnaa_start "$NAAICE_SWNAA" "$1/swnaa.log" --transport "$transport" --address "$addr" \
        --max-connections 16 "${naa_wait[@]}" || return 1
    naa_pid=$swnaa_pid
    naa_args=(--naa "$addr:$swnaa_port" --naa-pid "$naa_pid")
}

rpc_round() { # round command...
    local round=$1 rc dir=$out/rpc/$1 where
    shift
    mkdir -p "$dir"
    note "naaice-bench round $round start"
    if [ -n "${NAAICE_SWNAA:-}" ]; then
        where="NAA in its own process"
        if ! start_naa "$dir"; then
            failed=1
            note "naaice-bench round $round end (naaice-swnaa did not start)"
            return
        fi
    else
        where="NAA in naaice-bench's process"
        naa_args=()
        [ "$transport" != verbs ] || naa_args=(--address "$addr")
    fi
    echo "naaice-bench round $round ($transport, $where)"
    "$@" "${transport_args[@]}" "${naa_args[@]}" --out "$dir" --summary "$dir/summary.txt" \
        > "$dir/output.txt" 2>&1
    rc=$?
    if [ -n "${naa_pid:-}" ]; then
        kill -TERM "$naa_pid" 2> /dev/null
        if ! wait "$naa_pid"; then
            echo "  naaice-swnaa did not stop cleanly on SIGTERM:" >&2
            tail -n 20 "$dir/swnaa.log" >&2
            [ $rc != 0 ] || rc=1
        fi
        naa_pid=
    fi
    note "naaice-bench round $round end (status $rc)"
    if [ $rc != 0 ]; then
        failed=1
        echo "  naaice-bench FAILED with status $rc:" >&2
        tail -n 30 "$dir/output.txt" >&2
    else
        echo "  done: $(($(grep -c . "$dir/lowlevel.csv") - 1)) fresh-connection samples in the reference CSV"
    fi
}

perftest_round 0
for round in $(seq "$rounds"); do
    rpc_round "$round" "$@"
    perftest_round "$round"
done
exit $failed
