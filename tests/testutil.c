// testutil.c — shared helpers for the cmocka suites (see testutil.h).
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void collect(void *opaque, const char *msg) {
  tu_errors *e = opaque;
  size_t n = strlen(msg);
  if (e->len + n >= sizeof e->buf) n = sizeof e->buf - e->len - 1;
  memcpy(e->buf + e->len, msg, n);
  e->len += n;
  e->buf[e->len] = '\0';
}

bc_ctx *tu_ctx(tu_errors *errs) {
  bc_ctx *ctx = bc_ctx_new();
  assert_non_null(ctx);
  errs->len = 0;
  errs->buf[0] = '\0';
  bc_set_error_fn(ctx, errs, collect);
  return ctx;
}

bc_graph *tu_parse(bc_ctx *ctx, const char *text) {
  return bcP_parse_string(ctx, "t.blk", text, NULL, 0);
}

void tu_expect_error(const char *text, int line, int col, const char *want) {
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = tu_parse(ctx, text);
  if (g || !strstr(errs.buf, want)) {
    print_error("expected error containing '%s'\ngot: %s\n", want, g ? "(parsed OK)" : errs.buf);
    bc_ctx_free(ctx);
    fail();
  }
  char loc[64];
  snprintf(loc, sizeof loc, "t.blk:%d:%d: error: ", line, col);
  if (strncmp(errs.buf, loc, strlen(loc)) != 0) {
    print_error("expected location %s\ngot: %s\n", loc, errs.buf);
    bc_ctx_free(ctx);
    fail();
  }
  bc_ctx_free(ctx);
}

const char *tu_tmp_path(char *buf, size_t n, const char *suffix) {
  static int counter;
  const char *dir = getenv("TMPDIR");
  snprintf(buf, n, "%s/blockc-test-%ld-%d%s", dir ? dir : "/tmp", (long)getpid(), counter++, suffix);
  return buf;
}

double tu_max_abs_diff(const float *a, const float *b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - (double)b[i]);
    if (d > m || d != d) m = d;
  }
  return m;
}
