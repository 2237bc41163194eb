// safetensors.c — blockc's layer over the runtime's safetensors reader,
// and the writer.
//
// A safetensors file is an 8-byte little-endian header length N, N bytes of
// JSON mapping each tensor name to {"dtype", "shape", "data_offsets"} (plus
// an optional "__metadata__" string map), then the raw tensor bytes.
//
// The bytes are parsed in one place: runtime/blockc_rt.c (bcrt_st_open_source,
// bcrt_st_read_f32), the reader vendored programs ship, so blockc and a
// vendored program accept the same files by construction.  It validates the
// whole header before any tensor data is read (strict JSON, known dtypes,
// shapes vs byte sizes, no NUL in names, unique names, tensors tiling the
// data section exactly) and reads tensors one at a time on demand.  This
// file opens the file (regular files only), hands it to that reader, turns
// its structured error into blockc's "path: error: ..." message, and
// exposes the tensor table as bc_st_tensor (sorted by name) for weights.c.
// Dtypes that cannot be converted (I64, F64, ...) open fine and are only
// reported when such a tensor is read, so a checkpoint with integer buffers
// (a step counter) still opens.
#define _POSIX_C_SOURCE 200809L
#include "bc.h"
#include "blockc_rt.h"

#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

static char *xstrdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = malloc(n);
  if (p) memcpy(p, s, n);
  return p;
}

static bool host_is_le(void) {
  const uint16_t one = 1;
  return *(const unsigned char *)&one == 1;
}

// ---------------------------------------------------------------------------
// Reading, through the runtime
// ---------------------------------------------------------------------------

static int fp_read(void *h, unsigned long long off, void *buf, unsigned long n) {
  FILE *fp = h;
  if (off > (unsigned long long)INT64_MAX || fseeko(fp, (off_t)off, SEEK_SET) != 0) return -1;
  return fread(buf, 1, n, fp) == n ? 0 : -1;
}

FILE *bcS_open_source(bc_ctx *ctx, const char *path, bcrt_source *src) {
  uint64_t size = 0;
  FILE *fp = bc_open_regular(ctx, path, &size);
  if (fp) *src = (bcrt_source){.handle = fp, .size = size, .read = fp_read};
  return fp;
}

void bcS_close(bc_st_file *f) {
  if (!f) return;
  if (f->gg || f->ggv) bcF_close_view(f);
  bcrt_st_close(f->rt);
  free(f->src);
  free(f->tensors);
  if (f->fp) fclose(f->fp);
  free((char *)f->path);
  free(f);
}

// The runtime's table (sorted by name) as bc_st_tensor, pointing at its names.
static int view_tensors(bc_ctx *ctx, bc_st_file *f) {
  f->ntensors = bcrt_st_count(f->rt);
  f->tensors = calloc((size_t)(f->ntensors ? f->ntensors : 1), sizeof *f->tensors);
  if (!f->tensors) return bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", f->path);
  for (int i = 0; i < f->ntensors; i++) {
    const bcrt_st_tensor *r = bcrt_st_tensor_at(f->rt, i);
    bc_st_tensor *t = &f->tensors[i];
    t->name = r->name;
    t->dtype_name = r->dtype;
    t->dtype = !strcmp(r->dtype, "F32") ? BC_DT_F32 : !strcmp(r->dtype, "F16") ? BC_DT_F16
             : !strcmp(r->dtype, "BF16") ? BC_DT_BF16 : BC_DT_OTHER;
    t->rank = r->rank;
    for (int k = 0; k < r->rank; k++) t->shape[k] = (int64_t)r->shape[k];
    t->begin = r->begin, t->end = r->end;
  }
  f->data_off = bcrt_st_data_offset(f->rt);
  f->data_len = f->data_off <= f->size ? f->size - f->data_off : 0;
  return BC_OK;
}

