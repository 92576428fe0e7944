/*
 * naa_pipeline_*: 1 MiB + 10 B through 64 KiB chunks over 2 connections with the built-in
 * kernel 1 (adds 1 to every byte), every byte checked; the report; a function code without
 * a kernel reported as a failed chunk; invalid arguments refused. NAA_SPEC: function codes
 * 1 and 99 (no kernel) on an NAA that takes at least 2 connections. Prints "pipeline: N failed" at the end.
 */
#include <naaice_ap2.h>

#include "check.h"

#define LEN ((1u << 20) + 10)
#define CHUNK (64u << 10)

int main(void) {
    uint8_t *data = malloc(LEN);
    REQUIRE(data != NULL);
    for (size_t i = 0; i < LEN; i++) data[i] = (uint8_t)(i * 7);

    naa_pipeline *p = naa_pipeline_create(1, CHUNK, 2);
    REQUIRE(p != NULL);
    CHECK(naa_pipeline_depth(p) == 2);
    naa_pipeline_report report;
    for (int round = 1; round <= 3; round++) {
        CHECK(naa_pipeline_run(p, data, LEN, &report) == 0);
        CHECK(report.chunks == (LEN + CHUNK - 1) / CHUNK && report.depth == 2);
        CHECK(report.failed == 0);
        size_t wrong = 0;
        for (size_t i = 0; i < LEN; i++) wrong += data[i] != (uint8_t)(i * 7 + round);
        CHECK(wrong == 0);
    }
    CHECK(naa_pipeline_run(p, NULL, 0, NULL) == 0);
    CHECK(naa_pipeline_run(p, NULL, 5, NULL) == -1);
    CHECK(naa_pipeline_destroy(p) == 0);
    CHECK(naa_pipeline_destroy(p) == -1);
    CHECK(naa_pipeline_run(p, data, LEN, NULL) == -1);
    CHECK(naa_pipeline_depth(NULL) == -1);

    /* No kernel for 99: the first chunk comes back with SOCKET_UNAVAIL (1). */
    naa_pipeline *none = naa_pipeline_create(99, CHUNK, 2);
    REQUIRE(none != NULL);
    memset(data, 5, LEN);
    CHECK(naa_pipeline_run(none, data, LEN, &report) == -1);
    CHECK(report.failed == 1 && report.failed_chunk == 0 && report.failed_code == 1);
    CHECK(strstr(naa_last_error(), "chunk 0") != NULL);
    CHECK(data[0] == 5 && data[LEN - 1] == 5);
    CHECK(naa_pipeline_destroy(none) == 0);

    CHECK(naa_pipeline_create(1, 0, 2) == NULL);
    CHECK(naa_pipeline_create(1, CHUNK, 0) == NULL);
    CHECK(naa_pipeline_create(1, CHUNK, 65) == NULL);
    CHECK(strstr(naa_last_error(), "depth") != NULL);
    free(data);
    printf("pipeline: %d checks, %d failed\n", checks, failures);
    return failures != 0;
}
