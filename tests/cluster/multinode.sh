#!/usr/bin/env bash
# CI stage "Slurm and MPI across hosts": a cluster of network namespaces on one machine
# (tests/cluster/netns.sh: 3 compute nodes, 2 NAA hosts, a controller and a host outside the
# nodes' prefix, each with its own address and hostname, on one bridge), real Slurm across it
# (tests/cluster/slurm-nodes.sh) and software NAAs on the NAA hosts that serve only the
# compute nodes' prefix (--allow). Then:
#   job      sbatch -N 3 -n 6 -L naa:2: naaice-spec builds NAA_SPEC from the inventory, srun
#            --mpi=pmix runs host/capi/examples/mpi_offload.c; rank 0 verifies; Open MPI's
#            TCP connections between ranks go over the bridge; both NAAs served all 3 nodes.
#   access   a client on the outside host is rejected at connect (its error and the NAA's
#            log line say so).
#   burst    24 ranks (8 per node) create their handles at once on the 2 NAAs.
# The burst and the faults run tests/examples/cluster_rank.rs as the ranks (srun -N 3 -n 6
# for (a) and (c); started on the nodes directly for (b), whose cut would stall Slurm):
#   (a)      an NAA host's link is cut mid-job: its ranks get an error within their RPC
#            deadline, fail over on their next create, every RPC is verified exactly once.
#   (b)      a compute node's link is cut while its ranks hold every NAA slot: the NAAs free
#            the slots (idle timeout) and ranks started afterwards are served.
#   (c)      an NAA is killed and restarted mid-job: later creates use it again.
# Prints the time each fault took to detect and recover. Needs root; prints SKIP and exits 0
# where namespaces cannot be made (NAAICE_REQUIRE_NETNS=1, as in CI, makes that an error).
#
# Usage: tests/cluster/multinode.sh        (from anywhere)
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
netns=$repo/tests/cluster/netns.sh

