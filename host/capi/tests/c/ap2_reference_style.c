/*
 * A middleware (AP2) program in the style of the reference's example (seed 002 section 3): it
 * includes nothing but <naaice_ap2.h> and still uses strtol, strtok, malloc, calloc, memcpy
 * and printf, which reach it through naaice.h as with the reference.
 *
 * Usage: ap2_reference_style 'N' (elements per vector). NAA_SPEC names an NAA serving
 * function code 10 with two inputs: c = a + b on 32-bit integers. First RPC completed with
 * naa_test, the second with naa_wait; c is checked element by element.
 */
#include <naaice_ap2.h>

#define FNCODE_VEC_ADD 10

static int check_sum(const int32_t *a, const int32_t *b, const int32_t *c, long n) {
    long wrong = 0;
    for (long i = 0; i < n; i++) {
        if (c[i] != (int32_t)((uint32_t)a[i] + (uint32_t)b[i])) {
            wrong++;
        }
    }
    return wrong == 0;
}

int main(int argc, char *argv[]) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s 'elements'\n", argv[0]);
        return 2;
    }
    /* The reference parses its size list with strtok and strtol. */
    char *token = strtok(argv[1], " ,");
    if (token == NULL) {
        return 2;
    }
    char *end;
    long n = strtol(token, &end, 10);
    if (*end != '\0' || n < 1 || n > (1L << 24)) {
        fprintf(stderr, "bad element count %s\n", token);
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
        b[i] = (int32_t)(3 * i + 1);
    }

    /* define input and output memory regions */
    naa_param_t input_params[2] = {{a, bytes, false}, {b, bytes, false}};
    naa_param_t output_params[1] = {{c, bytes, false}};
    naa_handle handle;

    /* establish connection */
    if (naa_create(FNCODE_VEC_ADD, input_params, 2, output_params, 1, &handle)) {
        fprintf(stderr, "naa_create failed: %s (kind %d)\n", naa_last_error(),
                (int)naa_last_error_kind());
        return 1;
    }

    bool flag = false;
    naa_status status;

    /* transfer data to NAA; non-blocking check if results are received */
    if (naa_invoke(&handle) || naa_test(&handle, &flag, &status)) {
        return 1;
    }
    long tests = 1;
    while (!flag) {
        if (naa_test(&handle, &flag, &status)) {
            fprintf(stderr, "naa_test failed: %s\n", naa_last_error());
            return 1;
        }
        tests++;
    }
    int ok1 = status.state == FINISHED && status.naa_error == NAA_SUCCESS &&
              status.bytes_received == bytes && check_sum(a, b, c, n);
    printf("RPC 1 (naa_test, %ld tests): %s\n", tests, ok1 ? "correct" : "WRONG");

    /* set inputs with new data; blocked waiting for the RPC to finish */
    int32_t *scratch = malloc(bytes);
    if (scratch == NULL) {
        return 1;
    }
    for (long i = 0; i < n; i++) {
        scratch[i] = (int32_t)(-7 * i);
    }
    memcpy(a, scratch, bytes);
    free(scratch);
    if (naa_invoke(&handle) || naa_wait(&handle, &status)) {
        return 1;
    }
    int ok2 = status.state == FINISHED && status.naa_error == NAA_SUCCESS &&
              check_sum(a, b, c, n);
    printf("RPC 2 (naa_wait): %s\n", ok2 ? "correct" : "WRONG");

    /* finalize connection */
    if (naa_finalize(&handle)) {
        return 1;
    }
    free(a);
    free(b);
    free(c);
    return ok1 && ok2 ? 0 : 1;
}
