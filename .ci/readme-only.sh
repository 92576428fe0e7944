#!/usr/bin/env bash
# The README's set-up is the set-up: runs the README's test command on a machine that has only
# what the README lists. Installs the Debian packages named by the README's `apt-get install`
# line (in its "Two commands" section), then runs the test command in a private mount
# namespace where /usr is an overlay whose whiteouts hide rdma-core (libraries, headers,
# providers) and every other package that .ci/run installs for its later stages but the
# README does not list, so that a test that needs one of them fails here instead of passing
# on CI's fuller machine.
#
# Usage: .ci/readme-only.sh   (as root, or with sudo; CI runs it before anything else is
# installed, but it also works on a machine that has everything)
set -euo pipefail
cd "$(dirname "$0")/.."

sudo=()
if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "readme-only: needs root or sudo" >&2; exit 1; }
    sudo=(sudo -E)
fi

# What the README asks for: its first `apt-get install` line under "## Two commands", and the
# test command of its code block there.
section=$(sed -n '/^## Two commands/,/^## [^T]/p' README.md)
readme_pkgs=$(printf '%s\n' "$section" | grep -o 'apt-get install [a-z0-9 .+-]*' | head -n 1 |
    sed 's/apt-get install//')
test_cmd=$(printf '%s\n' "$section" | grep -o '^cargo test[^#]*' | head -n 1 | sed 's/ *$//')
if [ -z "$readme_pkgs" ] || [ -z "$test_cmd" ]; then
    echo "readme-only: README.md's \"Two commands\" section has no apt-get line or test command" >&2
    exit 1
fi
echo "README packages:$readme_pkgs"
echo "README test command: $test_cmd"
# shellcheck disable=SC2086
read -r -a want <<<"$readme_pkgs"
missing=()
for p in "${want[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Hidden: rdma-core in any form, and what .ci/run installs for later stages (unless the README
# lists it). Only packages installed here matter; their files under /usr are whited out.
hide_pkgs=(rdma-core libibverbs1 librdmacm1 ibverbs-providers libibverbs-dev librdmacm-dev
    ibverbs-utils rdmacm-utils perftest infiniband-diags libibumad3 libibmad5
    valgrind libclang-15-dev libclang-16-dev clang gfortran
    slurm-wlm slurmctld slurmd slurm-client munge libpmix2 libpmix-dev
    openmpi-bin libopenmpi-dev libopenmpi3 mpich qemu-system-x86 qemu-system-x86-64
    python3 python3.11 python3-minimal python3.11-minimal python3-venv python3.11-venv
    python3-dev python3.11-dev libpython3-dev libpython3.11-dev)
upper=target/readme-only/upper
work=target/readme-only/work
rm -rf target/readme-only
mkdir -p "$upper" "$work"
hidden_pkgs=()
count=0
whiteout() {
    local rel=${1#/usr/}
    [ -e "$upper/$rel" ] && return 0
    mkdir -p "$upper/$(dirname "$rel")"
    "${sudo[@]}" mknod "$upper/$rel" c 0 0
    count=$((count + 1))
}
for p in "${hide_pkgs[@]}"; do
    if printf '%s\n' "${want[@]}" | grep -qx "$p"; then
        continue
    fi
    dpkg -s "$p" >/dev/null 2>&1 || continue
    hidden_pkgs+=("$p")
    while IFS= read -r f; do
        case "$f" in /usr/*) ;; *) continue ;; esac
        if [ -f "$f" ] || [ -L "$f" ]; then whiteout "$f"; fi
    done < <(dpkg -L "$p")
done
# rdma-core installed without dpkg (e.g. built from source): by name.
shopt -s nullglob
for f in /usr/lib/*/libibverbs* /usr/lib/*/librdmacm* /usr/lib/libibverbs* /usr/lib/librdmacm* \
    /usr/local/lib/libibverbs* /usr/local/lib/librdmacm*; do
    whiteout "$f"
done
for d in /usr/include/infiniband /usr/include/rdma /usr/lib/*/libibverbs; do
    [ -d "$d" ] || continue
    rel=${d#/usr/}
    mkdir -p "$upper/$(dirname "$rel")"
    "${sudo[@]}" mknod "$upper/$rel" c 0 0 2>/dev/null || true
    count=$((count + 1))
done
shopt -u nullglob
echo "hidden: $count paths; packages: ${hidden_pkgs[*]:-(none installed)}"

# The test command under the overlay. The check at the start makes sure nothing of rdma-core
# is visible (the run fails otherwise: a stage that hides nothing would prove nothing).
inner='set -e
mount -t overlay overlay -o "lowerdir=/usr,upperdir=$1,workdir=$2" /usr
for f in /usr/lib/*/libibverbs.so.1 /usr/lib/*/librdmacm.so.1 /usr/include/infiniband/verbs.h; do
    if [ -e "$f" ]; then echo "readme-only: $f is still visible" >&2; exit 1; fi
done
shift 2
echo "+ $*"
exec "$@"'
# shellcheck disable=SC2086
"${sudo[@]}" env "PATH=$PATH" unshare --mount --propagation private \
    sh -c "$inner" readme-only "$PWD/$upper" "$PWD/$work" $test_cmd
