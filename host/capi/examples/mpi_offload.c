/*
 * MPI ranks sharing a pool of NAAs: a distributed array of N bytes, each rank offloads its
 * slice to its NAA (chosen from NAA_SPEC by the rank, see the README section "Running under
 * Slurm and MPI"), overlaps the RPCs with local work through naa_test, and rank 0 reduces
 * and verifies the result.
 *
 * The kernel is the built-in function code 1 of the software NAA (and of the C reference):
 * add 1 to every byte of every parameter. The slice is one in-place parameter (the same
 * memory as input and output), so after ROUNDS RPCs every byte grew by ROUNDS (mod 256).
 *
 *   naaice-swnaa --port 12345 &  naaice-swnaa --port 12346 &
 *   NAAICE_TRANSPORT=soft NAA_SPEC=127.0.0.1:12345:1:1,127.0.0.1:12346:1:1 \
 *       mpirun -np 4 ./mpi_offload [total bytes]
 *
 * Exit status 0 on every rank when the reduced result is correct.
 */
#include <mpi.h>
#include <naaice_ap2.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define FNCODE_ADD_ONE 1
#define ROUNDS 3

/* The initial value of global element i. */
static uint8_t initial(uint64_t i) { return (uint8_t)(i % 251u); }

/* Local work to overlap with an RPC: the expected checksum of a slice. */
static uint64_t expected_sum(uint64_t first, uint64_t count, unsigned rounds) {
    uint64_t sum = 0;
    for (uint64_t i = first; i < first + count; i++) {
        sum += (uint8_t)(initial(i) + rounds);
    }
    return sum;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    uint64_t total = 1u << 20;
    if (argc > 1) {
        char *end = NULL;
        unsigned long long v = strtoull(argv[1], &end, 10);
        if (end == argv[1] || *end != '\0' || v < (unsigned long long)size || v > (1ull << 32)) {
            if (rank == 0) {
                fprintf(stderr, "usage: %s [total bytes (ranks..2^32)]\n", argv[0]);
            }
            MPI_Finalize();
            return 2;
        }
        total = v;
    }
    /* This rank's slice: [first, first + count). */
    uint64_t base = total / (uint64_t)size, extra = total % (uint64_t)size;
    uint64_t r = (uint64_t)rank;
    uint64_t count = base + (r < extra ? 1 : 0);
    uint64_t first = r * base + (r < extra ? r : extra);
    uint8_t *slice = malloc(count);
    int ok = slice != NULL;
    if (ok) {
        for (uint64_t i = 0; i < count; i++) {
            slice[i] = initial(first + i);
        }
    }

    naa_param_t params[1] = {{slice, (size_t)count, false}};
    naa_handle handle;
    naa_status status;
    bool created = false;
    unsigned long polls = 0;
    uint64_t expected_local = 0;
    if (ok && naa_create(FNCODE_ADD_ONE, params, 1, params, 1, &handle) == 0) {
        created = true;
    } else {
        fprintf(stderr, "rank %d: naa_create failed (reason above)\n", rank);
        ok = 0;
    }
    for (unsigned round = 1; ok && round <= ROUNDS; round++) {
        if (naa_invoke(&handle) != 0) {
            ok = 0;
            break;
        }
        bool done = false;
        if (round < ROUNDS) {
            /* Overlap: poll while doing local work. */
            while (ok && !done) {
                polls++;
                if (naa_test(&handle, &done, &status) != 0) {
                    ok = 0;
                }
            }
        } else {
            expected_local = expected_sum(first, count, ROUNDS); /* overlapped local work */
            if (naa_wait(&handle, &status) != 0) {
                ok = 0;
            }
        }
        if (ok && (status.state != FINISHED || status.naa_error != NAA_SUCCESS)) {
            fprintf(stderr, "rank %d, RPC %u: state %d, naa_error %d\n", rank, round,
                    (int)status.state, (int)status.naa_error);
            ok = 0;
        }
    }
    if (created && naa_finalize(&handle) != 0) {
        ok = 0;
    }

    /* Local checks, then the reduction. */
    uint64_t local_sum = 0, wrong = 0;
    for (uint64_t i = 0; ok && i < count; i++) {
        local_sum += slice[i];
        if (slice[i] != (uint8_t)(initial(first + i) + ROUNDS)) {
            wrong++;
        }
    }
    if (ok && local_sum != expected_local) {
        wrong++;
    }
    uint64_t global_sum = 0, global_wrong = 0;
    int all_ok = 0;
    MPI_Reduce(&local_sum, &global_sum, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&wrong, &global_wrong, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    printf("rank %d of %d: %llu bytes offloaded, %u RPCs, %lu naa_test polls, %s\n", rank, size,
           (unsigned long long)count, ROUNDS, polls, ok && wrong == 0 ? "correct" : "FAILED");
    int rc = all_ok ? 0 : 1;
    if (rank == 0) {
        uint64_t expected = expected_sum(0, total, ROUNDS);
        if (!all_ok || global_wrong != 0 || global_sum != expected) {
            fprintf(stderr, "mpi_offload: FAILED (%llu wrong, sum %llu, expected %llu)\n",
                    (unsigned long long)global_wrong, (unsigned long long)global_sum,
                    (unsigned long long)expected);
            rc = 1;
        } else {
            printf("mpi_offload: %llu bytes over %d ranks verified, sum %llu\n",
                   (unsigned long long)total, size, (unsigned long long)global_sum);
        }
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(slice);
    MPI_Finalize();
    return rc;
}
