// test_rt_readers.c — the runtime's file readers (runtime/blockc_rt.c), the
// one parser of safetensors and .npy that blockc and vendored programs
// share: every rule, on the vendored path (bcrt_st_load, bcrt_npy_read*)
// and with the structured error (bcrt_error: status, rule, tensor, byte
// offset), and that the header is read and checked before any data.
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"
#include "blockc_rt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// --- safetensors -----------------------------------------------------------------

typedef struct {
  const char *what;
  const char *json;        // the header
  size_t dlen;             // zero bytes of data after it
  int status, code;        // what bcrt_st_open reports
  const char *msg;         // a substring of bcrt_error.msg
  unsigned long long offset; // bcrt_error.offset (~0: not checked)
} st_case;

#define NOOFF (~0ull)
#define DATA(x) ((1ull << 62) + (x))  // x bytes into the data section
#define T2(name, b, e) "\"" name "\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[" #b "," #e "]}"

static const st_case st_cases[] = {
    {"trailing bytes", "{" T2("a", 0, 8) "}", 12, BCRT_EFORMAT, BCRT_ERR_TRAILING,
     "4 bytes after the last tensor (the data section is 12 bytes, the tensors end at 8)", DATA(8)},
    {"a gap", "{" T2("a", 0, 8) "," T2("b", 12, 20) "}", 20, BCRT_EFORMAT, BCRT_ERR_GAP,
     "bytes [8, 12) of the data section belong to no tensor (before 'b')", DATA(8)},
    {"an overlap", "{" T2("a", 0, 8) "," T2("b", 4, 12) "}", 12, BCRT_EFORMAT, BCRT_ERR_OVERLAP,
     "tensors 'a' (data_offsets [0, 8]) and 'b' (data_offsets [4, 12]) overlap", DATA(4)},
    {"a duplicate name", "{" T2("a", 0, 8) "," T2("a", 8, 16) "}", 16, BCRT_EFORMAT, BCRT_ERR_DUPLICATE,
     "tensor 'a' appears more than once in the header", NOOFF},
    {"NUL in a name", "{" T2("a\\u0000b", 0, 8) "}", 8, BCRT_EFORMAT, BCRT_ERR_JSON,
     "escaped NUL (\\u0000)", 8 + 3},
    {"a raw control byte in a name", "{" T2("a\033[2Jb", 0, 8) "}", 8, BCRT_EFORMAT, BCRT_ERR_JSON,
     "a raw control byte inside a string", 8 + 3},
    {"an escaped newline, echoed escaped", "{" T2("a\\nb", 0, 8) "," T2("c", 0, 8) "}", 8, BCRT_EFORMAT,
     BCRT_ERR_OVERLAP, "tensors 'a\\x0ab' (data_offsets [0, 8]) and 'c'", NOOFF},
    {"a lone low surrogate", "{" T2("a\\udc00", 0, 8) "}", 8, BCRT_EFORMAT, BCRT_ERR_JSON,
     "a lone low surrogate escape", NOOFF},
    {"invalid UTF-8", "{\"a\xff\": 1}", 0, BCRT_EFORMAT, BCRT_ERR_UTF8, "header is not valid UTF-8 (byte 3", 8 + 3},
    {"a JSON syntax error", "{\"a\": {\"dtype\": \"F32\",}}", 0, BCRT_EFORMAT, BCRT_ERR_JSON,
     "header is not valid JSON (at byte 22 of the header: '}}')", 8 + 22},
    {"nesting too deep", "{\"__metadata__\": {\"x\": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
     "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}", 0, BCRT_EFORMAT, BCRT_ERR_JSON,
     "header is not valid JSON", NOOFF},
    {"data after the value", "{} x", 0, BCRT_EFORMAT, BCRT_ERR_JSON, "header has data after the JSON value (at byte 3: 'x')", 11},
    {"not an object", "[1]", 0, BCRT_EFORMAT, BCRT_ERR_SCHEMA, "header is not a JSON object", NOOFF},
    {"a float in a shape", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8, BCRT_EFORMAT,
     BCRT_ERR_SHAPE, "tensor 'a': shape[0] is not a non-negative integer", NOOFF},
    {"a float elsewhere", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1e3}}", 8,
     BCRT_EFORMAT, BCRT_ERR_NUMBER, "a number that is not a plain non-negative integer (at byte 57 of the header: '1e3}}')", 8 + 57},
    {"rank 9", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, BCRT_EFORMAT,
     BCRT_ERR_SHAPE, "tensor 'a': shape has 9 dims (limit 8)", NOOFF},
    {"too many elements", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4,
     BCRT_EFORMAT, BCRT_ERR_SHAPE, "shape [4294967296, 4294967296] has too many elements", NOOFF},
    {"an unknown dtype", "{\"a\":{\"dtype\":\"F99\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, BCRT_EFORMAT,
     BCRT_ERR_DTYPE, "tensor 'a': unknown dtype 'F99'", NOOFF},
    {"a missing key", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, BCRT_EFORMAT, BCRT_ERR_SCHEMA,
     "tensor 'a': missing \"data_offsets\"", NOOFF},
    {"a repeated key", "{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
     BCRT_EFORMAT, BCRT_ERR_SCHEMA, "tensor 'a': \"dtype\" appears 2 times", NOOFF},
    {"offsets not the shape's bytes", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,12]}}", 12,
     BCRT_EFORMAT, BCRT_ERR_OFFSETS, "data_offsets [0, 12] hold 12 bytes but shape [2, 3] of F32 needs 24", NOOFF},
    {"offsets past the end", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, BCRT_EFORMAT,
     BCRT_ERR_OFFSETS, "data_offsets [0, 8] run past the end of the data section (4 bytes)", NOOFF},
    {"offsets backwards", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8, BCRT_EFORMAT,
     BCRT_ERR_OFFSETS, "data_offsets [8, 4] end before they begin", NOOFF},
    {"three offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8, BCRT_EFORMAT,
     BCRT_ERR_OFFSETS, "\"data_offsets\" must be [begin, end]", NOOFF},
    {"metadata not strings", "{\"__metadata__\":{\"n\":1}}", 0, BCRT_EFORMAT, BCRT_ERR_SCHEMA,
     "\"__metadata__\" entry 'n' is not a string", NOOFF},
    {"an entry that is not an object", "{\"a\":5}", 0, BCRT_EFORMAT, BCRT_ERR_SCHEMA,
     "tensor 'a': entry is not a JSON object", NOOFF},
};

