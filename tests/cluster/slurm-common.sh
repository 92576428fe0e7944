#!/usr/bin/env bash
# Shell functions shared by slurm.sh (one node) and slurm-nodes.sh (three nodes); sourced,
# not run.

# munge_key DIR: a fresh munge key in DIR (owned by munge, readable only by it).
munge_key() {
    chown munge:munge "$1"
    dd if=/dev/urandom bs=1 count=1024 of="$1/munge.key" status=none
    chown munge:munge "$1/munge.key"
    chmod 400 "$1/munge.key"
}

# slurm_policy: the slurm.conf lines both clusters share: no cgroups, accounting or MPI
# default, CPUs as the consumable, and the cluster-wide license "naa" (NAAICE_SLURM_NAAS of
# them, default 2).
slurm_policy() {
    cat <<CONF
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
Licenses=naa:${NAAICE_SLURM_NAAS:-2}
CONF
}
