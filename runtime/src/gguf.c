/* gguf.c — the GGUF reader: llama.cpp's model files, as they are.
 * One part of the runtime: tools/amalgamate.sh concatenates runtime/src/
 * into runtime/blockc_rt.c (the file users vendor); prelude.c has the
 * includes and macros every part uses; io.c the errors and sources.
 *
 * A GGUF file (versions 2 and 3; all little-endian) is
 *   "GGUF", u32 version, u64 tensor_count, u64 kv_count,
 *   kv_count times:     string key, u32 value type, value,
 *   tensor_count times: string name, u32 n_dims, u64 ne[n_dims], u32 ggml type,
 *                       u64 offset (from the start of the data section),
 *   padding to general.alignment (32 by default), the data section;
 * a string is u64 length + bytes (no NUL); an array value is u32 element
 * type, u64 count, the elements.  ne[0] is the fastest-varying axis, so a
 * PyTorch (out, in) matrix has ne = {in, out}.
 *
 * The whole header is checked before any tensor data is read: known value
 * and ggml types, counts and lengths that fit in the file (so nothing is
 * allocated that the file's size does not bound), no nested arrays, booleans
 * 0 or 1, unique keys and tensor names with no NUL and at most
 * BCRT_GGUF_MAX_NAME bytes, 1..4 dims each >= 1 with no overflow, a row
 * length that is a whole number of the type's blocks, aligned offsets, and
 * tensors that lie inside the data section without sharing a byte.
 * Tensors are then read one at a time and converted to float
 * (bcrt_gguf_read_f32): F32, F16, BF16 and the block types Q8_0, Q4_0,
 * Q4_1, Q5_0, Q5_1 (32 weights per block) and Q4_K, Q6_K (256), each as
 * ggml's reference dequantization computes it. */
#ifndef BLOCKC_NO_IO
/* --- GGUF --------------------------------------------------------------------- */

/* ggml's types: id, name, weights per block, bytes per block (0: no such id). */
static const struct {
  const char *name;
  unsigned blck, size;
} gg_types[] = {
    [0] = {"F32", 1, 4},       [1] = {"F16", 1, 2},       [2] = {"Q4_0", 32, 18},
    [3] = {"Q4_1", 32, 20},    [6] = {"Q5_0", 32, 22},    [7] = {"Q5_1", 32, 24},
    [8] = {"Q8_0", 32, 34},    [10] = {"Q2_K", 256, 84},  [11] = {"Q3_K", 256, 110},
    [12] = {"Q4_K", 256, 144}, [13] = {"Q5_K", 256, 176}, [14] = {"Q6_K", 256, 210},
    [15] = {"Q8_K", 256, 292}, [24] = {"I8", 1, 1},       [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},      [27] = {"I64", 1, 8},      [28] = {"F64", 1, 8},
    [30] = {"BF16", 1, 2},
};
#define GG_NTYPES ((int)(sizeof gg_types / sizeof gg_types[0]))

/* GGUF value types: bytes of a scalar (0: string or array). */
static const unsigned char gg_vsize[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
static const char *const gg_vname[] = {"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
                                       "bool", "string", "array", "uint64", "int64", "float64"};

struct bcrt_gguf_file {
  bcrt_source src;
  FILE *own;
  unsigned version, alignment;
  unsigned long long data_off;
  bcrt_gguf_kv *kv;            /* in file order */
  int nkv;
  bcrt_gguf_tensor *t;         /* sorted by name */
  int n;
};

const char *bcrt_gguf_type_name(int type) {
  return type >= 0 && type < GG_NTYPES && gg_types[type].name ? gg_types[type].name : NULL;
}

void bcrt_gguf_close(bcrt_gguf_file *f) {
  if (!f) return;
  for (int i = 0; i < f->nkv; i++) free((void *)(uintptr_t)f->kv[i].key), free((void *)(uintptr_t)f->kv[i].str);
  for (int i = 0; i < f->n; i++) free((void *)(uintptr_t)f->t[i].name);
  free(f->kv);
  free(f->t);
  if (f->own) fclose(f->own);
  free(f);
}

int bcrt_gguf_count(const bcrt_gguf_file *f) { return f ? f->n : 0; }
const bcrt_gguf_tensor *bcrt_gguf_tensor_at(const bcrt_gguf_file *f, int i) {
  return f && i >= 0 && i < f->n ? &f->t[i] : NULL;
}
int bcrt_gguf_kv_count(const bcrt_gguf_file *f) { return f ? f->nkv : 0; }
const bcrt_gguf_kv *bcrt_gguf_kv_at(const bcrt_gguf_file *f, int i) {
  return f && i >= 0 && i < f->nkv ? &f->kv[i] : NULL;
}
unsigned bcrt_gguf_version(const bcrt_gguf_file *f) { return f ? f->version : 0; }

const bcrt_gguf_tensor *bcrt_gguf_find(const bcrt_gguf_file *f, const char *name) {
  int lo = 0, hi = f && name ? f->n - 1 : -1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2, c = strcmp(f->t[mid].name, name);
    if (c == 0) return &f->t[mid];
    if (c < 0) lo = mid + 1;
    else hi = mid - 1;
  }
  return NULL;
}