// A file of the 8-byte length, the header and dlen zero bytes.
static void write_st(const char *path, const char *json, size_t dlen) {
  unsigned char *zeros = calloc(1, dlen + 1);
  assert_non_null(zeros);
  tu_write_safetensors_raw(path, json, zeros, dlen);
  free(zeros);
}

// Each rule: bcrt_st_open says which (code, tensor, offset, message), and
// a vendored program's bcrt_st_load refuses the file with the same reason.
static void test_st_rules(void **state) {
  (void)state;
  char path[256];
  tu_tmp_path(path, sizeof path, ".safetensors");
  for (size_t i = 0; i < sizeof st_cases / sizeof st_cases[0]; i++) {
    const st_case *c = &st_cases[i];
    write_st(path, c->json, c->dlen);
    bcrt_error e;
    bcrt_st_file *f = (bcrt_st_file *)1;
    int st = bcrt_st_open(path, &f, &e);
    unsigned long long off = c->offset >= DATA(0) && c->offset != NOOFF
                                 ? c->offset - DATA(0) + 8 + strlen(c->json) : c->offset;
    if (st != c->status || e.status != c->status || e.code != c->code || f != NULL ||
        !strstr(e.msg, c->msg) || (off != NOOFF && e.offset != off))
      fail_msg("%s: got status %d code %d offset %llu '%s'", c->what, st, e.code, e.offset, e.msg);
    const bcrt_param_info pa[1] = {{"a", 1, {2, 0, 0, 0}}};
    const float *slots[1] = {(const float *)1};
    void *storage = (void *)1;
    char err[2048];
    st = bcrt_st_load(path, pa, 1, slots, &storage, err, sizeof err);
    char want[1400];
    snprintf(want, sizeof want, "%s: %s", path, e.msg);
    if (st != c->status || storage != NULL || slots[0] != NULL || strcmp(err, want))
      fail_msg("%s: bcrt_st_load gave %d '%s'", c->what, st, err);
  }
  unlink(path);
}

