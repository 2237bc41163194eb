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
#include "bc.h"

#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

// A dim or a loop variable: named integers usable in expressions.
typedef struct {
  const char *name;
  int64_t value;
  bool loopvar;
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

typedef struct {
  bc_ctx *ctx;
  bc_graph *g;
  bc_token *tok;       // all tokens; tok[ntok-1] is EOF
  int ntok, pos;
  intsym *syms;
  int nsyms, capsyms;
  binding *binds;
  int nbinds, capbinds;
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

static intsym *find_sym(parser *P, const char *name) {
  for (int i = P->nsyms - 1; i >= 0; i--)
    if (strcmp(P->syms[i].name, name) == 0) return &P->syms[i];
  return NULL;
}

static binding *find_binding(parser *P, const char *name) {
  for (int i = 0; i < P->nbinds; i++)
    if (strcmp(P->binds[i].name, name) == 0) return &P->binds[i];
  return NULL;
}

static void push_sym(parser *P, const char *name, int64_t v, bool loopvar, bc_loc loc) {
  if (P->nsyms == P->capsyms) {
    int cap = P->capsyms ? P->capsyms * 2 : 16;
    intsym *s = palloc(P, (size_t)cap * sizeof *s);
    if (P->syms) memcpy(s, P->syms, (size_t)P->nsyms * sizeof *s);
    P->syms = s;
    P->capsyms = cap;
  }
  P->syms[P->nsyms++] = (intsym){name, v, loopvar, loc};
}

static const char *unknown_name_hint(parser *P, const char *name, bool want_value) {
  const char **cands = palloc(P, (size_t)(P->nsyms + P->nbinds + 1) * sizeof *cands);
  int n = 0;
  if (want_value)
    for (int i = 0; i < P->nbinds; i++) cands[n++] = P->binds[i].name;
  else
    for (int i = 0; i < P->nsyms; i++) cands[n++] = P->syms[i].name;
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
    intsym *s = find_sym(P, name);
    if (s) return s->value;
    if (find_binding(P, name))
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

static double fprimary(parser *P) {
  bc_token *t = peek(P);
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
    intsym *s = find_sym(P, name);
    if (s) return (double)s->value;
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
    if (t->kind == BC_TK_IDENT && !is_keyword(t)) {
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

typedef enum { A_INT, A_FLOAT, A_BOOL, A_ACT, A_PATH, A_PATH2 } attr_type;

typedef struct {
  const char *name;
  attr_type type;
} attr_spec;

typedef struct {
  const char *name;
  bc_op op;
  int npos;               // positional (value) arguments
  attr_spec attrs[4];
  const char *required;   // space-separated required attributes
} op_spec;

static const op_spec ops[] = {
    {"Add", BC_OP_ADD, 2, {{"alpha", A_FLOAT}, {"beta", A_FLOAT}}, ""},
    {"LayerNorm", BC_OP_LAYERNORM, 1, {{"eps", A_FLOAT}, {"affine", A_BOOL}, {"params", A_PATH}}, ""},
    {"Attention", BC_OP_ATTENTION, 1, {{"heads", A_INT}, {"causal", A_BOOL}, {"params", A_PATH}},
     "heads params"},
    {"FFN", BC_OP_FFN, 1, {{"hidden", A_INT}, {"act", A_ACT}, {"params", A_PATH2}},
     "hidden params"},
    {"Linear", BC_OP_LINEAR, 1, {{"out", A_INT}, {"params", A_PATH}}, "out params"},
};
#define NOPS ((int)(sizeof ops / sizeof ops[0]))

// Parsed attribute values of one call.
typedef struct {
  bool have[4];
  bc_loc loc[4];
  int64_t ival[4];
  double fval[4];
  bool bval[4];
  bc_act act[4];
  const char *path[4][2];
} attr_vals;

static int attr_index(const op_spec *spec, const char *name) {
  for (int i = 0; i < 4 && spec->attrs[i].name; i++)
    if (strcmp(spec->attrs[i].name, name) == 0) return i;
  return -1;
}

static const char *attr_list(parser *P, const op_spec *spec) {
  const char *s = "";
  for (int i = 0; i < 4 && spec->attrs[i].name; i++)
    s = bc_fmt(P->ctx, "%s%s%s", s, i ? ", " : "", spec->attrs[i].name);
  return s;
}

static void parse_attr_value(parser *P, const op_spec *spec, int k, attr_vals *av) {
  bc_token *t = peek(P);
  av->loc[k] = t->loc;
  switch (spec->attrs[k].type) {
  case A_INT: av->ival[k] = size_expr(P, spec->attrs[k].name); break;
  case A_FLOAT:
    av->fval[k] = fexpr(P);
    // Compiled code computes in float32: a constant it cannot represent
    // would make the compiled graph differ from the reference.
    if (fabs(av->fval[k]) > FLT_MAX)
      error_at(P, t->loc, "%s=%g does not fit in float32 (largest %g)", spec->attrs[k].name,
               av->fval[k], (double)FLT_MAX);
    break;
  case A_BOOL:
    if (!at(P, "true") && !at(P, "false"))
      error_at(P, t->loc, "%s must be true or false, found %s", spec->attrs[k].name,
               tok_desc(P, t));
    av->bval[k] = at(P, "true");
    next(P);
    break;
  case A_ACT: {
    const char *name = tok_str(P, t);
    for (int a = 0; a < BC_ACT_COUNT; a++)
      if (t->kind == BC_TK_IDENT && strcmp(name, bcI_act_name((bc_act)a)) == 0) {
        av->act[k] = (bc_act)a;
        next(P);
        return;
      }
    error_at(P, t->loc, "unknown activation %s (expected relu, gelu or gelu_tanh)",
             tok_desc(P, t));
  }
  case A_PATH: av->path[k][0] = path(P); break;
  case A_PATH2:
    if (!at(P, "("))
      error_at(P, t->loc, "%s of %s takes two paths: (linear1, linear2)", spec->attrs[k].name,
               spec->name);
    next(P);
    av->path[k][0] = path(P);
    expect(P, ",", "between the two parameter paths");
    av->path[k][1] = path(P);
    expect(P, ")", "after the two parameter paths");
    break;
  }
}

static int parse_value(parser *P);

// Parses "(" args ")" of a call to `spec`; fills positional value ids.
static void parse_args(parser *P, const op_spec *spec, const bc_token *optok, int *pos,
                       bc_loc *posloc, attr_vals *av) {
  int npos = 0;
  bool seen_attr = false;
  expect(P, "(", bc_fmt(P->ctx, "after '%s'", spec->name));
  while (!at(P, ")")) {
    bc_token *t = peek(P);
    if (t->kind == BC_TK_IDENT && bcL_is(peek2(P), "=")) {
      const char *name = tok_str(P, t);
      int k = attr_index(spec, name);
      if (k < 0) {
        const char *cands[4];
        int n = 0;
        for (int i = 0; i < 4 && spec->attrs[i].name; i++) cands[n++] = spec->attrs[i].name;
        error_at(P, t->loc, "unknown attribute '%s' for %s%s; %s takes: %s", name, spec->name,
                 suggest(P, name, cands, n), spec->name, attr_list(P, spec));
      }
      if (av->have[k]) error_at(P, t->loc, "attribute '%s' given twice", name);
      next(P);
      next(P);
      parse_attr_value(P, spec, k, av);
      av->have[k] = true;
      seen_attr = true;
    } else {
      if (seen_attr) error_at(P, t->loc, "positional argument after attributes");
      if (npos == spec->npos)
        error_at(P, t->loc, "%s takes %d input%s, found more", spec->name, spec->npos,
                 spec->npos == 1 ? "" : "s");
      posloc[npos] = t->loc;
      pos[npos++] = parse_value(P);
    }
    if (!at(P, ",")) break;
    next(P);
  }
  expect(P, ")", bc_fmt(P->ctx, "to close the call to %s", spec->name));
  if (npos < spec->npos)
    error_at(P, optok->loc, "%s takes %d input%s, found %d", spec->name, spec->npos,
             spec->npos == 1 ? "" : "s", npos);
  const char *req = spec->required;
  while (*req) {
    const char *sp = strchr(req, ' ');
    size_t len = sp ? (size_t)(sp - req) : strlen(req);
    const char *name = bc_strndup(P->ctx, req, len);
    if (!av->have[attr_index(spec, name)])
      error_at(P, optok->loc, "%s needs the attribute '%s'", spec->name, name);
    req += len + (sp != NULL);
  }
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

static bc_shape vec(int64_t a) { return (bc_shape){.rank = 1, .d = {a}}; }
static bc_shape mat(int64_t a, int64_t b) { return (bc_shape){.rank = 2, .d = {a, b}}; }

// Shape checks and parameters for one call; returns the node id.
static int build_node(parser *P, const op_spec *spec, const bc_token *optok, const int *pos,
                      const bc_loc *posloc, const attr_vals *av) {
  bc_graph *g = P->g;
  bc_shape in = g->vals[pos[0]].shape;
  int64_t D = in.d[in.rank - 1];
  bc_shape out = in;
  char a[96], b[96];
  int id = bcI_add_node(g, spec->op, optok->loc);
  if (id < 0) bail(P);
  bc_node *n = &g->nodes[id];
  n->nin = spec->npos;
  for (int i = 0; i < spec->npos; i++) n->in[i] = pos[i];
  switch (spec->op) {
  case BC_OP_ADD: {
    bc_shape in2 = g->vals[pos[1]].shape;
    if (!bc_shape_eq(&in, &in2))
      error_at(P, optok->loc, "shape mismatch in Add: first input is %s but second is %s",
               bc_shape_str(&in, a, sizeof a), bc_shape_str(&in2, b, sizeof b));
    if (av->have[0]) n->alpha = av->fval[0];
    if (av->have[1]) n->beta = av->fval[1];
    break;
  }
  case BC_OP_LAYERNORM: {
    bool affine = av->have[1] ? av->bval[1] : true;
    if (av->have[0]) {
      if (!(av->fval[0] > 0)) error_at(P, av->loc[0], "eps must be positive, got %g", av->fval[0]);
      n->eps = av->fval[0];
    }
    if (affine && !av->have[2])
      error_at(P, optok->loc, "LayerNorm needs params=NAME (or affine=false)");
    if (!affine && av->have[2])
      error_at(P, av->loc[2], "LayerNorm with affine=false has no parameters");
    if (affine) {
      n->param[0] = add_param(P, av->path[2][0], "weight", vec(D), av->loc[2]);
      n->param[1] = add_param(P, av->path[2][0], "bias", vec(D), av->loc[2]);
    }
    break;
  }
  case BC_OP_ATTENTION: {
    if (in.rank < 2)
      error_at(P, posloc[0], "Attention needs a [B, T, D] or [T, D] input, found %s",
               bc_shape_str(&in, a, sizeof a));
    int64_t H = av->ival[0];
    if (D % H != 0)
      error_at(P, av->loc[0], "model width D=%lld is not divisible by heads=%lld",
               (long long)D, (long long)H);
    n->heads = H;
    n->causal = av->have[1] && av->bval[1];
    const char *p = av->path[2][0];
    if (D > BC_MAX_DIM / 3)
      error_at(P, posloc[0], "model width %lld is too large for a packed QKV projection",
               (long long)D);
    n->param[0] = add_param(P, p, "in_proj_weight", mat(3 * D, D), av->loc[2]);
    n->param[1] = add_param(P, p, "in_proj_bias", vec(3 * D), av->loc[2]);
    n->param[2] = add_param(P, p, "out_proj.weight", mat(D, D), av->loc[2]);
    n->param[3] = add_param(P, p, "out_proj.bias", vec(D), av->loc[2]);
    // The per-head score matrices [H, T, T] are allocated by the planner.
    int64_t T = in.d[in.rank - 2];
    bc_shape sc = {.rank = 3, .d = {H, T, T}};
    checked_numel(P, optok->loc, &sc, "attention scores");
    break;
  }
  case BC_OP_FFN: {
    int64_t F = av->ival[0];
    n->hidden = F;
    n->act = av->have[1] ? av->act[1] : BC_ACT_RELU;
    bc_shape hid = in;
    hid.d[hid.rank - 1] = F;
    checked_numel(P, av->loc[0], &hid, "FFN hidden activation");
    n->param[0] = add_param(P, av->path[2][0], "weight", mat(F, D), av->loc[2]);
    n->param[1] = add_param(P, av->path[2][0], "bias", vec(F), av->loc[2]);
    n->param[2] = add_param(P, av->path[2][1], "weight", mat(D, F), av->loc[2]);
    n->param[3] = add_param(P, av->path[2][1], "bias", vec(D), av->loc[2]);
    break;
  }
  case BC_OP_LINEAR: {
    int64_t K = av->ival[0];
    n->hidden = K;
    out.d[out.rank - 1] = K;
    checked_numel(P, av->loc[0], &out, "Linear output");
    n->param[0] = add_param(P, av->path[1][0], "weight", mat(K, D), av->loc[1]);
    n->param[1] = add_param(P, av->path[1][0], "bias", vec(K), av->loc[1]);
    break;
  }
  default: break;
  }
  int v = bcI_add_value(g, "", out, BC_VAL_TEMP);
  if (v < 0) bail(P);
  n = &g->nodes[id];  // bcI_add_value does not move nodes, but stay safe
  n->nout = 1;
  n->out[0] = v;
  g->vals[v].def = id;
  return v;
}

static int parse_call(parser *P) {
  bc_token *optok = next(P);
  const char *name = tok_str(P, optok);
  const op_spec *spec = NULL;
  for (int i = 0; i < NOPS; i++)
    if (strcmp(ops[i].name, name) == 0) spec = &ops[i];
  if (!spec) {
    const char *cands[NOPS];
    for (int i = 0; i < NOPS; i++) cands[i] = ops[i].name;
    error_at(P, optok->loc, "unknown node '%s'%s; nodes are Add, LayerNorm, Attention, FFN, Linear",
             name, suggest(P, name, cands, NOPS));
  }
  enter(P, optok->loc);
  int pos[2] = {-1, -1};
  bc_loc posloc[2] = {{0}};
  attr_vals av;
  memset(&av, 0, sizeof av);
  parse_args(P, spec, optok, pos, posloc, &av);
  P->depth--;
  return build_node(P, spec, optok, pos, posloc, &av);
}

// value = IDENT | IDENT "(" args ")"
static int parse_value(parser *P) {
  bc_token *t = peek(P);
  if (t->kind == BC_TK_IDENT && bcL_is(peek2(P), "(") && !is_keyword(t)) return parse_call(P);
  bc_token *nt = expect_name(P, "a value (a name, or a node call like Add(a, b))");
  const char *name = tok_str(P, nt);
  binding *b = find_binding(P, name);
  if (!b) {
    if (find_sym(P, name))
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
  if (!b->used && b->val != P->g->output)
    error_at(P, b->loc, "'%s' is assigned here but never used", b->name);
}

static void bind(parser *P, const char *name, int val, bc_loc loc) {
  binding *b = find_binding(P, name);
  if (b) {
    check_binding_used(P, b);
    *b = (binding){b->name, val, loc, false};
    return;
  }
  if (P->nbinds == P->capbinds) {
    int cap = P->capbinds ? P->capbinds * 2 : 16;
    binding *nb = palloc(P, (size_t)cap * sizeof *nb);
    if (P->binds) memcpy(nb, P->binds, (size_t)P->nbinds * sizeof *nb);
    P->binds = nb;
    P->capbinds = cap;
  }
  P->binds[P->nbinds++] = (binding){name, val, loc, false};
}

// NAME "=" value
static void assign_stmt(parser *P) {
  bc_token *nt = expect_name(P, "a name");
  const char *name = tok_str(P, nt);
  intsym *s = find_sym(P, name);
  if (s)
    error_at(P, nt->loc, "'%s' is already a %s and cannot be bound to a value", name,
             s->loopvar ? "loop variable" : "dim");
  expect(P, "=", bc_fmt(P->ctx, "after '%s'", name));
  P->defining = name;
  int v = parse_value(P);
  P->defining = NULL;
  if (!P->g->vals[v].name[0]) P->g->vals[v].name = name;
  bind(P, name, v, nt->loc);
}

static void dim_stmt(parser *P) {
  next(P);
  bc_token *nt = expect_name(P, "a dim name");
  const char *name = tok_str(P, nt);
  intsym *s = find_sym(P, name);
  if (s) {
    bc_error_at(P->ctx, nt->loc, "%s '%s' is already defined", s->loopvar ? "loop variable" : "dim",
                name);
    bc_note_at(P->ctx, s->loc, "'%s' was defined here", name);
    bail(P);
  }
  if (find_binding(P, name)) error_at(P, nt->loc, "'%s' is already a value name", name);
  expect(P, "=", "after the dim name");
  int64_t v = size_expr(P, bc_fmt(P->ctx, "dim %s", name));
  bool overridden = false;
  for (int i = 0; i < P->ndefs; i++)
    if (strcmp(P->defs[i].name, name) == 0) {
      v = P->defs[i].value;
      if (v <= 0 || v > BC_MAX_DIM) {
        bc_error(P->ctx, BC_EINPUT, "error: -D %s=%lld: dims must be between 1 and %lld", name,
                 (long long)v, (long long)BC_MAX_DIM);
        bail(P);
      }
      P->def_used[i] = true;
      overridden = true;
    }
  push_sym(P, name, v, false, nt->loc);
  bc_graph *g = P->g;
  bc_dim *dims = palloc(P, (size_t)(g->ndims + 1) * sizeof *dims);
  if (g->ndims) memcpy(dims, g->dims, (size_t)g->ndims * sizeof *dims);
  dims[g->ndims++] = (bc_dim){name, v, nt->loc, overridden, -1};
  g->dims = dims;
}

static void input_stmt(parser *P) {
  bc_token *kw = next(P);
  bc_token *nt = expect_name(P, "the input's name");
  const char *name = tok_str(P, nt);
  if (P->g->input >= 0) error_at(P, kw->loc, "a graph has exactly one input; '%s' is a second", name);
  if (find_sym(P, name)) error_at(P, nt->loc, "'%s' is already a dim", name);
  expect(P, ":", "after the input name (input x : [B, T, D])");
  bc_token *lb = expect(P, "[", "to start the input shape");
  bc_shape s = {.rank = 0, .d = {0}};
  for (;;) {
    if (s.rank == 3)
      error_at(P, peek(P)->loc, "input must be [B, T, D] or [T, D]; rank above 3");
    s.d[s.rank++] = size_expr(P, "an input dimension");
    if (!at(P, ",")) break;
    next(P);
  }
  expect(P, "]", "to close the input shape");
  if (s.rank < 2) error_at(P, lb->loc, "input must be [B, T, D] or [T, D], found rank %d", s.rank);
  checked_numel(P, lb->loc, &s, "input shape");
  int v = bcI_add_value(P->g, name, s, BC_VAL_INPUT);
  if (v < 0) bail(P);
  if (bcI_add_input(P->g, v) < 0) bail(P);
  bind(P, name, v, nt->loc);
}

static void output_stmt(parser *P) {
  bc_token *kw = next(P);
  if (P->have_output) error_at(P, kw->loc, "a graph has exactly one output statement");
  bool named = peek(P)->kind == BC_TK_IDENT && !bcL_is(peek2(P), "(");
  const char *name = named ? tok_str(P, peek(P)) : "y";
  int v = parse_value(P);
  if (bcI_add_output(P->g, v, name) < 0) bail(P);
  P->have_output = true;
}

static void stmt(parser *P);

// "for" IDENT "in" iexpr ".." iexpr [ "as" path ] "{" { stmt } "}"
static void for_stmt(parser *P) {
  bc_token *kw = next(P);
  enter(P, kw->loc);
  bc_token *vt = expect_name(P, "a loop variable");
  const char *var = tok_str(P, vt);
  intsym *s = find_sym(P, var);
  if (s) error_at(P, vt->loc, "loop variable '%s' shadows the %s '%s'", var,
                  s->loopvar ? "loop variable" : "dim", var);
  if (find_binding(P, var)) error_at(P, vt->loc, "'%s' is already a value name", var);
  expect(P, "in", "after the loop variable");
  bc_loc rloc = peek(P)->loc;
  int64_t lo = iexpr(P);
  expect(P, "..", "in the loop range (lo..hi)");
  int64_t hi = iexpr(P);
  if (hi <= lo) error_at(P, rloc, "loop range %lld..%lld is empty", (long long)lo, (long long)hi);
  if (hi - lo > MAX_LOOP_TRIPS)
    error_at(P, rloc, "loop runs %lld times, over the limit of %d", (long long)(hi - lo),
             MAX_LOOP_TRIPS);
  int as_pos = -1;
  if (at(P, "as")) {
    next(P);
    as_pos = P->pos;
    push_sym(P, var, lo, true, vt->loc);  // so the path can be checked now
    path(P);
    P->nsyms--;
  }
  expect(P, "{", "to start the loop body");
  int body = P->pos;
  const char *outer = P->prefix;
  int end = -1;
  for (int64_t i = lo; i < hi; i++) {
    push_sym(P, var, i, true, vt->loc);
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
    P->nsyms--;
  }
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
  P->g->model = tok_str(P, expect_name(P, "the model name"));
  while (peek(P)->kind != BC_TK_EOF) stmt(P);
  bc_loc eof = peek(P)->loc;
  if (P->g->input < 0) error_at(P, eof, "the graph has no 'input' statement");
  if (!P->have_output) error_at(P, eof, "the graph has no 'output' statement");
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
  src->len = strlen(text);
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
