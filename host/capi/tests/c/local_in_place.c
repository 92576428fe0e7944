/*
 * Local mode in process (NAA_SPEC=local:20:2,local:20:2, set by tests/c_programs.rs): the kernel works
 * on the NAA's memory, not on the program's arrays (which must be the program's again when a
 * cancel or timeout returns), every RPC gives the right bytes, a kernel that reports overrunning
 * its deadline leaves the in-place data as it was (no outputs after KERNEL_TIMEOUT), and
 * a function code without a kernel gets SOCKET_UNAVAIL, two local handles run together
 * (naa_waitall), and the memory is freed after finalize without a use after free (the
 * sanitizers watch).
 * Exit status 0 when every check passed.
 */
#include <naaice_ap2.h>

#include "check.h"

enum { SIZE = 4096 };

/* What the kernel saw in its last run. */
static void *seen[3];
static size_t seen_n;

/* Adds 1 to the in-place region, copies the input + 2 into the output; with user byte 1
   it then reports that it overran its deadline (KERNEL_TIMEOUT: no outputs). */
static uint32_t kernel(void *user_data, const struct naa_swnaa_call *call,
                       struct naa_swnaa_region *regions, size_t n_regions) {
    (void)user_data;
    seen_n = n_regions;
    for (size_t k = 0; k < n_regions && k < 3; k++) seen[k] = regions[k].addr;
    if (n_regions != 3) return 0x10;
    unsigned char *both = regions[0].addr, *in = regions[1].addr, *out = regions[2].addr;
    for (size_t i = 0; i < regions[0].size; i++) both[i] += 1;
    for (size_t i = 0; i < regions[2].size; i++) out[i] = (unsigned char)(in[i] + 2);
    return call->user_bytes[0] == 1 ? KERNEL_TIMEOUT : NAA_SUCCESS;
}

int main(void) {
    CHECK(naa_local_register_kernel(20, kernel, NULL) == 0);
    unsigned char *both = malloc(SIZE), *in = malloc(SIZE), *out = malloc(SIZE);
    if (both == NULL || in == NULL || out == NULL) return 1;
    for (size_t i = 0; i < SIZE; i++) {
        both[i] = (unsigned char)i;
        in[i] = (unsigned char)(3 * i);
        out[i] = 0;
    }
    naa_param_t inputs[2] = {{both, SIZE, false}, {in, SIZE, false}};
    naa_param_t outputs[2] = {{both, SIZE, false}, {out, SIZE, false}};
    naa_handle handle;
    int created = naa_create(20, inputs, 2, outputs, 2, &handle) == 0;
    CHECK(created);
    if (!created) return 1;
    naa_status status;
    for (int rpc = 1; rpc <= 3; rpc++) {
        CHECK(naa_invoke(&handle) == 0);
        CHECK(naa_wait(&handle, &status) == 0);
        CHECK(status.state == FINISHED && status.naa_error == NAA_SUCCESS);
    }
    /* The program's arrays are not shared with the in-process NAA: every region is the
       NAA's (copied in and out), so that a cancel or a timeout hands them back at once. */
    CHECK(seen_n == 3);
    CHECK(seen[0] != (void *)both && seen[1] != (void *)in && seen[2] != (void *)out);
    long wrong = 0;
    for (size_t i = 0; i < SIZE; i++) {
        wrong += both[i] != (unsigned char)(i + 3);
        wrong += in[i] != (unsigned char)(3 * i);
        wrong += out[i] != (unsigned char)(3 * i + 2);
    }
    CHECK(wrong == 0);
    printf("in place in process: %ld wrong\n", wrong);

    /* A kernel past its deadline: KERNEL_TIMEOUT, and the in-place data as it was. */
    naa_call_args args = {0};
    args.user_bytes[0] = 1;
    args.function_code = 20;
    CHECK(naa_invoke_with(&handle, &args) == 0);
    CHECK(naa_wait(&handle, &status) == 0);
    CHECK(status.naa_error == KERNEL_TIMEOUT);
    wrong = 0;
    for (size_t i = 0; i < SIZE; i++) wrong += both[i] != (unsigned char)(i + 3);
    CHECK(wrong == 0);
    printf("after a kernel timeout: %ld changed\n", wrong);

    /* A function code without a kernel: SOCKET_UNAVAIL, the handle stays usable. */
    naa_call_args unknown = {0};
    unknown.function_code = 99;
    CHECK(naa_invoke_with(&handle, &unknown) == 0);
    CHECK(naa_wait(&handle, &status) == 0);
    CHECK(status.naa_error == SOCKET_UNAVAIL);
    CHECK(naa_invoke(&handle) == 0);
    CHECK(naa_wait(&handle, &status) == 0);
    CHECK(status.naa_error == NAA_SUCCESS);

    /* Two local handles progressed together (the second entry of NAA_SPEC): naa_waitall. */
    unsigned char *more = malloc(SIZE), *more_in = malloc(SIZE), *more_out = malloc(SIZE);
    if (more == NULL || more_in == NULL || more_out == NULL) return 1;
    memset(more, 0, SIZE);
    memset(more_in, 5, SIZE);
    naa_param_t more_inputs[2] = {{more, SIZE, false}, {more_in, SIZE, false}};
    naa_param_t more_outputs[2] = {{more, SIZE, false}, {more_out, SIZE, false}};
    naa_handle pair[2];
    pair[0] = handle;
    CHECK(naa_create(20, more_inputs, 2, more_outputs, 2, &pair[1]) == 0);
    naa_status statuses[2];
    for (int round = 0; round < 2; round++) {
        CHECK(naa_invoke(&pair[0]) == 0);
        CHECK(naa_invoke(&pair[1]) == 0);
        CHECK(naa_waitall(2, pair, statuses) == 0);
        CHECK(statuses[0].naa_error == NAA_SUCCESS && statuses[1].naa_error == NAA_SUCCESS);
    }
    wrong = 0;
    for (size_t i = 0; i < SIZE; i++) {
        wrong += more[i] != 2;
        wrong += more_out[i] != 7;
    }
    CHECK(wrong == 0);
    printf("two handles with naa_waitall: %ld wrong\n", wrong);
    CHECK(naa_finalize(&pair[1]) == 0);
    free(more);
    free(more_in);
    free(more_out);
    handle = pair[0];

    CHECK(naa_finalize(&handle) == 0);
    free(both);
    free(in);
    free(out);
    return failures == 0 ? 0 : 1;
}
