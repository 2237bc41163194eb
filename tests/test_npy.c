// test_npy.c — the .npy reader and writer: round trips, numpy's exact
// layout, header dialects (versions 1-3, key order, spacing), and every
// rejection with its message.
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Writes a .npy file of the given version with header text `hdr` (used as
// is: no padding) followed by dlen bytes of data (a ramp of floats 0, 1, ...).
static void write_npy(const char *path, int major, const char *hdr, size_t dlen) {
  size_t hl = strlen(hdr), pre = major == 1 ? 10 : 12;
  size_t total = pre + hl + dlen;
  unsigned char *b = calloc(1, total + 4);
  assert_non_null(b);
  memcpy(b, "\x93NUMPY", 6);
  b[6] = (unsigned char)major;
  b[7] = 0;
  for (size_t i = 0; i < pre - 8; i++) b[8 + i] = (unsigned char)(hl >> (8 * i));
  memcpy(b + pre, hdr, hl);
  for (size_t i = 0; i + 4 <= dlen; i += 4) {
    float v = (float)(i / 4);
    memcpy(b + pre + hl + i, &v, 4);
  }
  tu_write_bytes(path, b, total);
  free(b);
}

// Reads path expecting failure with "<path>: error: " and want.
static void expect_read_fails(const char *path, int want_rc, const char *want) {
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_shape s;
  float *data = (float *)1;
  int rc = bcN_read(ctx, path, &s, &data);
  bc_ctx_free(ctx);
  tu_expect_read_error(path, rc, want_rc, data == NULL, errs.buf, want);
}

// Writes these n bytes to path and expects reading it to fail (BC_EINPUT) with want.
static void expect_bytes_fail(const char *path, const void *bytes, size_t n, const char *want) {
  tu_write_bytes(path, bytes, n);
  expect_read_fails(path, BC_EINPUT, want);
}

static void expect_bad(int major, const char *hdr, size_t dlen, const char *want) {
  char path[256];
  tu_tmp_path(path, sizeof path, ".npy");
  write_npy(path, major, hdr, dlen);
  expect_read_fails(path, BC_EINPUT, want);
  unlink(path);
}

// Reads a hand-made file that must succeed, checking shape and the ramp.
static void expect_good(int major, const char *hdr, int rank, const int64_t *dims) {
  char path[256];
  tu_tmp_path(path, sizeof path, ".npy");
  int64_t numel = 1;
  for (int i = 0; i < rank; i++) numel *= dims[i];
  write_npy(path, major, hdr, (size_t)numel * 4);
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_shape s;
  float *data;
  int rc = bcN_read(ctx, path, &s, &data);
  if (rc != BC_OK) {
    print_error("header %s: %s\n", hdr, errs.buf);
    fail();
  }
  assert_int_equal(s.rank, rank);
  for (int i = 0; i < rank; i++) assert_int_equal(s.d[i], dims[i]);
  for (int64_t i = 0; i < numel; i++) assert_true(data[i] == (float)i);
  free(data);
  bc_ctx_free(ctx);
  unlink(path);
}

static void test_round_trip(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  char path[256];
  tu_tmp_path(path, sizeof path, ".npy");
  bc_shape shapes[] = {{.rank = 1, .d = {7}}, {.rank = 2, .d = {2, 3}}, {.rank = 3, .d = {1, 4, 5}}, {.rank = 4, .d = {2, 1, 3, 2}}, {.rank = 1, .d = {0}}};
  for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
    int64_t n = bc_shape_numel(&shapes[k]);
    float *x = malloc((size_t)(n ? n : 1) * sizeof(float));
    assert_non_null(x);
    for (int64_t i = 0; i < n; i++) x[i] = (float)i * 0.37f - 3.0f;
    assert_int_equal(bcN_write(ctx, path, &shapes[k], x), BC_OK);
    bc_shape s;
    float *y;
    assert_int_equal(bcN_read(ctx, path, &s, &y), BC_OK);
    assert_true(bc_shape_eq(&s, &shapes[k]));
    if (n) assert_memory_equal(x, y, (size_t)n * sizeof(float));
    free(x);
    free(y);
  }
  unlink(path);
  assert_int_equal(errs.len, 0);
  bc_ctx_free(ctx);
}

