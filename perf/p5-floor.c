// The file-system floor of P5 (issue 18): the system calls the batch-mode
// WAL makes for one tenant against 10,000, with no JavaScript, no HTTP and no
// OTLP walk, so that what a file per lane costs the kernel can be set beside
// what Siglake's rows cost in all.
//
// One writer thread does what a shard's writer does for 1 KiB requests in
// rounds of ROUND requests: a lane's records of the round (1,100 B each) are
// one pwritev at the end of its lane's segment, through an LRU of FDS descriptors (a miss
// closes the least recently used one and opens the lane's file); the round's
// records are then written to the journal with one pwritev and the journal is
// fdatasynced (the round's durability). Every CKPT_MS (or 256 MiB of journal)
// a checkpoint is handed to POOL threads, which open, fdatasync and close
// every lane file written since the last one (what the checkpoint does on
// libuv's pool), while the writer goes on; when it is done the journal starts
// over at offset 0. The two layouts, LANES=1 and LANES=N, take turns for
// RUNS windows of SECS seconds each; printed per window: requests/s, process
// CPU (getrusage, every thread) per request, the machine's busy time per
// request (/proc/stat, steal excluded: the kernel's flusher and interrupt work
// is not the process's; anything else running counts too), and checkpoints.
//
//   cc -O2 -pthread -o /tmp/p5-floor perf/p5-floor.c
//   /tmp/p5-floor DIR [LANES=10000] [SECS=5] [RUNS=3] [FDS=512] [ROUND=22] [POOL=4] [CKPT_MS=10000] [MODE=inline]
//
// DIR should be on the file system the WAL uses (the bench's os.tmpdir()).
// MODE: inline (the batch-mode WAL as built: lane writes on the request path),
// overlap (the same with the journal fdatasync of round N on its own thread
// while round N+1 is written), deferred (the request path only journals; the
// checkpoint reads each lane's records back from the journal generation it
// covers and writes them with one pwrite a lane before its fdatasync).
// It prints the medians and the difference in CPU per request: what the
// 10,000 lanes add before any of Siglake's own work (docs/performance.md,
// "The file-system floor of P5").
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "probe-clock.h"

#define RECORD 1100
#define JOURNAL_MAX (256L << 20)

static const char *dir;
static int fd_cap, round_len, pool_threads;
enum { INLINE, OVERLAP, DEFERRED } mode;
static long ckpt_ms;

static void die(const char *what, const char *path) {
  fprintf(stderr, "%s %s: %s\n", what, path, strerror(errno));
  exit(1);
}

// ---- lanes and the descriptor LRU (a doubly linked list of open lanes)
typedef struct {
  char path[256];
  off_t size;
  int fd;          // -1 when not open
  int prev, next;  // LRU links among open lanes
  int dirty;       // written since the checkpoint was taken
} lane_t;

static lane_t *lanes;
static int nlanes, lru_head = -1, lru_tail = -1, open_count;

static void lru_unlink(int i) {
  lane_t *l = &lanes[i];
  if (l->prev >= 0) lanes[l->prev].next = l->next; else lru_head = l->next;
  if (l->next >= 0) lanes[l->next].prev = l->prev; else lru_tail = l->prev;
}

static void lru_push_front(int i) {
  lanes[i].prev = -1;
  lanes[i].next = lru_head;
  if (lru_head >= 0) lanes[lru_head].prev = i;
  lru_head = i;
  if (lru_tail < 0) lru_tail = i;
}

static int lane_fd(int i) {
  lane_t *l = &lanes[i];
  if (l->fd >= 0) {
    lru_unlink(i);
    lru_push_front(i);
    return l->fd;
  }
  if (open_count >= fd_cap) {
    int victim = lru_tail;
    lru_unlink(victim);
    close(lanes[victim].fd);
    lanes[victim].fd = -1;
    open_count--;
  }
  l->fd = open(l->path, O_WRONLY | O_CLOEXEC);
  if (l->fd < 0) die("open", l->path);
  open_count++;
  lru_push_front(i);
  return l->fd;
}

static void setup_lanes(int n) {
  nlanes = n;
  lanes = calloc(n, sizeof *lanes);
  char header[64] = "SIGLAKE-FLOOR";
  for (int i = 0; i < n; i++) {
    snprintf(lanes[i].path, sizeof lanes[i].path, "%s/lane-%d", dir, i);
    int fd = open(lanes[i].path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) die("create", lanes[i].path);
    if (write(fd, header, sizeof header) != sizeof header) die("write", lanes[i].path);
    close(fd);
    lanes[i].size = sizeof header;
    lanes[i].fd = -1;
  }
  sync();
}

