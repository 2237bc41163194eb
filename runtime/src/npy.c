/* npy.c — .npy read and write.
 * One part of the runtime: tools/amalgamate.sh concatenates runtime/src/
 * into runtime/blockc_rt.c (the file users vendor); prelude.c has the
 * includes and macros every part uses. */
#ifndef BLOCKC_NO_IO
/* --- .npy --------------------------------------------------------------------- */

/* The header is a Python dict literal, e.g.
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * parsed by a small recursive-descent reader for just the literals numpy
 * writes (strings without escapes, True/False, tuples of integers), so key
 * order, spacing and trailing commas do not matter. */
typedef struct {
  char descr[32];
  int fortran, rank;            /* rank may exceed the limit; checked after */
  unsigned long long d[NPY_MAX_DIMS];
  int has_descr, has_fortran, has_shape;
} npy_dict;

typedef struct {
  json j;                    /* the JSON reader's cursor: the same whitespace and literals */
  bcrt_error *e;
} npy_parser;

/* An error at the parser's position, quoting the header. */
static int hp_error(npy_parser *h, const char *what) {
  char quoted[81];
  size_t k = 0;
  for (const char *q = h->j.s; q < h->j.end && k + 1 < sizeof quoted; q++)
    quoted[k++] = (*q >= 32 && *q < 127) ? *q : ' ';
  quoted[k] = '\0';
  return rd_fail(h->e, BCRT_EFORMAT, BCRT_ERR_NPY_HEADER, NULL, 0, "bad .npy header at column %d: %s\n  header: %s",
              (int)(h->j.p - h->j.s) + 1, what, quoted);
}

/* A string literal in ' or " quotes, without escapes. */
static int hp_string(npy_parser *h, char *out, size_t n) {
  js_ws(&h->j);
  if (h->j.p >= h->j.end || (*h->j.p != '\'' && *h->j.p != '"')) return hp_error(h, "expected a string");
  char q = *h->j.p++;
  size_t k = 0;
  while (h->j.p < h->j.end && *h->j.p != q) {
    if (*h->j.p == '\\' || *h->j.p == '\n') return hp_error(h, "unsupported character in string");
    if (k + 1 >= n) return hp_error(h, "string is too long");
    out[k++] = *h->j.p++;
  }
  if (h->j.p >= h->j.end) return hp_error(h, "unterminated string");
  h->j.p++;
  out[k] = '\0';
  return BCRT_OK;
}

static int hp_word(npy_parser *h, const char *w) {
  size_t n = strlen(w);
  js_ws(&h->j);
  if ((size_t)(h->j.end - h->j.p) >= n && memcmp(h->j.p, w, n) == 0) {
    h->j.p += n;
    return 1;
  }
  return 0;
}

/* A non-negative integer (Python 2 era files may write "3L"), clamped at
 * 2^62 so the limit checks report it. */
static int hp_int(npy_parser *h, unsigned long long *out) {
  js_ws(&h->j);
  if (h->j.p >= h->j.end || *h->j.p < '0' || *h->j.p > '9') return hp_error(h, "expected a non-negative integer");
  unsigned long long v = 0;
  while (h->j.p < h->j.end && *h->j.p >= '0' && *h->j.p <= '9') {
    v = v * 10 + (unsigned long long)(*h->j.p++ - '0');
    if (v > (1ull << 62)) v = 1ull << 62;
  }
  if (h->j.p < h->j.end && *h->j.p == 'L') h->j.p++;
  *out = v;
  return BCRT_OK;
}

/* (), (5,), (2, 3) and (2, 3,). */
static int hp_shape(npy_parser *h, npy_dict *hd) {
  if (!js_lit(&h->j, '(')) return hp_error(h, "expected '(' to start the shape tuple");
  hd->rank = 0;
  while (!js_lit(&h->j, ')')) {
    if (hd->rank >= NPY_MAX_DIMS) return hp_error(h, "shape has too many dimensions");
    int st = hp_int(h, &hd->d[hd->rank++]);
    if (st) return st;
    if (!js_lit(&h->j, ',')) {
      if (!js_lit(&h->j, ')')) return hp_error(h, "expected ',' or ')' in the shape tuple");
      break;
    }
  }
  return BCRT_OK;
}

