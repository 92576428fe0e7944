/*
 * rpc_floor -- the floor of a NAAICE RPC on this RDMA device: the same verbs operations as
 * the protocol, with nothing else around them, both sides busy-polling their completion queue.
 *
 *   rpc_floor -l ADDR -p PORT -s SIZE -r CONNS                 (server: serves CONNS connections)
 *   rpc_floor -c ADDR -p PORT -s SIZE -r CONNS -n STEADY       (client)
 *
 * Per connection the client measures, like naaice-bench:
 *   connect   rdma_cm address and route resolution, QP creation, connect (until ESTABLISHED)
 *   register  ibv_reg_mr of its SIZE-byte region (memory allocated and touched at start)
 *   mrsp      a SEND with its address and rkey; the server registers a SIZE-byte region and
 *             answers with a SEND of its own; until that arrives
 *   first     the first RPC: RDMA WRITE WITH IMMEDIATE of SIZE bytes, the server's reply the
 *             same way back (WRITE WITH IMMEDIATE completing through the receive queue), until
 *             the reply's completion
 * and on the first connection STEADY more RPCs, each timed. It prints the medians:
 *
 *   #bytes connect_us register_us mrsp_us setup_us first_us steady_us steady_min_us
 *
 * Writes up to the QP's inline limit are posted inline, as naaice and perftest do. Nothing of
 * the protocol's bookkeeping runs: this is what the device and its kernel driver cost.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define INLINE_MAX 128
#define POLL_LIMIT_NS (10ull * 1000 * 1000 * 1000) /* a silent peer: give up after 10 s */

struct ctrl { /* the MRSP stand-in: one region's address, rkey and length */
    uint64_t addr;
    uint32_t rkey;
    uint32_t len;
};

struct conn {
    struct rdma_cm_id *id;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_mr *ctrl_mr, *mr;
    struct ctrl ctrl[2]; /* [0] received, [1] sent */
    char *region;
    struct ctrl peer;
};

static void die(const char *what)
{
    fprintf(stderr, "rpc_floor: %s failed: %s\n", what, strerror(errno));
    exit(1);
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static struct rdma_cm_event *expect_event(struct rdma_event_channel *ch, enum rdma_cm_event_type type)
{
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(ch, &ev))
        die("rdma_get_cm_event");
    if (ev->event != type) {
        fprintf(stderr, "rpc_floor: expected %s, got %s (status %d)\n", rdma_event_str(type),
                rdma_event_str(ev->event), ev->status);
        exit(1);
    }
    return ev;
}

/* Waits for one completion (busy polling); returns its opcode. */
static enum ibv_wc_opcode complete(struct conn *c)
{
    struct ibv_wc wc;
    uint64_t start = now_ns();
    unsigned spins = 0;
    int n;
    while ((n = ibv_poll_cq(c->cq, 1, &wc)) == 0) {
        if (++spins % 4096 == 0 && now_ns() - start > POLL_LIMIT_NS) {
            fprintf(stderr, "rpc_floor: no completion for 10 s\n");
            exit(1);
        }
    }
    if (n < 0)
        die("ibv_poll_cq");
    if (wc.status != IBV_WC_SUCCESS) {
        fprintf(stderr, "rpc_floor: completion failed: %s\n", ibv_wc_status_str(wc.status));
        exit(1);
    }
    return wc.opcode;
}

/* Waits until a receive completes (send completions on the way are consumed). */
static void complete_recv(struct conn *c)
{
    enum ibv_wc_opcode op;
    while ((op = complete(c)) != IBV_WC_RECV && op != IBV_WC_RECV_RDMA_WITH_IMM)
        ;
}

static void post_recv(struct conn *c, struct ibv_mr *mr, void *addr, uint32_t len)
{
    struct ibv_sge sge = {.addr = (uintptr_t)addr, .length = len, .lkey = mr ? mr->lkey : 0};
    struct ibv_recv_wr wr = {.sg_list = len ? &sge : NULL, .num_sge = len ? 1 : 0}, *bad;
    if (ibv_post_recv(c->id->qp, &wr, &bad))
        die("ibv_post_recv");
}

static void post_send(struct conn *c, struct ibv_send_wr *wr, void *addr, uint32_t len, uint32_t lkey)
{
    struct ibv_sge sge = {.addr = (uintptr_t)addr, .length = len, .lkey = lkey};
    struct ibv_send_wr *bad;
    wr->sg_list = &sge;
    wr->num_sge = 1;
    wr->send_flags = IBV_SEND_SIGNALED | (len <= INLINE_MAX ? IBV_SEND_INLINE : 0);
    if (ibv_post_send(c->id->qp, wr, &bad))
        die("ibv_post_send");
}

static void send_ctrl(struct conn *c)
{
    struct ibv_send_wr wr = {.opcode = IBV_WR_SEND};
    post_send(c, &wr, &c->ctrl[1], sizeof c->ctrl[1], c->ctrl_mr->lkey);
}

