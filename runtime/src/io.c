/* io.c — the file readers' common part: rules, errors, byte sources,
 * allocation helpers.  Left out by -DBLOCKC_NO_IO, as are json.c,
 * safetensors.c and npy.c.
 * One part of the runtime: tools/amalgamate.sh concatenates runtime/src/
 * into runtime/blockc_rt.c (the file users vendor); prelude.c has the
 * includes and macros every part uses. */
#ifndef BLOCKC_NO_IO
/* Files: safetensors weights and .npy arrays                               */
/* ------------------------------------------------------------------------ */
/* These are THE readers of both formats: blockc itself reads weights and
 * inputs through them (compiler/safetensors.c and npy.c only put its
 * "path: error: " in front of the messages and pass its own limits), so a
 * vendored program rejects exactly what blockc rejects.  ISO C only, no
 * JSON library: this .c/.h pair must stay copyable into any project.
 *
 * The rules, checked on the header alone before any tensor data is read
 * (data is then read one tensor at a time, on demand):
 *   safetensors: file <= 1 TiB; header length <= 100 MiB and inside the
 *   file; the header valid UTF-8 and strict JSON (RFC 8259: no raw control
 *   bytes, valid escapes, paired surrogates, no \u0000, nothing after the
 *   value, nesting <= 64) whose numbers are plain non-negative integers;
 *   one object of entries {"dtype", "shape", "data_offsets"}, each key
 *   exactly once, plus "__metadata__" (an object of strings); known dtypes;
 *   rank <= 8; offsets holding exactly the shape's bytes; unique names; the
 *   tensors tiling the data section (no overlap, no gap, no trailing bytes).
 *   .npy: magic, version 1.0-3.0, header <= 1 MiB and inside the file, a
 *   dict of exactly 'descr', 'fortran_order' and 'shape'; the wanted dtype,
 *   C order, rank and sizes within the caller's limits; then, when the data
 *   is read, exactly the shape's bytes after the header.
 * Allocation is bounded by the header's size (the tensor table) or by the
 * validated shape (the data).  Messages name the tensor or the byte; bytes
 * a terminal could act on are escaped (\xNN). */

#define ST_MAX_HEADER (100ull << 20) /* the reference implementation's limit */
#define ST_MAX_FILE (1ull << 40)     /* 1 TiB: anything bigger is not a block's weights */
#define ST_MAX_RANK 8
#define NPY_MAX_HEADER (1ul << 20)   /* numpy itself refuses headers over 10000 bytes */
#define NPY_MAX_DIMS 64              /* parsed before the rank check, for the message */
#define JSON_MAX_DEPTH 64
#define REPORT_MAX 8                 /* names listed per kind of weights problem */

static void set_err(char *err, unsigned long errlen, const char *fmt, const char *a,
                    const char *b) {
  if (err && errlen) snprintf(err, (size_t)errlen, fmt, a, b);
}

/* Appends one line to err (the weights loader reports every bad tensor). */
static void add_err(char *err, unsigned long errlen, const char *line) {
  if (!err || !errlen) return;
  size_t n = strlen(err);
  if (n + 1 >= errlen) return;
  snprintf(err + n, (size_t)errlen - n, "%s%s", n ? "\n" : "", line);
}

static int host_le(void) {
  const uint16_t one = 1;
  unsigned char b;
  memcpy(&b, &one, 1);
  return b == 1;
}

static void swap32(void *p, size_t n) {
  unsigned char *c = p;
  for (size_t i = 0; i < n; i++, c += 4) {
    unsigned char t = c[0];
    c[0] = c[3], c[3] = t, t = c[1], c[1] = c[2], c[2] = t;
  }
}

void bcrt_free(void *p) { free(p); }

void *bcrt_aligned_alloc(unsigned long align, unsigned long bytes) {
  if (align < sizeof(void *) || (align & (align - 1))) return NULL;
  unsigned char *raw = malloc((size_t)bytes + (size_t)align + sizeof(void *));
  if (!raw) return NULL;
  uintptr_t a = ((uintptr_t)(raw + sizeof(void *)) + align - 1) & ~(uintptr_t)(align - 1);
  void *p = (void *)a;
  memcpy((unsigned char *)p - sizeof(void *), &raw, sizeof raw);  /* the block to free */
  return p;
}