const bcrt_gguf_kv *bcrt_gguf_get(const bcrt_gguf_file *f, const char *key) {
  for (int i = 0; f && key && i < f->nkv; i++)
    if (!strcmp(f->kv[i].key, key)) return &f->kv[i];
  return NULL;
}

/* A reader over the source with a small buffer: the header is parsed
 * front to back, most of it in small pieces. */
typedef struct {
  const bcrt_source *src;
  unsigned long long pos;     /* the next byte's offset in the file */
  unsigned char buf[1 << 16];
  unsigned long long bpos;    /* file offset of buf[0] */
  size_t blen;
  bcrt_error *e;
} gg_reader;

#define GG_BAD(r, code, t, ...) rd_fail((r)->e, BCRT_EFORMAT, code, t, (r)->pos, __VA_ARGS__)

static int gg_bytes(gg_reader *r, void *dst, size_t n, const char *what) {
  if (n > r->src->size || r->pos > r->src->size - n)
    return GG_BAD(r, BCRT_ERR_SIZE, NULL, "the file ends inside %s (offset %llu, %llu bytes in all)", what,
                  r->pos, r->src->size);
  unsigned char *d = dst;
  while (n) {
    if (r->pos < r->bpos || r->pos >= r->bpos + r->blen) {
      unsigned long long left = r->src->size - r->pos;
      r->blen = left < sizeof r->buf ? (size_t)left : sizeof r->buf;
      r->bpos = r->pos;
      if (!src_read(r->src, r->bpos, r->buf, r->blen))
        return rd_fail(r->e, BCRT_EIO, BCRT_ERR_IO, NULL, r->pos, "read failed at offset %llu", r->pos);
    }
    size_t at = (size_t)(r->pos - r->bpos), c = r->blen - at < n ? r->blen - at : n;
    if (d) memcpy(d, r->buf + at, c), d += c;
    r->pos += c, n -= c;
  }
  return BCRT_OK;
}

static unsigned long long gg_le(const unsigned char *b, int n) {
  unsigned long long v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | b[i];
  return v;
}

static int gg_u32(gg_reader *r, unsigned *v, const char *what) {
  unsigned char b[4];
  int st = gg_bytes(r, b, 4, what);
  if (!st) *v = (unsigned)gg_le(b, 4);
  return st;
}

static int gg_u64(gg_reader *r, unsigned long long *v, const char *what) {
  unsigned char b[8];
  int st = gg_bytes(r, b, 8, what);
  if (!st) *v = gg_le(b, 8);
  return st;
}

/* A string's length, checked against the bytes left; with keep, a NUL
 * terminated copy (refused with a NUL inside or over max bytes). */
