/*
 * naa_create with 1 to 32 in-place parameters (the same pointer as input and output: one
 * region each), and the last-error API of the middleware functions.
 *
 * NAA_SPEC (set by tests/c_programs.rs) has one entry per count n = 1..32 with function code
 * 20 + n and n inputs; the NAA adds 1 to every byte of every parameter region. Each handle
 * runs two RPCs and every byte is checked. Exit status 0 when every check passed.
 */
#include <naaice_ap2.h>

#include "check.h"

/* Size of parameter k of a call with n parameters: all different, some odd. */
static size_t size_of_param(unsigned n, unsigned k) { return 1 + 37 * n + 101 * k; }

static void in_place(unsigned n) {
    unsigned char *mem[32];
    naa_param_t params[32];
    for (unsigned k = 0; k < n; k++) {
        size_t size = size_of_param(n, k);
        mem[k] = malloc(size);
        if (mem[k] == NULL) {
            exit(1);
        }
        for (size_t i = 0; i < size; i++) {
            mem[k][i] = (unsigned char)(i + k + n);
        }
        params[k] = (naa_param_t){mem[k], size, false};
    }
    naa_handle handle;
    int created = naa_create(20 + n, params, n, params, n, &handle) == 0;
    CHECK(created);
    if (created) {
        naa_status status;
        for (int rpc = 1; rpc <= 2; rpc++) {
            CHECK(naa_invoke(&handle) == 0);
            CHECK(naa_wait(&handle, &status) == 0);
            CHECK(status.state == FINISHED && status.naa_error == NAA_SUCCESS);
            /* The NAA's last write is the last region. */
            CHECK(status.bytes_received == size_of_param(n, n - 1));
        }
        CHECK(naa_finalize(&handle) == 0);
    }
    long wrong = 0;
    for (unsigned k = 0; k < n; k++) {
        for (size_t i = 0; i < size_of_param(n, k); i++) {
            if (mem[k][i] != (unsigned char)(i + k + n + (created ? 2 : 0))) {
                wrong++;
            }
        }
        free(mem[k]);
    }
    CHECK(wrong == 0);
    printf("in place, %u parameters: %s\n", n, created && wrong == 0 ? "ok" : "FAILED");
}

int main(void) {
    for (unsigned n = 1; n <= 32; n++) {
        in_place(n);
    }

    /* The last error: text and kind per thread, return values unchanged. */
    naa_clear_last_error();
    CHECK(naa_last_error_kind() == NAA_ERRKIND_NONE);
    CHECK(strcmp(naa_last_error(), "") == 0);
    naa_param_t none[1];
    CHECK(naa_create(1, none, 0, none, 0, NULL) == -1);
    CHECK(naa_last_error_kind() == NAA_ERRKIND_ARGUMENT);
    CHECK(strcmp(naa_last_error(), "naa_create: handle is NULL") == 0);

    /* 17 inputs and 16 separate outputs are 33 regions: too many. */
    static unsigned char blob[33][8];
    naa_param_t ins[17], outs[16];
    for (int k = 0; k < 17; k++) ins[k] = (naa_param_t){blob[k], 8, false};
    for (int k = 0; k < 16; k++) outs[k] = (naa_param_t){blob[17 + k], 8, false};
    naa_handle handle;
    CHECK(naa_create(37, ins, 17, outs, 16, &handle) == -1);
    CHECK(naa_last_error_kind() == NAA_ERRKIND_ARGUMENT);
    CHECK(strstr(naa_last_error(), "33 distinct parameter regions") != NULL);
    CHECK(handle.comm_ctx == NULL);

    /* No NAA_SPEC entry for function code 99. */
    CHECK(naa_create(99, ins, 1, ins, 1, &handle) == -1);
    CHECK(naa_last_error_kind() == NAA_ERRKIND_CONFIG);
    CHECK(strstr(naa_last_error(), "function code 99") != NULL);

    /* A zeroed handle is not connected; a successful call leaves the record alone. */
    naa_status status;
    CHECK(naa_invoke(&handle) == -1);
    CHECK(naa_last_error_kind() == NAA_ERRKIND_STATE);
    CHECK(naa_finalize(&handle) == 0);
    CHECK(naa_last_error_kind() == NAA_ERRKIND_STATE);
    CHECK(naa_wait(&handle, &status) == -1);

    printf("in place: %d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