static void teardown_lanes(void) {
  for (int i = 0; i < nlanes; i++) {
    if (lanes[i].fd >= 0) close(lanes[i].fd);
    unlink(lanes[i].path);
  }
  free(lanes);
  lanes = NULL;
  lru_head = lru_tail = -1;
  open_count = 0;
}

// ---- deferred: the request path only journals; the checkpoint reads each
// lane's records back from the journal generation it covers (page cache) and
// writes them to the lane's segment with one pwrite
typedef struct {
  int lane;
  off_t at;  // offset in the journal generation
} entry_t;

static entry_t *ckpt_entries;  // the covered generation's records, sorted by lane
static long *lane_first;       // per lane: its first index in ckpt_entries, -1 for none
static long *lane_count;
static long ckpt_entries_len;
static int ckpt_journal_fd;

static void deferred_write(lane_t *l, int fd) {
  long i = l - lanes, n = lane_count[i];
  char *buf = malloc((size_t)n * RECORD);
  for (long k = 0; k < n; k++) {
    entry_t *e = &ckpt_entries[lane_first[i] + k];
    if (pread(ckpt_journal_fd, buf + k * RECORD, RECORD, e->at) != RECORD) die("pread", "journal");
  }
  if (pwrite(fd, buf, (size_t)n * RECORD, l->size) != (ssize_t)n * RECORD) die("pwrite", l->path);
  l->size += (off_t)n * RECORD;
  free(buf);
}

// ---- the checkpoint on a pool
static int *ckpt_list, ckpt_len, ckpt_next, ckpt_running;
static pthread_mutex_t ckpt_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ckpt_cond = PTHREAD_COND_INITIALIZER;
static int ckpt_workers_done;

static void *ckpt_worker(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&ckpt_lock);
    int at = ckpt_next < ckpt_len ? ckpt_next++ : -1;
    pthread_mutex_unlock(&ckpt_lock);
    if (at < 0) break;
    lane_t *l = &lanes[ckpt_list[at]];
    int fd = open(l->path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) die("open", l->path);
    if (mode == DEFERRED) deferred_write(l, fd);
    if (fdatasync(fd) != 0) die("fdatasync", l->path);
    close(fd);
  }
  pthread_mutex_lock(&ckpt_lock);
  if (++ckpt_workers_done == pool_threads) {
    ckpt_running = 0;
    pthread_cond_broadcast(&ckpt_cond);
  }
  pthread_mutex_unlock(&ckpt_lock);
  return NULL;
}

static void *ckpt_coordinator(void *arg) {
  (void)arg;
  if (mode == DEFERRED) {
    // Group the covered generation's records by lane (a counting sort), off
    // the writer's thread.
    static entry_t *sorted;
    static long sorted_cap;
    if (sorted_cap < ckpt_entries_len) {
      free(sorted);
      sorted_cap = ckpt_entries_len;
      sorted = malloc(sizeof *sorted * sorted_cap);
    }
    for (int i = 0; i < nlanes; i++) lane_count[i] = 0;
    for (long k = 0; k < ckpt_entries_len; k++) lane_count[ckpt_entries[k].lane]++;
    long at = 0;
    for (int i = 0; i < nlanes; i++) {
      lane_first[i] = at;
      at += lane_count[i];
    }
    for (int i = 0; i < nlanes; i++) lane_count[i] = 0;
    for (long k = 0; k < ckpt_entries_len; k++) {
      int lane = ckpt_entries[k].lane;
      sorted[lane_first[lane] + lane_count[lane]++] = ckpt_entries[k];
    }
    ckpt_entries = sorted;
  }
  pthread_t th[pool_threads];
  for (int t = 0; t < pool_threads; t++) pthread_create(&th[t], NULL, ckpt_worker, NULL);
  for (int t = 0; t < pool_threads; t++) pthread_join(th[t], NULL);
  return NULL;
}

static void ckpt_start(void) {
  ckpt_len = 0;
  for (int i = 0; i < nlanes; i++)
    if (lanes[i].dirty) {
      ckpt_list[ckpt_len++] = i;
      lanes[i].dirty = 0;
    }
  ckpt_next = 0;
  ckpt_workers_done = 0;
  ckpt_running = 1;
  pthread_t th;
  pthread_create(&th, NULL, ckpt_coordinator, NULL);
  pthread_detach(th);
}

static int ckpt_busy(void) {
  pthread_mutex_lock(&ckpt_lock);
  int busy = ckpt_running;
  pthread_mutex_unlock(&ckpt_lock);
  return busy;
}

static void ckpt_wait(void) {
  pthread_mutex_lock(&ckpt_lock);
  while (ckpt_running) pthread_cond_wait(&ckpt_cond, &ckpt_lock);
  pthread_mutex_unlock(&ckpt_lock);
}

