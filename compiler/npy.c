// npy.c — reading and writing NumPy .npy arrays (inputs and outputs).
//
// The format: the magic "\x93NUMPY", a major and minor version byte, the
// header length (u16 for version 1.0, u32 for 2.0 and 3.0), then a header
// that is a Python dict literal such as
//
//   {'descr': '<f4', 'fortran_order': False, 'shape': (1, 128, 512), }
//
// padded with spaces and ending in '\n', then the raw array bytes.
//
// blockc only computes in float32, so only little-endian float32 in C order
// of rank 1..BC_MAX_RANK is accepted (and, for lengths inputs, '<i4' or
// '<i8' narrowed to int32 with a range check: bcN_read_i32).  A caller that
// knows the shape it wants (bcN_read_expect) has it compared with the
// header before any data is read or allocated.  Arrays arrive from Python scripts,
// where the dtype is easy to get wrong (float64 is numpy's default), so every
// rejection says what the file holds and how to fix it on the numpy side.
// The header is parsed by a small recursive-descent reader for just the
// literals numpy writes (strings, True/False, tuples of integers) rather than
// by pattern matching, so key order, spacing and trailing commas don't matter.
#define _POSIX_C_SOURCE 200809L
#include "bc.h"

#include <stdlib.h>
#include <string.h>

#define NPY_MAX_HEADER (1u << 20)  // numpy itself refuses headers over 10000 bytes by default
#define NPY_MAX_DIMS 64            // parsed before the BC_MAX_RANK check, for the message

static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

static bool host_is_le(void) {
  const uint16_t one = 1;
  return *(const unsigned char *)&one == 1;
}

static void swap32(float *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &p[i], 4);
    u = (u >> 24) | ((u >> 8) & 0xFF00u) | ((u << 8) & 0xFF0000u) | (u << 24);
    memcpy(&p[i], &u, 4);
  }
}

// ---------------------------------------------------------------------------
// Header dict parser
// ---------------------------------------------------------------------------
typedef struct {
  char descr[32];
  bool fortran;
  int rank;                     // may exceed BC_MAX_RANK; checked by the caller
  int64_t d[NPY_MAX_DIMS];
  bool has_descr, has_fortran, has_shape;
} npy_header;

typedef struct {
  bc_ctx *ctx;
  const char *path;
  const char *start, *p, *end;
} hparser;

// Error at the parser's position, quoting the start of the header.
static int hp_error(hparser *h, const char *what) {
  char quoted[81];
  size_t k = 0;
  for (const char *q = h->start; q < h->end && k + 1 < sizeof quoted; q++)
    quoted[k++] = (*q >= 32 && *q < 127) ? *q : ' ';
  quoted[k] = '\0';
  return bc_error(h->ctx, BC_EINPUT, "%s: error: bad .npy header at column %d: %s\n  header: %s",
                  h->path, (int)(h->p - h->start) + 1, what, quoted);
}

static void hp_ws(hparser *h) {
  while (h->p < h->end && (*h->p == ' ' || *h->p == '\t' || *h->p == '\n' || *h->p == '\r')) h->p++;
}

static bool hp_eat(hparser *h, char c) {
  hp_ws(h);
  if (h->p < h->end && *h->p == c) {
    h->p++;
    return true;
  }
  return false;
}

// A Python string literal in ' or " quotes, without escapes (numpy never
// writes any in the keys or descr we accept).
static int hp_string(hparser *h, char *out, size_t n) {
  hp_ws(h);
  if (h->p >= h->end || (*h->p != '\'' && *h->p != '"')) return hp_error(h, "expected a string");
  char q = *h->p++;
  size_t k = 0;
  while (h->p < h->end && *h->p != q) {
    if (*h->p == '\\' || *h->p == '\n') return hp_error(h, "unsupported character in string");
    if (k + 1 >= n) return hp_error(h, "string is too long");
    out[k++] = *h->p++;
  }
  if (h->p >= h->end) return hp_error(h, "unterminated string");
  h->p++;
  out[k] = '\0';
  return BC_OK;
}

