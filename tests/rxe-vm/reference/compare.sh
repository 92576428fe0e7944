#!/usr/bin/env bash
# compare.sh -- naaice-rs against the NAAICE C reference on Soft-RoCE (real verbs in the VM of
# tests/rxe-vm), in ONE VM run:
#
#   (a) naa_create (connect, memory registration, MRSP) of naaice-rs's client
#       (libnaaice_ap2) against the reference's client, against the same NAA: naaice-swnaa
#       and the reference's software NAA (examples/naaice_server);
#   (b) the first RPC (naa_invoke + naa_wait) on a freshly started naaice-swnaa against one on
#       a freshly started reference NAA, with both clients.
#
#   tests/rxe-vm/reference/compare.sh --ref DIR --microlog DIR [options]
#   tests/rxe-vm/reference/compare.sh --ref-build DIR [options]
#
#   --ref DIR        the reference's source tree (github.com/naaice-greenhpc/naa-communication-library;
#                    lib/naaice_ap2.h, examples/naaice_server.c); env NAAICE_REF_SRC
#   --microlog DIR   microlog v7.0.3 sources (github.com/an-dr/microlog, tag v7.0.3), which the
#                    reference's CMake would fetch (FetchContent "ulog"); passed as
#                    FETCHCONTENT_SOURCE_DIR_ULOG, nothing is downloaded; env NAAICE_REF_MICROLOG
#   --ref-build DIR  a configured and built reference (cmake build directory with
#                    lib/libnaaice_middleware.a, lib/libnaaice_low_level.a,
#                    examples/naaice_server); default: built here into
#                    target/rxe-ref-compare/ref-build with -DCMAKE_BUILD_TYPE=Release
#                    -DNAAICE_DISABLE_LOGGING=ON (or the default log level where that option
#                    does not build); env NAAICE_REF_BUILD
#   --swnaa BIN      a prebuilt naaice-swnaa with the verbs transport, and
#   --lib SO         a prebuilt libnaaice_ap2.so (default for both: cargo build --release
#                    -p naaice-swnaa -p naaice-capi --features naaice-swnaa/verbs)
#   --rounds N       rounds (default 4; each: both NAAs fresh, both clients on each)
#   --sizes "S..."   parameter sizes in bytes (default "64 4096")
#   --iters N        naa_create + first RPC + naa_finalize iterations per client run (default 10)
#   --fn N           function code (default 3: the empty kernel of both software NAAs)
#   --out DIR        result directory (default target/rxe-ref-compare/<UTC time>)
#   --no-wait        do not wait for other qemu-system processes to end before the VM run
#
# Nothing is fetched: without --ref (and --microlog) or --ref-build it says what to pass.
# Both clients are create_time.c (in this directory), compiled unchanged against the
# reference's naaice_ap2.h and against host/capi/include/naaice_ap2.h; the binaries, the
# library and the NAAs are copied into OUT/bin, so a concurrent build cannot change them during
# the run. compare-guest.sh runs the rounds in the VM; compare_report.py prints the tables
# (also OUT/report.txt). Same environment as tests/rxe-vm/run.sh (set RXE_VM_CACHE to the
# image cache, e.g. target/rxe-vm); the VM timeout defaults to 900 s. Needs cmake, a C
# compiler, libibverbs-dev and librdmacm-dev (Debian names), readelf and python3.
#
# A client run that fails or hangs (compare-guest.sh's CLIENT_TIMEOUT, default 10 s) is counted
# as failed in the report; the iterations it completed still count. (In the first runs, the
# reference NAA without logging stopped answering after 1-10 connections in about half of its
# fresh starts, with either client, and the reference client once failed in naa_wait on a
# completion-order race; both are counted, not retried.)
#
# Under emulation absolute times are ~100x those of hardware and drift with host load: only
# the ratios of the same run mean something.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)

