#!/usr/bin/env bash
# CI stage "Slurm and MPI": the C MPI example (host/capi/examples/mpi_offload.c) with Debian's
# Open MPI against 2 software NAAs, then the same under a real single-node Slurm (slurm-wlm +
# munge) as a batch job holding NAA licenses. Checks that every run is verified by rank 0 and
# that both NAAs served ranks. Needs root (munge, slurmd) and the Debian mirror on first run.
#
# Usage: tests/cluster/ci.sh        (from anywhere; prints the time of each part)
set -euo pipefail
cd "$(dirname "$0")/../.."
. .ci/lib.sh
repo=$PWD

if [ "$(id -u)" != 0 ]; then
    echo "tests/cluster/ci.sh: needs root (munge and slurmd run as root here)" >&2
    exit 1
fi

start=$SECONDS

work=$(mktemp -d "${TMPDIR:-/tmp}/naaice-cluster.XXXXXX")
chmod 755 "$work" # the munge user reaches its key and log below it
cleanup() {
    stop_naas
    "$repo/tests/cluster/slurm.sh" stop "$work/slurm" || true
    rm -rf "$work"
}
trap cleanup EXIT

echo "--- packages"
apt_install slurm-wlm munge openmpi-bin libopenmpi-dev
mpirun --version | head -n 1
slurmctld -V
lap packages

echo "--- build: C library (install.sh + pkg-config), naaice-swnaa, the MPI example (mpicc)"
# Debug builds (the test step has built them already): this stage checks behaviour, not speed.
cargo build --locked -p naaice-capi
cargo build --locked --bin naaice-swnaa --bin naaice-bench   # install.sh installs both
target=$(cargo metadata --format-version 1 --no-deps |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
NAAICE_LIB_DIR="$target/debug" host/capi/install.sh "$work/prefix" >/dev/null
swnaa="$target/debug/naaice-swnaa"
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" LD_LIBRARY_PATH="$work/prefix/lib"
# shellcheck disable=SC2046
mpicc -Wall -Wextra -Werror -O2 host/capi/examples/mpi_offload.c \
    $(pkg-config --cflags --libs naaice) -o "$work/mpi_offload"
lap build

echo "--- slurm/naaice-spec (inventory + licenses -> NAA_SPEC)"
spec_tool="$repo/slurm/naaice-spec"
cat >"$work/fixture" <<'INV'
# LICENSE ADDRESS PORT FN_CODE PARAM_COUNT
naa   10.0.0.1  12345 1  1
naa   10.0.0.2  12345 1  1
naa   10.0.0.3  12345 1  1
naa07 fe80::7   12346 10 2
INV
expect() {
    local want=$1
    shift
    local got
    got=$("$spec_tool" --inventory "$work/fixture" "$@")
    [ "$got" = "$want" ] || { echo "naaice-spec $*: got $got, want $want" >&2; exit 1; }
}
expect "10.0.0.1:12345:1:1,10.0.0.2:12345:1:1,10.0.0.3:12345:1:1" --licenses naa:3 --job 5
expect "10.0.0.3:12345:1:1,10.0.0.1:12345:1:1" --licenses naa:2 --job 5
expect "10.0.0.2:12345:1:1,[fe80::7]:12346:10:2" --licenses "naa:1,naa07:1,other:9" --job 1
if "$spec_tool" --inventory "$work/fixture" --licenses other:1 2>/dev/null; then
    echo "naaice-spec must fail without a license of the inventory" >&2
    exit 1
fi
echo "naaice-spec: ok"

# Both NAAs served ranks: each log shows at least one client.
served() {
    local log n
    for log in "$@"; do
        n=$(grep -c "client connected" "$log" || true)
        echo "$(basename "$log"): $n connections"
        [ "$n" -ge 1 ] || { echo "$log served no rank:" >&2; cat "$log" >&2; exit 1; }
    done
}

echo "--- MPI: mpirun -np 4 over 2 software NAAs"
ports=()
for i in 1 2; do
    ports+=("$(free_port)")
    "$swnaa" --address 127.0.0.1 --port "${ports[-1]}" --log info >"$work/mpi-naa$i.log" 2>&1 &
    naa_pids+=($!)
done
export NAAICE_TRANSPORT=soft
export NAA_SPEC="127.0.0.1:${ports[0]}:1:1,127.0.0.1:${ports[1]}:1:1"
# As root Open MPI needs --allow-run-as-root; --oversubscribe runs 4 ranks on 2 cores.
mpirun --allow-run-as-root --oversubscribe -np 4 \
    -x NAAICE_TRANSPORT -x NAA_SPEC -x LD_LIBRARY_PATH \
    "$work/mpi_offload" 1000000 | tee "$work/mpi.out"
grep -q "verified" "$work/mpi.out"
for pid in "${naa_pids[@]}"; do kill "$pid"; wait "$pid" || true; done
naa_pids=()
served "$work/mpi-naa1.log" "$work/mpi-naa2.log"
unset NAA_SPEC
lap mpi

echo "--- Slurm: single-node cluster, sbatch -n 4 -L naa:2, srun --mpi=pmix -n 4"
NAAICE_SLURM_NAAS=2 tests/cluster/slurm.sh start "$work/slurm"
export SLURM_CONF="$work/slurm/slurm.conf"
mkdir -p "$work/job"
{
    echo "# LICENSE ADDRESS PORT FN_CODE PARAM_COUNT"
    echo "naa 127.0.0.1 $(free_port) 1 1"
    echo "naa 127.0.0.1 $(free_port) 1 1"
} >"$work/naas"
scontrol show lic
export NAAICE_INVENTORY="$work/naas" NAAICE_SWNAA="$swnaa" NAAICE_APP="$work/mpi_offload" \
    NAAICE_SPEC_TOOL="$spec_tool" NAAICE_JOB_DIR="$work/job"
status=0
timeout 300 sbatch --wait -n 4 -L naa:2 -t 5 -o "$work/job/out" tests/cluster/job.sh || status=$?
cat "$work/job/out"
[ "$status" = 0 ] || { echo "the Slurm job failed ($status)" >&2; exit 1; }
grep -q "verified" "$work/job/out"
served "$work/job/naa1.log" "$work/job/naa2.log"
lap slurm

echo "cluster stage: ${timings[*]}; total $((SECONDS - start)) s"
