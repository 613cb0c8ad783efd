/*
 * CPU scheduling policy for the compactor process that `siglake ingest`
 * starts (compactor.placement process-idle, src/compactor/compactor-thread.ts):
 * SCHED_IDLE runs it only on CPU time no normal thread wants, so a
 * compaction round on a small machine does not take cores from the acceptor
 * and the writers (docs/performance.md, "What a compaction round costs the
 * ingest path on 2 cores"). Lowering one's own policy needs no privilege
 * (raising it back does: RLIMIT_NICE). On Linux sched_setscheduler applies
 * to one thread; threads started later inherit their creator's policy, so
 * setProcessIdle() sets every thread the process has (V8's helpers, which
 * run its garbage collection, were started before any JavaScript ran).
 *
 *   setProcessIdle(): errno    every thread of this process; 0 is success
 *   setThreadIdle(): errno     the calling thread only
 *   threadPolicy(): number     the calling thread's policy (SCHED_* value)
 */
#define _GNU_SOURCE
#include "addon.h"
#include <errno.h>
#include <dirent.h>
#include <sched.h>
#include <stdlib.h>

static napi_value set_thread_idle(napi_env env, napi_callback_info info) {
  (void)info;
  struct sched_param p = {.sched_priority = 0};
  int err = sched_setscheduler(0, SCHED_IDLE, &p) == 0 ? 0 : errno;
  napi_value r;
  if (napi_create_int32(env, err, &r) != napi_ok) return NULL;
  return r;
}

static napi_value set_process_idle(napi_env env, napi_callback_info info) {
  (void)info;
  struct sched_param p = {.sched_priority = 0};
  int err = 0;
  DIR *d = opendir("/proc/self/task");
  if (d == NULL) {
    err = errno;
  } else {
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      char *end;
      long tid = strtol(e->d_name, &end, 10);
      if (end == e->d_name || *end != '\0' || tid <= 0) continue;
      /* A thread that ended meanwhile (ESRCH) is no failure. */
      if (sched_setscheduler((pid_t)tid, SCHED_IDLE, &p) != 0 && errno != ESRCH && err == 0) err = errno;
    }
    closedir(d);
  }
  napi_value r;
  if (napi_create_int32(env, err, &r) != napi_ok) return NULL;
  return r;
}

static napi_value thread_policy(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value r;
  if (napi_create_int32(env, sched_getscheduler(0), &r) != napi_ok) return NULL;
  return r;
}

int siglake_register_thread_sched(napi_env env, napi_value exports) {
  napi_value f;
  if (napi_create_function(env, "setThreadIdle", NAPI_AUTO_LENGTH, set_thread_idle, NULL, &f) != napi_ok) return 0;
  if (napi_set_named_property(env, exports, "setThreadIdle", f) != napi_ok) return 0;
  if (napi_create_function(env, "setProcessIdle", NAPI_AUTO_LENGTH, set_process_idle, NULL, &f) != napi_ok) return 0;
  if (napi_set_named_property(env, exports, "setProcessIdle", f) != napi_ok) return 0;
  if (napi_create_function(env, "threadPolicy", NAPI_AUTO_LENGTH, thread_policy, NULL, &f) != napi_ok) return 0;
  if (napi_set_named_property(env, exports, "threadPolicy", f) != napi_ok) return 0;
  return 1;
}
