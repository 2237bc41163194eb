// parse.c — recursive-descent parser: graph text to the flat, typed IR.
//
// The grammar (docs/language.md has it in EBNF with the semantics) is small:
//
//   program   = "model" IDENT { stmt }
//   stmt      = "dim" IDENT "=" iexpr
//             | "input" IDENT ":" "[" iexpr { "," iexpr } "]"
//             | "output" IDENT
//             | "for" IDENT "in" iexpr ".." iexpr [ "as" path ] "{" { stmt } "}"
//             | IDENT "=" value
//   value     = IDENT | IDENT "(" args ")"
//   arg       = value | IDENT "=" attrval | "init" [ "." selector ] "=" initval
//
// There is no separate AST: loops are unrolled while parsing (the body's
// tokens are simply parsed again for each iteration), names are resolved to
// SSA values as they are bound, and every node's shape is inferred and
// checked the moment it is built. So when parsing succeeds the IR is
// complete and valid, and every error points at the token that caused it.
//
// The first error stops parsing: it is reported (file:line:col, the source
// line and a caret) and we longjmp back to the entry point. Everything was
// allocated in the context's arena, so unwinding leaks nothing.
#include "ops.h"
#include "cnames.h"

#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

// Names are interned once, before parsing: every identifier token gets the
// id of its spelling, and the symbol and binding tables are indexed by that
// id.  Every lookup is O(1), so parse time stays linear in the unrolled
// program however many names a file declares.

// A dim or a loop variable: named integers usable in expressions.  Symbols
// form a stack: a loop trip pops everything its body declared.
typedef struct {
  int id;              // interned name
  int64_t value;       // for a run-time dim: its bound
  bool loopvar;
  int dim;             // index in graph->dims, or -1 (loop variables, loop-local dims)
  bc_loc loc;
} intsym;

// A name bound to an SSA value. Rebinding replaces the value; a binding
// that is replaced (or survives to the end) without being read is an error.
typedef struct {
  const char *name;
  int val;
  bc_loc loc;
  bool used;
} binding;

typedef struct bcP_parser {
  bc_ctx *ctx;
  bc_graph *g;
  bc_token *tok;       // all tokens; tok[ntok-1] is EOF
  int ntok, pos;
  int *tid;            // per token: interned identifier id, -1 for others
  const char **iname;  // per identifier id: its spelling
  int nident;
  int *sym_of;         // per identifier id: index in syms, -1
  int *bind_of;        // per identifier id: index in binds, -1
  intsym *syms;
  int nsyms, capsyms;
  binding *binds;
  int nbinds, capbinds;
  int capdims;         // capacity of g->dims
  int loop_depth;
  const bc_define *defs;
  int ndefs;
  bool *def_used;
  const char *prefix;  // parameter-name prefix from enclosing `as` clauses
  int depth;           // nesting of loops, calls and parentheses
  int64_t unrolled;    // statements executed, to bound pathological loops
  bool have_output;
  const char *defining;  // name on the left of the assignment being parsed
  jmp_buf jb;
} parser;

#define MAX_UNROLLED_STMTS 1000000
#define MAX_LOOP_TRIPS 100000
#define MAX_DIMS 4096          // top-level dim statements

static _Noreturn void bail(parser *P) { longjmp(P->jb, 1); }

__attribute__((format(printf, 3, 4))) static _Noreturn void error_at(parser *P, bc_loc loc,
                                                                     const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  bc_error_at(P->ctx, loc, "%s", msg);
  bail(P);
}

static void *palloc(parser *P, size_t n) {
  void *p = bc_alloc(P->ctx, n);
  if (!p) {
    bc_error(P->ctx, BC_ENOMEM, "error: out of memory");
    bail(P);
  }
  return p;
}

// --- tokens ----------------------------------------------------------------

static bc_token *peek(parser *P) { return &P->tok[P->pos]; }
static bc_token *peek2(parser *P) { return &P->tok[P->pos + (P->pos + 1 < P->ntok)]; }
static bc_token *next(parser *P) {
  bc_token *t = &P->tok[P->pos];
  if (P->pos + 1 < P->ntok) P->pos++;
  return t;
}
static bool at(parser *P, const char *s) { return bcL_is(peek(P), s); }

static const char *tok_desc(parser *P, const bc_token *t) {
  if (t->kind == BC_TK_EOF) return "end of file";
  return bc_fmt(P->ctx, "'%.*s'", t->len, t->p);
}

static bc_token *expect(parser *P, const char *s, const char *what) {
  if (!at(P, s))
    error_at(P, peek(P)->loc, "expected '%s' %s, found %s", s, what, tok_desc(P, peek(P)));
  return next(P);
}

// The same where the description names something ("after 'Add'"); the
// text is only formatted when it is needed.
static bc_token *expect_named(parser *P, const char *s, const char *fmt, const char *name) {
  if (!at(P, s)) {
    char what[160];
    snprintf(what, sizeof what, fmt, name);
    expect(P, s, what);
  }
  return next(P);
}

static bool is_keyword(const bc_token *t) {
  static const char *kw[] = {"model", "dim", "input", "output", "for", "in", "as", "true", "false"};
  for (size_t i = 0; i < sizeof kw / sizeof kw[0]; i++)
    if (bcL_is(t, kw[i])) return true;
  return false;
}

static const char *tok_str(parser *P, const bc_token *t) {
  return bc_strndup(P->ctx, t->p, (size_t)t->len);
}

// IDENT that is not a keyword; `what` says what the name is for.
static bc_token *expect_name(parser *P, const char *what) {
  bc_token *t = peek(P);
  if (t->kind != BC_TK_IDENT)
    error_at(P, t->loc, "expected %s, found %s", what, tok_desc(P, t));
  if (is_keyword(t))
    error_at(P, t->loc, "expected %s, found keyword '%.*s'", what, t->len, t->p);
  return next(P);
}

// --- "did you mean" ----------------------------------------------------------

static int edit_distance(const char *a, const char *b) {
  int la = (int)strlen(a), lb = (int)strlen(b);
  if (la > 64 || lb > 64) return 99;
  int d[65][65];
  for (int i = 0; i <= la; i++) d[i][0] = i;
  for (int j = 0; j <= lb; j++) d[0][j] = j;
  for (int i = 1; i <= la; i++)
    for (int j = 1; j <= lb; j++) {
      int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
      d[i][j] = c;
    }
  return d[la][lb];
}

// " (did you mean 'x'?)" for the closest candidate within distance 2, or "".
static const char *suggest(parser *P, const char *name, const char *const *cands, int n) {
  int best = 3;
  const char *pick = NULL;
  for (int i = 0; i < n; i++) {
    int d = edit_distance(name, cands[i]);
    if (d < best) best = d, pick = cands[i];
  }
  return pick ? bc_fmt(P->ctx, " (did you mean '%s'?)", pick) : "";
}

// --- symbols ---------------------------------------------------------------

static int intern(parser *P, const bc_token *t) { return P->tid[t - P->tok]; }

static intsym *find_sym(parser *P, const bc_token *t) {
  int id = intern(P, t);
  return id >= 0 && P->sym_of[id] >= 0 ? &P->syms[P->sym_of[id]] : NULL;
}

static binding *find_binding(parser *P, const bc_token *t) {
  int id = intern(P, t);
  return id >= 0 && P->bind_of[id] >= 0 ? &P->binds[P->bind_of[id]] : NULL;
}

static void push_sym(parser *P, const bc_token *t, int64_t v, bool loopvar, int dim) {
  if (P->nsyms == P->capsyms) {
    int cap = P->capsyms ? P->capsyms * 2 : 16;
    intsym *s = palloc(P, (size_t)cap * sizeof *s);
    if (P->syms) memcpy(s, P->syms, (size_t)P->nsyms * sizeof *s);
    P->syms = s;
    P->capsyms = cap;
  }
  int id = intern(P, t);
  P->sym_of[id] = P->nsyms;
  P->syms[P->nsyms++] = (intsym){id, v, loopvar, dim, t->loc};
}

// Pops symbols down to `n` (the end of a loop trip's scope).
static void pop_syms(parser *P, int n) {
  while (P->nsyms > n) P->sym_of[P->syms[--P->nsyms].id] = -1;
}

static const bc_dim *rt_dim(parser *P, const intsym *s) {
  if (!s || s->dim < 0) return NULL;
  const bc_dim *d = &P->g->dims[s->dim];
  return d->rt >= 0 ? d : NULL;
}

static const char *unknown_name_hint(parser *P, const char *name, bool want_value) {
  const char **cands = palloc(P, (size_t)(P->nsyms + P->nbinds + 1) * sizeof *cands);
  int n = 0;
  if (want_value)
    for (int i = 0; i < P->nbinds; i++) cands[n++] = P->binds[i].name;
  else
    for (int i = 0; i < P->nsyms; i++) cands[n++] = P->iname[P->syms[i].id];
  return suggest(P, name, cands, n);
}

// --- integer expressions (dims, shapes, loop bounds, heads, hidden) --------
//
//   iexpr = iterm { ("+" | "-") iterm }
//   iterm = iunary { ("*" | "/" | "%") iunary }
//   iunary = "-" iunary | iprimary
//   iprimary = INT | IDENT | "(" iexpr ")"
//
// All arithmetic is checked: overflow is an error at the operator.

static int64_t iexpr(parser *P);

static _Noreturn void rt_error(parser *P, const bc_token *t) {
  error_at(P, t->loc, "run-time dim '%.*s' has no value at compile time: it can only stand alone "
           "as a batch or sequence axis of an input (input x : [B, %.*s, D])", t->len, t->p,
           t->len, t->p);
}

static void enter(parser *P, bc_loc loc) {
  if (++P->depth > BC_MAX_NEST) error_at(P, loc, "nested too deeply (limit %d)", BC_MAX_NEST);
}

static int64_t iprimary(parser *P) {
  bc_token *t = peek(P);
  if (t->kind == BC_TK_INT) return next(P)->ival;
  if (t->kind == BC_TK_FLOAT)
    error_at(P, t->loc, "expected an integer, found %.*s", t->len, t->p);
  if (at(P, "(")) {
    enter(P, t->loc);
    next(P);
    int64_t v = iexpr(P);
    expect(P, ")", "to close '('");
    P->depth--;
    return v;
  }
  if (t->kind == BC_TK_IDENT && !is_keyword(t)) {
    const char *name = tok_str(P, next(P));
    intsym *s = find_sym(P, t);
    if (rt_dim(P, s)) rt_error(P, t);
    if (s) return s->value;
    if (find_binding(P, t))
      error_at(P, t->loc, "'%s' is a value, not a dim: only dims and loop variables can appear "
               "in integer expressions", name);
    error_at(P, t->loc, "undefined dim '%s'%s", name, unknown_name_hint(P, name, false));
  }
  error_at(P, t->loc, "expected an integer expression, found %s", tok_desc(P, t));
}

static int64_t iunary(parser *P) {
  if (at(P, "-")) {
    bc_token *op = next(P);
    enter(P, op->loc);
    int64_t v = iunary(P);
    P->depth--;
    if (v == INT64_MIN) error_at(P, op->loc, "integer overflow in negation");
    return -v;
  }
  return iprimary(P);
}

