/*
 * A low-level (AP1) client written against the reference's documented naaice.h (seed 000
 * section 3.1, spec section 7), including nothing but <naaice.h>: printf, malloc, memset,
 * memcpy and strtol come from the standard headers it includes, as with the reference.
 *
 * Usage: ap1_client REMOTE-IP PORT. The NAA (run by tests/c_programs.rs) serves function code
 * 5 with a probe kernel that, per RPC: counts RPCs in internal region 0 (8192 bytes), adds 1
 * to every byte of the in-place region p1, and writes into the output region p2 the user
 * bytes, the function code, the counter, the RPC number, the NAA's copy of the single-send
 * region p0 and the first 186 bytes of p1. Every result is checked byte for byte against a
 * model of the NAA's memory. Exit status 0 when every check passed.
 */
#include <naaice.h>

#include "check.h"

#define FNCODE 5
#define N_PARAMS 3
#define P0 64   /* single-send input */
#define P1 1000 /* input and output (in place) */
#define P2 256  /* output */
#define INTERNAL 8192

/* What the NAA holds for p0 and p1 (the model the results are checked against). */
static unsigned char naa_p0[P0];
static unsigned char naa_p1[P1];

/* Applies one RPC to the model: the NAA received `sent` bytes of p1 (and p0 if `p0_sent`),
 * ran the probe kernel, and wrote p1 and p2 back. Checks the program's p1 and p2. */
static void expect_rpc(const unsigned char *p0, const unsigned char *p1, size_t sent,
                       int p0_sent, const unsigned char user[3], int rpc,
                       const unsigned char *got_p1, const unsigned char *got_p2) {
    if (p0_sent) {
        memcpy(naa_p0, p0, P0);
    }
    memcpy(naa_p1, p1, sent);
    for (size_t i = 0; i < P1; i++) {
        naa_p1[i] = (unsigned char)(naa_p1[i] + 1);
    }
    unsigned char want_p2[P2];
    want_p2[0] = user[0];
    want_p2[1] = user[1];
    want_p2[2] = user[2];
    want_p2[3] = FNCODE;
    want_p2[4] = (unsigned char)rpc; /* the counter in the internal region */
    want_p2[5] = (unsigned char)rpc; /* the NAA's RPC number */
    memcpy(want_p2 + 6, naa_p0, P0);
    memcpy(want_p2 + 6 + P0, naa_p1, P2 - 6 - P0);
    CHECK(memcmp(got_p1, naa_p1, P1) == 0);
    CHECK(memcmp(got_p2, want_p2, P2) == 0);
    if (memcmp(got_p2, want_p2, P2) != 0) {
        for (int i = 0; i < P2; i++) {
            if (got_p2[i] != want_p2[i]) {
                fprintf(stderr, "rpc %d: p2[%d] is %u, expected %u\n", rpc, i, got_p2[i],
                        want_p2[i]);
                break;
            }
        }
    }
}

