// Whether one file's fdatasyncs overlap on this disk (issue 18, P1: two
// journal syncs in flight, `--wal-rounds-in-flight 2`): T threads append
// rounds of B bytes to ONE preallocated, already-written 256 MiB file, each
// round at the next offset (a shared counter, as the journal's rounds take
// the next one), each written and then fdatasynced by its thread on its own
// descriptor of the file (as the journal's two descriptors). N rounds in
// all; prints the fdatasyncs a second and the p50, p90 and p99 of one round
// (write + fdatasync) in µs. T = 1 is one sync at a time; if T = 2 gives
// about twice the syncs a second at about the same p50, the disk runs two
// flushes at once, and a round need not wait for the one before it.
//
//   cc -O2 -pthread -o /tmp/journal-sync-concurrency perf/journal-sync-concurrency.c
//   for t in 1 2 4; do /tmp/journal-sync-concurrency DIR $t 20000 6000; done
//
// DIR must be on the file system the WAL would use (the program makes
// DIR/journal-sync-concurrency.dat there, and removes it). Results:
// docs/performance.md, "Two journal syncs in flight".

#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FILE_BYTES (256L << 20)
#define MAX_THREADS 16

static char path[4096];
static size_t round_bytes;
static long rounds_each;
static atomic_long next_offset;
static atomic_long next_slot;
static double *latency_us;

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void *rounds(void *arg) {
  (void)arg;
  int fd = open(path, O_RDWR);
  if (fd < 0) {
    perror("open");
    exit(1);
  }
  char *buf = malloc(round_bytes);
  memset(buf, 0x5a, round_bytes);
  for (long i = 0; i < rounds_each; i++) {
    long off = atomic_fetch_add(&next_offset, (long)round_bytes) % (FILE_BYTES - (long)round_bytes);
    double t0 = now_us();
    if (pwrite(fd, buf, round_bytes, off) != (ssize_t)round_bytes || fdatasync(fd) != 0) {
      perror("pwrite/fdatasync");
      exit(1);
    }
    latency_us[atomic_fetch_add(&next_slot, 1)] = now_us() - t0;
  }
  free(buf);
  close(fd);
  return NULL;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s DIR THREADS ROUND_BYTES ROUNDS\n", argv[0]);
    return 2;
  }
  int threads = atoi(argv[2]);
  round_bytes = (size_t)atol(argv[3]);
  long total = atol(argv[4]);
  if (threads < 1 || threads > MAX_THREADS || round_bytes < 1 || round_bytes > (1 << 24) || total < threads) {
    fprintf(stderr, "THREADS 1-%d, ROUND_BYTES 1-16 MiB, ROUNDS at least THREADS\n", MAX_THREADS);
    return 2;
  }
  snprintf(path, sizeof path, "%s/journal-sync-concurrency.dat", argv[1]);
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    perror("open");
    return 1;
  }
  // Written and synced once, so that rounds overwrite allocated blocks (a recycled journal file).
  char *zeros = calloc(1, 1 << 20);
  for (long off = 0; off < FILE_BYTES; off += 1 << 20) {
    if (pwrite(fd, zeros, 1 << 20, off) != 1 << 20) {
      perror("prefill");
      return 1;
    }
  }
  fsync(fd);
  close(fd);
  free(zeros);
  rounds_each = total / threads;
  long n = rounds_each * threads;
  latency_us = malloc(sizeof(double) * (size_t)n);
  pthread_t t[MAX_THREADS];
  double start = now_us();
  for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, rounds, NULL);
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
  double elapsed_s = (now_us() - start) / 1e6;
  qsort(latency_us, (size_t)n, sizeof(double), by_value);
  printf("threads %d, round %zu B: %.0f fdatasyncs/s, round p50 %.1f us, p90 %.1f us, p99 %.1f us\n", threads, round_bytes, n / elapsed_s,
         latency_us[n / 2], latency_us[n * 9 / 10], latency_us[n * 99 / 100]);
  unlink(path);
  return 0;
}
