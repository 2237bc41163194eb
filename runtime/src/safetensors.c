/* safetensors.c — the safetensors reader and weights loader.
 * One part of the runtime: tools/amalgamate.sh concatenates runtime/src/
 * into runtime/blockc_rt.c (the file users vendor); prelude.c has the
 * includes and macros every part uses. */
#ifndef BLOCKC_NO_IO
/* --- safetensors -------------------------------------------------------------- */

/* The dtypes of the safetensors spec with a whole-byte element size. */
static const char *const st_dtypes[] = {"F32", "F16", "BF16", "F64", "I64", "I32", "I16", "I8",
                                        "U64", "U32", "U16", "U8", "BOOL", "F8_E4M3", "F8_E5M2",
                                        "F8_E8M0", "C64"};
static const unsigned char st_sizes[] = {4, 2, 2, 8, 8, 4, 2, 1, 8, 4, 2, 1, 1, 1, 1, 1, 8};

struct bcrt_st_file {
  bcrt_source src;
  FILE *own;                  /* the file bcrt_st_open opened, else NULL */
  unsigned long long data_off, data_len;
  bcrt_st_tensor *t;          /* sorted by name */
  int n, cap;
};

void bcrt_st_close(bcrt_st_file *f) {
  if (!f) return;
  for (int i = 0; i < f->n; i++) free((void *)(uintptr_t)f->t[i].name);
  free(f->t);
  if (f->own) fclose(f->own);
  free(f);
}

int bcrt_st_count(const bcrt_st_file *f) { return f ? f->n : 0; }
const bcrt_st_tensor *bcrt_st_tensor_at(const bcrt_st_file *f, int i) {
  return f && i >= 0 && i < f->n ? &f->t[i] : NULL;
}
unsigned long long bcrt_st_data_offset(const bcrt_st_file *f) { return f ? f->data_off : 0; }

const bcrt_st_tensor *bcrt_st_find(const bcrt_st_file *f, const char *name) {
  int lo = 0, hi = f && name ? f->n - 1 : -1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2, c = strcmp(f->t[mid].name, name);
    if (c == 0) return &f->t[mid];
    if (c < 0) lo = mid + 1;
    else hi = mid - 1;
  }
  return NULL;
}

