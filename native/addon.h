/* The parts of the siglake_native addon (native/addon.c registers them). */
#ifndef SIGLAKE_ADDON_H
#define SIGLAKE_ADDON_H
#include <node_api.h>
/* otlp-walk.c: init(), walk(). */
int siglake_register_walk(napi_env env, napi_value exports);
/* page-cache.c: fdatasyncDrop(), fdatasyncDropSync(). */
int siglake_register_page_cache(napi_env env, napi_value exports);
/* page-cache.c: fdatasync `fd`, then drop the whole pages it made durable; 0 or an errno. */
int siglake_fdatasync_drop(int fd);
/* deferred-runs.c: writeRuns(). */
int siglake_register_deferred_runs(napi_env env, napi_value exports);
/* thread-sched.c: setProcessIdle(), setThreadIdle(), threadPolicy(). */
int siglake_register_thread_sched(napi_env env, napi_value exports);
#endif