ref_src=${NAAICE_REF_SRC:-}
microlog=${NAAICE_REF_MICROLOG:-}
ref_build=${NAAICE_REF_BUILD:-}
swnaa= lib= rounds=4 sizes="64 4096" iters=10 fn=3 out= wait_vm=1
while [ $# -gt 0 ]; do
    case "$1" in
        --ref) ref_src=$2; shift 2 ;;
        --microlog) microlog=$2; shift 2 ;;
        --ref-build) ref_build=$2; shift 2 ;;
        --swnaa) swnaa=$2; shift 2 ;;
        --lib) lib=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --sizes) sizes=$2; shift 2 ;;
        --iters) iters=$2; shift 2 ;;
        --fn) fn=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --no-wait) wait_vm=0; shift ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "compare.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
die() { echo "compare.sh: $*" >&2; exit 2; }

if [ -z "$ref_src" ] && [ -z "$ref_build" ]; then
    cat >&2 << 'EOF'
compare.sh: no C reference given; nothing is fetched. Pass its sources and microlog's:
  git clone https://github.com/naaice-greenhpc/naa-communication-library REF
  git clone -b v7.0.3 https://github.com/an-dr/microlog MICROLOG
  tests/rxe-vm/reference/compare.sh --ref REF --microlog MICROLOG
(or NAAICE_REF_SRC and NAAICE_REF_MICROLOG), or an already built reference with --ref-build.
EOF
    exit 2
fi

out=${out:-$ROOT/target/rxe-ref-compare/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out/bin/lib"
out=$(cd "$out" && pwd)
bin=$out/bin

# 1. The reference: build it unless given built.
if [ -z "$ref_build" ]; then
    [ -f "$ref_src/lib/naaice_ap2.h" ] && [ -f "$ref_src/examples/naaice_server.c" ] ||
        die "--ref $ref_src: no lib/naaice_ap2.h and examples/naaice_server.c there"
    [ -f "$microlog/include/ulog.h" ] || die "--microlog '$microlog': no include/ulog.h there"
    ref_src=$(cd "$ref_src" && pwd) microlog=$(cd "$microlog" && pwd)
    ref_build=$ROOT/target/rxe-ref-compare/ref-build
    common=(-S "$ref_src" -DCMAKE_BUILD_TYPE=Release -DFETCHCONTENT_SOURCE_DIR_ULOG="$microlog"
        -DFETCHCONTENT_FULLY_DISCONNECTED=ON)
    echo "compare.sh: building the C reference into $ref_build" >&2
    if ! { nice -n 5 cmake "${common[@]}" -B "$ref_build" -DNAAICE_DISABLE_LOGGING=ON > "$out/ref-build.log" 2>&1 &&
        nice -n 5 cmake --build "$ref_build" -j "$(nproc)" --target naaice_middleware naaice_server \
            >> "$out/ref-build.log" 2>&1; }; then
        echo "compare.sh: the reference did not build with NAAICE_DISABLE_LOGGING=ON; default log level" >&2
        rm -rf "$ref_build"
        nice -n 5 cmake "${common[@]}" -B "$ref_build" >> "$out/ref-build.log" 2>&1 &&
            nice -n 5 cmake --build "$ref_build" -j "$(nproc)" --target naaice_middleware naaice_server \
                >> "$out/ref-build.log" 2>&1 ||
            { tail -n 30 "$out/ref-build.log" >&2; die "the C reference did not build (log: $out/ref-build.log)"; }
    fi
fi
ref_build=$(cd "$ref_build" && pwd)
cache=$ref_build/CMakeCache.txt
[ -f "$cache" ] || die "--ref-build $ref_build: no CMakeCache.txt"
cache_get() { sed -n "s/^$1:[A-Z]*=//p" "$cache" | head -n 1; }
[ -n "$ref_src" ] || ref_src=$(cache_get CMAKE_HOME_DIRECTORY)
[ -n "$microlog" ] || microlog=$(cache_get FETCHCONTENT_SOURCE_DIR_ULOG)
[ -n "$microlog" ] || microlog=$(cache_get ulog_SOURCE_DIR)
[ -f "$microlog/include/ulog.h" ] || die "no microlog headers (include/ulog.h) in '$microlog': pass --microlog"
for f in lib/libnaaice_middleware.a lib/libnaaice_low_level.a examples/naaice_server; do
    [ -e "$ref_build/$f" ] || die "--ref-build $ref_build: no $f"
done
ulog_defs=()
case "$(cache_get NAAICE_DISABLE_LOGGING)" in
    ON | TRUE | 1 | YES | on | true) ulog_defs=(-DULOG_BUILD_DISABLED=1) ;;
