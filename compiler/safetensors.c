// safetensors.c — reading and writing the safetensors weight format.
//
// A safetensors file is an 8-byte little-endian header length N, N bytes of
// JSON mapping each tensor name to {"dtype", "shape", "data_offsets"} (plus
// an optional "__metadata__" string map), then the raw tensor bytes.
//
// Weights come from other tools, so a bad file must be rejected at open with
// a message that names the file and the tensor, never turned into garbage
// weights later.  bcS_open reads only the length and the header (never the
// data: a 32-byte header padded to gigabytes costs nothing), parses it with
// cJSON and checks every entry: known dtype, sane shape, offsets inside the
// data section, byte size matching the shape, no duplicate names, no NUL in
// names, and tensors tiling the data section exactly (no overlap, no gap, no
// trailing bytes: the safetensors format's own rule).  Tensors are then read
// one at a time, by offset, when a parameter asks for them.  Dtypes we cannot convert (I64, F64, ...) are only reported when
// such a tensor is actually read, so a file with extra integer buffers (e.g.
// a step counter) still opens.  After open, tensors are sorted by name so
// bcS_find is a binary search.
#define _POSIX_C_SOURCE 200809L
#include "bc.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#define ST_MAX_HEADER (100u << 20)     // the reference implementation's limit too
#define ST_MAX_FILE (1ULL << 40)       // 1 TiB: anything bigger is not a block's weights
#define ST_MAX_RANK 8                  // bc_st_tensor.shape holds 8 dims
#define ST_MAX_INT 9007199254740992.0  // 2^53: JSON numbers above it lose precision

// ---------------------------------------------------------------------------
// Dtypes
// ---------------------------------------------------------------------------
typedef struct { const char *name; int size; bc_dtype dt; } st_dtype;

// The dtypes of the safetensors spec with a whole-byte element size.
static const st_dtype dtypes[] = {
    {"F32", 4, BC_DT_F32},    {"F16", 2, BC_DT_F16},    {"BF16", 2, BC_DT_BF16},
    {"F64", 8, BC_DT_OTHER},  {"I64", 8, BC_DT_OTHER},  {"I32", 4, BC_DT_OTHER},
    {"I16", 2, BC_DT_OTHER},  {"I8", 1, BC_DT_OTHER},   {"U64", 8, BC_DT_OTHER},
    {"U32", 4, BC_DT_OTHER},  {"U16", 2, BC_DT_OTHER},  {"U8", 1, BC_DT_OTHER},
    {"BOOL", 1, BC_DT_OTHER}, {"F8_E4M3", 1, BC_DT_OTHER}, {"F8_E5M2", 1, BC_DT_OTHER},
    {"F8_E8M0", 1, BC_DT_OTHER}, {"C64", 8, BC_DT_OTHER},
};

static const st_dtype *find_dtype(const char *name) {
  for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
    if (strcmp(dtypes[i].name, name) == 0) return &dtypes[i];
  return NULL;
}

static int dtype_size(const char *name) {
  const st_dtype *d = find_dtype(name);
  return d ? d->size : 0;
}

// ---------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------
static uint64_t le64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static bool host_is_le(void) {
  const uint16_t one = 1;
  return *(const unsigned char *)&one == 1;
}

// "[2, 3]" for a file tensor's shape (up to 8 dims, so no bc_shape).
static const char *dims_str(const int64_t *d, int rank, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < rank && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, i ? ", %lld" : "%lld", (long long)d[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

// Up to 24 bytes of p, with anything unprintable shown as '?', for quoting
// the spot where JSON parsing stopped.
static const char *excerpt(const char *p, const char *end, char *buf, size_t n) {
  size_t k = 0;
  while (p < end && k + 1 < n && k < 24) {
    unsigned char c = (unsigned char)*p++;
    buf[k++] = (c >= 32 && c < 127) ? (char)c : '?';
  }
  buf[k] = '\0';
  return buf;
}

// Offset of the first byte that breaks UTF-8 (or is NUL), or -1 if valid.
// cJSON does not check encoding, and names end up in error messages.
static long bad_utf8_at(const unsigned char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    unsigned c = s[i];
    int len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (c == 0 || len == 0 || (len == 2 && c < 0xC2) || (c > 0xF4) || i + (size_t)len > n) return (long)i;
    for (int k = 1; k < len; k++)
      if ((s[i + (size_t)k] & 0xC0) != 0x80) return (long)i;
    if (len == 3) {
      unsigned c1 = s[i + 1];
      if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0)) return (long)i;  // overlong, surrogate
    }
    if (len == 4) {
      unsigned c1 = s[i + 1];
      if ((c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 >= 0x90)) return (long)i;
    }
    i += (size_t)len;
  }
  return -1;
}

