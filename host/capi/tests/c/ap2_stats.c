/*
 * naa_stats and naa_stats_process: a handle's statistics after 5 RPCs and one RPC the NAA
 * answers with an error (a function code without a kernel), the version and size rules, and
 * the process's sum once the handle ended. NAA_SPEC: function code 1 with one input.
 * Prints the handle's statistics and "stats: N failed" at the end.
 */
#include <naaice_ap2.h>

#include "check.h"

#define LEN 64

int main(void) {
    uint8_t data[LEN] = {0};
    naa_param_t p = {.addr = data, .size = LEN, .single_send = false};
    naa_handle h;
    naa_status st;
    REQUIRE(naa_create(1, &p, 1, &p, 1, &h) == 0);

    naa_client_stats s = {.size = sizeof s};
    CHECK(naa_stats(&h, &s) == 0);
    CHECK(s.version == NAA_CLIENT_STATS_VERSION);
    CHECK(s.handles == 1 && s.connections == 1 && s.rpcs == 0);
    CHECK(s.connect_time_ns > 0 && s.mrsp_time_ns > 0);
    CHECK(s.latency_p50_ns == 0);

    for (int i = 0; i < 5; i++) {
        CHECK(naa_invoke(&h) == 0);
        CHECK(naa_wait(&h, &st) == 0 && st.naa_error == 0);
    }
    naa_call_args unknown = {.function_code = 99, .user_bytes = {0}, .timeout_ms = 0};
    CHECK(naa_invoke_with(&h, &unknown) == 0);
    CHECK(naa_wait(&h, &st) == 0 && st.naa_error != 0);

    s = (naa_client_stats){.size = sizeof s};
    CHECK(naa_stats(&h, &s) == 0);
    CHECK(s.rpcs == 6);
    CHECK(s.errors_naa == 1);
    CHECK(s.errors_timeout + s.errors_transport + s.errors_protocol + s.errors_other == 0);
    CHECK(s.bytes_sent == 6 * LEN && s.bytes_received == 5 * LEN);
    CHECK(s.latency_p50_ns > 0 && s.latency_p50_ns <= s.latency_p99_ns &&
          s.latency_p99_ns <= s.latency_max_ns && s.latency_mean_ns > 0);
    printf("stats: %llu RPCs, %llu NAA errors, %llu B sent, %llu B received, connect %llu us, "
           "MRSP %llu us, latency p50 %.1f us p99 %.1f us\n",
           (unsigned long long)s.rpcs, (unsigned long long)s.errors_naa,
           (unsigned long long)s.bytes_sent, (unsigned long long)s.bytes_received,
           (unsigned long long)(s.connect_time_ns / 1000),
           (unsigned long long)(s.mrsp_time_ns / 1000), s.latency_p50_ns / 1e3,
           s.latency_p99_ns / 1e3);

    /* Refused without writing: NULL, a size smaller than this version's. */
    naa_client_stats small = {.size = 8, .version = 77};
    CHECK(naa_stats(&h, &small) == -1);
    CHECK(small.version == 77);
    CHECK(strstr(naa_last_error(), "sizeof(naa_client_stats)") != NULL);
    CHECK(naa_stats(&h, NULL) == -1);
    CHECK(naa_stats(NULL, &s) == -1);
    CHECK(naa_stats_process(NULL) == -1);

    CHECK(naa_finalize(&h) == 0);
    naa_client_stats proc = {.size = sizeof proc};
    CHECK(naa_stats_process(&proc) == 0);
    CHECK(proc.handles == 1 && proc.rpcs == 6 && proc.errors_naa == 1);
    CHECK(naa_stats(&h, &s) == -1); /* finalized */
    printf("stats: %d failed\n", failures);
    return failures != 0;
}
