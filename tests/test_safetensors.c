// test_safetensors.c — the safetensors reader and writer: round trips,
// exact F16/BF16 conversion (every bit pattern), each malformed-file check
// with its message, and atomic writing.
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>


// Opens the file at path expecting failure with a message containing
// "<path>: error: " and want.
static void expect_open_fails(const char *path, int want_rc, const char *want) {
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_st_file *f = (bc_st_file *)1;
  int rc = bcS_open(ctx, path, &f);
  bc_ctx_free(ctx);
  tu_expect_read_error(path, rc, want_rc, f == NULL, errs.buf, want);
}

// Writes these n bytes to path and expects opening it to fail (BC_EINPUT) with want.
static void expect_bytes_fail(const char *path, const void *bytes, size_t n, const char *want) {
  tu_write_bytes(path, bytes, n);
  expect_open_fails(path, BC_EINPUT, want);
}

// The same for a safetensors file with this JSON header and dlen data bytes.
static void expect_raw_fail(const char *path, const char *json, const void *data, size_t dlen,
                            const char *want) {
  tu_write_safetensors_raw(path, json, data, dlen);
  expect_open_fails(path, BC_EINPUT, want);
}

// A header + data file that must be rejected with want in the message.
static void expect_bad(const char *json, size_t dlen, const char *want) {
  char path[256];
  tu_tmp_path(path, sizeof path, ".safetensors");
  unsigned char *data = calloc(1, dlen + 1);
  assert_non_null(data);
  tu_write_safetensors_raw(path, json, data, dlen);
  free(data);
  expect_open_fails(path, BC_EINPUT, want);
  unlink(path);
}

static void test_round_trip(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  char path[256];
  tu_tmp_path(path, sizeof path, ".safetensors");
  float a[6] = {1, -2, 3.5f, 0, -0.0f, 1e-30f}, b[3] = {INFINITY, 7, 8}, c[1] = {42}, e[1] = {0};
  const char *names[] = {"layers.0.w", "b", "scalar", "empty"};
  bc_shape shapes[] = {{.rank = 2, .d = {2, 3}}, {.rank = 1, .d = {3}}, {.rank = 0, .d = {0}}, {.rank = 2, .d = {0, 5}}};
  const float *data[] = {a, b, c, e};
  assert_int_equal(bcS_write(ctx, path, 4, names, shapes, data), BC_OK);

  // Header padded to a multiple of 8, metadata present.
  char *raw;
  size_t len;
  assert_int_equal(bc_read_file(ctx, path, 1 << 20, &raw, &len), BC_OK);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = hlen << 8 | (unsigned char)raw[i];
  assert_int_equal(hlen % 8, 0);
  assert_int_equal(len, 8 + hlen + (6 + 3 + 1) * 4);
  assert_non_null(strstr(raw + 8, "\"__metadata__\":{\"format\":\"pt\"}"));

  bc_st_file *f;
  assert_int_equal(bcS_open(ctx, path, &f), BC_OK);
  assert_int_equal(f->ntensors, 4);
  const bc_st_tensor *t = bcS_find(f, "layers.0.w");
  assert_non_null(t);
  assert_int_equal(t->dtype, BC_DT_F32);
  assert_string_equal(t->dtype_name, "F32");
  assert_int_equal(t->rank, 2);
  assert_int_equal(t->shape[0], 2);
  assert_int_equal(t->shape[1], 3);
  float got[6];
  assert_int_equal(bcS_read_f32(ctx, f, t, got), BC_OK);
  assert_memory_equal(got, a, sizeof a);  // bitwise, so -0.0 survives
  assert_int_equal(bcS_read_f32(ctx, f, bcS_find(f, "b"), got), BC_OK);
  assert_memory_equal(got, b, sizeof b);
  t = bcS_find(f, "scalar");
  assert_non_null(t);
  assert_int_equal(t->rank, 0);
  assert_int_equal(bcS_read_f32(ctx, f, t, got), BC_OK);
  assert_true(got[0] == 42);
  t = bcS_find(f, "empty");
  assert_non_null(t);
  assert_int_equal(t->end - t->begin, 0);
  assert_null(bcS_find(f, "nope"));
  assert_null(bcS_find(f, ""));
  bcS_close(f);
  bcS_close(NULL);
  unlink(path);
  assert_int_equal(errs.len, 0);
  bc_ctx_free(ctx);
}

// Reference value of a half, computed by arithmetic rather than bits.
static float half_ref(uint16_t h) {
  int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v;
  if (e == 31) v = m ? NAN : INFINITY;
  else if (e == 0) v = ldexp(m, -24);
  else v = ldexp(1024 + m, e - 25);
  return (float)(s ? -v : v);
}

