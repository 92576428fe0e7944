#!/usr/bin/env bash
# The Slurm batch job of the multi-host stage (tests/cluster/multinode.sh submits it with
# `sbatch -N 3 -n 6 -L naa:2`): turns the job's licenses into NAA_SPEC with slurm/naaice-spec
# (the NAAs run on hosts of their own), then runs the MPI example as 6 tasks over the 3 nodes
# with `srun --mpi=pmix`, Open MPI's TCP traffic held to the bridge's subnet. The full output
# goes to NAAICE_JOB_DIR/srun.log; the job prints the ranks' lines and Open MPI's connections.
#
# Environment (exported by sbatch): NAAICE_INVENTORY, NAAICE_APP (the MPI program),
# NAAICE_SPEC_TOOL (slurm/naaice-spec), NAAICE_JOB_DIR, NAAICE_SUBNET (the nodes' prefix).
set -euo pipefail

echo "job $SLURM_JOB_ID: $SLURM_NTASKS tasks on $SLURM_JOB_NODELIST (batch script on $(hostname))"
NAA_SPEC=$("$NAAICE_SPEC_TOOL" --inventory "$NAAICE_INVENTORY")
export NAA_SPEC NAAICE_TRANSPORT=soft
echo "NAA_SPEC=$NAA_SPEC"
# Ranks on different nodes talk over TCP on the bridge (shared memory within a node); the
# verbose level makes each TCP connection between ranks show in the log.
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_tcp_if_include=$NAAICE_SUBNET \
    OMPI_MCA_oob_tcp_if_include=$NAAICE_SUBNET OMPI_MCA_btl_base_verbose=100
status=0
srun --mpi=pmix -n "$SLURM_NTASKS" "$NAAICE_APP" 600000 >"$NAAICE_JOB_DIR/srun.log" 2>&1 || status=$?
grep -E '^(rank|mpi_offload)' "$NAAICE_JOB_DIR/srun.log" | sort || true
echo "Open MPI's TCP connections between ranks (btl_tcp_if_include=$NAAICE_SUBNET):"
grep -E 'btl:tcp: now connected to' "$NAAICE_JOB_DIR/srun.log" | sort || true
if [ "$status" != 0 ]; then
    echo "srun failed ($status); its output:" >&2
    cat "$NAAICE_JOB_DIR/srun.log" >&2
fi
exit "$status"
