/*
 * hello.c: one RPC on an NAA through the middleware API (AP2), in C.
 *
 * Built-in kernel 1 adds 1 to every byte of the parameter. NAA_SPEC says where the NAA is
 * (local:1:1: inside this process), NAAICE_TRANSPORT how to reach it (default auto).
 * Exit status 0 when the result is right.
 */
#include <naaice_ap2.h>

int main(void) {
    static uint8_t data[1 << 20]; /* 1 MiB, in place: input and output */
    memset(data, 41, sizeof data);
    naa_param_t param = {data, sizeof data, false};
    naa_handle h;
    naa_status st;
    if (naa_create(1, &param, 1, &param, 1, &h) != 0 || /* the NAA from NAA_SPEC */
        naa_invoke(&h) != 0 ||   /* sends the input and returns at once */
        naa_wait(&h, &st) != 0) { /* or poll naa_test while doing other work */
        fprintf(stderr, "hello: %s\n", naa_last_error());
        naa_finalize(&h);
        return 1;
    }
    naa_finalize(&h);
    size_t wrong = 0;
    for (size_t i = 0; i < sizeof data; i++) {
        wrong += data[i] != 42;
    }
    printf("naa_error %d: %" PRIu64 " bytes back, %zu wrong\n", (int)st.naa_error,
           st.bytes_received, wrong);
    return st.naa_error == NAA_SUCCESS && wrong == 0 ? 0 : 1;
}