static bool hp_word(hparser *h, const char *w) {
  size_t n = strlen(w);
  hp_ws(h);
  if ((size_t)(h->end - h->p) >= n && memcmp(h->p, w, n) == 0) {
    h->p += n;
    return true;
  }
  return false;
}

static int hp_bool(hparser *h, bool *out) {
  if (hp_word(h, "True")) *out = true;
  else if (hp_word(h, "False")) *out = false;
  else return hp_error(h, "expected True or False");
  return BC_OK;
}

// A non-negative integer; Python 2 era files may write "3L". Values are
// clamped just above BC_MAX_DIM so the caller's limit check reports them.
static int hp_int(hparser *h, int64_t *out) {
  hp_ws(h);
  if (h->p >= h->end || *h->p < '0' || *h->p > '9') return hp_error(h, "expected a non-negative integer");
  int64_t v = 0;
  while (h->p < h->end && *h->p >= '0' && *h->p <= '9') {
    v = v * 10 + (*h->p++ - '0');
    if (v > BC_MAX_DIM) v = BC_MAX_DIM + 1;
  }
  if (h->p < h->end && *h->p == 'L') h->p++;
  *out = v;
  return BC_OK;
}

// (), (5,), (2, 3) and (2, 3,): a tuple of integers.
static int hp_shape(hparser *h, npy_header *hd) {
  if (!hp_eat(h, '(')) return hp_error(h, "expected '(' to start the shape tuple");
  hd->rank = 0;
  while (!hp_eat(h, ')')) {
    if (hd->rank >= NPY_MAX_DIMS) return hp_error(h, "shape has too many dimensions");
    int rc = hp_int(h, &hd->d[hd->rank++]);
    if (rc) return rc;
    if (!hp_eat(h, ',')) {
      if (!hp_eat(h, ')')) return hp_error(h, "expected ',' or ')' in the shape tuple");
      break;
    }
  }
  return BC_OK;
}

static int hp_entry(hparser *h, npy_header *hd) {
  char key[32];
  int rc = hp_string(h, key, sizeof key);
  if (rc) return rc;
  if (!hp_eat(h, ':')) return hp_error(h, "expected ':' after the key");
  bool *seen = strcmp(key, "descr") == 0           ? &hd->has_descr
               : strcmp(key, "fortran_order") == 0 ? &hd->has_fortran
               : strcmp(key, "shape") == 0         ? &hd->has_shape
                                                   : NULL;
  if (!seen) {
    char msg[96];
    snprintf(msg, sizeof msg, "unexpected key '%s' (expected 'descr', 'fortran_order', 'shape')", key);
    return hp_error(h, msg);
  }
  if (*seen) return hp_error(h, "key appears twice");
  *seen = true;
  if (seen == &hd->has_fortran) return hp_bool(h, &hd->fortran);
  if (seen == &hd->has_shape) return hp_shape(h, hd);
  hp_ws(h);
  if (h->p < h->end && *h->p == '[')
    return bc_error(h->ctx, BC_EINPUT,
                    "%s: error: the array has a structured dtype (a record type); expected plain '<f4' (float32)",
                    h->path);
  return hp_string(h, hd->descr, sizeof hd->descr);
}

static int parse_header(bc_ctx *ctx, const char *path, const char *text, size_t n, npy_header *hd) {
  hparser h = {ctx, path, text, text, text + n};
  memset(hd, 0, sizeof *hd);
  if (!hp_eat(&h, '{')) return hp_error(&h, "expected '{'");
  while (!hp_eat(&h, '}')) {
    int rc = hp_entry(&h, hd);
    if (rc) return rc;
    if (!hp_eat(&h, ',')) {
      if (!hp_eat(&h, '}')) return hp_error(&h, "expected ',' or '}'");
      break;
    }
  }
  hp_ws(&h);
  if (h.p < h.end) return hp_error(&h, "unexpected text after the dict");
  const char *missing = !hd->has_descr ? "descr" : !hd->has_fortran ? "fortran_order"
                      : !hd->has_shape ? "shape" : NULL;
  if (missing) {
    char msg[64];
    snprintf(msg, sizeof msg, "the key '%s' is missing", missing);
    return hp_error(&h, msg);
  }
  return BC_OK;
}