/* "[2, 3]" for a file tensor's shape. */
static const char *dims_str(const unsigned long long *d, int rank, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < rank && k < n; i++) k += (size_t)snprintf(buf + k, n - k, i ? ", %llu" : "%llu", d[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

/* One safetensors header being checked: the file, its header text and
 * where the error goes. */
typedef struct {
  bcrt_st_file *f;
  const char *hdr;
  size_t hn;
  bcrt_error *e;
} st_reader;

#define ST_BAD(r, code, t, ...) rd_fail((r)->e, BCRT_EFORMAT, code, t, 0, __VA_ARGS__)

/* "__metadata__": an object whose values are strings. */
static int st_metadata(st_reader *r, json *j) {
  if (js_peek(j) != '{') return ST_BAD(r, BCRT_ERR_SCHEMA, NULL, "\"__metadata__\" is not a JSON object");
  j->p++;
  if (js_lit(j, '}')) return BCRT_OK;
  do {
    char *key = NULL, k[256];
    if (!js_string(j, &key)) return rd_fail(r->e, BCRT_ENOMEM, BCRT_ERR_NOMEM, NULL, 0, "out of memory");
    js_lit(j, ':');
    int str = js_peek(j) == '"';
    if (!str) ST_BAD(r, BCRT_ERR_SCHEMA, NULL, "\"__metadata__\" entry '%s' is not a string", esc(key, k, sizeof k));
    free(key);
    if (!str) return BCRT_EFORMAT;
    js_value(j);
  } while (js_lit(j, ','));
  js_lit(j, '}');
  return BCRT_OK;
}

/* Where each of an entry's three keys' values starts (NULL: absent); a
 * key given twice is an error (which one counts would be luck). */
static int st_entry_keys(st_reader *r, json *j, const char *name, const char **at) {
  static const char *const keys[] = {"dtype", "shape", "data_offsets"};
  int seen[3] = {0, 0, 0};
  char k[256];
  j->p++;
  if (!js_lit(j, '}')) {
    do {
      char *key = NULL;
      if (!js_string(j, &key)) return rd_fail(r->e, BCRT_ENOMEM, BCRT_ERR_NOMEM, NULL, 0, "out of memory");
      js_lit(j, ':');
      js_ws(j);
      for (int i = 0; i < 3; i++)
        if (!strcmp(key, keys[i]) && !seen[i]++) at[i] = j->p;
      free(key);
      js_value(j);
    } while (js_lit(j, ','));
    js_lit(j, '}');
  }
  for (int i = 0; i < 3; i++)
    if (seen[i] > 1)
      return ST_BAD(r, BCRT_ERR_SCHEMA, name, "tensor '%s': \"%s\" appears %d times",
                    esc(name, k, sizeof k), keys[i], seen[i]);
  for (int i = 0; i < 3; i++)
    if (!at[i]) return ST_BAD(r, BCRT_ERR_SCHEMA, name, "tensor '%s': missing \"%s\"", esc(name, k, sizeof k), keys[i]);
  return BCRT_OK;
}

static int st_dtype(st_reader *r, json *j, bcrt_st_tensor *t, const char *k) {
  char *dt = NULL, d[256];
  if (js_peek(j) != '"') return ST_BAD(r, BCRT_ERR_SCHEMA, t->name, "tensor '%s': \"dtype\" is not a string", k);
  if (!js_string(j, &dt)) return rd_fail(r->e, BCRT_ENOMEM, BCRT_ERR_NOMEM, NULL, 0, "out of memory");
  for (size_t i = 0; i < sizeof st_sizes && !t->dtype; i++)
    if (!strcmp(dt, st_dtypes[i])) t->dtype = st_dtypes[i], t->esize = st_sizes[i];
  if (!t->dtype)
    ST_BAD(r, BCRT_ERR_DTYPE, t->name, "tensor '%s': unknown dtype '%s' (safetensors dtypes are F32, F16, "
           "BF16, F64, I64, I32, ...)", k, esc(dt, d, sizeof d));
  free(dt);
  return t->dtype ? BCRT_OK : BCRT_EFORMAT;
}

static int st_shape(st_reader *r, json *j, bcrt_st_tensor *t, const char *k) {
  if (js_peek(j) != '[') return ST_BAD(r, BCRT_ERR_SCHEMA, t->name, "tensor '%s': \"shape\" is not an array", k);
  json c = *j;  /* count the dims first, for the message */
  int n = 0;
  c.p++;
  if (!js_lit(&c, ']')) do n++, js_value(&c); while (js_lit(&c, ','));
  if (n > ST_MAX_RANK)
    return ST_BAD(r, BCRT_ERR_SHAPE, t->name, "tensor '%s': shape has %d dims (limit %d)", k, n, ST_MAX_RANK);
  j->p++;
  for (t->rank = 0; t->rank < n; t->rank++) {
    if (t->rank) js_lit(j, ',');
    if (!js_uint(j, &t->shape[t->rank]))
      return ST_BAD(r, BCRT_ERR_SHAPE, t->name, "tensor '%s': shape[%d] is not a non-negative integer", k, t->rank);
  }
  /* numel * element size must fit in 63 bits (and, a fortiori, the file). */
  unsigned long long bytes = (unsigned long long)t->esize;
  char s[256];
  for (int i = 0; i < t->rank; i++) {
    if (t->shape[i] && bytes > (unsigned long long)INT64_MAX / t->shape[i])
      return ST_BAD(r, BCRT_ERR_SHAPE, t->name, "tensor '%s': shape %s has too many elements", k,
                    dims_str(t->shape, t->rank, s, sizeof s));
    bytes *= t->shape[i];
  }
  return BCRT_OK;
}

static int st_offsets(st_reader *r, json *j, bcrt_st_tensor *t, const char *k) {
  unsigned long long b = 0, en = 0, dl = r->f->data_len;
  int ok = js_lit(j, '[') && js_uint(j, &b) && js_lit(j, ',') && js_uint(j, &en) && js_lit(j, ']');
  if (!ok)
    return ST_BAD(r, BCRT_ERR_OFFSETS, t->name, "tensor '%s': \"data_offsets\" must be [begin, end], two "
                  "non-negative integers", k);
  t->begin = b, t->end = en;
  if (b > en)
    return ST_BAD(r, BCRT_ERR_OFFSETS, t->name, "tensor '%s': data_offsets [%llu, %llu] end before they begin", k, b, en);
  if (en > dl)
    return ST_BAD(r, BCRT_ERR_OFFSETS, t->name, "tensor '%s': data_offsets [%llu, %llu] run past the end of "
                  "the data section (%llu bytes)", k, b, en, dl);
  unsigned long long need = (unsigned long long)t->esize;
  for (int i = 0; i < t->rank; i++) need *= t->shape[i];
  char s[256];
  if (en - b != need)
    return ST_BAD(r, BCRT_ERR_OFFSETS, t->name, "tensor '%s': data_offsets [%llu, %llu] hold %llu bytes but "
                  "shape %s of %s needs %llu", k, b, en, en - b, dims_str(t->shape, t->rank, s, sizeof s),
                  t->dtype, need);
  return BCRT_OK;
}

/* One tensor entry (its name already taken by t): dtype, shape, offsets. */
static int st_entry(st_reader *r, json *j, bcrt_st_tensor *t) {
  char k[256];
  esc(t->name, k, sizeof k);
  if (js_peek(j) != '{') return ST_BAD(r, BCRT_ERR_SCHEMA, t->name, "tensor '%s': entry is not a JSON object", k);
  const char *at[3] = {NULL, NULL, NULL};
  int st = st_entry_keys(r, j, t->name, at);
  json v = *j;
  if (!st) v.p = at[0], st = st_dtype(r, &v, t, k);
  if (!st) v.p = at[1], st = st_shape(r, &v, t, k);
  if (!st) v.p = at[2], st = st_offsets(r, &v, t, k);
  return st;
}

static int st_add(st_reader *r, char *name) {
  bcrt_st_file *f = r->f;
  if (f->n == f->cap) {
    int cap = f->cap ? 2 * f->cap : 16;
    bcrt_st_tensor *nt = realloc(f->t, (size_t)cap * sizeof *nt);
    if (!nt) {
      free(name);
      return rd_fail(r->e, BCRT_ENOMEM, BCRT_ERR_NOMEM, NULL, 0, "out of memory");
    }
    f->t = nt, f->cap = cap;
  }
  memset(&f->t[f->n], 0, sizeof f->t[f->n]);
  f->t[f->n++].name = name;
  return BCRT_OK;
}

/* The entries of the (grammatically valid) root object. */
static int st_entries(st_reader *r) {
  json j = {r->hdr, r->hdr, r->hdr + r->hn, 0, NULL};
  if (js_peek(&j) != '{') return ST_BAD(r, BCRT_ERR_SCHEMA, NULL, "header is not a JSON object");
  j.p++;
  if (js_lit(&j, '}')) return BCRT_OK;
  int st = BCRT_OK;
  do {
    char *name = NULL;
    if (!js_string(&j, &name)) return rd_fail(r->e, BCRT_ENOMEM, BCRT_ERR_NOMEM, NULL, 0, "out of memory");
    js_lit(&j, ':');
    if (!strcmp(name, "__metadata__")) {
      free(name);
      st = st_metadata(r, &j);
    } else if (!(st = st_add(r, name))) {
      st = st_entry(r, &j, &r->f->t[r->f->n - 1]);
    }
  } while (!st && js_lit(&j, ','));
  return st;
}

static int st_cmp_name(const void *a, const void *b) {
  return strcmp(((const bcrt_st_tensor *)a)->name, ((const bcrt_st_tensor *)b)->name);
}

static int st_cmp_begin(const void *a, const void *b) {
  const bcrt_st_tensor *x = *(const bcrt_st_tensor *const *)a, *y = *(const bcrt_st_tensor *const *)b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return (x->end > y->end) - (x->end < y->end);
}

/* Sorted by name (for bcrt_st_find): a name given twice is an error. */
static int st_unique(st_reader *r) {
  bcrt_st_file *f = r->f;
  char k[256];
  if (f->n > 1) qsort(f->t, (size_t)f->n, sizeof *f->t, st_cmp_name);
  for (int i = 1; i < f->n; i++)
    if (!strcmp(f->t[i - 1].name, f->t[i].name))
      return ST_BAD(r, BCRT_ERR_DUPLICATE, f->t[i].name, "tensor '%s' appears more than once in the header",
                    esc(f->t[i].name, k, sizeof k));
  return BCRT_OK;
}

/* The data section is tiled exactly, as the reference implementation
 * requires: sorted by offset, each tensor begins where the previous one
 * ended (shared bytes would alias two tensors; a gap or a tail is data
 * nobody reads), and the last one ends at the end of the file. */
static int st_tiling(st_reader *r) {
  bcrt_st_file *f = r->f;
  const bcrt_st_tensor **by = malloc((size_t)(f->n ? f->n : 1) * sizeof *by);
  if (!by) return rd_fail(r->e, BCRT_ENOMEM, BCRT_ERR_NOMEM, NULL, 0, "out of memory");
  for (int i = 0; i < f->n; i++) by[i] = &f->t[i];
  qsort(by, (size_t)f->n, sizeof *by, st_cmp_begin);
  unsigned long long at = 0, base = f->data_off;
  const bcrt_st_tensor *prev = NULL;
  int st = BCRT_OK;
  char a[256], b[256];
  for (int i = 0; i < f->n && !st; i++) {
    const bcrt_st_tensor *t = by[i];
    if (t->begin < at)
      st = rd_fail(r->e, BCRT_EFORMAT, BCRT_ERR_OVERLAP, t->name, base + t->begin,
                "tensors '%s' (data_offsets [%llu, %llu]) and '%s' (data_offsets [%llu, %llu]) overlap",
                esc(prev->name, a, sizeof a), prev->begin, prev->end, esc(t->name, b, sizeof b), t->begin, t->end);
    else if (t->begin > at)
      st = rd_fail(r->e, BCRT_EFORMAT, BCRT_ERR_GAP, t->name, base + at,
                "bytes [%llu, %llu) of the data section belong to no tensor (before '%s'); safetensors "
                "files have no gaps", at, t->begin, esc(t->name, a, sizeof a));
    at = t->end;
    prev = t;
  }
  free(by);
  if (!st && at != f->data_len)
    st = rd_fail(r->e, BCRT_EFORMAT, BCRT_ERR_TRAILING, NULL, base + at,
              "%llu bytes after the last tensor (the data section is %llu bytes, the tensors end at "
              "%llu); safetensors files have no trailing data", f->data_len - at, f->data_len, at);
  return st;
}

/* The header text, as a whole: encoding, lexical rules, grammar, then the
 * entries, the numbers, the names and the tiling. */
static int st_check_header(st_reader *r) {
  const char *h = r->hdr;
  size_t n = r->hn, at = 0;
  char ex[32];
  long bad = bad_utf8((const unsigned char *)h, n);
  if (bad >= 0)
    return rd_fail(r->e, BCRT_EFORMAT, BCRT_ERR_UTF8, NULL, 8 + (unsigned long long)bad,
                "header is not valid UTF-8 (byte %ld of the header)", bad);
  const char *lex = lexical_problem(h, n, &at);
  if (lex)
    return rd_fail(r->e, BCRT_EFORMAT, BCRT_ERR_JSON, NULL, 8 + at, "header has %s (byte %lu of the header)",
                lex, (unsigned long)at);
  json j = {h, h, h + n, 0, NULL};
  int ok = js_value(&j);
  at = (size_t)(j.p - h);
  if (!ok)
    return rd_fail(r->e, BCRT_EFORMAT, BCRT_ERR_JSON, NULL, 8 + at, "header is not valid JSON (at byte %lu "
                "of the header: '%s')", (unsigned long)at, excerpt(j.p, h + n, ex, sizeof ex));
  js_ws(&j);
  if (j.p < j.end)
    return rd_fail(r->e, BCRT_EFORMAT, BCRT_ERR_JSON, NULL, 8 + (unsigned long long)(j.p - h),
                "header has data after the JSON value (at byte %lu: '%s')", (unsigned long)(j.p - h),
                excerpt(j.p, h + n, ex, sizeof ex));
  int st = st_entries(r);
  if (!st && j.badnum)
    st = rd_fail(r->e, BCRT_EFORMAT, BCRT_ERR_NUMBER, NULL, 8 + (unsigned long long)(j.badnum - h),
              "header has a number that is not a plain non-negative integer (at byte %lu of the header: '%s')",
              (unsigned long)(j.badnum - h), excerpt(j.badnum, h + n, ex, sizeof ex));
  if (!st) st = st_unique(r);
  if (!st) st = st_tiling(r);
  return st;
}

/* The 8-byte length and the header text (malloc'ed, NUL-terminated). */
static int st_read_header(st_reader *r, char **hdr) {
  const bcrt_source *s = &r->f->src;
  unsigned char len8[8];
  unsigned long long n = 0;
  if (s->size > ST_MAX_FILE)
    return rd_fail(r->e, BCRT_EFORMAT, BCRT_ERR_SIZE, NULL, 0, "file is %llu bytes, over the limit of %llu",
                s->size, ST_MAX_FILE);
  if (s->size < 8)
    return rd_fail(r->e, BCRT_EFORMAT, BCRT_ERR_SIZE, NULL, 0, "file is %llu bytes, too short for a "
                "safetensors header (at least 8)", s->size);
  if (!src_read(s, 0, len8, 8)) return rd_fail(r->e, BCRT_EIO, BCRT_ERR_IO, NULL, 0, "read failed");
  for (int i = 7; i >= 0; i--) n = n << 8 | len8[i];
  if (n > ST_MAX_HEADER)
    return rd_fail(r->e, BCRT_EFORMAT, BCRT_ERR_HEADER, NULL, 0, "header length %llu is over the limit of %llu "
                "bytes (not a safetensors file?)", n, ST_MAX_HEADER);
  if (n > s->size - 8)
    return rd_fail(r->e, BCRT_EFORMAT, BCRT_ERR_HEADER, NULL, 0, "header length %llu runs past the end of the "
                "file (%llu bytes follow the length field)", n, s->size - 8);
  if (!(*hdr = malloc((size_t)n + 1))) return rd_fail(r->e, BCRT_ENOMEM, BCRT_ERR_NOMEM, NULL, 0, "out of memory");
  if (!src_read(s, 8, *hdr, (size_t)n)) return rd_fail(r->e, BCRT_EIO, BCRT_ERR_IO, NULL, 8, "read failed");
  (*hdr)[n] = '\0';
  r->hn = (size_t)n;
  r->f->data_off = 8 + n;
  r->f->data_len = s->size - 8 - n;
  return BCRT_OK;
}

int bcrt_st_open_source(const bcrt_source *src, bcrt_st_file **out, bcrt_error *e) {
  err_clear(e);
  if (out) *out = NULL;
  if (!src || !src->read || !out) return rd_fail(e, BCRT_EINVAL, BCRT_ERR_ARG, NULL, 0, "bad arguments");
  bcrt_st_file *f = calloc(1, sizeof *f);
  if (!f) return rd_fail(e, BCRT_ENOMEM, BCRT_ERR_NOMEM, NULL, 0, "out of memory");
  f->src = *src;
  char *hdr = NULL;
  st_reader r = {f, NULL, 0, e};
  bcrt_error local;
  if (!e) r.e = &local, err_clear(&local);
  int st = st_read_header(&r, &hdr);
  r.hdr = hdr;
  if (!st) st = st_check_header(&r);
  free(hdr);
  if (st) {
    bcrt_st_close(f);
    return st;
  }
  *out = f;
  return BCRT_OK;
}

int bcrt_st_open(const char *path, bcrt_st_file **out, bcrt_error *e) {
  err_clear(e);
  if (out) *out = NULL;
  if (!path || !out) return rd_fail(e, BCRT_EINVAL, BCRT_ERR_ARG, NULL, 0, "bad arguments");
  bcrt_source src;
  FILE *fp = open_source(path, &src, e);
  if (!fp) return e ? e->status : BCRT_EIO;
  int st = bcrt_st_open_source(&src, out, e);
  if (st) fclose(fp);
  else (*out)->own = fp;
  return st;
}

static float f16_to_f32(unsigned h) {
  unsigned sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man) { /* subnormal: normalise */
    int e = -1;
    do e++, man <<= 1; while (!(man & 0x400));
    bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ff) << 13);
  } else {
    bits = sign;
  }
  return float_of(bits);
}