static int hp_entry(npy_parser *h, npy_dict *hd) {
  char key[32];
  int st = hp_string(h, key, sizeof key);
  if (st) return st;
  if (!js_lit(&h->j, ':')) return hp_error(h, "expected ':' after the key");
  int *seen = !strcmp(key, "descr") ? &hd->has_descr : !strcmp(key, "fortran_order") ? &hd->has_fortran
            : !strcmp(key, "shape") ? &hd->has_shape : NULL;
  if (!seen) {
    char msg[256], k[160];
    snprintf(msg, sizeof msg, "unexpected key '%s' (expected 'descr', 'fortran_order', 'shape')",
             esc(key, k, sizeof k));
    return hp_error(h, msg);
  }
  if (*seen) return hp_error(h, "key appears twice");
  *seen = 1;
  if (seen == &hd->has_fortran) {
    if (hp_word(h, "True")) hd->fortran = 1;
    else if (!hp_word(h, "False")) return hp_error(h, "expected True or False");
    return BCRT_OK;
  }
  if (seen == &hd->has_shape) return hp_shape(h, hd);
  js_ws(&h->j);
  if (h->j.p < h->j.end && *h->j.p == '[')
    return rd_fail(h->e, BCRT_EFORMAT, BCRT_ERR_NPY_DTYPE, NULL, 0, "the array has a structured dtype (a record "
                "type); expected plain '<f4' (float32)");
  return hp_string(h, hd->descr, sizeof hd->descr);
}

static int npy_parse_dict(const char *text, size_t n, npy_dict *hd, bcrt_error *e) {
  npy_parser h = {{text, text, text + n, 0, NULL}, e};
  memset(hd, 0, sizeof *hd);
  if (!js_lit(&h.j, '{')) return hp_error(&h, "expected '{'");
  while (!js_lit(&h.j, '}')) {
    int st = hp_entry(&h, hd);
    if (st) return st;
    if (!js_lit(&h.j, ',')) {
      if (!js_lit(&h.j, '}')) return hp_error(&h, "expected ',' or '}'");
      break;
    }
  }
  js_ws(&h.j);
  if (h.j.p < h.j.end) return hp_error(&h, "unexpected text after the dict");
  const char *missing = !hd->has_descr ? "descr" : !hd->has_fortran ? "fortran_order" : !hd->has_shape ? "shape" : NULL;
  if (missing) {
    char msg[64];
    snprintf(msg, sizeof msg, "the key '%s' is missing", missing);
    return hp_error(&h, msg);
  }
  return BCRT_OK;
}

/* "big-endian float32", "float64", "int64", ... for a numpy descr string. */
static const char *describe_descr(const char *descr, char *buf, size_t n) {
  const char *order = *descr == '>' ? "big-endian " : *descr == '=' ? "native-order " : "";
  const char *p = descr + (*descr && strchr("<>=|", *descr) ? 1 : 0);
  char kind = *p ? *p++ : '?';
  int bytes = 0;  /* the item size as numpy writes it; longer or larger is "unknown" */
  for (int k = 0; p[k] >= '0' && p[k] <= '9'; k++)
    if ((bytes = bytes * 10 + (p[k] - '0')) > 1024) {
      bytes = 0;
      break;
    }
  const char *name = kind == 'f' ? "float" : kind == 'i' ? "int" : kind == 'u' ? "uint" : kind == 'c' ? "complex" : NULL;
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

static int npy_check_dtype(const npy_dict *hd, int type, bcrt_error *e) {
  char what[64], d[160];
  describe_descr(hd->descr, what, sizeof what);
  esc(hd->descr, d, sizeof d);
  if (type == BCRT_NPY_INT && strcmp(hd->descr, "<i4") && strcmp(hd->descr, "<i8"))
    return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_NPY_DTYPE, NULL, 0, "dtype '%s' (%s) is not supported for lengths; "
                "expected '<i4' or '<i8' (little-endian int32 or int64); convert with x.astype(np.int32)", d, what);
  if (type == BCRT_NPY_F32 && strcmp(hd->descr, "<f4")) {
    int f4 = !strcmp(hd->descr + (hd->descr[0] ? 1 : 0), "f4");
    return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_NPY_DTYPE, NULL, 0, "dtype '%s' (%s) is not supported; expected "
                "'<f4' (little-endian float32); convert with x.astype(%s)", d, what, f4 ? "'<f4'" : "np.float32");
  }
  return BCRT_OK;
}