// ---------------------------------------------------------------------------
// Header checks
// ---------------------------------------------------------------------------

// "big-endian float32", "float64", "int64", ... for a numpy descr string.
static const char *describe_descr(const char *descr, char *buf, size_t n) {
  const char *order = "";
  const char *p = descr;
  if (*p == '>') order = "big-endian ";
  else if (*p == '=') order = "native-order ";
  else if (*p == '|') order = "";
  if (*p == '<' || *p == '>' || *p == '=' || *p == '|') p++;
  char kind = *p ? *p++ : '?';
  // The item size as numpy writes it (1..16 for the kinds named below);
  // anything longer or larger is "unknown" (atoi would overflow on
  // '<f472949496', and bytes * 8 below with it: found by fuzz_npy).
  int bytes = 0;
  for (int k = 0; p[k] >= '0' && p[k] <= '9'; k++) {
    bytes = bytes * 10 + (p[k] - '0');
    if (bytes > 1024) {
      bytes = 0;
      break;
    }
  }
  const char *name = kind == 'f' ? "float" : kind == 'i' ? "int" : kind == 'u' ? "uint"
                   : kind == 'c' ? "complex" : NULL;
  if (name && bytes > 0) snprintf(buf, n, "%s%s%d", order, name, bytes * 8);
  else if (kind == 'b') snprintf(buf, n, "bool");
  else if (kind == 'U') snprintf(buf, n, "unicode string");
  else if (kind == 'S' || kind == 'a') snprintf(buf, n, "bytes");
  else if (kind == 'O') snprintf(buf, n, "Python objects");
  else if (kind == 'M' || kind == 'm') snprintf(buf, n, "datetime/timedelta");
  else if (kind == 'V') snprintf(buf, n, "raw void records");
  else snprintf(buf, n, "unknown dtype");
  return buf;
}

// "(2, 3)", "(5,)", "()": the shape as Python prints it.
static const char *tuple_str(const int64_t *d, int rank, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "(");
  for (int i = 0; i < rank && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, i ? ", %lld" : "%lld", (long long)d[i]);
  if (k < n) snprintf(buf + k, n - k, rank == 1 ? ",)" : ")");
  return buf;
}

// The element types a reader accepts: float32, or integer lengths (int32
// and int64, range-checked into int32 by the caller).
typedef enum { NPY_F32, NPY_I32 } npy_want;

static bool descr_ok(const char *descr, npy_want want) {
  if (want == NPY_F32) return strcmp(descr, "<f4") == 0;
  return strcmp(descr, "<i4") == 0 || strcmp(descr, "<i8") == 0;
}

