/*
 * Per-call arguments, deadlines, cancellation and local (lookaside) mode, naaice-rs
 * extensions of the middleware API: one handle runs several function codes, passes the three
 * immediate user bytes to the kernel, reads the kernel's full 24-bit return code, gives up on
 * a slow kernel at a per-call deadline and recovers the handle with naa_cancel.
 *
 * The same program runs unchanged against the in-process NAA of local mode, a software NAA
 * or an FPGA NAA; only NAA_SPEC differs:
 *
 *   NAA_SPEC=local:41:1 ./call_args                                  # no NAA needed
 *   NAAICE_TRANSPORT=soft NAA_SPEC=127.0.0.1:12345:41:1 ./call_args  # an NAA serving 41
 *
 * Kernel 41 ("echo", registered here for local mode and harmless otherwise) writes its
 * function code and user bytes into the first 4 bytes of the parameter and returns the user
 * bytes as one 24-bit number; kernel 42 ("slow", also registered here) sleeps 1 s; kernel 1
 * (built in) adds 1 to every byte.
 *
 * Exit status 0 when every step behaved as expected.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */

#include <naaice_ap2.h>

#include <stdio.h>
#include <string.h>
#include <time.h>

#define FNCODE_ECHO 41
#define FNCODE_SLOW 42
#define FNCODE_ADD_ONE 1
#define LEN 16

/* The echo kernel for local mode (a software NAA registers the same one). */
static uint32_t echo(void *user_data, const naa_swnaa_call *call, naa_swnaa_region *regions,
                     size_t n_regions) {
    (void)user_data;
    if (n_regions < 1 || regions[0].size < 4) {
        return 0x10; /* an application error code */
    }
    uint8_t *p = regions[0].addr;
    p[0] = call->fncode;
    memcpy(p + 1, call->user_bytes, 3);
    return (uint32_t)call->user_bytes[0] << 16 | (uint32_t)call->user_bytes[1] << 8 |
           call->user_bytes[2];
}

/* The slow kernel: longer than the example's 100 ms deadline. */
static uint32_t slow(void *user_data, const naa_swnaa_call *call, naa_swnaa_region *regions,
                     size_t n_regions) {
    (void)user_data;
    (void)call;
    (void)regions;
    (void)n_regions;
    struct timespec second = {.tv_sec = 1, .tv_nsec = 0};
    nanosleep(&second, NULL);
    return 0;
}

/* Runs one RPC with `args` and prints the return code and the first bytes. */
static int run(naa_handle *h, const naa_call_args *args, const uint8_t *data) {
    naa_status st;
    uint32_t rc = 0;
    if (naa_invoke_with(h, args) != 0 || naa_wait(h, &st) != 0 ||
        naa_get_return_code(h, &rc) != 0) {
        fprintf(stderr, "RPC failed: %s\n", naa_last_error());
        return -1;
    }
    printf("fncode %u user %02x %02x %02x: return code 0x%06x, data %u %u %u %u\n",
           args->function_code, args->user_bytes[0], args->user_bytes[1],
           args->user_bytes[2], rc, data[0], data[1], data[2], data[3]);
    return 0;
}

int main(void) {
    if (naa_local_register_kernel(FNCODE_ECHO, echo, NULL) != 0 ||
        naa_local_register_kernel(FNCODE_SLOW, slow, NULL) != 0) {
        return 1;
    }
    uint8_t data[LEN] = {0};
    naa_param_t param = {.addr = data, .size = sizeof data, .single_send = false};
    naa_handle h;
    /* One in-place parameter: the NAA writes its result over the input. */
    if (naa_create(FNCODE_ECHO, &param, 1, &param, 1, &h) != 0) {
        fprintf(stderr, "naa_create failed: %s\n", naa_last_error());
        return 1;
    }
    int failed = 0;
    naa_call_args echo_args = {.function_code = FNCODE_ECHO,
                               .user_bytes = {0xab, 0xcd, 0xef},
                               .timeout_ms = 5000};
    failed |= run(&h, &echo_args, data);
    /* Another function code on the same handle (and NAA). */
    naa_call_args add_args = {.function_code = FNCODE_ADD_ONE, .user_bytes = {0}, .timeout_ms = 0};
    failed |= run(&h, &add_args, data);
    /* Function codes are 1..127: refused before anything is sent. */
    naa_call_args bad = {.function_code = 200, .user_bytes = {0}, .timeout_ms = 0};
    if (naa_invoke_with(&h, &bad) == 0 || naa_last_error_kind() != NAA_ERRKIND_ARGUMENT) {
        failed = 1;
    }
    printf("fncode 200: refused (%s)\n", strstr(naa_last_error(), "not in 1..=127") != NULL
                                             ? "not in 1..=127"
                                             : naa_last_error());
    /* Plain naa_invoke: the handle's function code with user bytes 0. */
    naa_status st;
    uint32_t rc = 1;
    if (naa_invoke(&h) != 0 || naa_wait(&h, &st) != 0 || naa_get_return_code(&h, &rc) != 0) {
        failed = 1;
    }
    printf("naa_invoke: return code 0x%06x, data %u %u %u %u\n", rc, data[0], data[1], data[2],
           data[3]);
    /* A per-call deadline shorter than the slow kernel: naa_wait fails with a timeout and the
     * handle's connection is failed until naa_cancel drops it; the next invoke reconnects
     * (and redoes the MRSP). */
    naa_call_args slow_args = {.function_code = FNCODE_SLOW, .user_bytes = {0}, .timeout_ms = 100};
    bool timed_out = naa_invoke_with(&h, &slow_args) == 0 && naa_wait(&h, &st) != 0 &&
                     naa_last_error_kind() == NAA_ERRKIND_TIMEOUT;
    printf("fncode %u with a 100 ms deadline: %s\n", FNCODE_SLOW,
           timed_out ? "timed out" : "did not time out");
    failed |= !timed_out;
    if (naa_cancel(&h) != 0) {
        failed = 1;
    }
    printf("after naa_cancel: ");
    failed |= run(&h, &echo_args, data);

    /* The handle's statistics (on stderr: its times differ from run to run). */
    naa_client_stats s = {.size = sizeof s};
    if (naa_stats(&h, &s) == 0) {
        fprintf(stderr,
                "stats: %llu RPCs, %llu timed out, %llu connections, connect %llu us, "
                "MRSP %llu us, latency p50 %llu us, max %llu us\n",
                (unsigned long long)s.rpcs, (unsigned long long)s.errors_timeout,
                (unsigned long long)s.connections,
                (unsigned long long)(s.connect_time_ns / 1000),
                (unsigned long long)(s.mrsp_time_ns / 1000),
                (unsigned long long)(s.latency_p50_ns / 1000),
                (unsigned long long)(s.latency_max_ns / 1000));
    } else {
        failed = 1;
    }
    naa_finalize(&h);
    printf("%s\n", failed ? "FAILED" : "all ok");
    return failed;
}