// ---- overlap: the round's journal fdatasync on its own thread, while the
// writer writes the next round (two rounds in flight)
static pthread_mutex_t sync_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sync_cond = PTHREAD_COND_INITIALIZER;
static long sync_wanted, sync_done;
static int sync_fd, sync_quit;

static void *sync_thread(void *arg) {
  (void)arg;
  pthread_mutex_lock(&sync_lock);
  for (;;) {
    while (sync_wanted == sync_done && !sync_quit) pthread_cond_wait(&sync_cond, &sync_lock);
    if (sync_wanted == sync_done) break;
    long want = sync_wanted;
    pthread_mutex_unlock(&sync_lock);
    if (fdatasync(sync_fd) != 0) die("fdatasync", "journal");
    pthread_mutex_lock(&sync_lock);
    sync_done = want;
    pthread_cond_broadcast(&sync_cond);
  }
  pthread_mutex_unlock(&sync_lock);
  return NULL;
}

/** Round `k` is written: wait until round k-1 is durable, then have round k synced. */
static void overlap_sync(long k) {
  pthread_mutex_lock(&sync_lock);
  while (sync_done < k - 1) pthread_cond_wait(&sync_cond, &sync_lock);
  sync_wanted = k;
  pthread_cond_broadcast(&sync_cond);
  pthread_mutex_unlock(&sync_lock);
}

// ---- one window
typedef struct {
  double rps, cpu_us, busy_us, checkpoints;
} result_t;

