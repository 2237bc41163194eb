/* blockc_tok.c — blockc's tokenizer (blockc_tok.h): Hugging Face
 * tokenizer.json and GPT-2 vocab.json + merges.txt, encode and decode as the
 * `tokenizers` library does.  Vendorable: C11, PCRE2 (libpcre2-8) and
 * utf8proc only; it does not need blockc_rt.c or the compiler.
 *
 * Layout of this file, in pipeline order:
 *   - bytes: a growable buffer, UTF-8 decoding and the U+FFFD repair of
 *     invalid input (maximal subparts, as Rust's from_utf8_lossy and Node's
 *     Buffer#toString do);
 *   - json: a small strict JSON reader (its own, so this file needs nothing
 *     of the runtime): one pass into a node array; every allocation is
 *     bounded by the file's size, nesting by JT_MAX_DEPTH;
 *   - maps: string -> id (the vocabulary) and (id, id) -> (rank, id) (the
 *     merges), open addressing;
 *   - the pipeline stages read from the file (normalizers, pre-tokenizers,
 *     the BPE model, post-processor, decoders), each a tagged struct, and
 *     their loaders, which name the JSON path of whatever they refuse;
 *   - encode: added tokens split out, normalize, pre-tokenize, BPE (a heap of
 *     candidate merges over a linked list of symbols: O(n log n) per word),
 *     post-process;
 *   - decode and the stream (the `tokenizers` DecodeStream algorithm: one
 *     token of context, nothing emitted while the text ends in U+FFFD).
 *
 * Regexes (Split, Replace, ByteLevel's GPT-2 pattern) are compiled with
 * PCRE2_UTF | PCRE2_UCP and JIT-compiled when PCRE2 has the JIT; matches are
 * iterated as the Oniguruma binding of `tokenizers` iterates them (an empty
 * match right after a match is skipped by one character). */
#define _POSIX_C_SOURCE 200809L
#include "blockc_tok.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <errno.h>
#include <limits.h>
#include <pcre2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <utf8proc.h>

#define TK_MAX_ID 16777215       /* ids above are refused */
#define JT_MAX_DEPTH 128         /* JSON nesting */
#define TK_MAX_FILE (1u << 30)   /* 1 GiB */

/* ------------------------------------------------------------------ bytes */

typedef struct buf {
  char *p;
  size_t n, cap;
  int oom;
} buf;

static int buf_reserve(buf *b, size_t extra) {
  if (b->oom) return -1;
  if (b->n + extra + 1 <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < b->n + extra + 1) {
    if (cap > SIZE_MAX / 2) { b->oom = 1; return -1; }
    cap *= 2;
  }
  char *q = realloc(b->p, cap);
  if (!q) { b->oom = 1; return -1; }
  b->p = q;
  b->cap = cap;
  return 0;
}

static int buf_add(buf *b, const void *s, size_t n) {
  if (buf_reserve(b, n)) return -1;
  if (n) memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = '\0';
  return 0;
}

static int buf_addc(buf *b, char c) { return buf_add(b, &c, 1); }

static int buf_add_cp(buf *b, int32_t cp) {
  utf8proc_uint8_t tmp[4];
  utf8proc_ssize_t k = utf8proc_encode_char(cp, tmp);
  return buf_add(b, tmp, (size_t)k);
}

static void buf_free(buf *b) {
  free(b->p);
  *b = (buf){0};
}

static void seterr(char *err, size_t errn, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t errn, const char *fmt, ...) {
  if (!err || !errn) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errn, fmt, ap);
  va_end(ap);
}

/* Length of the valid UTF-8 sequence at s[0..n) (1..4), or 0 when the bytes
 * there are not one; *cp gets the code point.  *bad gets the length of the
 * maximal subpart to replace (>= 1) when invalid. */
static int utf8_one(const unsigned char *s, size_t n, int32_t *cp, int *bad) {
  unsigned c = s[0];
  *bad = 1;
  if (c < 0x80) { *cp = (int32_t)c; return 1; }
  int need;
  unsigned lo = 0x80, hi = 0xBF;
  int32_t v;
  if (c >= 0xC2 && c <= 0xDF) { need = 1; v = c & 0x1F; }
  else if (c >= 0xE0 && c <= 0xEF) {
    need = 2; v = c & 0x0F;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3; v = c & 0x07;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else return 0;
  for (int i = 1; i <= need; i++) {
    if ((size_t)i >= n) { *bad = i; return 0; }
    unsigned d = s[i];
    if (d < lo || d > hi) { *bad = i; return 0; }
    lo = 0x80; hi = 0xBF;
    v = (v << 6) | (int32_t)(d & 0x3F);
  }
  *cp = v;
  return need + 1;
}

/* Appends s[0..n) to b with every maximal invalid subpart replaced by U+FFFD. */
static int utf8_repair(buf *b, const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  size_t i = 0, run = 0;
  while (i < n) {
    int32_t cp;
    int bad, k = utf8_one(u + i, n - i, &cp, &bad);
    if (k) { i += (size_t)k; continue; }
    if (buf_add(b, s + run, i - run) || buf_add(b, "\xEF\xBF\xBD", 3)) return -1;
    i += (size_t)bad;
    run = i;
  }
  return buf_add(b, s + run, n - run);
}

static int utf8_valid(const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; i < n;) {
    int32_t cp;
    int bad, k = utf8_one(u + i, n - i, &cp, &bad);
    if (!k) return 0;
    i += (size_t)k;
  }
  return 1;
}

/* Decodes the (valid) character at s; returns its length. */
static int utf8_cp(const char *s, size_t n, int32_t *cp) {
  int bad, k = utf8_one((const unsigned char *)s, n, cp, &bad);
  if (!k) { *cp = 0xFFFD; return 1; }
  return k;
}