// The bytes numpy.save writes for a (2, 3) float32 array.
static void test_numpy_layout(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  char path[256];
  tu_tmp_path(path, sizeof path, ".npy");
  float x[6] = {1, 2, 3, 4, 5, 6};
  bc_shape s = {.rank = 2, .d = {2, 3}};
  assert_int_equal(bcN_write(ctx, path, &s, x), BC_OK);
  char *raw;
  size_t len;
  assert_int_equal(bc_read_file(ctx, path, 4096, &raw, &len), BC_OK);
  assert_int_equal(len, 128 + 24);
  assert_memory_equal(raw, "\x93NUMPY\x01\x00\x76\x00", 10);
  const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  assert_memory_equal(raw + 10, dict, strlen(dict));
  for (size_t i = 10 + strlen(dict); i < 127; i++) assert_int_equal(raw[i], ' ');
  assert_int_equal(raw[127], '\n');
  assert_memory_equal(raw + 128, x, sizeof x);

  bc_shape s1 = {.rank = 1, .d = {5}};
  float y[5] = {0};
  assert_int_equal(bcN_write(ctx, path, &s1, y), BC_OK);
  assert_int_equal(bc_read_file(ctx, path, 4096, &raw, &len), BC_OK);
  assert_non_null(strstr(raw + 10, "'shape': (5,), }"));
  assert_int_equal(len, 128 + 20);
  unlink(path);
  bc_ctx_free(ctx);
}

static void test_header_dialects(void **state) {
  (void)state;
  int64_t d23[] = {2, 3}, d5[] = {5}, d4[] = {1, 2, 1, 3};
  expect_good(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }          \n", 2, d23);
  expect_good(1, "{'shape': (5,), 'fortran_order': False, 'descr': '<f4'}\n", 1, d5);
  expect_good(1, "{ \"descr\" : \"<f4\" ,\n 'fortran_order':False,'shape':( 2 ,3 , ) , }", 2, d23);
  expect_good(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }\n", 2, d23);
  expect_good(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 1, 3), }\n", 4, d4);
  expect_good(3, "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }\n", 1, d5);
}

static void test_bad_dtype_and_order(void **state) {
  (void)state;
  expect_bad(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }\n", 24,
             "dtype '>f4' (big-endian float32) is not supported; expected '<f4' (little-endian float32); "
             "convert with x.astype('<f4')");
  expect_bad(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }\n", 48,
             "dtype '<f8' (float64) is not supported; expected '<f4' (little-endian float32); "
             "convert with x.astype(np.float32)");
  expect_bad(1, "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }\n", 4, "dtype '<f2' (float16)");
  expect_bad(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }\n", 16, "dtype '<i8' (int64)");
  expect_bad(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }\n", 2, "dtype '|b1' (bool)");
  expect_bad(1, "{'descr': '=f4', 'fortran_order': False, 'shape': (2,), }\n", 8,
             "dtype '=f4' (native-order float32)");
  expect_bad(1, "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }\n", 16, "(Python objects)");
  expect_bad(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }\n", 8,
             "structured dtype");
  expect_bad(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }\n", 24,
             "fortran_order is True; save a C-ordered array (np.ascontiguousarray)");
}

static void test_bad_shape_and_size(void **state) {
  (void)state;
  expect_bad(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }\n", 4,
             "shape () is a scalar; expected an array of rank 1 to 4");
  expect_bad(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 2), }\n", 8,
             "shape (1, 1, 1, 1, 2): rank 5 is over the limit of 4");
  expect_bad(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n", 20,
             "shape (2, 3) needs 24 bytes of data but the file has 20");
  expect_bad(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n", 28,
             "shape (2, 3) needs 24 bytes of data but the file has 28 (4 extra bytes at the end)");
  expect_bad(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }\n", 0,
             "shape (5,) needs 20 bytes of data but the file has 0");
  expect_bad(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }\n", 0,
             "dimension 0 is over the limit of 16777216");
  expect_bad(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (65536, 65536), }\n", 0,
             "has more than 2147483648 elements");
}

static void test_bad_header_syntax(void **state) {
  (void)state;
  expect_bad(1, "{'descr': '<f4', 'shape': (2,), }\n", 8, "the key 'fortran_order' is missing");
  expect_bad(1, "{'descr': '<f4', 'fortran_order': False}\n", 8, "the key 'shape' is missing");
  expect_bad(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}\n", 8,
             "unexpected key 'x' (expected 'descr', 'fortran_order', 'shape')");
  expect_bad(1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}\n", 8,
             "key appears twice");
  expect_bad(1, "{'descr': '<f4', 'fortran_order': false, 'shape': (2,)}\n", 8,
             "bad .npy header at column 35: expected True or False");
  expect_bad(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}\n", 8,
             "expected ',' or ')' in the shape tuple");
  expect_bad(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}\n", 8,
             "expected a non-negative integer");
  expect_bad(1, "{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}\n", 8, "expected ',' or '}'");
  expect_bad(1, "{'descr' '<f4', 'fortran_order': False, 'shape': (2,)}\n", 8, "expected ':' after the key");
  expect_bad(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} extra\n", 8,
             "unexpected text after the dict");
  expect_bad(1, "'descr': '<f4'\n", 8, "expected '{'");
  expect_bad(1, "", 8, "expected '{'");
  expect_bad(1, "{'descr': '<f4", 8, "unterminated string");
}

