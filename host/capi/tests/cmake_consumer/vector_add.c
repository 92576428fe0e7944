/*
 * Vector addition through the middleware API (naaice_ap2.h): c = a + b on N 32-bit integers
 * (N from the command line), on the NAA NAA_SPEC names for function code 10 with two inputs.
 */
#include <naaice_ap2.h>

int main(int argc, char *argv[]) {
    long n = argc > 1 ? strtol(argv[1], NULL, 10) : 1000;
    if (n < 1 || n > (1L << 24)) {
        fprintf(stderr, "usage: %s [elements]\n", argv[0]);
        return 2;
    }
    size_t bytes = (size_t)n * sizeof(int32_t);
    int32_t *a = malloc(bytes);
    int32_t *b = malloc(bytes);
    int32_t *c = calloc((size_t)n, sizeof(int32_t));
    if (a == NULL || b == NULL || c == NULL) {
        return 1;
    }
    for (long i = 0; i < n; i++) {
        a[i] = (int32_t)i;
        b[i] = (int32_t)(1000 - 2 * i);
    }
    naa_param_t inputs[2] = {{a, bytes, false}, {b, bytes, false}};
    naa_param_t output = {c, bytes, false};
    naa_handle handle;
    naa_status status;
    if (naa_create(10, inputs, 2, &output, 1, &handle) || naa_invoke(&handle) ||
        naa_wait(&handle, &status)) {
        fprintf(stderr, "vector add (C): %s\n", naa_last_error());
        return 1;
    }
    long wrong = 0;
    for (long i = 0; i < n; i++) {
        wrong += c[i] != a[i] + b[i];
    }
    naa_finalize(&handle);
    free(a);
    free(b);
    free(c);
    if (status.naa_error != NAA_SUCCESS || wrong != 0) {
        printf("vector add (C): %ld of %ld elements wrong\n", wrong, n);
        return 1;
    }
    printf("vector add (C): %ld elements correct\n", n);
    return 0;
}