static int64_t iterm(parser *P) {
  int64_t v = iunary(P);
  while (at(P, "*") || at(P, "/") || at(P, "%")) {
    bc_token *op = next(P);
    int64_t r = iunary(P), out;
    if (*op->p == '*') {
      if (__builtin_mul_overflow(v, r, &out))
        error_at(P, op->loc, "integer overflow: %lld * %lld does not fit in 64 bits",
                 (long long)v, (long long)r);
      v = out;
    } else {
      if (r == 0) error_at(P, op->loc, "division by zero");
      if (v == INT64_MIN && r == -1) error_at(P, op->loc, "integer overflow in division");
      v = *op->p == '/' ? v / r : v % r;
    }
  }
  return v;
}

static int64_t iexpr(parser *P) {
  int64_t v = iterm(P);
  while (at(P, "+") || at(P, "-")) {
    bc_token *op = next(P);
    int64_t r = iterm(P), out;
    bool ovf = *op->p == '+' ? __builtin_add_overflow(v, r, &out)
                             : __builtin_sub_overflow(v, r, &out);
    if (ovf)
      error_at(P, op->loc, "integer overflow: %lld %c %lld does not fit in 64 bits",
               (long long)v, *op->p, (long long)r);
    v = out;
  }
  return v;
}

// A positive size: a dim, a shape entry, heads, hidden. `what` names it.
static int64_t size_expr(parser *P, const char *what) {
  bc_loc loc = peek(P)->loc;
  int64_t v = iexpr(P);
  bc_loc end = P->tok[P->pos > 0 ? P->pos - 1 : 0].loc;
  if (end.line == loc.line && end.col >= loc.col) loc.len = end.col + end.len - loc.col;
  if (v <= 0) error_at(P, loc, "%s must be positive, got %lld", what, (long long)v);
  if (v > BC_MAX_DIM)
    error_at(P, loc, "%s is %lld, over the limit of %lld", what, (long long)v,
             (long long)BC_MAX_DIM);
  return v;
}

// --- float expressions (eps, alpha, beta) ----------------------------------
//
//   fexpr = fterm { ("+" | "-") fterm }
//   fterm = funary { ("*" | "/") funary }
//   funary = "-" funary | fpow
//   fpow = fprimary [ "^" funary ]          (right-associative)
//   fprimary = INT | FLOAT | IDENT | "sqrt" "(" fexpr ")" | "(" fexpr ")"

static double fexpr(parser *P);
static double funary(parser *P);

// A literal whose mantissa has a non-zero digit but that reads as 0 (1e-400).
static bool underflowed(const bc_token *t) {
  if (t->fval != 0) return false;
  for (int i = 0; i < t->len && t->p[i] != 'e' && t->p[i] != 'E'; i++)
    if (t->p[i] >= '1' && t->p[i] <= '9') return true;
  return false;
}

static double fprimary(parser *P) {
  bc_token *t = peek(P);
  if (t->kind == BC_TK_FLOAT && underflowed(t))
    error_at(P, t->loc, "%.*s is too small for a double (underflows to 0)", t->len, t->p);
  if (t->kind == BC_TK_INT || t->kind == BC_TK_FLOAT) return next(P)->fval;
  if (at(P, "(") || (bcL_is(t, "sqrt") && bcL_is(peek2(P), "("))) {
    bool is_sqrt = bcL_is(t, "sqrt");
    if (is_sqrt) next(P);
    enter(P, t->loc);
    next(P);
    double v = fexpr(P);
    expect(P, ")", "to close '('");
    P->depth--;
    if (is_sqrt && v < 0) error_at(P, t->loc, "sqrt of a negative number (%g)", v);
    return is_sqrt ? sqrt(v) : v;
  }
  if (t->kind == BC_TK_IDENT && !is_keyword(t)) {
    const char *name = tok_str(P, next(P));
    intsym *s = find_sym(P, t);
    if (rt_dim(P, s)) rt_error(P, t);
    if (s) return (double)s->value;
    if (find_binding(P, t))
      error_at(P, t->loc, "'%s' is a value, not a dim: only numbers, dims and loop variables "
               "can appear in float expressions", name);
    error_at(P, t->loc, "undefined dim '%s'%s", name, unknown_name_hint(P, name, false));
  }
  error_at(P, t->loc, "expected a number, found %s", tok_desc(P, t));
}

static double fpow(parser *P) {
  double v = fprimary(P);
  if (at(P, "^")) {
    bc_token *op = next(P);
    enter(P, op->loc);
    double e = funary(P);
    P->depth--;
    v = pow(v, e);
    if (!isfinite(v)) error_at(P, op->loc, "power is not a finite number");
  }
  return v;
}

static double funary(parser *P) {
  if (at(P, "-")) {
    bc_token *op = next(P);
    enter(P, op->loc);
    double v = -funary(P);
    P->depth--;
    return v;
  }
  return fpow(P);
}

static double fterm(parser *P) {
  double v = funary(P);
  while (at(P, "*") || at(P, "/")) {
    bc_token *op = next(P);
    double r = funary(P);
    if (*op->p == '/' && r == 0) error_at(P, op->loc, "division by zero");
    v = *op->p == '*' ? v * r : v / r;
  }
  return v;
}

static double fexpr(parser *P) {
  bc_loc loc = peek(P)->loc;
  double v = fterm(P);
  while (at(P, "+") || at(P, "-")) {
    bc_token *op = next(P);
    double r = fterm(P);
    v = *op->p == '+' ? v + r : v - r;
  }
  if (!isfinite(v)) error_at(P, loc, "expression is not a finite number");
  return v;
}

// --- parameter paths --------------------------------------------------------
//
//   path = segment { "." segment }
//   segment = IDENT | INT | "{" iexpr "}"
//
// The result is prefixed with the enclosing `as` paths, PyTorch style:
// `for i in 0..N as layers.{i}` + `params=self_attn` -> "layers.3.self_attn".

static const char *path(parser *P) {
  char buf[BC_MAX_PARAM_NAME + 1];
  size_t n = 0;
  bc_loc start = peek(P)->loc;
  for (;;) {
    bc_token *t = peek(P);
    char seg[32];
    const char *s = NULL;
    size_t len = 0;
    if (t->kind == BC_TK_IDENT) {  // keywords too: BERT names `attention.output.dense`
      s = t->p;
      len = (size_t)t->len;
      next(P);
    } else if (t->kind == BC_TK_INT) {
      snprintf(seg, sizeof seg, "%lld", (long long)t->ival);
      s = seg, len = strlen(seg);
      next(P);
    } else if (at(P, "{")) {
      next(P);
      int64_t v = iexpr(P);
      expect(P, "}", "to close '{' in a parameter path");
      snprintf(seg, sizeof seg, "%lld", (long long)v);
      s = seg, len = strlen(seg);
    } else {
      error_at(P, t->loc, "expected a parameter path (like layers.{i}.self_attn), found %s",
               tok_desc(P, t));
    }
    if (n + len + 1 > BC_MAX_PARAM_NAME)
      error_at(P, start, "parameter path is longer than %d characters", BC_MAX_PARAM_NAME);
    if (n) buf[n++] = '.';
    memcpy(buf + n, s, len);
    n += len;
    if (!at(P, ".")) break;
    next(P);
  }
  buf[n] = '\0';
  if (!P->prefix[0]) return bc_strdup(P->ctx, buf);
  if (strlen(P->prefix) + 1 + n > BC_MAX_PARAM_NAME)
    error_at(P, start, "parameter name '%s.%s' is longer than %d characters", P->prefix, buf,
             BC_MAX_PARAM_NAME);
  return bc_fmt(P->ctx, "%s.%s", P->prefix, buf);
}

// --- node calls --------------------------------------------------------------

// Ops, their positional inputs and their attributes come from the table
// in ir.c (bcI_op_info); attributes are found by name, never by position.

// Parsed attribute values of one call (ops.h).
typedef bcP_attr_vals attr_vals;

static int nattrs(const bc_op_info *info) {
  int n = 0;
  while (n < BC_MAX_ATTRS && info->attrs[n].name) n++;
  return n;
}

static int attr_index(const bc_op_info *info, const char *name) {
  for (int i = 0; i < nattrs(info); i++)
    if (strcmp(info->attrs[i].name, name) == 0) return i;
  return -1;
}

// The slot of an attribute build_node knows the op has (a table bug otherwise).
static int ax(parser *P, const bc_op_info *info, const char *name) {
  int k = attr_index(info, name);
  if (k < 0) {
    bc_error(P->ctx, BC_EINTERNAL, "internal error: op %s has no attribute '%s'", info->name, name);
    bail(P);
  }
  return k;
}

static const char *attr_list(parser *P, const bc_op_info *info) {
  const char *s = "";
  for (int i = 0; i < nattrs(info); i++)
    s = bc_fmt(P->ctx, "%s%s%s", s, i ? ", " : "", info->attrs[i].name);
  return s;
}

static int parse_value(parser *P);

// A float attribute: finite, and representable in float32, in which the
// compiled code computes (a constant it cannot represent would make the
// compiled graph differ from the reference).
static double float_attr(parser *P, const char *name, bc_loc loc) {
  double v = fexpr(P);
  if (fabs(v) > FLT_MAX)
    error_at(P, loc, "%s=%g does not fit in float32 (largest %g)", name, v, (double)FLT_MAX);
  if (v != 0 && (float)v == 0)
    error_at(P, loc, "%s=%g underflows float32 to 0 (smallest positive %g)", name, v,
             (double)FLT_TRUE_MIN);
  return v;
}

static void parse_attr_value(parser *P, const bc_op_info *info, int k, attr_vals *av) {
  bc_token *t = peek(P);
  const char *name = info->attrs[k].name;
  av->loc[k] = t->loc;
  switch (info->attrs[k].type) {
  case BC_AT_INT: av->ival[k] = size_expr(P, name); break;
  case BC_AT_FLOAT: av->fval[k] = float_attr(P, name, t->loc); break;
  case BC_AT_BOOL:
    if (!at(P, "true") && !at(P, "false"))
      error_at(P, t->loc, "%s must be true or false, found %s", name, tok_desc(P, t));
    av->bval[k] = at(P, "true");
    next(P);
    break;
  case BC_AT_ACT: {
    const char *a = tok_str(P, t);
    for (int i = 0; i < BC_ACT_COUNT; i++)
      if (t->kind == BC_TK_IDENT && strcmp(a, bcI_act_name((bc_act)i)) == 0) {
        av->act[k] = (bc_act)i;
        next(P);
        return;
      }
    error_at(P, t->loc, "unknown activation %s (expected relu, gelu, gelu_tanh, swiglu, geglu or "
             "geglu_tanh)",
             tok_desc(P, t));
  }
  case BC_AT_LAYOUT:
    if (!at(P, "out_in") && !at(P, "in_out"))
      error_at(P, t->loc, "layout must be out_in (PyTorch Linear, the default) or in_out "
               "(GPT-2 Conv1D), found %s", tok_desc(P, t));
    av->bval[k] = at(P, "in_out");
    next(P);
    break;
  case BC_AT_PATH: av->path[k][0] = path(P); break;
  case BC_AT_PATH2:
    if (!at(P, "("))
      error_at(P, t->loc, "%s of %s takes two paths: (linear1, linear2)", name, info->name);
    next(P);
    av->path[k][0] = path(P);
    expect(P, ",", "between the two parameter paths");
    av->path[k][1] = path(P);
    expect(P, ")", "after the two parameter paths");
    break;
  case BC_AT_VALUE: av->ival[k] = parse_value(P); break;
  case BC_AT_SHAPE: {  // "[" iexpr { "," iexpr } "]", fixed sizes
    expect_named(P, "[", "to start %s= (a shape like [D] or [T, D])", name);
    bc_shape *sh = &av->shape[k];
    *sh = (bc_shape){.rank = 0};
    for (;;) {
      if (sh->rank == BC_MAX_RANK)
        error_at(P, peek(P)->loc, "%s= has more than %d axes", name, BC_MAX_RANK);
      sh->d[sh->rank++] = size_expr(P, "a parameter dimension");
      if (!at(P, ",")) break;
      next(P);
    }
    bc_token *rb = expect(P, "]", "to close the shape");
    if (rb->loc.line == t->loc.line) av->loc[k].len = rb->loc.col + rb->len - t->loc.col;
    break;
  }
  case BC_AT_WORD:  // the op's build checks it against its choices
    if (t->kind != BC_TK_IDENT)
      error_at(P, t->loc, "%s of %s takes a word (like %s=learned), found %s", name, info->name,
               name, tok_desc(P, t));
    av->word[k] = tok_str(P, t);
    next(P);
    break;
  }
}