int bcS_open(bc_ctx *ctx, const char *path, bc_st_file **out) {
  *out = NULL;
  bc_st_file *f = calloc(1, sizeof *f);
  if (!f || !(f->path = xstrdup(path))) {
    free(f);
    return bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", path);
  }
  f->src = calloc(1, sizeof *f->src);
  f->fp = f->src ? bcS_open_source(ctx, path, f->src) : NULL;
  int rc = f->fp ? BC_OK : f->src ? BC_EIO : bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", path);
  unsigned char magic[4];
  bool gguf = rc == BC_OK && f->src->size >= 4 && f->src->read(f->src->handle, 0, magic, 4) == 0 &&
              !memcmp(magic, "GGUF", 4);
  if (rc == BC_OK) f->size = f->src->size;
  if (rc == BC_OK && gguf) {
    rc = bcF_open_view(ctx, f);
  } else if (rc == BC_OK) {
    bcrt_error e;
    if (bcrt_st_open_source(f->src, &f->rt, &e)) rc = bcS_rt_error(ctx, path, &e);
    if (rc == BC_OK) rc = view_tensors(ctx, f);
  }
  if (rc != BC_OK) {
    bcS_close(f);
    return rc;
  }
  *out = f;
  return BC_OK;
}

const bc_st_tensor *bcS_find(const bc_st_file *f, const char *name) {
  if (f->gg) return bcF_find(f, name);
  const bcrt_st_tensor *t = bcrt_st_find(f->rt, name);
  return t ? &f->tensors[t - bcrt_st_tensor_at(f->rt, 0)] : NULL;
}

int bcS_read_f32(bc_ctx *ctx, const bc_st_file *f, const bc_st_tensor *t, float *dst) {
  if (f->gg) return bcF_read_f32(ctx, f, t, dst);
  bcrt_error e;
  if (bcrt_st_read_f32(f->rt, bcrt_st_tensor_at(f->rt, (int)(t - f->tensors)), dst, &e))
    return bcS_rt_error(ctx, f->path, &e);
  return BC_OK;
}

int bcS_is_copy(bc_ctx *ctx, const bc_st_file *f, const bc_st_tensor *a, const bc_st_tensor *b,
                bool *same) {
  if (f->gg) return bcF_is_copy(ctx, f, a, b, same);
  bcrt_error e;
  int r = 0;
  if (bcrt_st_is_copy(f->rt, bcrt_st_tensor_at(f->rt, (int)(a - f->tensors)),
                   bcrt_st_tensor_at(f->rt, (int)(b - f->tensors)), &r, &e))
    return bcS_rt_error(ctx, f->path, &e);
  *same = r != 0;
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

// Appends s to out (when out is not NULL) at *n, advancing *n either way:
// the first pass sizes the header, the second writes it.
static void put(char *out, size_t *n, const char *s, size_t len) {
  if (out) memcpy(out + *n, s, len);
  *n += len;
}

// A JSON string literal of s: quotes, backslashes and control bytes escaped.
static void put_json_str(char *out, size_t *n, const char *s) {
  put(out, n, "\"", 1);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    char e[8];
    if (c == '"' || c == '\\') e[0] = '\\', e[1] = (char)c, put(out, n, e, 2);
    else if (c < 0x20) snprintf(e, sizeof e, "\\u%04x", c), put(out, n, e, 6);
    else put(out, n, s, 1);
  }
  put(out, n, "\"", 1);
}

// The JSON header, tensors laid out back to back in the order given;
// returns its length (out NULL: only measures).
static size_t header_json(char *out, int n, const char *const *names, const bc_shape *shapes,
                          const bool *half, int nmeta, const char *const *keys,
                          const char *const *vals) {
  size_t len = 0;
  char num[64];
  const char *meta = "{\"__metadata__\":{\"format\":\"pt\"";
  put(out, &len, meta, strlen(meta));
  for (int i = 0; i < nmeta; i++) {
    put(out, &len, ",", 1);
    put_json_str(out, &len, keys[i]);
    put(out, &len, ":", 1);
    put_json_str(out, &len, vals[i]);
  }
  put(out, &len, "}", 1);
  uint64_t off = 0;
  for (int i = 0; i < n; i++) {
    put(out, &len, ",", 1);
    put_json_str(out, &len, names[i]);
    const char *dt = half && half[i] ? ":{\"dtype\":\"F16\",\"shape\":[" : ":{\"dtype\":\"F32\",\"shape\":[";
    put(out, &len, dt, strlen(dt));
    for (int k = 0; k < shapes[i].rank; k++) {
      int m = snprintf(num, sizeof num, k ? ",%lld" : "%lld", (long long)shapes[i].d[k]);
      put(out, &len, num, (size_t)m);
    }
    uint64_t bytes = (uint64_t)bc_shape_numel(&shapes[i]) * (half && half[i] ? 2 : 4);
    int m = snprintf(num, sizeof num, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                     (unsigned long long)(off + bytes));
    put(out, &len, num, (size_t)m);
    off += bytes;
  }
  put(out, &len, "}", 1);
  return len;
}