static int gg_string(gg_reader *r, char **keep, unsigned long long max, const char *what) {
  unsigned long long len;
  int st = gg_u64(r, &len, what);
  if (st) return st;
  if (len > r->src->size - r->pos)
    return GG_BAD(r, BCRT_ERR_SIZE, NULL, "%s is %llu bytes long but only %llu bytes of the file are left", what,
                  len, r->src->size - r->pos);
  if (!keep) return gg_bytes(r, NULL, (size_t)len, what);
  if (len > max) return GG_BAD(r, BCRT_ERR_SCHEMA, NULL, "%s is %llu bytes long (limit %llu)", what, len, max);
  char *s = malloc((size_t)len + 1);
  if (!s) return rd_fail(r->e, BCRT_ENOMEM, BCRT_ERR_NOMEM, NULL, 0, "out of memory");
  if ((st = gg_bytes(r, s, (size_t)len, what))) {
    free(s);
    return st;
  }
  s[len] = '\0';
  if (strlen(s) != len) {
    char k[256];
    free(s);
    return GG_BAD(r, BCRT_ERR_SCHEMA, NULL, "%s holds a NUL byte", esc(what, k, sizeof k));
  }
  *keep = s;
  return BCRT_OK;
}

/* One scalar of value type t into kv (the first element of an array is not
 * kept: arrays are read with bcrt_gguf_array_*). */
static int gg_scalar(gg_reader *r, unsigned t, bcrt_gguf_kv *kv, int keep, const char *key) {
  unsigned char b[8];
  int st = gg_bytes(r, b, gg_vsize[t], "a metadata value");
  if (st || !keep) return st;
  unsigned long long u = gg_le(b, gg_vsize[t]);
  int bits = 8 * gg_vsize[t];
  if (t == BCRT_GGUF_BOOL && u > 1)
    return GG_BAD(r, BCRT_ERR_SCHEMA, key, "metadata '%s': a bool of value %llu (0 or 1)", key, u);
  if (t == BCRT_GGUF_FLOAT32) {
    kv->f = (double)float_of((uint32_t)u);
  } else if (t == BCRT_GGUF_FLOAT64) {
    double d;
    memcpy(&d, &u, 8); /* u holds the file's bytes as a host integer */
    kv->f = d;
  } else if (t == BCRT_GGUF_INT8 || t == BCRT_GGUF_INT16 || t == BCRT_GGUF_INT32 || t == BCRT_GGUF_INT64) {
    long long s = bits == 64 ? (long long)u : (long long)(u ^ (1ull << (bits - 1))) - (1ll << (bits - 1));
    kv->i = s, kv->f = (double)s, kv->is_int = 1, kv->u = s >= 0 ? (unsigned long long)s : 0;
    kv->neg = s < 0;
  } else {
    kv->u = u, kv->i = (long long)u, kv->f = (double)u, kv->is_int = 1;
  }
  return BCRT_OK;
}

static int gg_value(gg_reader *r, unsigned t, bcrt_gguf_kv *kv, const char *key) {
  char k[256];
  if (t >= sizeof gg_vsize)
    return GG_BAD(r, BCRT_ERR_DTYPE, key, "metadata '%s': unknown value type %u", esc(key, k, sizeof k), t);
  if (t == BCRT_GGUF_STRING) {
    char *s = NULL;
    int st = gg_string(r, &s, BCRT_GGUF_MAX_STRING, "a metadata string");
    if (!st) kv->str = s, kv->count = 1;
    return st;
  }
  if (t != BCRT_GGUF_ARRAY) {
    kv->count = 1;
    return gg_scalar(r, t, kv, 1, esc(key, k, sizeof k));
  }
  unsigned et;
  unsigned long long n;
  int st = gg_u32(r, &et, "an array's element type");
  if (!st) st = gg_u64(r, &n, "an array's length");
  if (st) return st;
  if (et >= sizeof gg_vsize)
    return GG_BAD(r, BCRT_ERR_DTYPE, key, "metadata '%s': an array of unknown value type %u", esc(key, k, sizeof k), et);
  if (et == BCRT_GGUF_ARRAY)
    return GG_BAD(r, BCRT_ERR_SCHEMA, key, "metadata '%s': an array of arrays (not supported)", esc(key, k, sizeof k));
  unsigned long long min = et == BCRT_GGUF_STRING ? 8 : gg_vsize[et];
  if (n > (r->src->size - r->pos) / min)
    return GG_BAD(r, BCRT_ERR_SIZE, key, "metadata '%s': an array of %llu %s values does not fit in the file",
                  esc(key, k, sizeof k), n, gg_vname[et]);
  kv->elem_type = (int)et, kv->count = n, kv->offset = r->pos;
  if (et != BCRT_GGUF_STRING) return gg_bytes(r, NULL, (size_t)(n * min), "an array");
  for (unsigned long long i = 0; i < n && !st; i++) st = gg_string(r, NULL, 0, "an array's string");
  return st;
}

