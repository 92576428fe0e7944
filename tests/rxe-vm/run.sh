#!/usr/bin/env bash
# run.sh -- run a command inside a throw-away qemu VM with real RDMA verbs (Soft-RoCE).
#
#   tests/rxe-vm/run.sh [--build | --rebuild | --shell | --info | --help] [--] [command [args...]]
#   CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER=$PWD/tests/rxe-vm/run.sh cargo test ...
#
# The VM boots a stock Debian kernel under qemu's software emulation (TCG: no KVM, no RDMA
# hardware and no RDMA support in the host kernel needed), loads rdma_rxe and puts the RDMA
# device rxe0 on a dummy netdev with its own IPv4 address. libibverbs, librdmacm and perftest
# work there as on a RoCEv2 NIC. Client and server run as two processes in the same VM.
#
# The command runs as root in the guest, in the host's working directory. The git top level of
# the working directory (or the directory itself) and the command's directory are shared at the
# same absolute paths. Its stdout and stderr stream to ours; the exit status is the command's,
# 124 when the VM hit the timeout, 125 when the harness or the VM failed.
#
# The command's environment: RXE_VM_ADDR (the guest address to listen on and connect to),
# RXE_VM_DEV (rxe0), RXE_VM_NETDEV, RXE_VM_IP, RXE_VM_MTU, NAAICE_REQUIRE_RDMA=1 (unless set
# on the host), and the host's RUST_*, NAAICE_* and CARGO_* variables.
#
# Options:
#   --build     build the cached image if it is missing or stale, then exit
#   --rebuild   rebuild the cached image, then run the command (if any)
#   --shell     boot and open a root shell on this terminal (Ctrl-A X kills the VM)
#   --info      print the settings and the state of the cache
#   --help      this text
#
# Environment (all optional):
#   RXE_VM_CACHE    image cache (default ${XDG_CACHE_HOME:-~/.cache}/naaice-rxe-vm)
#   RXE_VM_TIMEOUT  seconds until the VM is killed (default 900)
#   RXE_VM_BOOT_TIMEOUT  seconds the guest may take to start the command (default 120; a boot
#                   that stalls is retried once)
#   RXE_VM_SUITE    Debian suite of the guest (default bookworm)
#   RXE_VM_MIRROR   Debian mirror (default http://deb.debian.org/debian)
#   RXE_VM_MEM      guest memory (default 2048M)
#   RXE_VM_SMP      vCPUs (default 2: with 1, busy-polling client and server share a vCPU)
#   RXE_VM_CPU      qemu CPU model (default Nehalem: fastest under TCG; no AVX)
#   RXE_VM_MTU      netdev MTU (default 9000, giving RoCE MTU 4096)
#   RXE_VM_IP       guest address/prefix (default 10.77.0.1/24; exists only in the VM)
#   RXE_VM_SHARE    extra host directories to share, colon-separated
#   RXE_VM_PASS_ENV extra environment variable names to pass, space-separated
#   RXE_VM_PACKAGES extra Debian packages for the guest (changes the image)
#   RXE_VM_VERBOSE  1: copy the guest console (kernel log) to stderr
#   RXE_VM_KEEP     1: keep the run directory (console log) for inspection
#
# Building the image needs root (debootstrap, chroot): as another user the build runs under
# sudo. It installs its host packages with apt-get when they are missing. Running needs only
# qemu-system-x86_64 and read access to the cache.
set -euo pipefail

ME=rxe-vm
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