// A JSON number that is an exact non-negative integer below 2^53.
static bool json_uint(const cJSON *j, uint64_t *out) {
  if (!cJSON_IsNumber(j)) return false;
  double d = j->valuedouble;
  if (!(d >= 0 && d < ST_MAX_INT) || d != (double)(uint64_t)d) return false;
  *out = (uint64_t)d;
  return true;
}

// ---------------------------------------------------------------------------
// Opening: header checks
// ---------------------------------------------------------------------------
static void free_tensors(bc_st_file *f) {
  for (int i = 0; i < f->ntensors; i++) {
    free((char *)f->tensors[i].name);
    free((char *)f->tensors[i].dtype_name);
  }
  free(f->tensors);
  f->tensors = NULL;
  f->ntensors = 0;
}

void bcS_close(bc_st_file *f) {
  if (!f) return;
  free_tensors(f);
  if (f->fp) fclose(f->fp);
  free((char *)f->path);
  free(f);
}

static char *xstrdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = malloc(n);
  if (p) memcpy(p, s, n);
  return p;
}

static int check_metadata(bc_ctx *ctx, const char *path, const cJSON *meta) {
  if (!cJSON_IsObject(meta))
    return bc_error(ctx, BC_EINPUT, "%s: error: \"__metadata__\" is not a JSON object", path);
  for (const cJSON *m = meta->child; m; m = m->next)
    if (!cJSON_IsString(m))
      return bc_error(ctx, BC_EINPUT, "%s: error: \"__metadata__\" entry '%s' is not a string",
                      path, m->string);
  return BC_OK;
}

static int parse_dtype(bc_ctx *ctx, const char *path, const cJSON *e, bc_st_tensor *t) {
  const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
  if (!dt)
    return bc_error(ctx, BC_EINPUT, "%s: error: tensor '%s': missing \"dtype\"", path, t->name);
  if (!cJSON_IsString(dt))
    return bc_error(ctx, BC_EINPUT, "%s: error: tensor '%s': \"dtype\" is not a string", path, t->name);
  const st_dtype *d = find_dtype(dt->valuestring);
  if (!d)
    return bc_error(ctx, BC_EINPUT,
                    "%s: error: tensor '%s': unknown dtype '%s' (safetensors dtypes are F32, F16, "
                    "BF16, F64, I64, I32, ...)", path, t->name, dt->valuestring);
  t->dtype = d->dt;
  t->dtype_name = xstrdup(d->name);
  if (!t->dtype_name) return bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", path);
  return BC_OK;
}

static int parse_shape(bc_ctx *ctx, const char *path, const cJSON *e, bc_st_tensor *t) {
  const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
  if (!sh)
    return bc_error(ctx, BC_EINPUT, "%s: error: tensor '%s': missing \"shape\"", path, t->name);
  if (!cJSON_IsArray(sh))
    return bc_error(ctx, BC_EINPUT, "%s: error: tensor '%s': \"shape\" is not an array", path, t->name);
  int rank = cJSON_GetArraySize(sh);
  if (rank > ST_MAX_RANK)
    return bc_error(ctx, BC_EINPUT, "%s: error: tensor '%s': shape has %d dims (limit %d)", path,
                    t->name, rank, ST_MAX_RANK);
  t->rank = 0;
  for (const cJSON *d = sh->child; d; d = d->next) {
    uint64_t v;
    if (!json_uint(d, &v))
      return bc_error(ctx, BC_EINPUT, "%s: error: tensor '%s': shape[%d] is not a non-negative integer",
                      path, t->name, t->rank);
    t->shape[t->rank++] = (int64_t)v;
  }
  // numel * element size must fit in 64 bits (and, a fortiori, the file).
  uint64_t bytes = (uint64_t)dtype_size(t->dtype_name);
  for (int i = 0; i < t->rank; i++) {
    uint64_t d = (uint64_t)t->shape[i];
    if (d && bytes > (uint64_t)INT64_MAX / d) {
      char s[256];
      return bc_error(ctx, BC_EINPUT, "%s: error: tensor '%s': shape %s has too many elements", path,
                      t->name, dims_str(t->shape, t->rank, s, sizeof s));
    }
    bytes *= d;
  }
  return BC_OK;
}