static int gg_kvs(gg_reader *r, bcrt_gguf_file *f, unsigned long long nkv) {
  f->kv = calloc((size_t)(nkv ? nkv : 1), sizeof *f->kv);
  if (!f->kv) return rd_fail(r->e, BCRT_ENOMEM, BCRT_ERR_NOMEM, NULL, 0, "out of memory");
  for (unsigned long long i = 0; i < nkv; i++) {
    bcrt_gguf_kv *kv = &f->kv[i];
    char *key = NULL, k[256];
    unsigned t;
    int st = gg_string(r, &key, BCRT_GGUF_MAX_NAME, "a metadata key");
    if (st) return st;
    kv->key = key, f->nkv = (int)i + 1;
    if (!*key) return GG_BAD(r, BCRT_ERR_SCHEMA, NULL, "metadata key %llu is empty", i);
    for (unsigned long long j = 0; j < i; j++)
      if (!strcmp(f->kv[j].key, key))
        return GG_BAD(r, BCRT_ERR_DUPLICATE, key, "metadata key '%s' appears twice", esc(key, k, sizeof k));
    if ((st = gg_u32(r, &t, "a metadata value type"))) return st;
    kv->type = (int)t, kv->elem_type = -1;
    if ((st = gg_value(r, t, kv, key))) return st;
  }
  return BCRT_OK;
}

static int gg_cmp_name(const void *a, const void *b) {
  return strcmp(((const bcrt_gguf_tensor *)a)->name, ((const bcrt_gguf_tensor *)b)->name);
}
static int gg_cmp_off(const void *a, const void *b) {
  const bcrt_gguf_tensor *x = *(const bcrt_gguf_tensor *const *)a, *y = *(const bcrt_gguf_tensor *const *)b;
  return (x->offset > y->offset) - (x->offset < y->offset);
}

static int gg_tensor(gg_reader *r, bcrt_gguf_tensor *t) {
  char *name = NULL, k[256];
  unsigned nd, type;
  int st = gg_string(r, &name, BCRT_GGUF_MAX_NAME, "a tensor name");
  if (st) return st;
  t->name = name;
  esc(name, k, sizeof k);
  if (!*name) return GG_BAD(r, BCRT_ERR_SCHEMA, NULL, "a tensor with an empty name");
  if ((st = gg_u32(r, &nd, "a tensor's dims"))) return st;
  if (nd < 1 || nd > 4)
    return GG_BAD(r, BCRT_ERR_SHAPE, name, "tensor '%s': %u dims (GGUF tensors have 1 to 4)", k, nd);
  t->rank = (int)nd;
  unsigned long long numel = 1;
  for (unsigned d = 0; d < nd; d++) {
    if ((st = gg_u64(r, &t->ne[d], "a tensor's dims"))) return st;
    if (t->ne[d] == 0 || t->ne[d] > (1ull << 40) || numel > (1ull << 48) / t->ne[d])
      return GG_BAD(r, BCRT_ERR_SHAPE, name, "tensor '%s': ne[%u] = %llu is out of range", k, d, t->ne[d]);
    numel *= t->ne[d];
  }
  for (unsigned d = nd; d < 4; d++) t->ne[d] = 1;
  if ((st = gg_u32(r, &type, "a tensor's type"))) return st;
  if (!bcrt_gguf_type_name((int)type))
    return GG_BAD(r, BCRT_ERR_DTYPE, name, "tensor '%s': unknown ggml type %u", k, type);
  t->type = (int)type, t->type_name = gg_types[type].name;
  if (t->ne[0] % gg_types[type].blck)
    return GG_BAD(r, BCRT_ERR_SHAPE, name, "tensor '%s': rows of %llu weights are not whole %s blocks of %u", k,
                  t->ne[0], t->type_name, gg_types[type].blck);
  t->numel = numel;
  t->bytes = numel / gg_types[type].blck * gg_types[type].size;
  return gg_u64(r, &t->offset, "a tensor's offset");
}

