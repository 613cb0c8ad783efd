/*
 * The fast OTLP wire walk of src/otlp/wire-validator.ts in C, as a Node-API
 * addon (issue 18, P2: the walk was most of the writer thread's time on 256
 * KiB bodies). It has the same contract as the JS fast walk, fastWalk(): it
 * returns the record count of a body it accepts outright, or -1 when it gives
 * up, and then the exact walk (wire-validator-exact.ts) decides and words the
 * refusal. So it only has to be sound: never accept what the exact walk
 * refuses, and count the same when it accepts. The tests hold it to both JS
 * walks and to the fuzz suite's independent oracle
 * (test/unit/otlp-native-walk.test.ts).
 *
 * Nothing about the OTLP schema is compiled in: init() receives the action
 * table (ACTIONS of wire-validator.ts, one entry per message and tag byte),
 * the AnyValue message number, its depth limit and the stack size, plus the
 * op-code layout, which must match this file's or init() throws and the JS
 * walk is used. The table is kept per Node-API environment (each worker
 * thread loads its own copy), so threads share nothing.
 *
 * UTF-8 is checked per string (RFC 3629: no overlong forms, no surrogates,
 * nothing above U+10FFFF, what node:buffer's isUtf8 accepts), sixteen bytes
 * at a time while they are ASCII.
 *
 * Built by node-gyp from native/binding.gyp (native/build.mjs) into the
 * siglake_native addon (addon.c).
 */
#include "addon.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { OP_GIVE_UP, OP_VARINT, OP_I64, OP_I32, OP_SKIP, OP_STRING, OP_ID, OP_MSG };
#define ACT_ID_SHIFT 4
#define ACT_COUNTS (1 << 9)
#define ACT_ANY (1 << 10)
#define ACT_MSG_SHIFT 16
/* The layout init() checks against the caller's: the op codes, then the action bits. */
static const int32_t LAYOUT[] = {OP_GIVE_UP, OP_VARINT, OP_I64, OP_I32, OP_SKIP, OP_STRING, OP_ID, OP_MSG, ACT_ID_SHIFT, ACT_COUNTS, ACT_ANY, ACT_MSG_SHIFT};
#define LAYOUT_LEN (sizeof LAYOUT / sizeof LAYOUT[0])
/* Entries of the enclosing-message stack ([end, msg] pairs) a walk may use at most. */
#define MAX_STACK 4096

static const int32_t UNKNOWN_ACTION[8] = {OP_VARINT, OP_I64, OP_SKIP, OP_GIVE_UP, OP_GIVE_UP, OP_I32, OP_GIVE_UP, OP_GIVE_UP};

typedef struct {
  int32_t *actions;
  size_t messages;
  int32_t any_value;
  int32_t max_any_depth;
  int32_t stack_cap;
} walk_table;

