#!/usr/bin/env bash
# bench.sh -- the RPC benchmark on Soft-RoCE: naaice-bench over verbs against perftest
# (ib_write_lat, ib_write_bw) in ONE VM run, then the ratios.
#
#   tests/rxe-vm/bench.sh [--rounds N] [--sizes "S..."] [--max-size BYTES] [--transport verbs|soft]
#                         [--bin PATH] [--swnaa PATH] [--in-process-naa] [--out DIR] [--no-floor]
#                         [-- naaice-bench options...]
#
#   --rounds     naaice-bench rounds, each between two perftest rounds (default 2)
#   --sizes      perftest sizes; the ratios use the sizes both measured (default: 64 and 4096,
#                naaice-bench's small sizes, and its reference sizes from 1 MiB to --max-size)
#   --max-size   largest naaice-bench size (default 4194304; perftest allows up to 8 MiB)
#   --transport  verbs (default) or soft (the software transport inside the VM: only to try the
#                pipeline, its ratios mean nothing)
#   --bin        a prebuilt naaice-bench binary (default: built with
#                cargo build --release -p naaice-bench -p naaice-swnaa [--features ...verbs])
#   --swnaa      a prebuilt naaice-swnaa binary: the NAA, started as its own process in the VM
#                for every naaice-bench round, as perftest's servers run and as users run an
#                NAA; naaice-bench reads its CPU time per RPC from its process (--naa-pid).
#                A --wait or --busy-poll-us among the naaice-bench options applies to it too.
#                Default: built with naaice-bench (from --bin's build if --bin is given:
#                the naaice-swnaa beside it)
#   --in-process-naa  naaice-bench starts its own NAA in its process instead (its other
#                threads' CPU time is then the NAA's)
#   --out        result directory (default target/rxe-bench/<UTC time>)
#   --no-floor   skip the bare-verbs floor (floor/rpc_floor.c: the RPC's verbs operations and
#                nothing else, both sides busy-polling; built with cc against Debian's
#                libibverbs-dev and librdmacm-dev or their equivalents), which every perftest
#                round otherwise runs for every size
#
# Prints the report of bench_report.py (also in OUT/report.txt). Same environment as run.sh;
# the VM timeout defaults to 1800 s here.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

rounds=2
sizes=
max_size=4194304
transport=verbs
bin=
swnaa=
in_process=0
out=
floor=1
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds)
            rounds=$2
            shift
            ;;
        --sizes)
            sizes=$2
            shift
            ;;
        --max-size)
            max_size=$2
            shift
            ;;
        --transport)
            transport=$2
            shift
            ;;
        --bin)
            bin=$2
            shift
            ;;
        --swnaa)
            swnaa=$2
            shift
            ;;
        --in-process-naa)
            in_process=1
            ;;
        --out)
            out=$2
            shift
            ;;
        --no-floor)
            floor=0
            ;;
        -h | --help)
            sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        --)
            shift
            break
            ;;
        *)
            echo "bench.sh: unknown option $1 (see --help)" >&2
            exit 2
            ;;
    esac
    shift
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "bench.sh: --rounds needs a positive number" >&2; exit 2; }
[[ "$max_size" =~ ^[1-9][0-9]*$ ]] || { echo "bench.sh: --max-size needs a positive number" >&2; exit 2; }
case "$transport" in verbs | soft) ;; *)
    echo "bench.sh: --transport is verbs or soft" >&2
    exit 2
    ;;
esac
command -v python3 > /dev/null || { echo "bench.sh: python3 is needed for the report" >&2; exit 2; }

if [ -z "$sizes" ]; then
    # naaice-bench's extra small sizes, and its reference sizes (spec 8.1: s(0) = 1,
    # s(k+1) = round_half_even(1.5 s(k))) from 1 MiB up to --max-size (and perftest's limit,
    # 8 MiB).
    sizes=$(python3 -c '
import sys
top = min(int(sys.argv[1]), 8 << 20)
s, out = 1, [n for n in (64, 4096) if n <= top]
while s < 1 << 30:
    if s <= top and s >= 1 << 20:
        out.append(s)
    s = round(1.5 * s)
print(" ".join(map(str, sorted(out))))' "$max_size")
fi

if [ -z "$bin" ]; then
    features=()
    [ "$transport" = soft ] || features=(--features naaice-bench/verbs,naaice-swnaa/verbs)
    echo "bench.sh: building naaice-bench and naaice-swnaa (${features[*]:-software transport})" >&2
    built=$(cd "$ROOT" && cargo build --release -p naaice-bench -p naaice-swnaa "${features[@]}" \
        --message-format=json-render-diagnostics \
        | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        print(m["target"]["name"], m["executable"])')
    bin=$(sed -n 's/^naaice-bench //p' <<< "$built")
    [ -n "$swnaa" ] || swnaa=$(sed -n 's/^naaice-swnaa //p' <<< "$built")
    [ -n "$bin" ] || { echo "bench.sh: cargo built no naaice-bench executable" >&2; exit 1; }
fi
[ -x "$bin" ] || { echo "bench.sh: $bin is not an executable" >&2; exit 2; }
if [ "$in_process" = 1 ]; then
    swnaa=
else
    swnaa=${swnaa:-$(dirname "$bin")/naaice-swnaa}
    [ -x "$swnaa" ] || {
        echo "bench.sh: no naaice-swnaa at $swnaa (give --swnaa PATH, or --in-process-naa)" >&2
        exit 2
    }
    swnaa=$(realpath "$swnaa")
fi

out=${out:-$ROOT/target/rxe-bench/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
echo "bench.sh: results in $out; sizes: $sizes" >&2

floor_bin=
if [ "$floor" = 1 ] && [ "$transport" = verbs ]; then
    floor_bin=$out/rpc_floor
    if ! "${CC:-cc}" -O2 -std=c11 -Wall -Wextra -Werror -o "$floor_bin" "$HERE/floor/rpc_floor.c" \
        -libverbs -lrdmacm; then
        echo "bench.sh: could not build the verbs floor (it needs a C compiler and the libibverbs" \
            "and librdmacm headers, e.g. Debian's libibverbs-dev librdmacm-dev); --no-floor skips it" >&2
        exit 2
    fi
fi

start=$SECONDS
status=0
bin=$(realpath "$bin")
# The results and the binary must be visible in the VM (the repository is shared anyway).
share="$out:$(dirname "$bin")"
[ -z "$swnaa" ] || share="$share:$(dirname "$swnaa")"
RPC_FLOOR=$floor_bin NAAICE_SWNAA=$swnaa \
    RXE_VM_PASS_ENV="RPC_FLOOR NAAICE_SWNAA${RXE_VM_PASS_ENV:+ $RXE_VM_PASS_ENV}" \
    RXE_VM_TIMEOUT=${RXE_VM_TIMEOUT:-1800} RXE_VM_SHARE="$share${RXE_VM_SHARE:+:$RXE_VM_SHARE}" \
    "$HERE/run.sh" "$HERE/bench-guest.sh" "$out" "$rounds" "$sizes" "$transport" "$bin" \
    --max-size "$max_size" "$@" || status=$?
echo "bench.sh: VM run took $((SECONDS - start)) s (status $status)" >&2
echo
if ! python3 "$HERE/bench_report.py" "$out" && [ "$status" = 0 ]; then status=1; fi
exit "$status"