static int gg_tensors(gg_reader *r, bcrt_gguf_file *f, unsigned long long n) {
  f->t = calloc((size_t)(n ? n : 1), sizeof *f->t);
  if (!f->t) return rd_fail(r->e, BCRT_ENOMEM, BCRT_ERR_NOMEM, NULL, 0, "out of memory");
  for (unsigned long long i = 0; i < n; i++) {
    f->n = (int)i + 1;
    int st = gg_tensor(r, &f->t[i]);
    if (st) return st;
  }
  return BCRT_OK;
}

/* Alignment, data section, every tensor inside it and aligned, no two
 * sharing a byte, no name twice. */
static int gg_layout(gg_reader *r, bcrt_gguf_file *f) {
  char k[256];
  const bcrt_gguf_kv *a = bcrt_gguf_get(f, "general.alignment");
  f->alignment = 32;
  if (a) {
    if (a->type != BCRT_GGUF_UINT32 || a->u == 0 || (a->u & (a->u - 1)) || a->u > (1u << 20))
      return GG_BAD(r, BCRT_ERR_SCHEMA, NULL, "general.alignment must be a uint32 power of two up to 2^20");
    f->alignment = (unsigned)a->u;
  }
  unsigned long long al = f->alignment, end = r->pos;
  f->data_off = (end + al - 1) / al * al;
  if (f->data_off > r->src->size && f->n)
    return GG_BAD(r, BCRT_ERR_SIZE, NULL, "the file ends before its data section (offset %llu)", f->data_off);
  unsigned long long data_len = f->data_off <= r->src->size ? r->src->size - f->data_off : 0;
  bcrt_gguf_tensor **by = malloc((size_t)(f->n ? f->n : 1) * sizeof *by);
  if (!by) return rd_fail(r->e, BCRT_ENOMEM, BCRT_ERR_NOMEM, NULL, 0, "out of memory");
  int st = BCRT_OK;
  for (int i = 0; i < f->n && !st; i++) {
    bcrt_gguf_tensor *t = &f->t[i];
    by[i] = t;
    if (t->offset % al)
      st = GG_BAD(r, BCRT_ERR_OFFSETS, t->name, "tensor '%s': offset %llu is not a multiple of the alignment %u",
                  esc(t->name, k, sizeof k), t->offset, f->alignment);
    else if (t->offset > data_len || t->bytes > data_len - t->offset)
      st = GG_BAD(r, BCRT_ERR_OFFSETS, t->name, "tensor '%s': %llu bytes at offset %llu run past the end of the "
                  "data section (%llu bytes)", esc(t->name, k, sizeof k), t->bytes, t->offset, data_len);
  }
  if (!st && f->n > 1) {
    qsort(by, (size_t)f->n, sizeof *by, gg_cmp_off);
    for (int i = 1; i < f->n && !st; i++)
      if (by[i - 1]->offset + by[i - 1]->bytes > by[i]->offset) {
        char k2[256];
        st = GG_BAD(r, BCRT_ERR_OVERLAP, by[i]->name, "tensors '%s' and '%s' share bytes",
                    esc(by[i - 1]->name, k, sizeof k), esc(by[i]->name, k2, sizeof k2));
      }
  }
  free(by);
  if (st) return st;
  for (int i = 0; i < f->n; i++) f->t[i].offset += f->data_off;
  qsort(f->t, (size_t)f->n, sizeof *f->t, gg_cmp_name);
  for (int i = 1; i < f->n; i++)
    if (!strcmp(f->t[i - 1].name, f->t[i].name))
      return GG_BAD(r, BCRT_ERR_DUPLICATE, f->t[i].name, "tensor name '%s' appears twice",
                    esc(f->t[i].name, k, sizeof k));
  return BCRT_OK;
}