// --- init overrides ------------------------------------------------------------
//
//   arg      = "init" [ "." selector ] "=" initval
//   selector = IDENT [ "." IDENT ]            (* "o", "down.bias": the op's init_sel *)
//   initval  = "zeros" | "ones" | "normal" "(" fexpr ")" | "uniform" "(" fexpr ")"
//            | ( "xavier" | "xavier_normal" ) [ "(" fexpr ")" ]
//
// `init=` sets every weight of the node (each parameter slot whose selector
// is not a bias); `init.SEL=` one slot, and wins over `init=` there.  They
// are collected while the call is parsed and given to the parameters once
// the op's build has made them (apply_inits).

#define MAX_CALL_INITS 16
#define INIT_ARG_MAX 1e37  // times Box-Muller's largest |z| (8.6) stays a finite float

typedef struct {
  const char *sel;     // "" for init=
  bc_loc sel_loc;      // the `init` ... selector tokens
  bc_init spec;
} init_req;

typedef struct {
  init_req r[MAX_CALL_INITS];
  int n;
} init_list;

static const char *const init_schemes[] = {"zeros", "ones", "normal", "uniform", "xavier",
                                           "xavier_normal", "const"};

// "(" fexpr ")" of a scheme: positive, finite, at most INIT_ARG_MAX.
static double init_arg(parser *P, const bc_token *st, const char *what) {
  expect_named(P, "(", "after '%s' (it takes one argument)", tok_str(P, st));
  bc_loc loc = peek(P)->loc;
  if (at(P, ")")) error_at(P, loc, "%.*s(...) takes one argument (%s), found none", st->len, st->p, what);
  double v = fexpr(P);
  bc_token *last = &P->tok[P->pos - 1];
  if (last->loc.line == loc.line && last->loc.col >= loc.col)
    loc.len = last->loc.col + last->len - loc.col;
  if (at(P, ","))
    error_at(P, peek(P)->loc, "%.*s(...) takes one argument (%s), found more", st->len, st->p, what);
  expect_named(P, ")", "to close %s(", tok_str(P, st));
  if (!(v > 0))
    error_at(P, loc, "%.*s: %s must be positive, got %g%s", st->len, st->p, what, v,
             v == 0 ? " (init=zeros sets zeros)" : "");
  if (v > INIT_ARG_MAX)
    error_at(P, loc, "%.*s: %s is %g, over the limit of %g (the values must be finite floats)",
             st->len, st->p, what, v, INIT_ARG_MAX);
  return v;
}

static bc_init init_value(parser *P) {
  bc_token *t = peek(P);
  int k = -1;
  for (int i = 0; t->kind == BC_TK_IDENT && i < (int)(sizeof init_schemes / sizeof *init_schemes); i++)
    if (bcL_is(t, init_schemes[i])) k = i;
  if (k < 0)
    error_at(P, t->loc, "unknown init scheme %s%s; init= takes zeros, ones, const(c), normal(std), "
             "uniform(a), xavier, xavier(gain) or xavier_normal(gain)", tok_desc(P, t),
             t->kind == BC_TK_IDENT ? suggest(P, tok_str(P, t), init_schemes,
                                              (int)(sizeof init_schemes / sizeof *init_schemes)) : "");
  next(P);
  bc_init in = {.kind = (bc_init_kind)(BC_INIT_ZEROS + k), .arg = 1.0, .loc = t->loc};
  switch (in.kind) {
  case BC_INIT_ZEROS: case BC_INIT_ONES:
    in.arg = 0;
    if (at(P, "("))
      error_at(P, peek(P)->loc, "%.*s takes no argument", t->len, t->p);
    break;
  case BC_INIT_NORMAL: in.arg = init_arg(P, t, "the standard deviation"); break;
  case BC_INIT_UNIFORM: in.arg = init_arg(P, t, "the bound a of U(-a, a)"); break;
  case BC_INIT_CONST: {  // any finite float32 value, 0 and negatives included
    expect_named(P, "(", "after '%s' (it takes one argument: the value)", tok_str(P, t));
    bc_loc loc = peek(P)->loc;
    if (at(P, ")")) error_at(P, loc, "const(...) takes one argument (the value), found none");
    in.arg = float_attr(P, "const", loc);
    if (at(P, ","))
      error_at(P, peek(P)->loc, "const(...) takes one argument (the value), found more");
    expect_named(P, ")", "to close %s(", tok_str(P, t));
    break;
  }
  default:  // xavier, xavier_normal: an optional gain
    if (at(P, "(")) in.arg = init_arg(P, t, "the gain");
    break;
  }
  bc_token *last = &P->tok[P->pos > 0 ? P->pos - 1 : 0];
  if (last->loc.line == in.loc.line && last->loc.col >= in.loc.col)
    in.loc.len = last->loc.col + last->len - in.loc.col;
  return in;
}

// `init` [ "." selector ] "=" initval, the `init` token at the cursor.
static void parse_init(parser *P, const bc_op_info *info, bool has_params, init_list *il) {
  bc_token *t = next(P);
  if (!has_params)
    error_at(P, t->loc, "%s has no parameters: init= sets the initial values of a node's "
             "weights", info->name);
  const char *sel = "";
  bc_loc loc = t->loc;
  if (at(P, ".")) {
    next(P);
    sel = tok_str(P, expect_name(P, "an init selector after 'init.' (like init.o)"));
    if (at(P, ".")) {
      next(P);
      sel = bc_fmt(P->ctx, "%s.%s", sel, tok_str(P, expect_name(P, "'bias' after the selector")));
    }
    bc_token *last = &P->tok[P->pos - 1];
    if (last->loc.line == loc.line) loc.len = last->loc.col + last->len - loc.col;
  }
  for (int i = 0; i < il->n; i++)
    if (!strcmp(il->r[i].sel, sel))
      error_at(P, loc, "init%s%s= given twice", sel[0] ? "." : "", sel);
  if (il->n == MAX_CALL_INITS)
    error_at(P, loc, "more than %d init= arguments in one call", MAX_CALL_INITS);
  expect(P, "=", "after the init selector");
  il->r[il->n].sel = sel;
  il->r[il->n].sel_loc = loc;
  il->r[il->n].spec = init_value(P);
  il->n++;
}

// Block j of n that init.SEL= may name (the row's init_part), or false.
static bool init_part(parser *P, const bc_node *n, int j, bc_init_part *b) {
  const bc_op_def *d = bcT_def(n->op);
  return d && d->init_part && d->init_part(P->g, n, j, b);
}

// "init, init.qkv, init.qkv.bias, ..., init.q, ...": what n's slots and blocks take.
static const char *init_choices(parser *P, const bc_node *n) {
  const char *s = "init";
  for (int k = 0; k < BC_MAX_NODE_PARAMS; k++) {
    const char *sel = n->param[k] >= 0 ? bcT_init_sel(n, k) : NULL;
    if (sel) s = bc_fmt(P->ctx, "%s, init.%s", s, sel);
  }
  bc_init_part b;
  for (int j = 0; init_part(P, n, j, &b); j++)
    s = bc_fmt(P->ctx, "%s, init.%s", s, b.sel);
  return s;
}

// The slot of n that init.SEL names, or -1 (a block's: *part set to it).
static int init_slot(parser *P, const bc_node *n, const init_req *r, int *part, bc_init_part *b) {
  *part = -1;
  for (int k = 0; k < BC_MAX_NODE_PARAMS; k++) {
    const char *sel = n->param[k] >= 0 ? bcT_init_sel(n, k) : NULL;
    if (sel && !strcmp(sel, r->sel)) return k;
  }
  for (int j = 0; init_part(P, n, j, b); j++)
    if (!strcmp(b->sel, r->sel)) {
      *part = j;
      return b->slot;
    }
  return -1;
}

static bool is_bias_sel(const char *sel) {
  size_t n = strlen(sel);
  return !strcmp(sel, "bias") || (n > 5 && !strcmp(sel + n - 5, ".bias"));
}

// init.SEL= that n does not take: the choices, and a near miss.
static _Noreturn void unknown_sel(parser *P, const bc_op_info *info, const bc_node *n,
                                  const init_req *r) {
  const char *cands[BC_MAX_NODE_PARAMS + 3];
  int nc = 0;
  for (int k = 0; k < BC_MAX_NODE_PARAMS; k++) {
    const char *sel = n->param[k] >= 0 ? bcT_init_sel(n, k) : NULL;
    if (sel) cands[nc++] = sel;
  }
  bc_init_part b;
  for (int j = 0; init_part(P, n, j, &b); j++) cands[nc++] = b.sel;
  error_at(P, r->sel_loc, "unknown init selector '%s' for this %s%s; it takes %s", r->sel,
           info->name, suggest(P, r->sel, cands, nc), init_choices(P, n));
}

static bool is_xavier(const bc_init *in) {
  return in->kind == BC_INIT_XAVIER || in->kind == BC_INIT_XAVIER_NORMAL;
}

// Sets *have (a parameter's override, or one of its blocks') to *in, unless
// another call gave it a different one (a tied or shared name): an error.
static void give_init(parser *P, const bc_param *p, const char *block, bc_init *have,
                      const bc_init *in) {
  char a[64], b[96];
  if (is_xavier(in) && p->shape.rank < 2)
    error_at(P, in->loc, "%s needs a matrix (it is sized by fan_in + fan_out): '%s' is %s",
             bcW_init_str(in, a, sizeof a), p->name, bc_shape_str(&p->shape, b, sizeof b));
  if (have->kind != BC_INIT_NONE && (have->kind != in->kind || have->arg != in->arg)) {
    bc_error_at(P->ctx, in->loc, "parameter '%s'%s gets init=%s here but init=%s earlier (a "
                "shared parameter has one initialisation)", p->name, block,
                bcW_init_str(in, a, sizeof a), bcW_init_str(have, b, sizeof b));
    bc_note_at(P->ctx, have->loc, "its init is given here");
    bail(P);
  }
  if (have->kind == BC_INIT_NONE) *have = *in;
}