int main(int argc, char *argv[]) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s remote-ip port\n", argv[0]);
        return 2;
    }
    char *end;
    long port = strtol(argv[2], &end, 10);
    REQUIRE(*end == '\0' && port > 0 && port < 65536);

    size_t param_sizes[N_PARAMS] = {P0, P1, P2};
    char *params[N_PARAMS];
    for (int i = 0; i < N_PARAMS; i++) {
        params[i] = malloc(param_sizes[i]);
        REQUIRE(params[i] != NULL);
    }
    unsigned char *p0 = (unsigned char *)params[0];
    unsigned char *p1 = (unsigned char *)params[1];
    unsigned char *p2 = (unsigned char *)params[2];
    for (int i = 0; i < P0; i++) p0[i] = (unsigned char)(0x40 + i);
    for (int i = 0; i < P1; i++) p1[i] = (unsigned char)(i * 3);
    memset(p2, 0, P2);
    size_t internal_sizes[1] = {INTERNAL};

    /* Bad arguments fail with -1 and a readable reason; nothing is created. */
    struct naaice_communication_context *comm_ctx = NULL;
    naa_clear_last_error();
    CHECK(naa_last_error_kind() == NAA_ERRKIND_NONE && strcmp(naa_last_error(), "") == 0);
    CHECK(naaice_init_communication_context(&comm_ctx, 0, param_sizes, params, N_PARAMS, 1,
                                            internal_sizes, 0, NULL, argv[1],
                                            (uint16_t)port) == -1);
    CHECK(comm_ctx == NULL);
    CHECK(naa_last_error_kind() == NAA_ERRKIND_ARGUMENT);
    CHECK(strstr(naa_last_error(), "naaice_init_communication_context: function code 0") !=
          NULL);
    CHECK(naaice_init_communication_context(&comm_ctx, 0, param_sizes, params, N_PARAMS,
                                            MAX_MRS, internal_sizes, FNCODE, NULL, argv[1],
                                            (uint16_t)port) == -1);
    CHECK(strstr(naa_last_error(), "at most 32") != NULL);

    /* 1. Context: three parameters, one internal region, requested addresses from
     * 0x10000000 (spec 10.2). */
    REQUIRE(naaice_init_communication_context(&comm_ctx, 0x10000000, param_sizes, params,
                                              N_PARAMS, 1, internal_sizes, FNCODE, NULL,
                                              argv[1], (uint16_t)port) == 0);
    REQUIRE(comm_ctx != NULL);
    CHECK(naaice_get_state(comm_ctx) == INIT);
    /* Registration needs the connection (the reference crashes here). */
    CHECK(naaice_register_mrs(comm_ctx) == -1);
    CHECK(naa_last_error_kind() == NAA_ERRKIND_STATE);

    /* 2. Connection, regions, immediate. */
    REQUIRE(naaice_setup_connection(comm_ctx) == 0);
    CHECK(naaice_get_state(comm_ctx) == CONNECTED);
    REQUIRE(naaice_set_singlesend_mr(comm_ctx, 0) == 0);
    REQUIRE(naaice_set_input_mr(comm_ctx, 1) == 0);
    REQUIRE(naaice_set_output_mr(comm_ctx, 1) == 0);
    REQUIRE(naaice_set_output_mr(comm_ctx, 2) == 0);
    CHECK(naaice_set_input_mr(comm_ctx, N_PARAMS) == -1);
    CHECK(naa_last_error_kind() == NAA_ERRKIND_ARGUMENT);
    CHECK(strstr(naa_last_error(), "naaice_set_input_mr: region index 3 is out of range") !=
          NULL);
    /* The internal region again, at the address the sequential layout gives it. */
    uint64_t internal_addrs[1] = {0x10000000};
    REQUIRE(naaice_set_internal_mrs(comm_ctx, 1, internal_addrs, internal_sizes) == 0);
    uint64_t wrong_addrs[1] = {0x20000000};
    CHECK(naaice_set_internal_mrs(comm_ctx, 1, wrong_addrs, internal_sizes) == -1);
    uint8_t imm[3] = {0x11, 0x22, 0x33};
    REQUIRE(naaice_set_immediate(comm_ctx, imm) == 0);
    REQUIRE(naaice_register_mrs(comm_ctx) == 0);
    CHECK(naaice_set_bytes_to_send(comm_ctx, 1, P1 + 1) == -1);
    CHECK(naaice_get_naa_returncode(comm_ctx) == -1);

    /* 3. MRSP. */
    REQUIRE(naaice_do_mrsp(comm_ctx) == 0);
    CHECK(naaice_get_state(comm_ctx) == MRSP_DONE);
    /* Flags are fixed once the MRSP ran. */
    CHECK(naaice_set_output_mr(comm_ctx, 0) == -1);
    CHECK(naa_last_error_kind() == NAA_ERRKIND_STATE);

    /* 4. RPC 1, blocking: everything is written, p0 included. */
    unsigned char sent_p0[P0], sent_p1[P1];
    memcpy(sent_p0, p0, P0);
    memcpy(sent_p1, p1, P1);
    REQUIRE(naaice_do_data_transfer(comm_ctx) == 0);
    CHECK(naaice_get_state(comm_ctx) == FINISHED);
    CHECK(naaice_get_naa_returncode(comm_ctx) == 0);
    CHECK(naaice_get_bytes_received(comm_ctx) == P2); /* the last output region */
    expect_rpc(sent_p0, sent_p1, P1, 1, imm, 1, p1, p2);

    /* 5. RPC 2, non-blocking: new data in p0 (single-send: not sent again), new data in p1
     * of which only the first 100 bytes are sent, new user bytes. */
    memset(p0, 0xEE, P0);
    for (int i = 0; i < P1; i++) p1[i] = (unsigned char)(i * 7);
    memcpy(sent_p1, p1, P1);
    REQUIRE(naaice_set_bytes_to_send(comm_ctx, 1, 100) == 0);
    uint8_t imm2[3] = {0x44, 0x55, 0x66};
    REQUIRE(naaice_set_immediate(comm_ctx, imm2) == 0);
    REQUIRE(naaice_init_data_transfer(comm_ctx) == 0);
    CHECK(naaice_init_data_transfer(comm_ctx) == -1); /* one RPC at a time */
    CHECK(naa_last_error_kind() == NAA_ERRKIND_STATE);
    int polls = 0;
    while (naaice_get_state(comm_ctx) < FINISHED) {
        REQUIRE(naaice_poll_cq_nonblocking(comm_ctx) == 0);
        polls++;
    }
    CHECK(naaice_get_state(comm_ctx) == FINISHED);
    CHECK(naaice_get_naa_returncode(comm_ctx) == 0);
    expect_rpc(NULL, sent_p1, 100, 0, imm2, 2, p1, p2);

    /* 6. RPC 3: the whole p1 again (a negative count resets), waiting with the blocking
     * poll. */
    memcpy(sent_p1, p1, P1);
    REQUIRE(naaice_set_bytes_to_send(comm_ctx, 1, -1) == 0);
    REQUIRE(naaice_init_data_transfer(comm_ctx) == 0);
    while (naaice_get_state(comm_ctx) < FINISHED) {
        REQUIRE(naaice_poll_cq_blocking(comm_ctx) == 0);
    }
    expect_rpc(NULL, sent_p1, P1, 0, imm2, 3, p1, p2);
    /* Nothing in flight: the blocking poll returns at once. */
    CHECK(naaice_poll_cq_blocking(comm_ctx) == 0);

    /* 7. RPC 4: a zero-length write of p1 (the NAA keeps its copy). */
    REQUIRE(naaice_set_bytes_to_send(comm_ctx, 1, 0) == 0);
    REQUIRE(naaice_do_data_transfer(comm_ctx) == 0);
    expect_rpc(NULL, sent_p1, 0, 0, imm2, 4, p1, p2);

    /* 8. Cleanup; the context is gone afterwards and a stale pointer is refused. */
    REQUIRE(naaice_disconnect_and_cleanup(comm_ctx) == 0);
    CHECK(naaice_do_data_transfer(comm_ctx) == -1);
    CHECK(naa_last_error_kind() == NAA_ERRKIND_ARGUMENT);
    CHECK(strstr(naa_last_error(), "unknown comm_ctx") != NULL);
    CHECK(naaice_get_state(comm_ctx) == ERROR);
    CHECK(naaice_disconnect_and_cleanup(comm_ctx) == -1);
    CHECK(naaice_poll_cq_nonblocking(NULL) == -1);

    /* 9. A second context without the internal region and with a single-send region as its
     * only input, MRSP started without waiting and completed with the blocking poll. The
     * probe kernel answers the unexpected layout with application code 0x10: the RPCs still
     * count as finished (as in the reference) and the code is readable. The second RPC has
     * no input to write and still reaches the NAA (the reference posts garbage, D-08). */
    struct naaice_communication_context *second = NULL;
    REQUIRE(naaice_init_communication_context(&second, 0, param_sizes, params, N_PARAMS, 0,
                                              NULL, FNCODE, NULL, argv[1],
                                              (uint16_t)port) == 0);
    REQUIRE(naaice_setup_connection(second) == 0);
    REQUIRE(naaice_set_singlesend_mr(second, 0) == 0);
    REQUIRE(naaice_set_output_mr(second, 2) == 0);
    REQUIRE(naaice_init_mrsp(second) == 0);
    while (naaice_get_state(second) < MRSP_DONE) {
        REQUIRE(naaice_poll_cq_blocking(second) == 0);
    }
    CHECK(naaice_get_state(second) == MRSP_DONE);
    for (int rpc = 1; rpc <= 2; rpc++) {
        REQUIRE(naaice_do_data_transfer(second) == 0);
        CHECK(naaice_get_state(second) == FINISHED);
        CHECK(naaice_get_naa_returncode(second) == 0x10);
    }
    REQUIRE(naaice_disconnect_and_cleanup(second) == 0);

    /* 10. A third context cleaned up before its MRSP finished: nothing leaks. */
    struct naaice_communication_context *third = NULL;
    REQUIRE(naaice_init_communication_context(&third, 0, param_sizes, params, N_PARAMS, 0,
                                              NULL, FNCODE, NULL, argv[1],
                                              (uint16_t)port) == 0);
    REQUIRE(naaice_setup_connection(third) == 0);
    REQUIRE(naaice_set_input_mr(third, 0) == 0);
    REQUIRE(naaice_set_output_mr(third, 2) == 0);
    REQUIRE(naaice_init_mrsp(third) == 0);
    REQUIRE(naaice_disconnect_and_cleanup(third) == 0);

    for (int i = 0; i < N_PARAMS; i++) free(params[i]);
    printf("ap1 client: %d checks, %d failed (%d non-blocking polls)\n", checks, failures,
           polls);
    return failures == 0 ? 0 : 1;
}