static int parse_offsets(bc_ctx *ctx, const char *path, const cJSON *e, bc_st_tensor *t,
                         uint64_t data_len) {
  const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
  if (!off)
    return bc_error(ctx, BC_EINPUT, "%s: error: tensor '%s': missing \"data_offsets\"", path, t->name);
  if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 ||
      !json_uint(off->child, &t->begin) || !json_uint(off->child->next, &t->end))
    return bc_error(ctx, BC_EINPUT,
                    "%s: error: tensor '%s': \"data_offsets\" must be [begin, end], two non-negative integers",
                    path, t->name);
  unsigned long long b = t->begin, en = t->end;
  if (b > en)
    return bc_error(ctx, BC_EINPUT, "%s: error: tensor '%s': data_offsets [%llu, %llu] end before they begin",
                    path, t->name, b, en);
  if (en > data_len)
    return bc_error(ctx, BC_EINPUT,
                    "%s: error: tensor '%s': data_offsets [%llu, %llu] run past the end of the data "
                    "section (%llu bytes)", path, t->name, b, en, (unsigned long long)data_len);
  uint64_t need = (uint64_t)dtype_size(t->dtype_name);
  for (int i = 0; i < t->rank; i++) need *= (uint64_t)t->shape[i];
  if (en - b != need) {
    char s[256];
    return bc_error(ctx, BC_EINPUT,
                    "%s: error: tensor '%s': data_offsets [%llu, %llu] hold %llu bytes but shape %s of %s needs %llu",
                    path, t->name, b, en, en - b, dims_str(t->shape, t->rank, s, sizeof s),
                    t->dtype_name, (unsigned long long)need);
  }
  return BC_OK;
}

static int parse_entry(bc_ctx *ctx, const char *path, const cJSON *e, bc_st_tensor *t,
                       uint64_t data_len) {
  t->name = xstrdup(e->string);
  if (!t->name) return bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", path);
  if (!cJSON_IsObject(e))
    return bc_error(ctx, BC_EINPUT, "%s: error: tensor '%s': entry is not a JSON object", path, t->name);
  // cJSON keeps repeated keys and lookups see the first: which one counts
  // would be luck, so a repeated dtype/shape/data_offsets is an error.
  static const char *const keys[] = {"dtype", "shape", "data_offsets"};
  for (int k = 0; k < 3; k++) {
    int seen = 0;
    for (const cJSON *c = e->child; c; c = c->next) seen += !strcmp(c->string, keys[k]);
    if (seen > 1)
      return bc_error(ctx, BC_EINPUT, "%s: error: tensor '%s': \"%s\" appears %d times", path,
                      t->name, keys[k], seen);
  }
  int rc = parse_dtype(ctx, path, e, t);
  if (rc == BC_OK) rc = parse_shape(ctx, path, e, t);
  if (rc == BC_OK) rc = parse_offsets(ctx, path, e, t, data_len);
  return rc;
}

static int cmp_name(const void *a, const void *b) {
  return strcmp(((const bc_st_tensor *)a)->name, ((const bc_st_tensor *)b)->name);
}

static int cmp_begin(const void *a, const void *b) {
  const bc_st_tensor *x = *(const bc_st_tensor *const *)a, *y = *(const bc_st_tensor *const *)b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return (x->end > y->end) - (x->end < y->end);
}

