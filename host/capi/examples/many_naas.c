/*
 * Many NAAs from one thread with the naaice-rs extensions naa_waitall and naa_waitany
 * (MPI-like; not in the reference).
 *
 * It starts N software NAAs in this process (naa_swnaa_*), NAA i serving function code
 * 40 + i with a kernel that adds 1 to every byte and then waits for the kernels of all other
 * NAAs: the rendezvous opens only when all N RPCs run at the same time. One thread invokes
 * all N RPCs and waits for them together; if they ran one after the other, every kernel
 * would give up after 20 s with the application code 0x55.
 *
 *   NAAICE_TRANSPORT=soft ./many_naas [N]        (N from 1 to 64, default 8)
 *
 * Prints "round R: N RPCs overlapped" per round and exits 0 when every RPC succeeded.
 */
#define _POSIX_C_SOURCE 200809L
#include <naaice_ap2.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_N 64
#define FIRST_CODE 40
#define LEN 4096
#define MISSED 0x55 /* application code: the rendezvous did not open in time */

/* A reusable barrier of n with a timeout. */
struct rendezvous {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int n;
    int arrived;
};

static uint32_t meet(void *user_data, const naa_swnaa_call *call, naa_swnaa_region *regions,
                     size_t n_regions) {
    (void)call;
    struct rendezvous *r = user_data;
    for (size_t i = 0; i < n_regions; i++) {
        unsigned char *p = regions[i].addr;
        for (size_t j = 0; j < regions[i].size; j++) {
            p[j]++;
        }
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 20;
    pthread_mutex_lock(&r->lock);
    r->arrived++;
    int round_end = (r->arrived + r->n - 1) / r->n * r->n;
    pthread_cond_broadcast(&r->cond);
    int rc = 0;
    while (r->arrived < round_end && rc != ETIMEDOUT) {
        rc = pthread_cond_timedwait(&r->cond, &r->lock, &until);
    }
    int met = r->arrived >= round_end;
    pthread_mutex_unlock(&r->lock);
    return met ? NAA_SUCCESS : MISSED;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 8;
    if (n < 1 || n > MAX_N) {
        fprintf(stderr, "usage: %s [N from 1 to %d]\n", argv[0], MAX_N);
        return 2;
    }
    struct rendezvous r = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, n, 0};
    naa_swnaa *servers[MAX_N] = {0};
    naa_handle handles[MAX_N];
    unsigned char *data[MAX_N] = {0};
    memset(handles, 0, sizeof handles);
    int ok = 1;

    /* N software NAAs, and NAA_SPEC naming them (read by the first naa_create). */
    static char spec[MAX_N * 32];
    size_t used = 0;
    for (int i = 0; i < n && ok; i++) {
        servers[i] = naa_swnaa_new();
        ok = servers[i] != NULL &&
             naa_swnaa_register_kernel(servers[i], FIRST_CODE + i, meet, &r) == 0 &&
             naa_swnaa_start(servers[i], "127.0.0.1", 0) == 0;
        if (ok) {
            used += (size_t)snprintf(spec + used, sizeof spec - used, "%s127.0.0.1:%d:%d:1",
                                     i ? "," : "", naa_swnaa_port(servers[i]), FIRST_CODE + i);
        }
    }
    ok = ok && setenv("NAA_SPEC", spec, 1) == 0;

    /* One handle per NAA: one in-place parameter of LEN bytes holding i. */
    for (int i = 0; i < n && ok; i++) {
        data[i] = malloc(LEN);
        ok = data[i] != NULL;
        if (ok) {
            memset(data[i], i, LEN);
            naa_param_t param = {data[i], LEN, false};
            ok = naa_create(FIRST_CODE + i, &param, 1, &param, 1, &handles[i]) == 0;
        }
    }

    for (int round = 1; round <= 2 && ok; round++) {
        for (int i = 0; i < n && ok; i++) {
            ok = naa_invoke(&handles[i]) == 0;
        }
        int finished = 0;
        if (ok && round == 1) {
            /* All at once: one status per handle. */
            naa_status statuses[MAX_N];
            ok = naa_waitall(n, handles, statuses) == 0;
            for (int i = 0; i < n && ok; i++) {
                ok = statuses[i].state == FINISHED && statuses[i].naa_error == NAA_SUCCESS;
                finished += ok;
            }
        } else if (ok) {
            /* One at a time, in the order they finish; NAA_UNDEFINED when none is left. */
            int index = 0;
            naa_status status;
            while (ok && naa_waitany(n, handles, &index, &status) == 0 &&
                   index != NAA_UNDEFINED) {
                ok = status.naa_error == NAA_SUCCESS;
                finished += ok;
            }
            ok = ok && finished == n;
        }
        for (int i = 0; i < n && ok; i++) {
            for (int j = 0; j < LEN && ok; j++) {
                ok = data[i][j] == (unsigned char)(i + round);
            }
        }
        if (ok) {
            printf("round %d: %d RPCs overlapped (%s)\n", round, finished,
                   round == 1 ? "naa_waitall" : "naa_waitany");
        }
    }
    if (!ok) {
        fprintf(stderr, "many_naas failed: %s\n", naa_last_error());
    }

    for (int i = 0; i < n; i++) {
        naa_finalize(&handles[i]);
        free(data[i]);
        if (servers[i] != NULL) {
            naa_swnaa_destroy(servers[i]);
        }
    }
    return ok ? 0 : 1;
}
