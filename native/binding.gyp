{
  "targets": [
    {
      "target_name": "siglake_native",
      "sources": ["addon.c", "otlp-walk.c", "page-cache.c", "deferred-runs.c", "thread-sched.c"],
      "cflags": ["-O2", "-Wall", "-Wextra"],
      "defines": ["NAPI_VERSION=8"]
    }
  ]
}