// Sorts tensors by name (for bcS_find) and rejects repeated names: cJSON
// keeps both copies of a duplicated key, and which one wins would be luck.
static int check_duplicates(bc_ctx *ctx, bc_st_file *f) {
  if (f->ntensors < 2) return BC_OK;
  qsort(f->tensors, (size_t)f->ntensors, sizeof *f->tensors, cmp_name);
  for (int i = 1; i < f->ntensors; i++)
    if (strcmp(f->tensors[i - 1].name, f->tensors[i].name) == 0)
      return bc_error(ctx, BC_EINPUT, "%s: error: tensor '%s' appears more than once in the header",
                      f->path, f->tensors[i].name);
  return BC_OK;
}

// The data section must be tiled exactly, as the reference implementation
// requires: sorted by offset, each tensor begins where the previous one
// ended (two tensors sharing bytes would alias each other's weights; a gap
// or a tail is data nobody reads, which a format checker should not wave
// through), and the last one ends at the end of the file.
static int check_coverage(bc_ctx *ctx, bc_st_file *f) {
  const bc_st_tensor **by = malloc((size_t)(f->ntensors ? f->ntensors : 1) * sizeof *by);
  if (!by) return bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", f->path);
  for (int i = 0; i < f->ntensors; i++) by[i] = &f->tensors[i];
  qsort(by, (size_t)f->ntensors, sizeof *by, cmp_begin);
  uint64_t at = 0;
  const bc_st_tensor *prev = NULL;
  int rc = BC_OK;
  for (int i = 0; i < f->ntensors && rc == BC_OK; i++) {
    const bc_st_tensor *t = by[i];
    if (t->begin < at)
      rc = bc_error(ctx, BC_EINPUT,
                    "%s: error: tensors '%s' (data_offsets [%llu, %llu]) and '%s' (data_offsets "
                    "[%llu, %llu]) overlap", f->path, prev->name, (unsigned long long)prev->begin,
                    (unsigned long long)prev->end, t->name, (unsigned long long)t->begin,
                    (unsigned long long)t->end);
    else if (t->begin > at)
      rc = bc_error(ctx, BC_EINPUT,
                    "%s: error: bytes [%llu, %llu) of the data section belong to no tensor "
                    "(before '%s'); safetensors files have no gaps", f->path,
                    (unsigned long long)at, (unsigned long long)t->begin, t->name);
    at = t->end;
    prev = t;
  }
  if (rc == BC_OK && at != f->data_len)
    rc = bc_error(ctx, BC_EINPUT,
                  "%s: error: %llu bytes after the last tensor (the data section is %llu bytes, "
                  "the tensors end at %llu); safetensors files have no trailing data",
                  f->path, (unsigned long long)(f->data_len - at),
                  (unsigned long long)f->data_len, (unsigned long long)at);
  free(by);
  return rc;
}

