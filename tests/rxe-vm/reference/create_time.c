/*
 * create_time.c -- set-up time and first RPC of an NAA connection, through the AP2 API only.
 *
 *   create_time N SIZE FN [HOST:PORT]
 *
 * Does N iterations of: naa_create (connect, memory registration, MRSP), the first
 * naa_invoke + naa_wait, naa_finalize, with one in-place parameter of SIZE bytes (input and
 * output at the same address, as the reference's examples pass it) and function code FN.
 * Prints one line per iteration, "create_us first_us" (microseconds, CLOCK_MONOTONIC), then
 * "median create_us C first_us F n N early_waits E" on stdout. first_us ends when naa_wait
 * reports the RPC FINISHED: naa_wait is called again while it returns with the RPC still in
 * flight (the reference's naa_wait returns after the first completion event, which can be the
 * client's own RDMA WRITE; E counts the iterations where that happened, each also noted on
 * stderr). Exits non-zero when a call fails or the RPC does not finish with NAA_SUCCESS; with
 * FN 1 (the software NAAs' "add 1 to every byte") it also checks the result.
 *
 * With HOST:PORT, it sets NAA_SPEC to N copies of HOST:PORT:FN:1 before the first naa_create:
 * the C reference's naa_finalize does not release its NAA_SPEC entry, so every naa_create of a
 * process needs an entry of its own there. Without it, NAA_SPEC must already hold N entries.
 * The parameter's memory is allocated and touched once, before the first iteration.
 *
 * The program executes itself once more with the time of that exec in the environment
 * (CREATE_TIME_EXEC_US), and the median line ends with "exec_create_us X": from that exec to
 * the end of the first naa_create. It counts what the first create_us cannot: the reference's
 * libraries (libibverbs, librdmacm) are loaded and relocated by the dynamic linker before main,
 * naaice-rs loads rdma-core inside its first naa_create.
 *
 * It includes nothing but naaice_ap2.h (and libc), so that it compiles unchanged against the
 * C reference's header and against naaice-rs's drop-in (host/capi/include/naaice_ap2.h);
 * compare.sh builds both variants:
 *
 *   cc -O2 create_time.c -I REF/lib -I REF_BUILD/lib -I MICROLOG/include -DULOG_BUILD_DISABLED=1 \
 *      REF_BUILD/lib/libnaaice_middleware.a REF_BUILD/lib/libnaaice_low_level.a \
 *      -libverbs -lrdmacm -lpthread
 *   cc -O2 create_time.c -I host/capi/include -L target/release -lnaaice_ap2 \
 *      -Wl,-rpath,$PWD/target/release
 */
#define _GNU_SOURCE
#include "naaice_ap2.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof(double), cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv) {
  const char *stamp = getenv("CREATE_TIME_EXEC_US");
  if (!stamp) {
    char value[32];
    snprintf(value, sizeof value, "%.1f", now_us());
    setenv("CREATE_TIME_EXEC_US", value, 1);
    execv("/proc/self/exe", argv);
    perror("create_time: execv /proc/self/exe");
    return 1;
  }
  double exec_us = strtod(stamp, NULL);
  double exec_create_us = 0;
  if (argc < 4 || argc > 5) {
    fprintf(stderr, "usage: %s N SIZE FN [HOST:PORT]\n", argv[0]);
    return 2;
  }
  int n = atoi(argv[1]);
  size_t size = (size_t)strtoull(argv[2], NULL, 10);
  unsigned fn = (unsigned)atoi(argv[3]);
  if (n < 1 || size < 1 || fn < 1 || fn > 127) {
    fprintf(stderr, "create_time: N >= 1, SIZE >= 1, FN in 1..127\n");
    return 2;
  }
  if (argc == 5) {
    size_t entry = strlen(argv[4]) + 16;
    char *spec = calloc((size_t)n, entry + 1);
    if (!spec) {
      return 1;
    }
    for (int i = 0; i < n; i++) {
      char item[entry];
      snprintf(item, sizeof item, "%s%s:%u:1", i ? "," : "", argv[4], fn);
      strcat(spec, item);
    }
    setenv("NAA_SPEC", spec, 1);
    free(spec);
  }

  unsigned char *buf = malloc(size);
  double *create_us = calloc((size_t)n, sizeof(double));
  double *first_us = calloc((size_t)n, sizeof(double));
  if (!buf || !create_us || !first_us) {
    return 1;
  }
  memset(buf, 0, size);
  int early_waits = 0;

  for (int i = 0; i < n; i++) {
    naa_param_t in[1] = {{buf, size, false}};
    naa_param_t out[1] = {{buf, size, false}};
    naa_handle handle;
    naa_status status;
    memset(&handle, 0, sizeof handle);
    memset(&status, 0, sizeof status);
    unsigned char before = buf[0];

    double t0 = now_us();
    if (naa_create(fn, in, 1, out, 1, &handle)) {
      fprintf(stderr, "create_time: naa_create failed (iteration %d)\n", i + 1);
      return 1;
    }
    double t1 = now_us();
    if (naa_invoke(&handle)) {
      fprintf(stderr, "create_time: naa_invoke failed (iteration %d)\n", i + 1);
      return 1;
    }
    /* naa_wait until the RPC has finished: the reference's naa_wait returns after the first
       completion event, which can be that of the client's own RDMA WRITE. */
    int waits = 0;
    do {
      if (naa_wait(&handle, &status)) {
        fprintf(stderr, "create_time: naa_wait failed (iteration %d)\n", i + 1);
        return 1;
      }
      waits++;
    } while (status.state != NAAICE_FINISHED && status.state != NAAICE_ERROR &&
             waits < 100);
    double t2 = now_us();
    if (waits > 1) {
      early_waits++;
      fprintf(stderr, "create_time: naa_wait returned %d times before the RPC finished "
              "(iteration %d)\n", waits - 1, i + 1);
    }
    naa_finalize(&handle);

    if (status.state != NAAICE_FINISHED || status.naa_error != NAA_SUCCESS) {
      fprintf(stderr, "create_time: state %d, the NAA returned %d (iteration %d)\n",
              (int)status.state, (int)status.naa_error, i + 1);
      return 1;
    }
    if (fn == 1 && (buf[0] != (unsigned char)(before + 1) ||
                    buf[size - 1] != (unsigned char)(before + 1))) {
      fprintf(stderr, "create_time: wrong result %u, expected %u (iteration %d)\n",
              buf[0], (unsigned char)(before + 1), i + 1);
      return 1;
    }
    if (i == 0) {
      exec_create_us = t1 - exec_us;
    }
    create_us[i] = t1 - t0;
    first_us[i] = t2 - t1;
    printf("%.1f %.1f\n", create_us[i], first_us[i]);
    fflush(stdout);
  }
  printf("median create_us %.1f first_us %.1f n %d early_waits %d exec_create_us %.1f\n",
         median(create_us, n), median(first_us, n), n, early_waits, exec_create_us);
  return 0;
}
