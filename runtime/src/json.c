/* json.c — the strict JSON reader of safetensors headers.
 * One part of the runtime: tools/amalgamate.sh concatenates runtime/src/
 * into runtime/blockc_rt.c (the file users vendor); prelude.c has the
 * includes and macros every part uses. */
#ifndef BLOCKC_NO_IO
/* --- strict JSON ----------------------------------------------------------- */

typedef struct {
  const char *s, *p, *end;   /* s: the header's first byte (positions in messages) */
  int depth;
  const char *badnum;        /* the first number that is not a plain non-negative integer */
} json;

static void js_ws(json *j) {
  while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
    j->p++;
}

static int js_lit(json *j, char c) {
  js_ws(j);
  if (j->p < j->end && *j->p == c) {
    j->p++;
    return 1;
  }
  return 0;
}

/* Value of 4 hex digits at s[i..i+4) (n bytes in all), or -1. */
static long hex4(const char *s, size_t n, size_t i) {
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

/* The escape at s[*i] (a backslash inside a string): one of \" \\ \/ \b
 * \f \n \r \t, or \uXXXX with surrogates in pairs and never U+0000.
 * Advances *i to the escape's last byte; returns what is wrong or NULL. */
static const char *bad_escape(const char *s, size_t n, size_t *i) {
  size_t k = *i + 1;
  if (k >= n) return "an unfinished escape in a string";
  if (s[k] && strchr("\"\\/bfnrt", s[k])) {
    *i = k;
    return NULL;
  }
  if (s[k] != 'u') return "an invalid escape in a string";
  long u = hex4(s, n, k + 1);
  if (u < 0) return "an invalid \\u escape in a string";
  if (u == 0) return "an escaped NUL (\\u0000) in a string; tensor names cannot contain NUL";
  k += 4;
  if (u >= 0xDC00 && u <= 0xDFFF) return "a lone low surrogate escape in a string";
  if (u >= 0xD800 && u <= 0xDBFF) {
    long lo = k + 2 < n && s[k + 1] == '\\' && s[k + 2] == 'u' ? hex4(s, n, k + 3) : -1;
    if (lo < 0xDC00 || lo > 0xDFFF) return "a high surrogate escape without its low half";
    k += 6;
  }
  *i = k;
  return NULL;
}

/* The lexical rules over the whole header, before its grammar: no raw
 * control byte in a string, valid escapes (see bad_escape), only JSON's
 * whitespace between tokens.  Returns what is wrong (at *at) or NULL. */
static const char *lexical_problem(const char *s, size_t n, size_t *at) {
  int in_str = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    *at = i;
    if (in_str) {
      if (c == '"') in_str = 0;
      else if (c < 0x20) return "a raw control byte inside a string (JSON requires an escape)";
      else if (c == '\\') {
        const char *bad = bad_escape(s, n, &i);
        if (bad) return bad;
      }
    } else if (c == '"') {
      in_str = 1;
    } else if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
      return "a control byte where JSON allows only space, tab, CR and LF";
    }
  }
  return NULL;
}

/* First invalid UTF-8 byte (or NUL) in s[0, n), or -1. */
static long bad_utf8(const unsigned char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    unsigned c = s[i];
    size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (c == 0 || len == 0 || (len == 2 && c < 0xC2) || c > 0xF4 || i + len > n) return (long)i;
    for (size_t k = 1; k < len; k++)
      if ((s[i + k] & 0xC0) != 0x80) return (long)i;
    if (len == 3 && ((c == 0xE0 && s[i + 1] < 0xA0) || (c == 0xED && s[i + 1] >= 0xA0))) return (long)i;
    if (len == 4 && ((c == 0xF0 && s[i + 1] < 0x90) || (c == 0xF4 && s[i + 1] >= 0x90))) return (long)i;
    i += len;
  }
  return -1;
}

/* A JSON string (lexically checked already), decoded to UTF-8 into a
 * malloc'ed buffer (out may be NULL to just skip it). */