static void test_f16_bf16_exhaustive(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  char path[256];
  tu_tmp_path(path, sizeof path, ".safetensors");
  unsigned char *bytes = malloc(2 * 65536 * 2);
  assert_non_null(bytes);
  for (int i = 0; i < 65536; i++) {
    bytes[2 * i] = (unsigned char)i;
    bytes[2 * i + 1] = (unsigned char)(i >> 8);
    bytes[131072 + 2 * i] = (unsigned char)i;
    bytes[131072 + 2 * i + 1] = (unsigned char)(i >> 8);
  }
  tu_write_safetensors_raw(path,
            "{\"h\":{\"dtype\":\"F16\",\"shape\":[256,256],\"data_offsets\":[0,131072]},"
            "\"b\":{\"dtype\":\"BF16\",\"shape\":[65536],\"data_offsets\":[131072,262144]}}",
            bytes, 262144);
  free(bytes);
  bc_st_file *f;
  assert_int_equal(bcS_open(ctx, path, &f), BC_OK);
  float *out = malloc(65536 * sizeof(float));
  assert_non_null(out);
  assert_int_equal(bcS_read_f32(ctx, f, bcS_find(f, "h"), out), BC_OK);
  for (int i = 0; i < 65536; i++) {
    float want = half_ref((uint16_t)i);
    if (isnan(want)) {
      assert_true(isnan(out[i]));
      assert_int_equal(signbit(out[i]) != 0, (i >> 15) != 0);
    } else if (memcmp(&want, &out[i], 4) != 0) {
      print_error("half 0x%04x: got %a want %a\n", i, out[i], want);
      fail();
    }
  }
  // Spot checks against well-known values.
  assert_true(out[0x3C00] == 1.0f);
  assert_true(out[0xC000] == -2.0f);
  assert_true(out[0x7BFF] == 65504.0f);
  assert_true(out[0x0001] == 0x1p-24f);  // smallest subnormal
  assert_true(out[0x03FF] == 0x3FFp-24f); // largest subnormal
  assert_true(out[0x0400] == 0x1p-14f);  // smallest normal
  assert_true(isinf(out[0xFC00]) && out[0xFC00] < 0);
  assert_true(signbit(out[0x8000]) && out[0x8000] == 0);

  assert_int_equal(bcS_read_f32(ctx, f, bcS_find(f, "b"), out), BC_OK);
  for (uint32_t i = 0; i < 65536; i++) {
    uint32_t bits;
    memcpy(&bits, &out[i], 4);
    assert_int_equal(bits, i << 16);
  }
  assert_true(out[0x3F80] == 1.0f);
  assert_true(out[0x4049] == 3.140625f);
  assert_true(out[0x0001] == 0x1p-133f);
  assert_true(isinf(out[0x7F80]));
  assert_true(isnan(out[0x7FC0]));
  free(out);
  bcS_close(f);
  unlink(path);
  bc_ctx_free(ctx);
}

// Integer tensors open fine (a checkpoint may carry buffers) and are only
// refused when read.
static void test_unsupported_dtype_on_read(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  char path[256];
  tu_tmp_path(path, sizeof path, ".safetensors");
  unsigned char data[16] = {0};
  tu_write_safetensors_raw(path,
            "{\"__metadata__\":{\"format\":\"pt\",\"k\":\"v\"},"
            "\"steps\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]}}   ",
            data, 16);
  bc_st_file *f;
  assert_int_equal(bcS_open(ctx, path, &f), BC_OK);
  const bc_st_tensor *t = bcS_find(f, "steps");
  assert_non_null(t);
  assert_int_equal(t->dtype, BC_DT_OTHER);
  assert_string_equal(t->dtype_name, "I64");
  float out[2];
  assert_int_equal(bcS_read_f32(ctx, f, t, out), BC_EINPUT);
  assert_non_null(strstr(errs.buf, ": error: tensor 'steps': dtype I64 is not supported (expected F32, F16 or BF16)"));
  bcS_close(f);
  unlink(path);
  bc_ctx_free(ctx);
}

