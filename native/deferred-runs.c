/*
 * A checkpoint's write of one segment's deferred runs (docs/wal-format.md
 * "Deferred lane writes"), on libuv's thread pool: the records a lane left in
 * the commit journal are read back from the journal files and written to
 * their places in the segment, which is then fdatasynced (and, with
 * --wal-drop-synced-pages, its synced pages dropped as page-cache.c does).
 * Done in JavaScript, this is a read system call per run and the write on the
 * worker's own thread, between its rounds; here the worker hands the whole
 * segment over in one call and hears back once.
 *
 *   writeRuns(segment, journals, runs, flags, callback(errno, op))
 *
 * segment: the segment file's path (opened O_WRONLY here, closed before the
 * callback). journals: paths of the journal files the runs are in. runs: a
 * Uint32Array of four numbers a run, in segment order: the index of its
 * journal file in `journals`, its offset there, its length, its offset in the
 * segment. Runs that follow each other in the segment are written with one
 * pwrite, up to CHUNK bytes. flags: 1 fdatasync after writing, 2 drop the
 * synced pages. The callback's errno is 0 on success; op says which step
 * failed: 1 opening the segment, 2 opening a journal file, 3 reading it (a
 * short read is EIO), 4 writing the segment, 5 its fdatasync.
 * The arguments are copied before the call returns.
 */
#define _GNU_SOURCE
#include "addon.h"
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHUNK (1u << 20)

enum { OP_NONE = 0, OP_OPEN_SEGMENT = 1, OP_OPEN_JOURNAL = 2, OP_READ = 3, OP_WRITE = 4, OP_FDATASYNC = 5 };

typedef struct {
  napi_async_work work;
  napi_ref callback;
  char *segment;
  char **journals;
  uint32_t njournals;
  uint32_t *runs;
  uint32_t nruns;
  int flags;
  int err;
  int op;
} runs_job;