/* A chunk at a time, so no second copy of a big tensor is needed. */
int bcrt_st_read_f32(const bcrt_st_file *f, const bcrt_st_tensor *t, float *dst, bcrt_error *e) {
  err_clear(e);
  if (!f || !t || (!dst && t->end > t->begin)) return rd_fail(e, BCRT_EINVAL, BCRT_ERR_ARG, NULL, 0, "bad arguments");
  char k[256];
  int f32 = !strcmp(t->dtype, "F32"), bf = !strcmp(t->dtype, "BF16");
  if (!f32 && !bf && strcmp(t->dtype, "F16"))
    return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_DTYPE, t->name, 0, "tensor '%s': dtype %s is not supported "
                "(expected F32, F16 or BF16)", esc(t->name, k, sizeof k), t->dtype);
  size_t es = (size_t)t->esize;
  unsigned long long n = (t->end - t->begin) / es, off = f->data_off + t->begin;
  unsigned char buf[1 << 15];
  for (unsigned long long done = 0; done < n;) {
    size_t c = n - done < sizeof buf / es ? (size_t)(n - done) : sizeof buf / es;
    if (!src_read(&f->src, off + done * es, buf, c * es))
      return rd_fail(e, BCRT_EIO, BCRT_ERR_IO, t->name, off + done * es, "read failed in tensor '%s' (file "
                  "truncated while open?)", esc(t->name, k, sizeof k));
    for (size_t i = 0; i < c; i++) {
      const unsigned char *q = buf + i * es;
      unsigned h = (unsigned)q[0] | (unsigned)q[1] << 8;
      dst[done + i] = f32 ? float_of((uint32_t)h | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24)
                      : bf ? float_of((uint32_t)h << 16) : f16_to_f32(h);
    }
    done += c;
  }
  return BCRT_OK;
}