// Gives the call's overrides to n's parameters: init= to every non-bias
// slot, then each init.SEL= to its slot (or block of a packed matrix).
static void apply_inits(parser *P, const bc_op_info *info, bc_node *n, const init_list *il) {
  if (!il->n) return;
  const init_req *by[BC_MAX_NODE_PARAMS] = {NULL};
  bool any = false;
  for (int k = 0; k < BC_MAX_NODE_PARAMS; k++) any |= n->param[k] >= 0 && bcT_init_sel(n, k);
  if (!any)
    error_at(P, il->r[0].sel_loc, "this %s has no parameters (%s): init= has nothing to set",
             info->name, n->op == BC_OP_POSITIONS ? "kind=sinusoidal" : "affine=false");
  for (int i = 0; i < il->n; i++) {  // init.SEL= first: it wins over init= on its slot
    if (!il->r[i].sel[0]) continue;
    int part;
    bc_init_part b;
    int k = init_slot(P, n, &il->r[i], &part, &b);
    if (k < 0) unknown_sel(P, info, n, &il->r[i]);
    if (part < 0) {
      by[k] = &il->r[i];
      continue;
    }
    bc_param *p = &P->g->params[n->param[k]];
    part %= 3;  // q, k, v: of the packed matrix or (init.q.bias, ...) of its bias
    give_init(P, p, bc_fmt(P->ctx, " (block %s)", b.sel), &p->part[part], &il->r[i].spec);
    p->part_at[part] = b.at, p->part_n[part] = b.len, p->part_cols = b.cols;
  }
  for (int i = 0; i < il->n; i++) {
    if (il->r[i].sel[0]) continue;
    for (int k = 0; k < BC_MAX_NODE_PARAMS; k++) {
      const char *sel = n->param[k] >= 0 ? bcT_init_sel(n, k) : NULL;
      if (sel && !is_bias_sel(sel) && !by[k]) by[k] = &il->r[i];
    }
  }
  for (int k = 0; k < BC_MAX_NODE_PARAMS; k++) {
    if (!by[k]) continue;
    bc_param *p = &P->g->params[n->param[k]];
    give_init(P, p, "", &p->init, &by[k]->spec);
  }
}

// Parses "(" args ")" of a call to `info`; fills positional value ids.
static void parse_args(parser *P, const bc_op_info *info, const bc_token *optok, int *pos,
                       bc_loc *posloc, attr_vals *av, bool has_params, init_list *il) {
  int npos = 0;
  bool seen_attr = false;
  expect_named(P, "(", "after '%s'", info->name);
  while (!at(P, ")")) {
    bc_token *t = peek(P);
    if (bcL_is(t, "init") && (bcL_is(peek2(P), "=") || bcL_is(peek2(P), "."))) {
      parse_init(P, info, has_params, il);
      seen_attr = true;
    } else if (t->kind == BC_TK_IDENT && bcL_is(peek2(P), "=")) {
      const char *name = tok_str(P, t);
      int k = attr_index(info, name);
      if (k < 0) {
        const char *cands[BC_MAX_ATTRS];
        int n = nattrs(info);
        for (int i = 0; i < n; i++) cands[i] = info->attrs[i].name;
        error_at(P, t->loc, "unknown attribute '%s' for %s%s; %s takes: %s%s", name, info->name,
                 suggest(P, name, cands, n), info->name, attr_list(P, info),
                 has_params ? ", init" : "");
      }
      if (av->have[k]) error_at(P, t->loc, "attribute '%s' given twice", name);
      next(P);
      next(P);
      parse_attr_value(P, info, k, av);
      av->have[k] = true;
      seen_attr = true;
    } else {
      if (seen_attr) error_at(P, t->loc, "positional argument after attributes");
      if (npos == info->npos)
        error_at(P, t->loc, "%s takes %d input%s, found more", info->name, info->npos,
                 info->npos == 1 ? "" : "s");
      posloc[npos] = t->loc;
      pos[npos++] = parse_value(P);
    }
    if (!at(P, ",")) break;
    next(P);
  }
  expect_named(P, ")", "to close the call to %s", info->name);
  if (npos < info->npos)
    error_at(P, optok->loc, "%s takes %d input%s, found %d", info->name, info->npos,
             info->npos == 1 ? "" : "s", npos);
  for (int k = 0; k < nattrs(info); k++)
    if (info->attrs[k].required && !av->have[k])
      error_at(P, optok->loc, "%s needs the attribute '%s'", info->name, info->attrs[k].name);
}

static int64_t checked_numel(parser *P, bc_loc loc, const bc_shape *s, const char *what) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++)
    if (__builtin_mul_overflow(n, s->d[i], &n) || n > BC_MAX_ELEMS) {
      char buf[96];
      error_at(P, loc, "%s %s has more than %lld elements (the limit)", what,
               bc_shape_str(s, buf, sizeof buf), (long long)BC_MAX_ELEMS);
    }
  return n;
}

static int add_param(parser *P, const char *base, const char *suffix, bc_shape s, bc_loc loc) {
  const char *name = bc_fmt(P->ctx, "%s.%s", base, suffix);
  checked_numel(P, loc, &s, bc_fmt(P->ctx, "parameter '%s' of shape", name));
  int id = bcI_add_param(P->g, name, s, loc);
  if (id < 0) bail(P);
  return id;
}

int bcP_add_param(parser *P, const char *name, bc_shape s, bc_loc loc) {
  checked_numel(P, loc, &s, bc_fmt(P->ctx, "parameter '%s' of shape", name));
  int id = bcI_add_param(P->g, name, s, loc);
  if (id < 0) bail(P);
  return id;
}

static bc_shape vec(int64_t a) { return (bc_shape){.rank = 1, .d = {a}}; }
static bc_shape mat(int64_t a, int64_t b) { return (bc_shape){.rank = 2, .d = {a, b}}; }

// "[1, T<=128, 512]": a shape with its run-time dims named.
static const char *shape_desc(parser *P, const bc_shape *s);
bc_graph *bcP_graph(parser *P) { return P->g; }
const char *bcP_shape_desc(parser *P, const bc_shape *s) { return shape_desc(P, s); }
int bcP_attr(parser *P, const bc_op_info *info, const char *name) { return ax(P, info, name); }
static int64_t checked_numel(parser *P, bc_loc loc, const bc_shape *s, const char *what);
static void check_fixed_width(parser *P, const bc_op_info *info, const bc_shape *in, bc_loc loc,
                              const char *param);
static void linear_params(parser *P, bc_node *n, int w, int b, const char *base, int64_t out,
                          int64_t in, bool bias, bc_loc loc);
static bool flag(parser *P, const bc_op_info *info, const attr_vals *av, const char *name, bool dflt);
int64_t bcP_checked_numel(parser *P, bc_loc loc, const bc_shape *s, const char *what) {
  return checked_numel(P, loc, s, what);
}
void bcP_check_fixed_width(parser *P, const bc_op_info *info, const bc_shape *in, bc_loc loc,
                           const char *param) {
  check_fixed_width(P, info, in, loc, param);
}
void bcP_linear_params(parser *P, bc_node *n, int w, int b, const char *base, int64_t out,
                       int64_t in, bool bias, bc_loc loc) {
  linear_params(P, n, w, b, base, out, in, bias, loc);
}
bool bcP_flag(parser *P, const bc_op_info *info, const attr_vals *av, const char *name, bool dflt) {
  return flag(P, info, av, name, dflt);
}

void bcP_error_at(parser *P, bc_loc loc, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  error_at(P, loc, "%s", msg);
}

static const char *shape_desc(parser *P, const bc_shape *s) {
  const char *r = "[";
  for (int i = 0; i < s->rank; i++) {
    const char *e = s->sym[i] ? bc_fmt(P->ctx, "%s<=%lld", P->g->dims[s->sym[i] - 1].name,
                                       (long long)s->d[i])
                              : bc_fmt(P->ctx, "%lld", (long long)s->d[i]);
    r = bc_fmt(P->ctx, "%s%s%s", r, i ? ", " : "", e);
  }
  return bc_fmt(P->ctx, "%s]", r);
}

// Positional inputs are float activations; lengths only go to lengths=,
// token ids only to Embedding (input 0) and CrossEntropy (input 1, targets).
static void check_float(parser *P, const bc_op_info *info, int v, bc_loc loc) {
  const bc_value *val = &P->g->vals[v];
  if (val->type != BC_VT_F32 && val->tokens)
    error_at(P, loc, "'%s' is a tokens input (int32 ids): only Embedding reads token ids, "
             "and CrossEntropy its targets (%s takes float values; use Embedding(%s, vocab=V, dim=D, params=wte) first)",
             val->name, info->name, val->name);
  if (val->type != BC_VT_F32)
    error_at(P, loc, "'%s' is a lengths input: it can only be passed as lengths= or kv_lengths= "
             "of an Attention", val->name);
  if (val->shape.rank == 0)
    error_at(P, loc, "'%s' is a scalar (a loss): it can only be a graph output, not an input "
             "of %s", val->name && val->name[0] ? val->name : "the loss", info->name);
}

// Input 0 of a tokens op (Embedding), input 1 of a targets op (CrossEntropy): a tokens input.
static void check_tokens(parser *P, const bc_op_info *info, int v, bc_loc loc, bool targets) {
  const bc_value *val = &P->g->vals[v];
  if (val->type == BC_VT_I32 && val->tokens) {
    // One tokens input is ids (Embedding) or targets (CrossEntropy), never both:
    // targets may hold ignore_index, which no embedding row answers.
    for (int i = 0; i < P->g->nnodes; i++) {
      const bc_node *n = &P->g->nodes[i];
      const bc_op_def *d = bcT_def(n->op);
      if ((targets && d->tokens && n->in[0] == v) || (!targets && d->targets && n->in[1] == v))
        error_at(P, loc, "'%s' is already read as %s by %s: one tokens input is either ids "
                 "(Embedding) or targets (CrossEntropy); declare another input", val->name,
                 targets ? "ids" : "targets", bcI_op_name(n->op));
    }
    return;
  }
  error_at(P, loc, "%s reads token ids: '%s' is %s %s; declare `input %s : tokens[B, T]`",
           info->name, val->name && val->name[0] ? val->name : "its input",
           val->type == BC_VT_I32 ? "a lengths input" : "a float value",
           shape_desc(P, &val->shape), val->name && val->name[0] ? val->name : "ids");
}

// Batch axis of a [B, T, D] or [T, D] value, as a rank-1 shape [B].
static bc_shape batch_of(const bc_shape *s) {
  bc_shape b = {.rank = 1, .d = {1}};
  if (s->rank == 3) b.d[0] = s->d[0], b.sym[0] = s->sym[0];
  return b;
}