static int check_header(bc_ctx *ctx, const char *path, const npy_header *hd, npy_want want) {
  if (want == NPY_I32 && !descr_ok(hd->descr, want)) {
    char what[64];
    describe_descr(hd->descr, what, sizeof what);
    return bc_error(ctx, BC_EINPUT,
                    "%s: error: dtype '%s' (%s) is not supported for lengths; expected '<i4' or "
                    "'<i8' (little-endian int32 or int64); convert with x.astype(np.int32)",
                    path, hd->descr, what);
  }
  if (want == NPY_F32 && strcmp(hd->descr, "<f4") != 0) {
    char what[64];
    describe_descr(hd->descr, what, sizeof what);
    bool f4 = strcmp(hd->descr + (hd->descr[0] ? 1 : 0), "f4") == 0;
    return bc_error(ctx, BC_EINPUT,
                    "%s: error: dtype '%s' (%s) is not supported; expected '<f4' (little-endian "
                    "float32); convert with x.astype(%s)",
                    path, hd->descr, what, f4 ? "'<f4'" : "np.float32");
  }
  if (hd->fortran)
    return bc_error(ctx, BC_EINPUT,
                    "%s: error: fortran_order is True; save a C-ordered array (np.ascontiguousarray)", path);
  char s[256];
  if (hd->rank == 0)
    return bc_error(ctx, BC_EINPUT, "%s: error: shape () is a scalar; expected an array of rank 1 to %d",
                    path, BC_MAX_RANK);
  if (hd->rank > BC_MAX_RANK)
    return bc_error(ctx, BC_EINPUT, "%s: error: shape %s: rank %d is over the limit of %d", path,
                    tuple_str(hd->d, hd->rank, s, sizeof s), hd->rank, BC_MAX_RANK);
  int64_t numel = 1;
  for (int i = 0; i < hd->rank; i++) {
    if (hd->d[i] > BC_MAX_DIM)
      return bc_error(ctx, BC_EINPUT, "%s: error: shape %s: dimension %d is over the limit of %lld",
                      path, tuple_str(hd->d, hd->rank, s, sizeof s), i, (long long)BC_MAX_DIM);
    numel *= hd->d[i];
    if (numel > BC_MAX_ELEMS)
      return bc_error(ctx, BC_EINPUT, "%s: error: shape %s has more than %lld elements", path,
                      tuple_str(hd->d, hd->rank, s, sizeof s), (long long)BC_MAX_ELEMS);
  }
  return BC_OK;
}

// ---------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------

// Reads exactly n bytes at the current position; false on a short read.
static bool read_exact(FILE *fp, void *buf, size_t n) {
  return n == 0 || fread(buf, 1, n, fp) == n;
}

// Reads the magic, version and header length. *pre is the byte count before
// the header text.
static int read_prefix(bc_ctx *ctx, const char *path, FILE *fp, uint64_t size,
                       uint32_t *hlen, uint64_t *pre) {
  unsigned char b[12];
  if (size < 6 || !read_exact(fp, b, 6) || memcmp(b, npy_magic, 6) != 0)
    return bc_error(ctx, BC_EINPUT, "%s: error: not a .npy file (it does not start with \"\\x93NUMPY\")", path);
  if (size < 10 || !read_exact(fp, b + 6, 4))
    return bc_error(ctx, BC_EINPUT, "%s: error: truncated .npy header (file is %llu bytes)", path,
                    (unsigned long long)size);
  int major = b[6], minor = b[7];
  if (minor != 0 || major < 1 || major > 3)
    return bc_error(ctx, BC_EINPUT, "%s: error: .npy format version %d.%d is not supported (expected 1.0, 2.0 or 3.0)",
                    path, major, minor);
  if (major == 1) {
    *hlen = (uint32_t)b[8] | (uint32_t)b[9] << 8;
    *pre = 10;
  } else {
    if (size < 12 || !read_exact(fp, b + 10, 2))
      return bc_error(ctx, BC_EINPUT, "%s: error: truncated .npy header (file is %llu bytes)", path,
                      (unsigned long long)size);
    *hlen = (uint32_t)b[8] | (uint32_t)b[9] << 8 | (uint32_t)b[10] << 16 | (uint32_t)b[11] << 24;
    *pre = 12;
  }
  if (*hlen > NPY_MAX_HEADER)
    return bc_error(ctx, BC_EINPUT, "%s: error: .npy header length %u is over the limit of %u bytes",
                    path, *hlen, NPY_MAX_HEADER);
  if (*pre + *hlen > size)
    return bc_error(ctx, BC_EINPUT, "%s: error: truncated .npy header: it claims %u bytes but only %llu follow",
                    path, *hlen, (unsigned long long)(size - *pre));
  return BC_OK;
}

// What a reader is asked for: the element type, and optionally the shape
// the caller expects, compared with the header before any data is read.
typedef struct {
  npy_want type;
  const bc_shape *expect;   // NULL: any shape
  const char *who;          // for the mismatch message: "g.blk"
} npy_req;