CACHE=${RXE_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/naaice-rxe-vm}
TIMEOUT=${RXE_VM_TIMEOUT:-900}
BOOT_TIMEOUT=${RXE_VM_BOOT_TIMEOUT:-120}
SUITE=${RXE_VM_SUITE:-bookworm}
MIRROR=${RXE_VM_MIRROR:-http://deb.debian.org/debian}
MEM=${RXE_VM_MEM:-2048M}
SMP=${RXE_VM_SMP:-2}
CPU=${RXE_VM_CPU:-Nehalem}
MTU=${RXE_VM_MTU:-9000}
GUEST_IP=${RXE_VM_IP:-10.77.0.1/24}
VERBOSE=${RXE_VM_VERBOSE:-0}
KEEP=${RXE_VM_KEEP:-0}

# Bump when the image layout changes in a way the inputs below do not show.
IMAGE_VERSION=1
# Guest user space: rdma-core's libraries and tools, perftest, and the plumbing of the init.
GUEST_PACKAGES="busybox-static iproute2 libibverbs1 ibverbs-providers librdmacm1 ibverbs-utils
  rdmacm-utils perftest ${RXE_VM_PACKAGES:-}"
# Kernel modules in the image (with their dependencies). crc32_generic: see guest-init.sh.
GUEST_MODULES="rdma_rxe ib_uverbs rdma_ucm dummy virtio_pci virtio_console 9pnet_virtio 9p
  crc32_generic"
# Packages of the minimal system that nothing in the guest runs: their files are removed,
# because unpacking the initramfs under emulation costs about 10 ms per MB.
TRIM_PACKAGES="apt libapt-pkg6.0 perl-base debconf gpgv libgnutls30 libp11-kit0 libunistring2
  libidn2-0 libtasn1-6 libhogweed6 libnettle8 libffi8 e2fsprogs libext2fs2 libss2 logsave
  libseccomp2 libxxhash0 debian-archive-keyring tzdata"
# Kernel command line: serial console, and no boot work a throw-away VM does not need
# (the crypto self-tests alone take 0.3 s emulated).
# The kernel log stays on (it costs no measurable time) so that a failed boot can be diagnosed.
# tsc=reliable: under TCG the TSC follows the host clock on every vCPU, but the clocksource
# watchdog, comparing it with the emulated HPET under load, marks it unstable in some runs and
# switches to hpet; every clock_gettime then becomes a system call with an emulated HPET read
# (seen in two of three profiled benchmark runs: HPET reads were 13 % and 22 % of all samples).
APPEND="console=ttyS0 panic=-1 mitigations=off cryptomgr.notests audit=0 apparmor=0 security=
  nowatchdog tsc=reliable 8250.nr_uarts=1"

log() { echo "[$ME] $*" >&2; }
die() {
    echo "[$ME] error: $*" >&2
    exit 125
}
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
# The words of a whitespace-separated list, on one line.
# shellcheck disable=SC2048,SC2086 # splitting is the point
words() { echo $*; }

# ------------------------------------------------------------------------------------- image

image_id() {
    {
        echo "$IMAGE_VERSION|$SUITE|$MIRROR"
        words "$GUEST_PACKAGES"
        words "$GUEST_MODULES"
        words "$TRIM_PACKAGES"
        cat "$HERE/guest-boot.sh"
    } | sha256sum | cut -c1-16
}

image_ready() {
    [ -f "$CACHE/initrd.cpio" ] && [ -f "$CACHE/kernel" ] \
        && [ "$(cat "$CACHE/image-id" 2> /dev/null)" = "$(image_id)" ]
}

as_root() {
    if [ "$(id -u)" = 0 ]; then
        "$@"
    elif command -v sudo > /dev/null; then
        sudo "$@"
    else
        die "'$*' needs root and sudo is not installed"
    fi
}

# Installs the host packages that provide the missing commands.
install_host_packages() {
    local logf=$1 missing=() pair
    shift
    for pair in "$@"; do
        command -v "${pair%%:*}" > /dev/null || missing+=("${pair#*:}")
    done
    [ ${#missing[@]} -gt 0 ] || return 0
    command -v apt-get > /dev/null || die "missing ${missing[*]} (no apt-get here: install them)"
    log "installing host packages: ${missing[*]}"
    local apt=(env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -q -y)
    if ! as_root "${apt[@]}" install --no-install-recommends "${missing[@]}" > "$logf" 2>&1; then
        as_root "${apt[@]}" update >> "$logf" 2>&1 || true
        as_root "${apt[@]}" install --no-install-recommends "${missing[@]}" >> "$logf" 2>&1 \
            || { tail -n 20 "$logf" >&2; die "apt-get install ${missing[*]} failed"; }
    fi
}

# The kernel package that linux-image-amd64 depends on in the guest suite, from the package
# index debootstrap left in the root file system (verified against the signed Release file).
# Prints "filename sha256 package".
kernel_from_index() {
    local lists=$1/var/lib/apt/lists
    local index
    index=$(find "$lists" -maxdepth 1 -name "*_dists_${SUITE}_main_binary-amd64_Packages" | head -n 1)
    [ -n "$index" ] || die "debootstrap left no package index in $lists"
    local pkg
    pkg=$(awk '/^Package: /{p=$2} p=="linux-image-amd64" && /^Depends: /{
              n=split($0,a,/[ ,]+/); for(i=2;i<=n;i++) if (a[i] ~ /^linux-image-[0-9]/) {print a[i]; exit}}' \
        "$index")
    [ -n "$pkg" ] || die "no linux-image-amd64 in $index"
    awk -v want="$pkg" '/^Package: /{p=$2} p==want && /^Filename: /{f=$2} p==want && /^SHA256: /{s=$2}
              /^$/{if (f != "") {print f, s, want; exit}} END{if (f != "") print f, s, want}' "$index" \
        | head -n 1
}

# Extracts the uncompressed ELF vmlinux from a bzImage (like the kernel's
# scripts/extract-vmlinux). qemu boots it through its PVH entry point, which skips the
# kernel's self-decompression: 2.5 s under emulation.
extract_vmlinux() {
    local image=$1 out=$2 spec tool magic offset
    for spec in 'xz:\xFD7zXZ\x00' 'zstd:\x28\xB5\x2F\xFD' 'gzip:\x1F\x8B\x08'; do
        tool=${spec%%:*}
        magic=${spec#*:}
        command -v "$tool" > /dev/null || continue
        for offset in $(LC_ALL=C grep -obUaP "$magic" "$image" | cut -d: -f1 | head -n 3); do
            tail -c +$((offset + 1)) "$image" | "$tool" -dc > "$out" 2> /dev/null || true
            # An ELF with the Xen/PVH note.
            if [ "$(head -c 4 "$out" | od -An -tx1 | tr -d ' ')" = 7f454c46 ] \
                && LC_ALL=C grep -qa Xen "$out"; then
                return 0
            fi
        done
    done
    rm -f "$out"
    return 1
}

# Builds the image into $CACHE (as root; under the build lock).
build_image() {
    [ "$(id -u)" = 0 ] || die "build_image runs as root"
    mkdir -p "$CACHE"
    local logf=$CACHE/build.log
    install_host_packages "$CACHE/apt.log" debootstrap:debootstrap cpio:cpio depmod:kmod xz:xz-utils \
        zstd:zstd wget:wget flock:util-linux qemu-system-x86_64:qemu-system-x86
    [ -e /usr/share/keyrings/debian-archive-keyring.gpg ] \
        || install_host_packages "$CACHE/apt.log" debian-archive-keyring-missing:debian-archive-keyring

    local t0=$SECONDS
    local work
    rm -rf "$CACHE"/build.* # left by an interrupted build (we hold the build lock)
    work=$(mktemp -d "$CACHE/build.XXXXXX")
    # shellcheck disable=SC2064
    trap "rm -rf '$work'" EXIT
    local root=$work/root
    log "building the guest image in $CACHE (Debian $SUITE; log: $logf)"

    # 1. Root file system: minimal Debian plus rdma-core's user space.
    local include
    include=$(words "$GUEST_PACKAGES" | tr ' ' ,)
    debootstrap --variant=minbase --include="$include" "$SUITE" "$root" "$MIRROR" > "$logf" 2>&1 \
        || { tail -n 20 "$logf" >&2; die "debootstrap failed (see $logf)"; }

    # 2. Kernel: the suite's current linux-image, straight from the mirror.
    local kfile ksha kpkg
    read -r kfile ksha kpkg <<< "$(kernel_from_index "$root")"
    if [ -z "$kfile" ] || [ -z "$ksha" ]; then die "cannot find the kernel package in the index"; fi
    log "kernel package $kpkg"
    wget -q -O "$work/kernel.deb" "$MIRROR/$kfile" || die "download of $MIRROR/$kfile failed"
    echo "$ksha  $work/kernel.deb" | sha256sum -c --quiet - || die "$kfile: checksum mismatch"
    dpkg-deb -x "$work/kernel.deb" "$work/kernel"
    local kver
    kver=$(find "$work/kernel/lib/modules" -mindepth 1 -maxdepth 1 -printf '%f\n' | head -n 1)
    [ -f "$work/kernel/boot/vmlinuz-$kver" ] || die "$kpkg has no /boot/vmlinuz-$kver"
    depmod -b "$work/kernel" "$kver"

    # 3. The kernel modules the guest loads, with everything they depend on.
    local mods=$root/lib/modules/$kver m f rel
    mkdir -p "$mods"
    cp "$work/kernel/lib/modules/$kver"/modules.{order,builtin,builtin.modinfo} "$mods/"
    for m in $GUEST_MODULES; do
        modprobe -d "$work/kernel" -S "$kver" --show-depends "$m" || die "kernel $kver has no module $m"
    done | awk '$1 == "insmod" {print $2}' | sort -u > "$work/modules"
    while read -r f; do
        rel=${f#*/lib/modules/"$kver"/}
        mkdir -p "$mods/$(dirname "$rel")"
        cp "$f" "$mods/$rel"
        # busybox modprobe loads plain .ko files only
        case "$rel" in
            *.ko.xz) xz -d "$mods/$rel" ;;
            *.ko.zst) zstd -q -d --rm "$mods/$rel" ;;
            *.ko.gz) gzip -d "$mods/$rel" ;;
        esac
    done < "$work/modules"
    depmod -b "$root" "$kver"

    # 4. Trim, configure, install the init.
    local p list
    for p in $TRIM_PACKAGES; do
        for list in "$root/var/lib/dpkg/info/$p.list" "$root/var/lib/dpkg/info/$p:amd64.list"; do
            [ -f "$list" ] || continue
            while read -r f; do
                # files and links only: directories (and merged-/usr links like /bin) stay
                [ -d "$root$f" ] && continue
                if [ -f "$root$f" ] || [ -L "$root$f" ]; then rm -f "$root$f"; fi
            done < "$list"
        done
    done
    rm -rf "$root"/usr/share/{doc,man,info,locale,lintian,perl5}/* "$root"/var/cache/apt/* \
        "$root"/var/lib/apt/lists/* "$root"/var/log/* "$root"/usr/lib/x86_64-linux-gnu/gconv
    echo rxe-vm > "$root/etc/hostname"
    printf '127.0.0.1 localhost\n::1 localhost\n%s rxe-vm\n' "${GUEST_IP%/*}" > "$root/etc/hosts"
    install -m 755 "$HERE/guest-boot.sh" "$root/init"

    # 5. Pack: an uncompressed cpio (decompressing under emulation costs more than it saves),
    # and the kernel as an ELF vmlinux when the bzImage allows it.
    (cd "$root" && find . -print0 | cpio --null -o -H newc --quiet) > "$work/initrd.cpio"
    if ! extract_vmlinux "$work/kernel/boot/vmlinuz-$kver" "$work/vmlinux"; then
        log "no PVH vmlinux in the bzImage: booting the compressed kernel (about 2.5 s slower)"
        cp "$work/kernel/boot/vmlinuz-$kver" "$work/vmlinux"
    fi
    chmod 644 "$work/initrd.cpio" "$work/vmlinux"
    mv "$work/initrd.cpio" "$CACHE/initrd.cpio"
    mv "$work/vmlinux" "$CACHE/kernel"
    echo "$kver" > "$CACHE/kernel-version"
    image_id > "$CACHE/image-id"
    rm -rf "$work"
    trap - EXIT
    log "image ready in $((SECONDS - t0)) s: kernel $kver, initramfs $(du -h "$CACHE/initrd.cpio" | cut -f1)"
}

# Builds the image when it is missing or stale (or always with --rebuild), under an exclusive
# lock so that concurrent runs build it once.
ensure_image() {
    if [ "$REBUILD" != 1 ] && image_ready; then return 0; fi
    if [ "$(id -u)" != 0 ]; then
        log "building the image needs root: running the build with sudo"
        local again=()
        [ "$REBUILD" != 1 ] || again=(--rebuild)
        as_root env RXE_VM_CACHE="$CACHE" RXE_VM_SUITE="$SUITE" RXE_VM_MIRROR="$MIRROR" \
            RXE_VM_PACKAGES="${RXE_VM_PACKAGES:-}" "$0" "${again[@]}" --build
        as_root chown -R "$(id -u):$(id -g)" "$CACHE"
        image_ready || die "the image build under sudo did not produce an image in $CACHE"
        return 0
    fi
    mkdir -p "$CACHE"
    (
        flock 9
        if [ "$REBUILD" = 1 ] || ! image_ready; then build_image; fi
    ) 9> "$CACHE/.lock"
}

# ------------------------------------------------------------------------------------- run

MODE=run
REBUILD=0
while [ $# -gt 0 ]; do
    case "$1" in
        --build) MODE=build ;;
        --rebuild) REBUILD=1 ;;
        --shell) MODE=shell ;;
        --info) MODE=info ;;
        -h | --help)
            usage
            exit 0
            ;;
        --)
            shift
            break
            ;;
        -*) die "unknown option $1 (see --help)" ;;
        *) break ;;
    esac
    shift
done

case "$MODE" in
    info)
        echo "cache:   $CACHE"
        if image_ready; then
            echo "image:   ready, kernel $(cat "$CACHE/kernel-version"), initramfs $(du -h "$CACHE/initrd.cpio" | cut -f1)"
        else
            echo "image:   not built (or stale): run.sh --build"
        fi
        echo "guest:   Debian $SUITE, rxe0 on a dummy netdev $GUEST_IP, MTU $MTU"
        echo "qemu:    -accel tcg -cpu $CPU -smp $SMP -m $MEM; timeout ${TIMEOUT}s"
        exit 0
        ;;
    build)
        ensure_image
        exit 0
        ;;
    run) [ $# -gt 0 ] || {
        usage >&2
        exit 2
    } ;;
esac

[[ "$TIMEOUT" =~ ^[1-9][0-9]*$ ]] || die "RXE_VM_TIMEOUT must be a number of seconds"
[[ "$BOOT_TIMEOUT" =~ ^[1-9][0-9]*$ ]] || die "RXE_VM_BOOT_TIMEOUT must be a number of seconds"
ensure_image
if ! command -v qemu-system-x86_64 > /dev/null; then
    install_host_packages "${TMPDIR:-/tmp}/rxe-vm.apt.log" qemu-system-x86_64:qemu-system-x86
fi

RUN=$(mktemp -d "${TMPDIR:-/tmp}/rxe-vm.XXXXXX")
QEMU_PID=
READERS=()
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
    local p
    if [ -n "$QEMU_PID" ]; then kill "$QEMU_PID" 2> /dev/null || true; fi
    for p in "${READERS[@]}"; do kill "$p" 2> /dev/null || true; done
    if [ "$KEEP" = 1 ]; then log "run directory kept: $RUN"; else rm -rf "$RUN"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Shares: the git top level of the working directory, the command's directory when it is a
# path outside it, and RXE_VM_SHARE. Each appears in the guest at its host path.
SHARES=()
add_share() {
    local dir s
    dir=$(realpath -e -- "$1" 2> /dev/null) || die "cannot share $1: no such directory"
    [ "$dir" != / ] || die "refusing to share /"
    for s in "${SHARES[@]}"; do
        case "$dir/" in "$s"/*) return 0 ;; esac
    done
    SHARES+=("$dir")
}
add_share "$(git rev-parse --show-toplevel 2> /dev/null || pwd)"
if [ "$MODE" = run ] && [[ "$1" == */* ]] && [ -e "$1" ]; then add_share "$(dirname -- "$1")"; fi
IFS=: read -ra extra <<< "${RXE_VM_SHARE:-}"
for d in "${extra[@]}"; do [ -z "$d" ] || add_share "$d"; done

# The command and its environment.
{
    printf 'export NAAICE_REQUIRE_RDMA=1\n'
    for v in $(compgen -e | grep -E '^(RUST_|NAAICE_|CARGO_)' || true) ${RXE_VM_PASS_ENV:-}; do
        [ -n "${!v+x}" ] && printf 'export %s=%q\n' "$v" "${!v}"
    done
    printf 'cd -- %q || exit 125\n' "$PWD"
    if [ $# -gt 0 ]; then
        printf 'exec'
        printf ' %q' "$@"
        printf '\n'
    fi
} > "$RUN/cmd.sh"
{
    echo "MODE=$MODE"
    echo "RXE_VM_DEV=rxe0"
    echo "RXE_VM_NETDEV=rxenet0"
    echo "RXE_VM_IP=$GUEST_IP"
    echo "RXE_VM_MTU=$MTU"
    printf 'RXE_VM_CWD=%q\n' "$PWD"
} > "$RUN/config"
cp "$HERE/guest-init.sh" "$RUN/init.sh"

QEMU=(qemu-system-x86_64 -accel tcg -machine pc -cpu "$CPU" -smp "$SMP" -m "$MEM"
    -nodefaults -no-user-config -display none -no-reboot -nic none
    -kernel "$CACHE/kernel" -initrd "$CACHE/initrd.cpio"
    -virtfs "local,path=$RUN,mount_tag=rxerun,security_model=none,id=rxerun")
: > "$RUN/shares"
for i in "${!SHARES[@]}"; do
    QEMU+=(-virtfs "local,path=${SHARES[$i]},mount_tag=share$i,security_model=none,multidevs=remap,id=share$i")
    printf 'share%d %s\n' "$i" "${SHARES[$i]}" >> "$RUN/shares"
done
APPEND=$(words "$APPEND")

if [ "$MODE" = shell ]; then
    log "root shell in the VM; shares: ${SHARES[*]}; Ctrl-A X kills the VM"
    "${QEMU[@]}" -serial mon:stdio -append "$APPEND"
    exit 0
fi

QEMU+=(-device virtio-serial-pci
    -chardev "file,id=out,path=$RUN/stdout" -device "virtserialport,chardev=out,name=rxe.stdout"
    -chardev "file,id=err,path=$RUN/stderr" -device "virtserialport,chardev=err,name=rxe.stderr"
    -chardev "file,id=con,path=$RUN/console" -serial chardev:con
    -append "$APPEND")

# One boot. The command's stdout and stderr: virtio-serial ports -> FIFOs -> our stdout and
# stderr; the guest console (kernel log, init) -> console.log. Sets qemu_rc, and stalled=1 when
# the guest did not start the command (guest-init.sh creates "started") within BOOT_TIMEOUT.
boot() {
    rm -f "$RUN/stdout" "$RUN/stderr" "$RUN/console" "$RUN/started"
    mkfifo "$RUN/stdout" "$RUN/stderr" "$RUN/console"
    cat "$RUN/stdout" &
    READERS+=($!)
    cat "$RUN/stderr" >&2 &
    READERS+=($!)
    if [ "$VERBOSE" = 1 ]; then
        tee "$RUN/console.log" < "$RUN/console" >&2 &
    else
        cat "$RUN/console" > "$RUN/console.log" &
    fi
    READERS+=($!)

    timeout -k 5 "$TIMEOUT" "${QEMU[@]}" < /dev/null > "$RUN/qemu.log" 2>&1 &
    QEMU_PID=$!
    local since=$SECONDS
    stalled=0
    while [ ! -e "$RUN/started" ] && kill -0 "$QEMU_PID" 2> /dev/null; do
        if [ $((SECONDS - since)) -ge "$BOOT_TIMEOUT" ]; then
            stalled=1
            kill "$QEMU_PID" 2> /dev/null || true
            break
        fi
        sleep 0.2
    done
    qemu_rc=0
    wait "$QEMU_PID" || qemu_rc=$?
    QEMU_PID=
    # A reader still blocked in open() (qemu died before opening its FIFO) gets its EOF here.
    local f p
    for f in "$RUN/stdout" "$RUN/stderr" "$RUN/console"; do
        exec 8<> "$f"
        exec 8>&-
    done
    for p in "${READERS[@]}"; do wait "$p" 2> /dev/null || true; done
    READERS=()
}

console_tail() {
    log "last lines of the guest console:"
    tail -n 30 "$RUN/console.log" >&2 || true
}

boot
if [ "$stalled" = 1 ] && [ ! -f "$RUN/setup-error" ]; then
    # Seen rarely on a loaded host: the guest never got to the command. Nothing of the command
    # ran yet, so one more boot is safe.
    log "the VM did not start the command within ${BOOT_TIMEOUT}s (RXE_VM_BOOT_TIMEOUT); booting again"
    console_tail
    boot
fi

if [ -f "$RUN/rc" ]; then
    exit "$(cat "$RUN/rc")"
fi
if [ -f "$RUN/setup-error" ]; then
    log "the guest setup failed: $(cat "$RUN/setup-error")"
    rc=125
elif [ "$stalled" = 1 ]; then
    log "the VM did not start the command within ${BOOT_TIMEOUT}s, twice"
    rc=125
elif [ "$qemu_rc" = 124 ]; then
    log "timeout: the VM was killed after ${TIMEOUT}s (RXE_VM_TIMEOUT)"
    rc=124
else
    log "the VM stopped without reporting an exit status (qemu status $qemu_rc)"
    rc=125
fi
if [ -s "$RUN/qemu.log" ]; then
    log "qemu said:"
    tail -n 20 "$RUN/qemu.log" >&2
fi
console_tail
exit "$rc"