/* "(2, 3)", "(5,)", "()": a shape as Python prints it. */
static const char *tuple_str(int rank, const unsigned long long *ull, const long *l, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "(");
  for (int i = 0; i < rank && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, i ? ", %llu" : "%llu", ull ? ull[i] : (unsigned long long)l[i]);
  if (k < n) snprintf(buf + k, n - k, rank == 1 ? ",)" : ")");
  return buf;
}

/* Checks one param against its tensor (NULL: missing); appends a line and
 * returns 0 if unusable.  With a prefix the missing line names the tried
 * tensors. */
static int st_check(const bcrt_param_info *p, const bcrt_st_tensor *t, const char *prefix, char *err,
                    unsigned long errlen) {
  char line[2048], a[256], b[256], k[256], pk[256];
  esc(p->name, k, sizeof k);
  if (!t) {
    size_t pn = prefix ? strlen(prefix) : 0;
    if (!pn)
      snprintf(line, sizeof line, "missing tensor '%s' (expected shape %s)", k, tuple_str(p->rank, NULL, p->shape, a, sizeof a));
    else if (!strncmp(p->name, prefix, pn))
      snprintf(line, sizeof line, "missing tensor '%s' (expected shape %s; tried '%s%s' and '%s', prefix '%s')", k,
               tuple_str(p->rank, NULL, p->shape, a, sizeof a), esc(prefix, pk, sizeof pk), k,
               esc(p->name + pn, b, sizeof b), pk);
    else
      snprintf(line, sizeof line, "missing tensor '%s' (expected shape %s; tried '%s%s', prefix '%s')", k,
               tuple_str(p->rank, NULL, p->shape, a, sizeof a), esc(prefix, pk, sizeof pk), k, pk);
    add_err(err, errlen, line);
    return 0;
  }
  int ok = 1;
  if (strcmp(t->dtype, "F32") && strcmp(t->dtype, "F16") && strcmp(t->dtype, "BF16")) {
    snprintf(line, sizeof line, "tensor '%s' has dtype %s, expected F32, F16 or BF16", k, t->dtype);
    add_err(err, errlen, line);
    ok = 0;
  }
  int same = t->rank == p->rank;
  for (int i = 0; same && i < p->rank; i++) same = t->shape[i] == (unsigned long long)p->shape[i];
  if (!same) {
    snprintf(line, sizeof line, "tensor '%s' has shape %s, expected %s", esc(t->name, k, sizeof k),
             tuple_str(t->rank, t->shape, NULL, a, sizeof a), tuple_str(p->rank, NULL, p->shape, b, sizeof b));
    add_err(err, errlen, line);
    ok = 0;
  }
  return ok;
}