// lengths=/kv_lengths=: a lengths input with one entry per batch row of `of`.
static void check_lengths(parser *P, const char *attr, int v, bc_loc loc, const bc_shape *of,
                          const char *of_what) {
  const bc_value *val = &P->g->vals[v];
  if (val->type != BC_VT_I32 || val->tokens)
    error_at(P, loc, "%s= takes a lengths input (input len : lengths[B]); '%s' is a %s %s",
             attr, val->name, val->tokens ? "tokens input" : "float value",
             shape_desc(P, &val->shape));
  bc_shape want = batch_of(of);
  if (!bc_shape_eq(&val->shape, &want))
    error_at(P, loc, "%s=%s has shape %s, but %s has %s batch rows: lengths need one entry per row",
             attr, val->name, shape_desc(P, &val->shape), of_what, shape_desc(P, &want));
}

// Nodes with parameters are sized by their input's last axis: it must be fixed.
static void check_fixed_width(parser *P, const bc_op_info *info, const bc_shape *in, bc_loc loc,
                              const char *param) {
  int r = in->rank - 1;
  if (r >= 0 && in->sym[r])
    error_at(P, loc, "%s: %s would be sized by run-time dim '%s'; run-time dims can only be batch "
             "or sequence axes", info->name, param ? bc_fmt(P->ctx, "parameter '%s'", param)
                                                   : "the row width",
             P->g->dims[in->sym[r] - 1].name);
}

// A weight matrix of a node: (out, in) as PyTorch's Linear, or (in, out)
// with layout=in_out.
static bc_shape wmat(bool in_out, int64_t out, int64_t in) {
  return in_out ? mat(in, out) : mat(out, in);
}

// BASE.weight into slot w and, unless bias=false, BASE.bias into slot b.
static void linear_params(parser *P, bc_node *n, int w, int b, const char *base, int64_t out,
                          int64_t in, bool bias, bc_loc loc) {
  n->param[w] = add_param(P, base, "weight", wmat(n->in_out, out, in), loc);
  if (bias) n->param[b] = add_param(P, base, "bias", vec(out), loc);
}

// The value of a boolean attribute, or its default.
static bool flag(parser *P, const bc_op_info *info, const attr_vals *av, const char *name, bool dflt) {
  int k = ax(P, info, name);
  return av->have[k] ? av->bval[k] : dflt;
}

static bool have(parser *P, const bc_op_info *info, const attr_vals *av, const char *name) {
  return av->have[ax(P, info, name)];
}

static const char *path_of(parser *P, const bc_op_info *info, const attr_vals *av, const char *name) {
  return av->path[ax(P, info, name)][0];
}

static bc_loc loc_of(parser *P, const bc_op_info *info, const attr_vals *av, const char *name) {
  return av->loc[ax(P, info, name)];
}

// What op files use (ops.h): the three above.
bool bcP_have(parser *P, const bc_op_info *info, const attr_vals *av, const char *name) {
  return have(P, info, av, name);
}
const char *bcP_path_of(parser *P, const bc_op_info *info, const attr_vals *av, const char *name) {
  return path_of(P, info, av, name);
}
bc_loc bcP_loc_of(parser *P, const bc_op_info *info, const attr_vals *av, const char *name) {
  return loc_of(P, info, av, name);
}

// Attention's projections in one of three spellings: params=P (PyTorch's
// nn.MultiheadAttention), qkv=P o=O (one packed projection, GPT-2's c_attn),
// or q=, k=, v=, o= (separate projections, BERT and LLaMA).
static void attention_params(parser *P, const bc_op_info *info, bc_node *n, const bc_token *optok,
                             const attr_vals *av, int64_t D, int64_t qd, int64_t kvd) {
  bool bias = flag(P, info, av, "bias", true);
  bool mha = have(P, info, av, "params"), packed = have(P, info, av, "qkv");
  bool sep = have(P, info, av, "q") || have(P, info, av, "k") || have(P, info, av, "v");
  if (mha + packed + sep != 1)
    error_at(P, optok->loc, "Attention takes its projections as params=P (nn.MultiheadAttention "
             "names), qkv=P with o=O (one packed projection), or q=, k=, v=, o= (separate)%s",
             (mha + packed + sep) ? "; not a mix of them" : "");
  if (mha && have(P, info, av, "o"))
    error_at(P, loc_of(P, info, av, "o"), "o= goes with qkv= or q=/k=/v=; params=P already names "
             "P.out_proj");
  if (mha && n->in_out)
    error_at(P, loc_of(P, info, av, "layout"), "layout=in_out does not apply to params= "
             "(nn.MultiheadAttention stores (out, in)); use qkv= and o=");
  if (D > BC_MAX_DIM / 3)
    error_at(P, optok->loc, "model width %lld is too large for a packed QKV projection",
             (long long)D);
  if (qd != D && (mha || packed))
    error_at(P, loc_of(P, info, av, "head_dim"), "head_dim=%lld with heads=%lld makes the query "
             "projection %lld wide, not D=%lld; a packed projection (%s=) needs head_dim = D/heads; "
             "give separate projections q=, k=, v=, o= (Hugging Face's q_proj, k_proj, v_proj, o_proj)",
             (long long)(qd / n->heads), (long long)n->heads, (long long)qd, (long long)D,
             mha ? "params" : "qkv");
  if (mha) {
    const char *p = path_of(P, info, av, "params");
    bc_loc pl = loc_of(P, info, av, "params");
    n->param[0] = add_param(P, p, "in_proj_weight", mat(D + 2 * kvd, D), pl);
    if (bias) n->param[1] = add_param(P, p, "in_proj_bias", vec(D + 2 * kvd), pl);
    n->param[2] = add_param(P, p, "out_proj.weight", mat(D, D), pl);
    if (bias) n->param[3] = add_param(P, p, "out_proj.bias", vec(D), pl);
    return;
  }
  if (!have(P, info, av, "o")) error_at(P, optok->loc, "Attention needs o=NAME (the output projection)");
  if (packed) {
    linear_params(P, n, 0, 1, path_of(P, info, av, "qkv"), D + 2 * kvd, D, bias,
                  loc_of(P, info, av, "qkv"));
  } else {
    const char *miss = !have(P, info, av, "q") ? "q" : !have(P, info, av, "k") ? "k"
                       : !have(P, info, av, "v") ? "v" : NULL;
    if (miss) error_at(P, optok->loc, "Attention with separate projections needs q=, k= and v= "
                       "(%s= is missing)", miss);
    linear_params(P, n, 0, 1, path_of(P, info, av, "q"), qd, D, bias, loc_of(P, info, av, "q"));
    linear_params(P, n, 4, 5, path_of(P, info, av, "k"), kvd, D, bias, loc_of(P, info, av, "k"));
    linear_params(P, n, 6, 7, path_of(P, info, av, "v"), kvd, D, bias, loc_of(P, info, av, "v"));
  }
  linear_params(P, n, 2, 3, path_of(P, info, av, "o"), D, qd, bias, loc_of(P, info, av, "o"));
}

// The path beside p: "a.b.q_proj" -> "a.b.<name>" ("<name>" when p has no
// dot), where Hugging Face saves q_norm / k_norm next to the projections.
static const char *sibling_path(parser *P, const char *p, const char *name) {
  const char *dot = strrchr(p, '.');
  if (!dot) return name;
  return bc_fmt(P->ctx, "%.*s.%s", (int)(dot - p), p, name);
}

// Issue 23's options: QK-norm, sliding window, score soft-cap, query scale,
// head scales; their parameters come after the projections' (slots 8..12).
static void attention_options(parser *P, const bc_op_info *info, bc_node *n, const attr_vals *av,
                              int64_t dh, int64_t H, int64_t kvd) {
  int64_t qd = H * dh;
  bool mha = have(P, info, av, "params"), packed = have(P, info, av, "qkv");
  // The attention's own prefix: params=P itself, or beside its projections.
  const char *qbase = mha ? path_of(P, info, av, "params")
                          : path_of(P, info, av, packed ? "qkv" : "q");
  bc_loc ql = loc_of(P, info, av, mha ? "params" : packed ? "qkv" : "q");
  int kq = ax(P, info, "qk_norm");
  if (av->have[kq]) {
    const char *w = av->word[kq];
    if (!strcmp(w, "rms")) n->qk_norm = 1;
    else if (!strcmp(w, "layernorm")) n->qk_norm = 2;
    else
      error_at(P, av->loc[kq], "unknown qk_norm '%s'; choices are rms (RMSNorm, Qwen3 and OLMo 2) "
               "and layernorm", w);
  }
  static const char *const needs[] = {"qk_norm_per_head", "q_norm", "k_norm", "qk_norm_eps"};
  for (int i = 0; i < 4; i++)
    if (!n->qk_norm && have(P, info, av, needs[i]))
      error_at(P, loc_of(P, info, av, needs[i]), "%s= needs qk_norm=rms or qk_norm=layernorm",
               needs[i]);
  if (n->qk_norm) {
    n->qk_norm_per_head = flag(P, info, av, "qk_norm_per_head", true);
    n->qk_norm_eps = n->qk_norm == 1 ? 1e-6 : 1e-5;
    int ke = ax(P, info, "qk_norm_eps");
    if (av->have[ke]) {
      if (!(av->fval[ke] > 0) || !isfinite(av->fval[ke]))
        error_at(P, av->loc[ke], "qk_norm_eps must be positive, got %g", av->fval[ke]);
      n->qk_norm_eps = av->fval[ke];
    }
    const char *qn = have(P, info, av, "q_norm") ? path_of(P, info, av, "q_norm")
                     : mha ? bc_fmt(P->ctx, "%s.q_norm", qbase) : sibling_path(P, qbase, "q_norm");
    const char *kn = have(P, info, av, "k_norm") ? path_of(P, info, av, "k_norm")
                     : mha ? bc_fmt(P->ctx, "%s.k_norm", qbase) : sibling_path(P, qbase, "k_norm");
    bc_loc qnl = have(P, info, av, "q_norm") ? loc_of(P, info, av, "q_norm") : ql;
    bc_loc knl = have(P, info, av, "k_norm") ? loc_of(P, info, av, "k_norm") : ql;
    int64_t wq = n->qk_norm_per_head ? dh : qd, wk = n->qk_norm_per_head ? dh : kvd;
    n->param[8] = add_param(P, qn, "weight", vec(wq), qnl);
    if (n->qk_norm == 2) n->param[9] = add_param(P, qn, "bias", vec(wq), qnl);
    n->param[10] = add_param(P, kn, "weight", vec(wk), knl);
    if (n->qk_norm == 2) n->param[11] = add_param(P, kn, "bias", vec(wk), knl);
  }
  int kw = ax(P, info, "window");
  if (av->have[kw]) {
    if (av->ival[kw] < 0)
      error_at(P, av->loc[kw], "window=%lld is negative (a sliding window of W keys: query i sees "
               "keys i-W < j <= i; 0: no window)", (long long)av->ival[kw]);
    if (av->ival[kw] > 0 && !n->causal)
      error_at(P, av->loc[kw], "window= needs causal=true (a sliding-window causal mask)");
    if (av->ival[kw] > INT32_MAX)
      error_at(P, av->loc[kw], "window=%lld is too large", (long long)av->ival[kw]);
    n->window = av->ival[kw];
  }
  int kc = ax(P, info, "softcap");
  if (av->have[kc]) {
    if (!(av->fval[kc] > 0) || !isfinite(av->fval[kc]))
      error_at(P, av->loc[kc], "softcap=%g must be a positive finite number (the scores become "
               "c * tanh(s / c))", av->fval[kc]);
    n->softcap = av->fval[kc];
  }
  int ks = ax(P, info, "scale");
  if (av->have[ks]) {
    if (!(av->fval[ks] > 0) || !isfinite(av->fval[ks]))
      error_at(P, av->loc[ks], "scale=%g must be a positive finite number (the factor of q.k, "
               "default 1/sqrt(head width))", av->fval[ks]);
    n->scale = av->fval[ks];
  }
  n->head_scale = flag(P, info, av, "head_scale", false);
  if (n->head_scale) {
    const char *hb = mha ? qbase : sibling_path(P, path_of(P, info, av, "o"), "head_scale");
    bc_loc hl = loc_of(P, info, av, "head_scale");
    if (mha) n->param[12] = add_param(P, hb, "head_scale", vec(H), hl);
    else {
      int id = bcI_add_param(P->g, hb, vec(H), hl);  // beside o: "<prefix>.head_scale"
      if (id < 0) bail(P);
      n->param[12] = id;
    }
  }
}