// Lexical rules cJSON does not enforce but the format's JSON (and the
// runtime's parser in blockc_rt.c) does, so both readers accept the same
// files: no raw control byte inside a string, no "\u0000" escape (cJSON
// decodes it to a NUL that ends the C string, so "w\u0000evil" would be
// taken as the tensor "w"), and every number a plain non-negative integer
// (no sign, fraction, exponent or leading zero) of at most 16 digits.
// Returns a description of the first violation (at *at) or NULL.
// Value of 4 hex digits at s[i..i+4), or -1.
static long hex4_at(const char *s, size_t n, size_t i) {
  if (i + 4 > n) return -1;
  long v = 0;
  for (size_t k = i; k < i + 4; k++) {
    char c = s[k];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
          : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

// The escape at s[*i] (a backslash inside a string): one of \" \\ \/ \b
// \f \n \r \t, or \uXXXX with surrogates in pairs and never U+0000.
// Advances *i to the escape's last byte; returns what is wrong or NULL.
static const char *bad_escape(const char *s, size_t n, size_t *i) {
  size_t k = *i + 1;
  if (k >= n) return "an unfinished escape in a string";
  if (strchr("\"\\/bfnrt", s[k]) && s[k]) {
    *i = k;
    return NULL;
  }
  if (s[k] != 'u') return "an invalid escape in a string";
  long u = hex4_at(s, n, k + 1);
  if (u < 0) return "an invalid \\u escape in a string";
  if (u == 0) return "an escaped NUL (\\u0000) in a string; tensor names cannot contain NUL";
  k += 4;
  if (u >= 0xDC00 && u <= 0xDFFF) return "a lone low surrogate escape in a string";
  if (u >= 0xD800 && u <= 0xDBFF) {
    long lo = k + 2 < n && s[k + 1] == '\\' && s[k + 2] == 'u' ? hex4_at(s, n, k + 3) : -1;
    if (lo < 0xDC00 || lo > 0xDFFF) return "a high surrogate escape without its low half";
    k += 6;
  }
  *i = k;
  return NULL;
}

// numbers: also check numbers (done after the entries are checked, whose
// messages are more specific: "shape[1] is not a non-negative integer").
static const char *lexical_problem(const char *s, size_t n, bool numbers, size_t *at) {
  bool in_str = false;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    *at = i;
    if (in_str) {
      if (c == '"') in_str = false;
      else if (c < 0x20) return "a raw control byte inside a string (JSON requires an escape)";
      else if (c == '\\') {
        const char *bad = bad_escape(s, n, &i);
        if (bad) return bad;
      }
    } else if (c == '"') {
      in_str = true;
    } else if (c < 0x20 && c != ' ' && c != '\t' && c != '\n' && c != '\r') {
      return "a control byte where JSON allows only space, tab, CR and LF";  // cJSON skips them
    } else if (numbers && (c == '-' || (c >= '0' && c <= '9'))) {
      size_t k = i;
      while (k < n && strchr("0123456789.eE+-", s[k])) k++;
      bool digits = true;
      for (size_t m = i; m < k; m++) digits &= s[m] >= '0' && s[m] <= '9';
      if (!digits || (k - i > 1 && c == '0') || k - i > 16)
        return "a number that is not a plain non-negative integer";
      i = k - 1;
    }
  }
  return NULL;
}

// Parses the JSON header and fills f->tensors.
static int parse_header(bc_ctx *ctx, bc_st_file *f, const char *hdr, size_t n) {
  const char *path = f->path;
  long bad = bad_utf8_at((const unsigned char *)hdr, n);
  if (bad >= 0)
    return bc_error(ctx, BC_EINPUT, "%s: error: header is not valid UTF-8 (byte %ld of the header)",
                    path, bad);
  size_t lex_at = 0;
  const char *lex = lexical_problem(hdr, n, false, &lex_at);
  if (lex)
    return bc_error(ctx, BC_EINPUT, "%s: error: header has %s (byte %zu of the header)", path, lex,
                    lex_at);
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(hdr, n, &end, false);
  char ex[32];
  if (!root) {
    size_t at = end && end >= hdr && end <= hdr + n ? (size_t)(end - hdr) : 0;
    return bc_error(ctx, BC_EINPUT, "%s: error: header is not valid JSON (at byte %zu of the header: '%s')",
                    path, at, excerpt(hdr + at, hdr + n, ex, sizeof ex));
  }
  int rc = BC_OK;
  const char *p = end;
  while (p < hdr + n && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
  if (p < hdr + n)
    rc = bc_error(ctx, BC_EINPUT, "%s: error: header has data after the JSON value (at byte %zu: '%s')",
                  path, (size_t)(p - hdr), excerpt(p, hdr + n, ex, sizeof ex));
  else if (!cJSON_IsObject(root))
    rc = bc_error(ctx, BC_EINPUT, "%s: error: header is not a JSON object", path);
  int count = 0;
  for (const cJSON *e = rc == BC_OK ? root->child : NULL; e; e = e->next)
    if (strcmp(e->string, "__metadata__") != 0) count++;
  if (rc == BC_OK && count > 0) {
    f->tensors = calloc((size_t)count, sizeof *f->tensors);
    if (!f->tensors) rc = bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", path);
  }
  for (const cJSON *e = rc == BC_OK ? root->child : NULL; e && rc == BC_OK; e = e->next) {
    if (strcmp(e->string, "__metadata__") == 0) {
      rc = check_metadata(ctx, path, e);
      continue;
    }
    rc = parse_entry(ctx, path, e, &f->tensors[f->ntensors++], f->data_len);
  }
  cJSON_Delete(root);
  if (rc == BC_OK && (lex = lexical_problem(hdr, n, true, &lex_at)))
    rc = bc_error(ctx, BC_EINPUT, "%s: error: header has %s (at byte %zu of the header: '%s')", path,
                  lex, lex_at, excerpt(hdr + lex_at, hdr + n, ex, sizeof ex));
  if (rc == BC_OK) rc = check_duplicates(ctx, f);
  if (rc == BC_OK) rc = check_coverage(ctx, f);
  return rc;
}

// Reads the length field and the header text (malloc'ed, n bytes) and
// sets f->data_off / data_len from the file size.
static int read_header(bc_ctx *ctx, bc_st_file *f, uint64_t size, char **hdr, size_t *hn) {
  const char *path = f->path;
  unsigned char len8[8];
  if (size < 8)
    return bc_error(ctx, BC_EINPUT,
                    "%s: error: file is %llu bytes, too short for a safetensors header (at least 8)",
                    path, (unsigned long long)size);
  if (fread(len8, 1, 8, f->fp) != 8) return bc_error(ctx, BC_EIO, "%s: error: read failed", path);
  uint64_t n = le64(len8);
  if (n > ST_MAX_HEADER)
    return bc_error(ctx, BC_EINPUT,
                    "%s: error: header length %llu is over the limit of %u bytes (not a safetensors file?)",
                    path, (unsigned long long)n, ST_MAX_HEADER);
  if (n > size - 8)
    return bc_error(ctx, BC_EINPUT,
                    "%s: error: header length %llu runs past the end of the file (%llu bytes follow "
                    "the length field)", path, (unsigned long long)n, (unsigned long long)(size - 8));
  *hdr = malloc((size_t)n + 1);
  if (!*hdr) return bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", path);
  if (n && fread(*hdr, 1, (size_t)n, f->fp) != n) {
    free(*hdr);
    *hdr = NULL;
    return bc_error(ctx, BC_EIO, "%s: error: read failed", path);
  }
  (*hdr)[n] = '\0';
  *hn = (size_t)n;
  f->data_off = 8 + n;
  f->data_len = size - 8 - n;
  return BC_OK;
}

int bcS_open(bc_ctx *ctx, const char *path, bc_st_file **out) {
  *out = NULL;
  bc_st_file *f = calloc(1, sizeof *f);
  if (!f || !(f->path = xstrdup(path))) {
    free(f);
    return bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", path);
  }
  uint64_t size = 0;
  f->fp = bc_open_regular(ctx, path, &size);
  int rc = f->fp ? BC_OK : BC_EIO;
  if (rc == BC_OK && size > ST_MAX_FILE)
    rc = bc_error(ctx, BC_EINPUT, "%s: error: file is %llu bytes, over the limit of %llu", path,
                  (unsigned long long)size, (unsigned long long)ST_MAX_FILE);
  char *hdr = NULL;
  size_t hn = 0;
  if (rc == BC_OK) rc = read_header(ctx, f, size, &hdr, &hn);
  if (rc == BC_OK) rc = parse_header(ctx, f, hdr, hn);
  free(hdr);
  if (rc != BC_OK) {
    bcS_close(f);
    return rc;
  }
  *out = f;
  return BC_OK;
}

const bc_st_tensor *bcS_find(const bc_st_file *f, const char *name) {
  int lo = 0, hi = f->ntensors - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    int c = strcmp(f->tensors[mid].name, name);
    if (c == 0) return &f->tensors[mid];
    if (c < 0) lo = mid + 1;
    else hi = mid - 1;
  }
  return NULL;
}

// ---------------------------------------------------------------------------
// Reading: dtype conversion
// ---------------------------------------------------------------------------
static float f32_from_bits(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

// IEEE half -> float is exact: every half is a float. Subnormal halves
// (exponent 0) are normalised by shifting the mantissa up; inf and NaN keep
// their payload in the float's top mantissa bits.
static float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31;
  uint32_t exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  if (exp == 0x1F) return f32_from_bits(sign | 0x7F800000u | mant << 13);
  if (exp == 0) {
    if (mant == 0) return f32_from_bits(sign);
    int e = -1;
    do { e++; mant <<= 1; } while (!(mant & 0x400));  // normalise: 2^-14 * 0.m -> 2^(-15-e) * 1.m'
    return f32_from_bits(sign | (uint32_t)(127 - 15 - e) << 23 | (mant & 0x3FF) << 13);
  }
  return f32_from_bits(sign | (exp - 15 + 127) << 23 | mant << 13);
}

// bfloat16 is the top half of a float32.
static float bf16_to_float(uint16_t b) { return f32_from_bits((uint32_t)b << 16); }

// Converts k elements of dtype dt at p into dst.
static void convert(bc_dtype dt, const unsigned char *p, size_t k, float *dst) {
  for (size_t i = 0; i < k; i++) {
    if (dt == BC_DT_F32) {
      const unsigned char *q = p + 4 * i;
      dst[i] = f32_from_bits((uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 |
                             (uint32_t)q[3] << 24);
    } else {
      uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
      dst[i] = dt == BC_DT_F16 ? half_to_float(h) : bf16_to_float(h);
    }
  }
}

int bcS_read_f32(bc_ctx *ctx, const bc_st_file *f, const bc_st_tensor *t, float *dst) {
  if (t->dtype == BC_DT_OTHER)
    return bc_error(ctx, BC_EINPUT,
                    "%s: error: tensor '%s': dtype %s is not supported (expected F32, F16 or BF16)",
                    f->path, t->name, t->dtype_name);
  size_t esize = t->dtype == BC_DT_F32 ? 4 : 2;
  uint64_t n = (t->end - t->begin) / esize;
  if (fseeko(f->fp, (off_t)(f->data_off + t->begin), SEEK_SET) != 0)
    return bc_error(ctx, BC_EIO, "%s: error: cannot seek to tensor '%s'", f->path, t->name);
  // A chunk at a time: no second copy of a big tensor.
  unsigned char buf[1 << 16];
  for (uint64_t done = 0; done < n;) {
    size_t k = n - done < sizeof buf / esize ? (size_t)(n - done) : sizeof buf / esize;
    if (fread(buf, esize, k, f->fp) != k)
      return bc_error(ctx, BC_EIO, "%s: error: read failed in tensor '%s' (file truncated "
                      "while open?)", f->path, t->name);
    convert(t->dtype, buf, k, dst + done);
    done += k;
  }
  return BC_OK;
}

// ---------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------
static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int check_write_args(bc_ctx *ctx, const char *path, int n, const char *const *names,
                            const bc_shape *shapes) {
  for (int i = 0; i < n; i++) {
    if (!names[i] || !names[i][0])
      return bc_error(ctx, BC_EINPUT, "%s: error: tensor %d has an empty name", path, i);
    if (strcmp(names[i], "__metadata__") == 0)
      return bc_error(ctx, BC_EINPUT, "%s: error: '__metadata__' is reserved and cannot name a tensor", path);
    const bc_shape *s = &shapes[i];
    bool ok = s->rank >= 0 && s->rank <= BC_MAX_RANK;
    for (int k = 0; ok && k < s->rank; k++) ok = s->d[k] >= 0 && s->d[k] <= BC_MAX_DIM;
    if (!ok || bc_shape_numel(s) > BC_MAX_ELEMS)
      return bc_error(ctx, BC_EINPUT, "%s: error: tensor '%s' has an invalid shape", path, names[i]);
  }
  if (n < 2) return BC_OK;
  const char **sorted = malloc((size_t)n * sizeof *sorted);
  if (!sorted) return bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", path);
  memcpy(sorted, names, (size_t)n * sizeof *sorted);
  qsort(sorted, (size_t)n, sizeof *sorted, cmp_str);
  int rc = BC_OK;
  for (int i = 1; i < n && rc == BC_OK; i++)
    if (strcmp(sorted[i - 1], sorted[i]) == 0)
      rc = bc_error(ctx, BC_EINPUT, "%s: error: tensor name '%s' is used twice", path, sorted[i]);
  free(sorted);
  return rc;
}

// The JSON header, tensors laid out back to back in the order given.
static char *build_header(int n, const char *const *names, const bc_shape *shapes) {
  cJSON *root = cJSON_CreateObject();
  cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
  bool ok = root && meta && cJSON_AddStringToObject(meta, "format", "pt");
  uint64_t off = 0;
  for (int i = 0; ok && i < n; i++) {
    uint64_t bytes = (uint64_t)bc_shape_numel(&shapes[i]) * 4;
    cJSON *e = cJSON_AddObjectToObject(root, names[i]);
    ok = e && cJSON_AddStringToObject(e, "dtype", "F32");
    cJSON *sh = ok ? cJSON_AddArrayToObject(e, "shape") : NULL;
    cJSON *of = sh ? cJSON_AddArrayToObject(e, "data_offsets") : NULL;
    ok = of != NULL;
    for (int k = 0; ok && k < shapes[i].rank; k++)
      ok = cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)shapes[i].d[k]));
    ok = ok && cJSON_AddItemToArray(of, cJSON_CreateNumber((double)off)) &&
         cJSON_AddItemToArray(of, cJSON_CreateNumber((double)(off + bytes)));
    off += bytes;
  }
  char *s = ok ? cJSON_PrintUnformatted(root) : NULL;
  cJSON_Delete(root);
  return s;
}