static void write_imm(struct conn *c, uint32_t imm)
{
    struct ibv_send_wr wr = {.opcode = IBV_WR_RDMA_WRITE_WITH_IMM, .imm_data = htonl(imm)};
    wr.wr.rdma.remote_addr = c->peer.addr;
    wr.wr.rdma.rkey = c->peer.rkey;
    post_send(c, &wr, c->region, c->peer.len, c->mr->lkey);
}

/* PD, CQ, QP and the control buffers of a connection's id. */
static void resources(struct conn *c)
{
    struct ibv_qp_init_attr attr = {
        .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1,
                .max_inline_data = INLINE_MAX},
        .qp_type = IBV_QPT_RC,
    };
    if (!(c->pd = ibv_alloc_pd(c->id->verbs)))
        die("ibv_alloc_pd");
    if (!(c->cq = ibv_create_cq(c->id->verbs, 32, NULL, NULL, 0)))
        die("ibv_create_cq");
    attr.send_cq = attr.recv_cq = c->cq;
    if (rdma_create_qp(c->id, c->pd, &attr))
        die("rdma_create_qp");
    if (!(c->ctrl_mr = ibv_reg_mr(c->pd, c->ctrl, sizeof c->ctrl, IBV_ACCESS_LOCAL_WRITE)))
        die("ibv_reg_mr (control)");
}

/* The region memory: allocated and touched once per process, registered per connection (a
 * floor of the setup must not count page faults of fresh memory: naaice-bench's buffer exists
 * before its connections do). */
static char *memory;

static void region(struct conn *c, uint32_t size)
{
    c->region = memory;
    c->mr = ibv_reg_mr(c->pd, c->region, size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!c->mr)
        die("ibv_reg_mr");
    c->ctrl[1] = (struct ctrl){.addr = (uintptr_t)c->region, .rkey = c->mr->rkey, .len = size};
}

static void release(struct conn *c)
{
    rdma_destroy_qp(c->id);
    ibv_dereg_mr(c->mr);
    ibv_dereg_mr(c->ctrl_mr);
    ibv_destroy_cq(c->cq);
    ibv_dealloc_pd(c->pd);
    rdma_destroy_id(c->id);
}

static struct sockaddr_in address(const char *ip, int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) {
        fprintf(stderr, "rpc_floor: %s is not an IPv4 address\n", ip);
        exit(2);
    }
    return a;
}

static void serve(const char *ip, int port, uint32_t size, int conns)
{
    struct sockaddr_in a = address(ip, port);
    struct rdma_event_channel *ch = rdma_create_event_channel();
    struct rdma_cm_id *listener;
    if (!ch)
        die("rdma_create_event_channel");
    if (rdma_create_id(ch, &listener, NULL, RDMA_PS_TCP))
        die("rdma_create_id");
    if (rdma_bind_addr(listener, (struct sockaddr *)&a) || rdma_listen(listener, 4))
        die("rdma_bind_addr/rdma_listen");
    printf("listening\n");
    fflush(stdout);
    for (int i = 0; i < conns; i++) {
        struct conn c = {0};
        struct rdma_conn_param param = {.responder_resources = 1, .initiator_depth = 1};
        struct rdma_cm_event *ev = expect_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
        c.id = ev->id;
        rdma_ack_cm_event(ev);
        resources(&c);
        post_recv(&c, c.ctrl_mr, &c.ctrl[0], sizeof c.ctrl[0]);
        if (rdma_accept(c.id, &param))
            die("rdma_accept");
        rdma_ack_cm_event(expect_event(ch, RDMA_CM_EVENT_ESTABLISHED));
        /* MRSP: the request names the client's region; register ours, answer. */
        complete_recv(&c);
        c.peer = c.ctrl[0];
        if (c.peer.len != size) {
            fprintf(stderr, "rpc_floor: the client asked for %u bytes, not %u\n", c.peer.len, size);
            exit(1);
        }
        region(&c, size);
        post_recv(&c, NULL, NULL, 0);
        send_ctrl(&c);
        /* RPCs until the client's last one (immediate 0). */
        for (;;) {
            uint32_t imm;
            struct ibv_wc wc;
            int n;
            uint64_t start = now_ns();
            while ((n = ibv_poll_cq(c.cq, 1, &wc)) == 0)
                if (now_ns() - start > POLL_LIMIT_NS) {
                    fprintf(stderr, "rpc_floor: the client went silent\n");
                    exit(1);
                }
            if (n < 0 || wc.status != IBV_WC_SUCCESS) {
                fprintf(stderr, "rpc_floor: server completion failed\n");
                exit(1);
            }
            if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM)
                continue;
            imm = ntohl(wc.imm_data);
            if (imm == 0)
                break;
            post_recv(&c, NULL, NULL, 0);
            write_imm(&c, imm);
        }
        rdma_disconnect(c.id);
        rdma_ack_cm_event(expect_event(ch, RDMA_CM_EVENT_DISCONNECTED));
        release(&c);
    }
    rdma_destroy_id(listener);
    rdma_destroy_event_channel(ch);
}