static result_t run_window(int n, double secs) {
  setup_lanes(n);
  ckpt_list = malloc(sizeof *ckpt_list * n);
  lane_first = malloc(sizeof *lane_first * n);
  lane_count = malloc(sizeof *lane_count * n);
  // Two journal files: deferred mode writes one while a checkpoint reads the other.
  char journal_path[2][256];
  int jfds[2];
  for (int g = 0; g < 2; g++) {
    snprintf(journal_path[g], sizeof journal_path[g], "%s/journal-%d", dir, g);
    jfds[g] = open(journal_path[g], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (jfds[g] < 0) die("create", journal_path[g]);
  }
  int gen = 0, jfd = jfds[0];
  static char record[RECORD];
  memset(record, 'r', sizeof record);
  struct iovec *iov = malloc(sizeof *iov * round_len);
  for (int i = 0; i < round_len; i++) iov[i] = (struct iovec){ record, RECORD };
  long entries_cap = 1 << 20, entries_len = 0;
  entry_t *entries[2] = { malloc(sizeof(entry_t) * entries_cap), malloc(sizeof(entry_t) * entries_cap) };
  long entries_caps[2] = { entries_cap, entries_cap };
  pthread_t syncer;
  if (mode == OVERLAP) {
    sync_wanted = sync_done = 0;
    sync_quit = 0;
    sync_fd = jfd;
    pthread_create(&syncer, NULL, sync_thread, NULL);
  }

  off_t jsize = 0;
  long requests = 0, checkpoints = 0, rounds = 0;
  int next_lane = 0, pending_reset = 0;
  double start = now_ms(), cpu0 = cpu_ms(), busy0 = machine_busy_ms(), last_ckpt = start, end = start + secs * 1e3;
  while (now_ms() < end) {
    if (mode == DEFERRED) {
      if (entries_len + round_len > entries_caps[gen]) {
        entries_caps[gen] *= 2;
        entries[gen] = realloc(entries[gen], sizeof(entry_t) * entries_caps[gen]);
      }
      for (int r = 0; r < round_len; r++) {
        entries[gen][entries_len++] = (entry_t){ next_lane, jsize + (off_t)r * RECORD };
        lanes[next_lane].dirty = 1;
        next_lane = (next_lane + 1) % n;
      }
    } else {
      // A lane's records of one round go out in one pwritev (the lane writer
      // stages them): one call a round for one tenant, one a request for 10,000.
      for (int r = 0; r < round_len;) {
        int i = next_lane, run = 0;
        while (r < round_len && next_lane == i && (run == 0 || n == 1)) {
          run++;
          r++;
          next_lane = (next_lane + 1) % n;
        }
        int fd = lane_fd(i);
        if (pwritev(fd, iov, run, lanes[i].size) != (ssize_t)run * RECORD) die("pwritev", lanes[i].path);
        lanes[i].size += (off_t)run * RECORD;
        lanes[i].dirty = 1;
      }
    }
    if (pwritev(jfd, iov, round_len, jsize) != (ssize_t)round_len * RECORD) die("pwritev", "journal");
    jsize += (off_t)round_len * RECORD;
    rounds++;
    if (mode == OVERLAP) overlap_sync(rounds);
    else if (fdatasync(jfd) != 0) die("fdatasync", "journal");
    requests += round_len;
    // A finished checkpoint retires the journal up to where it was taken; the
    // journal then starts over at offset 0 (a reused journal file).
    if (pending_reset && !ckpt_busy()) {
      if (mode != DEFERRED) jsize = 0;
      pending_reset = 0;
    }
    double t = now_ms();
    if (!pending_reset && (t - last_ckpt >= ckpt_ms || jsize >= JOURNAL_MAX)) {
      if (mode == DEFERRED) {
        // The checkpoint covers this generation; the writer goes on in the other.
        ckpt_entries = entries[gen];
        ckpt_entries_len = entries_len;
        ckpt_journal_fd = jfd;
        gen = 1 - gen;
        jfd = jfds[gen];
        jsize = 0;
        entries_len = 0;
      }
      ckpt_start();
      checkpoints++;
      pending_reset = 1;
      last_ckpt = t;
    }
  }
  if (mode == OVERLAP) {
    pthread_mutex_lock(&sync_lock);
    sync_quit = 1;
    pthread_cond_broadcast(&sync_cond);
    pthread_mutex_unlock(&sync_lock);
    pthread_join(syncer, NULL);
  }
  double wall = now_ms() - start, cpu = cpu_ms() - cpu0, busy = machine_busy_ms() - busy0;
  ckpt_wait();
  for (int g = 0; g < 2; g++) {
    close(jfds[g]);
    unlink(journal_path[g]);
    free(entries[g]);
  }
  free(iov);
  free(ckpt_list);
  free(lane_first);
  free(lane_count);
  teardown_lanes();
  return (result_t){ requests / (wall / 1e3), cpu * 1e3 / requests, busy * 1e3 / requests, checkpoints };
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DIR [LANES=10000] [SECS=5] [RUNS=3] [FDS=512] [ROUND=22] [POOL=4] [CKPT_MS=10000] [MODE=inline]\n", argv[0]);
    return 2;
  }
  dir = argv[1];
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) die("mkdir", dir);
  int many = argc > 2 ? atoi(argv[2]) : 10000;
  double secs = argc > 3 ? atof(argv[3]) : 5;
  int runs = argc > 4 ? atoi(argv[4]) : 3;
  fd_cap = argc > 5 ? atoi(argv[5]) : 512;
  round_len = argc > 6 ? atoi(argv[6]) : 22;
  pool_threads = argc > 7 ? atoi(argv[7]) : 4;
  ckpt_ms = argc > 8 ? atol(argv[8]) : 10000;
  const char *m = argc > 9 ? argv[9] : "inline";
  if (strcmp(m, "inline") == 0) mode = INLINE;
  else if (strcmp(m, "overlap") == 0) mode = OVERLAP;
  else if (strcmp(m, "deferred") == 0) mode = DEFERRED;
  else {
    fprintf(stderr, "MODE is inline, overlap or deferred\n");
    return 2;
  }
  if (many < 1 || runs < 1 || fd_cap < 1 || round_len < 1 || pool_threads < 1 || secs <= 0) {
    fprintf(stderr, "every argument must be positive\n");
    return 2;
  }
  double rps[2][runs], cpu[2][runs], busy[2][runs];
  int layouts[2] = { 1, many };
  printf("window lanes      req/s  cpu_us/req  busy_us/req  checkpoints\n");
  for (int r = 0; r < runs; r++)
    for (int k = 0; k < 2; k++) {
      // Alternate which layout goes first, so drift on a shared machine falls on both.
      int which = (r % 2) ? 1 - k : k;
      result_t res = run_window(layouts[which], secs);
      rps[which][r] = res.rps;
      cpu[which][r] = res.cpu_us;
      busy[which][r] = res.busy_us;
      printf("%6d %5d %10.0f %11.2f %12.2f %12.0f\n", r + 1, layouts[which], res.rps, res.cpu_us, res.busy_us, res.checkpoints);
      fflush(stdout);
    }
  double rps1 = median(rps[0], runs), rpsn = median(rps[1], runs);
  double cpu1 = median(cpu[0], runs), cpun = median(cpu[1], runs);
  double busy1 = median(busy[0], runs), busyn = median(busy[1], runs);
  printf("median: 1 lane %.0f req/s, %.2f us/req (machine %.2f); %d lanes %.0f req/s, %.2f us/req (machine %.2f)\n", rps1, cpu1, busy1, many, rpsn, cpun, busyn);
  printf("%d lanes add %.2f us of process CPU per request (%.2f of the machine's); rate ratio %.1f %%\n", many, cpun - cpu1, busyn - busy1, 100 * rpsn / rps1);
  return 0;
}