// Run-time dims (sym) accept 1..their bound; fixed dims must be equal.
static bool expect_matches(const npy_header *hd, const bc_shape *e) {
  if (hd->rank != e->rank) return false;
  for (int i = 0; i < e->rank; i++)
    if (e->sym[i] ? (hd->d[i] < 1 || hd->d[i] > e->d[i]) : hd->d[i] != e->d[i]) return false;
  return true;
}

static int check_expect(bc_ctx *ctx, const char *path, const npy_header *hd, const npy_req *rq) {
  if (!rq->expect || expect_matches(hd, rq->expect)) return BC_OK;
  bc_shape got = {.rank = hd->rank};
  for (int i = 0; i < hd->rank; i++) got.d[i] = hd->d[i];
  char a[96], b[96];
  return bc_error(ctx, BC_EINPUT, "%s: error: input has shape %s but %s expects %s%s", path,
                  bc_shape_str(&got, a, sizeof a), rq->who ? rq->who : "the graph",
                  bc_shape_str(rq->expect, b, sizeof b),
                  " (set the graph's dims with -D NAME=VALUE)");
}

// Narrows n little-endian int32 or int64 values at raw into dst.
static int to_i32(bc_ctx *ctx, const char *path, const unsigned char *raw, size_t n, int esize,
                  int32_t *dst) {
  for (size_t i = 0; i < n; i++) {
    const unsigned char *q = raw + i * (size_t)esize;
    uint64_t u = 0;
    for (int k = esize - 1; k >= 0; k--) u = u << 8 | q[k];
    int64_t v = esize == 4 ? (int64_t)(int32_t)(uint32_t)u : (int64_t)u;
    if (v < INT32_MIN || v > INT32_MAX)
      return bc_error(ctx, BC_EINPUT, "%s: error: element %zu is %lld, outside the int32 range",
                      path, i, (long long)v);
    dst[i] = (int32_t)v;
  }
  return BC_OK;
}

static int read_body(bc_ctx *ctx, const char *path, FILE *fp, uint64_t size, const npy_req *rq,
                     bc_shape *shape, void **data) {
  uint32_t hlen = 0;
  uint64_t pre = 0;
  int rc = read_prefix(ctx, path, fp, size, &hlen, &pre);
  if (rc) return rc;
  char *text = malloc((size_t)hlen + 1);
  if (!text) return bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", path);
  npy_header hd;
  if (!read_exact(fp, text, hlen)) rc = bc_error(ctx, BC_EIO, "%s: error: read failed", path);
  if (!rc) rc = parse_header(ctx, path, text, hlen, &hd);
  free(text);
  if (!rc) rc = check_header(ctx, path, &hd, rq->type);
  if (!rc) rc = check_expect(ctx, path, &hd, rq);
  if (rc) return rc;
  int esize = rq->type == NPY_F32 ? 4 : hd.descr[2] - '0';  // '<i4' / '<i8'
  int64_t numel = 1;
  for (int i = 0; i < hd.rank; i++) numel *= hd.d[i];
  uint64_t need = (uint64_t)numel * (uint64_t)esize, have = size - pre - hlen;
  if (have != need) {
    char s[256];
    tuple_str(hd.d, hd.rank, s, sizeof s);
    if (have > need)
      return bc_error(ctx, BC_EINPUT,
                      "%s: error: shape %s needs %llu bytes of data but the file has %llu (%llu extra bytes at the end)",
                      path, s, (unsigned long long)need, (unsigned long long)have,
                      (unsigned long long)(have - need));
    return bc_error(ctx, BC_EINPUT, "%s: error: shape %s needs %llu bytes of data but the file has %llu",
                    path, s, (unsigned long long)need, (unsigned long long)have);
  }
  void *p = malloc(need ? (size_t)need : 1);
  if (!p) return bc_error(ctx, BC_ENOMEM, "%s: error: out of memory reading %llu bytes", path,
                          (unsigned long long)need);
  if (!read_exact(fp, p, (size_t)need)) {
    free(p);
    return bc_error(ctx, BC_EIO, "%s: error: read failed", path);
  }
  if (rq->type == NPY_F32) {
    if (!host_is_le()) swap32(p, (size_t)numel);
  } else {
    // Narrowed in place: element i's 4 bytes never overtake element i's input.
    int32_t *out = malloc(numel ? (size_t)numel * 4 : 4);
    rc = out ? to_i32(ctx, path, p, (size_t)numel, esize, out)
             : bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", path);
    free(p);
    if (rc) {
      free(out);
      return rc;
    }
    p = out;
  }
  shape->rank = hd.rank;
  for (int i = 0; i < hd.rank; i++) shape->d[i] = hd.d[i];
  *data = p;
  return BC_OK;
}