/* The tensor for param `name` under prefix P: "P" name, else (name starts
 * with P) name without it; no prefix: name itself. */
static const bcrt_st_tensor *st_find_for(const bcrt_st_file *f, const char *prefix, const char *name) {
  size_t pn = prefix ? strlen(prefix) : 0;
  if (!pn) return bcrt_st_find(f, name);
  size_t nn = strlen(name);
  char *full = malloc(pn + nn + 1);
  const bcrt_st_tensor *t = NULL;
  if (full) {
    memcpy(full, prefix, pn);
    memcpy(full + pn, name, nn + 1);
    t = bcrt_st_find(f, full);
    free(full);
  }
  if (!t && !strncmp(name, prefix, pn)) t = bcrt_st_find(f, name + pn);
  return t;
}

/* Whether the esize-byte elements of x[0..c) all equal `first`. */
static int st_constant(const unsigned char *x, size_t c, const unsigned char *first, size_t es) {
  for (size_t i = 0; i + es <= c; i += es)
    if (memcmp(x + i, first, es)) return 0;
  return 1;
}

int bcrt_st_is_copy(const bcrt_st_file *f, const bcrt_st_tensor *a, const bcrt_st_tensor *b, int *copy,
                    bcrt_error *e) {
  err_clear(e);
  if (!f || !a || !b || !copy) return rd_fail(e, BCRT_EINVAL, BCRT_ERR_ARG, NULL, 0, "bad arguments");
  *copy = 0;
  unsigned long long n = a->end - a->begin;
  size_t es = (size_t)a->esize;
  if (strcmp(a->dtype, b->dtype) || a->rank != b->rank || n != b->end - b->begin || !n || es < 1 || es > 8)
    return BCRT_OK;
  for (int i = 0; i < a->rank; i++)
    if (a->shape[i] != b->shape[i]) return BCRT_OK;
  unsigned char x[1 << 14], y[1 << 14], first[8];
  char k[256];
  int constant = 1;
  for (unsigned long long done = 0; done < n;) {
    size_t c = n - done < sizeof x ? (size_t)(n - done) : sizeof x;
    if (!src_read(&f->src, f->data_off + a->begin + done, x, c) ||
        !src_read(&f->src, f->data_off + b->begin + done, y, c))
      return rd_fail(e, BCRT_EIO, BCRT_ERR_IO, a->name, f->data_off + a->begin + done, "read failed in "
                     "tensor '%s' (file truncated while open?)", esc(a->name, k, sizeof k));
    if (memcmp(x, y, c)) return BCRT_OK;
    if (!done) memcpy(first, x, es);
    constant = constant && st_constant(x, c, first, es);
    done += c;
  }
  *copy = !constant;
  return BCRT_OK;
}