/* Order, rank and sizes within the limits. */
static int npy_check_shape(const npy_dict *hd, const bcrt_npy_limits *lim, bcrt_error *e) {
  char s[256];
  if (hd->fortran)
    return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_NPY_ORDER, NULL, 0, "fortran_order is True; save a C-ordered "
                "array (np.ascontiguousarray)");
  if (hd->rank == 0)
    return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_NPY_SHAPE, NULL, 0, "shape () is a scalar; expected an array of "
                "rank 1 to %d", lim->max_rank);
  tuple_str(hd->rank, hd->d, NULL, s, sizeof s);
  if (hd->rank > lim->max_rank)
    return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_NPY_SHAPE, NULL, 0, "shape %s: rank %d is over the limit of %d", s,
                hd->rank, lim->max_rank);
  unsigned long long numel = 1;
  for (int i = 0; i < hd->rank; i++) {
    if (hd->d[i] > (unsigned long long)lim->max_dim)
      return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_NPY_SHAPE, NULL, 0, "shape %s: dimension %d is over the limit of %ld",
                  s, i, lim->max_dim);
    /* Checked before the product, which could wrap (2^34 * 2^30 is 0). */
    if (hd->d[i] && numel > (unsigned long long)lim->max_elems / hd->d[i])
      return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_NPY_SHAPE, NULL, 0, "shape %s has more than %lld elements", s,
                  lim->max_elems);
    numel *= hd->d[i];
  }
  return BCRT_OK;
}

/* The magic, version and header length: info->data_offset is set to the
 * first byte after the header; *hlen to its length. */
static int npy_prefix(const bcrt_source *s, bcrt_npy_info *info, unsigned long *hlen, bcrt_error *e) {
  unsigned char b[12];
  unsigned long long pre = 10;
  if (s->size < 6 || !src_read(s, 0, b, 6) || memcmp(b, "\x93NUMPY", 6))
    return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_NPY_MAGIC, NULL, 0, "not a .npy file (it does not start with \"\\x93NUMPY\")");
  if (s->size < 10 || !src_read(s, 6, b + 6, 4))
    return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_NPY_HEADER, NULL, 0, "truncated .npy header (file is %llu bytes)", s->size);
  if (b[7] != 0 || b[6] < 1 || b[6] > 3)
    return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_NPY_VERSION, NULL, 6, ".npy format version %d.%d is not supported "
                "(expected 1.0, 2.0 or 3.0)", b[6], b[7]);
  *hlen = (unsigned long)b[8] | (unsigned long)b[9] << 8;
  if (b[6] > 1) {
    if (s->size < 12 || !src_read(s, 10, b + 10, 2))
      return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_NPY_HEADER, NULL, 0, "truncated .npy header (file is %llu bytes)", s->size);
    *hlen |= (unsigned long)b[10] << 16 | (unsigned long)b[11] << 24;
    pre = 12;
  }
  if (*hlen > NPY_MAX_HEADER)
    return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_NPY_HEADER, NULL, 8, ".npy header length %lu is over the limit of %lu "
                "bytes", *hlen, NPY_MAX_HEADER);
  if (pre + *hlen > s->size)
    return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_NPY_HEADER, NULL, 8, "truncated .npy header: it claims %lu bytes but "
                "only %llu follow", *hlen, s->size - pre);
  info->data_offset = pre + *hlen;
  return BCRT_OK;
}