int bcrt_gguf_open_source(const bcrt_source *src, bcrt_gguf_file **out, bcrt_error *e) {
  err_clear(e);
  if (!src || !out) return rd_fail(e, BCRT_EINVAL, BCRT_ERR_ARG, NULL, 0, "bad arguments");
  *out = NULL;
  bcrt_gguf_file *f = calloc(1, sizeof *f);
  gg_reader *r = malloc(sizeof *r);
  if (!f || !r) {
    free(f), free(r);
    return rd_fail(e, BCRT_ENOMEM, BCRT_ERR_NOMEM, NULL, 0, "out of memory");
  }
  f->src = *src;
  r->src = &f->src, r->pos = 0, r->bpos = 0, r->blen = 0, r->e = e;
  unsigned char magic[4];
  unsigned long long nt = 0, nkv = 0;
  int st = gg_bytes(r, magic, 4, "the magic");
  if (!st && memcmp(magic, "GGUF", 4))
    st = rd_fail(e, BCRT_EFORMAT, BCRT_ERR_HEADER, NULL, 0, "not a GGUF file (it does not start with \"GGUF\")");
  if (!st) st = gg_u32(r, &f->version, "the version");
  if (!st && (f->version < 2 || f->version > 3))
    st = rd_fail(e, BCRT_EFORMAT, BCRT_ERR_HEADER, NULL, 4, "GGUF version %u (versions 2 and 3 are read%s)",
                 f->version, f->version == 1 ? "; version 1 had 32-bit counts" : "");
  if (!st) st = gg_u64(r, &nt, "the tensor count");
  if (!st) st = gg_u64(r, &nkv, "the metadata count");
  /* a tensor info takes at least 8 + 1 + 4 + 8 + 4 + 8 bytes, a key/value 8 + 1 + 4 + 1 */
  if (!st && (nt > BCRT_GGUF_MAX_COUNT || nt > src->size / 33))
    st = GG_BAD(r, BCRT_ERR_SIZE, NULL, "%llu tensors cannot fit in a file of %llu bytes (limit %d)", nt, src->size,
                BCRT_GGUF_MAX_COUNT);
  if (!st && (nkv > BCRT_GGUF_MAX_COUNT || nkv > src->size / 14))
    st = GG_BAD(r, BCRT_ERR_SIZE, NULL, "%llu metadata entries cannot fit in a file of %llu bytes (limit %d)", nkv,
                src->size, BCRT_GGUF_MAX_COUNT);
  if (!st) st = gg_kvs(r, f, nkv);
  if (!st) st = gg_tensors(r, f, nt);
  if (!st) st = gg_layout(r, f);
  free(r);
  if (st) {
    bcrt_gguf_close(f);
    return st;
  }
  *out = f;
  return BCRT_OK;
}

int bcrt_gguf_open(const char *path, bcrt_gguf_file **out, bcrt_error *e) {
  err_clear(e);
  if (!path || !out) return rd_fail(e, BCRT_EINVAL, BCRT_ERR_ARG, NULL, 0, "bad arguments");
  bcrt_source src;
  FILE *fp = open_source(path, &src, e);
  if (!fp) return e ? e->status : BCRT_EIO;
  int st = bcrt_gguf_open_source(&src, out, e);
  if (st) fclose(fp);
  else (*out)->own = fp, (*out)->src.handle = fp;
  return st;
}

/* --- metadata values ---------------------------------------------------------- */

int bcrt_gguf_array_num(const bcrt_gguf_file *f, const bcrt_gguf_kv *kv, unsigned long long i, double *v) {
  if (!f || !kv || kv->type != BCRT_GGUF_ARRAY || kv->elem_type == BCRT_GGUF_STRING || i >= kv->count || !v)
    return BCRT_EINVAL;
  unsigned es = gg_vsize[kv->elem_type];
  unsigned char b[8];
  if (!src_read(&f->src, kv->offset + i * es, b, es)) return BCRT_EIO;
  unsigned long long u = gg_le(b, (int)es);
  int t = kv->elem_type, bits = 8 * (int)es;
  if (t == BCRT_GGUF_FLOAT32) *v = (double)float_of((uint32_t)u);
  else if (t == BCRT_GGUF_FLOAT64) memcpy(v, &u, 8);
  else if (t == BCRT_GGUF_INT8 || t == BCRT_GGUF_INT16 || t == BCRT_GGUF_INT32 || t == BCRT_GGUF_INT64)
    *v = (double)(bits == 64 ? (long long)u : (long long)(u ^ (1ull << (bits - 1))) - (1ll << (bits - 1)));
  else *v = (double)u;
  return BCRT_OK;
}

