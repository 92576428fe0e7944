#!/usr/bin/env bash
# Builds the verbs transport with every libclang installed from Debian's packages
# (/usr/lib/llvm-N/lib, e.g. libclang-14-dev ... libclang-16-dev), each time with the rdma-core
# development headers hidden: the binding (rdma-mummy-sys) runs bindgen on headers it vendors
# (they include the kernel's uapi headers, linux-libc-dev) and loads rdma-core at run time, so
# neither libibverbs-dev nor librdmacm-dev may be needed.
# The headers are hidden in a private mount namespace (unshare; root, or user namespaces).
# Usage: .ci/verbs-build-matrix.sh [VERSION...]   (default: every installed libclang)
set -euo pipefail
cd "$(dirname "$0")/.."

target=target/verbs-build-matrix
if (($#)); then
    versions=("$@")
else
    versions=()
    for lib in /usr/lib/llvm-*/lib/libclang.so.1 /usr/lib/llvm-*/lib/libclang-*.so.1; do
        [ -e "$lib" ] || continue
        v=${lib#/usr/lib/llvm-}
        versions+=("${v%%/*}")
    done
    mapfile -t versions < <(printf '%s\n' "${versions[@]}" | sort -un)
fi
((${#versions[@]})) || { echo "no libclang found under /usr/lib/llvm-*" >&2; exit 1; }

# rdma-core's own headers: all of infiniband/, and these in rdma/ (the rest of rdma/ is the
# kernel's uapi, from linux-libc-dev / kernel-headers, which the vendored headers include).
rdmacm_headers=(rdma_cma.h rdma_cma_abi.h rdma_verbs.h rsocket.h)

# Runs "$@" with rdma-core's development headers hidden.
without_rdma_headers() {
    local rdma
    rdma=$(mktemp -d)
    trap 'rm -rf "$rdma"' RETURN
    [ -d /usr/include/rdma ] && cp -a /usr/include/rdma/. "$rdma"/
    for h in "${rdmacm_headers[@]}"; do rm -f "$rdma/$h"; done
    local script="mount --bind $rdma /usr/include/rdma && "
    [ -d /usr/include/rdma ] || script=""
    [ -d /usr/include/infiniband ] && script+="mount -t tmpfs none /usr/include/infiniband && "
    script+="test ! -e /usr/include/infiniband/verbs.h && test ! -e /usr/include/rdma/rdma_cma.h"
    script+=" && exec \"\$@\""
    local ns=(--mount)
    unshare --mount true 2>/dev/null || ns=(--user --map-root-user --mount)
    unshare "${ns[@]}" sh -c "$script" sh "$@"
}

for v in "${versions[@]}"; do
    dir=/usr/lib/llvm-$v/lib
    [ -d "$dir" ] || { echo "libclang $v is not installed ($dir missing)" >&2; exit 1; }
    echo "--- verbs transport with libclang $v, no rdma-core headers"
    cargo clean -q -p rdma-mummy-sys --target-dir "$target"
    LIBCLANG_PATH=$dir without_rdma_headers \
        cargo build -q -p naaice --features verbs --lib --target-dir "$target"
    echo "libclang $v: ok"
done
