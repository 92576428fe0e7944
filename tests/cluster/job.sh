#!/usr/bin/env bash
# The Slurm batch job of the CI cluster stage (tests/cluster/ci.sh submits it with
# `sbatch -n 4 -L naa:2`): starts the software NAAs of the inventory that live on this host as
# background processes, turns the job's licenses into NAA_SPEC with slurm/naaice-spec, and
# runs the MPI example as 4 tasks with `srun`.
#
# Environment (set by ci.sh, exported by sbatch): NAAICE_INVENTORY (the inventory),
# NAAICE_SWNAA (the naaice-swnaa binary), NAAICE_APP (the MPI program), NAAICE_SPEC_TOOL
# (slurm/naaice-spec), NAAICE_JOB_DIR (where the NAAs' logs go).
set -euo pipefail

pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

echo "job $SLURM_JOB_ID on $(hostname -s): $SLURM_NTASKS tasks"
# The software NAAs listed in the inventory for this host (a real cluster has FPGAs there).
i=0
while read -r license address port fncode count; do
    case "$license" in '' | '#'*) continue ;; esac
    [ "$address" = 127.0.0.1 ] || continue
    i=$((i + 1))
    log="$NAAICE_JOB_DIR/naa$i.log"
    "$NAAICE_SWNAA" --address "$address" --port "$port" --log info >"$log" 2>&1 &
    pids+=($!)
    echo "started software NAA $i ($license, function $fncode, $count input) on $address:$port"
done <"$NAAICE_INVENTORY"
# Wait until they listen. (Not strictly needed: naa_create retries until the connect deadline,
# NAAICE_CONNECT_TIMEOUT; waiting keeps ranks on the NAA their rank selects.)
for n in $(seq "$i"); do
    for _ in $(seq 100); do
        grep -q "listening" "$NAAICE_JOB_DIR/naa$n.log" && break
        sleep 0.1
    done
done

NAA_SPEC=$("$NAAICE_SPEC_TOOL" --inventory "$NAAICE_INVENTORY")
export NAA_SPEC NAAICE_TRANSPORT=soft
echo "NAA_SPEC=$NAA_SPEC"
# Open MPI's processes find each other through Slurm's PMIx plugin (Debian's Open MPI has no
# PMI-1/2 support: plain `srun -n 4` makes MPI_Init fail).
srun --mpi=pmix -n "$SLURM_NTASKS" "$NAAICE_APP" 400000