// The file-level limits: too short, a header length over 100 MiB or past
// the end of the file.
static void test_st_sizes(void **state) {
  (void)state;
  char path[256];
  tu_tmp_path(path, sizeof path, ".safetensors");
  static const struct { const char *bytes; size_t n; int code; const char *msg; } cases[] = {
      {"abcd", 4, BCRT_ERR_SIZE, "file is 4 bytes, too short for a safetensors header (at least 8)"},
      {"\x00\x00\x00\x40\x00\x00\x00\x00{}", 10, BCRT_ERR_HEADER,
       "header length 1073741824 is over the limit of 104857600 bytes"},
      {"\x64\x00\x00\x00\x00\x00\x00\x00{}  ", 12, BCRT_ERR_HEADER,
       "header length 100 runs past the end of the file (4 bytes follow the length field)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tu_write_bytes(path, cases[i].bytes, cases[i].n);
    bcrt_error e;
    bcrt_st_file *f;
    assert_int_equal(bcrt_st_open(path, &f, &e), BCRT_EFORMAT);
    assert_int_equal(e.code, cases[i].code);
    if (!strstr(e.msg, cases[i].msg)) fail_msg("case %zu: '%s'", i, e.msg);
    char err[512];
    void *storage;
    assert_int_equal(bcrt_st_load(path, NULL, 0, NULL, &storage, err, sizeof err), BCRT_EFORMAT);
    assert_non_null(strstr(err, cases[i].msg));
  }
  unlink(path);
  bcrt_error e;
  bcrt_st_file *f;
  assert_int_equal(bcrt_st_open(path, &f, &e), BCRT_EIO);
  assert_int_equal(e.code, BCRT_ERR_IO);
  assert_non_null(strstr(e.msg, "cannot open: No such file or directory"));
}

// A memory source that counts the bytes read (and where the reads went).
typedef struct {
  const unsigned char *p;
  unsigned long long read, max_end;
} mem_src;

static int mem_read(void *h, unsigned long long off, void *buf, unsigned long n) {
  mem_src *m = h;
  memcpy(buf, m->p + off, n);
  m->read += n;
  if (off + n > m->max_end) m->max_end = off + n;
  return 0;
}

// The header is read and checked before any data: opening a file reads
// exactly 8 + the header's bytes, even when a tensor is missing or
// misshaped; only reading a tensor touches its bytes.
static void test_st_header_before_data(void **state) {
  (void)state;
  const char *json = "{" T2("a", 0, 8) "," T2("b", 8, 16) "}";
  size_t hn = strlen(json), n = 8 + hn + 16;
  unsigned char *bytes = calloc(1, n);
  assert_non_null(bytes);
  for (int i = 0; i < 8; i++) bytes[i] = (unsigned char)((unsigned long long)hn >> (8 * i));
  memcpy(bytes + 8, json, hn);
  const float v[4] = {1, 2, 3, 4};
  memcpy(bytes + 8 + hn, v, sizeof v);
  mem_src m = {bytes, 0, 0};
  bcrt_source src = {&m, n, mem_read};
  bcrt_st_file *f;
  bcrt_error e;
  assert_int_equal(bcrt_st_open_source(&src, &f, &e), BCRT_OK);
  assert_int_equal(m.max_end, 8 + hn);
  assert_int_equal(bcrt_st_count(f), 2);
  const bcrt_st_tensor *b = bcrt_st_find(f, "b");
  assert_non_null(b);
  assert_ptr_equal(b, bcrt_st_tensor_at(f, 1));  // sorted by name
  assert_null(bcrt_st_find(f, "c"));
  assert_int_equal(bcrt_st_data_offset(f), 8 + hn);
  float got[2];
  assert_int_equal(bcrt_st_read_f32(f, b, got, &e), BCRT_OK);
  assert_true(got[0] == 3 && got[1] == 4);
  assert_int_equal(m.max_end, n);
  assert_int_equal(m.read, 8 + hn + 8);  // b's 8 bytes and nothing of a
  bcrt_st_close(f);
  free(bytes);
}

// Only a tensor's own dtype can make it unreadable as float: an I64 opens,
// and is refused when read, with the tensor named.
static void test_st_read_dtypes(void **state) {
  (void)state;
  char path[256];
  tu_tmp_path(path, sizeof path, ".safetensors");
  write_st(path, "{\"s\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8);
  bcrt_st_file *f;
  bcrt_error e;
  assert_int_equal(bcrt_st_open(path, &f, &e), BCRT_OK);
  float x[2];
  assert_int_equal(bcrt_st_read_f32(f, bcrt_st_find(f, "s"), x, &e), BCRT_EFORMAT);
  assert_int_equal(e.code, BCRT_ERR_DTYPE);
  assert_string_equal(e.tensor, "s");
  assert_string_equal(e.msg, "tensor 's': dtype I64 is not supported (expected F32, F16 or BF16)");
  bcrt_st_close(f);
  unlink(path);
}

// The vendored loader's binding: a missing tensor, a shape mismatch, a
// dtype it cannot use, a non-finite value and tensors the model does not
// use (the first 8 named) are all refused, nothing allocated.
static void test_st_load_binding(void **state) {
  (void)state;
  char path[256], err[4096];
  tu_tmp_path(path, sizeof path, ".safetensors");
  const float *slots[2];
  void *storage;
  const bcrt_param_info ab[2] = {{"a", 1, {2, 0, 0, 0}}, {"b", 2, {1, 2, 0, 0}}};
  write_st(path, "{" T2("a", 0, 8) "," T2("b", 8, 16) "}", 16);  // b is [2], not [1, 2]
  assert_int_equal(bcrt_st_load(path, ab, 2, slots, &storage, err, sizeof err), BCRT_EMISMATCH);
  assert_non_null(strstr(err, "tensor 'b' has shape (2,), expected (1, 2)"));
  assert_non_null(strstr(err, "1 of 2 tensors unusable (above)"));
  assert_null(storage);
  assert_null(slots[0]);
  write_st(path, "{" T2("a", 0, 8) "}", 8);
  assert_int_equal(bcrt_st_load(path, ab, 2, slots, &storage, err, sizeof err), BCRT_EMISMATCH);
  assert_non_null(strstr(err, "missing tensor 'b' (expected shape (1, 2))"));
  // 10 tensors the model does not use: 8 named, then the count.
  char json[2048] = "{";
  for (int i = 0; i < 11; i++) {
    char one[128];
    snprintf(one, sizeof one, "%s\"%c\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[%d,%d]}",
             i ? "," : "", 'a' + i, 8 * i, 8 * i + 8);
    strcat(json, one);
  }
  strcat(json, "}");
  write_st(path, json, 88);
  assert_int_equal(bcrt_st_load(path, ab, 1, slots, &storage, err, sizeof err), BCRT_EMISMATCH);
  assert_non_null(strstr(err, "unexpected tensor 'b' (2,) (not one of the model's 1 parameters)"));
  assert_non_null(strstr(err, "unexpected tensor 'i' (2,)"));
  assert_null(strstr(err, "unexpected tensor 'j'"));
  assert_non_null(strstr(err, "... 10 unexpected tensors in all (the first 8 are listed)"));
  assert_non_null(strstr(err, "0 of 1 tensors unusable, 10 tensors in the file not used by the model"));
  // A NaN (F32 0x7fc00000) in a tensor: refused, index given.
  unsigned char data[8] = {0, 0, 0x80, 0x3f, 0, 0, 0xc0, 0x7f};
  tu_write_safetensors_raw(path, "{" T2("a", 0, 8) "}", data, 8);
  assert_int_equal(bcrt_st_load(path, ab, 1, slots, &storage, err, sizeof err), BCRT_EFORMAT);
  assert_non_null(strstr(err, "tensor 'a' has a non-finite value at flat index 1"));
  assert_null(storage);
  // And the good case, to show the failures above are the rules'.
  data[6] = 0, data[7] = 0x40;
  tu_write_safetensors_raw(path, "{" T2("a", 0, 8) "}", data, 8);
  assert_int_equal(bcrt_st_load(path, ab, 1, slots, &storage, err, sizeof err), BCRT_OK);
  assert_true(slots[0][0] == 1.0f && slots[0][1] == 2.0f);
  bcrt_st_free(storage);
  unlink(path);
}

// bcrt_st_load_ex: the prefix both ways (P + name, and name minus P), the
// names tried when it finds nothing, extra tensors refused (naming the flag)
// and allowed with BCRT_ST_ALLOW_EXTRA, a tied copy (same bytes) accepted
// without it and other values refused; unknown flags are misuse.
static void test_st_load_ex(void **state) {
  (void)state;
  char path[256], err[4096];
  tu_tmp_path(path, sizeof path, ".safetensors");
  const float *slots[2];
  void *storage;
  // a = (1, 2), b = (3, 4): F32 little-endian.
  unsigned char d[24] = {0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 0, 0, 0x40, 0x40, 0, 0, 0x80, 0x40};
  const bcrt_param_info full[1] = {{"transformer.h.a", 1, {2, 0, 0, 0}}};
  const bcrt_param_info bare[1] = {{"h.a", 1, {2, 0, 0, 0}}};
  // A bare file ("h.a") for a graph of full names: the prefix is stripped.
  tu_write_safetensors_raw(path, "{" T2("h.a", 0, 8) "}", d, 8);
  assert_int_equal(bcrt_st_load(path, full, 1, slots, &storage, err, sizeof err), BCRT_EMISMATCH);
  assert_int_equal(bcrt_st_load_ex(path, full, 1, slots, &storage, "transformer.", 0, err, sizeof err),
                   BCRT_OK);
  assert_true(slots[0][0] == 1.0f && slots[0][1] == 2.0f);
  bcrt_st_free(storage);
  // A full file ("transformer.h.a") for bare names: the prefix is added.
  tu_write_safetensors_raw(path, "{" T2("transformer.h.a", 0, 8) "}", d, 8);
  assert_int_equal(bcrt_st_load_ex(path, bare, 1, slots, &storage, "transformer.", 0, err, sizeof err),
                   BCRT_OK);
  assert_true(slots[0][1] == 2.0f);
  bcrt_st_free(storage);
  // A prefix that matches nothing: both names tried are given.
  assert_int_equal(bcrt_st_load_ex(path, full, 1, slots, &storage, "model.", 0, err, sizeof err),
                   BCRT_EMISMATCH);
  assert_non_null(strstr(err, "missing tensor 'transformer.h.a' (expected shape (2,); tried "
                              "'model.transformer.h.a', prefix 'model.')"));
  assert_null(storage);
  assert_null(slots[0]);
  assert_int_equal(bcrt_st_load_ex(path, full, 1, slots, &storage, "transformer.h.", 0, err, sizeof err),
                   BCRT_EMISMATCH);
  assert_non_null(strstr(err, "tried 'transformer.h.transformer.h.a' and 'a', prefix 'transformer.h.'"));
  // An extra tensor: refused, naming the flag; allowed with it.
  tu_write_safetensors_raw(path, "{" T2("h.a", 0, 8) "," T2("h.b", 8, 16) "}", d, 16);
  assert_int_equal(bcrt_st_load_ex(path, bare, 1, slots, &storage, NULL, 0, err, sizeof err),
                   BCRT_EMISMATCH);
  assert_non_null(strstr(err, "unexpected tensor 'h.b' (2,) (not one of the model's 1 parameters; the "
                              "shape of 'h.a' but is no tied copy of it)"));
  assert_non_null(strstr(err, "BCRT_ST_ALLOW_EXTRA in bcrt_st_load_ex's flags ignores them"));
  assert_int_equal(bcrt_st_load_ex(path, bare, 1, slots, &storage, NULL, BCRT_ST_ALLOW_EXTRA, err,
                                   sizeof err), BCRT_OK);
  assert_true(slots[0][0] == 1.0f);
  bcrt_st_free(storage);
  // lm_head saved beside the tensor the tied head reads: the same bytes load.
  memcpy(d + 16, d, 8);
  tu_write_safetensors_raw(path, "{" T2("h.a", 0, 8) "," T2("lm_head.weight", 16, 24) "," T2("h.b", 8, 16)
                           "}", d, 24);
  const bcrt_param_info ab[2] = {{"h.a", 1, {2, 0, 0, 0}}, {"h.b", 1, {2, 0, 0, 0}}};
  assert_int_equal(bcrt_st_load_ex(path, ab, 2, slots, &storage, NULL, 0, err, sizeof err), BCRT_OK);
  assert_true(slots[0][1] == 2.0f && slots[1][0] == 3.0f);
  bcrt_st_free(storage);
  assert_int_equal(bcrt_st_load(path, ab, 2, slots, &storage, err, sizeof err), BCRT_OK);
  bcrt_st_free(storage);
  // Unknown flag bits: misuse.
  assert_int_equal(bcrt_st_load_ex(path, ab, 2, slots, &storage, NULL, 2u, err, sizeof err), BCRT_EINVAL);
  assert_null(storage);
  unlink(path);
}

// --- .npy ---------------------------------------------------------------------------

// Version 1.0, the dict as given (padded to 64 bytes), then nbytes of data.
static void write_npy(const char *path, const char *dict, const void *data, size_t nbytes) {
  char h[512];
  int n = snprintf(h, sizeof h, "%s", dict);
  while ((10 + n + 1) % 64) h[n++] = ' ';
  h[n++] = '\n';
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)n, (unsigned char)(n >> 8)};
  assert_int_equal(fwrite(pre, 1, 10, f), 10);
  assert_int_equal(fwrite(h, 1, (size_t)n, f), (size_t)n);
  if (nbytes) assert_int_equal(fwrite(data, 1, nbytes, f), nbytes);
  fclose(f);
}

