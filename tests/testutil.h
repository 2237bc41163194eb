// testutil.h — shared helpers for the cmocka suites.
#ifndef TESTUTIL_H
#define TESTUTIL_H
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "bc.h"

// A context whose error messages are collected in a buffer instead of
// printed, so tests can assert on them.
typedef struct {
  char buf[65536];
  size_t len;
} tu_errors;

bc_ctx *tu_ctx(tu_errors *errs);
// Parse a graph from a string (file name "t.blk"); NULL on error.
bc_graph *tu_parse(bc_ctx *ctx, const char *text);
// Assert that parsing fails with a message containing `want` at line:col.
void tu_expect_error(const char *text, int line, int col, const char *want);
// Fresh temp path under $TMPDIR (or /tmp) with the given suffix.
const char *tu_tmp_path(char *buf, size_t n, const char *suffix);
// Max |a-b| over n floats.
double tu_max_abs_diff(const float *a, const float *b, size_t n);
#endif
