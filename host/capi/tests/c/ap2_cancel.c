/*
 * naa_cancel and per-call deadlines against a kernel that never finishes (function code 40
 * of the test's software NAA blocks until the test ends; 1 and 2 are the built-ins).
 * NAA_SPEC: 40 with one input, and 1 with one input.
 *
 * The program prints "invoked" once the blocking RPC is on its way and waits for a line on
 * stdin: the test sends it when the kernel has started. Prints "cancel: N failed" at the end.
 */
#include <naaice_ap2.h>

#include "check.h"

#define LEN 64

static int expect_bytes(const uint8_t *p, int first) {
    for (int i = 0; i < LEN; i++) {
        if (p[i] != (uint8_t)(first + i)) {
            return 0;
        }
    }
    return 1;
}

int main(void) {
    uint8_t data[LEN], other_data[LEN];
    for (int i = 0; i < LEN; i++) {
        data[i] = other_data[i] = (uint8_t)i;
    }
    naa_param_t p = {.addr = data, .size = LEN, .single_send = false};
    naa_param_t q = {.addr = other_data, .size = LEN, .single_send = false};
    naa_handle h, other;
    naa_status st;
    bool flag = true;
    CHECK(naa_create(40, &p, 1, &p, 1, &h) == 0);
    CHECK(naa_create(1, &q, 1, &q, 1, &other) == 0);

    /* The blocking kernel: cancel once it runs. */
    CHECK(naa_invoke(&h) == 0);
    printf("invoked\n");
    fflush(stdout);
    char line[64];
    CHECK(fgets(line, sizeof line, stdin) != NULL);
    CHECK(naa_test(&h, &flag, &st) == 0 && !flag);
    CHECK(naa_cancel(&h) == 0);
    /* Cancelled: test and wait fail with a state error, the state is DISCONNECTED. */
    CHECK(naa_test(&h, &flag, &st) == -1 && naa_last_error_kind() == NAA_ERRKIND_STATE);
    CHECK(naa_wait(&h, &st) == -1 && strstr(naa_last_error(), "cancelled") != NULL);
    CHECK(expect_bytes(data, 0));
    CHECK(naa_cancel(&h) == 0); /* nothing left to cancel */

    /* The NAA still serves another client. */
    CHECK(naa_invoke(&other) == 0 && naa_wait(&other, &st) == 0);
    CHECK(st.state == FINISHED && st.naa_error == NAA_SUCCESS && expect_bytes(other_data, 1));

    /* The handle is reusable: the next invoke reconnects (function 1 adds 1). */
    naa_call_args add_one = {.function_code = 1, .user_bytes = {0}, .timeout_ms = 0};
    CHECK(naa_invoke_with(&h, &add_one) == 0);
    CHECK(naa_wait(&h, &st) == 0 && st.state == FINISHED && st.naa_error == NAA_SUCCESS);
    CHECK(expect_bytes(data, 1));

    /* A per-call deadline on the blocking kernel: the wait fails when it passes ... */
    CHECK(naa_invoke_timeout(&h, 200) == 0);
    CHECK(naa_wait(&h, &st) == -1 && naa_last_error_kind() == NAA_ERRKIND_TIMEOUT);
    CHECK(st.state == ERROR);
    CHECK(naa_invoke(&h) == -1); /* the failed connection stays failed ... */
    CHECK(naa_cancel(&h) == 0);  /* ... until naa_cancel recovers the handle */
    naa_call_args add_two = {.function_code = 2, .user_bytes = {0}, .timeout_ms = 0};
    CHECK(naa_invoke_with(&h, &add_two) == 0);
    CHECK(naa_wait(&h, &st) == 0 && st.naa_error == NAA_SUCCESS && expect_bytes(data, 3));
    uint32_t rc = 99;
    CHECK(naa_get_return_code(&h, &rc) == 0 && rc == 0);

    /* Invalid arguments are errors, not crashes. */
    CHECK(naa_cancel(NULL) == -1);
    CHECK(naa_invoke_with(&h, NULL) == -1);
    CHECK(naa_invoke_timeout(&h, 0) == -1);
    CHECK(naa_get_return_code(&h, NULL) == -1);

    CHECK(naa_finalize(&h) == 0);
    CHECK(naa_finalize(&other) == 0);
    CHECK(naa_cancel(&h) == -1); /* finalized: the handle is zeroed */
    printf("cancel: %d failed\n", failures);
    return failures != 0;
}