start=$SECONDS
echo "--- packages"
# As root (else the check below says why it skips): Slurm, munge, Open MPI, and iproute2 and
# util-linux for the namespaces.
if [ "$(id -u)" = 0 ]; then
    pkgs=(slurm-wlm munge openmpi-bin libopenmpi-dev iproute2 util-linux)
    missing=()
    for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
    if ((${#missing[@]})); then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
    fi
fi
packages_time=$((SECONDS - start))

if ! why=$("$netns" check); then
    if [ "${NAAICE_REQUIRE_NETNS:-0}" = 1 ]; then
        echo "tests/cluster/multinode.sh: network namespaces unavailable: $why" >&2
        exit 1
    fi
    echo "SKIP tests/cluster/multinode.sh: network namespaces unavailable: $why"
    exit 0
fi

mpirun --version | head -n 1
slurmctld -V
mark=$SECONDS
timings=("packages $packages_time s")
lap() {
    timings+=("$1 $((SECONDS - mark)) s")
    mark=$SECONDS
}

subnet=10.199.0.0/24 # the compute nodes (and NAA hosts); the outside host is 10.199.1.10
declare -A ip=([node1]=10.199.0.11 [node2]=10.199.0.12 [node3]=10.199.0.13
    [naa1]=10.199.0.21 [naa2]=10.199.0.22 [outside]=10.199.1.10)
port=12345

work=$(mktemp -d "${TMPDIR:-/tmp}/naaice-nodes.XXXXXX")
chmod 755 "$work" # the munge user reaches its key and socket below it
declare -A naa_pid=()
bg_pids=()
cleanup() {
    local status=$?
    if [ "$status" != 0 ]; then
        echo "--- failed ($status): logs"
        tail -n 15 "$work"/*.log "$work"/slurm/*.log "$work"/slurm/*/slurmd.log 2>/dev/null || true
    fi
    for pid in "${naa_pid[@]}" "${bg_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    "$repo/tests/cluster/slurm-nodes.sh" stop "$work/slurm" || true
    "$netns" down "$work/net" || true
    rm -rf "$work"
}
trap cleanup EXIT

# Runs a command on a host; "${on_host[@]}" HOST CMD & gives $! of the command itself.
on_host=("$netns" exec "$work/net")
on() { "${on_host[@]}" "$@"; }
now() { date +%s.%N; }
# Milliseconds from epoch seconds $1 to $2.
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", (b - a) * 1000 }'; }


echo "--- build: C library, naaice-swnaa, the MPI example, the fault ranks (cluster_rank)"
cargo build --locked -p naaice-capi
cargo build --locked --bin naaice-swnaa --bin naaice-bench --bin naaice-info # install.sh installs them
cargo build --locked -p naaice-tests --example cluster_rank
target=$(cargo metadata --format-version 1 --no-deps |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
NAAICE_LIB_DIR="$target/debug" host/capi/install.sh "$work/prefix" >/dev/null
swnaa=$target/debug/naaice-swnaa
rank_bin=$target/debug/examples/cluster_rank
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" LD_LIBRARY_PATH="$work/prefix/lib"
# shellcheck disable=SC2046
mpicc -Wall -Wextra -Werror -O2 host/capi/examples/mpi_offload.c \
    $(pkg-config --cflags --libs naaice) -o "$work/mpi_offload"
lap build

echo "--- hosts: network namespaces on one bridge"
"$netns" up "$work/net"
cat "$work/net/hosts"
for h in node1 naa1 outside; do
    printf '%s: hostname %s, %s\n' "$h" "$(on "$h" hostname)" "$(on "$h" ip -br -4 addr show eth0)"
done
lap hosts

# NAA hosts: naaice-swnaa on the host's address, serving only the compute nodes' prefix.
# start_naa NAME [OPTIONS...]: log in $work/NAME-$phase.log.
phase=setup
start_naa() {
    local name=$1 log
    shift
    log=$work/$name-$phase.log
    "${on_host[@]}" "$name" "$swnaa" --address "${ip[$name]}" --port "$port" --transport soft \
        --allow "$subnet" --log info "$@" >"$log" 2>&1 &
    naa_pid[$name]=$!
    for _ in $(seq 100); do
        grep -qs "software NAA listening" "$log" && return 0
        sleep 0.1
    done
    echo "NAA $name did not start:" >&2
    cat "$log" >&2
    return 1
}
stop_naas() {
    local name
    for name in "${!naa_pid[@]}"; do kill "${naa_pid[$name]}" 2>/dev/null || true; done
    for name in "${!naa_pid[@]}"; do wait "${naa_pid[$name]}" 2>/dev/null || true; done
    naa_pid=()
}
# The clients an NAA log shows: "ADDRESS COUNT" per client host.
clients() { grep -o 'client connected peer=Some([0-9.]*' "$1" | sed 's/.*(//' | sort | uniq -c; }
# RPCs an NAA log's connection summaries count.
rpcs() { grep -o 'connection closed .* rpcs=[0-9]*' "$1" | sed 's/.*rpcs=//' | awk '{ s += $1 } END { print s + 0 }'; }
# The epoch seconds of the first log line of FILE matching PATTERN (tracing's UTC timestamps).
log_time() {
    local t
    t=$(grep -m 1 -E "$2" "$1" | awk '{ print $1 }')
    [ -n "$t" ] && date -d "$t" +%s.%N
}

echo "--- Slurm across the nodes: slurmctld on ctl, slurmd on node1-3, Licenses=naa:2"
NAAICE_SLURM_NAAS=2 tests/cluster/slurm-nodes.sh start "$work/slurm" "$work/net"
export SLURM_CONF=$work/slurm/slurm.conf
on ctl sinfo -N -o '%N %T %c %o'
on ctl scontrol show lic
lap slurm

echo "--- job: sbatch -N 3 -n 6 -L naa:2, srun --mpi=pmix of mpi_offload"
phase=job
start_naa naa1 --max-connections 6
start_naa naa2 --max-connections 6
mkdir -p "$work/job"
{
    echo "# LICENSE ADDRESS PORT FN_CODE PARAM_COUNT"
    echo "naa ${ip[naa1]} $port 1 1"
    echo "naa ${ip[naa2]} $port 1 1"
} >"$work/naas"
export NAAICE_INVENTORY=$work/naas NAAICE_APP=$work/mpi_offload NAAICE_SPEC_TOOL=$repo/slurm/naaice-spec \
    NAAICE_JOB_DIR=$work/job NAAICE_SUBNET=$subnet
status=0
on ctl timeout 120 sbatch --wait -N 3 -n 6 -L naa:2 -t 3 -o "$work/job/out" \
    tests/cluster/job-nodes.sh || status=$?
cat "$work/job/out"
[ "$status" = 0 ] || { echo "the Slurm job failed ($status)" >&2; exit 1; }
grep -q "over 6 ranks verified" "$work/job/out"
# Every TCP connection between ranks is to a node's address on the bridge.
links=$(grep -c 'now connected to' "$work/job/out" || true)
off=$(grep 'now connected to' "$work/job/out" | grep -vc 'now connected to 10\.199\.0\.1[123],' || true)
echo "Open MPI: $links TCP connections between ranks, all to the nodes' bridge addresses ($off elsewhere)"
if [ "$links" = 0 ] || [ "$off" != 0 ]; then
    echo "MPI traffic did not cross the bridge" >&2
    exit 1
fi
for name in naa1 naa2; do
    echo "$name (${ip[$name]}) served:"
    clients "$work/$name-job.log"
    n=$(clients "$work/$name-job.log" | wc -l)
    [ "$n" = 3 ] || { echo "$name did not serve ranks of all 3 nodes" >&2; exit 1; }
done
lap job

echo "--- access: a client on the outside host (${ip[outside]}) is rejected"
status=0
on outside env NAA_SPEC="${ip[naa1]}:$port:1:1" NAAICE_TRANSPORT=soft NAAICE_CONNECT_TIMEOUT=1s \
    "$rank_bin" --rounds 1 >"$work/outside.out" 2>"$work/outside.err" || status=$?
echo "client error: $(cat "$work/outside.err")"
line=$(grep -m 1 "client address not allowed" "$work/naa1-job.log" || true)
echo "NAA log: $line"
[ "$status" != 0 ] || { echo "the outside client was served" >&2; exit 1; }
grep -q "NAA access denied: ${ip[outside]} is not in the allowed prefixes ($subnet)" "$work/outside.err"
grep -q "tried ${ip[naa1]}:$port \[entry 1\] .*connection rejected by the peer" "$work/outside.err"
[[ $line == *"${ip[outside]}"* ]] || { echo "no rejection line naming ${ip[outside]}" >&2; exit 1; }
stop_naas
lap access

# Fault runs: cluster_rank under srun (SLURM_PROCID picks the NAA); RPC deadline 2 s.
rank_env=(env NAA_SPEC="${ip[naa1]}:$port:1:1,${ip[naa2]}:$port:1:1" NAAICE_TRANSPORT=soft
    NAAICE_RPC_TIMEOUT=2s)
# Verified, failed attempts summed over the DONE lines of FILE.
done_sum() { grep '^DONE' "$1" | sed 's/.*verified=\([0-9]*\) failed_attempts=\([0-9]*\).*/\1 \2/' |
    awk '{ v += $1; f += $2 } END { print v + 0, f + 0 }'; }
# Waits until NAA log FILE shows N client connections.
wait_clients() {
    for _ in $(seq 200); do
        [ "$(grep -cs 'client connected' "$1" || true)" -ge "$2" ] && return 0
        sleep 0.05
    done
    echo "$1: fewer than $2 clients" >&2
    return 1
}

echo "--- setup burst: 24 ranks (8 per node) create their handles at once on 2 NAAs"
phase=burst
start_naa naa1 --max-connections 12
start_naa naa2 --max-connections 12
on ctl "${rank_env[@]}" srun -N 3 -n 24 --overcommit -t 2 "$rank_bin" --rounds 2 --pause-ms 0 \
    >"$work/burst.out" 2>&1 || { cat "$work/burst.out" >&2; exit 1; }
read -r verified failed < <(done_sum "$work/burst.out")
[ "$verified" = 48 ] || { echo "the burst verified $verified RPCs, want 48" >&2; exit 1; }
burst=$(grep '^CREATE' "$work/burst.out" | sed 's/.* ms=\([0-9]*\).*/\1/' | sort -n |
    awk '{ v[NR] = $1 } END { printf "median %d ms, slowest %d ms", v[int((NR + 1) / 2)], v[NR] }')
echo "setup burst: 24 creates (connect + MRSP) on 2 NAAs: $burst"
for name in naa1 naa2; do
    echo "$name: $(grep -c 'client connected' "$work/$name-burst.log") connections"
done
stop_naas
lap burst

echo "--- fault (a): naa1's link is cut mid-job"
phase=a
start_naa naa1 --max-connections 6 --idle-timeout 3s
start_naa naa2 --max-connections 6 --idle-timeout 3s
rounds=30
"${on_host[@]}" ctl "${rank_env[@]}" srun -N 3 -n 6 -t 2 "$rank_bin" --rounds $rounds --pause-ms 100 \
    >"$work/a.out" 2>&1 &
job=$!
bg_pids+=("$job")
wait_clients "$work/naa1-a.log" 3
sleep 1
cut_at=$(now)
"$netns" cut naa1
echo "naa1 cut at $(date -d "@$cut_at" +%T.%3N)"
status=0
wait "$job" || status=$?
"$netns" mend naa1
grep -E '^(ERROR|FAILOVER|DONE)' "$work/a.out" | sort -k2,2 || true
[ "$status" = 0 ] || { cat "$work/a.out" >&2; echo "the job failed ($status)" >&2; exit 1; }
read -r verified failed < <(done_sum "$work/a.out")
[ "$verified" = $((6 * rounds)) ] || { echo "verified $verified RPCs, want $((6 * rounds))" >&2; exit 1; }
[ "$failed" -ge 1 ] || { echo "no rank noticed the cut" >&2; exit 1; }
grep '^FAILOVER' "$work/a.out" | grep -q "naa=${ip[naa2]}" ||
    { echo "no rank failed over to naa2" >&2; exit 1; }
stop_naas # every connection logs its summary
served=$(($(rpcs "$work/naa1-a.log") + $(rpcs "$work/naa2-a.log")))
echo "RPCs: $verified verified by the ranks, $failed failed attempts repeated; the NAAs count $served"
# An RPC the cut NAA ran but could not answer is counted there and repeated elsewhere: at
# most one per failed attempt; none lost (each rank checks its data after every RPC).
if [ "$served" -lt "$verified" ] || [ "$served" -gt $((verified + failed)) ]; then
    echo "the NAAs' count $served does not fit $verified verified + $failed failed" >&2
    exit 1
fi
a_detect=$(grep '^ERROR' "$work/a.out" | sed 's/.* ms=\([0-9]*\).*/\1/' | sort -n | tail -n 1)
a_failover=$(grep '^FAILOVER' "$work/a.out" | sed 's/.*ms_since_error=\([0-9]*\).*/\1/' | sort -n | tail -n 1)
a_ranks=$(grep -c '^ERROR' "$work/a.out")
lap "fault-a"

echo "--- fault (c): naa2 is killed and restarted mid-job"
phase=c
start_naa naa1 --max-connections 6
start_naa naa2 --max-connections 6
"${on_host[@]}" ctl "${rank_env[@]}" srun -N 3 -n 6 -t 2 "$rank_bin" --rounds 40 --pause-ms 100 \
    --recreate-every 4 >"$work/c.out" 2>&1 &
job=$!
bg_pids+=("$job")
wait_clients "$work/naa2-c.log" 3
sleep 0.5
kill -9 "${naa_pid[naa2]}"
wait "${naa_pid[naa2]}" 2>/dev/null || true
kill_at=$(now)
echo "naa2 killed at $(date -d "@$kill_at" +%T.%3N)"
sleep 1
phase=c2
start_naa naa2 --max-connections 6
restart_at=$(now)
echo "naa2 restarted at $(date -d "@$restart_at" +%T.%3N)"
status=0
wait "$job" || status=$?
grep -E '^(ERROR|FAILOVER|DONE)' "$work/c.out" | sort -k2,2 || true
[ "$status" = 0 ] || { cat "$work/c.out" >&2; echo "the job failed ($status)" >&2; exit 1; }
read -r verified failed < <(done_sum "$work/c.out")
[ "$verified" = $((6 * 40)) ] || { echo "verified $verified RPCs, want 240" >&2; exit 1; }
# The first create on the restarted naa2.
back=$(grep "^CREATE .*naa=${ip[naa2]}:" "$work/c.out" |
    sed 's/.*epoch=\([0-9.]*\).*/\1/' | awk -v r="$restart_at" '$1 > r' | sort -n | head -n 1)
served_again=$(grep -c 'client connected' "$work/naa2-c2.log" || true)
echo "restarted naa2 served $served_again connections"
if [ -z "$back" ] || [ "$served_again" = 0 ]; then
    echo "the restarted naa2 was not used again" >&2
    exit 1
fi
c_detect=$(grep '^ERROR' "$work/c.out" | sed 's/.* ms=\([0-9]*\).*/\1/' | sort -n | tail -n 1)
c_back=$(ms "$restart_at" "$back")
stop_naas
lap "fault-c"

echo "--- fault (b): node3's link is cut while its ranks hold every NAA slot"
phase=b
start_naa naa1 --max-connections 1 --idle-timeout 2s
start_naa naa2 --max-connections 1 --idle-timeout 2s
for r in 0 1; do
    "${on_host[@]}" node3 "${rank_env[@]}" NAAICE_RANK=$r NAAICE_NRANKS=2 "$rank_bin" --rounds 100000 \
        --pause-ms 100 >"$work/b-node3-$r.out" 2>&1 &
    bg_pids+=($!)
done
wait_clients "$work/naa1-b.log" 1
wait_clients "$work/naa2-b.log" 1
sleep 0.5
cut_at=$(now)
"$netns" cut node3
echo "node3 cut at $(date -d "@$cut_at" +%T.%3N); ranks on node1 start now"
for r in 0 1; do
    "${on_host[@]}" node1 "${rank_env[@]}" NAAICE_RANK=$r NAAICE_NRANKS=2 NAAICE_CONNECT_TIMEOUT=30s \
        "$rank_bin" --rounds 5 --pause-ms 50 >"$work/b-node1-$r.out" 2>&1 &
    later[r]=$!
done
status=0
for r in 0 1; do wait "${later[r]}" || status=$?; done
cat "$work"/b-node1-*.out
[ "$status" = 0 ] || { echo "ranks started after the cut were not served" >&2; exit 1; }
"$netns" mend node3
# The later ranks found every slot taken (node3's) until the NAAs freed them.
full=$(cat "$work/naa1-b.log" "$work/naa2-b.log" | grep -c "connection limit reached; rejecting" || true)
echo "while node3's slots were held, the NAAs logged $full lines rejecting newcomers"
if [ "$full" = 0 ]; then
    echo "the ranks after the cut never found the slots taken: nothing was tested" >&2
    exit 1
fi
b_detect=""
for name in naa1 naa2; do
    t=$(log_time "$work/$name-b.log" "connection closed peer=Some\\(${ip[node3]}:")
    [ -n "$t" ] || { echo "$name never freed node3's slot" >&2; exit 1; }
    echo "$name freed node3's slot $(ms "$cut_at" "$t") ms after the cut"
    b_detect+="$(ms "$cut_at" "$t") "
done
b_served=$(grep '^CREATE' "$work"/b-node1-*.out | sed 's/.*epoch=\([0-9.]*\).*/\1/' | sort -n | tail -n 1)
b_recover=$(ms "$cut_at" "$b_served")
stop_naas
lap "fault-b"

echo "--- figures (this machine; noisy where others build)"
echo "setup burst: 24 ranks on 2 NAAs, connect + MRSP: $burst"
echo "(a) NAA link cut, $a_ranks ranks on it: error after at most $a_detect ms (RPC deadline 2000 ms), failed over within $a_failover ms of the error"
echo "(b) compute node link cut: the NAAs freed its slots after ${b_detect% } ms (idle timeout 2000 ms); ranks started at the cut were all served $b_recover ms after it"
echo "(c) NAA killed: its ranks' error after at most $c_detect ms; restarted NAA used again $c_back ms after its restart"
echo "multinode stage: ${timings[*]}; total $((SECONDS - start)) s"
