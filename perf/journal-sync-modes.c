// What making a journal round durable costs by each way Linux offers (issue
// 18, P1): a round of B bytes written at the next 4 KiB-aligned offset of a
// preallocated, already-written 64 MiB file (as a recycled journal file is),
// then made durable by
//   0  pwrite + fdatasync          (what the writer worker does)
//   1  pwritev2(RWF_DSYNC)         (one call instead of two)
//   2  O_DIRECT | O_DSYNC pwrite   (no page cache; the write padded to 4 KiB)
//   3  O_DSYNC pwrite              (page cache, synchronous)
// N times; prints the p50, p90 and p99 of one round in µs. On a device
// without FUA (/sys/block/DEV/queue/fua is 0) modes 1-3 still end in a cache
// flush, so the question is only what the rest costs.
//
//   cc -O2 -o /tmp/journal-sync-modes perf/journal-sync-modes.c
//   for m in 0 1 2 3; do /tmp/journal-sync-modes DIR $m 20000 5000; done
//
// DIR must be on the file system the WAL would use (the program makes
// DIR/journal-sync-modes.dat there, and removes it). Exit 3: mode 2 where the
// file system has no direct I/O (tmpfs). Results: docs/performance.md,
// "Ways to make a round durable, measured alone".

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define FILE_BYTES (64u << 20)
#define ALIGN 4096u

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s DIR MODE(0-3) BYTES ROUNDS\n", argv[0]);
    return 2;
  }
  int mode = atoi(argv[2]);
  size_t bytes = (size_t)atol(argv[3]);
  int rounds = atoi(argv[4]);
  if (mode < 0 || mode > 3 || bytes == 0 || bytes > (1u << 20) || rounds <= 0) {
    fprintf(stderr, "MODE 0-3, BYTES 1..1048576, ROUNDS > 0\n");
    return 2;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/journal-sync-modes.dat", argv[1]);
  char *block;
  if (posix_memalign((void **)&block, ALIGN, 1u << 20) != 0) return 1;
  memset(block, 1, 1u << 20);
  // Preallocate by writing, as a recycled journal file has been.
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    perror("open");
    return 1;
  }
  for (size_t off = 0; off < FILE_BYTES; off += 1u << 20) {
    if (pwrite(fd, block, 1u << 20, (off_t)off) != (ssize_t)(1u << 20)) {
      perror("pwrite");
      return 1;
    }
  }
  fsync(fd);
  close(fd);

  int flags = O_RDWR;
  if (mode == 2) flags |= O_DIRECT | O_DSYNC;
  if (mode == 3) flags |= O_DSYNC;
  fd = open(path, flags);
  if (fd < 0 && mode == 2 && errno == EINVAL) {
    // tmpfs and some others have no direct I/O.
    printf("mode 2, %zu bytes: O_DIRECT refused by this file system\n", bytes);
    unlink(path);
    return 3;
  }
  if (fd < 0) {
    perror("open");
    unlink(path);
    return 1;
  }
  size_t padded = (bytes + ALIGN - 1) & ~(size_t)(ALIGN - 1);
  char *buf;
  if (posix_memalign((void **)&buf, ALIGN, padded) != 0) return 1;
  memset(buf, 7, padded);
  double *took = malloc(sizeof(double) * (size_t)rounds);
  off_t off = 0;
  for (int i = 0; i < rounds; i++) {
    double t0 = now_us();
    ssize_t n;
    if (mode == 0) {
      n = pwrite(fd, buf, bytes, off);
      if (n == (ssize_t)bytes && fdatasync(fd) != 0) n = -1;
    } else if (mode == 1) {
      struct iovec v = {buf, bytes};
      n = pwritev2(fd, &v, 1, off, RWF_DSYNC);
    } else if (mode == 2) {
      n = pwrite(fd, buf, padded, off) == (ssize_t)padded ? (ssize_t)bytes : -1;
    } else {
      n = pwrite(fd, buf, bytes, off);
    }
    if (n != (ssize_t)bytes) {
      perror("write");
      return 1;
    }
    took[i] = now_us() - t0;
    off += (off_t)padded;
    if ((size_t)off + padded > FILE_BYTES) off = 0;
  }
  qsort(took, (size_t)rounds, sizeof(double), by_value);
  printf("mode %d, %zu bytes: p50 %.1f p90 %.1f p99 %.1f us\n", mode, bytes, took[rounds / 2], took[rounds * 9 / 10],
         took[rounds * 99 / 100]);
  close(fd);
  unlink(path);
  return 0;
}