esac
cp "$ref_build/examples/naaice_server" "$bin/ref-naa"

# 2. naaice-rs: naaice-swnaa with verbs and libnaaice_ap2.
if [ -z "$swnaa" ] || [ -z "$lib" ]; then
    echo "compare.sh: building naaice-swnaa and libnaaice_ap2 (release, verbs)" >&2
    built=$(cd "$ROOT" && CARGO_INCREMENTAL=0 nice -n 5 cargo build --release -p naaice-swnaa -p naaice-capi \
        --features naaice-swnaa/verbs --message-format=json-render-diagnostics |
        python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact":
        continue
    if m.get("executable"):
        print(m["target"]["name"], m["executable"])
    for f in m.get("filenames", []):
        if f.endswith("/libnaaice_ap2.so"):
            print("libnaaice_ap2", f)')
    [ -n "$swnaa" ] || swnaa=$(sed -n 's/^naaice-swnaa //p' <<< "$built")
    [ -n "$lib" ] || lib=$(sed -n 's/^libnaaice_ap2 //p' <<< "$built")
fi
[ -x "$swnaa" ] || die "naaice-swnaa '$swnaa' is not an executable"
[ -f "$lib" ] || die "libnaaice_ap2 '$lib' is not a file"
cp "$swnaa" "$bin/naaice-swnaa"
version=$("$bin/naaice-swnaa" --version)
grep -q verbs <<< "$version" || die "$swnaa has no verbs transport: $version"
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
soname=${soname:-libnaaice_ap2.so}
cp "$lib" "$bin/lib/$soname"
[ "$soname" = libnaaice_ap2.so ] || ln -sf "$soname" "$bin/lib/libnaaice_ap2.so"

# 3. The two clients: the same source against each header and library.
cc=${CC:-cc}
"$cc" -O2 -Wall -Wextra -o "$bin/create_time_ref" "$HERE/create_time.c" \
    -I "$ref_src/lib" -I "$ref_build/lib" -I "$microlog/include" "${ulog_defs[@]}" \
    "$ref_build/lib/libnaaice_middleware.a" "$ref_build/lib/libnaaice_low_level.a" \
    -libverbs -lrdmacm -lpthread
"$cc" -O2 -Wall -Wextra -o "$bin/create_time_rs" "$HERE/create_time.c" \
    -I "$ROOT/host/capi/include" -L "$bin/lib" -lnaaice_ap2 -Wl,-rpath,"$bin/lib"
{
    echo "naaice-rs: $(git -C "$ROOT" rev-parse --short HEAD 2> /dev/null || echo '?'), $version"
    echo "reference: $(git -C "$ref_src" rev-parse --short HEAD 2> /dev/null || echo "$ref_src"), build $ref_build"
    echo "rounds $rounds, sizes $sizes, iterations $iters, function code $fn"
} | tee "$out/info.txt" >&2

# 4. One VM run (the VM host is shared: wait for other VMs first).
if [ "$wait_vm" = 1 ]; then
    while pgrep -f qemu-system > /dev/null; do
        echo "compare.sh: another qemu-system runs; waiting" >&2
        sleep 10
    done
fi
rc=0
RXE_VM_TIMEOUT=${RXE_VM_TIMEOUT:-900} "$HERE/../run.sh" "$HERE/compare-guest.sh" "$out" "$rounds" "$sizes" \
    "$iters" "$fn" "$bin/create_time_ref" "$bin/create_time_rs" "$bin/naaice-swnaa" "$bin/ref-naa" ||
    rc=$?
[ "$rc" = 0 ] || echo "compare.sh: the VM run ended with status $rc" >&2
[ -s "$out/runs.txt" ] || exit 1
echo "results: $out" >&2
cat "$out/info.txt"
python3 "$HERE/compare_report.py" "$out"
exit "$rc"