static void test_bad_prefix(void **state) {
  (void)state;
  char path[256];
  tu_tmp_path(path, sizeof path, ".npy");
  expect_bytes_fail(path, "PK\x03\x04 zipfile", 13,
                    "not a .npy file (it does not start with \"\\x93NUMPY\")");
  expect_bytes_fail(path, "\x93NUM", 4, "not a .npy file");
  expect_bytes_fail(path, "\x93NUMPY\x01", 7, "truncated .npy header (file is 7 bytes)");
  expect_bytes_fail(path, "\x93NUMPY\x02\x00\x10\x00", 10,
                    "truncated .npy header (file is 10 bytes)");
  expect_bytes_fail(path, "\x93NUMPY\x04\x00\x10\x00{}", 12,
                    ".npy format version 4.0 is not supported (expected 1.0, 2.0 or 3.0)");
  expect_bytes_fail(path, "\x93NUMPY\x01\x00\x76\x00{'descr'", 18,
                    "truncated .npy header: it claims 118 bytes but only 8 follow");
  expect_bytes_fail(path, "\x93NUMPY\x02\x00\x00\x00\x00\x01{", 13,
                    ".npy header length 16777216 is over the limit");
  unlink(path);
  expect_read_fails(path, BC_EIO, "cannot open: No such file or directory");
}

static void test_write_errors(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  char path[256], missing[300];
  tu_tmp_path(path, sizeof path, ".npy");
  snprintf(missing, sizeof missing, "%s.nodir/x.npy", path);
  float x[2] = {1, 2};
  bc_shape s = {.rank = 1, .d = {2}};
  assert_int_equal(bcN_write(ctx, missing, &s, x), BC_EIO);
  assert_non_null(strstr(errs.buf, "x.npy: error: cannot write: No such file or directory"));
  assert_int_equal(access(missing, F_OK), -1);
  bc_shape s0 = {.rank = 0, .d = {0}};  // a scalar (a loss): numpy's shape (), one float
  assert_int_equal(bcN_write(ctx, path, &s0, x), BC_OK);
  size_t n0;
  char *t0 = tu_slurp(path, &n0);
  assert_non_null(t0);
  assert_int_equal(n0, 128 + 4);
  assert_non_null(strstr(t0 + 10, "'shape': (), }"));
  assert_memory_equal(t0 + 128, x, 4);
  free(t0);
  remove(path);
  bc_shape s5 = {.rank = 5, .d = {1, 1, 1, 1}};
  assert_int_equal(bcN_write(ctx, path, &s5, x), BC_EINPUT);
  bc_shape sneg = {.rank = 1, .d = {-2}};
  assert_int_equal(bcN_write(ctx, path, &sneg, x), BC_EINPUT);
  assert_non_null(strstr(errs.buf, "cannot write an array of rank"));
  assert_int_equal(access(path, F_OK), -1);
  bc_ctx_free(ctx);
}

// Writes a header + raw bytes file (no ramp): for integer arrays.
static void write_raw_npy(const char *path, const char *hdr, const void *data, size_t dlen) {
  size_t hl = strlen(hdr);
  unsigned char *b = calloc(1, 10 + hl + dlen + 1);
  assert_non_null(b);
  memcpy(b, "\x93NUMPY\x01\x00", 8);
  b[8] = (unsigned char)hl, b[9] = (unsigned char)(hl >> 8);
  memcpy(b + 10, hdr, hl);
  if (dlen) memcpy(b + 10 + hl, data, dlen);
  tu_write_bytes(path, b, 10 + hl + dlen);
  free(b);
}

// Writes write_raw_npy's file and expects bcN_read_i32 to fail (BC_EINPUT)
// with want among errs.
static void expect_i32_fails(bc_ctx *ctx, const tu_errors *errs, const char *path, const char *hdr,
                             const void *data, size_t dlen, const char *want) {
  bc_shape s;
  int32_t *v = NULL;
  write_raw_npy(path, hdr, data, dlen);
  assert_int_equal(bcN_read_i32(ctx, path, &s, &v), BC_EINPUT);
  assert_non_null(strstr(errs->buf, want));
}

