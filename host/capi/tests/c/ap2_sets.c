/*
 * C tests of the naaice-rs extensions naa_waitany, naa_testany, naa_waitall, naa_testall
 * (MPI-like sets of handles): NULL, never-invoked and already-reported handles, invalid
 * arrays, per-handle failures, and naa_testall reporting nothing until all finished. Run by
 * tests/c_programs.rs under the sanitizers with the software transport; the NAAs run in
 * this process. Exit status 0 when every check passed.
 */
#define _POSIX_C_SOURCE 200809L
#include <naaice_ap2.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"

#define FN_GATE 50 /* waits until the test opens the gate */
#define FN_ADD1 1  /* built-in */

static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static int gate_open = 0;

static uint32_t gate(void *user_data, const naa_swnaa_call *call, naa_swnaa_region *regions,
                     size_t n_regions) {
    (void)user_data;
    (void)call;
    (void)regions;
    (void)n_regions;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 20;
    pthread_mutex_lock(&gate_lock);
    while (!gate_open && pthread_cond_timedwait(&gate_cond, &gate_lock, &until) == 0) {
    }
    int open = gate_open;
    pthread_mutex_unlock(&gate_lock);
    return open ? NAA_SUCCESS : 0x55;
}

static void open_gate(void) {
    pthread_mutex_lock(&gate_lock);
    gate_open = 1;
    pthread_cond_broadcast(&gate_cond);
    pthread_mutex_unlock(&gate_lock);
}

static void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