int bcrt_npy_open_source(const bcrt_source *src, int type, const bcrt_npy_limits *lim,
                         bcrt_npy_info *info, bcrt_error *e) {
  static const bcrt_npy_limits defaults = {BCRT_NPY_MAX_RANK, 0x7fffffffL, 1LL << 40};
  err_clear(e);
  if (!src || !src->read || !info || (type != BCRT_NPY_F32 && type != BCRT_NPY_INT))
    return rd_fail(e, BCRT_EINVAL, BCRT_ERR_ARG, NULL, 0, "bad arguments");
  if (!lim) lim = &defaults;
  if (lim->max_rank < 1 || lim->max_rank > BCRT_NPY_MAX_RANK)
    return rd_fail(e, BCRT_EINVAL, BCRT_ERR_ARG, NULL, 0, "bad limits");
  memset(info, 0, sizeof *info);
  unsigned long hlen = 0;
  int st = npy_prefix(src, info, &hlen, e);
  if (st) return st;
  char *text = malloc((size_t)hlen + 1);
  if (!text) return rd_fail(e, BCRT_ENOMEM, BCRT_ERR_NOMEM, NULL, 0, "out of memory");
  npy_dict hd;
  if (!src_read(src, info->data_offset - hlen, text, hlen)) st = rd_fail(e, BCRT_EIO, BCRT_ERR_IO, NULL, 0, "read failed");
  if (!st) st = npy_parse_dict(text, hlen, &hd, e);
  free(text);
  if (!st) st = npy_check_dtype(&hd, type, e);
  if (!st) st = npy_check_shape(&hd, lim, e);
  if (st) return st;
  info->type = type;
  info->esize = type == BCRT_NPY_F32 ? 4 : hd.descr[2] - '0';  /* '<i4' / '<i8' */
  info->rank = hd.rank;
  for (int i = 0; i < hd.rank; i++) info->shape[i] = (long)hd.d[i];
  return BCRT_OK;
}

/* Element i of raw (esize 4 or 8 bytes, little-endian), sign-extended. */
static long long npy_int_at(const unsigned char *raw, int esize, size_t i) {
  unsigned long long u = 0;
  for (int b = esize - 1; b >= 0; b--) u = u << 8 | raw[i * (size_t)esize + (size_t)b];
  if (esize == 4) return (long long)(int32_t)(uint32_t)u;
  return (long long)(int64_t)u;  /* two's complement, as on every host C99 runs on */
}

/* numel elements from off into dst (floats, or ints narrowed with a range
 * check), a chunk at a time. */
static int npy_read_data(const bcrt_source *src, const bcrt_npy_info *info, size_t numel, void *dst, bcrt_error *e) {
  unsigned char buf[1 << 15];
  size_t es = (size_t)info->esize;
  for (size_t done = 0; done < numel;) {
    size_t c = numel - done < sizeof buf / es ? numel - done : sizeof buf / es;
    unsigned long long off = info->data_offset + done * es;
    if (!src_read(src, off, buf, c * es)) return rd_fail(e, BCRT_EIO, BCRT_ERR_IO, NULL, off, "read failed");
    if (info->type == BCRT_NPY_F32) {
      memcpy((float *)dst + done, buf, c * 4);
      if (!host_le()) swap32((float *)dst + done, c);
    }
    for (size_t i = 0; info->type == BCRT_NPY_INT && i < c; i++) {
      long long v = npy_int_at(buf, (int)es, i);
      if (v < INT32_MIN || v > INT32_MAX)
        return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_RANGE, NULL, off + i * es, "element %lu is %lld, outside the "
                    "int32 range", (unsigned long)(done + i), v);
      ((int32_t *)dst)[done + i] = (int32_t)v;
    }
    done += c;
  }
  return BCRT_OK;
}

