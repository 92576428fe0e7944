#!/bin/bash
# guest-selftest.sh -- runs INSIDE the VM: tests/rxe-vm/run.sh tests/rxe-vm/guest-selftest.sh
# Checks that the RDMA device is listed, its port is ACTIVE with RoCE MTU 4096, and that rping
# (librdmacm: connect, RDMA READ/WRITE, SEND) completes 10 exchanges between a server and a
# client in this VM over the guest address. Exits non-zero on the first failure.
set -u
dev=${RXE_VM_DEV:?run this inside tests/rxe-vm/run.sh}
addr=${RXE_VM_ADDR:?run this inside tests/rxe-vm/run.sh}
fail() {
    echo "selftest: FAILED: $*" >&2
    exit 1
}

ibv_devices | grep -qw "$dev" || fail "ibv_devices does not list $dev"
info=$(ibv_devinfo -d "$dev") || fail "ibv_devinfo -d $dev"
grep -q 'state:.*PORT_ACTIVE' <<< "$info" || fail "port of $dev not ACTIVE: $info"
grep -q 'active_mtu:.*4096' <<< "$info" || fail "active_mtu of $dev is not 4096: $info"
grep -q 'link_layer:.*Ethernet' <<< "$info" || fail "$dev is not RoCE (link_layer): $info"
echo "selftest: $dev listed, port ACTIVE, active_mtu 4096, RoCE"

timeout 60 rping -s -a "$addr" -C 10 > /tmp/rping-server.log 2>&1 &
server=$!
# rping has no readiness signal: wait until rdma_cm shows its listening id.
for _ in $(seq 100); do
    rdma resource show cm_id 2> /dev/null | grep -q LISTEN && break
    sleep 0.05
done
start=$(date +%s%N)
timeout 60 rping -c -a "$addr" -C 10 -S 64 -v > /tmp/rping-client.log 2>&1
client_rc=$?
end=$(date +%s%N)
wait $server
server_rc=$?
pings=$(grep -c 'ping data' /tmp/rping-client.log)
if [ $client_rc != 0 ] || [ $server_rc != 0 ] || [ "$pings" != 10 ]; then
    cat /tmp/rping-client.log /tmp/rping-server.log >&2
    fail "rping: client status $client_rc, server status $server_rc, $pings of 10 exchanges"
fi
echo "selftest: rping 10 exchanges over $addr in $(((end - start) / 1000000)) ms"
echo "selftest: OK"
