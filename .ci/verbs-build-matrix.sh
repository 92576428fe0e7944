#!/usr/bin/env bash
# Builds the verbs transport with every libclang installed from Debian's packages
# (/usr/lib/llvm-N/lib, e.g. libclang-14-dev ... libclang-16-dev), each time with the rdma-core
# development headers hidden: the binding (rdma-mummy-sys) runs bindgen on headers it vendors
# and loads rdma-core at run time, so neither libibverbs-dev nor librdmacm-dev may be needed.
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

# Runs "$@" with /usr/include/infiniband and /usr/include/rdma replaced by empty directories.
without_rdma_headers() {
    local hide=""
    for d in /usr/include/infiniband /usr/include/rdma; do
        [ -d "$d" ] && hide+="mount -t tmpfs none $d && "
    done
    local script="${hide}test ! -e /usr/include/infiniband/verbs.h && exec \"\$@\""
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
