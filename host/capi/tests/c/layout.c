/*
 * Our header against the C reference's definitions (spec 6.1 and the AP2 documentation):
 * the types must have the same size, alignment and field offsets, the enumerators the same
 * values, the fields the same types, and the functions the same prototypes. The checks are
 * compile-time (a mismatch fails the build under -Werror); the program prints the layout.
 */
#include <naaice_ap2.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* ---- the reference's definitions, renamed ---- */
enum ref_naaice_communication_state {
    REF_INIT = 0, REF_READY = 1, REF_CONNECTED = 2, REF_DISCONNECTED = 3,
    REF_MRSP_SENDING = 10, REF_MRSP_RECEIVING = 11, REF_MRSP_DONE = 12,
    REF_DATA_SENDING = 20, REF_CALCULATING = 21, REF_DATA_RECEIVING = 22,
    REF_FINISHED = 30, REF_ERROR = 40,
};
enum ref_naa_error { REF_NAA_SUCCESS = 0x00, REF_SOCKET_UNAVAIL = 0x01, REF_KERNEL_TIMEOUT = 0x02 };
struct ref_naaice_communication_context;
typedef struct ref_naa_handle {
    unsigned int function_code;
    struct ref_naaice_communication_context *comm_ctx;
} ref_naa_handle;
typedef struct ref_naa_status {
    enum ref_naaice_communication_state state;
    enum ref_naa_error naa_error;
    uint64_t bytes_received;
} ref_naa_status;
typedef struct ref_naa_param_t {
    void *addr;
    size_t size;
    bool single_send;
} ref_naa_param_t;

#define SAME_LAYOUT(ours, ref)                                                            \
    _Static_assert(sizeof(ours) == sizeof(ref), "size of " #ours);                        \
    _Static_assert(_Alignof(ours) == _Alignof(ref), "alignment of " #ours)
#define SAME_FIELD(ours, ref, field)                                                      \
    _Static_assert(offsetof(ours, field) == offsetof(ref, field), "offset of " #field);   \
    _Static_assert(sizeof(((ours *)0)->field) == sizeof(((ref *)0)->field), "size of " #field)

SAME_LAYOUT(naa_param_t, ref_naa_param_t);
SAME_FIELD(naa_param_t, ref_naa_param_t, addr);
SAME_FIELD(naa_param_t, ref_naa_param_t, size);
SAME_FIELD(naa_param_t, ref_naa_param_t, single_send);
SAME_LAYOUT(naa_handle, ref_naa_handle);
SAME_FIELD(naa_handle, ref_naa_handle, function_code);
SAME_FIELD(naa_handle, ref_naa_handle, comm_ctx);
SAME_LAYOUT(naa_status, ref_naa_status);
SAME_FIELD(naa_status, ref_naa_status, state);
SAME_FIELD(naa_status, ref_naa_status, naa_error);
SAME_FIELD(naa_status, ref_naa_status, bytes_received);
SAME_LAYOUT(enum naa_error, enum ref_naa_error);
SAME_LAYOUT(enum naaice_communication_state, enum ref_naaice_communication_state);

/* Enumerator values (the reference's names). */
_Static_assert((int)INIT == (int)REF_INIT && (int)READY == (int)REF_READY && (int)CONNECTED == (int)REF_CONNECTED, "states");
_Static_assert((int)DISCONNECTED == (int)REF_DISCONNECTED && (int)MRSP_SENDING == (int)REF_MRSP_SENDING, "states");
_Static_assert((int)MRSP_RECEIVING == (int)REF_MRSP_RECEIVING && (int)MRSP_DONE == (int)REF_MRSP_DONE, "states");
_Static_assert((int)DATA_SENDING == (int)REF_DATA_SENDING && (int)CALCULATING == (int)REF_CALCULATING, "states");
_Static_assert((int)DATA_RECEIVING == (int)REF_DATA_RECEIVING && (int)FINISHED == (int)REF_FINISHED, "states");
_Static_assert((int)ERROR == (int)REF_ERROR, "states");
_Static_assert(NAA_SUCCESS == 0 && SOCKET_UNAVAIL == 1 && KERNEL_TIMEOUT == 2, "naa_error");
/* naaice-rs's code for a failed kernel, from the range the spec reserves (docs/protocol.md). */
_Static_assert(KERNEL_FAILED == 3, "naa_error");

/* Field types: exactly the reference's (a mismatch is a compile error). */
#define FIELD_IS(obj, field, type) _Static_assert(_Generic((obj).field, type: 1, default: 0), #field)
static naa_status st;
static naa_param_t pa;
static naa_handle ha;
FIELD_IS(st, state, enum naaice_communication_state);
FIELD_IS(st, naa_error, enum naa_error);
FIELD_IS(st, bytes_received, uint64_t);
FIELD_IS(pa, addr, void *);
FIELD_IS(pa, size, size_t);
FIELD_IS(pa, single_send, bool);
FIELD_IS(ha, function_code, unsigned int);

/* Prototypes of the reference (AP2 documentation, section 2.2). */
static int (*const fn_create)(unsigned int, naa_param_t *, unsigned int, naa_param_t *, unsigned int,
                           naa_handle *) = naa_create;
static int (*const fn_invoke)(naa_handle *) = naa_invoke;
static int (*const fn_test)(naa_handle *, bool *, naa_status *) = naa_test;
static int (*const fn_wait)(naa_handle *, naa_status *) = naa_wait;
static int (*const fn_finalize)(naa_handle *) = naa_finalize;

int main(void) {
    /* The reference's documentation example leaves single_send to its default, false. */
    double a[4], b[4];
    naa_param_t input_params[2] = {{.addr = a, .size = sizeof a}, {.addr = b, .size = sizeof b}};
    (void)ha;
    (void)pa;
    (void)st;
    printf("naa_param_t %zu, naa_handle %zu, naa_status %zu (state @%zu, naa_error @%zu, "
           "bytes_received @%zu); single_send default %d\n",
           sizeof(naa_param_t), sizeof(naa_handle), sizeof(naa_status),
           offsetof(naa_status, state), offsetof(naa_status, naa_error),
           offsetof(naa_status, bytes_received), (int)input_params[1].single_send);
    /* The header's version macros and the library's version agree. */
    char built[32];
    snprintf(built, sizeof built, "%d.%d.%d", NAAICE_VERSION_MAJOR, NAAICE_VERSION_MINOR,
             NAAICE_VERSION_PATCH);
    printf("version: header %s (%s), library %s\n", NAAICE_VERSION_STRING, built, naa_version());
    if (strcmp(built, NAAICE_VERSION_STRING) != 0 || strcmp(naa_version(), NAAICE_VERSION_STRING) != 0)
        return 1;
    return (fn_create && fn_invoke && fn_test && fn_wait && fn_finalize) ? 0 : 1;
}