// Attention: self- or cross-attention with optional padding masks.
static void build_attention(parser *P, const bc_op_info *info, bc_node *n, const bc_token *optok,
                            const bc_loc *posloc, const attr_vals *av) {
  bc_graph *g = P->g;
  bc_shape in = g->vals[n->in[0]].shape;
  int kk = ax(P, info, "kv"), kl = ax(P, info, "lengths"), kkl = ax(P, info, "kv_lengths");
  int kh = ax(P, info, "heads"), kc = ax(P, info, "causal"), kkh = ax(P, info, "kv_heads");
  if (in.rank < 2)
    error_at(P, posloc[0], "Attention needs a [B, T, D] or [T, D] input, found %s",
             shape_desc(P, &in));
  check_fixed_width(P, info, &in, optok->loc, NULL);
  int64_t D = in.d[in.rank - 1], H = av->ival[kh];
  int khd = ax(P, info, "head_dim");
  if (!av->have[khd] && D % H != 0)
    error_at(P, av->loc[kh], "model width D=%lld is not divisible by heads=%lld (or give the "
             "head width as head_dim=)", (long long)D, (long long)H);
  n->heads = H;
  // head_dim=K: heads K wide whatever D is (Qwen3, Gemma 2); stored as 0
  // when it equals D/H, so the default and its spelling-out are one graph.
  int64_t dh = av->have[khd] ? av->ival[khd] : D / H;
  if (av->have[khd] && dh > BC_MAX_DIM / H)
    error_at(P, av->loc[khd], "head_dim=%lld with heads=%lld is too wide", (long long)dh,
             (long long)H);
  n->head_dim = av->have[khd] && !(D % H == 0 && dh == D / H) ? dh : 0;
  n->kv_heads = av->have[kkh] ? av->ival[kkh] : H;
  if (H % n->kv_heads != 0)
    error_at(P, av->loc[kkh], "heads=%lld is not divisible by kv_heads=%lld (each group of "
             "query heads shares one key/value head)", (long long)H, (long long)n->kv_heads);
  n->causal = av->have[kc] && av->bval[kc];
  n->in_out = flag(P, info, av, "layout", false);
  n->rope = flag(P, info, av, "rope", false);
  int krt = ax(P, info, "rope_theta");
  if (av->have[krt]) {
    if (!n->rope) error_at(P, av->loc[krt], "rope_theta= needs rope=true");
    if (!(av->fval[krt] > 1)) error_at(P, av->loc[krt], "rope_theta must be > 1, got %g", av->fval[krt]);
    n->rope_theta = av->fval[krt];
  }
  if (n->rope && dh % 2)
    error_at(P, loc_of(P, info, av, "rope"), "rope=true needs an even head width; %s = %lld",
             av->have[khd] ? "head_dim" : "D/heads", (long long)dh);
  bc_shape kvs = in;
  if (av->have[kk]) {
    int kv = (int)av->ival[kk];
    check_float(P, info, kv, av->loc[kk]);
    kvs = g->vals[kv].shape;
    if (n->causal)
      error_at(P, av->loc[kc], "causal=true with kv=: only self-attention is masked causally "
               "(PyTorch decoders mask the self-attention, not the cross-attention)");
    if (n->rope)
      error_at(P, loc_of(P, info, av, "rope"), "rope=true with kv=: rotary positions apply to "
               "self-attention only (queries and memory have no shared positions)");
    bc_shape qb = batch_of(&in), kb = batch_of(&kvs);
    if (kvs.rank != in.rank || kvs.d[kvs.rank - 1] != D || kvs.sym[kvs.rank - 1] ||
        !bc_shape_eq(&qb, &kb))
      error_at(P, av->loc[kk], "kv=%s has shape %s; with queries %s it must be %s",
               g->vals[kv].name, shape_desc(P, &kvs), shape_desc(P, &in),
               in.rank == 3 ? "[B, S, D] with the same B and D" : "[S, D] with the same D");
    n->in[1] = kv;
  }
  if (av->have[kl]) {
    check_lengths(P, "lengths", (int)av->ival[kl], av->loc[kl], &in, "the queries");
    n->in[2] = (int)av->ival[kl];
  }
  if (av->have[kkl]) {
    if (!av->have[kk])
      error_at(P, av->loc[kkl], "kv_lengths= masks the memory of a cross-attention (kv=); "
               "for self-attention use lengths=");
    check_lengths(P, "kv_lengths", (int)av->ival[kkl], av->loc[kkl], &kvs, "kv");
    n->in[3] = (int)av->ival[kkl];
  }
  for (int k = BC_MAX_NODE_IN - 1; k >= 0; k--)
    if (n->in[k] >= 0) {
      n->nin = k + 1;
      break;
    }
  if (n->kv_heads * dh > BC_MAX_DIM / 3)
    error_at(P, av->loc[av->have[khd] ? khd : kh], "head width %lld is too large", (long long)dh);
  attention_params(P, info, n, optok, av, D, H * dh, n->kv_heads * dh);
  attention_options(P, info, n, av, dh, H, n->kv_heads * dh);
  // The per-head score matrices [H, T, S] are allocated by the planner.
  bc_shape sc = {.rank = 3, .d = {H, in.d[in.rank - 2], kvs.d[kvs.rank - 2]}};
  checked_numel(P, optok->loc, &sc, "attention scores");
}

// The op table's parser entries: shape checks, attributes and parameters of
// one call (out: the output shape, preset to the input's).
void bcP_build_layernorm(parser *P, const bc_op_info *info, bc_node *n, const bc_token *optok,
                          const bc_loc *posloc, const attr_vals *av, const bc_shape *inp, bc_shape *out) {
  (void)posloc, (void)out;
  bc_shape in = *inp;
  int64_t D = in.d[in.rank - 1];
  int ke = ax(P, info, "eps"), ka = ax(P, info, "affine"), kp = ax(P, info, "params");
  bool affine = av->have[ka] ? av->bval[ka] : true;
  if (av->have[ke]) {
    if (!(av->fval[ke] > 0)) error_at(P, av->loc[ke], "eps must be positive, got %g", av->fval[ke]);
    n->eps = av->fval[ke];
  }
  if (affine && !av->have[kp])
    error_at(P, optok->loc, "LayerNorm needs params=NAME (or affine=false)");
  if (!affine && av->have[kp])
    error_at(P, av->loc[kp], "LayerNorm with affine=false has no parameters");
  check_fixed_width(P, info, &in, optok->loc,
                    affine ? bc_fmt(P->ctx, "%s.weight", av->path[kp][0]) : NULL);
  bool bias = flag(P, info, av, "bias", true);
  if (!affine && have(P, info, av, "bias"))
    error_at(P, loc_of(P, info, av, "bias"), "bias= has no meaning with affine=false");
  if (affine) {
    n->param[0] = add_param(P, av->path[kp][0], "weight", vec(D), av->loc[kp]);
    if (bias) n->param[1] = add_param(P, av->path[kp][0], "bias", vec(D), av->loc[kp]);
  }
}

void bcP_build_rmsnorm(parser *P, const bc_op_info *info, bc_node *n, const bc_token *optok,
                        const bc_loc *posloc, const attr_vals *av, const bc_shape *inp, bc_shape *out) {
  (void)posloc, (void)out;
  bc_shape in = *inp;
  int64_t D = in.d[in.rank - 1];
  int ke = ax(P, info, "eps"), kp = ax(P, info, "params");
  n->eps = 1e-6;
  if (av->have[ke]) {
    if (!(av->fval[ke] > 0)) error_at(P, av->loc[ke], "eps must be positive, got %g", av->fval[ke]);
    n->eps = av->fval[ke];
  }
  int ko = ax(P, info, "offset");
  if (av->have[ko]) {
    if (!isfinite(av->fval[ko]))
      error_at(P, av->loc[ko], "offset must be a finite number, got %g", av->fval[ko]);
    n->offset = av->fval[ko];
  }
  check_fixed_width(P, info, &in, optok->loc, bc_fmt(P->ctx, "%s.weight", av->path[kp][0]));
  n->param[0] = add_param(P, av->path[kp][0], "weight", vec(D), av->loc[kp]);
}

void bcP_build_attention(parser *P, const bc_op_info *info, bc_node *n, const bc_token *optok,
                          const bc_loc *posloc, const attr_vals *av, const bc_shape *inp, bc_shape *out) {
  (void)inp, (void)out;
  build_attention(P, info, n, optok, posloc, av);
  int kd = bcP_attr(P, info, "dropout");
  if (av->have[kd]) {
    n->dropout = av->fval[kd];
    if (!(n->dropout >= 0 && n->dropout < 1))
      error_at(P, av->loc[kd], "Attention dropout=%g is outside [0, 1) (the probability of "
               "zeroing an attention weight in training)", n->dropout);
  }
}

void bcP_build_none(parser *P, const bc_op_info *info, bc_node *n, const bc_token *optok,
                     const bc_loc *posloc, const attr_vals *av, const bc_shape *inp, bc_shape *out) {
  (void)n, (void)posloc, (void)av, (void)inp, (void)out;
  error_at(P, optok->loc, "internal error: the parser does not build %s (made by the passes)", info->name);
}

