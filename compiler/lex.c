// lex.c — splits a graph file into tokens.
//
// The language has few token kinds: identifiers, integer and float
// literals, and punctuators (`( ) [ ] { } , = : . .. <= + - * / % ^`).
// Whitespace and newlines only separate tokens (statements are recognised
// by their first token), and `#` starts a comment that runs to the end of
// the line. A line ends at LF, CRLF or a lone CR, and a leading UTF-8 byte
// order mark is skipped. Anything else — control bytes, non-ASCII, `;`, quotes — is
// rejected here with its location, so nothing unexpected ever reaches the
// parser, let alone the C emitter.
#include "bc.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  bc_ctx *ctx;
  const bc_src *src;
  const char *p;      // cursor
  int line;
  const char *bol;    // beginning of the current line
  bc_token *toks;
  int n, cap;
} lexer;

static bc_loc here(const lexer *L, const char *p, int len) {
  bc_loc loc = {L->src, L->line, (int)(p - L->bol) + 1, len > 0 ? len : 1};
  return loc;
}

static bc_token *push(lexer *L, bc_tokkind kind, const char *p, int len) {
  if (L->n == L->cap) {
    int cap = L->cap ? L->cap * 2 : 256;
    bc_token *t = bc_alloc(L->ctx, (size_t)cap * sizeof *t);
    if (!t) return NULL;
    if (L->toks) memcpy(t, L->toks, (size_t)L->n * sizeof *t);
    L->toks = t;
    L->cap = cap;
  }
  bc_token *t = &L->toks[L->n++];
  memset(t, 0, sizeof *t);
  t->kind = kind;
  t->p = p;
  t->len = len;
  t->loc = here(L, p, len);
  return t;
}

static bool is_ident_start(char c) { return isalpha((unsigned char)c) || c == '_'; }
static bool is_ident_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

// digits [ '.' digits ] [ ('e'|'E') ['+'|'-'] digits ]; "0..N" stays an int.
static int lex_number(lexer *L) {
  const char *start = L->p, *q = L->p;
  bool is_float = false;
  while (isdigit((unsigned char)*q)) q++;
  if (q[0] == '.' && isdigit((unsigned char)q[1])) {
    is_float = true;
    q++;
    while (isdigit((unsigned char)*q)) q++;
  }
  if ((*q == 'e' || *q == 'E') &&
      (isdigit((unsigned char)q[1]) ||
       ((q[1] == '+' || q[1] == '-') && isdigit((unsigned char)q[2])))) {
    is_float = true;
    q += 2;
    while (isdigit((unsigned char)*q)) q++;
  }
  if (is_ident_char(*q))
    return bc_error_at(L->ctx, here(L, start, (int)(q - start) + 1),
                       "malformed number '%.*s'", (int)(q - start) + 1, start);
  bc_token *t = push(L, is_float ? BC_TK_FLOAT : BC_TK_INT, start, (int)(q - start));
  if (!t) return bc_error(L->ctx, BC_ENOMEM, "error: out of memory");
  char buf[64];
  int n = (int)(q - start);
  if (n >= (int)sizeof buf)
    return bc_error_at(L->ctx, t->loc, "number literal is %d characters long (limit %d)", n,
                       (int)sizeof buf - 1);
  memcpy(buf, start, (size_t)n);
  buf[n] = '\0';
  errno = 0;
  if (is_float) {
    t->fval = strtod(buf, NULL);
    if (errno == ERANGE && (t->fval > 1 || t->fval < -1))
      return bc_error_at(L->ctx, t->loc, "float literal %s is out of range", buf);
  } else {
    long long v = strtoll(buf, NULL, 10);
    if (errno == ERANGE)
      return bc_error_at(L->ctx, t->loc, "integer literal %s does not fit in 64 bits", buf);
    t->ival = v;
    t->fval = (double)v;
  }
  L->p = q;
  return BC_OK;
}

static int lex_ident(lexer *L) {
  const char *start = L->p, *q = L->p;
  while (is_ident_char(*q)) q++;
  int n = (int)(q - start);
  if (n > BC_MAX_IDENT)
    return bc_error_at(L->ctx, here(L, start, n), "identifier is %d characters long (limit %d)",
                       n, BC_MAX_IDENT);
  if (!push(L, BC_TK_IDENT, start, n)) return bc_error(L->ctx, BC_ENOMEM, "error: out of memory");
  L->p = q;
  return BC_OK;
}

static int lex_punct(lexer *L) {
  const char *p = L->p;
  if ((p[0] == '.' && p[1] == '.') || (p[0] == '<' && p[1] == '=')) {  // ".." and "<="
    if (!push(L, BC_TK_PUNCT, p, 2)) return bc_error(L->ctx, BC_ENOMEM, "error: out of memory");
    L->p += 2;
    return BC_OK;
  }
  if (strchr("()[]{},=:.+-*/%^", *p)) {
    if (!push(L, BC_TK_PUNCT, p, 1)) return bc_error(L->ctx, BC_ENOMEM, "error: out of memory");
    L->p++;
    return BC_OK;
  }
  unsigned char c = (unsigned char)*p;
  if (c >= 0x80)
    return bc_error_at(L->ctx, here(L, p, 1),
                       "unexpected byte 0x%02x (graph files are ASCII outside comments)", c);
  if (isprint(c))
    return bc_error_at(L->ctx, here(L, p, 1), "unexpected character '%c'", c);
  return bc_error_at(L->ctx, here(L, p, 1), "unexpected control character 0x%02x", c);
}

int bcL_tokenize(bc_ctx *ctx, const bc_src *src, bc_token **toks, int *ntoks) {
  lexer L = {.ctx = ctx, .src = src, .p = src->text, .line = 1, .bol = src->text};
  *toks = NULL;
  *ntoks = 0;
  if (memchr(src->text, '\0', src->len))
    return bc_error(ctx, BC_EINPUT, "%s: error: file contains a NUL byte (not a text file)",
                    src->path);
  // A UTF-8 byte order mark (Windows editors write one) is skipped.
  if (src->len >= 3 && !memcmp(L.p, "\xef\xbb\xbf", 3)) L.p += 3, L.bol = L.p;
  while (*L.p) {
    char c = *L.p;
    if (c == '\n' || c == '\r') {  // LF, CRLF, and a lone CR (old Mac files)
      L.p += c == '\r' && L.p[1] == '\n' ? 2 : 1;
      L.line++;
      L.bol = L.p;
      continue;
    }
    if (c == ' ' || c == '\t') {
      L.p++;
      continue;
    }
    if (c == '#') {  // comment: anything up to the end of the line
      while (*L.p && *L.p != '\n' && *L.p != '\r') L.p++;
      continue;
    }
    int st;
    if (isdigit((unsigned char)c)) st = lex_number(&L);
    else if (is_ident_start(c)) st = lex_ident(&L);
    else st = lex_punct(&L);
    if (st) return st;
  }
  if (!push(&L, BC_TK_EOF, L.p, 0)) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  *toks = L.toks;
  *ntoks = L.n;
  return BC_OK;
}

bool bcL_is(const bc_token *t, const char *s) {
  return (t->kind == BC_TK_PUNCT || t->kind == BC_TK_IDENT) && (int)strlen(s) == t->len &&
         memcmp(t->p, s, (size_t)t->len) == 0;
}