void bcrt_aligned_free(void *p) {
  if (!p) return;
  void *raw;
  memcpy(&raw, (unsigned char *)p - sizeof(void *), sizeof raw);
  free(raw);
}

/* --- errors and sources ------------------------------------------------------ */

static void err_clear(bcrt_error *e) {
  if (e) memset(e, 0, sizeof *e);
}

/* Length of the valid, printable UTF-8 sequence at s (2..4 bytes), else 0
 * (C1 controls U+0080..U+009F count as unprintable). */
static size_t utf8_printable(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
  if (len < 2 || len > n || c < 0xC2 || c > 0xF4) return 0;
  for (size_t k = 1; k < len; k++)
    if ((s[k] & 0xC0) != 0x80) return 0;
  if (len == 2 && c == 0xC2 && s[1] < 0xA0) return 0;
  if (len == 3 && ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] >= 0xA0))) return 0;
  if (len == 4 && ((c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] >= 0x90))) return 0;
  return len;
}

/* s for a message: control bytes, DEL and bytes that are not printable
 * UTF-8 become \xNN; at most about 200 bytes of s. */
static const char *esc(const char *s, char *buf, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  size_t k = 0, len = strlen(s);
  for (size_t i = 0; i < len && k + 8 < n && i < 200;) {
    size_t w = u[i] >= 0x80 ? utf8_printable(u + i, len - i) : (u[i] >= 0x20 && u[i] != 0x7f) || u[i] == '\t';
    if (w) {
      memcpy(buf + k, s + i, w), k += w, i += w;
    } else {
      k += (size_t)snprintf(buf + k, n - k, "\\x%02x", u[i]), i++;
    }
  }
  buf[k] = '\0';
  return buf;
}

/* Records an error (the first one wins) and returns its status. */
static int rd_fail(bcrt_error *e, int status, int code, const char *tensor, unsigned long long offset,
                const char *fmt, ...) {
  if (!e || e->status) return status;
  e->status = status, e->code = code, e->offset = offset;
  char t[256];
  snprintf(e->tensor, sizeof e->tensor, "%s", tensor ? esc(tensor, t, sizeof t) : "");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  va_end(ap);
  return status;
}

/* A source of bytes at offsets: a FILE (the path functions), or whatever
 * the caller provides (blockc: its own opened file; fuzzers: memory). */
static int file_read(void *h, unsigned long long off, void *buf, unsigned long n) {
  FILE *f = h;
  if (off > (unsigned long long)LONG_MAX || fseek(f, (long)off, SEEK_SET) != 0) return -1;
  return fread(buf, 1, (size_t)n, f) == (size_t)n ? 0 : -1;
}

/* Opens path as a source (its size from seeking to the end). */
static FILE *open_source(const char *path, bcrt_source *src, bcrt_error *e) {
  FILE *f = fopen(path, "rb");
  long end;
  if (!f) {
    rd_fail(e, BCRT_EIO, BCRT_ERR_IO, NULL, 0, "cannot open: %s", strerror(errno));
    return NULL;
  }
  if (fseek(f, 0, SEEK_END) != 0 || (end = ftell(f)) < 0) {
    fclose(f);
    rd_fail(e, BCRT_EIO, BCRT_ERR_IO, NULL, 0, "cannot determine the file's size");
    return NULL;
  }
  src->handle = f, src->size = (unsigned long long)end, src->read = file_read;
  return f;
}

static int src_read(const bcrt_source *s, unsigned long long off, void *buf, size_t n) {
  return n == 0 || (off <= s->size && n <= s->size - off && s->read(s->handle, off, buf, (unsigned long)n) == 0);
}

/* "path: msg" into err (the path functions' one-line form). */
static int report(const char *path, const bcrt_error *e, char *err, unsigned long errlen) {
  if (err && errlen) snprintf(err, (size_t)errlen, "%s: %s", path, e->msg);
  return e->status;
}

#endif /* BLOCKC_NO_IO */
