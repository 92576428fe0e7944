"""Every MPI rank offloads its slice of a vector to an NAA chosen by rank from NAA_SPEC.

    mpirun -np 4 -x NAA_SPEC=127.0.0.1:23456:1:1,127.0.0.1:23457:1:1 python mpi_offload.py

Ranks share the NAAs of NAA_SPEC (rank r takes entry r mod count, failing over to the
others), exactly as C programs do: the library reads the launcher's rank variables itself.
Kernel 1 (built into every software NAA) adds 1 to every byte; rank 0 gathers the slices and
checks them.
"""

import sys

import numpy as np
from mpi4py import MPI

import naaice


def main() -> int:
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    n = 1 << 16
    data = np.full(n, rank, dtype=np.uint8)  # in place: input and output
    rounds = 5
    with naaice.Naa(1, [data], [data]) as naa:
        entry = naa.entry
        for _ in range(rounds):
            status = naa.run()
            if not status.ok:
                print(f"rank {rank}: {status}", file=sys.stderr)
                comm.Abort(1)
    print(f"rank {rank} of {size}: NAA {entry}, {rounds} RPCs", flush=True)
    gathered = comm.gather(data, root=0)
    entries = comm.gather(entry, root=0)
    if rank == 0:
        wrong = sum(int(np.count_nonzero(g != (r + rounds) % 256)) for r, g in enumerate(gathered))
        naas = sorted(set(entries))
        print(f"mpi_offload: {size} ranks, {len(naas)} NAAs, {wrong} wrong bytes")
        return 1 if wrong else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
