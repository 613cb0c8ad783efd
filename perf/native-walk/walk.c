/*
 * A measurement, not part of the product: the fast walk of
 * src/otlp/wire-validator.ts written in C, to weigh a native validator
 * (issue 18, P2, option b) with a number rather than a guess. Same action
 * table (dumped from the JS module), same rules, same give-ups; UTF-8 is
 * checked per string by a plain validator with an 8-byte ASCII fast path.
 * run.mjs builds and runs it; see docs/performance.md.
 *
 *   walk ACTIONS_FILE ROOT_MSG REPS BODY_FILE...
 * prints, per body file, the record count and MB/s in thread CPU time.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { OP_GIVE_UP, OP_VARINT, OP_I64, OP_I32, OP_SKIP, OP_STRING, OP_ID, OP_MSG };
#define ACT_COUNTS (1 << 9)
#define ACT_ANY (1 << 10)
#define MAX_ANY_DEPTH 32
#define ANY_VALUE 15

static int32_t actions[18 << 8];
static const int32_t unknown_action[8] = {OP_VARINT, OP_I64, OP_SKIP, OP_GIVE_UP, OP_GIVE_UP, OP_I32, OP_GIVE_UP, OP_GIVE_UP};

/* RFC 3629 UTF-8: no overlongs, no surrogates, nothing above U+10FFFF. */
static int utf8_ok(const uint8_t *p, size_t n) {
  size_t i = 0;
  while (i < n) {
    if (i + 8 <= n) {
      uint64_t w;
      memcpy(&w, p + i, 8);
      if ((w & 0x8080808080808080ULL) == 0) { i += 8; continue; }
    }
    uint8_t c = p[i];
    if (c < 0x80) { i++; continue; }
    if (c >= 0xc2 && c <= 0xdf) {
      if (i + 1 >= n || (p[i + 1] & 0xc0) != 0x80) return 0;
      i += 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      if (i + 2 >= n) return 0;
      uint8_t c1 = p[i + 1];
      if (c == 0xe0 ? (c1 < 0xa0 || c1 > 0xbf) : c == 0xed ? (c1 < 0x80 || c1 > 0x9f) : (c1 & 0xc0) != 0x80) return 0;
      if ((p[i + 2] & 0xc0) != 0x80) return 0;
      i += 3;
    } else if (c >= 0xf0 && c <= 0xf4) {
      if (i + 3 >= n) return 0;
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

static long walk(int root, const uint8_t *b, size_t size) {
  int32_t stack[2 * (16 + 3 * (MAX_ANY_DEPTH + 1))];
  int sp = 0, msg = root, any = 0;
  size_t pos = 0, end = size;
  long count = 0;
  for (;;) {
    if (pos >= end) {
      if (sp == 0) break;
      if (msg == ANY_VALUE) any--;
      msg = stack[--sp];
      end = (size_t)stack[--sp];
      continue;
    }
    uint32_t tag = b[pos++];
    if (tag > 0x7f) {
      if (pos >= end) return -1;
      uint32_t c = b[pos++];
      if (c > 0x7f) return -1;
      tag = (tag & 0x7f) | (c << 7);
    }
    int32_t act = tag < 256 ? actions[(msg << 8) | tag] : unknown_action[tag & 7];
    int op = act & 15;
    if (op == OP_VARINT) {
      for (int n = 1;; n++) {
        if (pos >= end) return -1;
        uint8_t c = b[pos++];
        if (c < 0x80) { if (n == 10 && c > 1) return -1; break; }
        if (n == 10) return -1;
      }
      continue;
    }
    if (op == OP_I64) { if (end - pos < 8) return -1; pos += 8; continue; }
    if (op == OP_I32) { if (end - pos < 4) return -1; pos += 4; continue; }
    if (op == OP_GIVE_UP) return -1;
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
      if ((act & ACT_ANY) && ++any > MAX_ANY_DEPTH) return -1;
      if (sp >= (int)(sizeof stack / sizeof stack[0])) return -1;
      if (act & ACT_COUNTS) count++;
      stack[sp++] = (int32_t)end;
      stack[sp++] = msg;
      msg = act >> 16;
      end = pos + len;
      continue;
    }
    if (op == OP_STRING) {
      if (!utf8_ok(b + pos, len)) return -1;
    } else if (op == OP_ID) {
      if (len != 0 && len != (size_t)((act >> 4) & 31)) return -1;
    }
    pos += len;
  }
  return count;
}

static uint8_t *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) { perror(path); exit(2); }
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *buf = malloc(*n ? *n : 1);
  if (fread(buf, 1, *n, f) != *n) { perror(path); exit(2); }
  fclose(f);
  return buf;
}

static double cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  if (argc < 5) { fprintf(stderr, "usage: walk ACTIONS_FILE ROOT_MSG REPS BODY_FILE...\n"); return 2; }
  size_t an;
  uint8_t *a = slurp(argv[1], &an);
  if (an != sizeof actions) { fprintf(stderr, "action table: %zu bytes, expected %zu\n", an, sizeof actions); return 2; }
  memcpy(actions, a, an);
  int root = atoi(argv[2]);
  int reps = atoi(argv[3]);
  for (int i = 4; i < argc; i++) {
    size_t n;
    uint8_t *body = slurp(argv[i], &n);
    long count = walk(root, body, n);
    double best = 1e30, runs[7];
    for (int r = 0; r < 7; r++) {
      double t0 = cpu_s();
      long sink = 0;
      for (int k = 0; k < reps; k++) sink += walk(root, body, n);
      runs[r] = cpu_s() - t0;
      if (sink != count * reps) { fprintf(stderr, "unstable count\n"); return 1; }
      if (runs[r] < best) best = runs[r];
    }
    /* median of 7 */
    for (int x = 0; x < 7; x++) for (int y = x + 1; y < 7; y++) if (runs[y] < runs[x]) { double t = runs[x]; runs[x] = runs[y]; runs[y] = t; }
    printf("%s\t%ld records\t%.0f MB/s median\t%.0f MB/s best\t%.1f us/body\n", argv[i], count, n * (double)reps / runs[3] / 1e6, n * (double)reps / best / 1e6, runs[3] / reps * 1e6);
    free(body);
  }
  return 0;
}