static int write_st(bc_ctx *ctx, const char *path, int n, const char *const *names,
                    const bc_shape *shapes, const float *const *data, const bool *half, int nmeta,
                    const char *const *keys, const char *const *vals);

int bcS_write(bc_ctx *ctx, const char *path, int n, const char *const *names,
              const bc_shape *shapes, const float *const *data) {
  return write_st(ctx, path, n, names, shapes, data, NULL, 0, NULL, NULL);
}

int bcS_write_f16(bc_ctx *ctx, const char *path, int n, const char *const *names,
                  const bc_shape *shapes, const float *const *data, const bool *half) {
  return write_st(ctx, path, n, names, shapes, data, half, 0, NULL, NULL);
}

int bcS_write_meta(bc_ctx *ctx, const char *path, int n, const char *const *names,
                   const bc_shape *shapes, const float *const *data, int nmeta,
                   const char *const *keys, const char *const *vals) {
  return write_st(ctx, path, n, names, shapes, data, NULL, nmeta, keys, vals);
}

static int write_st(bc_ctx *ctx, const char *path, int n, const char *const *names,
                    const bc_shape *shapes, const float *const *data, const bool *half, int nmeta,
                    const char *const *keys, const char *const *vals) {
  for (int i = 0; i < nmeta; i++)
    if (!keys[i] || !vals[i] || !strcmp(keys[i], "format"))
      return bc_error(ctx, BC_EINTERNAL, "%s: error: bad metadata entry %d", path, i);
  if (n < 0) return bc_error(ctx, BC_EINTERNAL, "%s: error: negative tensor count", path);
  int rc = check_write_args(ctx, path, n, names, shapes);
  if (rc != BC_OK) return rc;
  // Padded with spaces so the data section starts 8-byte aligned (as the
  // reference writer does); readers strip trailing whitespace.
  size_t jlen = header_json(NULL, n, names, shapes, half, nmeta, keys, vals), hlen = (jlen + 7) & ~(size_t)7;
  char *hdr = malloc(hlen);
  int nparts = 2 + n;
  const void **parts = malloc((size_t)nparts * sizeof *parts);
  size_t *lens = malloc((size_t)nparts * sizeof *lens);
  // byte-swapped data on big-endian hosts, and F16 tensors' halves
  void **copies = calloc((size_t)n + 1, sizeof *copies);
  rc = (hdr && parts && lens && copies) ? BC_OK : bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", path);
  unsigned char len8[8];
  if (rc == BC_OK) {
    header_json(hdr, n, names, shapes, half, nmeta, keys, vals);
    memset(hdr + jlen, ' ', hlen - jlen);
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    parts[0] = len8, lens[0] = 8;
    parts[1] = hdr, lens[1] = hlen;
  }
  for (int i = 0; rc == BC_OK && i < n; i++) {
    size_t cnt = (size_t)bc_shape_numel(&shapes[i]);
    parts[2 + i] = data[i];
    lens[2 + i] = cnt * 4;
    if (half && half[i]) {  // little-endian halves, to nearest even
      unsigned char *h = cnt ? malloc(cnt * 2) : NULL;
      if (cnt && !h) {
        rc = bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", path);
        break;
      }
      for (size_t k = 0; k < cnt; k++) {
        unsigned short b = bcrt_f32_to_f16(data[i][k]);
        h[2 * k] = (unsigned char)(b & 0xff), h[2 * k + 1] = (unsigned char)(b >> 8);
      }
      copies[i] = h, parts[2 + i] = h, lens[2 + i] = cnt * 2;
      continue;
    }
    if (host_is_le() || cnt == 0) continue;
    if (!(copies[i] = malloc(cnt * 4))) {
      rc = bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", path);
      break;
    }
    for (size_t k = 0; k < cnt; k++) {
      uint32_t u;
      memcpy(&u, &data[i][k], 4);
      u = (u >> 24) | ((u >> 8) & 0xFF00u) | ((u << 8) & 0xFF0000u) | (u << 24);
      memcpy((float *)copies[i] + k, &u, 4);
    }
    parts[2 + i] = copies[i];
  }
  if (rc == BC_OK) rc = bc_write_file_atomic(ctx, path, nparts, parts, lens);
  for (int i = 0; copies && i < n; i++) free(copies[i]);
  free(copies);
  free(lens);
  free(parts);
  free(hdr);
  return rc;
}

