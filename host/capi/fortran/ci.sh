#!/usr/bin/env bash
# CI stage "Fortran": installs the C library with host/capi/install.sh (which ships the
# Fortran module source naaice.f90), then builds the Fortran examples against the installed
# library through pkg-config, with gfortran and with mpif90, and runs them: offload.f90
# offloads array sections in place (built-in kernel 1 on a naaice-swnaa process; a kernel
# written in Fortran in local mode) and checks every element; mpi_offload.f90 runs under
# mpirun -np 4 against two naaice-swnaa processes, rank 0 summing the wrong bytes.
# Needs root or sudo for apt-get on first run (gfortran, Open MPI).
#
# Usage: host/capi/fortran/ci.sh        (from anywhere)
set -euo pipefail
cd "$(dirname "$0")/../../.."
. .ci/lib.sh
start=$SECONDS

workdir fortran

echo "--- packages"
apt_install gfortran openmpi-bin libopenmpi-dev pkg-config
gfortran --version | head -n 1

echo "--- build: the C library installed by install.sh, the examples with gfortran and mpif90"
# Debug builds (CI's test step has built them already): this stage checks behaviour, not speed.
cargo build --locked -p naaice-capi -p naaice-swnaa -p naaice-bench -p naaice-info
target=$(cargo metadata --format-version 1 --no-deps |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
NAAICE_LIB_DIR="$target/debug" host/capi/install.sh "$work/prefix" >/dev/null
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" LD_LIBRARY_PATH="$work/prefix/lib"
module=$(pkg-config --variable=fortran_module naaice)
[ -f "$module" ] || { echo "pkg-config names no installed Fortran module: '$module'" >&2; exit 1; }
flags=(-std=f2008 -Wall -Werror -Wno-unused-dummy-argument -fcheck=all)
cd "$work"
# shellcheck disable=SC2046
gfortran "${flags[@]}" "$module" "$OLDPWD/host/capi/fortran/offload.f90" \
    $(pkg-config --cflags --libs naaice) -o offload
# The MPI example: Open MPI's `mpi` module is not f2008-clean, so no -std there.
# shellcheck disable=SC2046
mpif90 -Wall -Werror -Wno-unused-dummy-argument "$module" \
    "$OLDPWD/host/capi/fortran/mpi_offload.f90" $(pkg-config --cflags --libs naaice) -o mpi_offload
cd "$OLDPWD"

echo "--- run: local mode, then against naaice-swnaa, then mpirun -np 4 over 2 naaice-swnaa"
export NAAICE_TRANSPORT=soft
NAA_SPEC=local:1:1,local:20:1 "$work/offload"
ports=()
for i in 1 2; do
    ports+=("$(free_port)")
    "$work/prefix/bin/naaice-swnaa" --address 127.0.0.1 --port "${ports[-1]}" \
        >"$work/naa$i.log" 2>&1 &
    naa_pids+=($!)
done
NAA_SPEC="127.0.0.1:${ports[0]}:1:1,local:20:1" "$work/offload"
export NAA_SPEC="127.0.0.1:${ports[0]}:1:1,127.0.0.1:${ports[1]}:1:1"
root=()
[ "$(id -u)" != 0 ] || root=(--allow-run-as-root)
mpirun "${root[@]}" --oversubscribe -np 4 -x NAAICE_TRANSPORT -x NAA_SPEC -x LD_LIBRARY_PATH \
    "$work/mpi_offload" | tee "$work/mpi.out"
grep -q "mpi_offload (Fortran): 4 ranks, 0 wrong bytes" "$work/mpi.out"
echo "Fortran stage: $((SECONDS - start)) s"