/* The used tensor (used[j]) that unused tensor i is a byte-identical copy
 * of (a tied head saved twice), or NULL; *like: a used tensor of the same
 * dtype and shape (for the message).  A read error: NULL, *st != 0. */
static const bcrt_st_tensor *st_copy_of(const bcrt_st_file *f, const unsigned char *used, int i,
                                        const bcrt_st_tensor **like, int *st, bcrt_error *e) {
  const bcrt_st_tensor *t = &f->t[i];
  *like = NULL;
  for (int j = 0; j < f->n; j++) {
    if (!used[j] || j == i) continue;
    int same;
    if ((*st = bcrt_st_is_copy(f, t, &f->t[j], &same, e))) return NULL;
    if (same) return &f->t[j];
    int shaped = !strcmp(t->dtype, f->t[j].dtype) && t->rank == f->t[j].rank;
    for (int d = 0; shaped && d < t->rank; d++) shaped = t->shape[d] == f->t[j].shape[d];
    if (shaped && !*like) *like = &f->t[j];
  }
  return NULL;
}

/* Tensors of the file no param asked for: a checkpoint of another model
 * (what blockc rejects without --allow-extra), unless the flags allow
 * them.  A tied copy of a tensor a param read (lm_head.weight saved beside
 * the transformer.wte.weight it is tied to) is no extra: the first pass
 * marks those (used 2).  The first few extras are named; a lone one with
 * the shape of a used tensor says it is no copy of it (an untied head).
 * Returns the count, or -1 after a read error. */