// --- reading __metadata__ back (training checkpoints) ---------------------------
// The header was validated by the runtime's reader (strict JSON, metadata
// values strings), so a small scanner suffices: skip values, decode strings.

typedef struct {
  const char *p, *end;
} meta_scan;

static void ms_ws(meta_scan *s) {
  while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')) s->p++;
}

// A JSON string at s->p (after whitespace) decoded into malloc'ed UTF-8
// (\uXXXX below 0x800 decoded, others and surrogates as '?'); NULL on OOM
// or when there is no string.
static char *ms_string(meta_scan *s) {
  ms_ws(s);
  if (s->p >= s->end || *s->p != '"') return NULL;
  const char *q = ++s->p;
  while (q < s->end && *q != '"') q += *q == '\\' ? 2 : 1;
  char *out = malloc((size_t)(q - s->p) + 1), *o = out;
  if (!out) return NULL;
  while (s->p < q) {
    char c = *s->p++;
    if (c != '\\') { *o++ = c; continue; }
    c = *s->p++;
    if (c == 'u' && q - s->p >= 4) {
      unsigned u = 0;
      for (int i = 0; i < 4; i++) {
        char h = *s->p++;
        u = u * 16 + (unsigned)(h <= '9' ? h - '0' : (h | 32) - 'a' + 10);
      }
      if (u < 0x80) *o++ = (char)u;
      else if (u < 0x800) *o++ = (char)(0xC0 | (u >> 6)), *o++ = (char)(0x80 | (u & 63));
      else *o++ = '?';
    } else {
      *o++ = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c == 'b' ? '\b' : c == 'f' ? '\f' : c;
    }
  }
  *o = '\0';
  s->p = q + 1;
  return out;
}

// Skips one JSON value.
static void ms_skip(meta_scan *s) {
  ms_ws(s);
  int depth = 0;
  while (s->p < s->end) {
    char c = *s->p;
    if (c == '"') {
      free(ms_string(s));
      if (!depth) return;
      continue;
    }
    if (c == '{' || c == '[') depth++;
    else if (c == '}' || c == ']') {
      if (!depth) return;
      if (--depth == 0) { s->p++; return; }
    } else if (!depth && (c == ',' || c == ' ' || c == '\n' || c == '\t' || c == '\r')) return;
    s->p++;
  }
}

static int meta_object(meta_scan *s, int max, char **keys, char **vals) {
  int n = 0;
  ms_ws(s);
  s->p++;  // '{'
  for (;;) {
    ms_ws(s);
    if (s->p >= s->end || *s->p == '}') return n;
    char *k = ms_string(s);
    ms_ws(s);
    s->p++;  // ':'
    char *v = ms_string(s);
    if (!k || !v) {
      free(k);
      free(v);
      for (int i = 0; i < n; i++) free(keys[i]), free(vals[i]);
      return -1;
    }
    if (n < max) keys[n] = k, vals[n++] = v;
    else free(k), free(v);
    ms_ws(s);
    if (s->p < s->end && *s->p == ',') s->p++;
  }
}

int bcS_read_meta(bc_ctx *ctx, const bc_st_file *f, int max, char **keys, char **vals) {
  if (f->gg) return 0;  // a GGUF file carries no blockc checkpoint metadata
  uint64_t hlen = f->data_off - 8;
  char *hdr = malloc((size_t)hlen + 1);
  if (!hdr) return bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", f->path), -1;
  if (fseeko(f->fp, 8, SEEK_SET) != 0 || fread(hdr, 1, (size_t)hlen, f->fp) != hlen) {
    free(hdr);
    return bc_error(ctx, BC_EIO, "%s: error: cannot read the header", f->path), -1;
  }
  meta_scan s = {hdr, hdr + hlen};
  int n = 0;
  ms_ws(&s);
  s.p++;  // the root '{'
  for (;;) {
    ms_ws(&s);
    if (s.p >= s.end || *s.p == '}') break;
    char *k = ms_string(&s);
    if (!k) { n = -1; break; }
    ms_ws(&s);
    s.p++;  // ':'
    bool meta = !strcmp(k, "__metadata__");
    free(k);
    if (meta) {
      n = meta_object(&s, max, keys, vals);
      break;
    }
    ms_skip(&s);
    ms_ws(&s);
    if (s.p < s.end && *s.p == ',') s.p++;
  }
  free(hdr);
  if (n < 0) bc_error(ctx, BC_ENOMEM, "%s: error: out of memory reading the metadata", f->path);
  return n;
}