// Shape checks and parameters for one call; returns the output value id.
static int build_node(parser *P, const bc_op_info *info, bc_op op, const bc_token *optok,
                      const int *pos, const bc_loc *posloc, const attr_vals *av,
                      const init_list *il) {
  bc_graph *g = P->g;
  const bc_op_def *d = bcT_def(op);
  if (!d) error_at(P, optok->loc, "internal error: op %d has no row in the op table", (int)op);
  for (int i = 0; i < info->npos; i++) {
    if ((i == 0 && d->tokens) || (i == 1 && d->targets))
      check_tokens(P, info, pos[i], posloc[i], i == 1);
    else check_float(P, info, pos[i], posloc[i]);
  }
  for (int i = 0; i < info->npos; i++)  // a Param's [D] is an operand of Add and Mul only
    if (!d->broadcast && g->vals[pos[i]].shape.rank < 2)
      error_at(P, posloc[i], "%s takes [B, T, D] or [T, D] values; '%s' is %s (a vector or "
               "scalar, as a Param of shape [D] or [1], is an operand of Add or Mul, which "
               "broadcast it)", info->name, g->vals[pos[i]].name[0] ? g->vals[pos[i]].name
               : "this value", shape_desc(P, &g->vals[pos[i]].shape));
  bc_shape in = info->npos ? g->vals[pos[0]].shape : (bc_shape){.rank = 0};
  bc_shape out = in;
  int id = bcI_add_node(g, op, optok->loc);
  if (id < 0) bail(P);
  bc_node *n = &g->nodes[id];
  n->nin = info->npos;
  for (int i = 0; i < info->npos; i++) n->in[i] = pos[i];
  d->build(P, info, n, optok, posloc, av, &in, &out);
  apply_inits(P, info, &g->nodes[id], il);
  int v = bcI_add_value(g, "", out, BC_VAL_TEMP);
  if (v < 0) bail(P);
  n = &g->nodes[id];
  n->nout = 1;
  n->out[0] = v;
  g->vals[v].def = id;
  return v;
}

static int parse_call(parser *P) {
  bc_token *optok = next(P);
  const char *name = tok_str(P, optok);
  const bc_op_info *info = NULL;
  bc_op op = BC_OP_COUNT;
  for (int i = 0; i < BC_OP_COUNT && !info; i++) {
    const bc_op_info *oi = bcI_op_info((bc_op)i);
    if (oi->in_language && bcL_is(optok, oi->name)) info = oi, op = (bc_op)i;
  }
  if (!info) {
    const char *cands[BC_OP_COUNT], *list = "";
    int nc = 0;
    for (int i = 0; i < BC_OP_COUNT; i++) {
      const bc_op_info *oi = bcI_op_info((bc_op)i);
      if (!oi->in_language) continue;
      list = bc_fmt(P->ctx, "%s%s%s", list, nc ? ", " : "", oi->name);
      cands[nc++] = oi->name;
    }
    error_at(P, optok->loc, "unknown node '%s'%s; nodes are %s", name, suggest(P, name, cands, nc),
             list);
  }
  enter(P, optok->loc);
  int pos[BC_MAX_NODE_IN] = {-1, -1, -1, -1};
  bc_loc posloc[BC_MAX_NODE_IN] = {{0}};
  attr_vals av;
  memset(&av, 0, sizeof av);
  init_list il = {.n = 0};
  parse_args(P, info, optok, pos, posloc, &av, bcT_def(op) && bcT_def(op)->init_sel, &il);
  P->depth--;
  return build_node(P, info, op, optok, pos, posloc, &av, &il);
}

// value = IDENT | IDENT "(" args ")"
static int parse_value(parser *P) {
  bc_token *t = peek(P);
  if (t->kind == BC_TK_IDENT && bcL_is(peek2(P), "(") && !is_keyword(t)) return parse_call(P);
  bc_token *nt = expect_name(P, "a value (a name, or a node call like Add(a, b))");
  const char *name = tok_str(P, nt);
  binding *b = find_binding(P, nt);
  if (!b) {
    if (find_sym(P, nt))
      error_at(P, nt->loc, "'%s' is a dim, not a value", name);
    // Referring to the name being defined before it exists is the only way
    // to write a cycle in this language; say so rather than "undefined".
    if (P->defining && strcmp(P->defining, name) == 0)
      error_at(P, nt->loc, "'%s' is used in its own definition (a cycle): it has no value yet",
               name);
    error_at(P, nt->loc, "undefined name '%s'%s", name, unknown_name_hint(P, name, true));
  }
  b->used = true;
  return b->val;
}

// --- statements ----------------------------------------------------------------

static void check_binding_used(parser *P, const binding *b) {
  if (b->used || bcI_is_output(P->g, b->val)) return;
  if (P->g->vals[b->val].kind == BC_VAL_INPUT)
    error_at(P, b->loc, "input '%s' is declared but never used", b->name);
  error_at(P, b->loc, "'%s' is assigned here but never used", b->name);
}

static void bind(parser *P, const bc_token *nt, int val) {
  binding *b = find_binding(P, nt);
  if (b) {
    check_binding_used(P, b);
    *b = (binding){b->name, val, nt->loc, false};
    return;
  }
  if (P->nbinds == P->capbinds) {
    int cap = P->capbinds ? P->capbinds * 2 : 16;
    binding *nb = palloc(P, (size_t)cap * sizeof *nb);
    if (P->binds) memcpy(nb, P->binds, (size_t)P->nbinds * sizeof *nb);
    P->binds = nb;
    P->capbinds = cap;
  }
  P->bind_of[intern(P, nt)] = P->nbinds;
  P->binds[P->nbinds++] = (binding){P->iname[intern(P, nt)], val, nt->loc, false};
}

// NAME "=" value
static void assign_stmt(parser *P) {
  bc_token *nt = expect_name(P, "a name");
  const char *name = P->iname[intern(P, nt)];
  intsym *s = find_sym(P, nt);
  if (s)
    error_at(P, nt->loc, "'%s' is already a %s and cannot be bound to a value", name,
             s->loopvar ? "loop variable" : "dim");
  expect_named(P, "=", "after '%s'", name);
  P->defining = name;
  int v = parse_value(P);
  P->defining = NULL;
  if (!P->g->vals[v].name[0]) P->g->vals[v].name = name;
  bind(P, nt, v);
}

// -D NAME=VALUE for the dim `name`, if given (and marks it used).
static bool define_for(parser *P, const char *name, int64_t *v) {
  bool found = false;
  for (int i = 0; i < P->ndefs; i++)
    if (strcmp(P->defs[i].name, name) == 0) {
      *v = P->defs[i].value;
      if (*v <= 0 || *v > BC_MAX_DIM) {
        bc_error(P->ctx, BC_EINPUT, "error: -D %s=%lld: dims must be between 1 and %lld", name,
                 (long long)*v, (long long)BC_MAX_DIM);
        bail(P);
      }
      P->def_used[i] = true;
      found = true;
    }
  return found;
}

// Appends a top-level dim to the graph's list (amortised growth).
static int add_dim(parser *P, bc_dim d) {
  bc_graph *g = P->g;
  if (g->ndims == P->capdims) {
    int cap = P->capdims ? P->capdims * 2 : 16;
    bc_dim *dims = palloc(P, (size_t)cap * sizeof *dims);
    if (g->ndims) memcpy(dims, g->dims, (size_t)g->ndims * sizeof *dims);
    g->dims = dims;
    P->capdims = cap;
  }
  g->dims[g->ndims] = d;
  return g->ndims++;
}

// "dim" IDENT ("=" | "<=") iexpr.  `dim T <= 2048` declares a run-time dim
// (value chosen at run time, 1..bound); -D sets the value or the bound.
// Dims declared in a loop body are local to that trip.
static void dim_stmt(parser *P) {
  next(P);
  bc_token *nt = expect_name(P, "a dim name");
  const char *name = P->iname[intern(P, nt)];
  intsym *s = find_sym(P, nt);
  if (s) {
    bc_error_at(P->ctx, nt->loc, "%s '%s' is already defined", s->loopvar ? "loop variable" : "dim",
                name);
    bc_note_at(P->ctx, s->loc, "'%s' was defined here", name);
    bail(P);
  }
  if (find_binding(P, nt)) error_at(P, nt->loc, "'%s' is already a value name", name);
  bool runtime = at(P, "<=");
  if (runtime && P->loop_depth)
    error_at(P, peek(P)->loc, "run-time dims (dim %s <= ...) must be declared outside loops", name);
  if (!runtime) expect(P, "=", "after the dim name (dim D = 512, or dim T <= 2048)");
  else next(P);
  int64_t v = size_expr(P, bc_fmt(P->ctx, runtime ? "bound of dim %s" : "dim %s", name));
  bool overridden = define_for(P, name, &v);
  int idx = -1;
  if (!P->loop_depth) {
    if (P->g->ndims >= MAX_DIMS)
      error_at(P, nt->loc, "more than %d dims in one graph", MAX_DIMS);
    idx = add_dim(P, (bc_dim){name, v, nt->loc, overridden, runtime ? P->g->nrt++ : -1});
  }
  push_sym(P, nt, v, false, idx);
}

// One entry of an input shape: a run-time dim standing alone, or a size.
static void shape_entry(parser *P, bc_shape *s) {
  bc_token *t = peek(P);
  intsym *sym = t->kind == BC_TK_IDENT ? find_sym(P, t) : NULL;
  const bc_token *after = peek2(P);
  if (rt_dim(P, sym) && (bcL_is(after, ",") || bcL_is(after, "]"))) {
    next(P);
    s->d[s->rank] = sym->value;
    s->sym[s->rank++] = (int16_t)(sym->dim + 1);
    return;
  }
  s->d[s->rank++] = size_expr(P, "an input dimension");
}

// "input" IDENT ":" ( "[" entry { "," entry } "]" | "lengths" "[" entry "]"
//                    | "tokens" "[" entry "," entry "]" )
static void input_stmt(parser *P) {
  bc_token *kw = next(P);
  bc_token *nt = expect_name(P, "the input's name");
  const char *name = P->iname[intern(P, nt)];
  if (P->loop_depth)
    error_at(P, kw->loc, "inputs must be declared outside loops (is a loop missing its '}'?)");
  if (find_sym(P, nt)) error_at(P, nt->loc, "'%s' is already a dim", name);
  if (find_binding(P, nt)) error_at(P, nt->loc, "'%s' is already a value name", name);
  expect(P, ":", "after the input name (input x : [B, T, D], input len : lengths[B], or "
         "input ids : tokens[B, T])");
  bool lengths = at(P, "lengths");
  bool tokens = at(P, "tokens");
  if (lengths || tokens) next(P);
  bc_token *lb = expect(P, "[", "to start the input shape");
  bc_shape s = {.rank = 0};
  int maxrank = lengths ? 1 : tokens ? 2 : 3;
  for (;;) {
    if (s.rank == maxrank)
      error_at(P, peek(P)->loc, lengths ? "lengths take one axis: lengths[B]"
                                : tokens ? "tokens take two axes: tokens[B, T]"
                                         : "input must be [B, T, D] or [T, D]; rank above 3");
    shape_entry(P, &s);
    if (!at(P, ",")) break;
    next(P);
  }
  expect(P, "]", "to close the input shape");
  if (tokens && s.rank != 2)
    error_at(P, lb->loc, "tokens take two axes: tokens[B, T] (a batch of B sequences of T ids), "
             "found rank %d", s.rank);
  if (!lengths && s.rank < 2)
    error_at(P, lb->loc, "input must be [B, T, D] or [T, D], found rank %d", s.rank);
  checked_numel(P, lb->loc, &s, "input shape");
  int v = bcI_add_value(P->g, name, s, BC_VAL_INPUT);
  if (v < 0 || bcI_add_input(P->g, v) < 0) bail(P);
  P->g->vals[v].type = lengths || tokens ? BC_VT_I32 : BC_VT_F32;
  P->g->vals[v].tokens = tokens;
  bind(P, nt, v);
}