int bcrt_gguf_array_strings(const bcrt_gguf_file *f, const bcrt_gguf_kv *kv,
                            int (*each)(void *ud, unsigned long long i, const char *s, unsigned long len),
                            void *ud) {
  if (!f || !kv || kv->type != BCRT_GGUF_ARRAY || kv->elem_type != BCRT_GGUF_STRING || !each) return BCRT_EINVAL;
  unsigned long long off = kv->offset;
  char *buf = NULL;
  size_t cap = 0;
  int st = BCRT_OK;
  for (unsigned long long i = 0; i < kv->count && !st; i++) {
    unsigned char b[8];
    if (!src_read(&f->src, off, b, 8)) st = BCRT_EIO;
    unsigned long long len = st ? 0 : gg_le(b, 8);
    if (!st && len + 1 > cap) {
      char *nb = realloc(buf, (size_t)len + 1);
      if (!nb) st = BCRT_ENOMEM;
      else buf = nb, cap = (size_t)len + 1;
    }
    if (!st && !src_read(&f->src, off + 8, buf, (size_t)len)) st = BCRT_EIO;
    if (!st) {
      buf[len] = '\0';
      st = each(ud, i, buf, (unsigned long)len);
    }
    off += 8 + len;
  }
  free(buf);
  return st;
}

/* --- tensors -------------------------------------------------------------------- */

static float gg_f16(const unsigned char *p) { return f16_to_f32((unsigned)p[0] | (unsigned)p[1] << 8); }

/* get_scale_min_k4 of ggml's k-quants: the j-th 6-bit scale and min of a
 * Q4_K super-block's 12 packed bytes. */
static void gg_scale_min_k4(int j, const unsigned char *q, unsigned *d, unsigned *m) {
  if (j < 4) {
    *d = q[j] & 63u, *m = q[j + 4] & 63u;
  } else {
    *d = (q[j + 4] & 0xFu) | ((unsigned)(q[j - 4] >> 6) << 4);
    *m = (unsigned)(q[j + 4] >> 4) | ((unsigned)(q[j] >> 6) << 4);
  }
}