static int is_ws_cp(int32_t c) { /* Unicode White_Space (Rust's char::is_whitespace) */
  return (c >= 9 && c <= 13) || c == 32 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

static int is_numeric_cp(int32_t c) {
  utf8proc_category_t k = utf8proc_category(c);
  return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

/* The regex \w of `tokenizers`' single_word check (regex_syntax's Unicode
 * word characters): letters, marks, Nd, Nl, Pc, ZWNJ and ZWJ. */
static int is_word_cp(int32_t c) {
  utf8proc_category_t k = utf8proc_category(c);
  return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_ME) || k == UTF8PROC_CATEGORY_ND ||
         k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_PC || c == 0x200C || c == 0x200D;
}

/* ------------------------------------------------------------------- json */

enum { JT_NULL, JT_FALSE, JT_TRUE, JT_NUM, JT_STR, JT_ARR, JT_OBJ };

typedef struct jnode {
  unsigned char t;
  uint32_t n;     /* string bytes, array items or object members */
  size_t a;       /* string: offset in pool; array/object: first index in kids */
  double num;
  size_t at;      /* offset in the file, for messages */
} jnode;

typedef struct jdoc {
  jnode *nodes;
  size_t nn, ncap;
  uint32_t *kids;   /* arrays: items; objects: key, value, key, value ... */
  size_t nk, kcap;
  uint32_t *stack;  /* children being collected */
  size_t ns, scap;
  char *pool;       /* decoded strings, NUL-terminated each */
  size_t np;
  const char *src;
  size_t len, pos;
  const char *name;
  char *err;
  size_t errn;
  int failed;
} jdoc;

static void jd_free(jdoc *d) {
  free(d->nodes);
  free(d->kids);
  free(d->stack);
  free(d->pool);
}

static void jd_fail(jdoc *d, size_t at, const char *msg) {
  if (d->failed) return;
  d->failed = 1;
  size_t line = 1, col = 1;
  for (size_t i = 0; i < at && i < d->len; i++) {
    if (d->src[i] == '\n') { line++; col = 1; }
    else if (((unsigned char)d->src[i] & 0xC0) != 0x80) col++;
  }
  seterr(d->err, d->errn, "%s:%zu:%zu: invalid JSON: %s", d->name, line, col, msg);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t c = *cap ? *cap : 256;
  while (c < need) c *= 2;
  if (c > SIZE_MAX / elem) return -1;
  void *q = realloc(*p, c * elem);
  if (!q) return -1;
  *p = q;
  *cap = c;
  return 0;
}

static void jd_ws(jdoc *d) {
  while (d->pos < d->len) {
    char c = d->src[d->pos];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    d->pos++;
  }
}

static int64_t jd_node(jdoc *d, unsigned char t, size_t at) {
  if (grow((void **)&d->nodes, &d->ncap, d->nn + 1, sizeof(jnode))) {
    jd_fail(d, at, "out of memory");
    return -1;
  }
  d->nodes[d->nn] = (jnode){.t = t, .at = at};
  return (int64_t)d->nn++;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static int jd_hex4(jdoc *d, size_t at, unsigned *out) {
  if (at + 4 > d->len) return -1;
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    int h = hexval(d->src[at + (size_t)i]);
    if (h < 0) return -1;
    v = v * 16 + (unsigned)h;
  }
  *out = v;
  return 0;
}

/* A string at d->pos (the opening quote) into the pool. */
static int64_t jd_string(jdoc *d) {
  size_t at = d->pos++;
  int64_t id = jd_node(d, JT_STR, at);
  if (id < 0) return -1;
  size_t start = d->np;
  for (;;) {
    if (d->pos >= d->len) return jd_fail(d, at, "unterminated string"), -1;
    unsigned char c = (unsigned char)d->src[d->pos];
    if (c == '"') { d->pos++; break; }
    if (c < 0x20) return jd_fail(d, d->pos, "control character in a string (escape it)"), -1;
    if (c != '\\') {
      int32_t cp;
      int bad, k = utf8_one((const unsigned char *)d->src + d->pos, d->len - d->pos, &cp, &bad);
      if (!k) return jd_fail(d, d->pos, "string is not valid UTF-8"), -1;
      memcpy(d->pool + d->np, d->src + d->pos, (size_t)k);
      d->np += (size_t)k;
      d->pos += (size_t)k;
      continue;
    }
    if (d->pos + 1 >= d->len) return jd_fail(d, d->pos, "unterminated string"), -1;
    char e = d->src[d->pos + 1];
    const char *map = "\"\"\\\\//b\bf\fn\nr\rt\t";
    const char *m = e ? strchr(map, e) : NULL;
    if (m && ((m - map) % 2) == 0) {
      d->pool[d->np++] = m[1];
      d->pos += 2;
      continue;
    }
    if (e != 'u') return jd_fail(d, d->pos, "unknown escape in a string"), -1;
    unsigned u;
    if (jd_hex4(d, d->pos + 2, &u)) return jd_fail(d, d->pos, "\\u needs four hex digits"), -1;
    size_t esc = d->pos;
    d->pos += 6;
    if (u >= 0xDC00 && u <= 0xDFFF) return jd_fail(d, esc, "lone low surrogate in \\u escape"), -1;
    if (u >= 0xD800 && u <= 0xDBFF) {
      unsigned lo;
      if (d->pos + 1 >= d->len || d->src[d->pos] != '\\' || d->src[d->pos + 1] != 'u' ||
          jd_hex4(d, d->pos + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
        return jd_fail(d, esc, "lone high surrogate in \\u escape"), -1;
      d->pos += 6;
      u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
    }
    utf8proc_ssize_t k = utf8proc_encode_char((utf8proc_int32_t)u, (utf8proc_uint8_t *)d->pool + d->np);
    d->np += (size_t)k;
  }
  d->pool[d->np++] = '\0';
  d->nodes[id].a = start;
  d->nodes[id].n = (uint32_t)(d->np - 1 - start);
  return id;
}

static int64_t jd_number(jdoc *d) {
  size_t at = d->pos, i = d->pos;
  const char *s = d->src;
  if (i < d->len && s[i] == '-') i++;
  if (i >= d->len || s[i] < '0' || s[i] > '9') return jd_fail(d, at, "unexpected character"), -1;
  if (s[i] == '0') i++;
  else while (i < d->len && s[i] >= '0' && s[i] <= '9') i++;
  if (i < d->len && s[i] == '.') {
    i++;
    if (i >= d->len || s[i] < '0' || s[i] > '9') return jd_fail(d, at, "bad number"), -1;
    while (i < d->len && s[i] >= '0' && s[i] <= '9') i++;
  }
  if (i < d->len && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    if (i < d->len && (s[i] == '+' || s[i] == '-')) i++;
    if (i >= d->len || s[i] < '0' || s[i] > '9') return jd_fail(d, at, "bad number"), -1;
    while (i < d->len && s[i] >= '0' && s[i] <= '9') i++;
  }
  char tmp[64];
  if (i - at >= sizeof tmp) return jd_fail(d, at, "number too long"), -1;
  memcpy(tmp, s + at, i - at);
  tmp[i - at] = '\0';
  int64_t id = jd_node(d, JT_NUM, at);
  if (id < 0) return -1;
  d->nodes[id].num = strtod(tmp, NULL);
  d->pos = i;
  return id;
}

static int64_t jd_value(jdoc *d, int depth);

static int jd_push(jdoc *d, int64_t v) {
  if (grow((void **)&d->stack, &d->scap, d->ns + 1, sizeof(uint32_t))) {
    jd_fail(d, d->pos, "out of memory");
    return -1;
  }
  d->stack[d->ns++] = (uint32_t)v;
  return 0;
}

/* An array or object: children collected on the stack, then moved to kids. */
static int64_t jd_container(jdoc *d, int depth, int obj) {
  size_t at = d->pos++;
  if (depth >= JT_MAX_DEPTH) return jd_fail(d, at, "nested deeper than 128 levels"), -1;
  int64_t id = jd_node(d, obj ? JT_OBJ : JT_ARR, at);
  if (id < 0) return -1;
  size_t base = d->ns;
  char close = obj ? '}' : ']';
  jd_ws(d);
  if (d->pos < d->len && d->src[d->pos] == close) d->pos++;
  else for (;;) {
    jd_ws(d);
    if (obj) {
      if (d->pos >= d->len || d->src[d->pos] != '"')
        return jd_fail(d, d->pos, "expected a string key"), -1;
      int64_t k = jd_string(d);
      if (k < 0 || jd_push(d, k)) return -1;
      jd_ws(d);
      if (d->pos >= d->len || d->src[d->pos] != ':')
        return jd_fail(d, d->pos, "expected ':' after an object key"), -1;
      d->pos++;
    }
    int64_t v = jd_value(d, depth + 1);
    if (v < 0 || jd_push(d, v)) return -1;
    jd_ws(d);
    if (d->pos < d->len && d->src[d->pos] == ',') { d->pos++; continue; }
    if (d->pos < d->len && d->src[d->pos] == close) { d->pos++; break; }
    return jd_fail(d, d->pos, obj ? "expected ',' or '}'" : "expected ',' or ']'"), -1;
  }
  size_t cnt = d->ns - base;
  if (grow((void **)&d->kids, &d->kcap, d->nk + cnt, sizeof(uint32_t)))
    return jd_fail(d, at, "out of memory"), -1;
  if (cnt) memcpy(d->kids + d->nk, d->stack + base, cnt * sizeof(uint32_t));
  d->nodes[id].a = d->nk;
  d->nodes[id].n = (uint32_t)(obj ? cnt / 2 : cnt);
  d->nk += cnt;
  d->ns = base;
  return id;
}

static int64_t jd_value(jdoc *d, int depth) {
  jd_ws(d);
  if (d->pos >= d->len) return jd_fail(d, d->pos, "unexpected end of file"), -1;
  char c = d->src[d->pos];
  if (c == '{' || c == '[') return jd_container(d, depth, c == '{');
  if (c == '"') return jd_string(d);
  static const struct { const char *w; unsigned char t; } lits[] = {
      {"null", JT_NULL}, {"true", JT_TRUE}, {"false", JT_FALSE}};
  for (int i = 0; i < 3; i++) {
    size_t k = strlen(lits[i].w);
    if (d->len - d->pos >= k && !memcmp(d->src + d->pos, lits[i].w, k)) {
      int64_t id = jd_node(d, lits[i].t, d->pos);
      d->pos += k;
      return id;
    }
  }
  return jd_number(d);
}

/* Parses src[0..len); the root is node 0.  0, or -1 with the message set. */
static int jd_parse(jdoc *d, const char *src, size_t len, const char *name, char *err, size_t errn) {
  *d = (jdoc){.src = src, .len = len, .name = name, .err = err, .errn = errn};
  d->pool = malloc(len + 1);
  if (!d->pool) return seterr(err, errn, "%s: out of memory", name), -1;
  if (jd_value(d, 0) < 0) return -1;
  jd_ws(d);
  if (d->pos != len) return jd_fail(d, d->pos, "trailing characters after the top-level value"), -1;
  return 0;
}

static const jnode *jnode_at(const jdoc *d, uint32_t i) { return &d->nodes[i]; }
static const char *js(const jdoc *d, const jnode *n) { return d->pool + n->a; }
static const jnode *jkid(const jdoc *d, const jnode *n, uint32_t i) {
  return jnode_at(d, d->kids[n->a + i]);
}
static const jnode *jkey(const jdoc *d, const jnode *o, uint32_t i) {
  return jnode_at(d, d->kids[o->a + 2 * i]);
}
static const jnode *jval(const jdoc *d, const jnode *o, uint32_t i) {
  return jnode_at(d, d->kids[o->a + 2 * i + 1]);
}
static const jnode *jget(const jdoc *d, const jnode *o, const char *key) {
  if (!o || o->t != JT_OBJ) return NULL;
  size_t kl = strlen(key);
  for (uint32_t i = 0; i < o->n; i++) {
    const jnode *k = jkey(d, o, i);
    if (k->n == kl && !memcmp(js(d, k), key, kl)) return jval(d, o, i);
  }
  return NULL;
}
static int jstr_is(const jdoc *d, const jnode *n, const char *s) {
  return n && n->t == JT_STR && n->n == strlen(s) && !memcmp(js(d, n), s, n->n);
}

static const char *jtype_name(const jnode *n) {
  static const char *names[] = {"null", "false", "true", "a number", "a string", "an array", "an object"};
  return n ? names[n->t] : "missing";
}

/* Reads a whole file (at most TK_MAX_FILE bytes). */
static char *read_file(const char *path, size_t *len, char *err, size_t errn) {
  FILE *f = fopen(path, "rb");
  if (!f) return seterr(err, errn, "%s: cannot open: %s", path, strerror(errno)), NULL;
  struct stat st;
  if (!fstat(fileno(f), &st) && S_ISDIR(st.st_mode)) {
    fclose(f);
    return seterr(err, errn, "%s: is a directory, not a tokenizer file", path), NULL;
  }
  if (!fstat(fileno(f), &st) && S_ISREG(st.st_mode) && (uint64_t)st.st_size > TK_MAX_FILE) {
    fclose(f);
    return seterr(err, errn, "%s: larger than 1 GiB: not a tokenizer file", path), NULL;
  }
  buf b = {0};
  char tmp[65536];
  size_t k;
  while ((k = fread(tmp, 1, sizeof tmp, f)) > 0) {
    if (b.n + k > TK_MAX_FILE) {
      fclose(f);
      buf_free(&b);
      return seterr(err, errn, "%s: larger than 1 GiB: not a tokenizer file", path), NULL;
    }
    if (buf_add(&b, tmp, k)) {
      fclose(f);
      buf_free(&b);
      return seterr(err, errn, "%s: out of memory", path), NULL;
    }
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    buf_free(&b);
    return seterr(err, errn, "%s: read error", path), NULL;
  }
  if (!b.p && buf_add(&b, "", 0)) return seterr(err, errn, "%s: out of memory", path), NULL;
  *len = b.n;
  return b.p;
}

/* ------------------------------------------------------------------- maps */

static uint64_t hash_bytes(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h ^ (h >> 29);
}

typedef struct tok_entry {
  const char *s;   /* the model's token; NULL: the model has no token of this id */
  uint32_t len;
  const char *as;  /* the added token of this id (NULL: none); it wins in decode */
  uint32_t alen;
  unsigned char special;
} tok_entry;

/* string -> id over entries of an id table */
typedef struct strmap {
  int32_t *slot;   /* -1 empty */
  size_t cap;      /* power of two */
} strmap;

static int sm_init(strmap *m, size_t n) {
  size_t cap = 16;
  while (cap < 2 * n + 16) cap *= 2;
  m->slot = malloc(cap * sizeof(int32_t));
  if (!m->slot) return -1;
  memset(m->slot, 0xFF, cap * sizeof(int32_t));
  m->cap = cap;
  return 0;
}

/* Finds s among the ids of m (entries e); returns the id or -1, and *where
 * the slot to insert at. */
static int32_t sm_find(const strmap *m, const tok_entry *e, const char *s, size_t n, size_t *where) {
  size_t i = (size_t)hash_bytes(s, n) & (m->cap - 1);
  for (;;) {
    int32_t id = m->slot[i];
    if (id < 0) {
      if (where) *where = i;
      return -1;
    }
    if (e[id].len == n && !memcmp(e[id].s, s, n)) return id;
    i = (i + 1) & (m->cap - 1);
  }
}

typedef struct merge_val { uint32_t rank; int32_t id; } merge_val;
typedef struct mergemap {
  uint64_t *key;   /* (a << 32 | b) + 1; 0 empty */
  merge_val *val;
  size_t cap;
} mergemap;

static uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

static int mm_init(mergemap *m, size_t n) {
  size_t cap = 16;
  while (cap < 2 * n + 16) cap *= 2;
  m->key = calloc(cap, sizeof(uint64_t));
  m->val = malloc(cap * sizeof(merge_val));
  if (!m->key || !m->val) return -1;
  m->cap = cap;
  return 0;
}

static size_t mm_slot(const mergemap *m, int32_t a, int32_t b) {
  uint64_t k = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
  size_t i = (size_t)mix64(k) & (m->cap - 1);
  while (m->key[i] && m->key[i] != k) i = (i + 1) & (m->cap - 1);
  return i;
}

static const merge_val *mm_get(const mergemap *m, int32_t a, int32_t b) {
  if (!m->cap) return NULL;
  size_t i = mm_slot(m, a, b);
  return m->key[i] ? &m->val[i] : NULL;
}

/* A later duplicate of a merge wins, as in `tokenizers` (a HashMap insert). */
static void mm_put(mergemap *m, int32_t a, int32_t b, uint32_t rank, int32_t id) {
  size_t i = mm_slot(m, a, b);
  m->key[i] = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
  m->val[i] = (merge_val){rank, id};
}

/* ----------------------------------------------------------------- regex */

typedef struct regex {
  pcre2_code *code;
  int literal_empty;   /* a String pattern "" never matches */
  int literal;         /* a String pattern (else a Regex) */
  const char *pat;     /* the pattern as the file says it (it outlives the regex) */
  size_t plen;
} regex;

static int re_compile(regex *r, const char *pat, size_t n, int literal, const char *where,
                      const char *name, char *err, size_t errn) {
  *r = (regex){0};
  r->literal = literal, r->pat = pat, r->plen = n;
  if (literal && n == 0) { r->literal_empty = 1; return 0; }
  int ec;
  PCRE2_SIZE eo;
  uint32_t opt = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  r->code = pcre2_compile((PCRE2_SPTR)pat, n, opt, &ec, &eo, NULL);
  if (!r->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(ec, msg, sizeof msg);
    seterr(err, errn, "%s: %s: invalid regex at offset %zu: %s", name, where, (size_t)eo, (char *)msg);
    return -1;
  }
#ifndef BLOCKC_TOK_NO_JIT  /* (defined for valgrind runs: it cannot follow JIT code) */
  (void)pcre2_jit_compile(r->code, PCRE2_JIT_COMPLETE);  /* the interpreter when there is no JIT */
#endif
  return 0;
}

static void re_free(regex *r) {
  if (r->code) pcre2_code_free(r->code);
  r->code = NULL;
}

typedef struct span { size_t s, e; int m; } span;
typedef struct spans { span *p; size_t n, cap; } spans;

static int sp_add(spans *v, size_t s, size_t e, int m) {
  if (grow((void **)&v->p, &v->cap, v->n + 1, sizeof(span))) return -1;
  v->p[v->n++] = (span){s, e, m};
  return 0;
}

/* The matches of r in s[0..n) (onig's find_iter: an empty match where the
 * previous match ended is skipped by one character), interleaved with the
 * gaps, as `tokenizers`' Pattern::find_matches.  0, or -1 with err. */
static int re_spans(const regex *r, const char *s, size_t n, spans *out, char *err, size_t errn) {
  out->n = 0;
  if (r->literal_empty || !r->code) return n ? sp_add(out, 0, n, 0) : 0;
  pcre2_match_data *md = pcre2_match_data_create_from_pattern(r->code, NULL);
  if (!md) return seterr(err, errn, "out of memory"), -1;
  size_t pos = 0, prev = 0, last_end = SIZE_MAX;
  int rc = 0;
  while (pos <= n) {
    rc = pcre2_match(r->code, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, md, NULL);
    if (rc == PCRE2_ERROR_NOMATCH) { rc = 0; break; }
    if (rc < 0) break;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    size_t ms = ov[0], me = ov[1];
    if (ms == me && last_end == me) {
      if (pos >= n) break;
      int32_t cp;
      pos += (size_t)utf8_cp(s + pos, n - pos, &cp);
      continue;
    }
    if (prev < ms && sp_add(out, prev, ms, 0)) { rc = PCRE2_ERROR_NOMEMORY; break; }
    if (sp_add(out, ms, me, 1)) { rc = PCRE2_ERROR_NOMEMORY; break; }
    prev = me;
    pos = me;
    last_end = me;
  }
  pcre2_match_data_free(md);
  if (rc < 0) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, sizeof msg);
    seterr(err, errn, "regex match failed: %s", (char *)msg);
    return -1;
  }
  if (prev < n && sp_add(out, prev, n, 0)) return seterr(err, errn, "out of memory"), -1;
  return 0;
}

/* Each character for which pred holds is a match of its own. */
static int pred_spans(int (*pred)(int32_t, int32_t), int32_t arg, const char *s, size_t n, spans *out) {
  out->n = 0;
  size_t last = 0;
  for (size_t i = 0; i < n;) {
    int32_t cp;
    int k = utf8_cp(s + i, n - i, &cp);
    if (pred(cp, arg)) {
      if (last < i && sp_add(out, last, i, 0)) return -1;
      if (sp_add(out, i, i + (size_t)k, 1)) return -1;
      last = i + (size_t)k;
    }
    i += (size_t)k;
  }
  if (last < n && sp_add(out, last, n, 0)) return -1;
  return 0;
}

static int pred_numeric(int32_t c, int32_t arg) { (void)arg; return is_numeric_cp(c); }
static int pred_char(int32_t c, int32_t arg) { return c == arg; }

enum { B_REMOVED, B_ISOLATED, B_MERGED_PREV, B_MERGED_NEXT, B_CONTIGUOUS };

/* SplitDelimiterBehavior over the spans, in place (`tokenizers`' folds). */
static void apply_behavior(spans *v, int beh, int invert) {
  if (invert) for (size_t i = 0; i < v->n; i++) v->p[i].m = !v->p[i].m;
  size_t o = 0;
  int prev = 0;
  switch (beh) {
  case B_ISOLATED: return;
  case B_REMOVED:
    for (size_t i = 0; i < v->n; i++) if (!v->p[i].m) v->p[o++] = v->p[i];
    break;
  case B_MERGED_PREV:
    for (size_t i = 0; i < v->n; i++) {
      span x = v->p[i];
      if (x.m && !prev) {
        if (o) v->p[o - 1].e = x.e;
        else v->p[o++] = (span){x.s, x.e, 1};
      } else v->p[o++] = x;
      prev = x.m;
    }
    break;
  case B_MERGED_NEXT: /* fold from the right */
    for (size_t i = v->n; i-- > 0;) {
      span x = v->p[i];
      size_t dst = v->n - 1 - o;   /* build the result at the tail */
      if (x.m && !prev) {
        if (o) v->p[dst + 1].s = x.s;
        else { v->p[dst] = (span){x.s, x.e, 1}; o++; }
      } else { v->p[dst] = x; o++; }
      prev = x.m;
    }
    memmove(v->p, v->p + (v->n - o), o * sizeof(span));
    break;
  case B_CONTIGUOUS:
    for (size_t i = 0; i < v->n; i++) {
      span x = v->p[i];
      if (x.m == prev) {
        if (o) v->p[o - 1].e = x.e;
        else v->p[o++] = (span){x.s, x.e, 0};
      } else v->p[o++] = x;
      prev = x.m;
    }
    break;
  }
  v->n = o;
}

/* ----------------------------------------------------------------- pieces */

/* A list of strings in one buffer.  first: the piece starts at offset 0 of
 * the original text (Metaspace's prepend_scheme "first"). */
typedef struct piece { size_t off, len; int first; int32_t id; } piece;
typedef struct plist { buf b; piece *p; size_t n, cap; } plist;

static int pl_add(plist *l, const char *s, size_t n, int first, int32_t id) {
  if (grow((void **)&l->p, &l->cap, l->n + 1, sizeof(piece))) return -1;
  size_t off = l->b.n;
  if (buf_add(&l->b, s, n)) return -1;
  l->p[l->n++] = (piece){off, n, first, id};
  return 0;
}
static void pl_free(plist *l) { buf_free(&l->b); free(l->p); *l = (plist){0}; }
static const char *pl_str(const plist *l, size_t i) { return l->b.p + l->p[i].off; }

/* ----------------------------------------------------------------- stages */

enum {
  N_NFC, N_NFKC, N_NFD, N_NFKD, N_PREPEND, N_REPLACE, N_SEQ,
  P_BYTELEVEL, P_SPLIT, P_METASPACE, P_DIGITS, P_SEQ,
  D_BYTELEVEL, D_METASPACE, D_REPLACE, D_BYTEFALLBACK, D_FUSE, D_STRIP, D_SEQ
};
enum { PS_ALWAYS, PS_FIRST, PS_NEVER };

/* One normalizer, pre-tokenizer or decoder (kind says which). */
typedef struct stage {
  int kind;
  int a, b, c;           /* flags and counts (per kind, see the loaders) */
  int32_t cp;            /* a character: Metaspace's replacement, Strip's content */
  const char *str;       /* Prepend's text, Replace's content, the replacement as UTF-8 */
  size_t len;
  regex re;
  struct stage *kids;
  size_t nkids;
} stage;

static void stage_free(stage *s) {
  if (!s) return;
  for (size_t i = 0; i < s->nkids; i++) stage_free(&s->kids[i]);
  free(s->kids);
  re_free(&s->re);
}

typedef struct added_tok {
  const char *s;
  size_t len;
  char *pat;            /* normalized tokens: the content after the normalizer */
  size_t plen;
  int32_t id;
  unsigned char special, lstrip, rstrip, normalized, single_word;
} added_tok;

/* The added tokens of one kind (normalized or not), indexed by first byte,
 * longest first, for leftmost-longest matching. */
typedef struct added_set {
  uint32_t *idx;
  size_t n;
  uint32_t start[257];
} added_set;

struct blockc_tokenizer {
  tok_entry *e;          /* by id */
  size_t nid;
  strmap vocab;          /* the model's vocabulary */
  mergemap merges;
  int byte_fallback, fuse_unk, ignore_merges;
  int32_t unk_id;        /* -1: no unk_token */
  const char *unk_name;  /* unk_token as the file says it */
  const char *cont_prefix, *eow_suffix;
  size_t cont_len, eow_len;
  int32_t byte_tok[256]; /* <0xNN>, -1 when absent */
  added_tok *added;
  size_t nadded;
  added_set aset[2];     /* [0]: matched on the original text, [1]: on normalized text */
  stage *normalizer, *pretok, *decoder;
  int32_t *pre_ids, *post_ids;   /* add_special: before and after the sequence */
  size_t npre, npost;
  int32_t bos, eos;
  char *pools[2];        /* the strings the entries point at */
  int32_t b2u[256];      /* ByteLevel: byte -> code point */
  int16_t u2b[324];      /* and back (-1: not a byte's) */
};


typedef struct lctx {
  const jdoc *d;
  const char *name;
  char *err;
  size_t errn;
  blockc_tokenizer *t;
} lctx;

static int lfail(lctx *L, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int lfail(lctx *L, const char *path, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  seterr(L->err, L->errn, "%s: %s: %s", L->name, path, msg);
  return -1;
}

/* Quotes a string of the file for a message (cut, controls escaped). */
static const char *q(const char *s, size_t n, char *tmp, size_t tn) {
  size_t o = 0;
  for (size_t i = 0; i < n && o + 8 < tn; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c < 0x20 || c == '"' || c == '\\') o += (size_t)snprintf(tmp + o, tn - o, "\\x%02x", c);
    else tmp[o++] = (char)c;
    if (i + 1 < n && o + 8 >= tn) { memcpy(tmp + o, "...", 3); o += 3; break; }
  }
  tmp[o] = '\0';
  return tmp;
}

/* Every key of object o must be in the NULL-terminated list known. */
static int check_keys(lctx *L, const jnode *o, const char *path, const char *const *known) {
  for (uint32_t i = 0; i < o->n; i++) {
    const jnode *k = jkey(L->d, o, i);
    int ok = 0;
    for (const char *const *p = known; *p && !ok; p++) ok = jstr_is(L->d, k, *p);
    char tmp[96];
    if (!ok)
      return lfail(L, path, "unsupported field \"%s\" (not read by blockc: refusing rather than "
                   "tokenizing differently)", q(js(L->d, k), k->n, tmp, sizeof tmp));
  }
  return 0;
}

static int get_bool(lctx *L, const jnode *o, const char *key, const char *path, int dflt, int *out) {
  const jnode *v = jget(L->d, o, key);
  if (!v) { *out = dflt; return 0; }
  if (v->t != JT_TRUE && v->t != JT_FALSE)
    return lfail(L, path, "\"%s\" must be true or false, not %s", key, jtype_name(v));
  *out = v->t == JT_TRUE;
  return 0;
}

static const jnode *get_str(lctx *L, const jnode *o, const char *key, const char *path, int required) {
  const jnode *v = jget(L->d, o, key);
  if (!v && !required) return NULL;
  if (!v || v->t != JT_STR) {
    lfail(L, path, "\"%s\" must be a string, not %s", key, jtype_name(v));
    return NULL;
  }
  return v;
}

/* A non-negative integer below lim. */
static int get_uint(lctx *L, const jnode *v, const char *path, const char *what, double lim, int64_t *out) {
  if (!v || v->t != JT_NUM || !(v->num >= 0 && v->num < lim) || v->num != (double)(int64_t)v->num) {
    if (v && v->t == JT_NUM)
      return lfail(L, path, "%s must be an integer in 0..%.0f, not %g", what, lim - 1, v->num);
    return lfail(L, path, "%s must be an integer, not %s", what, jtype_name(v));
  }
  *out = (int64_t)v->num;
  return 0;
}

/* One character string (Metaspace replacement, Strip content). */
static int get_char(lctx *L, const jnode *v, const char *path, const char *what, int32_t *cp) {
  int32_t c;
  if (!v || v->t != JT_STR || !v->n || (size_t)utf8_cp(js(L->d, v), v->n, &c) != v->n)
    return lfail(L, path, "%s must be a string of one character", what);
  *cp = c;
  return 0;
}

/* {"String": s} or {"Regex": r} into re. */
static int load_pattern(lctx *L, const jnode *p, const char *path, regex *re) {
  char sub[300];
  snprintf(sub, sizeof sub, "%s.pattern", path);
  if (!p || p->t != JT_OBJ || p->n != 1)
    return lfail(L, sub, "must be {\"String\": ...} or {\"Regex\": ...}");
  const jnode *k = jkey(L->d, p, 0), *v = jval(L->d, p, 0);
  int lit = jstr_is(L->d, k, "String");
  if (!lit && !jstr_is(L->d, k, "Regex"))
    return lfail(L, sub, "must be {\"String\": ...} or {\"Regex\": ...}");
  if (v->t != JT_STR) return lfail(L, sub, "the pattern must be a string, not %s", jtype_name(v));
  return re_compile(re, js(L->d, v), v->n, lit, sub, L->name, L->err, L->errn);
}

typedef int (*load_fn)(lctx *L, const jnode *o, const char *path, stage *s);

/* A stage's "type" among names[], kinds[] (n of them) or an error naming it. */
static int stage_type(lctx *L, const jnode *o, const char *path, const char *what,
                      const char *const *names, const int *kinds, int n, int *kind) {
  if (o->t != JT_OBJ) return lfail(L, path, "%s must be an object or null, not %s", what, jtype_name(o));
  const jnode *ty = jget(L->d, o, "type");
  if (!ty || ty->t != JT_STR) return lfail(L, path, "%s without a \"type\" string", what);
  for (int i = 0; i < n; i++)
    if (jstr_is(L->d, ty, names[i])) { *kind = kinds[i]; return 0; }
  char tmp[96], list[300];
  size_t off = 0;
  list[0] = '\0';
  for (int i = 0; i < n && off < sizeof list; i++)
    off += (size_t)snprintf(list + off, sizeof list - off, "%s%s", i ? ", " : "", names[i]);
  return lfail(L, path, "unsupported %s type \"%s\" (blockc reads %s)", what,
               q(js(L->d, ty), ty->n, tmp, sizeof tmp), list);
}

/* The kids of a Sequence (key: the array's name) with fn. */
static int load_seq(lctx *L, const jnode *o, const char *path, const char *key, load_fn fn, stage *s) {
  const jnode *a = jget(L->d, o, key);
  if (!a || a->t != JT_ARR) return lfail(L, path, "\"%s\" must be an array", key);
  s->kids = calloc(a->n ? a->n : 1, sizeof(stage));
  if (!s->kids) return lfail(L, path, "out of memory");
  for (uint32_t i = 0; i < a->n; i++) {
    char sub[300];
    snprintf(sub, sizeof sub, "%s.%s[%u]", path, key, i);
    s->nkids = i + 1;
    if (fn(L, jkid(L->d, a, i), sub, &s->kids[i])) return -1;
  }
  s->nkids = a->n;
  return 0;
}
static int load_normalizer(lctx *L, const jnode *o, const char *path, stage *s) {
  static const char *const names[] = {"NFC", "NFKC", "NFD", "NFKD", "Prepend", "Replace", "Sequence"};
  static const int kinds[] = {N_NFC, N_NFKC, N_NFD, N_NFKD, N_PREPEND, N_REPLACE, N_SEQ};
  if (stage_type(L, o, path, "normalizer", names, kinds, 7, &s->kind)) return -1;
  switch (s->kind) {
  case N_PREPEND: {
    static const char *const k[] = {"type", "prepend", NULL};
    const jnode *v = get_str(L, o, "prepend", path, 1);
    if (check_keys(L, o, path, k) || !v) return -1;
    s->str = js(L->d, v);
    s->len = v->n;
    return 0;
  }
  case N_REPLACE: {
    static const char *const k[] = {"type", "pattern", "content", NULL};
    const jnode *v = get_str(L, o, "content", path, 1);
    if (check_keys(L, o, path, k) || !v) return -1;
    s->str = js(L->d, v);
    s->len = v->n;
    return load_pattern(L, jget(L->d, o, "pattern"), path, &s->re);
  }
  case N_SEQ: {
    static const char *const k[] = {"type", "normalizers", NULL};
    if (check_keys(L, o, path, k)) return -1;
    return load_seq(L, o, path, "normalizers", load_normalizer, s);
  }
  default: {
    static const char *const k[] = {"type", NULL};
    return check_keys(L, o, path, k);
  }
  }
}

/* prepend_scheme (or the legacy add_prefix_space) of Metaspace. */
static int load_scheme(lctx *L, const jnode *o, const char *path, int *scheme) {
  const jnode *v = jget(L->d, o, "prepend_scheme");
  if (v) {
    if (jstr_is(L->d, v, "always")) *scheme = PS_ALWAYS;
    else if (jstr_is(L->d, v, "first")) *scheme = PS_FIRST;
    else if (jstr_is(L->d, v, "never")) *scheme = PS_NEVER;
    else return lfail(L, path, "\"prepend_scheme\" must be \"always\", \"first\" or \"never\"");
    return 0;
  }
  int aps = 0;
  if (get_bool(L, o, "add_prefix_space", path, 1, &aps)) return -1;
  *scheme = aps ? PS_ALWAYS : PS_NEVER;
  return 0;
}

static int load_metaspace(lctx *L, const jnode *o, const char *path, stage *s) {
  if (get_char(L, jget(L->d, o, "replacement"), path, "\"replacement\"", &s->cp)) return -1;
  const jnode *r = jget(L->d, o, "replacement");
  s->str = js(L->d, r);
  s->len = r->n;
  return load_scheme(L, o, path, &s->a);
}

static const char gpt2_regex[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static int load_pretok(lctx *L, const jnode *o, const char *path, stage *s) {
  static const char *const names[] = {"ByteLevel", "Split", "Metaspace", "Digits", "Sequence"};
  static const int kinds[] = {P_BYTELEVEL, P_SPLIT, P_METASPACE, P_DIGITS, P_SEQ};
  if (stage_type(L, o, path, "pre_tokenizer", names, kinds, 5, &s->kind)) return -1;
  switch (s->kind) {
  case P_BYTELEVEL: {
    static const char *const k[] = {"type", "add_prefix_space", "trim_offsets", "use_regex", NULL};
    if (check_keys(L, o, path, k) || get_bool(L, o, "add_prefix_space", path, 1, &s->a) ||
        get_bool(L, o, "use_regex", path, 1, &s->b))
      return -1;
    if (!s->b) return 0;
    return re_compile(&s->re, gpt2_regex, sizeof gpt2_regex - 1, 0, path, L->name, L->err, L->errn);
  }
  case P_SPLIT: {
    static const char *const k[] = {"type", "pattern", "behavior", "invert", NULL};
    static const char *const beh[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
    if (check_keys(L, o, path, k) || get_bool(L, o, "invert", path, 0, &s->b)) return -1;
    const jnode *b = get_str(L, o, "behavior", path, 1);
    if (!b) return -1;
    s->a = -1;
    for (int i = 0; i < 5; i++) if (jstr_is(L->d, b, beh[i])) s->a = i;
    if (s->a < 0)
      return lfail(L, path, "\"behavior\" must be Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous");
    return load_pattern(L, jget(L->d, o, "pattern"), path, &s->re);
  }
  case P_METASPACE: {
    static const char *const k[] = {"type", "replacement", "prepend_scheme", "add_prefix_space", "split",
                                    "str_rep", NULL};
    if (check_keys(L, o, path, k) || get_bool(L, o, "split", path, 1, &s->b)) return -1;
    return load_metaspace(L, o, path, s);
  }
  case P_DIGITS: {
    static const char *const k[] = {"type", "individual_digits", NULL};
    if (check_keys(L, o, path, k)) return -1;
    return get_bool(L, o, "individual_digits", path, 0, &s->a);
  }
  default: {
    static const char *const k[] = {"type", "pretokenizers", NULL};
    if (check_keys(L, o, path, k)) return -1;
    return load_seq(L, o, path, "pretokenizers", load_pretok, s);
  }
  }
}

static int load_decoder(lctx *L, const jnode *o, const char *path, stage *s) {
  static const char *const names[] = {"ByteLevel", "Metaspace", "Replace", "ByteFallback", "Fuse",
                                      "Strip", "Sequence"};
  static const int kinds[] = {D_BYTELEVEL, D_METASPACE, D_REPLACE, D_BYTEFALLBACK, D_FUSE, D_STRIP, D_SEQ};
  if (stage_type(L, o, path, "decoder", names, kinds, 7, &s->kind)) return -1;
  switch (s->kind) {
  case D_BYTELEVEL: {
    static const char *const k[] = {"type", "add_prefix_space", "trim_offsets", "use_regex", NULL};
    return check_keys(L, o, path, k);
  }
  case D_METASPACE: {
    static const char *const k[] = {"type", "replacement", "prepend_scheme", "add_prefix_space", "split",
                                    "str_rep", NULL};
    if (check_keys(L, o, path, k)) return -1;
    return load_metaspace(L, o, path, s);
  }
  case D_REPLACE: {
    static const char *const k[] = {"type", "pattern", "content", NULL};
    const jnode *v = get_str(L, o, "content", path, 1);
    if (check_keys(L, o, path, k) || !v) return -1;
    s->str = js(L->d, v);
    s->len = v->n;
    return load_pattern(L, jget(L->d, o, "pattern"), path, &s->re);
  }
  case D_STRIP: {
    static const char *const k[] = {"type", "content", "start", "stop", NULL};
    int64_t a = 0, b = 0;
    char sub[300];
    snprintf(sub, sizeof sub, "%s.start", path);
    if (check_keys(L, o, path, k) ||
        get_char(L, jget(L->d, o, "content"), path, "\"content\"", &s->cp) ||
        get_uint(L, jget(L->d, o, "start"), sub, "start", 1e9, &a))
      return -1;
    snprintf(sub, sizeof sub, "%s.stop", path);
    if (get_uint(L, jget(L->d, o, "stop"), sub, "stop", 1e9, &b)) return -1;
    s->a = (int)a;
    s->b = (int)b;
    return 0;
  }
  case D_SEQ: {
    static const char *const k[] = {"type", "decoders", NULL};
    if (check_keys(L, o, path, k)) return -1;
    return load_seq(L, o, path, "decoders", load_decoder, s);
  }
  default: {
    static const char *const k[] = {"type", NULL};
    return check_keys(L, o, path, k);
  }
  }
}

/* An optional stage (null or absent: none). */
static int load_opt_stage(lctx *L, const jnode *root, const char *key, load_fn fn, stage **out) {
  const jnode *o = jget(L->d, root, key);
  *out = NULL;
  if (!o || o->t == JT_NULL) return 0;
  *out = calloc(1, sizeof(stage));
  if (!*out) return lfail(L, key, "out of memory");
  return fn(L, o, key, *out);
}

/* ------------------------------------------------------------ the loaders */

static int normalize(const stage *s, buf *io, char *err, size_t errn);

/* The id table: nid = max id + 1, bounded by the file's size. */
static int alloc_ids(lctx *L, int64_t maxid, size_t file_len) {
  blockc_tokenizer *t = L->t;
  if (maxid >= (int64_t)file_len + 1024)
    return lfail(L, "model.vocab", "id %lld is far beyond the number of tokens a %zu-byte file can hold",
                 (long long)maxid, file_len);
  t->nid = (size_t)maxid + 1;
  t->e = calloc(t->nid, sizeof(tok_entry));
  if (!t->e) return lfail(L, "model.vocab", "out of memory for %zu ids", t->nid);
  return 0;
}

/* Checks the ids of vocab (an object token -> id) and of added_tokens; the
 * largest into *maxid. */
static int scan_ids(lctx *L, const jnode *vocab, const jnode *added, int64_t *maxid) {
  *maxid = -1;
  char path[64];
  for (uint32_t i = 0; vocab && i < vocab->n; i++) {
    int64_t id = 0;
    char tmp[96];
    const jnode *k = jkey(L->d, vocab, i);
    snprintf(path, sizeof path, "model.vocab");
    char what[160];
    snprintf(what, sizeof what, "the id of token \"%s\"", q(js(L->d, k), k->n, tmp, sizeof tmp));
    if (get_uint(L, jval(L->d, vocab, i), path, what, TK_MAX_ID + 1.0, &id)) return -1;
    if (id > *maxid) *maxid = id;
  }
  for (uint32_t i = 0; added && i < added->n; i++) {
    const jnode *a = jkid(L->d, added, i);
    int64_t id = 0;
    snprintf(path, sizeof path, "added_tokens[%u]", i);
    if (a->t != JT_OBJ) return lfail(L, path, "must be an object, not %s", jtype_name(a));
    if (get_uint(L, jget(L->d, a, "id"), path, "\"id\"", TK_MAX_ID + 1.0, &id)) return -1;
    if (id > *maxid) *maxid = id;
  }
  return 0;
}

static int fill_vocab(lctx *L, const jnode *vocab) {
  blockc_tokenizer *t = L->t;
  if (sm_init(&t->vocab, vocab->n)) return lfail(L, "model.vocab", "out of memory");
  for (uint32_t i = 0; i < vocab->n; i++) {
    const jnode *k = jkey(L->d, vocab, i);
    int32_t id = (int32_t)jval(L->d, vocab, i)->num;
    char t1[96], t2[96];
    if (t->e[id].s)
      return lfail(L, "model.vocab", "tokens \"%s\" and \"%s\" have the same id %d",
                   q(t->e[id].s, t->e[id].len, t1, sizeof t1), q(js(L->d, k), k->n, t2, sizeof t2), id);
    size_t slot;
    if (sm_find(&t->vocab, t->e, js(L->d, k), k->n, &slot) >= 0)
      return lfail(L, "model.vocab", "token \"%s\" appears twice", q(js(L->d, k), k->n, t1, sizeof t1));
    t->e[id].s = js(L->d, k);
    t->e[id].len = k->n;
    t->vocab.slot[slot] = id;
  }
  return 0;
}

static int32_t vocab_id(const blockc_tokenizer *t, const char *s, size_t n) {
  return sm_find(&t->vocab, t->e, s, n, NULL);
}

/* One merge (a, b) at rank r; path names it in messages. */
static int add_merge(lctx *L, const char *a, size_t na, const char *b, size_t nb, uint32_t r,
                     const char *path, buf *tmp) {
  blockc_tokenizer *t = L->t;
  char t1[96], t2[96], t3[96];
  int32_t ia = vocab_id(t, a, na), ib = vocab_id(t, b, nb);
  if (ia < 0 || ib < 0)
    return lfail(L, path, "merge \"%s %s\" names token \"%s\", which is not in the vocabulary",
                 q(a, na, t1, sizeof t1), q(b, nb, t2, sizeof t2),
                 ia < 0 ? q(a, na, t3, sizeof t3) : q(b, nb, t3, sizeof t3));
  size_t skip = t->cont_prefix && nb >= t->cont_len && !memcmp(b, t->cont_prefix, t->cont_len) ? t->cont_len : 0;
  tmp->n = 0;
  if (buf_add(tmp, a, na) || buf_add(tmp, b + skip, nb - skip)) return lfail(L, path, "out of memory");
  int32_t id = vocab_id(t, tmp->p, tmp->n);
  if (id < 0)
    return lfail(L, path, "the merge of \"%s\" and \"%s\" makes \"%s\", which is not in the vocabulary",
                 q(a, na, t1, sizeof t1), q(b, nb, t2, sizeof t2), q(tmp->p, tmp->n, t3, sizeof t3));
  mm_put(&t->merges, ia, ib, r, id);
  return 0;
}

static int load_merges(lctx *L, const jnode *m) {
  blockc_tokenizer *t = L->t;
  if (!m || m->t != JT_ARR) return lfail(L, "model.merges", "must be an array, not %s", jtype_name(m));
  if (mm_init(&t->merges, m->n)) return lfail(L, "model.merges", "out of memory");
  buf tmp = {0};
  int rc = 0;
  for (uint32_t i = 0; i < m->n && !rc; i++) {
    const jnode *x = jkid(L->d, m, i);
    char path[64];
    snprintf(path, sizeof path, "model.merges[%u]", i);
    if (x->t != jkid(L->d, m, 0)->t && (x->t == JT_STR || x->t == JT_ARR)) {
      /* `tokenizers` refuses the mix too (untagged enum MergeType) */
      rc = lfail(L, path, "merges mix \"a b\" strings and [\"a\", \"b\"] pairs: use one form");
      break;
    }
    if (x->t == JT_STR) {
      const char *s = js(L->d, x), *sp = memchr(s, ' ', x->n);
      if (!sp) { rc = lfail(L, path, "a merge string must be two tokens separated by a space"); break; }
      rc = add_merge(L, s, (size_t)(sp - s), sp + 1, x->n - (size_t)(sp - s) - 1, i, path, &tmp);
    } else if (x->t == JT_ARR && x->n == 2 && jkid(L->d, x, 0)->t == JT_STR && jkid(L->d, x, 1)->t == JT_STR) {
      const jnode *a = jkid(L->d, x, 0), *b = jkid(L->d, x, 1);
      rc = add_merge(L, js(L->d, a), a->n, js(L->d, b), b->n, i, path, &tmp);
    } else {
      rc = lfail(L, path, "a merge must be a string \"a b\" or a pair [\"a\", \"b\"], not %s", jtype_name(x));
    }
  }
  buf_free(&tmp);
  return rc;
}

static int opt_string(lctx *L, const jnode *o, const char *key, const char **s, size_t *n) {
  const jnode *v = jget(L->d, o, key);
  *s = NULL;
  *n = 0;
  if (!v || v->t == JT_NULL) return 0;
  char path[64];
  snprintf(path, sizeof path, "model.%s", key);
  if (v->t != JT_STR) return lfail(L, path, "must be a string or null, not %s", jtype_name(v));
  *s = js(L->d, v);
  *n = v->n;
  return 0;
}

static void find_byte_tokens(blockc_tokenizer *t) {
  for (int b = 0; b < 256; b++) {
    char name[8];
    snprintf(name, sizeof name, "<0x%02X>", b);
    t->byte_tok[b] = vocab_id(t, name, 6);
  }
}

static int load_model(lctx *L, const jnode *m) {
  blockc_tokenizer *t = L->t;
  static const char *const k[] = {"type", "dropout", "unk_token", "continuing_subword_prefix",
                                  "end_of_word_suffix", "fuse_unk", "byte_fallback", "ignore_merges",
                                  "vocab", "merges", NULL};
  if (!m || m->t != JT_OBJ) return lfail(L, "model", "must be an object, not %s", jtype_name(m));
  const jnode *ty = jget(L->d, m, "type");
  char tmp[96];
  if (ty && !jstr_is(L->d, ty, "BPE"))
    return lfail(L, "model.type", "unsupported model type \"%s\" (blockc reads BPE)",
                 ty->t == JT_STR ? q(js(L->d, ty), ty->n, tmp, sizeof tmp) : jtype_name(ty));
  if (check_keys(L, m, "model", k)) return -1;
  const jnode *dr = jget(L->d, m, "dropout");
  if (dr && dr->t != JT_NULL && !(dr->t == JT_NUM && dr->num == 0))
    return lfail(L, "model.dropout", "BPE dropout (random merges) is not supported: set it to null");
  const char *unk;
  size_t unk_len;
  if (opt_string(L, m, "unk_token", &unk, &unk_len) ||
      opt_string(L, m, "continuing_subword_prefix", &t->cont_prefix, &t->cont_len) ||
      opt_string(L, m, "end_of_word_suffix", &t->eow_suffix, &t->eow_len) ||
      get_bool(L, m, "fuse_unk", "model", 0, &t->fuse_unk) ||
      get_bool(L, m, "byte_fallback", "model", 0, &t->byte_fallback) ||
      get_bool(L, m, "ignore_merges", "model", 0, &t->ignore_merges))
    return -1;
  if (t->cont_prefix && !t->cont_len) t->cont_prefix = NULL;
  if (t->eow_suffix && !t->eow_len) t->eow_suffix = NULL;
  if (fill_vocab(L, jget(L->d, m, "vocab"))) return -1;
  t->unk_name = unk;
  t->unk_id = unk ? vocab_id(t, unk, unk_len) : -1;
  if (unk && t->unk_id < 0) t->unk_id = -2;  /* an error when an unknown character needs it */
  find_byte_tokens(t);
  return load_merges(L, jget(L->d, m, "merges"));
}

static int load_added(lctx *L, const jnode *a) {
  blockc_tokenizer *t = L->t;
  if (!a || a->t == JT_NULL) return 0;
  t->added = calloc(a->n ? a->n : 1, sizeof(added_tok));
  if (!t->added) return lfail(L, "added_tokens", "out of memory");
  for (uint32_t i = 0; i < a->n; i++) {
    static const char *const k[] = {"id", "content", "single_word", "lstrip", "rstrip", "normalized",
                                    "special", NULL};
    const jnode *o = jkid(L->d, a, i);
    char path[64];
    snprintf(path, sizeof path, "added_tokens[%u]", i);
    added_tok *x = &t->added[t->nadded];
    int sw = 0, ls = 0, rs = 0, norm = 0, sp = 0;
    const jnode *c = get_str(L, o, "content", path, 1);
    if (!c || check_keys(L, o, path, k) || get_bool(L, o, "single_word", path, 0, &sw) ||
        get_bool(L, o, "lstrip", path, 0, &ls) || get_bool(L, o, "rstrip", path, 0, &rs) ||
        get_bool(L, o, "special", path, 0, &sp) || get_bool(L, o, "normalized", path, !sp, &norm))
      return -1;
    if (!c->n) return lfail(L, path, "\"content\" must not be empty");
    int32_t id = (int32_t)jget(L->d, o, "id")->num;
    tok_entry *e = &t->e[id];
    char t1[96], t2[96];
    if (e->as)
      return lfail(L, path, "added tokens \"%s\" and \"%s\" have the same id %d", q(e->as, e->alen, t1, sizeof t1),
                   q(js(L->d, c), c->n, t2, sizeof t2), id);
    *x = (added_tok){js(L->d, c), c->n, NULL, 0, id, (unsigned char)sp, (unsigned char)ls,
                     (unsigned char)rs, (unsigned char)norm, (unsigned char)sw};
    e->as = x->s;
    e->alen = (uint32_t)x->len;
    e->special = (unsigned char)sp;
    t->nadded++;
  }
  return 0;
}

/* The added-token sets, patterns of normalized ones through the normalizer. */
typedef struct akey { unsigned char first; size_t len; uint32_t i; } akey;
static int akey_cmp(const void *x, const void *y) {
  const akey *a = x, *b = y;
  if (a->first != b->first) return a->first < b->first ? -1 : 1;
  if (a->len != b->len) return a->len > b->len ? -1 : 1;
  return a->i < b->i ? -1 : a->i > b->i;
}

static int build_added_sets(lctx *L) {
  blockc_tokenizer *t = L->t;
  for (size_t i = 0; i < t->nadded; i++) {
    added_tok *x = &t->added[i];
    if (!x->normalized || !t->normalizer) continue;
    buf b = {0};
    if (buf_add(&b, x->s, x->len) || normalize(t->normalizer, &b, L->err, L->errn)) {
      buf_free(&b);
      return lfail(L, "added_tokens", "normalizing an added token failed");
    }
    x->pat = b.p;
    x->plen = b.n;
  }
  for (int k = 0; k < 2; k++) {
    added_set *s = &t->aset[k];
    akey *keys = malloc((t->nadded ? t->nadded : 1) * sizeof(akey));
    s->idx = malloc((t->nadded ? t->nadded : 1) * sizeof(uint32_t));
    if (!keys || !s->idx) { free(keys); return lfail(L, "added_tokens", "out of memory"); }
    s->n = 0;
    for (size_t i = 0; i < t->nadded; i++) {
      const added_tok *x = &t->added[i];
      if (x->normalized != k) continue;
      const char *p = x->pat ? x->pat : x->s;
      size_t n = x->pat ? x->plen : x->len;
      if (!n) continue;
      keys[s->n++] = (akey){(unsigned char)p[0], n, (uint32_t)i};
    }
    qsort(keys, s->n, sizeof(akey), akey_cmp);
    memset(s->start, 0, sizeof s->start);
    for (size_t i = 0; i < s->n; i++) {
      s->idx[i] = keys[i].i;
      s->start[keys[i].first + 1]++;
    }
    for (int c = 0; c < 256; c++) s->start[c + 1] += s->start[c];
    free(keys);
  }
  return 0;
}

static int add_ids(lctx *L, const char *path, int32_t **v, size_t *n, const int32_t *ids, size_t k, int front) {
  int32_t *w = realloc(*v, (*n + k + 1) * sizeof(int32_t));
  if (!w) return lfail(L, path, "out of memory");
  if (front) {
    memmove(w + k, w, *n * sizeof(int32_t));
    memcpy(w, ids, k * sizeof(int32_t));
  } else memcpy(w + *n, ids, k * sizeof(int32_t));
  *v = w;
  *n += k;
  return 0;
}

static int check_id(lctx *L, const char *path, int64_t id) {
  blockc_tokenizer *t = L->t;
  if (id < 0 || (size_t)id >= t->nid || (!t->e[id].s && !t->e[id].as))
    return lfail(L, path, "id %lld is not a token of the vocabulary", (long long)id);
  return 0;
}

/* ["<s>", 1] of Roberta/Bert. */
static int load_tokpair(lctx *L, const jnode *o, const char *key, const char *path, int32_t *id) {
  const jnode *v = jget(L->d, o, key);
  char sub[300];
  snprintf(sub, sizeof sub, "%s.%s", path, key);
  int64_t x = 0;
  if (!v || v->t != JT_ARR || v->n != 2 || jkid(L->d, v, 0)->t != JT_STR)
    return lfail(L, sub, "must be a pair [\"token\", id]");
  if (get_uint(L, jkid(L->d, v, 1), sub, "the id", TK_MAX_ID + 1.0, &x) || check_id(L, sub, x)) return -1;
  *id = (int32_t)x;
  return 0;
}

static int load_template(lctx *L, const jnode *o, const char *path, int32_t **pre, size_t *npre,
                         int32_t **post, size_t *npost) {
  const jnode *single = jget(L->d, o, "single"), *sp = jget(L->d, o, "special_tokens");
  char sub[300];
  if (!single || single->t != JT_ARR) return lfail(L, path, "\"single\" must be an array");
  if (sp && sp->t != JT_OBJ) return lfail(L, path, "\"special_tokens\" must be an object");
  int seen = 0;
  for (uint32_t i = 0; i < single->n; i++) {
    const jnode *it = jkid(L->d, single, i);
    snprintf(sub, sizeof sub, "%s.single[%u]", path, i);
    if (it->t != JT_OBJ || it->n != 1) return lfail(L, sub, "must be {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    const jnode *k = jkey(L->d, it, 0), *v = jval(L->d, it, 0);
    const jnode *id = jget(L->d, v, "id");
    if (!id || id->t != JT_STR) return lfail(L, sub, "needs an \"id\" string");
    if (jstr_is(L->d, k, "Sequence")) {
      if (!jstr_is(L->d, id, "A")) return lfail(L, sub, "the single template can only hold sequence A");
      if (seen) return lfail(L, sub, "sequence A appears twice");
      seen = 1;
      continue;
    }
    if (!jstr_is(L->d, k, "SpecialToken")) return lfail(L, sub, "must be {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    const jnode *st = jget(L->d, sp, js(L->d, id));
    char tmp[96];
    if (!st) return lfail(L, sub, "special token \"%s\" is not in special_tokens", q(js(L->d, id), id->n, tmp, sizeof tmp));
    const jnode *ids = jget(L->d, st, "ids");
    if (!ids || ids->t != JT_ARR) return lfail(L, sub, "special_tokens entry without an \"ids\" array");
    for (uint32_t j = 0; j < ids->n; j++) {
      int64_t x = 0;
      if (get_uint(L, jkid(L->d, ids, j), sub, "a special token id", TK_MAX_ID + 1.0, &x) || check_id(L, sub, x)) return -1;
      int32_t y = (int32_t)x;
      if (add_ids(L, sub, seen ? post : pre, seen ? npost : npre, &y, 1, 0)) return -1;
    }
  }
  if (!seen) return lfail(L, path, "the single template has no sequence A");
  return 0;
}

static int load_post(lctx *L, const jnode *o, const char *path, int32_t **pre, size_t *npre,
                     int32_t **post, size_t *npost) {
  static const char *const names[] = {"TemplateProcessing", "ByteLevel", "RobertaProcessing",
                                      "BertProcessing", "Sequence"};
  static const int kinds[] = {0, 1, 2, 3, 4};
  int kind;
  if (stage_type(L, o, path, "post_processor", names, kinds, 5, &kind)) return -1;
  if (kind == 0) {
    static const char *const k[] = {"type", "single", "pair", "special_tokens", NULL};
    if (check_keys(L, o, path, k)) return -1;
    return load_template(L, o, path, pre, npre, post, npost);
  }
  if (kind == 1) {
    static const char *const k[] = {"type", "add_prefix_space", "trim_offsets", "use_regex", NULL};
    return check_keys(L, o, path, k);
  }
  if (kind == 2 || kind == 3) {
    static const char *const k[] = {"type", "sep", "cls", "trim_offsets", "add_prefix_space", NULL};
    int32_t cls, sep;
    if (check_keys(L, o, path, k) || load_tokpair(L, o, "cls", path, &cls) || load_tokpair(L, o, "sep", path, &sep))
      return -1;
    return add_ids(L, path, pre, npre, &cls, 1, 0) || add_ids(L, path, post, npost, &sep, 1, 0) ? -1 : 0;
  }
  static const char *const k[] = {"type", "processors", NULL};
  const jnode *a = jget(L->d, o, "processors");
  if (check_keys(L, o, path, k)) return -1;
  if (!a || a->t != JT_ARR) return lfail(L, path, "\"processors\" must be an array");
  for (uint32_t i = 0; i < a->n; i++) {
    char sub[300];
    snprintf(sub, sizeof sub, "%s.processors[%u]", path, i);
    int32_t *p2 = NULL, *q2 = NULL;
    size_t n2 = 0, m2 = 0;
    int rc = load_post(L, jkid(L->d, a, i), sub, &p2, &n2, &q2, &m2);
    if (!rc) rc = add_ids(L, sub, pre, npre, p2, n2, 1) || add_ids(L, sub, post, npost, q2, m2, 0) ? -1 : 0;
    free(p2);
    free(q2);
    if (rc) return -1;
  }
  return 0;
}

static int32_t find_named(const blockc_tokenizer *t, const char *const *names) {
  for (const char *const *p = names; *p; p++) {
    int32_t id = blockc_tokenizer_token_to_id(t, *p);
    if (id >= 0) return id;
  }
  return -1;
}

static void pick_bos_eos(blockc_tokenizer *t) {
  static const char *const bos[] = {"<s>", "<|begin_of_text|>", "<|startoftext|>", "<bos>", NULL};
  static const char *const eos[] = {"</s>", "<|end_of_text|>", "<|endoftext|>", "<eos>", "<|im_end|>", NULL};
  t->bos = t->npre ? t->pre_ids[0] : find_named(t, bos);
  t->eos = find_named(t, eos);
}

static blockc_tokenizer *tok_new(void) {
  blockc_tokenizer *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->unk_id = -1;
  t->bos = t->eos = -1;
  /* GPT-2's bytes_to_unicode: printable Latin-1 maps to itself, the rest to 256.. */
  int extra = 0;
  for (int i = 0; i < 324; i++) t->u2b[i] = -1;
  for (int b = 0; b < 256; b++) {
    int keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    t->b2u[b] = keep ? b : 256 + extra++;
    t->u2b[t->b2u[b]] = (int16_t)b;
  }
  return t;
}

static int load_root(lctx *L, const jnode *root, size_t len) {
  static const char *const k[] = {"version", "truncation", "padding", "added_tokens", "normalizer",
                                  "pre_tokenizer", "model", "post_processor", "decoder", NULL};
  blockc_tokenizer *t = L->t;
  if (root->t != JT_OBJ) return lfail(L, "(top level)", "must be an object, not %s", jtype_name(root));
  if (check_keys(L, root, "(top level)", k)) return -1;
  const char *off[] = {"truncation", "padding"};
  for (int i = 0; i < 2; i++) {
    const jnode *v = jget(L->d, root, off[i]);
    if (v && v->t != JT_NULL)
      return lfail(L, off[i], "%s is not supported (it changes what encode returns): set it to null", off[i]);
  }
  const jnode *m = jget(L->d, root, "model"), *added = jget(L->d, root, "added_tokens");
  if (!m || m->t != JT_OBJ) return lfail(L, "model", "must be an object, not %s", jtype_name(m));
  const jnode *vocab = jget(L->d, m, "vocab");
  if (!vocab || vocab->t != JT_OBJ) return lfail(L, "model.vocab", "must be an object, not %s", jtype_name(vocab));
  if (added && added->t != JT_ARR && added->t != JT_NULL)
    return lfail(L, "added_tokens", "must be an array, not %s", jtype_name(added));
  int64_t maxid;
  if (scan_ids(L, vocab, added, &maxid) || alloc_ids(L, maxid, len) || load_model(L, m) ||
      load_added(L, added) ||
      load_opt_stage(L, root, "normalizer", load_normalizer, &t->normalizer) ||
      load_opt_stage(L, root, "pre_tokenizer", load_pretok, &t->pretok) ||
      load_opt_stage(L, root, "decoder", load_decoder, &t->decoder))
    return -1;
  const jnode *pp = jget(L->d, root, "post_processor");
  if (pp && pp->t != JT_NULL &&
      load_post(L, pp, "post_processor", &t->pre_ids, &t->npre, &t->post_ids, &t->npost))
    return -1;
  if (build_added_sets(L)) return -1;
  pick_bos_eos(t);
  return 0;
}

blockc_tokenizer *blockc_tokenizer_load_mem(const char *json, size_t len, const char *name, char *err,
                                            size_t errn) {
  if (!name) name = "tokenizer.json";
  if (err && errn) err[0] = '\0';
  jdoc d;
  if (jd_parse(&d, json, len, name, err, errn)) {
    jd_free(&d);
    return NULL;
  }
  blockc_tokenizer *t = tok_new();
  if (!t) {
    jd_free(&d);
    seterr(err, errn, "%s: out of memory", name);
    return NULL;
  }
  t->pools[0] = d.pool;  /* the tokens point into it; d reads it until the end */
  lctx L = {&d, name, err, errn, t};
  int rc = load_root(&L, jnode_at(&d, 0), len);
  d.pool = NULL;
  jd_free(&d);
  if (rc) {
    blockc_tokenizer_free(t);
    return NULL;
  }
  return t;
}

blockc_tokenizer *blockc_tokenizer_load(const char *path, char *err, size_t errn) {
  size_t len;
  char *s = read_file(path, &len, err, errn);
  if (!s) return NULL;
  blockc_tokenizer *t = blockc_tokenizer_load_mem(s, len, path, err, errn);
  free(s);
  return t;
}

void blockc_tokenizer_free(blockc_tokenizer *t) {
  if (!t) return;
  free(t->e);
  free(t->vocab.slot);
  free(t->merges.key);
  free(t->merges.val);
  for (size_t i = 0; i < t->nadded; i++) free(t->added[i].pat);
  free(t->added);
  for (int k = 0; k < 2; k++) free(t->aset[k].idx);
  stage *st[3] = {t->normalizer, t->pretok, t->decoder};
  for (int i = 0; i < 3; i++) {
    stage_free(st[i]);
    free(st[i]);
  }
  free(t->pre_ids);
  free(t->post_ids);
  free(t->pools[0]);
  free(t->pools[1]);
  free(t);
}

/* ----------------------------------------------------------------- encode */

/* Replaces io with its matches of re replaced by content. */
static int re_replace(const regex *re, const char *content, size_t clen, buf *io, char *err, size_t errn) {
  spans sp = {0};
  if (re_spans(re, io->p ? io->p : "", io->n, &sp, err, errn)) { free(sp.p); return -1; }
  buf out = {0};
  int changed = 0;
  for (size_t i = 0; i < sp.n; i++) {
    if (sp.p[i].m) { changed = 1; buf_add(&out, content, clen); }
    else buf_add(&out, io->p + sp.p[i].s, sp.p[i].e - sp.p[i].s);
  }
  free(sp.p);
  if (out.oom) { buf_free(&out); return seterr(err, errn, "out of memory"), -1; }
  if (!changed) { buf_free(&out); return 0; }
  if (!out.p && buf_add(&out, "", 0)) return seterr(err, errn, "out of memory"), -1;
  buf_free(io);
  *io = out;
  return 0;
}

static int normalize(const stage *s, buf *io, char *err, size_t errn) {
  switch (s->kind) {
  case N_NFC: case N_NFKC: case N_NFD: case N_NFKD: {
    if (!io->n) return 0;
    int opt = UTF8PROC_STABLE | (s->kind == N_NFC || s->kind == N_NFKC ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE) |
              (s->kind == N_NFKC || s->kind == N_NFKD ? UTF8PROC_COMPAT : 0);
    utf8proc_uint8_t *dst = NULL;
    utf8proc_ssize_t k = utf8proc_map((const utf8proc_uint8_t *)io->p, (utf8proc_ssize_t)io->n, &dst,
                                      (utf8proc_option_t)opt);
    if (k < 0) return seterr(err, errn, "normalizer: %s", utf8proc_errmsg(k)), -1;
    buf_free(io);
    io->p = (char *)dst;
    io->n = (size_t)k;
    io->cap = (size_t)k + 1;
    return 0;
  }
  case N_PREPEND: {
    if (!io->n) return 0;
    buf out = {0};
    if (buf_add(&out, s->str, s->len) || buf_add(&out, io->p, io->n)) {
      buf_free(&out);
      return seterr(err, errn, "out of memory"), -1;
    }
    buf_free(io);
    *io = out;
    return 0;
  }
  case N_REPLACE: return re_replace(&s->re, s->str, s->len, io, err, errn);
  default:
    for (size_t i = 0; i < s->nkids; i++)
      if (normalize(&s->kids[i], io, err, errn)) return -1;
    return 0;
  }
}

/* Adds the non-empty spans of piece p (bytes s) to out. */
static int add_spans(plist *out, const char *s, const spans *v, int first, const blockc_tokenizer *t, int bytelevel) {
  for (size_t i = 0; i < v->n; i++) {
    size_t a = v->p[i].s, e = v->p[i].e;
    if (a == e) continue;
    int f = first && a == 0;
    if (!bytelevel) {
      if (pl_add(out, s + a, e - a, f, -1)) return -1;
      continue;
    }
    buf *b = &out->b;
    size_t off = b->n;
    for (size_t j = a; j < e; j++)
      if (buf_add_cp(b, t->b2u[(unsigned char)s[j]])) return -1;
    if (grow((void **)&out->p, &out->cap, out->n + 1, sizeof(piece))) return -1;
    out->p[out->n++] = (piece){off, b->n - off, f, -1};
  }
  return 0;
}

static int pretok_one(const blockc_tokenizer *t, const stage *s, const char *p, size_t n, int first,
                      plist *out, buf *tmp, spans *sp, char *err, size_t errn) {
  sp->n = 0;
  switch (s->kind) {
  case P_BYTELEVEL:
    tmp->n = 0;
    if ((s->a && (n == 0 || p[0] != ' ') && buf_addc(tmp, ' ')) || buf_add(tmp, p, n)) goto oom;
    if (s->b) {
      if (re_spans(&s->re, tmp->p, tmp->n, sp, err, errn)) return -1;
    } else if (tmp->n && sp_add(sp, 0, tmp->n, 0)) goto oom;
    if (add_spans(out, tmp->p, sp, first, t, 1)) goto oom;
    return 0;
  case P_SPLIT:
    if (re_spans(&s->re, p, n, sp, err, errn)) return -1;
    apply_behavior(sp, s->a, s->b);
    if (add_spans(out, p, sp, first, t, 0)) goto oom;
    return 0;
  case P_DIGITS:
    if (pred_spans(pred_numeric, 0, p, n, sp)) goto oom;
    apply_behavior(sp, s->a ? B_ISOLATED : B_CONTIGUOUS, 0);
    if (add_spans(out, p, sp, first, t, 0)) goto oom;
    return 0;
  case P_METASPACE: {
    /* spaces become the replacement, then the prefix unless it starts with one */
    tmp->n = 0;
    if (buf_add(tmp, s->str, s->len)) goto oom;
    for (size_t i = 0; i < n; i++)
      if (p[i] == ' ' ? buf_add(tmp, s->str, s->len) : buf_addc(tmp, p[i])) goto oom;
    int starts = tmp->n >= 2 * s->len && !memcmp(tmp->p + s->len, s->str, s->len);
    if (!((s->a == PS_ALWAYS && !starts) || (s->a == PS_FIRST && !starts && first))) {
      memmove(tmp->p, tmp->p + s->len, tmp->n - s->len);
      tmp->n -= s->len;
    }
    if (s->b) {
      if (pred_spans(pred_char, s->cp, tmp->p, tmp->n, sp)) goto oom;
      apply_behavior(sp, B_MERGED_NEXT, 0);
    } else if (tmp->n && sp_add(sp, 0, tmp->n, 0)) goto oom;
    if (add_spans(out, tmp->p, sp, first, t, 0)) goto oom;
    return 0;
  }
  default: break;
  }
  return 0;
oom:
  return seterr(err, errn, "out of memory"), -1;
}

/* Runs pre-tokenizer s over the pieces of *io (replaced by the result). */
static int pretokenize(const blockc_tokenizer *t, const stage *s, plist *io, char *err, size_t errn) {
  if (s->kind == P_SEQ) {
    for (size_t i = 0; i < s->nkids; i++)
      if (pretokenize(t, &s->kids[i], io, err, errn)) return -1;
    return 0;
  }
  plist out = {0};
  buf tmp = {0};
  spans sp = {0};
  int rc = 0;
  for (size_t i = 0; i < io->n && !rc; i++)
    rc = pretok_one(t, s, pl_str(io, i), io->p[i].len, io->p[i].first, &out, &tmp, &sp, err, errn);
  buf_free(&tmp);
  free(sp.p);
  if (!rc && out.b.oom) rc = -1, seterr(err, errn, "out of memory");
  pl_free(io);
  *io = out;
  return rc;
}

typedef struct ivec { int32_t *p; size_t n, cap; } ivec;
static int iv_add(ivec *v, int32_t x) {
  if (grow((void **)&v->p, &v->cap, v->n + 1, sizeof(int32_t))) return -1;
  v->p[v->n++] = x;
  return 0;
}

typedef struct sym { int32_t id; int prev, next; size_t len; } sym;
typedef struct cand { uint32_t rank; uint32_t pos; int32_t id; } cand;
typedef struct heap { cand *p; size_t n, cap; } heap;

static int cand_less(const cand *a, const cand *b) {
  return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}
static int heap_push(heap *h, cand c) {
  if (grow((void **)&h->p, &h->cap, h->n + 1, sizeof(cand))) return -1;
  size_t i = h->n++;
  while (i && cand_less(&c, &h->p[(i - 1) / 2])) {
    h->p[i] = h->p[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h->p[i] = c;
  return 0;
}
static cand heap_pop(heap *h) {
  cand top = h->p[0], last = h->p[--h->n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= h->n) break;
    if (c + 1 < h->n && cand_less(&h->p[c + 1], &h->p[c])) c++;
    if (!cand_less(&h->p[c], &last)) break;
    h->p[i] = h->p[c];
    i = c;
  }
  if (h->n) h->p[i] = last;
  return top;
}

typedef struct bpe_ws { sym *s; size_t ns, scap; heap h; buf tmp; } bpe_ws;

static int sym_add(bpe_ws *w, int32_t id, size_t len) {
  if (grow((void **)&w->s, &w->scap, w->ns + 1, sizeof(sym))) return -1;
  w->s[w->ns] = (sym){id, (int)w->ns - 1, (int)w->ns + 1, len};
  w->ns++;
  return 0;
}

/* The initial symbols of a word (`tokenizers`' BPE::merge_word). */
static int bpe_symbols(const blockc_tokenizer *t, const char *s, size_t n, bpe_ws *w, char *err, size_t errn) {
  int32_t unk = -1;
  size_t unk_len = 0;
  w->ns = 0;
  for (size_t i = 0; i < n;) {
    int32_t cp;
    size_t k = (size_t)utf8_cp(s + i, n - i, &cp);
    w->tmp.n = 0;
    if ((i > 0 && t->cont_prefix && buf_add(&w->tmp, t->cont_prefix, t->cont_len)) ||
        buf_add(&w->tmp, s + i, k) ||
        (i + k == n && t->eow_suffix && buf_add(&w->tmp, t->eow_suffix, t->eow_len)))
      return seterr(err, errn, "out of memory"), -1;
    int32_t id = vocab_id(t, w->tmp.p, w->tmp.n);
    if (id >= 0) {
      if (unk >= 0 && sym_add(w, unk, unk_len)) goto oom;
      unk = -1;
      if (sym_add(w, id, k)) goto oom;
    } else {
      int ok = t->byte_fallback;
      for (size_t j = 0; ok && j < w->tmp.n; j++) ok = t->byte_tok[(unsigned char)w->tmp.p[j]] >= 0;
      if (ok) {
        for (size_t j = 0; j < w->tmp.n; j++)
          if (sym_add(w, t->byte_tok[(unsigned char)w->tmp.p[j]], 1)) goto oom;
      } else if (t->unk_name) {
        if (t->unk_id < 0)
          return seterr(err, errn, "the unk_token \"%s\" is not in the vocabulary", t->unk_name), -1;
        if (unk >= 0 && t->fuse_unk) unk_len += k;
        else {
          if (unk >= 0 && sym_add(w, unk, unk_len)) goto oom;
          unk = t->unk_id;
          unk_len = k;
        }
      }
    }
    i += k;
  }
  if (unk >= 0 && sym_add(w, unk, unk_len)) goto oom;
  if (w->ns) w->s[w->ns - 1].next = -1;
  return 0;
oom:
  return seterr(err, errn, "out of memory"), -1;
}

/* BPE of one word: the lowest-ranked merge first, leftmost among equals
 * (`tokenizers`' Word::merge_all): O(n log n). */
static int bpe_word(const blockc_tokenizer *t, const char *s, size_t n, bpe_ws *w, ivec *out, char *err,
                    size_t errn) {
  if (t->ignore_merges) {
    int32_t id = vocab_id(t, s, n);
    if (id >= 0) return iv_add(out, id) ? (seterr(err, errn, "out of memory"), -1) : 0;
  }
  if (bpe_symbols(t, s, n, w, err, errn)) return -1;
  heap *h = &w->h;
  h->n = 0;
  for (size_t i = 0; i + 1 < w->ns; i++) {
    const merge_val *m = mm_get(&t->merges, w->s[i].id, w->s[i + 1].id);
    if (m && heap_push(h, (cand){m->rank, (uint32_t)i, m->id})) goto oom;
  }
  while (h->n) {
    cand c = heap_pop(h);
    sym *a = &w->s[c.pos];
    if (!a->len || a->next < 0) continue;
    sym *b = &w->s[a->next];
    const merge_val *m = mm_get(&t->merges, a->id, b->id);
    if (!m || m->id != c.id) continue;
    a->id = c.id;
    a->len += b->len;
    b->len = 0;
    a->next = b->next;
    if (b->next >= 0) w->s[b->next].prev = (int)c.pos;
    if (a->prev >= 0) {
      m = mm_get(&t->merges, w->s[a->prev].id, a->id);
      if (m && heap_push(h, (cand){m->rank, (uint32_t)a->prev, m->id})) goto oom;
    }
    if (a->next >= 0) {
      m = mm_get(&t->merges, a->id, w->s[a->next].id);
      if (m && heap_push(h, (cand){m->rank, c.pos, m->id})) goto oom;
    }
  }
  for (size_t i = 0; i < w->ns; i++)
    if (w->s[i].len && iv_add(out, w->s[i].id)) goto oom;
  return 0;
oom:
  return seterr(err, errn, "out of memory"), -1;
}

/* Normalized, pre-tokenized text (no added tokens in it) through the model. */
static int encode_plain(const blockc_tokenizer *t, const char *s, size_t n, int first, bpe_ws *w, ivec *out,
                        char *err, size_t errn) {
  plist l = {0};
  int rc = pl_add(&l, s, n, first, -1) ? (seterr(err, errn, "out of memory"), -1) : 0;
  if (!rc && t->pretok) rc = pretokenize(t, t->pretok, &l, err, errn);
  for (size_t i = 0; i < l.n && !rc; i++)
    if (l.p[i].len) rc = bpe_word(t, pl_str(&l, i), l.p[i].len, w, out, err, errn);
  pl_free(&l);
  return rc;
}

static int prev_is_word(const char *s, size_t at) {
  if (!at) return 0;
  size_t i = at - 1;
  while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80) i--;
  int32_t cp;
  utf8_cp(s + i, at - i, &cp);
  return is_word_cp(cp);
}

static int next_is_word(const char *s, size_t at, size_t n) {
  if (at >= n) return 0;
  int32_t cp;
  utf8_cp(s + at, n - at, &cp);
  return is_word_cp(cp);
}

/* The leftmost-longest added token of set a in s[from..n): 1 and *ms, *me,
 * *tok; 0 when none. */
static int added_find(const blockc_tokenizer *t, const added_set *a, const char *s, size_t n, size_t from,
                      size_t *ms, size_t *me, const added_tok **tok) {
  if (!a->n) return 0;
  for (size_t i = from; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    for (uint32_t k = a->start[c]; k < a->start[c + 1]; k++) {
      const added_tok *x = &t->added[a->idx[k]];
      const char *p = x->pat ? x->pat : x->s;
      size_t pl = x->pat ? x->plen : x->len;
      if (pl <= n - i && !memcmp(s + i, p, pl)) {
        *ms = i;
        *me = i + pl;
        *tok = x;
        return 1;
      }
    }
  }
  return 0;
}

typedef int (*seg_fn)(const blockc_tokenizer *t, const char *s, size_t n, int first, void *ctx);

/* Splits s on the added tokens of set a (`tokenizers`' find_matches):
 * text between them goes to fn, tokens to out. */
static int split_added(const blockc_tokenizer *t, const added_set *a, const char *s, size_t n, int first,
                       ivec *out, seg_fn fn, void *ctx, char *err, size_t errn) {
  size_t pos = 0, start_off = 0, ms, me;
  const added_tok *x;
  while (added_find(t, a, s, n, pos, &ms, &me, &x)) {
    pos = me;
    size_t st = ms, sp = me;
    if (x->single_word && (prev_is_word(s, ms) || next_is_word(s, me, n))) continue;
    if (x->lstrip) {
      size_t j = st;
      while (j > 0) {
        size_t i = j - 1;
        while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80) i--;
        int32_t c;
        utf8_cp(s + i, j - i, &c);
        if (!is_ws_cp(c)) break;
        j = i;
      }
      st = j > start_off ? j : start_off;
    }
    if (x->rstrip) {
      while (sp < n) {
        int32_t c;
        int k = utf8_cp(s + sp, n - sp, &c);
        if (!is_ws_cp(c)) break;
        sp += (size_t)k;
      }
      pos = sp;
    }
    if (start_off < st && fn(t, s + start_off, st - start_off, first && start_off == 0, ctx)) return -1;
    if (iv_add(out, x->id)) return seterr(err, errn, "out of memory"), -1;
    start_off = sp;
  }
  if (start_off < n && fn(t, s + start_off, n - start_off, first && start_off == 0, ctx)) return -1;
  return 0;
}

typedef struct enc_ctx {
  ivec *out;
  bpe_ws *w;
  char *err;
  size_t errn;
} enc_ctx;

static int seg_plain(const blockc_tokenizer *t, const char *s, size_t n, int first, void *vc) {
  enc_ctx *c = vc;
  return encode_plain(t, s, n, first, c->w, c->out, c->err, c->errn);
}

/* Text between the added tokens matched on the original: normalized, then
 * split on the normalized added tokens. */
static int seg_normalize(const blockc_tokenizer *t, const char *s, size_t n, int first, void *vc) {
  enc_ctx *c = vc;
  if (!t->normalizer) return split_added(t, &t->aset[1], s, n, first, c->out, seg_plain, c, c->err, c->errn);
  buf b = {0};
  if (buf_add(&b, s, n)) return seterr(c->err, c->errn, "out of memory"), -1;
  int rc = normalize(t->normalizer, &b, c->err, c->errn);
  if (!rc) rc = split_added(t, &t->aset[1], b.p, b.n, first, c->out, seg_plain, c, c->err, c->errn);
  buf_free(&b);
  return rc;
}

int blockc_tokenizer_encode(const blockc_tokenizer *t, const char *text, size_t len, int add_special,
                            int32_t **ids, size_t *n, char *err, size_t errn) {
  if (err && errn) err[0] = '\0';
  *ids = NULL;
  *n = 0;
  if (!t || (!text && len)) return seterr(err, errn, "encode: no tokenizer or no text"), -1;
  buf s = {0};
  ivec out = {0};
  bpe_ws w = {0};
  enc_ctx c = {&out, &w, err, errn};
  int rc = 0;
  if (utf8_repair(&s, text ? text : "", len) || (!s.p && buf_add(&s, "", 0)))
    rc = -1, seterr(err, errn, "out of memory");
  if (!rc && add_special)
    for (size_t i = 0; i < t->npre && !rc; i++) rc = iv_add(&out, t->pre_ids[i]);
  if (!rc) rc = split_added(t, &t->aset[0], s.p, s.n, 1, &out, seg_normalize, &c, err, errn);
  if (!rc && add_special)
    for (size_t i = 0; i < t->npost && !rc; i++) rc = iv_add(&out, t->post_ids[i]);
  if (!rc && !out.p && !(out.p = malloc(sizeof(int32_t)))) rc = -1;  /* empty: still a buffer */
  if (rc && err && errn && !err[0]) seterr(err, errn, "out of memory");
  buf_free(&s);
  free(w.s);
  free(w.h.p);
  buf_free(&w.tmp);
  if (rc) {
    free(out.p);
    return -1;
  }
  *ids = out.p;
  *n = out.n;
  return 0;
}

/* ----------------------------------------------------------------- decode */

static int decode_stage(const blockc_tokenizer *t, const stage *s, plist *io, char *err, size_t errn);

/* Token i of the list after ByteLevel's byte mapping (raw when a character
 * is not a byte's). */
static int bytelevel_bytes(const blockc_tokenizer *t, const char *s, size_t n, buf *out) {
  size_t start = out->n;
  for (size_t i = 0; i < n;) {
    int32_t cp;
    int k = utf8_cp(s + i, n - i, &cp);
    if (cp < 0 || cp >= 324 || t->u2b[cp] < 0) {
      out->n = start;
      return buf_add(out, s, n);
    }
    if (buf_addc(out, (char)t->u2b[cp])) return -1;
    i += (size_t)k;
  }
  return 0;
}

static int byte_token(const char *s, size_t n) {
  if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return -1;
  int a = hexval(s[3]), b = hexval(s[4]);
  return a < 0 || b < 0 ? -1 : a * 16 + b;
}

static int flush_bytes(plist *out, buf *bytes) {
  if (!bytes->n) return 0;
  int rc = 0;
  if (utf8_valid(bytes->p, bytes->n)) rc = pl_add(out, bytes->p, bytes->n, 0, -1);
  else
    for (size_t i = 0; i < bytes->n && !rc; i++) rc = pl_add(out, "\xEF\xBF\xBD", 3, 0, -1);
  bytes->n = 0;
  return rc;
}

static int decode_one(const blockc_tokenizer *t, const stage *s, const plist *in, plist *out, buf *tmp,
                      char *err, size_t errn) {
  switch (s->kind) {
  case D_BYTELEVEL: {
    buf raw = {0};
    for (size_t i = 0; i < in->n; i++)
      if (bytelevel_bytes(t, pl_str(in, i), in->p[i].len, &raw)) { buf_free(&raw); return -1; }
    tmp->n = 0;
    int rc = utf8_repair(tmp, raw.p ? raw.p : "", raw.n) || pl_add(out, tmp->p ? tmp->p : "", tmp->n, 0, -1);
    buf_free(&raw);
    return rc ? -1 : 0;
  }
  case D_FUSE: {
    tmp->n = 0;
    for (size_t i = 0; i < in->n; i++)
      if (buf_add(tmp, pl_str(in, i), in->p[i].len)) return -1;
    return pl_add(out, tmp->p ? tmp->p : "", tmp->n, 0, -1);
  }
  case D_BYTEFALLBACK: {
    tmp->n = 0;
    for (size_t i = 0; i < in->n; i++) {
      int b = byte_token(pl_str(in, i), in->p[i].len);
      if (b >= 0) {
        if (buf_addc(tmp, (char)b)) return -1;
        continue;
      }
      if (flush_bytes(out, tmp) || pl_add(out, pl_str(in, i), in->p[i].len, 0, -1)) return -1;
    }
    return flush_bytes(out, tmp);
  }
  default: break;
  }
  for (size_t i = 0; i < in->n; i++) {
    const char *p = pl_str(in, i);
    size_t n = in->p[i].len;
    tmp->n = 0;
    if (s->kind == D_METASPACE) {
      for (size_t j = 0; j < n;) {
        int32_t cp;
        int k = utf8_cp(p + j, n - j, &cp);
        if (cp != s->cp) { if (buf_add(tmp, p + j, (size_t)k)) return -1; }
        else if (!(i == 0 && s->a != PS_NEVER) && buf_addc(tmp, ' ')) return -1;
        j += (size_t)k;
      }
    } else if (s->kind == D_REPLACE) {
      if (buf_add(tmp, p, n) || (!tmp->p && buf_add(tmp, "", 0)) ||
          re_replace(&s->re, s->str, s->len, tmp, err, errn))
        return -1;
    } else { /* D_STRIP: up to a leading and b trailing content characters */
      size_t lead = 0, cut_start = 0, nlead = 0;
      while (lead < n && nlead < (size_t)s->a) {
        int32_t cp;
        int k = utf8_cp(p + lead, n - lead, &cp);
        if (cp != s->cp) break;
        lead += (size_t)k;
        nlead++;
      }
      cut_start = lead;
      size_t end = n;
      for (size_t r = 0; end > 0 && r < (size_t)s->b; r++) {
        size_t b = end - 1;
        while (b > 0 && ((unsigned char)p[b] & 0xC0) == 0x80) b--;
        int32_t cp;
        utf8_cp(p + b, end - b, &cp);
        if (cp != s->cp) break;
        end = b;
      }
      if (cut_start < end && buf_add(tmp, p + cut_start, end - cut_start)) return -1;
    }
    if (pl_add(out, tmp->p ? tmp->p : "", tmp->n, 0, -1)) return -1;
  }
  return 0;
}

static int decode_stage(const blockc_tokenizer *t, const stage *s, plist *io, char *err, size_t errn) {
  if (s->kind == D_SEQ) {
    for (size_t i = 0; i < s->nkids; i++)
      if (decode_stage(t, &s->kids[i], io, err, errn)) return -1;
    return 0;
  }
  plist out = {0};
  buf tmp = {0};
  int rc = decode_one(t, s, io, &out, &tmp, err, errn);
  buf_free(&tmp);
  if (rc && err && errn && !err[0]) seterr(err, errn, "out of memory");
  pl_free(io);
  *io = out;
  return rc;
}

int blockc_tokenizer_decode(const blockc_tokenizer *t, const int32_t *ids, size_t n, int skip_special,
                            char **text, size_t *len, char *err, size_t errn) {
  if (err && errn) err[0] = '\0';
  *text = NULL;
  *len = 0;
  if (!t || (!ids && n)) return seterr(err, errn, "decode: no tokenizer or no ids"), -1;
  plist l = {0};
  int rc = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    int32_t id = ids[i];
    if (id < 0 || (size_t)id >= t->nid || (!t->e[id].s && !t->e[id].as)) {
      seterr(err, errn, "token id %d (position %zu) is not in the vocabulary (0..%zu)", id, i,
             t->nid ? t->nid - 1 : 0);
      rc = -1;
      break;
    }
    const tok_entry *e = &t->e[id];
    if (skip_special && e->as && e->special) continue;
    rc = e->as ? pl_add(&l, e->as, e->alen, 0, id) : pl_add(&l, e->s, e->len, 0, id);
    if (rc) seterr(err, errn, "out of memory");
  }
  if (!rc && t->decoder) rc = decode_stage(t, t->decoder, &l, err, errn);
  buf out = {0};
  for (size_t i = 0; i < l.n && !rc; i++)
    if ((!t->decoder && i && buf_addc(&out, ' ')) || buf_add(&out, pl_str(&l, i), l.p[i].len))
      rc = -1, seterr(err, errn, "out of memory");
  if (!rc && !out.p && buf_add(&out, "", 0)) rc = -1, seterr(err, errn, "out of memory");
  pl_free(&l);
  if (rc) {
    buf_free(&out);
    return -1;
  }
  *text = out.p;
  *len = out.n;
  return 0;
}

/* ---------------------------------------------------------------- lookups */

size_t blockc_tokenizer_vocab_size(const blockc_tokenizer *t) { return t ? t->nid : 0; }

int32_t blockc_tokenizer_token_to_id(const blockc_tokenizer *t, const char *token) {
  if (!t || !token) return -1;
  size_t n = strlen(token);
  for (size_t i = 0; i < t->nadded; i++)
    if (t->added[i].len == n && !memcmp(t->added[i].s, token, n)) return t->added[i].id;
  return vocab_id(t, token, n);
}

const char *blockc_tokenizer_id_to_token(const blockc_tokenizer *t, int32_t id) {
  if (!t || id < 0 || (size_t)id >= t->nid) return NULL;
  return t->e[id].as ? t->e[id].as : t->e[id].s;
}

int32_t blockc_tokenizer_eos_id(const blockc_tokenizer *t) { return t ? t->eos : -1; }
int32_t blockc_tokenizer_bos_id(const blockc_tokenizer *t) { return t ? t->bos : -1; }

int blockc_tokenizer_is_special(const blockc_tokenizer *t, int32_t id) {
  if (!t || id < 0 || (size_t)id >= t->nid) return 0;
  return t->e[id].as && t->e[id].special;
}

/* ----------------------------------------------------------------- stream */

/* Two ways, both giving what decoding the whole sequence gives:
 *  - window (decoders without position-dependent rules: ByteLevel,
 *    ByteFallback, Fuse, none): `tokenizers`' DecodeStream — the ids since
 *    the previous emitted text's first token and the text they decode to
 *    (prefix); a push decodes the window and emits what is past the prefix;
 *  - whole (Metaspace drops the first token's spaces, Strip cuts the text's
 *    ends, Replace may match across tokens): the whole sequence is decoded
 *    and what is past the text already emitted is emitted.  O(n) per push;
 *    a generation of n tokens decodes n^2/2 tokens (2048: ~2M, a fraction of
 *    a millisecond per token).
 * Either way nothing is emitted while the text ends in U+FFFD (an
 * incomplete character) until finish. */
struct blockc_tokenizer_stream {
  const blockc_tokenizer *t;
  int skip_special, window;
  ivec ids;
  size_t prefix_index;
  char *prefix;       /* window: the window's prefix text; whole: the text emitted */
  size_t prefix_len;
  buf out;
  char err[256];
};

/* Whether decoder d has no rule that depends on a token's position. */
static int window_safe(const stage *d) {
  if (!d) return 1;
  if (d->kind == D_SEQ) {
    for (size_t i = 0; i < d->nkids; i++)
      if (!window_safe(&d->kids[i])) return 0;
    return 1;
  }
  return d->kind == D_BYTELEVEL || d->kind == D_BYTEFALLBACK || d->kind == D_FUSE;
}

blockc_tokenizer_stream *blockc_tokenizer_stream_new(const blockc_tokenizer *t, int skip_special) {
  if (!t) return NULL;
  blockc_tokenizer_stream *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->t = t;
  s->skip_special = skip_special;
  s->window = window_safe(t->decoder);
  return s;
}

static int stream_oom(blockc_tokenizer_stream *s, char *text) {
  free(text);
  snprintf(s->err, sizeof s->err, "out of memory");
  return -1;
}

static int stream_step(blockc_tokenizer_stream *s, int final, const char **out, size_t *len) {
  char *text;
  size_t n;
  *out = "";
  *len = 0;
  if (blockc_tokenizer_decode(s->t, s->ids.p, s->ids.n, s->skip_special, &text, &n, s->err, sizeof s->err))
    return -1;
  int ends_bad = n >= 3 && !memcmp(text + n - 3, "\xEF\xBF\xBD", 3);
  if (n <= s->prefix_len || (!final && ends_bad)) {
    free(text);
    return 0;
  }
  /* The text extends what was emitted, except when a run of <0xNN> tokens
   * that was valid UTF-8 turns invalid (ByteFallback then makes every byte
   * of the run U+FFFD): what was emitted stays; go on past it. */
  size_t common = s->prefix_len;
  while (common < n && ((unsigned char)text[common] & 0xC0) == 0x80) common++;
  s->out.n = 0;
  if (buf_add(&s->out, text + common, n - common)) return stream_oom(s, text);
  *out = s->out.p;
  *len = s->out.n;
  if (!s->window) {  /* whole: remember what was emitted */
    free(s->prefix);
    s->prefix = text;
    s->prefix_len = n;
    return 0;
  }
  size_t new_prefix_index = s->ids.n - s->prefix_index;
  memmove(s->ids.p, s->ids.p + s->prefix_index, (s->ids.n - s->prefix_index) * sizeof(int32_t));
  s->ids.n -= s->prefix_index;
  free(text);
  free(s->prefix);
  s->prefix = NULL;
  s->prefix_len = 0;
  if (blockc_tokenizer_decode(s->t, s->ids.p, s->ids.n, s->skip_special, &s->prefix, &s->prefix_len,
                              s->err, sizeof s->err))
    return -1;
  s->prefix_index = new_prefix_index;
  return 0;
}

int blockc_tokenizer_stream_push(blockc_tokenizer_stream *s, int32_t id, const char **out, size_t *len) {
  *out = "";
  *len = 0;
  if (!s) return -1;
  const blockc_tokenizer *t = s->t;
  if (id < 0 || (size_t)id >= t->nid || (!t->e[id].s && !t->e[id].as)) {
    snprintf(s->err, sizeof s->err, "token id %d is not in the vocabulary (0..%zu)", id, t->nid ? t->nid - 1 : 0);
    return -1;
  }
  if (iv_add(&s->ids, id)) {
    snprintf(s->err, sizeof s->err, "out of memory");
    return -1;
  }
  return stream_step(s, 0, out, len);
}

/* All the ids at once, then one step whose text is dropped (one decode,
 * however long the prompt). */
int blockc_tokenizer_stream_prime(blockc_tokenizer_stream *s, const int32_t *ids, size_t n) {
  if (!s || (!ids && n)) return -1;
  const blockc_tokenizer *t = s->t;
  for (size_t i = 0; i < n; i++) {
    int32_t id = ids[i];
    if (id < 0 || (size_t)id >= t->nid || (!t->e[id].s && !t->e[id].as)) {
      snprintf(s->err, sizeof s->err, "token id %d (prompt position %zu) is not in the vocabulary (0..%zu)", id, i,
               t->nid ? t->nid - 1 : 0);
      return -1;
    }
  }
  for (size_t i = 0; i < n; i++)
    if (iv_add(&s->ids, ids[i])) {
      snprintf(s->err, sizeof s->err, "out of memory");
      return -1;
    }
  const char *o;
  size_t k;
  return n ? stream_step(s, 1, &o, &k) : 0;
}

int blockc_tokenizer_stream_finish(blockc_tokenizer_stream *s, const char **out, size_t *len) {
  *out = "";
  *len = 0;
  if (!s) return -1;
  if (!s->ids.n) return 0;
  int rc = stream_step(s, 1, out, len);
  s->ids.n = 0;
  s->prefix_index = 0;
  free(s->prefix);
  s->prefix = NULL;
  s->prefix_len = 0;
  return rc;
}

void blockc_tokenizer_stream_free(blockc_tokenizer_stream *s) {
  if (!s) return;
  free(s->ids.p);
  free(s->prefix);
  buf_free(&s->out);
  free(s);
}

const char *blockc_tokenizer_stream_error(const blockc_tokenizer_stream *s) {
  return s ? s->err : "no stream";
}

/* ---------------------------------------------------- vocab.json + merges.txt */

/* merges.txt: "#version" first line optional, then "a b" per line. */
static int load_merges_txt(lctx *L, const char *s, size_t n, const char *path) {
  blockc_tokenizer *t = L->t;
  size_t lines = 1;
  for (size_t i = 0; i < n; i++) lines += s[i] == '\n';
  if (mm_init(&t->merges, lines)) return seterr(L->err, L->errn, "%s: out of memory", path), -1;
  buf tmp = {0};
  size_t line = 0, rank = 0;
  int rc = 0;
  for (size_t i = 0; i < n && !rc;) {
    const char *e = memchr(s + i, '\n', n - i);
    size_t end = e ? (size_t)(e - s) : n, ln = end - i;
    line++;
    const char *p = s + i;
    if (ln && p[ln - 1] == '\r') ln--;
    i = end + 1;
    if (!ln || (line == 1 && ln >= 8 && !memcmp(p, "#version", 8))) continue;
    const char *sp = memchr(p, ' ', ln);
    char where[600];
    snprintf(where, sizeof where, "line %zu", line);
    if (!sp || memchr(sp + 1, ' ', ln - (size_t)(sp + 1 - p))) {
      seterr(L->err, L->errn, "%s:%zu: a merge line must be two tokens separated by one space", path, line);
      rc = -1;
      break;
    }
    lctx M = *L;
    M.name = path;
    rc = add_merge(&M, p, (size_t)(sp - p), sp + 1, ln - (size_t)(sp + 1 - p), (uint32_t)rank++, where, &tmp);
  }
  buf_free(&tmp);
  return rc;
}

static int gpt2_stages(lctx *L) {
  blockc_tokenizer *t = L->t;
  t->pretok = calloc(1, sizeof(stage));
  t->decoder = calloc(1, sizeof(stage));
  if (!t->pretok || !t->decoder) return lfail(L, "(top level)", "out of memory");
  t->pretok->kind = P_BYTELEVEL;
  t->pretok->b = 1;
  t->decoder->kind = D_BYTELEVEL;
  if (re_compile(&t->pretok->re, gpt2_regex, sizeof gpt2_regex - 1, 0, "ByteLevel", L->name, L->err, L->errn))
    return -1;
  int32_t eot = vocab_id(t, "<|endoftext|>", 13);
  if (eot >= 0) {
    t->added = calloc(1, sizeof(added_tok));
    if (!t->added) return lfail(L, "(top level)", "out of memory");
    t->added[0] = (added_tok){t->e[eot].s, 13, NULL, 0, eot, 1, 0, 0, 0, 0};
    t->e[eot].as = t->e[eot].s;
    t->e[eot].alen = 13;
    t->e[eot].special = 1;
    t->nadded = 1;
  }
  return build_added_sets(L);
}

blockc_tokenizer *blockc_tokenizer_load_bpe(const char *vocab_json, const char *merges_txt, char *err,
                                            size_t errn) {
  if (err && errn) err[0] = '\0';
  size_t vlen, mlen;
  char *v = read_file(vocab_json, &vlen, err, errn);
  if (!v) return NULL;
  char *m = read_file(merges_txt, &mlen, err, errn);
  if (!m) { free(v); return NULL; }
  jdoc d;
  blockc_tokenizer *t = NULL;
  int rc = jd_parse(&d, v, vlen, vocab_json, err, errn);
  if (!rc && !(t = tok_new())) rc = -1, seterr(err, errn, "out of memory");
  if (!rc) {
    t->pools[0] = d.pool;
    lctx L = {&d, vocab_json, err, errn, t};
    const jnode *root = jnode_at(&d, 0);
    int64_t maxid;
    if (root->t != JT_OBJ) rc = lfail(&L, "(top level)", "must be an object token -> id, not %s", jtype_name(root));
    if (!rc) rc = scan_ids(&L, root, NULL, &maxid) || alloc_ids(&L, maxid, vlen) || fill_vocab(&L, root) ? -1 : 0;
    if (!rc) rc = load_merges_txt(&L, m, mlen, merges_txt);
    if (!rc) {
      find_byte_tokens(t);
      rc = gpt2_stages(&L);
    }
    if (!rc) pick_bos_eos(t);
    d.pool = NULL;
  }
  jd_free(&d);
  free(v);
  free(m);
  if (rc) {
    blockc_tokenizer_free(t);
    return NULL;
  }
  return t;
}

/* ------------------------------------------------------------ ggml vocab */

/* A llama.cpp vocabulary (blockc_tokenizer_ggml: the tokenizer.ggml.* keys
 * of a GGUF file) becomes the tokenizer.json document Hugging Face's
 * converters write for that model, written here into memory and read by
 * blockc_tokenizer_load_mem, so one loader (and its checks: merges naming
 * unknown tokens, a token twice) serves both:
 *   "gpt2": for pre "gpt-2", GPT-2's tokenizer.json (ByteLevel pre-tokenizer
 *     with its regex, ByteLevel decoder); for "llama-bpe", Llama 3's (a Split
 *     of its regex, ByteLevel without one, ignore_merges); the merges as the
 *     file lists them;
 *   "llama": LlamaTokenizerFast's (Prepend "▁" + Replace " " -> "▁"
 *     normalizer, BPE with byte_fallback and fuse_unk, Replace / ByteFallback
 *     / Fuse / Strip decoder).  GGUF keeps SentencePiece's scores, not
 *     merges: they are derived as transformers' SentencePieceExtractor
 *     derived the merges of the hub's Llama 2 / Mistral tokenizer.json files
 *     — every split of a token into two tokens (between characters), those
 *     of one token in order of the pieces' ids, all ordered by the token's
 *     score, highest first, stable.  (Later transformers versions break ties
 *     by the pieces' lengths instead; the two differ only in which of one
 *     token's splits ranks first.)
 * add_bos / add_eos become a TemplateProcessing post-processor.  Everything
 * is bounded by the vocabulary's size: the derived merges may not exceed 16
 * times the bytes of the tokens (real vocabularies need about 2). */

static int jw_str(buf *b, const char *s, size_t n) {
  if (buf_addc(b, '"')) return -1;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    char esc[8];
    if (c == '"' || c == '\\') {
      esc[0] = '\\', esc[1] = (char)c;
      if (buf_add(b, esc, 2)) return -1;
    } else if (c < 0x20) {
      snprintf(esc, sizeof esc, "\\u%04x", c);
      if (buf_add(b, esc, 6)) return -1;
    } else if (buf_addc(b, (char)c)) {
      return -1;
    }
  }
  return buf_addc(b, '"');
}

static int jw_lit(buf *b, const char *s) { return buf_add(b, s, strlen(s)); }

typedef struct gg_merge {
  int32_t l, r;       /* token ids of the pieces */
  float score;        /* of the merged token */
  size_t order;       /* position before the sort (stability) */
} gg_merge;

static int gg_merge_cmp(const void *x, const void *y) {
  const gg_merge *a = x, *b = y;
  if (a->score != b->score) return a->score > b->score ? -1 : 1;
  return a->order < b->order ? -1 : a->order > b->order;
}

static int gg_local_cmp(const void *x, const void *y) {
  const gg_merge *a = x, *b = y;
  if (a->l != b->l) return a->l < b->l ? -1 : 1;
  return (a->r > b->r) - (a->r < b->r);
}

/* The merges of a SentencePiece vocabulary (see above) as JSON strings "a b"
 * into b; lens[i] = strlen(tokens[i]). */
static int gg_spm_merges(const blockc_tokenizer_ggml *v, const size_t *lens, size_t total, buf *b,
                         const char *name, char *err, size_t errn) {
  size_t n = v->n_tokens, cap = 16, nm = 0, mcap = 0, bytes = 0, limit = 16 * total + (1u << 20);
  while (cap < 2 * n + 16) cap *= 2;
  int32_t *slot = malloc(cap * sizeof *slot);
  gg_merge *m = NULL;
  int rc = slot ? 0 : -1;
  if (slot) memset(slot, 0xFF, cap * sizeof *slot);
  for (size_t i = 0; i < n && !rc; i++) {   /* token -> id (a token twice: refused by the loader) */
    size_t h = (size_t)hash_bytes(v->tokens[i], lens[i]) & (cap - 1);
    while (slot[h] >= 0 && !(lens[slot[h]] == lens[i] && !memcmp(v->tokens[slot[h]], v->tokens[i], lens[i])))
      h = (h + 1) & (cap - 1);
    if (slot[h] < 0) slot[h] = (int32_t)i;
  }
  for (size_t i = 0; i < n && !rc; i++) {
    const char *s = v->tokens[i];
    size_t len = lens[i], first = nm;
    for (size_t k = 1; k < len && !rc; k++) {
      if (((unsigned char)s[k] & 0xC0) == 0x80) continue;   /* a split between characters */
      int32_t id[2] = {-1, -1};
      for (int side = 0; side < 2; side++) {
        const char *p = side ? s + k : s;
        size_t pn = side ? len - k : k;
        size_t h = (size_t)hash_bytes(p, pn) & (cap - 1);
        while (slot[h] >= 0 && !(lens[slot[h]] == pn && !memcmp(v->tokens[slot[h]], p, pn))) h = (h + 1) & (cap - 1);
        id[side] = slot[h];
      }
      if (id[0] < 0 || id[1] < 0) continue;
      bytes += len + 1;
      if (bytes > limit) {
        seterr(err, errn, "%s: tokenizer.ggml.scores: the merges derived from the vocabulary exceed %zu bytes "
               "(16 times its tokens): not a SentencePiece vocabulary", name, limit);
        rc = -1;
        break;
      }
      if (nm == mcap && grow((void **)&m, &mcap, nm + 1, sizeof *m)) {
        rc = -1;
        break;
      }
      m[nm++] = (gg_merge){id[0], id[1], v->scores[i], 0};
    }
    if (!rc && nm - first > 1) qsort(m + first, nm - first, sizeof *m, gg_local_cmp);
  }
  for (size_t i = 0; i < nm; i++) m[i].order = i;
  if (!rc && nm) qsort(m, nm, sizeof *m, gg_merge_cmp);
  for (size_t i = 0; i < nm && !rc; i++) {
    buf tmp = {0};
    rc = (i && buf_addc(b, ',')) || buf_add(&tmp, v->tokens[m[i].l], lens[m[i].l]) || buf_addc(&tmp, ' ') ||
         buf_add(&tmp, v->tokens[m[i].r], lens[m[i].r]) || jw_str(b, tmp.p, tmp.n);
    buf_free(&tmp);
  }
  if (rc && err && errn && !err[0]) seterr(err, errn, "%s: out of memory", name);
  free(slot);
  free(m);
  return rc;
}

/* tokenizer.ggml.pre of a "gpt2" vocabulary, as llama.cpp's llama-vocab.cpp
 * names them: 0 GPT-2's regex ("gpt-2"; "gpt2" too), 1 Llama 3's ("llama3",
 * "llama-v3", "llama-bpe"), -1 another (or none: llama.cpp then falls back
 * to a regex of its own, which is no tokenizer.json's). */
static int gg_pre(const char *pre) {
  if (!pre) return -1;
  if (!strcmp(pre, "gpt-2") || !strcmp(pre, "gpt2")) return 0;
  if (!strcmp(pre, "llama3") || !strcmp(pre, "llama-v3") || !strcmp(pre, "llama-bpe")) return 1;
  return -1;
}

static const char llama3_regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* The tokenizer.json of v into b (see above); 0, or -1 with err set. */
static int gg_json(const blockc_tokenizer_ggml *v, const size_t *lens, size_t total, buf *b, const char *name,
                   char *err, size_t errn) {
  int spm = !strcmp(v->model, "llama");
  int pre = spm ? 0 : gg_pre(v->pre);   /* gpt2: 0 GPT-2's regex, 1 Llama 3's */
  /* llama.cpp's defaults: BOS for SentencePiece and for the Llama 3 group */
  int add_bos = v->add_bos >= 0 ? v->add_bos : spm || pre == 1, add_eos = v->add_eos >= 0 ? v->add_eos : 0;
  int prefix = v->add_space_prefix != 0;
  int rc = jw_lit(b, "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":[");
  size_t na = 0;
  for (size_t i = 0; i < v->n_tokens && !rc; i++) {
    int ty = v->token_type ? v->token_type[i] : 1, special = ty == 2 || ty == 3;
    if (!v->token_type)
      special = (int64_t)i == v->bos || (int64_t)i == v->eos || (int64_t)i == v->unk || (int64_t)i == v->pad;
    if (!special && ty != 4) continue;
    char head[64];
    snprintf(head, sizeof head, "%s{\"id\":%zu,\"content\":", na++ ? "," : "", i);
    rc = jw_lit(b, head) || jw_str(b, v->tokens[i], lens[i]) ||
         jw_lit(b, special ? ",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,"
                             "\"special\":true}"
                           : ",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,"
                             "\"special\":false}");
  }
  if (!rc) rc = jw_lit(b, "],");
  if (!rc && spm)
    rc = jw_lit(b, prefix ? "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\","
                            "\"prepend\":\"\\u2581\"},{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},"
                            "\"content\":\"\\u2581\"}]},\"pre_tokenizer\":null,"
                          : "\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},"
                            "\"content\":\"\\u2581\"},\"pre_tokenizer\":null,") ||
         jw_lit(b, "\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":"
                   "{\"String\":\"\\u2581\"},\"content\":\" \"},{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"}") ||
         jw_lit(b, prefix ? ",{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":0}]}," : "]},");
  if (!rc && !spm && pre == 0)
    rc = jw_lit(b, "\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
                   "\"trim_offsets\":true,\"use_regex\":true},");
  if (!rc && !spm && pre == 1)
    rc = jw_lit(b, "\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":["
                   "{\"type\":\"Split\",\"pattern\":{\"Regex\":") ||
         jw_str(b, llama3_regex, strlen(llama3_regex)) ||
         jw_lit(b, "},\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":"
                   "false,\"trim_offsets\":true,\"use_regex\":false}]},");
  if (!rc && !spm)
    rc = jw_lit(b, "\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"trim_offsets\":true,"
                   "\"use_regex\":true},");
  if (!rc) {   /* the post-processor: bos, sequence A, eos */
    int bos = add_bos && v->bos >= 0, eos = add_eos && v->eos >= 0;
    char tmp[160];
    if (!bos && !eos) {
      rc = jw_lit(b, "\"post_processor\":null,");
    } else {
      rc = jw_lit(b, "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[");
      if (!rc && bos) rc = jw_lit(b, "{\"SpecialToken\":{\"id\":\"bos\",\"type_id\":0}},");
      if (!rc) rc = jw_lit(b, "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}");
      if (!rc && eos) rc = jw_lit(b, ",{\"SpecialToken\":{\"id\":\"eos\",\"type_id\":0}}");
      if (!rc) rc = jw_lit(b, "],\"special_tokens\":{");
      if (!rc && bos) {
        snprintf(tmp, sizeof tmp, "\"bos\":{\"id\":\"bos\",\"ids\":[%lld],\"tokens\":[]}%s", (long long)v->bos,
                 eos ? "," : "");
        rc = jw_lit(b, tmp);
      }
      if (!rc && eos) {
        snprintf(tmp, sizeof tmp, "\"eos\":{\"id\":\"eos\",\"ids\":[%lld],\"tokens\":[]}", (long long)v->eos);
        rc = jw_lit(b, tmp);
      }
      if (!rc) rc = jw_lit(b, "}},");
    }
  }
  if (!rc) {
    rc = jw_lit(b, "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":");
    if (!rc) rc = spm && v->unk >= 0 ? jw_str(b, v->tokens[v->unk], lens[v->unk]) : jw_lit(b, "null");
    if (!rc)
      rc = jw_lit(b, spm ? ",\"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,\"fuse_unk\":true,"
                           "\"byte_fallback\":true,\"ignore_merges\":false,\"vocab\":{"
                         : pre == 1 ? ",\"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,"
                                      "\"fuse_unk\":false,\"byte_fallback\":false,\"ignore_merges\":true,\"vocab\":{"
                                    : ",\"continuing_subword_prefix\":\"\",\"end_of_word_suffix\":\"\","
                                      "\"fuse_unk\":false,\"byte_fallback\":false,\"ignore_merges\":false,\"vocab\":{");
  }
  for (size_t i = 0; i < v->n_tokens && !rc; i++) {
    char num[32];
    snprintf(num, sizeof num, ":%zu", i);
    rc = (i && buf_addc(b, ',')) || jw_str(b, v->tokens[i], lens[i]) || jw_lit(b, num);
  }
  if (!rc) rc = jw_lit(b, "},\"merges\":[");
  if (rc) {
    seterr(err, errn, "%s: out of memory", name);
    return -1;
  }
  if (spm) {
    if (gg_spm_merges(v, lens, total, b, name, err, errn)) return -1;
  } else {
    for (size_t i = 0; i < v->n_merges && !rc; i++)
      rc = (i && buf_addc(b, ',')) || jw_str(b, v->merges[i], strlen(v->merges[i]));
  }
  if (!rc) rc = jw_lit(b, "]}}");
  if (rc) seterr(err, errn, "%s: out of memory", name);
  return rc;
}

blockc_tokenizer *blockc_tokenizer_load_ggml(const blockc_tokenizer_ggml *v, const char *name, char *err,
                                             size_t errn) {
  if (!name) name = "tokenizer.ggml";
  if (err && errn) err[0] = '\0';
  if (!v || !v->model) {
    seterr(err, errn, "%s: no tokenizer.ggml.model", name);
    return NULL;
  }
  char tmp[96];
  int spm = !strcmp(v->model, "llama");
  if (!spm && strcmp(v->model, "gpt2")) {
    seterr(err, errn, "%s: tokenizer.ggml.model \"%s\" is not supported (blockc reads \"gpt2\": byte-level BPE, "
           "and \"llama\": SentencePiece)", name, q(v->model, strlen(v->model), tmp, sizeof tmp));
    return NULL;
  }
  if (!v->tokens || !v->n_tokens || v->n_tokens > (size_t)TK_MAX_ID + 1) {
    seterr(err, errn, "%s: tokenizer.ggml.tokens: %s", name,
           v->tokens && v->n_tokens ? "more than 16777216 tokens" : "missing or empty");
    return NULL;
  }
  if (spm && !v->scores) {
    seterr(err, errn, "%s: tokenizer.ggml.scores: missing (a \"llama\" vocabulary needs them)", name);
    return NULL;
  }
  if (!spm && !v->merges) {
    seterr(err, errn, "%s: tokenizer.ggml.merges: missing (a \"gpt2\" vocabulary needs them)", name);
    return NULL;
  }
  const char *idkey[4] = {"bos_token_id", "eos_token_id", "unknown_token_id", "padding_token_id"};
  int64_t ids[4] = {v->bos, v->eos, v->unk, v->pad};
  for (int k = 0; k < 4; k++)
    if (ids[k] < -1 || ids[k] >= (int64_t)v->n_tokens) {
      seterr(err, errn, "%s: tokenizer.ggml.%s: %lld is not a token id (0..%zu)", name, idkey[k],
             (long long)ids[k], v->n_tokens - 1);
      return NULL;
    }
  size_t *lens = malloc(v->n_tokens * sizeof *lens), total = 0;
  if (!lens) {
    seterr(err, errn, "%s: out of memory", name);
    return NULL;
  }
  for (size_t i = 0; i < v->n_tokens; i++) {
    const char *s = v->tokens[i];
    lens[i] = s ? strlen(s) : 0;
    total += lens[i];
    const char *bad = !s ? "missing" : !utf8_valid(s, lens[i]) ? "not UTF-8" : NULL;
    if (!bad && v->scores && !(v->scores[i] == v->scores[i] && v->scores[i] - v->scores[i] == 0))
      bad = "its score is not a finite number";
    if (!bad && v->token_type && (v->token_type[i] < 1 || v->token_type[i] > 6))
      bad = "its token_type is not 1..6";
    if (bad) {
      seterr(err, errn, "%s: tokenizer.ggml.tokens[%zu]: %s", name, i, bad);
      free(lens);
      return NULL;
    }
  }
  for (size_t i = 0; i < v->n_merges; i++)
    if (!v->merges[i] || !utf8_valid(v->merges[i], strlen(v->merges[i]))) {
      seterr(err, errn, "%s: tokenizer.ggml.merges[%zu]: %s", name, i, v->merges[i] ? "not UTF-8" : "missing");
      free(lens);
      return NULL;
    }
  if (!spm && gg_pre(v->pre) < 0) {
    if (v->pre)
      seterr(err, errn, "%s: tokenizer.ggml.pre \"%s\" is not supported (blockc reads \"gpt-2\" and "
             "\"llama-bpe\" / \"llama3\"): pass --tokenizer tokenizer.json", name, q(v->pre, strlen(v->pre), tmp, sizeof tmp));
    else
      seterr(err, errn, "%s: tokenizer.ggml.pre: missing, so the pre-tokenizer of this \"gpt2\" vocabulary is "
             "unknown: pass --tokenizer tokenizer.json", name);
    free(lens);
    return NULL;
  }
  buf b = {0};
  char where[300];
  snprintf(where, sizeof where, "%s: tokenizer.ggml.* as tokenizer.json", name);
  blockc_tokenizer *t = NULL;
  if (!gg_json(v, lens, total, &b, name, err, errn)) t = blockc_tokenizer_load_mem(b.p, b.n, where, err, errn);
  if (t && v->bos >= 0) t->bos = (int32_t)v->bos;
  if (t && v->eos >= 0) t->eos = (int32_t)v->eos;
  buf_free(&b);
  free(lens);
  return t;
}

/* ------------------------------------------------- the way back: to ggml */

/* blockc_tokenizer_to_ggml: a loaded tokenizer as the tokenizer.ggml.* values
 * of a GGUF file, for `blockc weights --tokenizer FILE -o W.gguf`.  The
 * values are those blockc_tokenizer_load_ggml turns back into a tokenizer:
 * tokens by id, token types (special added tokens CONTROL 3, the unknown
 * token UNKNOWN 2 when it is one of them, other added tokens USER_DEFINED 4,
 * <0xNN> BYTE 6 in a SentencePiece vocabulary, the rest NORMAL 1), the
 * merges as "a b" in rank order ("gpt2") or, for SentencePiece ("llama",
 * chosen by byte_fallback), a score per token that orders the merges the
 * scores are derived from as the file orders them: minus the rank of the
 * token's first merge (0 for a token no merge makes).  The result is then
 * checked, not trusted: it is loaded with blockc_tokenizer_load_ggml and
 * compared with t part by part (tok_diff: vocabulary, added tokens and their
 * flags, the merge table up to the ranks' order, normalizer, pre-tokenizer,
 * decoder, post-processor, BOS / EOS), so a tokenizer that would read back
 * as anything else — another normalizer, a WordPiece prefix, a merge order
 * the scores cannot express — is refused with what differs, never written
 * so that it tokenizes differently. */

/* Whether two regexes are the same pattern. */
static int re_same(const regex *a, const regex *b) {
  return a->literal == b->literal && a->literal_empty == b->literal_empty && a->plen == b->plen &&
         (!a->plen || !memcmp(a->pat, b->pat, a->plen)) && !a->code == !b->code;
}

/* Whether two stages (NULL: none) do the same. */
static int stage_same(const stage *a, const stage *b) {
  if (!a || !b) return a == b;
  if (a->kind != b->kind || a->a != b->a || a->b != b->b || a->c != b->c || a->cp != b->cp ||
      a->len != b->len || a->nkids != b->nkids || !re_same(&a->re, &b->re))
    return 0;
  if (a->len && memcmp(a->str, b->str, a->len)) return 0;
  for (size_t i = 0; i < a->nkids; i++)
    if (!stage_same(&a->kids[i], &b->kids[i])) return 0;
  return 1;
}

typedef struct mrec { uint32_t rank; int32_t a, b, id; } mrec;

static int mrec_cmp(const void *x, const void *y) {
  const mrec *a = x, *b = y;
  return (a->rank > b->rank) - (a->rank < b->rank);
}

/* The merges of t in rank order (malloc'd, *n of them); NULL when out of memory. */
static mrec *merge_list(const blockc_tokenizer *t, size_t *n) {
  size_t k = 0;
  for (size_t i = 0; i < t->merges.cap; i++) k += t->merges.key[i] != 0;
  mrec *m = malloc((k ? k : 1) * sizeof *m);
  if (!m) return NULL;
  k = 0;
  for (size_t i = 0; i < t->merges.cap; i++)
    if (t->merges.key[i]) {
      uint64_t key = t->merges.key[i] - 1;
      m[k++] = (mrec){t->merges.val[i].rank, (int32_t)(key >> 32), (int32_t)(uint32_t)key, t->merges.val[i].id};
    }
  qsort(m, k, sizeof *m, mrec_cmp);
  *n = k;
  return m;
}

/* Whether s is the ByteLevel form of bytes other than s itself (so a
 * pre-tokenized word can be s while the text does not contain s). */
static int bl_other(const blockc_tokenizer *t, const char *s, size_t n) {
  int other = 0;
  for (size_t i = 0; i < n;) {
    int32_t cp;
    size_t k = (size_t)utf8_cp(s + i, n - i, &cp);
    if (cp < 0 || cp >= 324 || t->u2b[cp] < 0) return 0;
    other |= k != 1 || t->u2b[cp] != (unsigned char)s[i];
    i += k;
  }
  return other;
}

static size_t cp_count(const char *s, size_t n) {
  size_t c = 0;
  for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
  return c;
}

static const added_tok *added_of(const blockc_tokenizer *t, int32_t id) {
  for (size_t i = 0; i < t->nadded; i++)
    if (t->added[i].id == id) return &t->added[i];
  return NULL;
}

/* Whether the normalized flag of t's added tokens changes nothing: no
 * normalizer and all of one kind (one set, matched on the same text). */
static int norm_flag_moot(const blockc_tokenizer *t) {
  size_t k = 0;
  for (size_t i = 0; i < t->nadded; i++) k += t->added[i].normalized;
  return !t->normalizer && (k == 0 || k == t->nadded);
}

/* What of t the tokenizer u (t as tokenizer.ggml.*, read back) does
 * differently, into what; 0 when nothing. */
static int tok_diff(const blockc_tokenizer *t, const blockc_tokenizer *u, char *what, size_t wn) {
  char q1[96];
  if (memcmp(t->byte_tok, u->byte_tok, sizeof t->byte_tok) || t->byte_fallback != u->byte_fallback)
    return snprintf(what, wn, "its byte fallback (<0xNN> tokens)"), 1;
  if (t->unk_id != u->unk_id || (t->unk_id >= 0 && t->fuse_unk != u->fuse_unk))
    return snprintf(what, wn, "its unknown token (unk_token, fuse_unk)"), 1;
  if (t->ignore_merges != u->ignore_merges) return snprintf(what, wn, "its ignore_merges"), 1;
  if (t->cont_len != u->cont_len || t->eow_len != u->eow_len ||
      (t->cont_len && memcmp(t->cont_prefix, u->cont_prefix, t->cont_len)) ||
      (t->eow_len && memcmp(t->eow_suffix, u->eow_suffix, t->eow_len)))
    return snprintf(what, wn, "its continuing_subword_prefix / end_of_word_suffix"), 1;
  if (!stage_same(t->normalizer, u->normalizer)) return snprintf(what, wn, "its normalizer"), 1;
  if (!stage_same(t->pretok, u->pretok)) return snprintf(what, wn, "its pre_tokenizer"), 1;
  if (!stage_same(t->decoder, u->decoder)) return snprintf(what, wn, "its decoder"), 1;
  if (t->npre != u->npre || t->npost != u->npost ||
      (t->npre && memcmp(t->pre_ids, u->pre_ids, t->npre * sizeof *t->pre_ids)) ||
      (t->npost && memcmp(t->post_ids, u->post_ids, t->npost * sizeof *t->post_ids)))
    return snprintf(what, wn, "its post_processor (the special tokens around a text)"), 1;
  if (t->nid != u->nid) return snprintf(what, wn, "its %zu ids", t->nid), 1;
  int moot = norm_flag_moot(t) && norm_flag_moot(u);
  for (size_t i = 0; i < t->nid; i++) {
    const tok_entry *a = &t->e[i], *b = &u->e[i];
    const char *s = a->as ? a->as : a->s;
    size_t n = a->as ? a->alen : a->len;
    if (a->s && a->as && (a->len != a->alen || memcmp(a->s, a->as, a->len)))
      return snprintf(what, wn, "token %zu (\"%s\" in the vocabulary, another text as an added token)", i,
                      q(a->s, a->len, q1, sizeof q1)), 1;
    if (!a->s && b->s && (cp_count(s, n) < 2 || (u->ignore_merges && bl_other(u, s, n))))
      return snprintf(what, wn, "added token %zu (\"%s\", not in the model's vocabulary, which GGUF cannot say)",
                      i, q(s, n, q1, sizeof q1)), 1;
    const char *bs = b->as ? b->as : b->s;
    size_t bn = b->as ? b->alen : b->len;
    if (!s || !bs || n != bn || memcmp(s, bs, n) || (a->s && !b->s) || !a->as != !b->as ||
        a->special != b->special)
      return snprintf(what, wn, "token %zu (\"%s\")", i, q(s, n, q1, sizeof q1)), 1;
    if (!a->as) continue;
    const added_tok *x = added_of(t, (int32_t)i), *y = added_of(u, (int32_t)i);
    if (!x || !y || x->len != y->len || memcmp(x->s, y->s, x->len) || x->special != y->special ||
        x->lstrip != y->lstrip || x->rstrip != y->rstrip || x->single_word != y->single_word ||
        (!moot && x->normalized != y->normalized))
      return snprintf(what, wn, "added token %zu (\"%s\": its lstrip / rstrip / single_word / normalized flags)",
                      i, q(s, n, q1, sizeof q1)), 1;
  }
  if (t->nadded != u->nadded) return snprintf(what, wn, "its added tokens"), 1;
  if (t->bos != u->bos || t->eos != u->eos) return snprintf(what, wn, "its BOS / EOS ids"), 1;
  size_t na = 0, nb = 0;
  mrec *ma = merge_list(t, &na), *mb = merge_list(u, &nb);
  int rc = !ma || !mb ? (snprintf(what, wn, "(out of memory)"), 1) : 0;
  if (!rc && na != nb) rc = (snprintf(what, wn, "its merges (%zu of them; read back: %zu)", na, nb), 1);
  uint32_t last = 0;
  for (size_t i = 0; !rc && i < na; i++) {
    const merge_val *m = mm_get(&u->merges, ma[i].a, ma[i].b);
    if (!m || m->id != ma[i].id || (i && m->rank <= last)) {
      char q2[96];
      snprintf(what, wn, "its merges (\"%s %s\", merge %zu in rank order: %s)",
               q(t->e[ma[i].a].s, t->e[ma[i].a].len, q1, sizeof q1), q(t->e[ma[i].b].s, t->e[ma[i].b].len, q2, sizeof q2),
               i, m ? "its rank among the others" : "missing");
      rc = 1;
    }
    if (m) last = m->rank;
  }
  free(ma);
  free(mb);
  return rc;
}

void blockc_tokenizer_ggml_free(blockc_tokenizer_ggml *v) {
  if (!v) return;
  free((void *)v->tokens);
  free((void *)v->merges);
  free((void *)v->scores);
  free((void *)v->token_type);
  *v = (blockc_tokenizer_ggml){0};
}

int blockc_tokenizer_to_ggml(const blockc_tokenizer *t, const char *name, blockc_tokenizer_ggml *v, char *err,
                             size_t errn) {
  if (err && errn) err[0] = '\0';
  if (!name) name = "tokenizer";
  *v = (blockc_tokenizer_ggml){0};
  v->bos = v->eos = v->unk = v->pad = -1;
  v->add_bos = v->add_eos = v->add_space_prefix = -1;
  if (!t || !t->nid) return seterr(err, errn, "%s: an empty vocabulary", name), -1;
  size_t n = t->nid;
  char q1[96];
  for (size_t i = 0; i < n; i++) {
    const char *s = t->e[i].as ? t->e[i].as : t->e[i].s;
    size_t len = t->e[i].as ? t->e[i].alen : t->e[i].len;
    if (!s)
      return seterr(err, errn, "%s: id %zu has no token (GGUF's tokenizer.ggml.tokens lists one token for every "
                    "id below %zu)", name, i, n), -1;
    if (memchr(s, 0, len))
      return seterr(err, errn, "%s: token %zu (\"%s\") has a NUL byte, which a GGUF string cannot hold", name, i,
                    q(s, len, q1, sizeof q1)), -1;
  }
  int spm = t->byte_fallback;
  const stage *nz = t->normalizer;
  int prefix = nz && ((nz->kind == N_PREPEND) || (nz->kind == N_SEQ && nz->nkids && nz->kids[0].kind == N_PREPEND));
  v->model = spm ? "llama" : "gpt2";
  v->pre = spm ? NULL : t->pretok && t->pretok->kind == P_SEQ ? "llama-bpe" : "gpt-2";
  v->n_tokens = n;
  const char **tok = malloc(n * sizeof *tok);
  int32_t *type = malloc(n * sizeof *type);
  float *score = spm ? malloc(n * sizeof *score) : NULL;
  size_t nm = 0;
  mrec *m = merge_list(t, &nm);
  char **mer = NULL;
  int rc = tok && type && m && (!spm || score) ? 0 : -1;
  for (size_t i = 0; !rc && i < n; i++) {
    const tok_entry *e = &t->e[i];
    tok[i] = e->as ? e->as : e->s;
    type[i] = e->as ? (e->special ? ((int32_t)i == t->unk_id ? 2 : 3) : 4) : 1;
    if (spm && !e->as && e->len == 6 && byte_token(e->s, 6) >= 0) type[i] = 6;
    if (spm) score[i] = 0;
  }
  if (!rc && spm) {
    for (size_t i = nm; i-- > 0;) score[m[i].id] = -(float)m[i].rank;  /* the lowest rank wins */
  } else if (!rc) {
    size_t bytes = 0;
    for (size_t i = 0; i < nm; i++) bytes += t->e[m[i].a].len + t->e[m[i].b].len + 2;
    mer = malloc(nm * sizeof *mer + bytes + 1);
    char *p = mer ? (char *)(mer + nm) : NULL;
    for (size_t i = 0; p && i < nm; i++) {
      const tok_entry *a = &t->e[m[i].a], *b = &t->e[m[i].b];
      mer[i] = p;
      memcpy(p, a->s, a->len), p += a->len, *p++ = ' ';
      memcpy(p, b->s, b->len), p += b->len, *p++ = '\0';
    }
    rc = mer ? 0 : -1;
  }
  free(m);
  v->tokens = tok, v->token_type = type, v->scores = score;
  v->merges = (const char *const *)mer, v->n_merges = spm ? 0 : nm;
  if (rc) {
    blockc_tokenizer_ggml_free(v);
    return seterr(err, errn, "%s: out of memory", name), -1;
  }
  v->bos = t->bos, v->eos = t->eos, v->unk = t->unk_id >= 0 ? t->unk_id : -1;
  v->add_bos = t->npre == 1 && t->pre_ids[0] == t->bos;
  v->add_eos = t->npost == 1 && t->post_ids[0] == t->eos;
  if (spm) v->add_space_prefix = prefix;
  /* the check: read back, it must be t */
  char e2[512] = "", what[300] = "";
  blockc_tokenizer *u = blockc_tokenizer_load_ggml(v, name, e2, sizeof e2);
  int loaded = u != NULL, diff = u ? tok_diff(t, u, what, sizeof what) : 1;
  blockc_tokenizer_free(u);
  if (diff) {
    char form[64];
    snprintf(form, sizeof form, "\"%s\"%s%s%s", v->model, v->pre ? " (pre \"" : "", v->pre ? v->pre : "",
             v->pre ? "\")" : "");
    if (loaded || !e2[0])
      seterr(err, errn, "%s: has no exact GGUF form: %s differs from llama.cpp's %s vocabulary, the closest of "
             "those blockc writes (tokenizer.ggml.*: byte-level BPE as GPT-2 or Llama 3 pre-tokenize it, "
             "SentencePiece BPE with byte fallback); written so, it would tokenize differently", name, what, form);
    else
      seterr(err, errn, "%s: has no exact GGUF form: as llama.cpp's %s vocabulary it does not load: %s", name, form,
             e2);
    blockc_tokenizer_ggml_free(v);
    return -1;
  }
  return 0;
}