static int read_all(int fd, char *into, size_t len, off_t at) {
  size_t got = 0;
  while (got < len) {
    ssize_t r = pread(fd, into + got, len - got, at + (off_t)got);
    if (r < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (r == 0) return EIO;
    got += (size_t)r;
  }
  return 0;
}

static int write_all(int fd, const char *from, size_t len, off_t at) {
  size_t put = 0;
  while (put < len) {
    ssize_t w = pwrite(fd, from + put, len - put, at + (off_t)put);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (w == 0) return EIO;
    put += (size_t)w;
  }
  return 0;
}

/* The job's first failure: its errno and the step. */
static void fail(runs_job *j, int err, int op) {
  j->err = err;
  j->op = op;
}

static void run_job(runs_job *j) {
  int seg = open(j->segment, O_WRONLY | O_CLOEXEC);
  if (seg < 0) {
    fail(j, errno, OP_OPEN_SEGMENT);
    return;
  }
  size_t cap = CHUNK;
  char *buf = malloc(cap);
  int jfd = -1;
  uint32_t jopen = UINT32_MAX;
  size_t fill = 0;
  uint64_t start = 0;
  if (buf == NULL) fail(j, ENOMEM, OP_READ);
  for (uint32_t i = 0; i < j->nruns && j->err == 0; i++) {
    uint32_t file = j->runs[4 * i], offset = j->runs[4 * i + 1], length = j->runs[4 * i + 2], at = j->runs[4 * i + 3];
    if (file >= j->njournals) {
      fail(j, EINVAL, OP_READ);
      break;
    }
    if (fill > 0 && ((uint64_t)at != start + fill || fill + length > cap)) {
      int w = write_all(seg, buf, fill, (off_t)start);
      if (w != 0) {
        fail(j, w, OP_WRITE);
        break;
      }
      fill = 0;
    }
    if (fill == 0) start = at;
    if (length > cap) {
      char *grown = realloc(buf, length);
      if (grown == NULL) {
        fail(j, ENOMEM, OP_READ);
        break;
      }
      buf = grown;
      cap = length;
    }
    if (file != jopen) {
      if (jfd >= 0) close(jfd);
      jfd = open(j->journals[file], O_RDONLY | O_CLOEXEC);
      jopen = file;
      if (jfd < 0) {
        fail(j, errno, OP_OPEN_JOURNAL);
        break;
      }
    }
    int r = read_all(jfd, buf + fill, length, (off_t)offset);
    if (r != 0) {
      fail(j, r, OP_READ);
      break;
    }
    fill += length;
  }
  if (j->err == 0 && fill > 0) {
    int r = write_all(seg, buf, fill, (off_t)start);
    if (r != 0) fail(j, r, OP_WRITE);
  }
  if (jfd >= 0) close(jfd);
  free(buf);
  if (j->err == 0 && (j->flags & 1)) {
    int r = (j->flags & 2) ? siglake_fdatasync_drop(seg) : (fdatasync(seg) != 0 ? errno : 0);
    if (r != 0) fail(j, r, OP_FDATASYNC);
  }
  /* A close error after a good fdatasync loses nothing; without one, the data may still be in flight. */
  if (close(seg) != 0 && j->err == 0 && !(j->flags & 1)) fail(j, errno, OP_WRITE);
}

static void free_job(runs_job *j) {
  if (j->journals != NULL) {
    for (uint32_t k = 0; k < j->njournals; k++) free(j->journals[k]);
    free(j->journals);
  }
  free(j->segment);
  free(j->runs);
  free(j);
}

static void job_execute(napi_env env, void *data) {
  (void)env;
  run_job(data);
}

static void job_complete(napi_env env, napi_status status, void *data) {
  runs_job *j = data;
  napi_value cb, global, args[2];
  if (status == napi_cancelled && j->err == 0) {
    j->err = ECANCELED;
    j->op = OP_OPEN_SEGMENT;
  }
  if (napi_get_reference_value(env, j->callback, &cb) == napi_ok && napi_get_global(env, &global) == napi_ok &&
      napi_create_int32(env, j->err, &args[0]) == napi_ok && napi_create_int32(env, j->op, &args[1]) == napi_ok) {
    napi_call_function(env, global, cb, 2, args, NULL);
  }
  napi_delete_reference(env, j->callback);
  napi_delete_async_work(env, j->work);
  free_job(j);
}

static char *copy_string(napi_env env, napi_value v) {
  size_t len;
  if (napi_get_value_string_utf8(env, v, NULL, 0, &len) != napi_ok) return NULL;
  char *s = malloc(len + 1);
  if (s == NULL) return NULL;
  if (napi_get_value_string_utf8(env, v, s, len + 1, &len) != napi_ok) {
    free(s);
    return NULL;
  }
  return s;
}

static napi_value not_queued(napi_env env) {
  bool pending = false;
  if (napi_is_exception_pending(env, &pending) == napi_ok && !pending) napi_throw_error(env, "SIGLAKE_NATIVE_QUEUE", "writeRuns: the task could not be queued");
  return NULL;
}

static napi_value bad_args(napi_env env) {
  napi_throw_type_error(env, "SIGLAKE_NATIVE_ARGS",
                        "writeRuns(segment, journals, runs, flags, callback) takes a path, an array of paths, a Uint32Array of "
                        "four numbers a run, flags and a function");
  return NULL;
}

static napi_value write_runs(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok) return NULL;
  if (argc != 5) return bad_args(env);
  napi_valuetype t;
  bool is_array, is_typed;
  if (napi_typeof(env, argv[0], &t) != napi_ok || t != napi_string) return bad_args(env);
  if (napi_is_array(env, argv[1], &is_array) != napi_ok || !is_array) return bad_args(env);
  if (napi_is_typedarray(env, argv[2], &is_typed) != napi_ok || !is_typed) return bad_args(env);
  if (napi_typeof(env, argv[4], &t) != napi_ok || t != napi_function) return bad_args(env);
  napi_typedarray_type tt;
  size_t length;
  void *data;
  if (napi_get_typedarray_info(env, argv[2], &tt, &length, &data, NULL, NULL) != napi_ok || tt != napi_uint32_array || length % 4 != 0)
    return bad_args(env);
  int32_t flags;
  if (napi_get_value_int32(env, argv[3], &flags) != napi_ok) return bad_args(env);
  uint32_t njournals;
  if (napi_get_array_length(env, argv[1], &njournals) != napi_ok) return bad_args(env);

  runs_job *j = calloc(1, sizeof *j);
  if (j == NULL) goto oom;
  j->flags = flags;
  j->nruns = (uint32_t)(length / 4);
  j->runs = malloc(length > 0 ? length * sizeof(uint32_t) : 1);
  j->segment = copy_string(env, argv[0]);
  j->journals = calloc(njournals > 0 ? njournals : 1, sizeof(char *));
  if (j->runs == NULL || j->segment == NULL || j->journals == NULL) goto oom; /* copy_string fails on memory only: the string was checked */
  memcpy(j->runs, data, length * sizeof(uint32_t));
  for (uint32_t k = 0; k < njournals; k++) {
    napi_value e;
    if (napi_get_element(env, argv[1], k, &e) != napi_ok || napi_typeof(env, e, &t) != napi_ok || t != napi_string) {
      j->njournals = k;
      free_job(j);
      return bad_args(env);
    }
    j->journals[k] = copy_string(env, e);
    j->njournals = k + 1;
    if (j->journals[k] == NULL) goto oom;
  }
  /* Not queued: say so (the caller's promise rejects), never leave it waiting for a callback. */
  napi_value name;
  if (napi_create_string_utf8(env, "siglake:writeRuns", NAPI_AUTO_LENGTH, &name) != napi_ok ||
      napi_create_reference(env, argv[4], 1, &j->callback) != napi_ok) {
    free_job(j);
    return not_queued(env);
  }
  if (napi_create_async_work(env, NULL, name, job_execute, job_complete, j, &j->work) != napi_ok) {
    napi_delete_reference(env, j->callback);
    free_job(j);
    return not_queued(env);
  }
  if (napi_queue_async_work(env, j->work) != napi_ok) {
    napi_delete_reference(env, j->callback);
    napi_delete_async_work(env, j->work);
    free_job(j);
    return not_queued(env);
  }
  return NULL;
oom:
  if (j != NULL) free_job(j);
  napi_throw_error(env, "SIGLAKE_NATIVE_MEMORY", "writeRuns: out of memory");
  return NULL;
}

int siglake_register_deferred_runs(napi_env env, napi_value exports) {
  napi_value f;
  if (napi_create_function(env, "writeRuns", NAPI_AUTO_LENGTH, write_runs, NULL, &f) != napi_ok) return 0;
  if (napi_set_named_property(env, exports, "writeRuns", f) != napi_ok) return 0;
  return 1;
}
