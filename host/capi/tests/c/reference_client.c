/*
 * A low-level (AP1) client in the style of the reference's programs: it includes nothing but
 * <naaice.h>, connects to SERVER_CONNECTION_PORT unless a port is given (as the reference's
 * naaice_client.c does, which passes SERVER_CONNECTION_PORT to
 * naaice_init_communication_context), and uses every macro of the reference's naaice.h that
 * naaice.h provides, the MRSP wire records and the connection and polling functions that
 * naaice-rs added for reference programs (naaice_poll_and_handle_connection_event,
 * naaice_poll_cq_busy).
 *
 * Usage: reference_client REMOTE_IP [PORT]. The NAA must serve function code 1 with the
 * built-in kernel that adds 1 to every byte of every parameter region. Region 0 is input and
 * output (in place), region 1 input only; two RPCs, the first completed with
 * naaice_poll_cq_busy, the second with naaice_do_data_transfer.
 */
#include <naaice.h>

#ifndef NAAICE_H
#error "naaice.h defines its include guard NAAICE_H"
#endif

#define FNCODE 1
#define REGION_BYTES 4096

/* The MRSP records have the wire sizes (spec section 2). */
_Static_assert(sizeof(struct naaice_mr_hdr) + sizeof(struct naaice_mr_dynamic_hdr) == 4,
               "MRSP header");
_Static_assert(sizeof(struct naaice_mr_advertisement) == 16, "advertisement record");
_Static_assert(sizeof(struct naaice_mr_advertisement_request) == 24, "request record");
_Static_assert(sizeof(struct naaice_mr_hdr) + sizeof(struct naaice_mr_error) == 4,
               "error message");
_Static_assert(sizeof(struct naaice_mr_request) == 8, "reserved request record");
_Static_assert(MR_SIZE_MRSP == 24 * MAX_MRS, "MRSP records of MAX_MRS regions");
_Static_assert(MSG_MR_ERR == 0 && MSG_MR_AAR == 1 && MSG_MR_A == 2 && MSG_MR_R == 3,
               "message types");
_Static_assert(SERVER_CONNECTION_PORT == 12345 && MAX_MRS == 32 && IMMEDIATE_OFFSET == 8 &&
                   DEFAULT_TIMEOUT == 3600 && DEFAULT_RETRY_COUNT == 7,
               "the reference's values");

static int failures = 0;

static void check(int ok, const char *what) {
    if (!ok) {
        failures++;
        fprintf(stderr, "check failed: %s (last error: %s)\n", what, naa_last_error());
    }
}

/* htonll / ntohll: a record's 64-bit field as it travels, flag byte first. */
static void check_byte_order(void) {
    struct naaice_mr_advertisement_request rec;
    memset(&rec, 0, sizeof rec);
    uint64_t info = ((uint64_t)(MRFLAG_INPUT | MRFLAG_OUTPUT) << 56) | 0x1000;
    rec.mr_info = htonll(info);
    check(rec.mr_info_bytearray[0] == (MRFLAG_INPUT | MRFLAG_OUTPUT), "flag byte first");
    check(rec.mr_info_bytearray[6] == 0x10 && rec.mr_info_bytearray[7] == 0x00,
          "address bytes big-endian");
    check(ntohll(rec.mr_info) == info, "ntohll undoes htonll");
}

int main(int argc, char *argv[]) {
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: %s REMOTE_IP [PORT]\n", argv[0]);
        return 2;
    }
    uint16_t port = SERVER_CONNECTION_PORT;
    if (argc == 3) {
        port = (uint16_t)strtol(argv[2], NULL, 10);
    }
    check_byte_order();

    size_t sizes[2] = {REGION_BYTES, REGION_BYTES};
    char *params[2] = {malloc(REGION_BYTES), malloc(REGION_BYTES)};
    if (params[0] == NULL || params[1] == NULL) {
        return 1;
    }
    memset(params[0], 10, REGION_BYTES);
    memset(params[1], 20, REGION_BYTES);

    struct naaice_communication_context *ctx = NULL;
    if (naaice_init_communication_context(&ctx, 0, sizes, params, 2, 0, NULL, FNCODE, NULL,
                                          argv[1], port)) {
        fprintf(stderr, "init: %s\n", naa_last_error());
        return 1;
    }
    /* The reference's event loop shape: handle connection events until connected. */
    int rounds = 0;
    while (naaice_get_state(ctx) < NAAICE_CONNECTED && rounds < 100) {
        check(naaice_poll_and_handle_connection_event(ctx) == 0, "connection event");
        rounds++;
    }
    check(naaice_get_state(ctx) == NAAICE_CONNECTED, "connected");
    check(naaice_poll_and_handle_connection_event(ctx) == 0, "no event once connected");
    check(naaice_set_input_mr(ctx, 0) == 0 && naaice_set_output_mr(ctx, 0) == 0 &&
              naaice_set_input_mr(ctx, 1) == 0,
          "region flags");
    check(naaice_register_mrs(ctx) == 0, "register");
    check(naaice_do_mrsp(ctx) == 0 && naaice_get_state(ctx) == NAAICE_MRSP_DONE, "MRSP");

    /* RPC 1: started, then completed by busy waiting. */
    check(naaice_init_data_transfer(ctx) == 0, "start RPC 1");
    check(naaice_poll_cq_busy(ctx) == 0, "busy wait for RPC 1");
    check(naaice_get_state(ctx) == NAAICE_FINISHED && naaice_get_naa_returncode(ctx) == 0,
          "RPC 1 finished");
    int ok1 = 1;
    for (size_t i = 0; i < REGION_BYTES; i++) {
        ok1 &= (unsigned char)params[0][i] == 11 && (unsigned char)params[1][i] == 20;
    }
    check(ok1, "RPC 1 results");
    check(naaice_poll_cq_busy(ctx) == 0, "busy wait with nothing in flight");

    /* RPC 2: the blocking transfer. */
    check(naaice_do_data_transfer(ctx) == 0, "RPC 2");
    int ok2 = 1;
    for (size_t i = 0; i < REGION_BYTES; i++) {
        ok2 &= (unsigned char)params[0][i] == 12;
    }
    check(ok2, "RPC 2 results");

    check(naaice_disconnect_and_cleanup(ctx) == 0, "cleanup");
    /* A stale context is refused. */
    check(naaice_poll_cq_busy(ctx) == -1 && naaice_poll_and_handle_connection_event(ctx) == -1,
          "stale context refused");
    free(params[0]);
    free(params[1]);
    printf("reference client on port %u: %s, %d failed\n", (unsigned)port,
           failures ? "WRONG" : "correct", failures);
    return failures ? 1 : 0;
}