int main(void) {
    naa_swnaa *naa = naa_swnaa_new();
    naa_swnaa *doomed = naa_swnaa_new();
    REQUIRE(naa != NULL && doomed != NULL);
    REQUIRE(naa_swnaa_register_kernel(naa, FN_GATE, gate, NULL) == 0);
    REQUIRE(naa_swnaa_set_max_connections(naa, 8) == 0);
    REQUIRE(naa_swnaa_start(naa, "127.0.0.1", 0) == 0);
    REQUIRE(naa_swnaa_start(doomed, "127.0.0.1", 0) == 0);
    char spec[256];
    int port = naa_swnaa_port(naa);
    snprintf(spec, sizeof spec, "127.0.0.1:%d:%d:1,127.0.0.1:%d:%d:1,127.0.0.1:%d:%d:1,127.0.0.1:%d:%d:1",
             port, FN_ADD1, port, FN_ADD1, port, FN_GATE, naa_swnaa_port(doomed), FN_ADD1);
    REQUIRE(setenv("NAA_SPEC", spec, 1) == 0);

    unsigned char a[16] = {0}, b[16] = {0}, g[16] = {0}, d[16] = {0};
    naa_param_t pa = {a, sizeof a, false}, pb = {b, sizeof b, false}, pg = {g, sizeof g, false},
                pd = {d, sizeof d, false};
    /* handles: 0 = add1 (a), 1 = NULL, 2 = add1 (b), 3 = gate (g) */
    naa_handle h[4];
    memset(h, 0, sizeof h);
    REQUIRE(naa_create(FN_ADD1, &pa, 1, &pa, 1, &h[0]) == 0);
    REQUIRE(naa_create(FN_ADD1, &pb, 1, &pb, 1, &h[2]) == 0);
    REQUIRE(naa_create(FN_GATE, &pg, 1, &pg, 1, &h[3]) == 0);

    int index = 7;
    bool flag = false;
    naa_status st, sts[4];

    /* Invalid arguments. */
    CHECK(naa_waitany(-1, h, &index, &st) == -1);
    CHECK(naa_last_error_kind() == NAA_ERRKIND_ARGUMENT);
    CHECK(naa_waitany(2, NULL, &index, &st) == -1);
    CHECK(naa_waitany(4, h, NULL, &st) == -1);
    CHECK(naa_waitall(4, h, NULL) == -1);
    CHECK(naa_testall(4, h, NULL, sts) == -1);
    CHECK(naa_testany(4, h, &index, NULL, &st) == -1);
    naa_handle twice[2] = {h[0], h[0]};
    CHECK(naa_waitall(2, twice, sts) == -1);
    CHECK(strstr(naa_last_error(), "same handle") != NULL);
    naa_handle forged[1] = {{FN_ADD1, (naaice_communication_context *)(uintptr_t)999999}};
    CHECK(naa_waitany(1, forged, &index, &st) == -1);

    /* Nothing in flight: NULL and never-invoked handles are inactive. */
    CHECK(naa_waitany(0, NULL, &index, &st) == 0 && index == NAA_UNDEFINED);
    CHECK(naa_waitall(0, NULL, NULL) == 0);
    CHECK(naa_waitany(4, h, &index, &st) == 0 && index == NAA_UNDEFINED && st.state == INIT);
    CHECK(naa_testany(4, h, &index, &flag, &st) == 0 && flag && index == NAA_UNDEFINED);
    CHECK(naa_waitall(4, h, sts) == 0);
    CHECK(sts[0].state == MRSP_DONE && sts[1].state == INIT && sts[3].state == MRSP_DONE);

    /* The gate kernel holds handle 3: waitany reports 0 and 2 (in either order), testall
     * reports nothing meanwhile. */
    REQUIRE(naa_invoke(&h[0]) == 0);
    REQUIRE(naa_invoke(&h[2]) == 0);
    REQUIRE(naa_invoke(&h[3]) == 0);
    int seen = 0;
    for (int k = 0; k < 2; k++) {
        CHECK(naa_waitany(4, h, &index, &st) == 0);
        CHECK((index == 0 || index == 2) && st.state == FINISHED && st.naa_error == NAA_SUCCESS);
        seen |= 1 << index;
    }
    CHECK(seen == 5);
    CHECK(a[0] == 1 && b[0] == 1);
    for (int k = 0; k < 10; k++) {
        CHECK(naa_testall(4, h, &flag, sts) == 0 && !flag);
        CHECK(naa_testany(4, h, &index, &flag, &st) == 0 && !flag && index == NAA_UNDEFINED);
        sleep_ms(2);
    }
    open_gate();
    do {
        CHECK(naa_testall(4, h, &flag, sts) == 0);
        sleep_ms(1);
    } while (!flag);
    CHECK(sts[3].state == FINISHED && sts[3].naa_error == NAA_SUCCESS);
    CHECK(sts[0].state == FINISHED && sts[0].naa_error == NAA_SUCCESS && sts[0].bytes_received == 0);
    CHECK(sts[1].state == INIT);

    /* A failure is per handle: the doomed NAA goes away under handle 1. */
    REQUIRE(naa_create(FN_ADD1, &pd, 1, &pd, 1, &h[1]) == 0);
    REQUIRE(naa_swnaa_stop(doomed) == 0);
    sleep_ms(50);
    naa_invoke(&h[1]); /* may already fail: the handle is dead either way */
    REQUIRE(naa_invoke(&h[0]) == 0);
    CHECK(naa_waitall(4, h, sts) == -1);
    CHECK(strstr(naa_last_error(), "handle 1") != NULL);
    CHECK(sts[1].state == ERROR);
    CHECK(sts[0].state == FINISHED && sts[0].naa_error == NAA_SUCCESS && a[0] == 2);
    /* The healthy handles go on. */
    REQUIRE(naa_invoke(&h[2]) == 0);
    CHECK(naa_waitany(4, h, &index, &st) == 0 && index == 2 && b[0] == 2);

    for (int i = 0; i < 4; i++) {
        naa_finalize(&h[i]);
    }
    /* Finalized handles are NULL handles. */
    CHECK(naa_waitany(4, h, &index, &st) == 0 && index == NAA_UNDEFINED);
    naa_swnaa_destroy(naa);
    naa_swnaa_destroy(doomed);
    printf("sets: %d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
