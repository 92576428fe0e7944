/*
 * Vector addition offloaded to an NAA through the middleware API (AP2), like the example
 * program of the NAAICE AP2 documentation: c = a + b for two vectors of doubles. The first
 * RPC is completed by polling with naa_test (overlapping local work), the second with the
 * blocking naa_wait.
 *
 * The NAA must serve function code 10 with two inputs, for example the software NAA of
 * swnaa_server.c:
 *
 *   NAAICE_TRANSPORT=soft ./swnaa_server 127.0.0.1 12345 &
 *   NAAICE_TRANSPORT=soft NAA_SPEC=127.0.0.1:12345:10:2 ./vector_add [length]
 *
 * Exit status 0 when both results are correct.
 */
#include <naaice_ap2.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#define FNCODE_VEC_ADD 10

static void set_inputs(double *a, double *b, size_t n, double scale) {
    for (size_t i = 0; i < n; i++) {
        a[i] = scale * (double)i;
        b[i] = 0.5 * (double)i + 1.0;
    }
}

static int check_results(const double *a, const double *b, const double *c, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (c[i] != a[i] + b[i]) {
            fprintf(stderr, "wrong result at %zu: %f + %f gave %f\n", i, a[i], b[i], c[i]);
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    size_t n = 64;
    if (argc > 1) {
        char *end = NULL;
        unsigned long long v = strtoull(argv[1], &end, 10);
        if (end == argv[1] || *end != '\0' || v == 0 || v > (1ull << 28)) {
            fprintf(stderr, "usage: %s [length (1..2^28)]\n", argv[0]);
            return 2;
        }
        n = (size_t)v;
    }
    double *a = calloc(n, sizeof(double));
    double *b = calloc(n, sizeof(double));
    double *c = calloc(n, sizeof(double));
    if (a == NULL || b == NULL || c == NULL) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    set_inputs(a, b, n, 1.0);

    /* Define the input and output memory regions. */
    naa_param_t input_params[2] = {{a, n * sizeof(double), false}, {b, n * sizeof(double), false}};
    naa_param_t output_params[1] = {{c, n * sizeof(double), false}};
    naa_handle handle;

    /* Establish the connection (NAA from NAA_SPEC) and exchange the memory regions. */
    if (naa_create(FNCODE_VEC_ADD, input_params, 2, output_params, 1, &handle) != 0) {
        fprintf(stderr, "naa_create failed (is NAA_SPEC set and the NAA running?)\n");
        naa_finalize(&handle);
        free(a);
        free(b);
        free(c);
        return 1;
    }

    int rc = 1;
    bool flag = false;
    naa_status status;
    unsigned long local_work = 0;

    /* RPC 1: transfer the data, then poll while doing other work. */
    if (naa_invoke(&handle) != 0) {
        goto out;
    }
    if (naa_test(&handle, &flag, &status) != 0) {
        goto out;
    }
    while (!flag) {
        local_work++; /* do_other_work() */
        if (naa_test(&handle, &flag, &status) != 0) {
            goto out;
        }
    }
    if (status.state != FINISHED || status.naa_error != NAA_SUCCESS) {
        fprintf(stderr, "RPC 1: state %d, naa_error %d\n", (int)status.state, (int)status.naa_error);
        goto out;
    }
    if (check_results(a, b, c, n) != 0) {
        goto out;
    }
    printf("RPC 1 (naa_test): %zu elements correct, %llu bytes received, %lu polls of local work\n",
           n, (unsigned long long)status.bytes_received, local_work);

    /* RPC 2: new inputs, blocking wait. */
    set_inputs(a, b, n, 3.0);
    if (naa_invoke(&handle) != 0) {
        goto out;
    }
    if (naa_wait(&handle, &status) != 0) {
        goto out;
    }
    if (status.state != FINISHED || status.naa_error != NAA_SUCCESS) {
        fprintf(stderr, "RPC 2: state %d, naa_error %d\n", (int)status.state, (int)status.naa_error);
        goto out;
    }
    if (check_results(a, b, c, n) != 0) {
        goto out;
    }
    printf("RPC 2 (naa_wait): %zu elements correct, %llu bytes received\n", n,
           (unsigned long long)status.bytes_received);
    rc = 0;

out:
    if (rc != 0) {
        fprintf(stderr, "vector_add failed\n");
    }
    /* Finalize the connection. */
    if (naa_finalize(&handle) != 0) {
        rc = 1;
    }
    free(a);
    free(b);
    free(c);
    return rc;
}