int bcrt_npy_read_source(const bcrt_source *src, const bcrt_npy_info *info, void **data, bcrt_error *e) {
  err_clear(e);
  if (data) *data = NULL;
  if (!src || !src->read || !info || !data || info->rank < 1 || info->rank > BCRT_NPY_MAX_RANK)
    return rd_fail(e, BCRT_EINVAL, BCRT_ERR_ARG, NULL, 0, "bad arguments");
  unsigned long long numel = 1, have = src->size - info->data_offset;
  for (int i = 0; i < info->rank; i++) numel *= (unsigned long long)info->shape[i];
  unsigned long long need = numel * (unsigned long long)info->esize;
  char s[256];
  if (have != need) {
    tuple_str(info->rank, NULL, info->shape, s, sizeof s);
    if (have > need)
      return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_NPY_DATA, NULL, info->data_offset + need, "shape %s needs %llu bytes "
                  "of data but the file has %llu (%llu extra bytes at the end)", s, need, have, have - need);
    return rd_fail(e, BCRT_EFORMAT, BCRT_ERR_NPY_DATA, NULL, src->size, "shape %s needs %llu bytes of data but "
                "the file has %llu", s, need, have);
  }
  void *p = malloc(numel ? (size_t)numel * 4 : 4);  /* floats or int32 */
  if (!p) return rd_fail(e, BCRT_ENOMEM, BCRT_ERR_NOMEM, NULL, 0, "out of memory reading %llu bytes", need);
  int st = npy_read_data(src, info, (size_t)numel, p, e);
  if (st) free(p);
  else *data = p;
  return st;
}

/* The path functions' common part: the arguments, then open, header, data
 * (lengths: rank 1 only); "path: reason" into err on failure. */
static int npy_read_path(const char *path, int type, int args_ok, const char *fn, bcrt_npy_info *info,
                         void **data, char *err, unsigned long errlen) {
  if (err && errlen) err[0] = '\0';
  *data = NULL;
  if (!path || !args_ok) {
    set_err(err, errlen, "%s: bad arguments%s", fn, "");
    return BCRT_EINVAL;
  }
  bcrt_error e;
  bcrt_source src;
  err_clear(&e);
  FILE *f = open_source(path, &src, &e);
  int st = f ? bcrt_npy_open_source(&src, type, NULL, info, &e) : e.status;
  if (!st && type == BCRT_NPY_INT && info->rank != 1)
    st = rd_fail(&e, BCRT_EFORMAT, BCRT_ERR_NPY_SHAPE, NULL, 0, "lengths must be a rank-1 array (one per batch row)");
  if (!st) st = bcrt_npy_read_source(&src, info, data, &e);
  if (f) fclose(f);
  return st ? report(path, &e, err, errlen) : BCRT_OK;
}

int bcrt_npy_read(const char *path, float **data, long *shape, int *rank, char *err,
                  unsigned long errlen) {
  bcrt_npy_info info;
  void *p;
  if (data) *data = NULL;
  int st = npy_read_path(path, BCRT_NPY_F32, data && shape && rank, "bcrt_npy_read", &info, &p, err, errlen);
  if (st) return st;
  *data = p;
  *rank = info.rank;
  for (int i = 0; i < info.rank; i++) shape[i] = info.shape[i];
  return BCRT_OK;
}

int bcrt_npy_read_i32(const char *path, int **data, long *n, char *err, unsigned long errlen) {
  bcrt_npy_info info;
  void *p;
  if (data) *data = NULL;
  int st = npy_read_path(path, BCRT_NPY_INT, data && n, "bcrt_npy_read_i32", &info, &p, err, errlen);
  if (st) return st;
  *data = p;
  *n = info.shape[0];
  return BCRT_OK;
}