int bcS_write(bc_ctx *ctx, const char *path, int n, const char *const *names,
              const bc_shape *shapes, const float *const *data) {
  if (n < 0) return bc_error(ctx, BC_EINTERNAL, "%s: error: negative tensor count", path);
  int rc = check_write_args(ctx, path, n, names, shapes);
  if (rc != BC_OK) return rc;
  char *json = build_header(n, names, shapes);
  if (!json) return bc_error(ctx, BC_ENOMEM, "%s: error: out of memory building the header", path);
  // Pad with spaces so the data section starts 8-byte aligned (as the
  // reference writer does); readers strip trailing whitespace.
  size_t jlen = strlen(json), hlen = (jlen + 7) & ~(size_t)7;
  char *hdr = malloc(hlen);
  int nparts = 2 + n;
  const void **parts = malloc((size_t)nparts * sizeof *parts);
  size_t *lens = malloc((size_t)nparts * sizeof *lens);
  float **copies = calloc((size_t)n + 1, sizeof *copies);  // byte-swapped data on big-endian hosts
  rc = (hdr && parts && lens && copies) ? BC_OK : bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", path);
  unsigned char len8[8];
  if (rc == BC_OK) {
    memcpy(hdr, json, jlen);
    memset(hdr + jlen, ' ', hlen - jlen);
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    parts[0] = len8, lens[0] = 8;
    parts[1] = hdr, lens[1] = hlen;
  }
  for (int i = 0; rc == BC_OK && i < n; i++) {
    size_t cnt = (size_t)bc_shape_numel(&shapes[i]);
    parts[2 + i] = data[i];
    lens[2 + i] = cnt * 4;
    if (host_is_le() || cnt == 0) continue;
    if (!(copies[i] = malloc(cnt * 4))) {
      rc = bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", path);
      break;
    }
    for (size_t k = 0; k < cnt; k++) {
      uint32_t u;
      memcpy(&u, &data[i][k], 4);
      u = (u >> 24) | ((u >> 8) & 0xFF00u) | ((u << 8) & 0xFF0000u) | (u << 24);
      memcpy(&copies[i][k], &u, 4);
    }
    parts[2 + i] = copies[i];
  }
  if (rc == BC_OK) rc = bc_write_file_atomic(ctx, path, nparts, parts, lens);
  for (int i = 0; copies && i < n; i++) free(copies[i]);
  free(copies);
  free(lens);
  free(parts);
  free(hdr);
  cJSON_free(json);
  return rc;
}