static double us(uint64_t ns) { return (double)ns / 1000.0; }

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* One RPC: our write with immediate, until the server's write with immediate arrived. */
static void rpc(struct conn *c, uint32_t imm)
{
    post_recv(c, NULL, NULL, 0);
    write_imm(c, imm);
    complete_recv(c);
}

static void client(const char *ip, int port, uint32_t size, int conns, int steady)
{
    struct sockaddr_in a = address(ip, port);
    double *t[5], *s = calloc((size_t)steady, sizeof(double));
    for (int k = 0; k < 5; k++)
        if (!(t[k] = calloc((size_t)conns, sizeof(double))))
            die("calloc");
    if (!s)
        die("calloc");
    for (int i = 0; i < conns; i++) {
        struct conn c = {0};
        struct rdma_conn_param param = {.responder_resources = 1, .initiator_depth = 1,
                                        .retry_count = 7, .rnr_retry_count = 7};
        struct rdma_event_channel *ch = rdma_create_event_channel();
        uint64_t t0 = now_ns(), t1, t2, t3, t4;
        if (!ch)
            die("rdma_create_event_channel");
        if (rdma_create_id(ch, &c.id, NULL, RDMA_PS_TCP))
            die("rdma_create_id");
        if (rdma_resolve_addr(c.id, NULL, (struct sockaddr *)&a, 2000))
            die("rdma_resolve_addr");
        rdma_ack_cm_event(expect_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
        if (rdma_resolve_route(c.id, 2000))
            die("rdma_resolve_route");
        rdma_ack_cm_event(expect_event(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
        resources(&c);
        if (rdma_connect(c.id, &param))
            die("rdma_connect");
        rdma_ack_cm_event(expect_event(ch, RDMA_CM_EVENT_ESTABLISHED));
        t1 = now_ns();
        region(&c, size);
        t2 = now_ns();
        post_recv(&c, c.ctrl_mr, &c.ctrl[0], sizeof c.ctrl[0]);
        send_ctrl(&c);
        complete_recv(&c);
        c.peer = c.ctrl[0];
        t3 = now_ns();
        rpc(&c, 1);
        t4 = now_ns();
        t[0][i] = us(t1 - t0), t[1][i] = us(t2 - t1), t[2][i] = us(t3 - t2);
        t[3][i] = us(t3 - t1), t[4][i] = us(t4 - t3);
        if (i == 0)
            for (int k = 0; k < steady; k++) {
                uint64_t r0 = now_ns();
                rpc(&c, 2 + (uint32_t)k % 1000);
                s[k] = us(now_ns() - r0);
            }
        { /* the last RPC's immediate 0 ends the server's loop; it does not answer */
            struct ibv_send_wr wr = {.opcode = IBV_WR_RDMA_WRITE_WITH_IMM, .imm_data = 0};
            wr.wr.rdma.remote_addr = c.peer.addr;
            wr.wr.rdma.rkey = c.peer.rkey;
            post_send(&c, &wr, c.region, 1, c.mr->lkey);
            while (complete(&c) != IBV_WC_RDMA_WRITE)
                ;
        }
        rdma_ack_cm_event(expect_event(ch, RDMA_CM_EVENT_DISCONNECTED));
        rdma_disconnect(c.id);
        release(&c);
        rdma_destroy_event_channel(ch);
    }
    printf("#bytes connect_us register_us mrsp_us setup_us first_us steady_us steady_min_us\n");
    printf("%u ", size);
    for (int k = 0; k < 5; k++)
        printf("%s%.2f", k ? " " : "", median(t[k], conns));
    double steady_median = median(s, steady); /* sorts s */
    printf(" %.2f %.2f\n", steady_median, s[0]);
}

int main(int argc, char **argv)
{
    const char *listen_ip = NULL, *connect_ip = NULL;
    int port = 18600, conns = 10, steady = 1000, opt;
    long size = 64;
    while ((opt = getopt(argc, argv, "l:c:p:s:r:n:")) != -1) {
        switch (opt) {
        case 'l': listen_ip = optarg; break;
        case 'c': connect_ip = optarg; break;
        case 'p': port = atoi(optarg); break;
        case 's': size = atol(optarg); break;
        case 'r': conns = atoi(optarg); break;
        case 'n': steady = atoi(optarg); break;
        default:
            fprintf(stderr, "usage: rpc_floor (-l ADDR | -c ADDR) [-p PORT] [-s SIZE] [-r CONNS] [-n STEADY]\n");
            return 2;
        }
    }
    if (!listen_ip == !connect_ip || size < 1 || size > (1l << 30) || conns < 1 || steady < 1 ||
        port < 1 || port > 65535) {
        fprintf(stderr, "rpc_floor: give -l or -c; 1 <= SIZE <= 1 GiB, CONNS and STEADY >= 1\n");
        return 2;
    }
    if (!(memory = malloc((size_t)size)))
        die("malloc");
    memset(memory, 0x5a, (size_t)size);
    if (listen_ip)
        serve(listen_ip, port, (uint32_t)size, conns);
    else
        client(connect_ip, port, (uint32_t)size, conns, steady);
    return 0;
}