static int read_npy(bc_ctx *ctx, const char *path, const npy_req *rq, bc_shape *shape,
                    void **data) {
  *data = NULL;
  memset(shape, 0, sizeof *shape);
  uint64_t size;
  FILE *fp = bc_open_regular(ctx, path, &size);
  if (!fp) return BC_EIO;
  int rc = read_body(ctx, path, fp, size, rq, shape, data);
  fclose(fp);
  return rc;
}

int bcN_read(bc_ctx *ctx, const char *path, bc_shape *shape, float **data) {
  npy_req rq = {.type = NPY_F32};
  void *p;
  int rc = read_npy(ctx, path, &rq, shape, &p);
  *data = p;
  return rc;
}

int bcN_read_expect(bc_ctx *ctx, const char *path, const bc_shape *expect, const char *who,
                    bc_shape *shape, float **data) {
  npy_req rq = {.type = NPY_F32, .expect = expect, .who = who};
  void *p;
  int rc = read_npy(ctx, path, &rq, shape, &p);
  *data = p;
  return rc;
}

int bcN_read_i32(bc_ctx *ctx, const char *path, bc_shape *shape, int32_t **data) {
  return bcN_read_i32_expect(ctx, path, NULL, NULL, shape, data);
}

int bcN_read_i32_expect(bc_ctx *ctx, const char *path, const bc_shape *expect, const char *who,
                        bc_shape *shape, int32_t **data) {
  npy_req rq = {.type = NPY_I32, .expect = expect, .who = who};
  void *p;
  int rc = read_npy(ctx, path, &rq, shape, &p);
  *data = p;
  return rc;
}

// ---------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------

// Version 1.0, '<f4', C order, with the header padded so the data starts at
// a multiple of 64 bytes, exactly as numpy.save lays it out.
int bcN_write(bc_ctx *ctx, const char *path, const bc_shape *shape, const float *data) {
  bool ok = shape->rank >= 1 && shape->rank <= BC_MAX_RANK;
  for (int i = 0; ok && i < shape->rank; i++) ok = shape->d[i] >= 0 && shape->d[i] <= BC_MAX_DIM;
  if (!ok || bc_shape_numel(shape) > BC_MAX_ELEMS)
    return bc_error(ctx, BC_EINPUT, "%s: error: cannot write an array of rank %d with this shape",
                    path, shape->rank);
  char s[256], head[384];
  tuple_str(shape->d, shape->rank, s, sizeof s);
  int n = snprintf(head + 10, sizeof head - 10,
                   "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }", s);
  size_t total = (10 + (size_t)n + 1 + 63) & ~(size_t)63;  // + '\n', rounded up to 64
  memcpy(head, npy_magic, 6);
  head[6] = 1, head[7] = 0;
  head[8] = (char)((total - 10) & 0xFF), head[9] = (char)((total - 10) >> 8);
  memset(head + 10 + n, ' ', total - 10 - (size_t)n - 1);
  head[total - 1] = '\n';
  size_t numel = (size_t)bc_shape_numel(shape);
  float *copy = NULL;
  if (!host_is_le() && numel) {
    if (!(copy = malloc(numel * 4))) return bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", path);
    memcpy(copy, data, numel * 4);
    swap32(copy, numel);
    data = copy;
  }
  const void *parts[2] = {head, data};
  size_t lens[2] = {total, numel * 4};
  int rc = bc_write_file_atomic(ctx, path, 2, parts, lens);
  free(copy);
  return rc;
}
