#!/bin/busybox sh
# Stage 1 of the rxe-vm guest: baked into the image as /init by `run.sh --build`.
#
# It only mounts the kernel file systems and the run directory that run.sh shares over 9p
# (tag "rxerun"), then hands over to the run directory's init.sh (a copy of guest-init.sh),
# so that changes to the guest's run logic do not need a rebuild of the image.
# Busybox only: under emulation every exec of a dynamically linked program costs 30-100 ms.
B=/bin/busybox
export PATH=/usr/sbin:/usr/bin:/sbin:/bin

halt() {
    echo "rxe-vm: $*" > /dev/console
    $B sync
    echo o > /proc/sysrq-trigger
    $B sleep 10
}

$B mount -t proc proc /proc
$B mount -t sysfs sysfs /sys
$B mount -t devtmpfs devtmpfs /dev 2> /dev/null
$B mkdir -p /run/rxe-vm
$B modprobe -a virtio_pci virtio_console 9pnet_virtio 9p || halt "cannot load the virtio/9p modules"
$B mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 rxerun /run/rxe-vm \
    || halt "cannot mount the run directory (9p tag rxerun)"
[ -f /run/rxe-vm/init.sh ] || halt "the run directory has no init.sh"
exec $B sh /run/rxe-vm/init.sh