static int file_read(void *h, unsigned long long off, void *buf, unsigned long n) {
  return fseek(h, (long)off, SEEK_SET) == 0 && fread(buf, 1, n, h) == n ? 0 : -1;
}

// The rule bcrt_npy_open_source / read_source report for path (floats).
static int npy_code(const char *path) {
  FILE *fp = fopen(path, "rb");
  assert_non_null(fp);
  assert_int_equal(fseek(fp, 0, SEEK_END), 0);
  bcrt_source src = {fp, (unsigned long long)ftell(fp), file_read};
  bcrt_npy_info info;
  bcrt_error e;
  void *data = NULL;
  int st = bcrt_npy_open_source(&src, BCRT_NPY_F32, NULL, &info, &e);
  if (!st) st = bcrt_npy_read_source(&src, &info, &data, &e);
  bcrt_free(data);
  fclose(fp);
  return st ? e.code : BCRT_ERR_NONE;
}

#define NPY(descr, fo, shape) "{'descr': '" descr "', 'fortran_order': " fo ", 'shape': " shape ", }"

static void test_npy_rules(void **state) {
  (void)state;
  char path[256], err[1024];
  tu_tmp_path(path, sizeof path, ".npy");
  static const float zero[16];
  static const struct { const char *dict; size_t nbytes; int code; const char *msg; } cases[] = {
      {NPY("<f8", "False", "(2,)"), 16, BCRT_ERR_NPY_DTYPE, "dtype '<f8' (float64) is not supported; expected '<f4'"},
      {NPY("<f4", "True", "(2,)"), 8, BCRT_ERR_NPY_ORDER, "fortran_order is True"},
      {NPY("<f4", "False", "()"), 4, BCRT_ERR_NPY_SHAPE, "shape () is a scalar; expected an array of rank 1 to 8"},
      {NPY("<f4", "False", "(1, 1, 1, 1, 1, 1, 1, 1, 2)"), 8, BCRT_ERR_NPY_SHAPE, "rank 9 is over the limit of 8"},
      {NPY("<f4", "False", "(4294967296,)"), 0, BCRT_ERR_NPY_SHAPE, "dimension 0 is over the limit of 2147483647"},
      {NPY("<f4", "False", "(2147483647, 2147483647)"), 0, BCRT_ERR_NPY_SHAPE, "has more than 1099511627776 elements"},
      // 2^30 * 16 * 2^30 = 2^64 elements: a product that wraps to 0 (and 0 bytes of data).
      {NPY("<f4", "False", "(1073741824, 16, 1073741824)"), 0, BCRT_ERR_NPY_SHAPE, "has more than 1099511627776 elements"},
      {NPY("<f4", "False", "(3,)"), 8, BCRT_ERR_NPY_DATA, "shape (3,) needs 12 bytes of data but the file has 8"},
      {NPY("<f4", "False", "(1,)"), 8, BCRT_ERR_NPY_DATA, "(4 extra bytes at the end)"},
      {"{'descr': '<f4', 'shape': (2,)}", 8, BCRT_ERR_NPY_HEADER, "the key 'fortran_order' is missing"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 8, BCRT_ERR_NPY_HEADER, "unexpected key 'x'"},
      {"{'descr': '\x1b[2J', 'fortran_order': False, 'shape': (2,)}", 8, BCRT_ERR_NPY_DTYPE, "dtype '\\x1b[2J'"},
      {"{'descr': '<f4', 'fo\x93': False, 'shape': (2,)}", 8, BCRT_ERR_NPY_HEADER, "unexpected key 'fo\\x93'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    write_npy(path, cases[i].dict, zero, cases[i].nbytes);
    float *x = (float *)1;
    long shape[BCRT_NPY_MAX_RANK];
    int rank;
    int st = bcrt_npy_read(path, &x, shape, &rank, err, sizeof err);
    if (st != BCRT_EFORMAT || x != NULL || !strstr(err, cases[i].msg) || strncmp(err, path, strlen(path)) ||
        npy_code(path) != cases[i].code)
      fail_msg("case %zu: %d (rule %d) '%s'", i, st, npy_code(path), err);
  }
  // The file prefix: magic, version, header length.
  static const struct { const char *bytes; size_t n; int code; const char *msg; } pre[] = {
      {"PK\x03\x04 zip", 9, BCRT_ERR_NPY_MAGIC, "not a .npy file"},
      {"\x93NUMPY\x04\x00\x10\x00", 10, BCRT_ERR_NPY_VERSION, ".npy format version 4.0 is not supported"},
      {"\x93NUMPY\x02\x00\x00\x00\x20\x00", 12, BCRT_ERR_NPY_HEADER, ".npy header length 2097152 is over the limit"},
      {"\x93NUMPY\x01\x00\x40\x00{}", 12, BCRT_ERR_NPY_HEADER, "it claims 64 bytes but only 2 follow"},
  };
  for (size_t i = 0; i < sizeof pre / sizeof pre[0]; i++) {
    tu_write_bytes(path, pre[i].bytes, pre[i].n);
    float *x;
    long shape[BCRT_NPY_MAX_RANK];
    int rank;
    assert_int_equal(bcrt_npy_read(path, &x, shape, &rank, err, sizeof err), BCRT_EFORMAT);
    if (!strstr(err, pre[i].msg) || npy_code(path) != pre[i].code) fail_msg("prefix case %zu: '%s'", i, err);
  }
  unlink(path);
}

// The two-step reader: the shape is known (and limits applied) before any
// data is read, so a caller compares it first; only read_source reads data.
static void test_npy_header_before_data(void **state) {
  (void)state;
  char path[256];
  tu_tmp_path(path, sizeof path, ".npy");
  const float v[6] = {1, 2, 3, 4, 5, 6};
  write_npy(path, NPY("<f4", "False", "(2, 3)"), v, sizeof v);
  FILE *fp = fopen(path, "rb");
  assert_non_null(fp);
  unsigned char bytes[128 + 24];  // the dict pads to 128 bytes
  assert_int_equal(fread(bytes, 1, sizeof bytes, fp), sizeof bytes);
  fclose(fp);
  mem_src m = {bytes, 0, 0};
  bcrt_source src = {&m, sizeof bytes, mem_read};
  bcrt_npy_info info;
  bcrt_error e;
  if (bcrt_npy_open_source(&src, BCRT_NPY_F32, NULL, &info, &e)) fail_msg("%s", e.msg);
  assert_int_equal(m.max_end, 128);  // the prefix and the header only
  assert_int_equal(info.rank, 2);
  assert_true(info.shape[0] == 2 && info.shape[1] == 3);
  assert_int_equal(info.data_offset, 128);
  // blockc's limits (rank <= 1 here) are the caller's to choose.
  const bcrt_npy_limits one = {1, 100, 100};
  assert_int_equal(bcrt_npy_open_source(&src, BCRT_NPY_F32, &one, &info, &e), BCRT_EFORMAT);
  assert_int_equal(e.code, BCRT_ERR_NPY_SHAPE);
  assert_string_equal(e.msg, "shape (2, 3): rank 2 is over the limit of 1");
  // ints are refused where floats are wanted, and the other way round
  assert_int_equal(bcrt_npy_open_source(&src, BCRT_NPY_INT, NULL, &info, &e), BCRT_EFORMAT);
  assert_int_equal(e.code, BCRT_ERR_NPY_DTYPE);
  assert_int_equal(bcrt_npy_open_source(&src, BCRT_NPY_F32, NULL, &info, &e), BCRT_OK);
  void *data;
  assert_int_equal(bcrt_npy_read_source(&src, &info, &data, &e), BCRT_OK);
  assert_memory_equal(data, v, sizeof v);
  bcrt_free(data);
  // A lengths array out of int32 range: the element and its byte offset.
  const long long big[2] = {1, 1LL << 33};
  write_npy(path, NPY("<i8", "False", "(2,)"), big, sizeof big);
  int *li;
  long n;
  char err[512];
  assert_int_equal(bcrt_npy_read_i32(path, &li, &n, err, sizeof err), BCRT_EFORMAT);
  assert_non_null(strstr(err, "element 1 is 8589934592, outside the int32 range"));
  write_npy(path, NPY("<i4", "False", "(1, 2)"), big, 8);
  assert_int_equal(bcrt_npy_read_i32(path, &li, &n, err, sizeof err), BCRT_EFORMAT);
  assert_non_null(strstr(err, "lengths must be a rank-1 array"));
  unlink(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_st_rules),
      cmocka_unit_test(test_st_sizes),
      cmocka_unit_test(test_st_header_before_data),
      cmocka_unit_test(test_st_read_dtypes),
      cmocka_unit_test(test_st_load_binding),
      cmocka_unit_test(test_st_load_ex),
      cmocka_unit_test(test_npy_rules),
      cmocka_unit_test(test_npy_header_before_data),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