int bcrt_npy_write(const char *path, const float *data, const long *shape, int rank, char *err,
                   unsigned long errlen) {
  if (err && errlen) err[0] = '\0';
  if (!path || (!data && rank) || (!shape && rank) || rank < 0 || rank > BCRT_NPY_MAX_RANK) {
    set_err(err, errlen, "bcrt_npy_write: bad arguments%s%s", "", "");
    return BCRT_EINVAL;
  }
  char dict[512];
  size_t n = (size_t)snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
  size_t numel = 1;
  for (int i = 0; i < rank; i++) {
    if (shape[i] < 0) {
      set_err(err, errlen, "bcrt_npy_write: negative dimension%s%s", "", "");
      return BCRT_EINVAL;
    }
    numel *= (size_t)shape[i];
    n += (size_t)snprintf(dict + n, sizeof dict - n, "%ld%s", shape[i],
                          rank == 1 ? "," : i + 1 < rank ? ", " : "");
  }
  n += (size_t)snprintf(dict + n, sizeof dict - n, "), }");
  /* Version 1.0: 10-byte preamble; pad with spaces and a newline so the
   * data starts 64-byte aligned, as numpy does. */
  size_t total = (10 + n + 1 + 63) / 64 * 64, hlen = total - 10;
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff),
                           (unsigned char)(hlen >> 8)};
  memset(dict + n, ' ', hlen - n - 1);
  dict[hlen - 1] = '\n';
  /* The temp file: a short name in path's directory (path + ".tmp" would
   * overflow NAME_MAX for a 252-byte file name), opened exclusively (C11
   * "x") with a fresh suffix per try, so a stale temp never blocks. */
  size_t plen = strlen(path), dlen = plen;
  while (dlen > 0 && path[dlen - 1] != '/' && path[dlen - 1] != '\\') dlen--;
  char *tmp = malloc(dlen + 32);
  if (!tmp) {
    set_err(err, errlen, "%s: out of memory%s", path, "");
    return BCRT_ENOMEM;
  }
  FILE *f = NULL;
  unsigned long seed = (unsigned long)time(NULL) ^ (unsigned long)clock() ^ (unsigned long)(uintptr_t)&f;
  for (int tries = 0; tries < 64 && !f; tries++) {
    seed = seed * 6364136223846793005ul + 1442695040888963407ul;
    memcpy(tmp, path, dlen);
    snprintf(tmp + dlen, 32, ".bcrt-%08lx.tmp", (seed >> 16) & 0xfffffffful);
    f = fopen(tmp, "wbx");
  }
  if (!f) {
    set_err(err, errlen, "%s: cannot create a temporary file next to it: %s", path, strerror(errno));
    free(tmp);
    return BCRT_EIO;
  }
  int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(dict, 1, hlen, f) == hlen;
  if (host_le()) {
    ok = ok && fwrite(data, 4, numel, f) == numel;
  } else {
    for (size_t i = 0; ok && i < numel; i++) {
      float v = data[i];
      swap32(&v, 1);
      ok = fwrite(&v, 4, 1, f) == 1;
    }
  }
  ok = fclose(f) == 0 && ok;
  ok = ok && rename(tmp, path) == 0;
#ifdef _WIN32
  /* Windows' rename() refuses to replace a file: remove it first, giving up
   * atomicity only there. */
  if (!ok) ok = remove(path) == 0 && rename(tmp, path) == 0;
#endif
  if (!ok) {
    set_err(err, errlen, "%s: write failed: %s", path, strerror(errno));
    remove(tmp);
  }
  free(tmp);
  return ok ? BCRT_OK : BCRT_EIO;
}

#endif /* BLOCKC_NO_IO */