static int utf8_ok(const uint8_t *p, size_t n) {
  size_t i = 0;
  while (i < n) {
    if (n - i >= 16) {
      uint64_t a, b;
      memcpy(&a, p + i, 8);
      memcpy(&b, p + i + 8, 8);
      if (((a | b) & 0x8080808080808080ULL) == 0) {
        i += 16;
        continue;
      }
    }
    uint8_t c = p[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    if (c >= 0xc2 && c <= 0xdf) {
      if (n - i < 2 || (p[i + 1] & 0xc0) != 0x80) return 0;
      i += 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      if (n - i < 3) return 0;
      uint8_t c1 = p[i + 1];
      if (c == 0xe0 ? (c1 < 0xa0 || c1 > 0xbf) : c == 0xed ? (c1 < 0x80 || c1 > 0x9f) : (c1 & 0xc0) != 0x80) return 0;
      if ((p[i + 2] & 0xc0) != 0x80) return 0;
      i += 3;
    } else if (c >= 0xf0 && c <= 0xf4) {
      if (n - i < 4) return 0;
      uint8_t c1 = p[i + 1];
      if (c == 0xf0 ? (c1 < 0x90 || c1 > 0xbf) : c == 0xf4 ? (c1 < 0x80 || c1 > 0x8f) : (c1 & 0xc0) != 0x80) return 0;
      if ((p[i + 2] & 0xc0) != 0x80 || (p[i + 3] & 0xc0) != 0x80) return 0;
      i += 4;
    } else {
      return 0;
    }
  }
  return 1;
}

/* The record count of a body the walk accepts, or -1 when it gives up. */
static int64_t walk(const walk_table *t, int32_t root, const uint8_t *b, size_t size) {
  size_t stack[MAX_STACK];
  const int32_t *actions = t->actions;
  const size_t cap = (size_t)t->stack_cap;
  size_t sp = 0, pos = 0, end = size;
  int32_t msg = root;
  int32_t any = 0;
  int64_t count = 0;
  for (;;) {
    if (pos >= end) {
      if (sp == 0) break;
      if (msg == t->any_value) any--;
      msg = (int32_t)stack[--sp];
      end = stack[--sp];
      continue;
    }
    /* Tag: one or two bytes (field numbers from 2048 are the exact walk's). */
    uint32_t tag = b[pos++];
    if (tag > 0x7f) {
      if (pos >= end) return -1;
      uint32_t c = b[pos++];
      if (c > 0x7f) return -1;
      tag = (tag & 0x7f) | (c << 7);
    }
    int32_t act = tag < 256 ? actions[((size_t)msg << 8) | tag] : UNKNOWN_ACTION[tag & 7];
    int op = act & 15;
    if (op == OP_VARINT) {
      /* At most 10 bytes, the 10th at most 1 (the value fits 64 bits). */
      for (int n = 1;; n++) {
        if (pos >= end) return -1;
        uint8_t c = b[pos++];
        if (c < 0x80) {
          if (n == 10 && c > 1) return -1;
          break;
        }
        if (n == 10) return -1;
      }
      continue;
    }
    if (op == OP_I64) {
      if (end - pos < 8) return -1;
      pos += 8;
      continue;
    }
    if (op == OP_I32) {
      if (end - pos < 4) return -1;
      pos += 4;
      continue;
    }
    if (op == OP_GIVE_UP) return -1;
    /* Length-delimited: a length of up to 4 bytes (below 2^28). */
    if (pos >= end) return -1;
    size_t len = b[pos++];
    if (len > 0x7f) {
      len &= 0x7f;
      for (int shift = 7;; shift += 7) {
        if (shift > 21 || pos >= end) return -1;
        uint8_t c = b[pos++];
        len |= (size_t)(c & 0x7f) << shift;
        if (c < 0x80) break;
      }
    }
    if (len > end - pos) return -1;
    if (op == OP_MSG) {
      if ((act & ACT_ANY) != 0 && ++any > t->max_any_depth) return -1;
      if (sp + 2 > cap) return -1;
      if ((act & ACT_COUNTS) != 0) count++;
      stack[sp++] = end;
      stack[sp++] = (size_t)msg;
      int32_t child = (int32_t)((uint32_t)act >> ACT_MSG_SHIFT);
      if ((size_t)child >= t->messages) return -1;
      msg = child;
      end = pos + len;
      continue;
    }
    if (op == OP_STRING) {
      if (!utf8_ok(b + pos, len)) return -1;
    } else if (op == OP_ID) {
      if (len != 0 && len != (size_t)((act >> ACT_ID_SHIFT) & 31)) return -1;
    }
    pos += len;
  }
  return count;
}

static void free_table(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  walk_table *t = data;
  free(t->actions);
  free(t);
}

#define CHECK(call)                                              \
  do {                                                           \
    if ((call) != napi_ok) return NULL;                          \
  } while (0)

static napi_value fail(napi_env env, const char *why) {
  napi_throw_error(env, "SIGLAKE_NATIVE_WALK", why);
  return NULL;
}

static int get_i32(napi_env env, napi_value v, int32_t *out) {
  return napi_get_value_int32(env, v, out) == napi_ok;
}

/* init(actions: Int32Array, anyValue, maxAnyDepth, stackCap, layout: Int32Array): true */
static napi_value init(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc != 5) return fail(env, "init: five arguments expected");

  napi_typedarray_type type;
  size_t length;
  void *data;
  napi_value ab;
  size_t offset;
  if (napi_get_typedarray_info(env, argv[4], &type, &length, &data, &ab, &offset) != napi_ok || type != napi_int32_array)
    return fail(env, "init: the layout must be an Int32Array");
  if (length != LAYOUT_LEN || memcmp(data, LAYOUT, sizeof LAYOUT) != 0)
    return fail(env, "init: the action layout differs from the one this addon was built for");

  if (napi_get_typedarray_info(env, argv[0], &type, &length, &data, &ab, &offset) != napi_ok || type != napi_int32_array)
    return fail(env, "init: the action table must be an Int32Array");
  if (length == 0 || length % 256 != 0) return fail(env, "init: the action table must hold 256 entries per message");

  int32_t any_value, max_any_depth, stack_cap;
  if (!get_i32(env, argv[1], &any_value) || !get_i32(env, argv[2], &max_any_depth) || !get_i32(env, argv[3], &stack_cap))
    return fail(env, "init: anyValue, maxAnyDepth and stackCap must be integers");
  if (stack_cap < 2 || stack_cap > MAX_STACK || max_any_depth < 0) return fail(env, "init: stackCap or maxAnyDepth out of range");

  walk_table *t = calloc(1, sizeof *t);
  if (t == NULL) return fail(env, "init: out of memory");
  t->actions = malloc(length * sizeof(int32_t));
  if (t->actions == NULL) {
    free(t);
    return fail(env, "init: out of memory");
  }
  memcpy(t->actions, data, length * sizeof(int32_t));
  t->messages = length / 256;
  t->any_value = any_value;
  t->max_any_depth = max_any_depth;
  t->stack_cap = stack_cap;
  /* Replaces (and frees) a table an earlier init() of this environment set. */
  if (napi_set_instance_data(env, t, free_table, NULL) != napi_ok) {
    free_table(env, t, NULL);
    return fail(env, "init: could not keep the table");
  }
  napi_value ok;
  CHECK(napi_get_boolean(env, 1, &ok));
  return ok;
}