// "output" value.  An output is named by its binding ("output y"); a call
// written in place is named y, y1, y2, ... by position.
static void output_stmt(parser *P) {
  bc_token *kw = next(P);
  if (P->loop_depth)
    error_at(P, kw->loc, "outputs must be declared outside loops (is a loop missing its '}'?)");
  bc_token *t = peek(P);
  bool named = t->kind == BC_TK_IDENT && !bcL_is(peek2(P), "(");
  bc_graph *g = P->g;
  const char *name = named ? tok_str(P, t)
                           : (g->noutputs ? bc_fmt(P->ctx, "y%d", g->noutputs) : "y");
  int v = parse_value(P);
  if (g->vals[v].type != BC_VT_F32)
    error_at(P, t->loc, "'%s' is a %s input, not an output", name,
             g->vals[v].tokens ? "tokens" : "lengths");
  if (g->vals[v].shape.rank == 1 || (g->vals[v].def >= 0 && g->nodes[g->vals[v].def].op == BC_OP_PARAM))
    error_at(P, t->loc, "'%s' is a Param (a learned tensor, %s): a graph output is computed from "
             "the inputs", name, shape_desc(P, &g->vals[v].shape));
  for (int i = 0; i < g->noutputs; i++) {
    if (strcmp(g->output_names[i], name) == 0) error_at(P, t->loc, "'%s' is already an output", name);
    // Another name bound to the same value (z = y): one array under two names.
    if (g->outputs[i] == v)
      error_at(P, t->loc, "'%s' is the same value as output '%s' (bound to it by '='): an output "
               "is given once; name it once", name, g->output_names[i]);
  }
  if (bcI_add_output(g, v, name) < 0) bail(P);
}

static void stmt(parser *P);

// "for" IDENT "in" iexpr ".." iexpr [ "as" path ] "{" { stmt } "}"
static void for_stmt(parser *P) {
  bc_token *kw = next(P);
  enter(P, kw->loc);
  bc_token *vt = expect_name(P, "a loop variable");
  const char *var = P->iname[intern(P, vt)];
  intsym *s = find_sym(P, vt);
  if (s) error_at(P, vt->loc, "loop variable '%s' shadows the %s '%s'", var,
                  s->loopvar ? "loop variable" : "dim", var);
  if (find_binding(P, vt)) error_at(P, vt->loc, "'%s' is already a value name", var);
  expect(P, "in", "after the loop variable");
  bc_loc rloc = peek(P)->loc;
  int64_t lo = iexpr(P);
  expect(P, "..", "in the loop range (lo..hi)");
  int64_t hi = iexpr(P);
  if (hi <= lo) error_at(P, rloc, "loop range %lld..%lld is empty", (long long)lo, (long long)hi);
  // hi > lo here, so the difference fits in uint64_t (in int64_t it can overflow).
  uint64_t trips = (uint64_t)hi - (uint64_t)lo;
  if (trips > MAX_LOOP_TRIPS)
    error_at(P, rloc, "loop runs %llu times, over the limit of %d", (unsigned long long)trips,
             MAX_LOOP_TRIPS);
  int scope = P->nsyms;
  int as_pos = -1;
  if (at(P, "as")) {
    next(P);
    as_pos = P->pos;
    push_sym(P, vt, lo, true, -1);  // so the path can be checked now
    path(P);
    pop_syms(P, scope);
  }
  expect(P, "{", "to start the loop body");
  int body = P->pos;
  const char *outer = P->prefix;
  int end = -1;
  P->loop_depth++;
  for (int64_t i = lo; i < hi; i++) {
    push_sym(P, vt, i, true, -1);
    if (as_pos >= 0) {
      P->pos = as_pos;
      P->prefix = "";
      const char *p = path(P);
      P->prefix = outer[0] ? bc_fmt(P->ctx, "%s.%s", outer, p) : p;
    }
    P->pos = body;
    while (!at(P, "}")) {
      if (peek(P)->kind == BC_TK_EOF) error_at(P, kw->loc, "loop body is missing its '}'");
      stmt(P);
    }
    end = P->pos;
    pop_syms(P, scope);  // the loop variable and every dim of this trip
  }
  P->loop_depth--;
  P->prefix = outer;
  P->pos = end;
  next(P);
  P->depth--;
}

static void stmt(parser *P) {
  bc_token *t = peek(P);
  if (++P->unrolled > MAX_UNROLLED_STMTS)
    error_at(P, t->loc, "the unrolled graph has more than %d statements", MAX_UNROLLED_STMTS);
  if (bcL_is(t, "dim")) return dim_stmt(P);
  if (bcL_is(t, "input")) return input_stmt(P);
  if (bcL_is(t, "output")) return output_stmt(P);
  if (bcL_is(t, "for")) return for_stmt(P);
  if (bcL_is(t, "model")) error_at(P, t->loc, "'model' must be the first statement, and only once");
  if (t->kind == BC_TK_IDENT && !is_keyword(t) && bcL_is(peek2(P), "=")) return assign_stmt(P);
  if (t->kind == BC_TK_IDENT && !is_keyword(t) && bcL_is(peek2(P), "("))
    error_at(P, t->loc, "the result of %.*s(...) must be bound to a name: x = %.*s(...)", t->len,
             t->p, t->len, t->p);
  error_at(P, t->loc, "expected a statement (dim, input, output, for, or NAME = ...), found %s",
           tok_desc(P, t));
}

static void program(parser *P) {
  bc_token *t = peek(P);
  if (!bcL_is(t, "model"))
    error_at(P, t->loc, "a graph file starts with 'model NAME', found %s", tok_desc(P, t));
  next(P);
  bc_token *mt = expect_name(P, "the model name");
  P->g->model = tok_str(P, mt);
  while (peek(P)->kind != BC_TK_EOF) stmt(P);
  bc_loc eof = peek(P)->loc;
  if (P->g->ninputs == 0) error_at(P, eof, "the graph has no 'input' statement");
  if (P->g->noutputs == 0) error_at(P, eof, "the graph has no 'output' statement");
  for (int i = 0; i < P->nbinds; i++) {
    binding *b = &P->binds[i];
    check_binding_used(P, b);
  }
  for (int i = 0; i < P->ndefs; i++)
    if (!P->def_used[i]) {
      const char *names = "";
      for (int k = 0; k < P->g->ndims; k++)
        names = bc_fmt(P->ctx, "%s%s%s", names, k ? ", " : "", P->g->dims[k].name);
      bc_error(P->ctx, BC_EINPUT, "error: -D %s=%lld: %s has no dim '%s' (its dims: %s)",
               P->defs[i].name, (long long)P->defs[i].value, P->g->path, P->defs[i].name, names);
      bail(P);
    }
  // The name prefixes every emitted file, function and macro (cnames.c).
  const char *why = bcN_model_clash(P->ctx, P->g);
  if (why) error_at(P, mt->loc, "model name '%s' %s", P->g->model, why);
}

// Gives every identifier token the id of its spelling (open addressing over
// the token texts; ids are dense from 0).
static int intern_all(bc_ctx *ctx, parser *P) {
  size_t cap = 16;
  while (cap < (size_t)P->ntok * 2) cap *= 2;
  int *slot = bc_alloc(ctx, cap * sizeof *slot);  // token index + 1, 0 empty
  P->tid = bc_alloc(ctx, (size_t)P->ntok * sizeof *P->tid);
  P->iname = bc_alloc(ctx, (size_t)P->ntok * sizeof *P->iname);
  P->sym_of = bc_alloc(ctx, (size_t)P->ntok * sizeof *P->sym_of);
  P->bind_of = bc_alloc(ctx, (size_t)P->ntok * sizeof *P->bind_of);
  if (!slot || !P->tid || !P->iname || !P->sym_of || !P->bind_of)
    return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  for (int i = 0; i < P->ntok; i++) {
    const bc_token *t = &P->tok[i];
    P->tid[i] = -1;
    if (t->kind != BC_TK_IDENT) continue;
    size_t h = (size_t)bc_fnv1a(BC_FNV_OFFSET, t->p, (size_t)t->len) & (cap - 1);
    while (slot[h]) {
      const bc_token *o = &P->tok[slot[h] - 1];
      if (o->len == t->len && memcmp(o->p, t->p, (size_t)t->len) == 0) break;
      h = (h + 1) & (cap - 1);
    }
    if (!slot[h]) {
      slot[h] = i + 1;
      P->tid[i] = P->nident;
      P->iname[P->nident] = bc_strndup(ctx, t->p, (size_t)t->len);
      if (!P->iname[P->nident]) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
      P->sym_of[P->nident] = P->bind_of[P->nident] = -1;
      P->nident++;
    } else {
      P->tid[i] = P->tid[slot[h] - 1];
    }
  }
  return BC_OK;
}

static bc_graph *parse_src(bc_ctx *ctx, bc_src *src, const bc_define *defs, int ndefs) {
  parser *P = bc_alloc(ctx, sizeof *P);
  bc_graph *g = bcI_new(ctx);
  bool *used = bc_alloc(ctx, (size_t)(ndefs > 0 ? ndefs : 1));
  if (!P || !g || !used) {
    bc_error(ctx, BC_ENOMEM, "error: out of memory");
    return NULL;
  }
  g->path = src->path;
  if (bcL_tokenize(ctx, src, &P->tok, &P->ntok)) return NULL;
  if (intern_all(ctx, P)) return NULL;
  P->ctx = ctx;
  P->g = g;
  P->defs = defs;
  P->ndefs = ndefs;
  P->def_used = used;
  P->prefix = "";
  if (setjmp(P->jb)) return NULL;
  program(P);
  if (bcI_verify(g)) return NULL;
  return g;
}

bc_graph *bcP_parse_string(bc_ctx *ctx, const char *name, const char *text,
                           const bc_define *defs, int ndefs) {
  bc_src *src = bc_alloc(ctx, sizeof *src);
  if (!src || !(src->path = bc_strdup(ctx, name))) {
    bc_error(ctx, BC_ENOMEM, "error: out of memory");
    return NULL;
  }
  src->text = text;
  size_t n = 0;  // strlen that never scans past the limit
  while (n <= (size_t)BC_MAX_SOURCE && text[n]) n++;
  src->len = n;
  if (src->len > BC_MAX_SOURCE) {  // the limit graph files have (bcP_parse_file)
    bc_error(ctx, BC_EINPUT, "%s: error: the graph text is over the limit of %d bytes (the limit "
             "of a graph file)", name, BC_MAX_SOURCE);
    return NULL;
  }
  return parse_src(ctx, src, defs, ndefs);
}

bc_graph *bcP_parse_file(bc_ctx *ctx, const char *path, const bc_define *defs, int ndefs) {
  bc_src *src = bc_alloc(ctx, sizeof *src);
  char *text;
  if (!src || !(src->path = bc_strdup(ctx, path))) {
    bc_error(ctx, BC_ENOMEM, "error: out of memory");
    return NULL;
  }
  if (bc_read_file(ctx, path, BC_MAX_SOURCE, &text, &src->len)) return NULL;
  src->text = text;
  return parse_src(ctx, src, defs, ndefs);
}
