#!/bin/bash
# compare-guest.sh -- runs INSIDE the Soft-RoCE VM (compare.sh starts it through run.sh):
#
#   compare-guest.sh OUT ROUNDS "SIZES" ITERS FN REF_CLIENT RS_CLIENT SWNAA REF_NAA
#
# The C reference against naaice-rs on real verbs (rxe0, RXE_VM_ADDR), all in one VM run.
# REF_CLIENT and RS_CLIENT are create_time.c built against the reference's library and
# against libnaaice_ap2; SWNAA is naaice-swnaa (verbs-capable), REF_NAA the reference's
# examples/naaice_server (it listens on the fixed port 12345, every address).
#
# For every round 1..ROUNDS and every size in SIZES, both NAAs in turn (naaice-swnaa first in
# odd rounds, the reference's first in even ones) are started FRESH, and both clients in turn
# (naaice-rs's first in rounds 1, 2, 5, 6, ..., the reference's first in rounds 3, 4, 7, 8,
# ...) run "create_time ITERS SIZE FN ADDR:PORT" against it; then the NAA is stopped. The
# first client on an NAA meets it fresh: its first iteration's first_us is the first RPC of a
# freshly started NAA.
#
# Files in OUT: runs.txt (one line per client run: "round size naa client position rc"),
# r<round>/<size>/<naa>.<client>.out and .err (create_time's stdout and stderr),
# r<round>/<size>/<naa>.log (the NAA's output). compare_report.py reads them.
#
# Environment: CLIENT_TIMEOUT (seconds per client run, default 10; a 10-iteration run takes 1-3 s), SETTLE (seconds between
# an NAA's start and its first client, default 0.5), NAA_READY_TIMEOUT (default 15).
set -u
# swnaa_start
. "$(dirname "${BASH_SOURCE[0]}")/../../bench/swnaa.sh"
[ $# -eq 9 ] || {
    echo "usage: compare-guest.sh OUT ROUNDS SIZES ITERS FN REF_CLIENT RS_CLIENT SWNAA REF_NAA" >&2
    exit 2
}
out=$1 rounds=$2 sizes=$3 iters=$4 fn=$5 ref_client=$6 rs_client=$7 swnaa=$8 ref_naa=$9
addr=${RXE_VM_ADDR:?run this inside tests/rxe-vm/run.sh}
client_timeout=${CLIENT_TIMEOUT:-10}
settle=${SETTLE:-0.5}
ready_timeout=${NAA_READY_TIMEOUT:-15}
ref_port=12345
mkdir -p "$out"
: > "$out/runs.txt"
failed=0

# The reference NAA's rdma_cm listener on port 12345 (rdma(8) of iproute2).
ref_listening() { rdma res show cm_id 2> /dev/null | grep -q "LISTEN.*:$ref_port\( \|$\)"; }

naa_pid= naa_port=
start_naa() { # naa log
    local naa=$1 log=$2 _
    naa_pid= naa_port=
    case "$naa" in
        swnaa)
            swnaa_start "$swnaa" "$log" --transport verbs --address "$addr" || return 1
            naa_pid=$swnaa_pid naa_port=$swnaa_port
            ;;
        ref)
            "$ref_naa" > "$log" 2>&1 &
            naa_pid=$!
            for _ in $(seq $((ready_timeout * 20))); do
                if ref_listening; then
                    naa_port=$ref_port
                    break
                fi
                kill -0 "$naa_pid" 2> /dev/null || break
                sleep 0.05
            done
            if [ -z "$naa_port" ]; then
                echo "compare-guest: the reference NAA did not start listening" >&2
                cat "$log" >&2
                stop_naa
                return 1
            fi
            ;;
    esac
    sleep "$settle"
}

stop_naa() {
    local _
    [ -n "$naa_pid" ] || return 0
    kill -TERM "$naa_pid" 2> /dev/null
    for _ in $(seq 60); do
        kill -0 "$naa_pid" 2> /dev/null || break
        sleep 0.05
    done
    if kill -0 "$naa_pid" 2> /dev/null; then
        echo "compare-guest: NAA pid $naa_pid did not stop on SIGTERM in 3 s; SIGKILL" >&2
        kill -KILL "$naa_pid" 2> /dev/null
    fi
    wait "$naa_pid" 2> /dev/null
    naa_pid=
    # The reference's port is fixed: wait until the kernel has released it.
    for _ in $(seq 100); do
        ref_listening || break
        sleep 0.05
    done
}
trap stop_naa EXIT

for round in $(seq "$rounds"); do
    if [ $((round % 2)) = 1 ]; then naas="swnaa ref"; else naas="ref swnaa"; fi
    if [ $(((round - 1) / 2 % 2)) = 0 ]; then clients="rs ref"; else clients="ref rs"; fi
    for size in $sizes; do
        dir=$out/r$round/$size
        mkdir -p "$dir"
        for naa in $naas; do
            if ! start_naa "$naa" "$dir/$naa.log"; then
                failed=1
                continue
            fi
            pos=0
            for client in $clients; do
                pos=$((pos + 1))
                if [ "$client" = rs ]; then bin=$rs_client; else bin=$ref_client; fi
                NAAICE_TRANSPORT=verbs timeout "$client_timeout" \
                    "$bin" "$iters" "$size" "$fn" "$addr:$naa_port" \
                    > "$dir/$naa.$client.out" 2> "$dir/$naa.$client.err"
                rc=$?
                echo "$round $size $naa $client $pos $rc" >> "$out/runs.txt"
                echo "round $round size $size naa $naa client $client (#$pos): rc $rc," \
                    "$(tail -n 1 "$dir/$naa.$client.out")" >&2
            done
            stop_naa
        done
    done
done
exit $failed
