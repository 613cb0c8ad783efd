/*
 * siglake_native: Siglake's own native code, one Node-API addon built by
 * node-gyp (native/binding.gyp, native/build.mjs). Optional: without it the
 * ingester uses the JavaScript walk, leaves the page cache to the kernel and
 * reads deferred lane records back in JavaScript
 * (src/native/addon.ts says why it did not load).
 */
#include "addon.h"

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  if (!siglake_register_walk(env, exports)) return NULL;
  if (!siglake_register_page_cache(env, exports)) return NULL;
  if (!siglake_register_deferred_runs(env, exports)) return NULL;
  if (!siglake_register_thread_sched(env, exports)) return NULL;
  return exports;
}
