/*
 * C tests of the middleware API (naa_*) and the software NAA API (naa_swnaa_*), run by
 * tests/c_programs.rs under AddressSanitizer, LeakSanitizer and UBSan with the software
 * transport (NAAICE_TRANSPORT=soft). The NAA runs in this process, started through the C API.
 * Exit status 0 when every check passed.
 */
#define _POSIX_C_SOURCE 200809L
#include <naaice_ap2.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int checks = 0;
static int failures = 0;

#define CHECK(cond)                                                                         \
    do {                                                                                    \
        checks++;                                                                           \
        if (!(cond)) {                                                                      \
            failures++;                                                                     \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);        \
        }                                                                                   \
    } while (0)

#define REQUIRE(cond)                                                                       \
    do {                                                                                    \
        checks++;                                                                           \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "%s:%d: required check failed: %s\n", __FILE__, __LINE__, #cond); \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

enum {
    FN_ADD1 = 1,      /* built-in: +1 on every byte of every region */
    FN_ADD2 = 2,      /* built-in: +2 */
    FN_EMPTY = 3,     /* built-in: nothing */
    FN_ADD_CFG = 20,  /* data += cfg[0]; cfg is a single-send input */
    FN_APP_ERR = 21,  /* returns the application code 0x42 */
    FN_SLOW = 22,     /* runs longer than the kernel timeout */
    FN_UNKNOWN = 30,  /* no kernel: SOCKET_UNAVAIL */
    FN_REFUSED = 40,  /* NAA_SPEC entry whose port nobody listens on */
    FN_NO_ENTRY = 99, /* not in NAA_SPEC */
};

#define APP_CODE 0x42
#define BAD_FLAGS 0x11
#define N_THREADS 4

/* ---- kernels ---------------------------------------------------------------------------- */

static uint32_t add_cfg(void *user_data, const naa_swnaa_call *call, naa_swnaa_region *regions,
                        size_t n_regions) {
    int *calls = user_data;
    __atomic_fetch_add(calls, 1, __ATOMIC_RELAXED);
    if (call->fncode != FN_ADD_CFG || n_regions != 2 ||
        regions[0].flags != (NAA_REGION_INPUT | NAA_REGION_SINGLESEND) ||
        regions[1].flags != (NAA_REGION_INPUT | NAA_REGION_OUTPUT) || regions[0].size < 1) {
        return BAD_FLAGS;
    }
    unsigned char add = ((unsigned char *)regions[0].addr)[0];
    unsigned char *data = regions[1].addr;
    for (size_t i = 0; i < regions[1].size; i++) {
        data[i] = (unsigned char)(data[i] + add);
    }
    return NAA_SUCCESS;
}

static uint32_t app_err(void *user_data, const naa_swnaa_call *call, naa_swnaa_region *regions,
                        size_t n_regions) {
    (void)user_data;
    (void)call;
    for (size_t r = 0; r < n_regions; r++) {
        memset(regions[r].addr, 0x5A, regions[r].size);
    }
    return APP_CODE;
}

static uint32_t slow(void *user_data, const naa_swnaa_call *call, naa_swnaa_region *regions,
                     size_t n_regions) {
    (void)user_data;
    (void)call;
    (void)regions;
    (void)n_regions;
    struct timespec t = {1, 200 * 1000 * 1000};
    nanosleep(&t, NULL);
    return NAA_SUCCESS;
}

/* ---- helpers ---------------------------------------------------------------------------- */

static naa_param_t param(void *addr, size_t size, bool single_send) {
    naa_param_t p = {addr, size, single_send};
    return p;
}

static bool is_zeroed(const naa_handle *h) {
    return h->function_code == 0 && h->comm_ctx == NULL;
}

/* Completes the RPC by polling naa_test; returns naa_test's last result. */
static int poll_until_done(naa_handle *h, naa_status *st) {
    bool flag = false;
    int rc;
    do {
        rc = naa_test(h, &flag, st);
    } while (rc == 0 && !flag);
    return rc;
}

/* ---- tests ------------------------------------------------------------------------------ */

static void test_invalid_arguments(void) {
    unsigned char buf[64];
    naa_handle h;
    naa_status st;
    bool flag = false;
    naa_param_t in[33];
    naa_param_t out[1] = {param(buf, 16, false)};
    for (int i = 0; i < 33; i++) {
        in[i] = param(buf, 1, false);
    }

    memset(&h, 0xAB, sizeof h);
    CHECK(naa_create(FN_ADD1, NULL, 2, out, 1, &h) == -1);
    CHECK(is_zeroed(&h)); /* zeroed on failure, as in the reference */
    CHECK(naa_create(FN_ADD1, in, 2, NULL, 1, &h) == -1);
    CHECK(naa_create(FN_ADD1, in, 2, out, 1, NULL) == -1);
    naa_param_t null_addr[2] = {param(NULL, 8, false), param(buf, 8, false)};
    CHECK(naa_create(FN_ADD1, null_addr, 2, out, 1, &h) == -1);
    naa_param_t zero_size[2] = {param(buf, 0, false), param(buf + 8, 8, false)};
    CHECK(naa_create(FN_ADD1, zero_size, 2, out, 1, &h) == -1);
    naa_param_t overlap_in[2] = {param(buf, 16, false), param(buf + 16, 16, false)};
    naa_param_t overlap_out[1] = {param(buf + 8, 16, false)};
    CHECK(naa_create(FN_ADD1, overlap_in, 2, overlap_out, 1, &h) == -1);
    CHECK(naa_create(FN_ADD1, in, 33, out, 1, &h) == -1);
    CHECK(naa_create(0, in, 1, out, 1, &h) == -1);
    CHECK(naa_create(128, in, 1, out, 1, &h) == -1);
    CHECK(naa_create(0x101, in, 1, out, 1, &h) == -1); /* the reference truncates to 1 */
    CHECK(naa_create(FN_NO_ENTRY, in, 1, out, 1, &h) == -1);
    /* Parameter count differs from the NAA_SPEC entry: error, entry stays free. */
    naa_param_t two[2] = {param(buf, 8, false), param(buf + 8, 8, false)};
    CHECK(naa_create(FN_APP_ERR, two, 2, out, 0, &h) == -1);
    CHECK(is_zeroed(&h));

    /* Nobody listens at the entry's address: connection refused, handle zeroed. */
    memset(&h, 0xAB, sizeof h);
    CHECK(naa_create(FN_REFUSED, in, 1, out, 1, &h) == -1);
    CHECK(is_zeroed(&h));

    /* Transport selection errors. */
    naa_param_t sep_in[2] = {param(buf, 8, false), param(buf + 8, 8, false)};
    naa_param_t sep_out[1] = {param(buf + 16, 8, false)};
    setenv("NAAICE_TRANSPORT", "carrier-pigeon", 1);
    CHECK(naa_create(FN_ADD1, sep_in, 2, sep_out, 1, &h) == -1);
    setenv("NAAICE_TRANSPORT", "verbs", 1); /* not part of this build */
    CHECK(naa_create(FN_ADD1, sep_in, 2, sep_out, 1, &h) == -1);
    setenv("NAAICE_TRANSPORT", "soft", 1);
    setenv("NAAICE_RPC_TIMEOUT", "-3", 1);
    CHECK(naa_create(FN_ADD1, sep_in, 2, sep_out, 1, &h) == -1);
    unsetenv("NAAICE_RPC_TIMEOUT");

    /* Finalize after a failed create is harmless, also twice. */
    CHECK(naa_finalize(&h) == 0);
    CHECK(naa_finalize(&h) == 0);

    /* NULL and unconnected handles. */
    CHECK(naa_invoke(NULL) == -1);
    CHECK(naa_invoke(&h) == -1);
    CHECK(naa_test(NULL, &flag, &st) == -1);
    CHECK(naa_test(&h, &flag, &st) == -1);
    CHECK(naa_wait(NULL, &st) == -1);
    CHECK(naa_wait(&h, &st) == -1);
    CHECK(naa_finalize(NULL) == -1);

    /* A forged handle is looked up and refused, never dereferenced. */
    naa_handle forged = {FN_ADD1, (naaice_communication_context *)(uintptr_t)0x1234};
    CHECK(naa_invoke(&forged) == -1);
    CHECK(naa_test(&forged, &flag, &st) == -1);
    CHECK(naa_wait(&forged, &st) == -1);
    CHECK(naa_finalize(&forged) == -1);

    /* Software NAA API. */
    CHECK(naa_swnaa_register_kernel(NULL, 5, slow, NULL) == -1);
    CHECK(naa_swnaa_destroy(NULL) == -1);
    naa_swnaa *s = naa_swnaa_new();
    REQUIRE(s != NULL);
    CHECK(naa_swnaa_register_kernel(s, 0, slow, NULL) == -1);
    CHECK(naa_swnaa_register_kernel(s, 128, slow, NULL) == -1);
    CHECK(naa_swnaa_register_kernel(s, 5, NULL, NULL) == -1);
    CHECK(naa_swnaa_remove_kernel(s, 5) == -1); /* none registered */
    CHECK(naa_swnaa_remove_kernel(s, FN_EMPTY) == 0);
    CHECK(naa_swnaa_set_max_connections(s, 0) == -1);
    CHECK(naa_swnaa_set_kernel_timeout_ms(s, 0) == -1);
    CHECK(naa_swnaa_port(s) == -1);
    CHECK(naa_swnaa_stop(s) == -1);
    CHECK(naa_swnaa_start(s, "not an address!", 0) == -1);
    CHECK(naa_swnaa_start(s, "127.0.0.1", 0) == 0);
    CHECK(naa_swnaa_port(s) > 0);
    CHECK(naa_swnaa_start(s, "127.0.0.1", 0) == -1);             /* already running */
    CHECK(naa_swnaa_register_kernel(s, 5, slow, NULL) == -1);    /* running */
    CHECK(naa_swnaa_stop(s) == 0);
    CHECK(naa_swnaa_port(s) == -1);
    CHECK(naa_swnaa_register_kernel(s, 5, slow, NULL) == 0); /* stopped: allowed again */
    CHECK(naa_swnaa_start(s, "127.0.0.1", 0) == 0);           /* and it starts again */
    CHECK(naa_swnaa_port(s) > 0);
    CHECK(naa_swnaa_destroy(s) == 0); /* stops it */
    CHECK(naa_swnaa_destroy(s) == -1); /* destroyed twice: an error, not a crash */
    CHECK(naa_swnaa_port(s) == -1);
}

static void test_many_rpcs(void) {
    enum { LEN = 4096, RPCS = 1000 };
    unsigned char *a = malloc(LEN), *b = malloc(LEN), *c = calloc(LEN, 1);
    REQUIRE(a && b && c);
    memset(a, 1, LEN);
    memset(b, 2, LEN);
    naa_param_t in[2] = {param(a, LEN, false), param(b, LEN, false)};
    naa_param_t out[1] = {param(c, LEN, false)};
    naa_handle h;
    naa_status st;
    bool flag = true;
    REQUIRE(naa_create(FN_ADD1, in, 2, out, 1, &h) == 0);
    CHECK(h.function_code == FN_ADD1 && h.comm_ctx != NULL);
    CHECK(naa_wait(&h, &st) == -1);          /* no RPC invoked yet */
    CHECK(naa_test(&h, &flag, &st) == -1);   /* likewise */

    int bad = 0;
    for (int k = 1; k <= RPCS; k++) {
        REQUIRE(naa_invoke(&h) == 0);
        if (k == 1) {
            CHECK(naa_invoke(&h) == -1); /* one RPC at a time */
        }
        int rc = (k % 2) ? naa_wait(&h, &st) : poll_until_done(&h, &st);
        REQUIRE(rc == 0);
        /* The NAA adds 1 to its output region in every RPC; nobody else writes it. */
        unsigned char want = (unsigned char)k;
        if (st.state != FINISHED || st.naa_error != NAA_SUCCESS || st.bytes_received != LEN ||
            c[0] != want || c[LEN - 1] != want || memchr(c, want ^ 1, LEN) != NULL) {
            bad++;
        }
    }
    CHECK(bad == 0);
    /* After completion, test and wait keep reporting the last status. */
    CHECK(naa_test(&h, &flag, &st) == 0 && flag && st.state == FINISHED);
    CHECK(naa_wait(&h, &st) == 0 && st.state == FINISHED && st.bytes_received == LEN);
    CHECK(naa_finalize(&h) == 0);
    CHECK(is_zeroed(&h));
    free(a);
    free(b);
    free(c);
    printf("many RPCs: %d RPCs, %d wrong\n", RPCS, bad);
}

static void test_in_place(void) {
    enum { LEN = 1000, RPCS = 100 };
    unsigned char *x = malloc(LEN);
    REQUIRE(x);
    for (int i = 0; i < LEN; i++) {
        x[i] = (unsigned char)i;
    }
    /* Same pointer as input and output: one in-place region. */
    naa_param_t in[1] = {param(x, LEN, false)};
    naa_param_t out[1] = {param(x, LEN, false)};
    naa_handle h;
    naa_status st;
    REQUIRE(naa_create(FN_ADD2, in, 1, out, 1, &h) == 0);
    for (int k = 0; k < RPCS; k++) {
        REQUIRE(naa_invoke(&h) == 0);
        REQUIRE(naa_wait(&h, &st) == 0);
    }
    int bad = 0;
    for (int i = 0; i < LEN; i++) {
        bad += x[i] != (unsigned char)(i + 2 * RPCS);
    }
    CHECK(bad == 0);
    CHECK(st.bytes_received == LEN);
    CHECK(naa_finalize(&h) == 0);
    free(x);
}

/* The same pointer twice among the inputs (and as output) is one in-place region. */
static void test_duplicate_inputs(void) {
    unsigned char x[300];
    memset(x, 10, sizeof x);
    naa_param_t in[2] = {param(x, sizeof x, false), param(x, sizeof x, false)};
    naa_param_t out[1] = {param(x, sizeof x, false)};
    naa_handle h;
    naa_status st;
    REQUIRE(naa_create(FN_ADD1, in, 2, out, 1, &h) == 0);
    REQUIRE(naa_invoke(&h) == 0);
    REQUIRE(naa_wait(&h, &st) == 0);
    CHECK(st.naa_error == NAA_SUCCESS && st.bytes_received == sizeof x);
    CHECK(x[0] == 11 && x[sizeof x - 1] == 11); /* one region: +1 once, not twice */
    CHECK(naa_finalize(&h) == 0);
}

static int add_cfg_calls = 0;

static void test_single_send(void) {
    enum { LEN = 1024 };
    unsigned char cfg[8] = {5};
    unsigned char *data = calloc(LEN, 1);
    REQUIRE(data);
    naa_param_t in[2] = {param(cfg, sizeof cfg, true), param(data, LEN, false)};
    naa_param_t out[1] = {param(data, LEN, false)};
    naa_handle h;
    naa_status st;
    REQUIRE(naa_create(FN_ADD_CFG, in, 2, out, 1, &h) == 0);
    REQUIRE(naa_invoke(&h) == 0);
    REQUIRE(naa_wait(&h, &st) == 0);
    CHECK(st.naa_error == NAA_SUCCESS); /* BAD_FLAGS if the kernel saw the wrong flags */
    CHECK(data[0] == 5 && data[LEN - 1] == 5);
    /* The single-send input was transferred once: the NAA keeps adding 5. */
    cfg[0] = 9;
    REQUIRE(naa_invoke(&h) == 0);
    REQUIRE(poll_until_done(&h, &st) == 0);
    CHECK(st.naa_error == NAA_SUCCESS);
    CHECK(data[0] == 10 && data[LEN - 1] == 10);
    CHECK(naa_finalize(&h) == 0);
    CHECK(add_cfg_calls == 2);
    free(data);
}

static void test_error_codes(void) {
    unsigned char x[64];
    naa_param_t in[1] = {param(x, sizeof x, false)};
    naa_handle h;
    naa_status st;

    /* Application code from the kernel; the connection stays usable. */
    REQUIRE(naa_create(FN_APP_ERR, in, 1, in, 1, &h) == 0);
    for (int k = 0; k < 2; k++) {
        memset(x, 0, sizeof x);
        REQUIRE(naa_invoke(&h) == 0);
        CHECK(naa_wait(&h, &st) == 0);
        CHECK(st.state == FINISHED && st.naa_error == APP_CODE);
        CHECK(x[0] == 0x5A && x[63] == 0x5A);
    }
    CHECK(naa_finalize(&h) == 0);

    /* No kernel for the function code: SOCKET_UNAVAIL. */
    REQUIRE(naa_create(FN_UNKNOWN, in, 1, in, 1, &h) == 0);
    REQUIRE(naa_invoke(&h) == 0);
    CHECK(poll_until_done(&h, &st) == 0);
    CHECK(st.state == FINISHED && st.naa_error == SOCKET_UNAVAIL);
    CHECK(naa_finalize(&h) == 0);

    /* Kernel over its timeout: KERNEL_TIMEOUT. */
    REQUIRE(naa_create(FN_SLOW, in, 1, in, 1, &h) == 0);
    REQUIRE(naa_invoke(&h) == 0);
    CHECK(naa_wait(&h, &st) == 0);
    CHECK(st.state == FINISHED && st.naa_error == KERNEL_TIMEOUT);
    CHECK(naa_finalize(&h) == 0);
}

struct worker {
    int id;
    int bad;
    int failed;
};

static void *own_handle_worker(void *arg) {
    struct worker *w = arg;
    enum { LEN = 512, RPCS = 200 };
    unsigned char *x = calloc(LEN, 1);
    if (x == NULL) {
        w->failed = 1;
        return NULL;
    }
    memset(x, w->id, LEN);
    naa_param_t p[1] = {param(x, LEN, false)};
    naa_handle h;
    naa_status st;
    if (naa_create(FN_ADD2, p, 1, p, 1, &h) != 0) {
        w->failed = 1;
        free(x);
        return NULL;
    }
    for (int k = 0; k < RPCS; k++) {
        int rc = naa_invoke(&h) == 0 ? ((k % 2) ? naa_wait(&h, &st) : poll_until_done(&h, &st)) : -1;
        if (rc != 0) {
            w->failed = 1;
            break;
        }
    }
    for (int i = 0; i < LEN; i++) {
        w->bad += x[i] != (unsigned char)(w->id + 2 * RPCS);
    }
    if (naa_finalize(&h) != 0) {
        w->failed = 1;
    }
    free(x);
    return NULL;
}

struct shared {
    naa_handle *h;
    int stop;
    long tests;
    int errors;
};

static void *tester(void *arg) {
    struct shared *s = arg;
    bool flag;
    naa_status st;
    while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
        if (naa_test(s->h, &flag, &st) != 0) {
            s->errors++;
        }
        __atomic_add_fetch(&s->tests, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static void test_threads(void) {
    /* One handle per thread, all at once. */
    pthread_t t[N_THREADS];
    struct worker w[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
        w[i] = (struct worker){i + 1, 0, 0};
        REQUIRE(pthread_create(&t[i], NULL, own_handle_worker, &w[i]) == 0);
    }
    for (int i = 0; i < N_THREADS; i++) {
        pthread_join(t[i], NULL);
        CHECK(!w[i].failed && w[i].bad == 0);
    }

    /* One handle shared by two threads: one invokes and waits, the other keeps testing. */
    unsigned char x[256] = {0};
    naa_param_t p[1] = {param(x, sizeof x, false)};
    naa_handle h;
    naa_status st;
    REQUIRE(naa_create(FN_EMPTY, p, 1, p, 1, &h) == 0);
    REQUIRE(naa_invoke(&h) == 0 && naa_wait(&h, &st) == 0);
    struct shared s = {&h, 0, 0, 0};
    pthread_t other;
    REQUIRE(pthread_create(&other, NULL, tester, &s) == 0);
    /* The waits may spin and keep both CPUs busy; the tester must still get its turns: keep
     * invoking until it has tested a while (at most 20000 RPCs), not for a fixed count only. */
    int failed = 0;
    for (int k = 0; k < 200 || (__atomic_load_n(&s.tests, __ATOMIC_RELAXED) < 100 && k < 20000);
         k++) {
        failed += naa_invoke(&h) != 0;
        failed += naa_wait(&h, &st) != 0;
        failed += st.state != FINISHED;
    }
    __atomic_store_n(&s.stop, 1, __ATOMIC_RELEASE);
    pthread_join(other, NULL);
    CHECK(failed == 0);
    CHECK(s.errors == 0);
    CHECK(s.tests > 0);
    CHECK(naa_finalize(&h) == 0);
}

static void test_finalize(void) {
    unsigned char x[32] = {0};
    naa_param_t p[1] = {param(x, sizeof x, false)};
    naa_handle h, copy;
    REQUIRE(naa_create(FN_EMPTY, p, 1, p, 1, &h) == 0);
    copy = h;
    CHECK(naa_finalize(&h) == 0);
    CHECK(is_zeroed(&h));
    CHECK(naa_finalize(&h) == 0);     /* cleared: a no-op */
    CHECK(naa_finalize(&copy) == -1); /* stale copy: refused */
    CHECK(naa_invoke(&copy) == -1);
    /* finalize released the NAA_SPEC entry: it can be used again. */
    CHECK(naa_create(FN_EMPTY, p, 1, p, 1, &h) == 0);
    CHECK(naa_finalize(&h) == 0);
}

static void test_server_gone(naa_swnaa *naa) {
    unsigned char x[4096] = {0};
    naa_param_t p[1] = {param(x, sizeof x, false)};
    naa_handle h;
    naa_status st;
    REQUIRE(naa_create(FN_EMPTY, p, 1, p, 1, &h) == 0);
    REQUIRE(naa_swnaa_stop(naa) == 0); /* disconnects every client */
    /* The RPC fails with an error (no SIGPIPE, no hang). */
    int rc = naa_invoke(&h);
    if (rc == 0) {
        rc = naa_wait(&h, &st);
        CHECK(rc == -1 && st.state == ERROR);
    }
    CHECK(rc == -1);
    CHECK(naa_finalize(&h) == 0);
}

/* Signals whose dispositions the library must leave alone. */
static const int watched_sigs[] = {SIGALRM, SIGPIPE, SIGINT, SIGTERM, SIGCHLD, SIGUSR1, SIGUSR2, SIGHUP};
#define N_WATCHED (sizeof watched_sigs / sizeof watched_sigs[0])
/* Their dispositions when the program started (inherited ones, e.g. SIGHUP ignored under nohup,
 * are not the library's doing). */
static struct sigaction initial_sigs[N_WATCHED];

static void snapshot_signals(void) {
    for (size_t i = 0; i < N_WATCHED; i++) {
        REQUIRE(sigaction(watched_sigs[i], NULL, &initial_sigs[i]) == 0);
    }
}

/* The library installed no signal handler and no alarm (the reference's naa_wait does, D-13). */
static void test_no_signals(void) {
    for (size_t i = 0; i < N_WATCHED; i++) {
        struct sigaction now;
        CHECK(sigaction(watched_sigs[i], NULL, &now) == 0);
        CHECK(now.sa_handler == initial_sigs[i].sa_handler);
    }
    CHECK(alarm(0) == 0); /* no alarm was pending */
}

int main(void) {
    snapshot_signals();
    setenv("NAAICE_TRANSPORT", "soft", 1);

    naa_swnaa *naa = naa_swnaa_new();
    REQUIRE(naa != NULL);
    REQUIRE(naa_swnaa_register_kernel(naa, FN_ADD_CFG, add_cfg, &add_cfg_calls) == 0);
    REQUIRE(naa_swnaa_register_kernel(naa, FN_APP_ERR, app_err, NULL) == 0);
    REQUIRE(naa_swnaa_register_kernel(naa, FN_SLOW, slow, NULL) == 0);
    REQUIRE(naa_swnaa_set_kernel_timeout_ms(naa, 300) == 0);
    REQUIRE(naa_swnaa_set_max_connections(naa, 16) == 0);
    REQUIRE(naa_swnaa_start(naa, "127.0.0.1", 0) == 0);
    int port = naa_swnaa_port(naa);
    REQUIRE(port > 0);

    char spec[1024];
    int n = snprintf(spec, sizeof spec,
                     "127.0.0.1:%d:1:2,127.0.0.1:%d:2:1,127.0.0.1:%d:2:1,127.0.0.1:%d:2:1,"
                     "127.0.0.1:%d:2:1,127.0.0.1:%d:2:1,127.0.0.1:%d:3:1,127.0.0.1:%d:20:2,"
                     "127.0.0.1:%d:21:1,127.0.0.1:%d:22:1,127.0.0.1:%d:30:1,127.0.0.1:1:40:1",
                     port, port, port, port, port, port, port, port, port, port, port);
    REQUIRE(n > 0 && (size_t)n < sizeof spec);
    setenv("NAA_SPEC", spec, 1);

    test_invalid_arguments();
    test_many_rpcs();
    test_in_place();
    test_duplicate_inputs();
    test_single_send();
    test_error_codes();
    test_threads();
    test_finalize();
    test_server_gone(naa);

    CHECK(naa_swnaa_destroy(naa) == 0);
    test_no_signals();
    printf("ap2_test: %d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