// Lengths arrays: <i4 and <i8 (narrowed with a range check), nothing else.
static void test_read_i32(void **state) {
  (void)state;
  char path[256];
  tu_tmp_path(path, sizeof path, ".npy");
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_shape s;
  int32_t *v = NULL;
  const int32_t i4[3] = {1, 7, -2};
  write_raw_npy(path, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }\n", i4, sizeof i4);
  assert_int_equal(bcN_read_i32(ctx, path, &s, &v), BC_OK);
  assert_int_equal(s.rank, 1);
  assert_int_equal(s.d[0], 3);
  assert_int_equal(v[0], 1);
  assert_int_equal(v[1], 7);
  assert_int_equal(v[2], -2);
  free(v);
  const int64_t i8[2] = {5, 2147483647};
  write_raw_npy(path, "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }\n", i8, sizeof i8);
  assert_int_equal(bcN_read_i32(ctx, path, &s, &v), BC_OK);
  assert_int_equal(v[0], 5);
  assert_int_equal(v[1], 2147483647);
  free(v);
  const int64_t big[2] = {5, 2147483648LL};
  write_raw_npy(path, "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }\n", big, sizeof big);
  assert_int_equal(bcN_read_i32(ctx, path, &s, &v), BC_EINPUT);
  assert_null(v);
  assert_non_null(strstr(errs.buf, "element 1 is 2147483648, outside the int32 range"));
  expect_i32_fails(ctx, &errs, path, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n", i8, 8,
                   "dtype '<f4' (float32) is not supported for lengths; expected '<i4' or '<i8'");
  expect_i32_fails(ctx, &errs, path, "{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }\n", i8, 8,
                   "big-endian int32");
  expect_i32_fails(ctx, &errs, path, "{'descr': '<i4', 'fortran_order': True, 'shape': (2,), }\n", i8, 8,
                   "fortran_order is True");
  // With an expected shape: compared before the data (none here) is read.
  bc_shape want = {.rank = 1, .d = {2}};
  write_raw_npy(path, "{'descr': '<i8', 'fortran_order': False, 'shape': (1000000,), }\n", NULL, 0);
  assert_int_equal(bcN_read_i32_expect(ctx, path, &want, "g.blk", &s, &v), BC_EINPUT);
  assert_non_null(strstr(errs.buf, "input has shape [1000000] but g.blk expects [2]"));
  write_raw_npy(path, "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }\n", i8, 16);
  assert_int_equal(bcN_read_i32_expect(ctx, path, &want, "g.blk", &s, &v), BC_OK);
  assert_int_equal(v[1], 2147483647);
  free(v);
  expect_i32_fails(ctx, &errs, path, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }\n", i8, 16,
                   "needs 24 bytes of data but the file has 16");
  unlink(path);
  bc_ctx_free(ctx);
}

// The expected shape is compared with the header before the data is read:
// a header claiming a huge array (the file holds no data at all) gets the
// shape message, not a size or memory one.
static void test_read_expect(void **state) {
  (void)state;
  char path[256];
  tu_tmp_path(path, sizeof path, ".npy");
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_shape s, want = {.rank = 2, .d = {2, 3}};
  float *x = NULL;
  write_raw_npy(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (4096, 4096), }\n", NULL, 0);
  assert_int_equal(bcN_read_expect(ctx, path, &want, "g.blk", &s, &x), BC_EINPUT);
  assert_null(x);
  assert_non_null(strstr(errs.buf, "input has shape [4096, 4096] but g.blk expects [2, 3]"));
  float d6[6] = {1, 2, 3, 4, 5, 6};
  write_raw_npy(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n", d6, sizeof d6);
  assert_int_equal(bcN_read_expect(ctx, path, &want, "g.blk", &s, &x), BC_OK);
  assert_float_equal(x[5], 6.0f, 0);
  free(x);
  // A run-time dim accepts 1..its bound.
  bc_shape rt = {.rank = 2, .d = {4, 3}, .sym = {1, 0}};
  assert_int_equal(bcN_read_expect(ctx, path, &rt, "g.blk", &s, &x), BC_OK);
  assert_int_equal(s.d[0], 2);
  free(x);
  rt.d[0] = 1;
  assert_int_equal(bcN_read_expect(ctx, path, &rt, "g.blk", &s, &x), BC_EINPUT);
  unlink(path);
  bc_ctx_free(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_numpy_layout),
      cmocka_unit_test(test_header_dialects),
      cmocka_unit_test(test_bad_dtype_and_order),
      cmocka_unit_test(test_bad_shape_and_size),
      cmocka_unit_test(test_bad_header_syntax),
      cmocka_unit_test(test_bad_prefix),
      cmocka_unit_test(test_write_errors),
      cmocka_unit_test(test_read_i32),
      cmocka_unit_test(test_read_expect),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
