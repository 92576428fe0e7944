#!/usr/bin/env bash
# CI stage "Python bindings": builds the abi3 wheel of the naaice Python package with maturin
# for manylinux_2_28 (glibc 2.28: RHEL/Rocky 8 and newer; linked by zig against glibc 2.28,
# checked), installs it into a virtual environment with pinned NumPy, pytest and mpi4py, runs the pytest
# suite and the NumPy example (local mode and a software NAA started from Python), runs the
# mpi4py example under mpirun -np 4 against two naaice-swnaa processes (rank 0 checks every
# rank's data; both NAAs must have served ranks), and measures the binding's CPU time per
# small RPC against naaice-bench's steady 64 B figure in the same run (bench_overhead.py).
# Needs root or sudo for apt-get on first run (python3-venv, Open MPI).
#
# Usage: host/python/ci.sh        (from anywhere; prints the time of each part)
set -euo pipefail
cd "$(dirname "$0")/../.."
. .ci/lib.sh

start=$SECONDS

workdir python

echo "--- packages"
apt_install python3 python3-venv openmpi-bin binutils
# The interpreter CI tests with: Debian's (3.11). PYTHON overrides.
python=${PYTHON:-/usr/bin/python3}
"$python" --version
# Absolute: maturin hands zig to cmake as "<interpreter> -m ziglang", and cmake runs it
# from its own build directory.
venv=$PWD/target/python-ci-venv
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
# Pinned: the versions CI was checked with. Binary wheels only: mpi4py's wheel loads the
# system's libmpi (Debian's Open MPI) at run time; built from source it would take many
# minutes and gigabytes of memory. ziglang: the C compiler and linker for glibc 2.28 (maturin
# --zig); 0.13, as maturin 1.9's cargo-zigbuild does not understand 0.15's target triples.
"$venv/bin/pip" install -q --disable-pip-version-check --only-binary :all: \
    maturin==1.9.6 numpy==2.2.6 pytest==8.3.5 mpi4py==4.1.1 ziglang==0.13.0
lap packages

echo "--- build: the abi3 wheel for manylinux_2_28 (maturin, zig), naaice-swnaa and naaice-bench (release)"
rm -rf target/wheels
# zig compiles the verbs transport's C code (rdma-mummy-sys, with cmake) and links against
# glibc 2.28. bindgen (libclang) gets no include path when cross-compiling this way: it parses
# the verbs headers against zig's own headers for that glibc.
zig=$("$venv/bin/python" -c 'import os, ziglang; print(os.path.dirname(ziglang.__file__))')
arch=$(uname -m)
family=$arch
[ "$arch" != x86_64 ] || family=x86
inc=$zig/lib/libc/include
BINDGEN_EXTRA_CLANG_ARGS="-isystem $zig/lib/include -isystem $inc/$arch-linux-gnu"
BINDGEN_EXTRA_CLANG_ARGS+=" -isystem $inc/generic-glibc -isystem $inc/$family-linux-any -isystem $inc/any-linux-any"
BINDGEN_EXTRA_CLANG_ARGS="$BINDGEN_EXTRA_CLANG_ARGS" PATH="$venv/bin:$PATH" \
    "$venv/bin/maturin" build --release --locked --strip --zig --compatibility manylinux_2_28 \
    -m host/python/Cargo.toml -o target/wheels -i "$venv/bin/python"
wheel=$(ls target/wheels/naaice-*-cp311-abi3-*.whl)
echo "wheel: $(basename "$wheel")"
# The platform tag says glibc 2.28 or older, and so do the symbol versions the module needs.
tag=$(basename "$wheel" .whl)
tag=${tag##*-}
echo "platform tag: $tag"
[[ $tag =~ ^manylinux_2_([0-9]+)_ ]] && ((BASH_REMATCH[1] <= 28)) ||
    { echo "the wheel's platform tag $tag needs a glibc newer than 2.28" >&2; exit 1; }
"$venv/bin/python" -c 'import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read("naaice/_native.abi3.so"))' \
    "$wheel" >"$work/_native.so"
newest=$(objdump -T "$work/_native.so" | grep -o 'GLIBC_2\.[0-9.]*' | sort -uV | tail -n 1)
echo "newest glibc symbol version: $newest"
[[ $newest =~ ^GLIBC_2\.([0-9]+) ]] && ((BASH_REMATCH[1] <= 28)) ||
    { echo "the extension needs $newest, newer than the tag's GLIBC_2.28" >&2; exit 1; }
"$venv/bin/pip" install -q --disable-pip-version-check --force-reinstall --no-deps "$wheel"
# The tests import the installed wheel, never a build left in the source tree.
(cd / && "$venv/bin/python" -c \
    'import naaice; assert "site-packages" in naaice.__file__, naaice.__file__')
cargo build --release --locked -p naaice-swnaa -p naaice-bench
target=$(cargo metadata --format-version 1 --no-deps |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
lap build

echo "--- pytest host/python/tests"
# The software transport: the tests are about the binding, not about RDMA devices.
export NAAICE_TRANSPORT=soft
"$venv/bin/python" -m pytest -q -rs host/python/tests
lap pytest

echo "--- examples: NumPy (local mode, a software NAA from Python)"
"$venv/bin/python" host/python/examples/numpy_offload.py
"$venv/bin/python" host/python/examples/numpy_offload.py --server
lap numpy

echo "--- mpi4py: mpirun -np 4 over 2 naaice-swnaa"
ports=()
for i in 1 2; do
    ports+=("$(free_port)")
    "$target/release/naaice-swnaa" --address 127.0.0.1 --port "${ports[-1]}" --log info \
        >"$work/naa$i.log" 2>&1 &
    naa_pids+=($!)
done
# Both must listen before the ranks start: a rank whose NAA refuses the connection fails
# over to the other one, and the check below wants both used.
for i in 0 1; do
    wait_listen "${ports[$i]}" || { cat "$work/naa$((i + 1)).log"; exit 1; }
done
export NAA_SPEC="127.0.0.1:${ports[0]}:1:1,127.0.0.1:${ports[1]}:1:1"
root=()
[ "$(id -u)" != 0 ] || root=(--allow-run-as-root)
# --oversubscribe: 4 ranks on 2 cores.
mpirun "${root[@]}" --oversubscribe -np 4 -x NAAICE_TRANSPORT -x NAA_SPEC \
    "$venv/bin/python" host/python/examples/mpi_offload.py | tee "$work/mpi.out"
grep -q "mpi_offload: 4 ranks, 2 NAAs, 0 wrong bytes" "$work/mpi.out" ||
    { tail -n 20 "$work"/naa1.log "$work"/naa2.log; exit 1; }
for pid in "${naa_pids[@]}"; do kill "$pid"; wait "$pid" || true; done
naa_pids=()
unset NAA_SPEC
lap mpi4py

echo "--- overhead: Python per-call CPU time against naaice-bench's steady 64 B RPC"
# One short round (the figure is printed, not checked); docs/performance.md's comes from the default
# three rounds of 20 000 RPCs.
"$venv/bin/python" host/python/bench_overhead.py --bench "$target/release/naaice-bench" \
    --swnaa "$target/release/naaice-swnaa" --out "$work/bench" --rounds 1 --rpcs 5000
lap overhead

printf 'Python stage: %s\n' "${timings[@]}"
echo "Python stage total: $((SECONDS - start)) s"