static void test_lenient_but_valid(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  char path[256];
  tu_tmp_path(path, sizeof path, ".safetensors");
  // Keys in any order, whitespace, adjacent and zero-size tensors sharing an
  // offset (tensors must still tile the data section exactly).
  unsigned char data[32] = {0};
  tu_write_safetensors_raw(path,
            "{ \"b\" : {\"data_offsets\": [16, 24], \"shape\": [2], \"dtype\": \"F32\"},\n"
            "  \"a\": {\"shape\": [2, 2], \"dtype\": \"F32\", \"data_offsets\": [0, 16]},\n"
            "  \"z\": {\"shape\": [0, 3], \"dtype\": \"F32\", \"data_offsets\": [16, 16]},\n"
            "  \"h\": {\"shape\": [4], \"dtype\": \"BF16\", \"data_offsets\": [24, 32]} }\n   ",
            data, sizeof data);
  bc_st_file *f;
  assert_int_equal(bcS_open(ctx, path, &f), BC_OK);
  assert_int_equal(f->ntensors, 4);
  assert_string_equal(f->tensors[0].name, "a");  // sorted by name
  assert_non_null(bcS_find(f, "z"));
  bcS_close(f);
  unlink(path);
  assert_int_equal(errs.len, 0);
  bc_ctx_free(ctx);
}

// The data section is tiled exactly (the reference implementation's rule):
// a gap, trailing bytes or a misplaced empty tensor are errors, reported
// from the header alone.
static void test_tiling(void **state) {
  (void)state;
  char path[256];
  tu_tmp_path(path, sizeof path, ".safetensors");
  unsigned char data[40] = {0};
  expect_raw_fail(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                  "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}", data, 20,
                  "bytes [8, 12) of the data section belong to no tensor (before 'b')");
  expect_raw_fail(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", data, 40,
                  "32 bytes after the last tensor (the data section is 40 bytes, the tensors end at 8)");
  expect_raw_fail(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                  "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]}}", data, 8,
                  "overlap");
  // A name with an escaped NUL would be truncated as a C string: rejected.
  expect_raw_fail(path, "{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", data, 8,
                  "escaped NUL (\\u0000)");
  // Escapes JSON does not allow.
  expect_raw_fail(path, "{\"a\\u00)b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", data, 8,
                  "an invalid \\u escape in a string");
  expect_raw_fail(path, "{\"a\\ud800b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", data, 8,
                  "a high surrogate escape without its low half");
  expect_raw_fail(path, "{\"a\\qb\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", data, 8,
                  "an invalid escape in a string");
  // An escaped backslash followed by "u0000" is plain text, not a NUL.
  tu_write_safetensors_raw(path, "{\"a\\\\u0000b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", data, 8);
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_st_file *f;
  assert_int_equal(bcS_open(ctx, path, &f), BC_OK);
  assert_non_null(bcS_find(f, "a\\u0000b"));
  bcS_close(f);
  bc_ctx_free(ctx);
  unlink(path);
}

