/*
 * A software NAA in C: the library's server with a C kernel registered by function code.
 * Function code 10 adds two vectors of doubles (regions 0 and 1 are the inputs, region 2 the
 * output); the reference's built-ins 1, 2 and 3 stay registered.
 *
 *   NAAICE_TRANSPORT=soft ./swnaa_server [address [port]]     (default 0.0.0.0 12345)
 *
 * Prints "listening on port N" once it serves; stops cleanly on SIGINT or SIGTERM.
 */
#define _POSIX_C_SOURCE 200809L
#include <naaice_ap2.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FNCODE_VEC_ADD 10
#define ERR_BAD_LAYOUT 0x10 /* an application-defined return code */

/* c = a + b. NAA memory has no alignment guarantee for doubles, hence memcpy. */
static uint32_t vector_add(void *user_data, const naa_swnaa_call *call, naa_swnaa_region *regions,
                           size_t n_regions) {
    (void)user_data;
    (void)call;
    if (n_regions != 3 || regions[0].size != regions[1].size || regions[0].size != regions[2].size ||
        regions[0].size % sizeof(double) != 0) {
        return ERR_BAD_LAYOUT;
    }
    const unsigned char *a = regions[0].addr;
    const unsigned char *b = regions[1].addr;
    unsigned char *c = regions[2].addr;
    for (size_t off = 0; off < regions[0].size; off += sizeof(double)) {
        double x, y, z;
        memcpy(&x, a + off, sizeof x);
        memcpy(&y, b + off, sizeof y);
        z = x + y;
        memcpy(c + off, &z, sizeof z);
    }
    return NAA_SUCCESS;
}

int main(int argc, char **argv) {
    const char *address = argc > 1 ? argv[1] : "0.0.0.0";
    long port = argc > 2 ? strtol(argv[2], NULL, 10) : 12345;
    if (port < 0 || port > 65535) {
        fprintf(stderr, "usage: %s [address [port]]\n", argv[0]);
        return 2;
    }

    /* Block the stop signals before the library starts its threads, then wait for one. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    if (pthread_sigmask(SIG_BLOCK, &stop, NULL) != 0) {
        return 1;
    }

    naa_swnaa *naa = naa_swnaa_new();
    if (naa == NULL || naa_swnaa_register_kernel(naa, FNCODE_VEC_ADD, vector_add, NULL) != 0 ||
        naa_swnaa_start(naa, address, (uint16_t)port) != 0) {
        fprintf(stderr, "cannot start the software NAA\n");
        if (naa != NULL) {
            naa_swnaa_destroy(naa);
        }
        return 1;
    }
    printf("listening on port %d\n", naa_swnaa_port(naa));
    fflush(stdout);

    int sig = 0;
    sigwait(&stop, &sig);
    printf("signal %d: stopping\n", sig);
    return naa_swnaa_destroy(naa) == 0 ? 0 : 1;
}