/* walk(rootMsg: number, bytes: Uint8Array): number (the record count, or -1: the exact walk decides) */
static napi_value walk_fn(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  walk_table *t = NULL;
  int64_t n = -1;
  int32_t root;
  napi_typedarray_type type;
  size_t length;
  void *data;
  napi_value ab;
  size_t offset;
  if (argc == 2 && napi_get_instance_data(env, (void **)&t) == napi_ok && t != NULL && get_i32(env, argv[0], &root) && root >= 0 &&
      (size_t)root < t->messages && napi_get_typedarray_info(env, argv[1], &type, &length, &data, &ab, &offset) == napi_ok &&
      type == napi_uint8_array) {
    n = walk(t, root, length == 0 ? (const uint8_t *)"" : data, length);
  }
  napi_value out;
  CHECK(napi_create_int64(env, n, &out));
  return out;
}

/* Adds init() and walk() to the addon's exports (addon.c). */
int siglake_register_walk(napi_env env, napi_value exports) {
  napi_value f;
  if (napi_create_function(env, "init", NAPI_AUTO_LENGTH, init, NULL, &f) != napi_ok) return 0;
  if (napi_set_named_property(env, exports, "init", f) != napi_ok) return 0;
  if (napi_create_function(env, "walk", NAPI_AUTO_LENGTH, walk_fn, NULL, &f) != napi_ok) return 0;
  if (napi_set_named_property(env, exports, "walk", f) != napi_ok) return 0;
  return 1;
}
