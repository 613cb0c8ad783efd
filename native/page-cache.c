/*
 * fdatasync, then drop the pages it made durable from the page cache
 * (posix_fadvise POSIX_FADV_DONTNEED), for WAL segment files
 * (--wal-drop-synced-pages, src/wal/page-cache.ts). A segment is written once
 * and read again only by the compactor, so its pages need not stay cached
 * once they are on disk; PostgreSQL advises the same for its WAL segments.
 *
 * Only what was in the file before the fdatasync started is dropped, and only
 * whole pages: the size is read first (fstat), the sync makes every byte below
 * it durable, and the range ends at the page boundary below it, so the last,
 * partly written page (which the next append writes into) stays, and nothing
 * written meanwhile is pushed to writeback. The advice is only advice: its
 * failure is ignored. The fdatasync's failure is returned as an errno.
 *
 *   fdatasyncDrop(fd, callback(errno))   on libuv's thread pool
 *   fdatasyncDropSync(fd): errno         on the calling thread
 * errno 0 is success.
 */
#define _GNU_SOURCE
#include "addon.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int siglake_fdatasync_drop(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return errno;
  if (fdatasync(fd) != 0) return errno;
  long page = sysconf(_SC_PAGESIZE);
  if (page <= 0) page = 4096;
  off_t end = st.st_size - st.st_size % page;
  if (end > 0) (void)posix_fadvise(fd, 0, end, POSIX_FADV_DONTNEED);
  return 0;
}

typedef struct {
  napi_async_work work;
  napi_ref callback;
  int fd;
  int err;
} sync_job;

static void job_execute(napi_env env, void *data) {
  (void)env;
  sync_job *j = data;
  j->err = siglake_fdatasync_drop(j->fd);
}

static void job_complete(napi_env env, napi_status status, void *data) {
  sync_job *j = data;
  napi_value cb, global, arg;
  if (status == napi_cancelled) j->err = ECANCELED;
  if (napi_get_reference_value(env, j->callback, &cb) == napi_ok && napi_get_global(env, &global) == napi_ok &&
      napi_create_int32(env, j->err, &arg) == napi_ok) {
    napi_call_function(env, global, cb, 1, &arg, NULL);
  }
  napi_delete_reference(env, j->callback);
  napi_delete_async_work(env, j->work);
  free(j);
}

static int fd_arg(napi_env env, napi_value v, int *fd) {
  int32_t n;
  if (napi_get_value_int32(env, v, &n) != napi_ok || n < 0) return 0;
  *fd = n;
  return 1;
}

static napi_value fdatasync_drop(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok) return NULL;
  napi_valuetype t;
  int fd;
  if (argc != 2 || !fd_arg(env, argv[0], &fd) || napi_typeof(env, argv[1], &t) != napi_ok || t != napi_function) {
    napi_throw_type_error(env, "SIGLAKE_NATIVE_ARGS", "fdatasyncDrop(fd, callback) takes a descriptor and a function");
    return NULL;
  }
  sync_job *j = calloc(1, sizeof *j);
  if (j == NULL) {
    napi_throw_error(env, "SIGLAKE_NATIVE_MEMORY", "fdatasyncDrop: out of memory");
    return NULL;
  }
  j->fd = fd;
  napi_value name;
  if (napi_create_string_utf8(env, "siglake:fdatasyncDrop", NAPI_AUTO_LENGTH, &name) != napi_ok ||
      napi_create_reference(env, argv[1], 1, &j->callback) != napi_ok) {
    free(j);
    return NULL;
  }
  if (napi_create_async_work(env, NULL, name, job_execute, job_complete, j, &j->work) != napi_ok) {
    napi_delete_reference(env, j->callback);
    free(j);
    return NULL;
  }
  if (napi_queue_async_work(env, j->work) != napi_ok) {
    napi_delete_reference(env, j->callback);
    napi_delete_async_work(env, j->work);
    free(j);
    return NULL;
  }
  return NULL;
}

static napi_value fdatasync_drop_sync(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok) return NULL;
  int fd;
  if (argc != 1 || !fd_arg(env, argv[0], &fd)) {
    napi_throw_type_error(env, "SIGLAKE_NATIVE_ARGS", "fdatasyncDropSync(fd) takes a descriptor");
    return NULL;
  }
  napi_value out;
  if (napi_create_int32(env, siglake_fdatasync_drop(fd), &out) != napi_ok) return NULL;
  return out;
}

int siglake_register_page_cache(napi_env env, napi_value exports) {
  napi_value f;
  if (napi_create_function(env, "fdatasyncDrop", NAPI_AUTO_LENGTH, fdatasync_drop, NULL, &f) != napi_ok) return 0;
  if (napi_set_named_property(env, exports, "fdatasyncDrop", f) != napi_ok) return 0;
  if (napi_create_function(env, "fdatasyncDropSync", NAPI_AUTO_LENGTH, fdatasync_drop_sync, NULL, &f) != napi_ok) return 0;
  if (napi_set_named_property(env, exports, "fdatasyncDropSync", f) != napi_ok) return 0;
  return 1;
}