static int st_extras(const char *path, const bcrt_st_file *f, unsigned char *used, int nparams,
                     unsigned flags, char *err, unsigned long errlen) {
  int extras = 0, st = 0;
  char line[2048], a[256], k[256], l[256];
  const bcrt_st_tensor *like;
  bcrt_error e;
  for (int i = 0; i < f->n && !(flags & BCRT_ST_ALLOW_EXTRA); i++) {
    if (used[i]) continue;
    if (st_copy_of(f, used, i, &like, &st, &e)) used[i] = 2;
    else if (st) {
      report(path, &e, err, errlen);
      return -1;
    } else extras++;
  }
  for (int i = 0, listed = 0; i < f->n && extras && listed < REPORT_MAX; i++) {
    if (used[i]) continue;
    listed++;
    if (extras > 1 || st_copy_of(f, used, i, &like, &st, &e) || st) like = NULL;
    snprintf(line, sizeof line, "unexpected tensor '%s' %s (not one of the model's %d parameters%s%s%s)",
             esc(f->t[i].name, k, sizeof k), tuple_str(f->t[i].rank, f->t[i].shape, NULL, a, sizeof a), nparams,
             like ? "; the shape of '" : "", like ? esc(like->name, l, sizeof l) : "",
             like ? "' but is no tied copy of it" : "");
    add_err(err, errlen, line);
  }
  if (extras > REPORT_MAX) {
    snprintf(line, sizeof line, "... %d unexpected tensors in all (the first %d are listed)", extras, REPORT_MAX);
    add_err(err, errlen, line);
  }
  return extras;
}

