// What a batch-mode checkpoint's lane syncs cost, against one syncfs(2) of the
// same dirty files (issue 18, P5): N lane files each gain B bytes (appended,
// as a lane's segment does between two checkpoints), then either
//   fdatasync: T threads open, fdatasync and close each file (what the
//              checkpoint does on libuv's pool), or
//   syncfs:    one syncfs() on a descriptor of the directory,
// the two taking turns round by round. Prints wall time and process CPU
// (utime + stime of every thread, getrusage) and the machine's busy time
// (/proc/stat: syncfs hands its writeback to the kernel's flusher threads,
// which the process is not charged for; anything else running is counted
// too) per method, medians over the rounds.
//
//   cc -O2 -pthread -o /tmp/checkpoint-sync perf/checkpoint-sync.c
//   /tmp/checkpoint-sync DIR [FILES=10000] [BYTES=1100] [THREADS=4] [ROUNDS=6]
//
// Alone, one syncfs is 20-40x faster; inside Siglake (a prototype addon) it
// did not pay, since the writeback burst it starts holds the rounds' journal
// fdatasyncs: docs/performance.md, "Where the 10,000-tenant row's CPU goes".
//
// DIR should be on the file system the WAL would use; syncfs writes back every
// dirty file of that file system, other processes' included.
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "probe-clock.h"

static char **paths;
static int nfiles, nthreads;
static int next_file;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *sync_worker(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&lock);
    int i = next_file++;
    pthread_mutex_unlock(&lock);
    if (i >= nfiles) return NULL;
    int fd = open(paths[i], O_WRONLY);
    if (fd < 0 || fdatasync(fd) != 0) { perror(paths[i]); exit(1); }
    close(fd);
  }
}

static void dirty_all(const char *buf, int bytes) {
  for (int i = 0; i < nfiles; i++) {
    int fd = open(paths[i], O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd < 0 || write(fd, buf, bytes) != bytes) { perror(paths[i]); exit(1); }
    close(fd);
  }
}

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: %s DIR [FILES] [BYTES] [THREADS] [ROUNDS]\n", argv[0]); return 2; }
  const char *dir = argv[1];
  nfiles = argc > 2 ? atoi(argv[2]) : 10000;
  int bytes = argc > 3 ? atoi(argv[3]) : 1100;
  nthreads = argc > 4 ? atoi(argv[4]) : 4;
  int rounds = argc > 5 ? atoi(argv[5]) : 6;
  char base[4096];
  snprintf(base, sizeof base, "%s/checkpoint-sync-%d", dir, (int)getpid());
  if (mkdir(base, 0755) != 0) { perror(base); return 1; }
  paths = calloc(nfiles, sizeof *paths);
  for (int i = 0; i < nfiles; i++) {
    paths[i] = malloc(strlen(base) + 32);
    sprintf(paths[i], "%s/lane-%05d.wal", base, i);
  }
  char *buf = malloc(bytes);
  memset(buf, 'x', bytes);
  int dfd = open(base, O_RDONLY | O_DIRECTORY);
  dirty_all(buf, bytes);
  syncfs(dfd);
  double wall[2][64], cpu[2][64], busy[2][64];
  int n[2] = {0, 0};
  for (int r = 0; r < 2 * rounds && r < 128; r++) {
    int m = r % 2; // 0: fdatasync per file, 1: syncfs
    dirty_all(buf, bytes);
    double w0 = now_ms(), c0 = cpu_ms(), b0 = machine_busy_ms();
    if (m == 0) {
      next_file = 0;
      pthread_t t[64];
      for (int k = 0; k < nthreads && k < 64; k++) pthread_create(&t[k], NULL, sync_worker, NULL);
      for (int k = 0; k < nthreads && k < 64; k++) pthread_join(t[k], NULL);
    } else if (syncfs(dfd) != 0) {
      perror("syncfs");
      return 1;
    }
    wall[m][n[m]] = now_ms() - w0;
    cpu[m][n[m]] = cpu_ms() - c0;
    busy[m][n[m]] = machine_busy_ms() - b0;
    n[m]++;
  }
  printf("%d files x %d B, %d threads, %d rounds each (medians)\n", nfiles, bytes, nthreads, rounds);
  printf("  fdatasync each: wall %.1f ms, process CPU %.1f ms, machine busy %.1f ms\n", median(wall[0], n[0]), median(cpu[0], n[0]), median(busy[0], n[0]));
  printf("  one syncfs:     wall %.1f ms, process CPU %.1f ms, machine busy %.1f ms\n", median(wall[1], n[1]), median(cpu[1], n[1]), median(busy[1], n[1]));
  for (int i = 0; i < nfiles; i++) unlink(paths[i]);
  rmdir(base);
  return 0;
}
