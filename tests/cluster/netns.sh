#!/usr/bin/env bash
# A multi-host test cluster on one machine: network namespaces with their own addresses and
# hostnames (UTS namespaces) on one bridge. Nothing leaves the machine: the bridge lives in a
# namespace of its own, so the machine's own network namespace gets no interface or address.
#
#   tests/cluster/netns.sh check         # exit 0 if namespaces can be made here, else says why
#   tests/cluster/netns.sh up DIR        # makes the hosts below (tears down leftovers first)
#   tests/cluster/netns.sh down DIR      # kills every process in them, removes them (idempotent)
#   tests/cluster/netns.sh exec DIR HOST CMD...   # runs CMD on HOST (its network, hostname)
#   tests/cluster/netns.sh cut HOST | mend HOST   # unplugs / replugs HOST's cable at the switch
#
# Hosts (subnet 10.199.0.0/16 on the bridge; every name gets the prefix "naaice-"):
#   ctl      10.199.0.2    slurmctld
#   node1-3  10.199.0.11-13  compute nodes (slurmd, MPI ranks)
#   naa1-2   10.199.0.21-22  NAA hosts (naaice-swnaa)
#   outside  10.199.1.10   a client outside the compute nodes' prefix 10.199.0.0/24
# DIR keeps the list of hosts. The names are fixed: one such cluster per machine at a time.
set -euo pipefail

prefix=naaice-
hosts=(ctl node1 node2 node3 naa1 naa2 outside)
declare -A addr=([ctl]=10.199.0.2 [node1]=10.199.0.11 [node2]=10.199.0.12 [node3]=10.199.0.13
    [naa1]=10.199.0.21 [naa2]=10.199.0.22 [outside]=10.199.1.10)
switch=${prefix}switch

usage() {
    sed -n '4,9p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# Where the hosts' UTS namespaces are pinned (a private bind mount, like ip's /run/netns): one
# place for every DIR, so that 'up' also clears what a killed run left.
uts_dir() { echo /run/naaice-netns; }

down() {
    local dir=$1 ns pids=()
    # Every process in a namespace of ours first (TERM, then KILL at 3 s), then the namespaces.
    for _ in $(seq 30); do
        pids=()
        for ns in "$switch" "${hosts[@]/#/$prefix}"; do
            [ -e "/run/netns/$ns" ] || continue
            # shellcheck disable=SC2207 # PIDs: one word each
            pids+=($(ip netns pids "$ns" 2>/dev/null || true))
        done
        ((${#pids[@]})) || break
        kill "${pids[@]}" 2>/dev/null || true
        sleep 0.1
    done
    if ((${#pids[@]})); then kill -9 "${pids[@]}" 2>/dev/null || true; fi
    for ns in "${hosts[@]/#/$prefix}" "$switch"; do
        if [ -e "/run/netns/$ns" ]; then ip netns delete "$ns"; fi
    done
    local uts
    uts=$(uts_dir "$dir")
    if [ -d "$uts" ]; then
        for f in "$uts"/*; do
            [ -e "$f" ] && { umount "$f" 2>/dev/null || true; rm -f "$f"; }
        done
        umount "$uts" 2>/dev/null || true
        rmdir "$uts" 2>/dev/null || true
    fi
}

check() {
    if [ "$(id -u)" != 0 ]; then
        echo "not root: network namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN"
        return 1
    fi
    for tool in ip unshare nsenter; do
        command -v "$tool" >/dev/null || { echo "$tool not found (iproute2, util-linux)"; return 1; }
    done
    local probe=${prefix}probe$$ err
    if ! err=$(ip netns add "$probe" 2>&1); then
        echo "cannot create a network namespace: $err"
        return 1
    fi
    if ! err=$(ip -n "$probe" link add br0 type bridge 2>&1) ||
        ! err=$(ip -n "$probe" link add v0 type veth peer name v1 2>&1); then
        ip netns delete "$probe"
        echo "cannot create a bridge or veth pair in a namespace: $err"
        return 1
    fi
    ip netns delete "$probe"
    if ! err=$(unshare --uts true 2>&1); then
        echo "cannot create a UTS namespace: $err"
        return 1
    fi
}

# True if ADDRESS answers from the controller's host (refused counts: the host answered).
reachable() {
    local out
    out=$(ip netns exec "${prefix}ctl" timeout 3 bash -c "exec 3<>/dev/tcp/$1/9" 2>&1) && return 0
    [[ $out == *refused* ]]
}

up() {
    local dir=$1 uts h ns
    down "$dir"
    mkdir -p "$dir"
    : >"$dir/hosts"
    uts=$(uts_dir "$dir")
    mkdir -p "$uts"
    mount --bind "$uts" "$uts"
    mount --make-private "$uts"
    ip netns add "$switch"
    ip -n "$switch" link add br0 type bridge
    ip -n "$switch" link set br0 up
    for h in "${hosts[@]}"; do
        ns=$prefix$h
        ip netns add "$ns"
        # IPv4 only: no link-local IPv6 addresses either (/proc/sys/net is the namespace's).
        ip netns exec "$ns" sh -c 'if [ -d /proc/sys/net/ipv6 ]; then
            echo 1 >/proc/sys/net/ipv6/conf/default/disable_ipv6
            echo 1 >/proc/sys/net/ipv6/conf/all/disable_ipv6
        fi'
        ip -n "$switch" link add "v-$h" type veth peer name eth0 netns "$ns"
        ip -n "$switch" link set "v-$h" master br0 up
        ip -n "$ns" link set lo up
        ip -n "$ns" addr add "${addr[$h]}/16" dev eth0
        ip -n "$ns" link set eth0 up
        touch "$uts/$h"
        unshare --uts="$uts/$h" hostname "$ns"
        echo "$ns ${addr[$h]}" >>"$dir/hosts"
    done
    # Every host answers over the bridge: a TCP connect to a closed port is refused at once
    # (a host that is not reached times out instead).
    for h in "${hosts[@]}"; do
        reachable "${addr[$h]}" ||
            { echo "netns: ${addr[$h]} ($h) does not answer over the bridge" >&2; return 1; }
    done
}

run_on() {
    local dir=$1 h=$2
    shift 2
    [ -e "$(uts_dir "$dir")/$h" ] || { echo "netns: no host $h in $dir" >&2; exit 2; }
    exec nsenter --net="/run/netns/$prefix$h" --uts="$(uts_dir "$dir")/$h" "$@"
}

cmd=${1:-}
case "$cmd" in
check) check ;;
up) [ $# = 2 ] || usage; up "$(realpath -m "$2")" ;;
down) [ $# = 2 ] || usage; down "$(realpath -m "$2")" ;;
exec) [ $# -ge 4 ] || usage; dir=$(realpath -m "$2"); shift 2; run_on "$dir" "$@" ;;
cut) [ $# = 2 ] || usage; ip -n "$switch" link set "v-$2" down ;;
mend) [ $# = 2 ] || usage; ip -n "$switch" link set "v-$2" up ;;
*) usage ;;
esac