static int js_string(json *j, char **out) {
  js_ws(j);
  if (j->p >= j->end || *j->p != '"') return 0;
  const char *s = ++j->p;
  while (j->p < j->end && *j->p != '"') j->p += (*j->p == '\\' && j->p + 1 < j->end) ? 2 : 1;
  if (j->p >= j->end) return 0;
  size_t n = (size_t)(j->p++ - s);
  if (!out) return 1;
  char *d = malloc(n + 1), *o = d;  /* decoding never lengthens the text */
  if (!d) return 0;
  for (size_t q = 0; q < n;) {
    char c = s[q++];
    if (c != '\\') {
      *o++ = c;
      continue;
    }
    c = s[q++];
    if (c != 'u') {
      static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
      *o++ = to[strchr(from, c) - from];
      continue;
    }
    unsigned long u = (unsigned long)hex4(s, n, q);
    q += 4;
    if (u >= 0xd800 && u < 0xdc00) {
      u = 0x10000 + ((u - 0xd800) << 10) + ((unsigned long)hex4(s, n, q + 2) - 0xdc00);
      q += 6;
    }
    if (u < 0x80) *o++ = (char)u;
    else if (u < 0x800) *o++ = (char)(0xc0 | u >> 6), *o++ = (char)(0x80 | (u & 0x3f));
    else if (u < 0x10000)
      *o++ = (char)(0xe0 | u >> 12), *o++ = (char)(0x80 | ((u >> 6) & 0x3f)),
      *o++ = (char)(0x80 | (u & 0x3f));
    else
      *o++ = (char)(0xf0 | u >> 18), *o++ = (char)(0x80 | ((u >> 12) & 0x3f)),
      *o++ = (char)(0x80 | ((u >> 6) & 0x3f)), *o++ = (char)(0x80 | (u & 0x3f));
  }
  *o = '\0';
  *out = d;
  return 1;
}

/* A non-negative integer without sign, fraction, exponent or leading zero,
 * below 2^53 (exact wherever it came from). */
static int js_uint(json *j, unsigned long long *v) {
  js_ws(j);
  const char *s = j->p;
  *v = 0;
  while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
    if (*v > (1ull << 53) / 10) return 0;
    *v = *v * 10 + (unsigned long long)(*j->p++ - '0');
  }
  if (j->p == s || (j->p - s > 1 && *s == '0') || *v >= (1ull << 53)) return 0;
  return !(j->p < j->end && strchr(".eE+-", *j->p));
}

/* A JSON number (RFC 8259 grammar); one that is not a plain non-negative
 * integer of at most 16 digits is remembered in j->badnum. */
static int js_number(json *j) {
  const char *s = j->p, *e = j->end;
  const char *p = s + (*s == '-');
  const char *d0 = p;
  while (p < e && *p >= '0' && *p <= '9') p++;
  if (p == d0 || (p - d0 > 1 && *d0 == '0')) return 0;
  int plain = *s != '-' && p - d0 <= 16;
  if (p < e && *p == '.') {
    const char *f = ++p;
    while (p < e && *p >= '0' && *p <= '9') p++;
    if (p == f) return 0;
    plain = 0;
  }
  if (p < e && (*p == 'e' || *p == 'E')) {
    p += p + 1 < e && (p[1] == '+' || p[1] == '-') ? 2 : 1;
    const char *x = p;
    while (p < e && *p >= '0' && *p <= '9') p++;
    if (p == x) return 0;
    plain = 0;
  }
  if (!plain && !j->badnum) j->badnum = s;
  j->p = p;
  return 1;
}

/* Any JSON value (the grammar pass): 0 with j->p at the offending byte. */
static int js_value(json *j) {
  js_ws(j);
  if (j->p >= j->end || ++j->depth > JSON_MAX_DEPTH) return 0;
  char c = *j->p;
  int ok = 1;
  if (c == '"') {
    ok = js_string(j, NULL);
  } else if (c == '{' || c == '[') {
    char close = c == '{' ? '}' : ']';
    j->p++;
    if (!js_lit(j, close)) {
      do {
        if (c == '{' && !(js_string(j, NULL) && js_lit(j, ':'))) return 0;
        if (!js_value(j)) return 0;
      } while (js_lit(j, ','));
      ok = js_lit(j, close);
    }
  } else if (c == '-' || (c >= '0' && c <= '9')) {
    ok = js_number(j);
  } else {
    static const char *const words[] = {"true", "false", "null"};
    ok = 0;
    for (int i = 0; i < 3 && !ok; i++) {
      size_t n = strlen(words[i]);
      if ((size_t)(j->end - j->p) >= n && !memcmp(j->p, words[i], n)) j->p += n, ok = 1;
    }
  }
  j->depth--;
  return ok;
}

/* The next value's first byte (after whitespace), or 0. */
static char js_peek(json *j) {
  js_ws(j);
  return j->p < j->end ? *j->p : 0;
}

/* Up to 24 bytes at p, unprintable ones as '?', for quoting a spot. */
static const char *excerpt(const char *p, const char *end, char *buf, size_t n) {
  size_t k = 0;
  while (p < end && k + 1 < n && k < 24) {
    unsigned char c = (unsigned char)*p++;
    buf[k++] = (c >= 32 && c < 127) ? (char)c : '?';
  }
  buf[k] = '\0';
  return buf;
}

#endif /* BLOCKC_NO_IO */
