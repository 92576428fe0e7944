#!/usr/bin/env bash
# Slurm across the hosts of tests/cluster/netns.sh: slurmctld on host `ctl`, one slurmd on
# each compute node (its own hostname, spool, log and pid file; NodeAddr on the bridge), munge
# with a key of its own. No cgroups, accounting or systemd. Needs root.
#
#   tests/cluster/slurm-nodes.sh start DIR NETNS_DIR   # DIR/slurm.conf; waits for 3 idle nodes
#   tests/cluster/slurm-nodes.sh stop DIR              # stops what start started (its PIDs)
#
# The cluster-wide license "naa" (NAAICE_SLURM_NAAS of them, default 2): network-attached
# accelerators belong to no node, so they are licenses, not GRES. DIR must be searchable by
# the munge user. Clients (sbatch, sinfo) run on a host of the cluster (netns.sh exec) with
# SLURM_CONF=DIR/slurm.conf.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/cluster/slurm-common.sh
. "$here/slurm-common.sh"

cmd=${1:-}
dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
    echo "usage: $0 start DIR NETNS_DIR | stop DIR" >&2
    exit 2
fi
nodes=(node1 node2 node3)
declare -A addr=([node1]=10.199.0.11 [node2]=10.199.0.12 [node3]=10.199.0.13)

stop() {
    local pidfile pids=()
    # All at once (each daemon takes a few seconds to shut down), then KILL what is left at 5 s.
    for pidfile in "$dir"/*/slurmd.pid "$dir/slurmctld.pid" "$dir/munge/munged.pid"; do
        [ -f "$pidfile" ] || continue
        pids+=("$(cat "$pidfile")")
        rm -f "$pidfile"
    done
    ((${#pids[@]})) || return 0
    kill "${pids[@]}" 2>/dev/null || true
    local pid alive
    for _ in $(seq 50); do
        alive=0
        for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        [ "$alive" = 0 ] && break
        sleep 0.1
    done
    kill -9 "${pids[@]}" 2>/dev/null || true
}

start() {
    local netns=$1 n
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    on() { "$here/netns.sh" exec "$netns" "$@"; }
    mkdir -p "$dir/state" "$dir/munge"
    for n in "${nodes[@]}"; do mkdir -p "$dir/naaice-$n/spool" "$dir/naaice-$n/tmp"; done
    # munge: a fresh key and a socket of our own (a path: every namespace reaches it).
    munge_key "$dir/munge"
    local socket=$dir/munge/munge.socket
    # munged runs on ctl, so that netns.sh down ends it even when this script's stop never ran.
    on ctl su -s /bin/sh munge -c "/usr/sbin/munged --key-file=$dir/munge/munge.key \
        --socket=$socket --pid-file=$dir/munge/munged.pid \
        --log-file=$dir/munge/munged.log --seed-file=$dir/munge/munged.seed --force \
        --origin=10.199.0.2"
    munge -S "$socket" -n | unmunge -S "$socket" >/dev/null
    # %n is the node's name: each slurmd gets its own spool, log and pid file, and its own
    # TmpFS, where the pmix plugin makes its client directory (spmix_appdir_UID_JOB.STEP): in
    # a /tmp shared by the nodes the second node's step fails with "File exists".
    {
        cat <<CONF
ClusterName=naaice
SlurmctldHost=naaice-ctl(10.199.0.2)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/%n/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/%n/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/%n/slurmd.log
TmpFS=$dir/%n/tmp
SlurmdTimeout=30
CONF
        slurm_policy
        for n in "${nodes[@]}"; do
            echo "NodeName=naaice-$n NodeAddr=${addr[$n]} CPUs=2 State=UNKNOWN"
        done
        echo "PartitionName=debug Nodes=naaice-node[1-3] Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4"
    } >"$dir/slurm.conf"
    export SLURM_CONF="$dir/slurm.conf"
    on ctl slurmctld -i -f "$SLURM_CONF"
    for n in "${nodes[@]}"; do on "$n" slurmd -f "$SLURM_CONF"; done
    local idle
    for _ in $(seq 150); do
        idle=$(on ctl sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | wc -l)
        if [ "$idle" = 3 ]; then
            echo "slurm: nodes naaice-node[1-3] idle (SLURM_CONF=$SLURM_CONF)"
            return 0
        fi
        sleep 0.2
    done
    echo "slurm: the nodes did not become idle; logs:" >&2
    tail -n 20 "$dir/slurmctld.log" "$dir"/*/slurmd.log >&2 || true
    on ctl sinfo -N >&2 || true
    return 1
}

case "$cmd" in
start) [ $# = 3 ] || { echo "usage: $0 start DIR NETNS_DIR" >&2; exit 2; }; start "$3" ;;
stop) stop ;;
*) echo "usage: $0 start DIR NETNS_DIR | stop DIR" >&2; exit 2 ;;
esac
