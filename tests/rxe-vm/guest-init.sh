#!/bin/busybox sh
# Stage 2 of the rxe-vm guest: run.sh copies this file into each run directory and the image's
# /init (guest-boot.sh) executes it from there, with the run directory mounted at $H.
#
# It mounts the host shares, brings up Soft-RoCE (rdma_rxe on a dummy netdev, so nothing can
# leave the VM), runs the command with its stdout/stderr on two virtio-serial ports, writes the
# command's exit status to $H/rc and powers the VM off.
B=/bin/busybox
H=/run/rxe-vm
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8

say() { echo "rxe-vm: $*" > /dev/console; }
poweroff_now() {
    $B sync
    echo o > /proc/sysrq-trigger
    $B sleep 10
}
fail() {
    say "setup failed: $*"
    echo "$*" > $H/setup-error
    poweroff_now
}

# shellcheck source=/dev/null
. $H/config

$B mkdir -p /dev/pts /dev/shm /dev/virtio-ports /tmp
$B mount -t devpts devpts /dev/pts
$B mount -t tmpfs tmpfs /dev/shm
$B mount -t tmpfs tmpfs /tmp
$B ln -sf /proc/self/fd /dev/fd
$B ln -sf /proc/self/fd/0 /dev/stdin
$B ln -sf /proc/self/fd/1 /dev/stdout
$B ln -sf /proc/self/fd/2 /dev/stderr
$B hostname rxe-vm

for port in /sys/class/virtio-ports/*; do
    [ -e "$port/name" ] || continue
    read -r name < "$port/name"
    $B ln -sf "/dev/${port##*/}" "/dev/virtio-ports/$name"
done

# Host directories, each at its host path ("tag path" per line).
while read -r tag path; do
    [ -n "$tag" ] || continue
    $B mkdir -p "$path"
    $B mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=mmap "$tag" "$path" \
        || fail "cannot mount the share $path"
done < $H/shares

# Soft-RoCE.  rdma_cm refuses 127.0.0.1 on an rxe device bound to lo, hence a dummy netdev
# with its own address.  crc32_generic: rxe's ICRC hash; faster under emulation than the
# PCLMULQDQ variant.  numdummies=0: no stray dummy0.
$B modprobe -a rdma_rxe ib_uverbs rdma_ucm crc32_generic || fail "cannot load the rdma modules"
$B modprobe dummy numdummies=0 || fail "cannot load the dummy netdev module"
$B ip link set lo up
$B ip link add "$RXE_VM_NETDEV" type dummy || fail "cannot create $RXE_VM_NETDEV"
$B ip link set "$RXE_VM_NETDEV" mtu "$RXE_VM_MTU" || fail "cannot set MTU $RXE_VM_MTU"
$B ip addr add "$RXE_VM_IP" dev "$RXE_VM_NETDEV" || fail "cannot add $RXE_VM_IP"
$B ip link set "$RXE_VM_NETDEV" up
rdma link add "$RXE_VM_DEV" type rxe netdev "$RXE_VM_NETDEV" || fail "rdma link add $RXE_VM_DEV failed"
tries=0
while :; do
    state=
    read -r state < "/sys/class/infiniband/$RXE_VM_DEV/ports/1/state" 2> /dev/null
    case "$state" in *ACTIVE*) break ;; esac
    tries=$((tries + 1))
    [ $tries -le 100 ] || fail "port 1 of $RXE_VM_DEV is not ACTIVE ($state)"
    $B sleep 0.05
done

# shellcheck disable=SC3045 # busybox ash has ulimit -l and -c
ulimit -l unlimited
# shellcheck disable=SC3045
ulimit -c 0
RXE_VM_ADDR=${RXE_VM_IP%/*}
export RXE_VM_ADDR RXE_VM_IP RXE_VM_DEV RXE_VM_NETDEV RXE_VM_MTU

if [ "$MODE" = shell ]; then
    say "root shell; $RXE_VM_DEV on $RXE_VM_NETDEV $RXE_VM_IP; 'exit' powers off"
    cd "$RXE_VM_CWD" 2> /dev/null || cd /
    /usr/bin/setsid -w -c /bin/bash -l < /dev/ttyS0 > /dev/ttyS0 2>&1
    poweroff_now
fi

# The command writes into pipes, not into the virtio ports themselves: a port can be opened
# only once, and programs reopen /dev/stdout.
out=/dev/virtio-ports/rxe.stdout
err=/dev/virtio-ports/rxe.stderr
if [ ! -e $out ] || [ ! -e $err ]; then fail "the virtio-serial ports are missing"; fi
$B mkfifo /run/cmd.out /run/cmd.err
$B cat /run/cmd.out > $out &
c_out=$!
$B cat /run/cmd.err > $err &
c_err=$!
say "running the command"
: > $H/started
/bin/bash $H/cmd.sh < /dev/null > /run/cmd.out 2> /run/cmd.err
rc=$?
# Whatever the command left running could keep the pipes open: end it.
for d in /proc/[0-9]*; do
    p=${d#/proc/}
    case "$p" in 1 | "$c_out" | "$c_err") continue ;; esac
    kill -9 "$p" 2> /dev/null
done
wait $c_out $c_err
echo "$rc" > $H/rc.new && $B mv $H/rc.new $H/rc
say "command exited with status $rc"
poweroff_now