/* One block of type `type` at b into y (its blck floats). */
static void gg_block(int type, const unsigned char *b, float *y) {
  switch (type) {
  case 0: y[0] = float_of((uint32_t)gg_le(b, 4)); break;
  case 1: y[0] = gg_f16(b); break;
  case 30: y[0] = float_of((uint32_t)(b[0] | b[1] << 8) << 16); break;
  case 8: { /* Q8_0: f16 d, int8 q[32]: y = d q */
    float d = gg_f16(b);
    for (int j = 0; j < 32; j++) y[j] = d * (float)(signed char)b[2 + j];
    break;
  }
  case 2: { /* Q4_0: f16 d, 16 bytes of nibbles: low = y[j], high = y[j+16], y = d (q - 8) */
    float d = gg_f16(b);
    for (int j = 0; j < 16; j++)
      y[j] = d * (float)((int)(b[2 + j] & 0xF) - 8), y[j + 16] = d * (float)((int)(b[2 + j] >> 4) - 8);
    break;
  }
  case 3: { /* Q4_1: f16 d, f16 m: y = d q + m */
    float d = gg_f16(b), m = gg_f16(b + 2);
    for (int j = 0; j < 16; j++)
      y[j] = (float)(b[4 + j] & 0xF) * d + m, y[j + 16] = (float)(b[4 + j] >> 4) * d + m;
    break;
  }
  case 6: case 7: { /* Q5_0 (f16 d, u32 high bits, nibbles; y = d (q - 16)) and Q5_1 (+ f16 m; y = d q + m) */
    int q51 = type == 7;
    float d = gg_f16(b), m = q51 ? gg_f16(b + 2) : 0;
    const unsigned char *hb = b + (q51 ? 4 : 2), *qs = hb + 4;
    uint32_t qh = (uint32_t)gg_le(hb, 4);
    for (int j = 0; j < 16; j++) {
      int x0 = (int)((qs[j] & 0xFu) | (((qh >> j) << 4) & 0x10u));
      int x1 = (int)((qs[j] >> 4) | ((qh >> (j + 12)) & 0x10u));
      if (q51) y[j] = (float)x0 * d + m, y[j + 16] = (float)x1 * d + m;
      else y[j] = (float)(x0 - 16) * d, y[j + 16] = (float)(x1 - 16) * d;
    }
    break;
  }
  case 12: { /* Q4_K: f16 d, f16 dmin, 12 bytes of 6-bit scales/mins, 128 bytes of nibbles */
    float d = gg_f16(b), dmin = gg_f16(b + 2);
    const unsigned char *sc = b + 4, *q = b + 16;
    for (int j = 0, is = 0; j < 256; j += 64, is += 2, q += 32) {
      unsigned s, mn;
      gg_scale_min_k4(is, sc, &s, &mn);
      float d1 = d * (float)s, m1 = dmin * (float)mn;
      gg_scale_min_k4(is + 1, sc, &s, &mn);
      float d2 = d * (float)s, m2 = dmin * (float)mn;
      for (int l = 0; l < 32; l++) y[j + l] = d1 * (float)(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; l++) y[j + 32 + l] = d2 * (float)(q[l] >> 4) - m2;
    }
    break;
  }
  case 14: { /* Q6_K: 128 bytes low nibbles, 64 bytes high 2-bit pairs, int8 scales[16], f16 d */
    const unsigned char *ql = b, *qh = b + 128;
    const signed char *sc = (const signed char *)(b + 192);
    float d = gg_f16(b + 208);
    for (int n = 0; n < 256; n += 128, ql += 64, qh += 32, sc += 8)
      for (int l = 0; l < 32; l++) {
        int is = l / 16;
        int q1 = (int)((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32;
        int q2 = (int)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        int q3 = (int)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        int q4 = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[n + l] = d * (float)sc[is] * (float)q1;
        y[n + l + 32] = d * (float)sc[is + 2] * (float)q2;
        y[n + l + 64] = d * (float)sc[is + 4] * (float)q3;
        y[n + l + 96] = d * (float)sc[is + 6] * (float)q4;
      }
    break;
  }
  }
}

int bcrt_gguf_can_read(int type) {
  return type == 0 || type == 1 || type == 30 || type == 8 || type == 2 || type == 3 || type == 6 || type == 7 ||
         type == 12 || type == 14;
}

/* A chunk of whole blocks at a time, so a big tensor needs no second copy. */
int bcrt_gguf_read_f32(const bcrt_gguf_file *f, const bcrt_gguf_tensor *t, float *dst, bcrt_error *e) {
  err_clear(e);
  if (!f || !t || !dst) return rd_fail(e, BCRT_EINVAL, BCRT_ERR_ARG, NULL, 0, "bad arguments");
  char k[256];
  if (!bcrt_gguf_can_read(t->type))
    return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_DTYPE, t->name, 0, "tensor '%s': type %s cannot be read as float "
                   "(F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K and Q6_K can)", esc(t->name, k, sizeof k),
                   t->type_name);
  unsigned blck = gg_types[t->type].blck, bs = gg_types[t->type].size;
  unsigned long long nb = t->numel / blck;
  unsigned char buf[1 << 15];
  size_t per = sizeof buf / bs;
  for (unsigned long long done = 0; done < nb;) {
    size_t c = nb - done < per ? (size_t)(nb - done) : per;
    if (!src_read(&f->src, t->offset + done * bs, buf, c * bs))
      return rd_fail(e, BCRT_EIO, BCRT_ERR_IO, t->name, t->offset + done * bs,
                     "read failed in tensor '%s' (file truncated while open?)", esc(t->name, k, sizeof k));
    for (size_t i = 0; i < c; i++) gg_block(t->type, buf + i * bs, dst + (done + i) * blck);
    done += c;
  }
  return BCRT_OK;
}

/* The raw bytes of t into dst (t->bytes of them). */
int bcrt_gguf_read_raw(const bcrt_gguf_file *f, const bcrt_gguf_tensor *t, void *dst, bcrt_error *e) {
  err_clear(e);
  if (!f || !t || !dst) return rd_fail(e, BCRT_EINVAL, BCRT_ERR_ARG, NULL, 0, "bad arguments");
  char k[256];
  if (!src_read(&f->src, t->offset, dst, (size_t)t->bytes))
    return rd_fail(e, BCRT_EIO, BCRT_ERR_IO, t->name, t->offset, "read failed in tensor '%s'",
                   esc(t->name, k, sizeof k));
  return BCRT_OK;
}
#endif /* BLOCKC_NO_IO */