// A valid header followed by gigabytes is rejected from the header alone:
// nothing but the 8-byte length and the header is read (a sparse file, so
// the test costs no disk and, if the data were read, would take seconds).
static void test_huge_tail_not_read(void **state) {
  (void)state;
  char path[256];
  tu_tmp_path(path, sizeof path, ".safetensors");
  unsigned char data[8] = {0};
  tu_write_safetensors_raw(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", data, 8);
  FILE *fp = fopen(path, "r+b");
  assert_non_null(fp);
  assert_int_equal(fseeko(fp, (off_t)3 << 30, SEEK_SET), 0);
  assert_int_equal(fputc(0, fp), 0);
  fclose(fp);
  expect_open_fails(path, BC_EINPUT, "bytes after the last tensor");
  unlink(path);
}

static void test_bad_sizes(void **state) {
  (void)state;
  char path[256];
  tu_tmp_path(path, sizeof path, ".safetensors");
  expect_bytes_fail(path, "abcd", 4, "file is 4 bytes, too short for a safetensors header");
  expect_bytes_fail(path, "", 0, "file is 0 bytes");
  // A .npy file fed by mistake: the "length" is huge.
  expect_bytes_fail(path, "\x93NUMPY\x01\x00v\x00{'descr'", 18,
                    "is over the limit of 104857600 bytes (not a safetensors file?)");
  unsigned char hdr[12] = {100, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' '};
  expect_bytes_fail(path, hdr, sizeof hdr,
                    "header length 100 runs past the end of the file (4 bytes follow the length field)");
  unlink(path);
  expect_open_fails(path, BC_EIO, "cannot open: No such file or directory");
}

static void test_bad_json(void **state) {
  (void)state;
  expect_bad("{\"a\": {\"dtype\": \"F32\",}}", 0, "header is not valid JSON (at byte 22 of the header: '}}')");
  expect_bad("", 0, "header is not valid JSON");
  expect_bad("{} x", 0, "header has data after the JSON value (at byte 3: 'x')");
  expect_bad("[1, 2]", 0, "header is not a JSON object");
  expect_bad("{\"a\xff\": 1}", 0, "header is not valid UTF-8 (byte 3 of the header)");
  expect_bad("{\"__metadata__\": [1]}", 0, "\"__metadata__\" is not a JSON object");
  expect_bad("{\"__metadata__\": {\"n\": 1}}", 0, "\"__metadata__\" entry 'n' is not a string");
}

static void test_bad_entries(void **state) {
  (void)state;
  expect_bad("{\"a\": 5}", 0, "tensor 'a': entry is not a JSON object");
  expect_bad("{\"a\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", 4, "tensor 'a': missing \"dtype\"");
  expect_bad("{\"a\": {\"dtype\": 4, \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
             "tensor 'a': \"dtype\" is not a string");
  expect_bad("{\"a\": {\"dtype\": \"F99\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
             "tensor 'a': unknown dtype 'F99'");
  expect_bad("{\"a\": {\"dtype\": \"F32\", \"data_offsets\": [0, 4]}}", 4, "tensor 'a': missing \"shape\"");
  expect_bad("{\"a\": {\"dtype\": \"F32\", \"shape\": \"2\", \"data_offsets\": [0, 4]}}", 4,
             "tensor 'a': \"shape\" is not an array");
  expect_bad("{\"a\": {\"dtype\": \"F32\", \"shape\": [2.5], \"data_offsets\": [0, 4]}}", 4,
             "tensor 'a': shape[0] is not a non-negative integer");
  expect_bad("{\"a\": {\"dtype\": \"F32\", \"shape\": [1, -1], \"data_offsets\": [0, 4]}}", 4,
             "tensor 'a': shape[1] is not a non-negative integer");
  expect_bad("{\"a\": {\"dtype\": \"F32\", \"shape\": [1, \"x\"], \"data_offsets\": [0, 4]}}", 4,
             "tensor 'a': shape[1] is not a non-negative integer");
  expect_bad("{\"a\": {\"dtype\": \"F32\", \"shape\": [1,1,1,1,1,1,1,1,1], \"data_offsets\": [0, 4]}}", 4,
             "tensor 'a': shape has 9 dims (limit 8)");
  expect_bad("{\"a\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296], \"data_offsets\": [0, 4]}}", 4,
             "tensor 'a': shape [4294967296, 4294967296] has too many elements");
  expect_bad("{\"a\": {\"dtype\": \"F32\", \"shape\": [1]}}", 4, "tensor 'a': missing \"data_offsets\"");
  expect_bad("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0]}}", 4,
             "tensor 'a': \"data_offsets\" must be [begin, end], two non-negative integers");
  expect_bad("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [-4, 0]}}", 4,
             "\"data_offsets\" must be [begin, end]");
  expect_bad("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4, 8]}}", 8,
             "\"data_offsets\" must be [begin, end]");
  expect_bad("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": {\"b\": 0}}}", 8,
             "\"data_offsets\" must be [begin, end]");
  expect_bad("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 4]}}", 8,
             "tensor 'a': data_offsets [8, 4] end before they begin");
  expect_bad("{\"a\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 28]}}", 24,
             "tensor 'a': data_offsets [0, 28] run past the end of the data section (24 bytes)");
  expect_bad("{\"name\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 12]}}", 24,
             "tensor 'name': data_offsets [0, 12] hold 12 bytes but shape [2, 3] of F32 needs 24");
  expect_bad("{\"h\": {\"dtype\": \"F16\", \"shape\": [3], \"data_offsets\": [0, 12]}}", 12,
             "tensor 'h': data_offsets [0, 12] hold 12 bytes but shape [3] of F16 needs 6");
}

static void test_overlap_and_duplicates(void **state) {
  (void)state;
  expect_bad("{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]},"
             " \"b\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [8, 24]}}", 24,
             "tensors 'a' (data_offsets [0, 16]) and 'b' (data_offsets [8, 24]) overlap");
  // A small tensor inside a big one, listed before a gap.
  expect_bad("{\"big\": {\"dtype\": \"F32\", \"shape\": [8], \"data_offsets\": [0, 32]},"
             " \"c\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [40, 44]},"
             " \"small\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [28, 32]}}", 44,
             "tensors 'big' (data_offsets [0, 32]) and 'small' (data_offsets [28, 32]) overlap");
  expect_bad("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
             " \"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}", 8,
             "tensor 'a' appears more than once in the header");
}

static void test_write_validation(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  char path[256];
  tu_tmp_path(path, sizeof path, ".safetensors");
  float a[2] = {1, 2};
  const float *data[] = {a, a};
  bc_shape shapes[] = {{.rank = 1, .d = {2}}, {.rank = 1, .d = {2}}};
  const char *dup[] = {"x", "x"};
  assert_int_equal(bcS_write(ctx, path, 2, dup, shapes, data), BC_EINPUT);
  assert_non_null(strstr(errs.buf, ": error: tensor name 'x' is used twice"));
  const char *empty[] = {"x", ""};
  assert_int_equal(bcS_write(ctx, path, 2, empty, shapes, data), BC_EINPUT);
  assert_non_null(strstr(errs.buf, ": error: tensor 1 has an empty name"));
  const char *meta[] = {"__metadata__"};
  assert_int_equal(bcS_write(ctx, path, 1, meta, shapes, data), BC_EINPUT);
  assert_non_null(strstr(errs.buf, "'__metadata__' is reserved"));
  bc_shape bad[] = {{.rank = 1, .d = {-1}}};
  assert_int_equal(bcS_write(ctx, path, 1, dup, bad, data), BC_EINPUT);
  assert_non_null(strstr(errs.buf, "tensor 'x' has an invalid shape"));
  assert_false(tu_exists(path));

  // No tensors at all is a valid (empty) file.
  assert_int_equal(bcS_write(ctx, path, 0, NULL, NULL, NULL), BC_OK);
  bc_st_file *f;
  assert_int_equal(bcS_open(ctx, path, &f), BC_OK);
  assert_int_equal(f->ntensors, 0);
  assert_null(bcS_find(f, "x"));
  bcS_close(f);
  unlink(path);
  bc_ctx_free(ctx);
}

// Counts directory entries whose name starts with prefix (temp files left
// behind by a failed write would show up here).
static int count_prefixed(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
  closedir(d);
  return n;
}

static void test_atomic_write(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  char path[256], missing[300];
  tu_tmp_path(path, sizeof path, ".safetensors");
  snprintf(missing, sizeof missing, "%s.nodir/w.safetensors", path);
  float a[4] = {1, 2, 3, 4};
  const float *data[] = {a};
  const char *names[] = {"a"};
  bc_shape shapes[] = {{.rank = 1, .d = {4}}};
  assert_int_equal(bcS_write(ctx, missing, 1, names, shapes, data), BC_EIO);
  assert_non_null(strstr(errs.buf, "w.safetensors: error: cannot write: No such file or directory"));
  assert_false(tu_exists(missing));

  // A write that fails half way (file size limit) leaves the old file
  // untouched and no temp file next to it.
  assert_int_equal(bcS_write(ctx, path, 1, names, shapes, data), BC_OK);
  enum { N = 1 << 16 };
  float *big = calloc(N, sizeof(float));
  assert_non_null(big);
  const float *bdata[] = {big};
  bc_shape bshape[] = {{.rank = 1, .d = {N}}};
  struct rlimit old;
  assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
  struct rlimit lim = old;
  lim.rlim_cur = 4096;
  void (*oldsig)(int) = signal(SIGXFSZ, SIG_IGN);
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
  errs.len = 0;
  int rc = bcS_write(ctx, path, 1, names, bshape, bdata);
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
  signal(SIGXFSZ, oldsig);
  free(big);
  assert_int_equal(rc, BC_EIO);
  assert_non_null(strstr(errs.buf, ": error: write failed"));

  bc_st_file *f;
  assert_int_equal(bcS_open(ctx, path, &f), BC_OK);
  const bc_st_tensor *t = bcS_find(f, "a");
  assert_non_null(t);
  assert_int_equal(t->shape[0], 4);
  bcS_close(f);
  const char *base = strrchr(path, '/') + 1;
  char dir[256];
  snprintf(dir, sizeof dir, "%.*s", (int)(base - path - 1), path);
  assert_int_equal(count_prefixed(dir, base), 1);  // just the file itself
  unlink(path);
  bc_ctx_free(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_f16_bf16_exhaustive),
      cmocka_unit_test(test_unsupported_dtype_on_read),
      cmocka_unit_test(test_lenient_but_valid),
      cmocka_unit_test(test_tiling),
      cmocka_unit_test(test_huge_tail_not_read),
      cmocka_unit_test(test_bad_sizes),
      cmocka_unit_test(test_bad_json),
      cmocka_unit_test(test_bad_entries),
      cmocka_unit_test(test_overlap_and_duplicates),
      cmocka_unit_test(test_write_validation),
      cmocka_unit_test(test_atomic_write),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