/* Every param's tensor into one block, checked finite. */
static int st_read_all(const char *path, const bcrt_st_file *f, const bcrt_param_info *params, int nparams,
                       const bcrt_st_tensor **match, const float **slots, float *block, char *err,
                       unsigned long errlen) {
  float *dst = block;
  bcrt_error e;
  char k[256];
  for (int i = 0; i < nparams; i++) {
    size_t numel = 1;
    for (int d = 0; d < params[i].rank; d++) numel *= (size_t)params[i].shape[d];
    if (bcrt_st_read_f32(f, match[i], dst, &e)) return report(path, &e, err, errlen);
    /* NaN/Inf in weights means a broken export; say which tensor. */
    for (size_t j = 0; j < numel; j++)
      if (!isfinite(dst[j])) {
        if (err && errlen)
          snprintf(err, (size_t)errlen, "%s: tensor '%s' has a non-finite value at flat index %lu", path,
                   esc(params[i].name, k, sizeof k), (unsigned long)j);
        return BCRT_EFORMAT;
      }
    slots[i] = dst;
    dst += numel;
  }
  return BCRT_OK;
}

/* Matches params to tensors, reporting every problem; then reads them. */
static int st_bind(const char *path, const bcrt_st_file *f, const bcrt_param_info *params, int nparams,
                   const float **slots, void **storage, const char *prefix, unsigned flags, char *err,
                   unsigned long errlen) {
  const bcrt_st_tensor **match = calloc((size_t)(nparams ? nparams : 1), sizeof *match);
  unsigned char *used = calloc((size_t)(f->n ? f->n : 1), 1);
  int st = BCRT_ENOMEM, bad = 0;
  unsigned long long total = 0;
  if (!match || !used) {
    set_err(err, errlen, "%s: out of memory%s", path, "");
    goto out;
  }
  for (int i = 0; i < nparams; i++) {
    match[i] = st_find_for(f, prefix, params[i].name);
    if (match[i]) used[match[i] - f->t] = 1;
    if (!st_check(&params[i], match[i], prefix, err, errlen)) bad++;
    unsigned long long numel = 1;
    for (int d = 0; d < params[i].rank; d++) numel *= (unsigned long long)params[i].shape[d];
    total += numel;
  }
  int extras = st_extras(path, f, used, nparams, flags, err, errlen);
  if (extras < 0) {
    st = BCRT_EIO;
    goto out;
  }
  if (bad || extras) {
    char msg[1024];
    if (extras)
      snprintf(msg, sizeof msg, "%.800s: %d of %d tensors unusable, %d tensor%s in the file not used by "
               "the model (above; BCRT_ST_ALLOW_EXTRA in bcrt_st_load_ex's flags ignores them)", path, bad,
               nparams, extras, extras == 1 ? "" : "s");
    else
      snprintf(msg, sizeof msg, "%.900s: %d of %d tensors unusable (above)", path, bad, nparams);
    add_err(err, errlen, msg);
    st = BCRT_EMISMATCH;
    goto out;
  }
  float *block = malloc((size_t)(total ? total : 1) * sizeof(float));
  if (!block) {
    set_err(err, errlen, "%s: out of memory for the weights%s", path, "");
    goto out;
  }
  st = st_read_all(path, f, params, nparams, match, slots, block, err, errlen);
  if (st) free(block);
  else *storage = block;
out:
  free(match);
  free(used);
  return st;
}

int bcrt_st_load_ex(const char *path, const bcrt_param_info *params, int nparams, const float **slots,
                    void **storage, const char *prefix, unsigned flags, char *err, unsigned long errlen) {
  if (err && errlen) err[0] = '\0';
  if (storage) *storage = NULL;
  if (!path || !storage || nparams < 0 || (nparams && (!params || !slots)) || (flags & ~BCRT_ST_ALLOW_EXTRA)) {
    set_err(err, errlen, "bcrt_st_load: bad arguments%s%s", "", "");
    return BCRT_EINVAL;
  }
  for (int i = 0; i < nparams; i++)
    if (!params[i].name || params[i].rank < 1 || params[i].rank > 4) {
      set_err(err, errlen, "bcrt_st_load: params[] entry %s%s is malformed", "", "");
      return BCRT_EINVAL;
    }
  for (int i = 0; i < nparams; i++) slots[i] = NULL;
  bcrt_error e;
  bcrt_st_file *f;
  int st = bcrt_st_open(path, &f, &e);
  if (st) return report(path, &e, err, errlen);
  st = st_bind(path, f, params, nparams, slots, storage, prefix, flags, err, errlen);
  bcrt_st_close(f);
  if (st)
    for (int i = 0; i < nparams; i++) slots[i] = NULL;
  return st;
}

int bcrt_st_load(const char *path, const bcrt_param_info *params, int nparams,
                 const float **slots, void **storage, char *err, unsigned long errlen) {
  return bcrt_st_load_ex(path, params, nparams, slots, storage, NULL, 0, err, errlen);
}

void bcrt_st_free(void *storage) { free(storage); }

#endif /* BLOCKC_NO_IO */
