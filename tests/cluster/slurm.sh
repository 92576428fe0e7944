#!/usr/bin/env bash
# A single-node Slurm cluster for CI: munge, slurmctld and slurmd from Debian's slurm-wlm,
# configured in a scratch directory (no cgroups, no accounting, no systemd). Needs root.
#
#   tests/cluster/slurm.sh start DIR   # writes DIR/slurm.conf, starts the daemons, waits for the node
#   tests/cluster/slurm.sh stop DIR    # stops what start started (by the PIDs it recorded)
#
# DIR (and its parents) must be searchable by the munge user.
#
# The cluster has one partition "debug" with this host as its node (8 CPUs declared, so 4+
# tasks fit on a 2-core machine) and the cluster-wide license "naa" (NAAICE_SLURM_NAAS of them,
# default 2): network-attached accelerators are not node-local, so they are licenses, not GRES.
set -euo pipefail
# shellcheck source=tests/cluster/slurm-common.sh
. "$(cd "$(dirname "$0")" && pwd)/slurm-common.sh"

cmd=${1:-}
dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
    echo "usage: $0 start|stop DIR" >&2
    exit 2
fi

stop() {
    # Jobs of this cluster first (their steps end with them), then the daemons.
    if [ -f "$dir/slurm.conf" ] && [ -f "$dir/slurmctld.pid" ]; then
        SLURM_CONF="$dir/slurm.conf" scancel --user=root 2>/dev/null || true
        sleep 0.5
    fi
    for pidfile in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munged.pid"; do
        [ -f "$pidfile" ] || continue
        pid=$(cat "$pidfile")
        if kill "$pid" 2>/dev/null; then
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -9 "$pid" 2>/dev/null || true
        fi
        rm -f "$pidfile"
    done
}

start() {
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    host=$(hostname -s)
    mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
    # munge: a fresh key and socket of our own, so that nothing of the machine's is touched.
    munge_key "$dir/munge"
    mkdir -p /run/munge
    chown munge:munge /run/munge
    su -s /bin/sh munge -c "/usr/sbin/munged --key-file=$dir/munge/munge.key \
        --socket=/run/munge/munge.socket.2 --pid-file=$dir/munge/munged.pid \
        --log-file=$dir/munge/munged.log --seed-file=$dir/munge/munged.seed --force"
    cp "$dir/munge/munged.pid" "$dir/munged.pid"
    munge -n | unmunge >/dev/null
    {
        cat <<CONF
ClusterName=naaice
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
CONF
        slurm_policy
        echo "NodeName=$host CPUs=8 State=UNKNOWN"
        echo "PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4"
    } >"$dir/slurm.conf"
    export SLURM_CONF="$dir/slurm.conf"
    slurmctld -i -f "$SLURM_CONF"
    slurmd -f "$SLURM_CONF"
    for _ in $(seq 100); do
        if sinfo -h -o '%T' 2>/dev/null | grep -qx 'idle'; then
            echo "slurm: node $host idle (SLURM_CONF=$SLURM_CONF)"
            return 0
        fi
        sleep 0.2
    done
    echo "slurm: the node did not become idle; logs:" >&2
    tail -n 20 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
    sinfo >&2 || true
    return 1
}

case "$cmd" in
start) start ;;
stop) stop ;;
*) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
