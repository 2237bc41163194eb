// emit.c — C emission: a planned graph becomes one straight-line C function.
//
// The generated function is a flat sequence of cblas_sgemm calls and calls to
// the precompiled kernels of runtime/blockc_rt.h, one commented section per
// node.  Every size, stride and arena offset is a literal, so the only run-
// time arithmetic left is the pointer step of the per-head loop.  The code
// must compile warning-free under tcc (JIT), gcc and clang (AOT), so it
// includes no system header: JIT builds declare the few prototypes they use.
//
// Nothing read from the graph file reaches the output unchecked.  Code only
// contains identifiers built here (param names are mangled after a character
// check, everything else is a number), and graph text that lands in a
// comment is sanitised so it cannot end the comment or splice a line.
#include "bc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// --- output buffer ----------------------------------------------------------

typedef struct {
  char *p;
  size_t len, cap;
  bool oom;
} sbuf;

static void sb_vadd(sbuf *b, const char *fmt, va_list ap) {
  if (b->oom) return;
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) { b->oom = true; return; }
  if (b->p && b->len + (size_t)n < b->cap) { b->len += (size_t)n; return; }
  size_t ncap = b->cap ? b->cap : 1 << 16;
  while (ncap <= b->len + (size_t)n) ncap *= 2;
  char *np = realloc(b->p, ncap);
  if (!np) { b->oom = true; return; }
  b->p = np;
  b->cap = ncap;
  vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
  b->len += (size_t)n;
}

static void sb_add(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(sbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sb_vadd(b, fmt, ap);
  va_end(ap);
}

// --- emitter state ----------------------------------------------------------

typedef struct {
  bc_ctx *ctx;
  const bc_graph *g;
  const bc_emit_opts *o;
  sbuf b;
  const char **wexpr;   // per param: "W_layers_0_linear1_weight" or "w[7]"
  bool *wmacro;         // true when wexpr is a macro we #define (and #undef)
  const char **field;   // AOT: the weights-struct member of each param
  const char *upper;    // AOT: the model name upper-cased (macro prefix)
  int err;              // first error status; emission stops producing code
} emitter;

static int fail(emitter *E, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(emitter *E, const char *fmt, ...) {
  if (E->err) return E->err;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  E->err = bc_error(E->ctx, BC_EINTERNAL, "internal error: emit-c: %s", msg);
  return E->err;
}

// Graph text may contain anything the lexer let through (and a hostile
// path).  A // comment ends only at a newline, but a backslash (or the
// trigraph ??/) before that newline would splice the next generated line
// into the comment, so those go too, as does every byte that is not
// printable ASCII.  '*' and '/' next to each other are broken up so that
// gcc's -Wcomment has nothing to say.
static void sanitize(char *s) {
  for (char *p = s; *p; p++) {
    unsigned char c = (unsigned char)*p;
    if (c < 0x20 || c > 0x7e || c == '\\' || c == '?') *p = '_';
    else if (c == '*' && (p[1] == '/' || (p > s && p[-1] == '/'))) *p = '_';
  }
}

static void comment(emitter *E, const char *indent, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void comment(emitter *E, const char *indent, const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  sanitize(line);
  sb_add(&E->b, "%s// %s\n", indent, line);
}

// A float literal that reads back as exactly (float)v in any C compiler:
// %.9g round-trips every float; a '.0' keeps "1" from becoming the invalid
// token "1f".
static const char *flit(emitter *E, double v, char *buf, size_t n) {
  float f = (float)v;
  if (!isfinite(f)) {
    fail(E, "non-finite constant %g", v);
    snprintf(buf, n, "0.0f");
    return buf;
  }
  snprintf(buf, n, "%.9g", (double)f);
  if (!strpbrk(buf, ".e")) strncat(buf, ".0", n - strlen(buf) - 1);
  strncat(buf, "f", n - strlen(buf) - 1);
  return buf;
}

// Checks that a size passed as a C int in generated code fits one.
static int64_t ck_int(emitter *E, int64_t v, const char *what) {
  if (v < 0 || v > 0x7fffffff) fail(E, "%s = %lld does not fit a 32-bit int", what, (long long)v);
  return v;
}

// --- values and parameters --------------------------------------------------

// Where value v lives, as a C expression: x, y, or ws + <offset>.  Every
// arena range is checked against the arena size, so a planner bug is an
// error here rather than an out-of-bounds write in generated code.
static const char *vptr(emitter *E, int v, char *buf, size_t n) {
  const bc_graph *g = E->g;
  snprintf(buf, n, "ws");
  if (v < 0 || v >= g->nvals) { fail(E, "bad value id %d", v); return buf; }
  const bc_value *val = &g->vals[v];
  if (v == g->input) { snprintf(buf, n, "x"); return buf; }
  if (v == g->output && val->offset >= 0) {
    fail(E, "graph output %%%d was given an arena offset; it must live in y", v);
    return buf;
  }
  if (val->offset < 0) {
    if (val->is_output || v == g->output) snprintf(buf, n, "y");
    else fail(E, "value %%%d has no arena offset", v);
    return buf;
  }
  int64_t numel = bc_shape_numel(&val->shape);
  if (val->offset + numel > g->arena_floats)
    fail(E, "value %%%d [%lld, %lld) lies outside the %lld-float arena", v,
         (long long)val->offset, (long long)(val->offset + numel), (long long)g->arena_floats);
  snprintf(buf, n, "ws + %lld", (long long)val->offset);
  return buf;
}

static int64_t numel_of(const emitter *E, int v) {
  return (v >= 0 && v < E->g->nvals) ? bc_shape_numel(&E->g->vals[v].shape) : 0;
}

// Row width (last dimension) of value v; rows = numel / width.
static int64_t width_of(const emitter *E, int v) {
  if (v < 0 || v >= E->g->nvals) return 1;
  const bc_shape *s = &E->g->vals[v].shape;
  return s->rank ? s->d[s->rank - 1] : 1;
}

// The C expression for param slot k of node n, or "0" (a null pointer
// constant) when absent; `need` floats must exist.
static const char *wptr(emitter *E, const bc_node *n, int k, int64_t need) {
  int p = n->param[k];
  if (p < 0) return "0";
  if (p >= E->g->nparams) { fail(E, "node %d: bad param id %d", n->id, p); return "0"; }
  int64_t have = bc_shape_numel(&E->g->params[p].shape);
  if (have != need)
    fail(E, "node %d: param %d has %lld elements, the kernel reads %lld", n->id, p,
         (long long)have, (long long)need);
  return E->wexpr[p];
}

// A param name becomes W_<name with '.' -> '_'> when every byte is in
// [A-Za-z0-9_.]; otherwise, or when two names mangle to the same
// identifier ("a.b" vs "a_b"), or the name is too long to be significant in
// every compiler (C99 promises 63 characters), the code says w[<index>].
typedef struct { const char *id; int param; } mangled;

static int cmp_mangled(const void *a, const void *b) {
  const mangled *x = a, *y = b;
  int c = strcmp(x->id, y->id);
  return c ? c : x->param - y->param;
}

static const char *mangle(emitter *E, const char *name) {
  size_t n = strlen(name);
  if (n == 0 || n > 60) return NULL;
  char *id = bc_alloc(E->ctx, n + 3);
  if (!id) return NULL;
  memcpy(id, "W_", 2);
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.';
    if (!ok) return NULL;
    id[2 + i] = c == '.' ? '_' : c;
  }
  return id;
}

static int name_params(emitter *E) {
  int np = E->g->nparams;
  E->wexpr = bc_alloc(E->ctx, (size_t)(np ? np : 1) * sizeof *E->wexpr);
  E->wmacro = bc_alloc(E->ctx, (size_t)(np ? np : 1) * sizeof *E->wmacro);
  mangled *m = calloc((size_t)(np ? np : 1), sizeof *m);
  if (!E->wexpr || !E->wmacro || !m) {
    free(m);
    return E->err = bc_error(E->ctx, BC_ENOMEM, "error: out of memory");
  }
  int nm = 0;
  for (int i = 0; i < np; i++) {
    const char *id = mangle(E, E->g->params[i].name);
    if (id) m[nm++] = (mangled){id, i};
  }
  qsort(m, (size_t)nm, sizeof *m, cmp_mangled);
  for (int i = 0; i < nm; i++) {
    bool dup = (i > 0 && strcmp(m[i].id, m[i - 1].id) == 0) ||
               (i + 1 < nm && strcmp(m[i].id, m[i + 1].id) == 0);
    if (!dup) {
      E->wexpr[m[i].param] = m[i].id;
      E->wmacro[m[i].param] = true;
    }
  }
  free(m);
  for (int i = 0; i < np; i++) {
    if (!E->wexpr[i]) E->wexpr[i] = bc_fmt(E->ctx, "w[%d]", i);
    if (!E->wexpr[i]) return E->err = bc_error(E->ctx, BC_ENOMEM, "error: out of memory");
  }
  return BC_OK;
}

// --- the file prologue ------------------------------------------------------

// The declarations of runtime/blockc_rt.h that generated code uses, spelled
// exactly as there (test_emit checks they stay compatible).  JIT builds
// carry them inline because tcc must not read system or OpenBLAS headers.
static const char rt_decls[] =
    "#define BCRT_ACT_RELU 0\n"
    "#define BCRT_ACT_GELU 1\n"
    "#define BCRT_ACT_GELU_TANH 2\n"
    "#define BCRT_ROW_MAJOR 101\n"
    "#define BCRT_NO_TRANS 111\n"
    "#define BCRT_TRANS 112\n"
    "void cblas_sgemm(int order, int transa, int transb, int m, int n, int k,\n"
    "                 float alpha, const float *a, int lda, const float *b, int ldb,\n"
    "                 float beta, float *c, int ldc);\n"
    "void bcrt_fill_rows(int n, int d, const float *bias, float *y);\n"
    "void bcrt_bias_act(int n, int d, const float *bias, int act, float *y);\n"
    "void bcrt_add(long n, float alpha, const float *a, float beta, const float *b, float *y);\n"
    "void bcrt_copy(long n, const float *x, float *y);\n"
    "void bcrt_layernorm(int n, int d, const float *x, const float *w, const float *b,\n"
    "                    float eps, float *y);\n"
    "void bcrt_add_layernorm(int n, int d, float alpha, const float *a, float beta,\n"
    "                        const float *b, const float *w, const float *bias, float eps,\n"
    "                        float *sum, float *y);\n"
    "void bcrt_dual_add_layernorm(int n, int d, float a0, const float *xd, float b0,\n"
    "                             float a1, const float *xa, float b1, const float *u,\n"
    "                             const float *w, const float *bias, float eps,\n"
    "                             float *xd_out, float *xa_out);\n"
    "void bcrt_softmax(int n, int d, int ld, int causal, int row0, float *s);\n";

static bool is_ident(const char *s, size_t max) {
  size_t n = strlen(s);
  if (n == 0 || n > max) return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

// --- AOT naming ---------------------------------------------------------------

// AOT code names each weight as a member of the <model>_weights struct.
// Members reuse the JIT's mangled name without its W_ prefix, so that must
// also be a member name a user can write: not starting with a digit or an
// underscore (reserved), not a C or C++ keyword, and not of the form
// p<digits>, which is how every other param is named (p<index>, unique by
// construction, so the two schemes can never collide).
static bool is_keyword(const char *s) {
  static const char *const kw[] = {
      "auto", "break", "case", "char", "const", "continue", "default", "do", "double",
      "else", "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long",
      "register", "restrict", "return", "short", "signed", "sizeof", "static", "struct",
      "switch", "typedef", "union", "unsigned", "void", "volatile", "while", "alignas",
      "alignof", "bool", "constexpr", "false", "nullptr", "static_assert", "thread_local",
      "true", "typeof", "typeof_unqual", "asm", "class", "delete", "friend", "mutable",
      "namespace", "new", "operator", "private", "protected", "public", "template", "this",
      "throw", "try", "catch", "typename", "using", "virtual", "explicit", "export",
      "and", "or", "not", "xor", "compl", "bitand", "bitor", "noexcept", "decltype",
      "concept", "requires", "wchar_t", "char8_t", "char16_t", "char32_t"};
  for (size_t i = 0; i < sizeof kw / sizeof kw[0]; i++)
    if (!strcmp(s, kw[i])) return true;
  return false;
}

static bool is_p_index(const char *s) {
  if (s[0] != 'p' || !s[1]) return false;
  for (const char *q = s + 1; *q; q++)
    if (*q < '0' || *q > '9') return false;
  return true;
}

static int name_fields(emitter *E) {
  const bc_graph *g = E->g;
  int np = g->nparams;
  E->field = bc_alloc(E->ctx, (size_t)(np ? np : 1) * sizeof *E->field);
  size_t ml = strlen(g->model);
  char *up = bc_alloc(E->ctx, ml + 1);
  if (!E->field || !up) return E->err = bc_error(E->ctx, BC_ENOMEM, "error: out of memory");
  for (size_t i = 0; i < ml; i++)
    up[i] = (g->model[i] >= 'a' && g->model[i] <= 'z') ? (char)(g->model[i] - 'a' + 'A') : g->model[i];
  E->upper = up;
  for (int i = 0; i < np; i++) {
    const char *m = E->wmacro[i] ? E->wexpr[i] + 2 : NULL;  // skip "W_"
    bool ok = m && ((m[0] >= 'a' && m[0] <= 'z') || (m[0] >= 'A' && m[0] <= 'Z')) &&
              !is_keyword(m) && !is_p_index(m);
    E->field[i] = ok ? m : bc_fmt(E->ctx, "p%d", i);
    if (!E->field[i]) return E->err = bc_error(E->ctx, BC_ENOMEM, "error: out of memory");
    // The code reads members directly: no macros in AOT builds.
    E->wexpr[i] = bc_fmt(E->ctx, "w->%s", E->field[i]);
    E->wmacro[i] = false;
    if (!E->wexpr[i]) return E->err = bc_error(E->ctx, BC_ENOMEM, "error: out of memory");
  }
  return BC_OK;
}

// A C string literal for s.  Param names are [A-Za-z0-9_.] in practice,
// but anything else is escaped as three-digit octal (so a following digit
// cannot extend the escape), and '?' too (trigraphs).
static void str_lit(sbuf *b, const char *s) {
  sb_add(b, "\"");
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p < 0x20 || *p > 0x7e || *p == '"' || *p == '\\' || *p == '?') sb_add(b, "\\%03o", *p);
    else sb_add(b, "%c", *p);
  }
  sb_add(b, "\"");
}

// Dim macros are <MODEL>_<dim>; these suffixes are taken by the header's
// own macros, so a dim with one of these names is listed in a comment only.
static bool reserved_suffix(const char *s) {
  static const char *const r[] = {"OK", "EINVAL", "NPARAMS", "WORKSPACE_BYTES",
                                  "WORKSPACE_ALIGN", "IN_NUMEL", "OUT_NUMEL", "IN_RANK",
                                  "OUT_RANK"};
  for (size_t i = 0; i < sizeof r / sizeof r[0]; i++)
    if (!strcmp(s, r[i])) return true;
  return false;
}

// AOT .c prologue: the parameter table the header declares, and a
// compile-time proof that the weights struct is laid out exactly like the
// JIT's `const float *w[NPARAMS]` (negative array size otherwise; C99 has
// no _Static_assert).
static void emit_aot_tables(emitter *E) {
  const bc_graph *g = E->g;
  sbuf *b = &E->b;
  const char *m = g->model, *M = E->upper;
  sb_add(b, "typedef char %s_layout_check_[sizeof(%s_weights) == "
            "(%s_NPARAMS ? %s_NPARAMS : 1) * sizeof(const float *) ? 1 : -1];\n\n",
         m, m, M, M);
  sb_add(b, "const %s_param_info %s_params[%s_NPARAMS ? %s_NPARAMS : 1] = {\n", m, m, M, M);
  for (int i = 0; i < g->nparams; i++) {
    const bc_shape *sh = &g->params[i].shape;
    sb_add(b, "  {");
    str_lit(b, g->params[i].name);
    sb_add(b, ", %d, {", sh->rank);
    for (int k = 0; k < BC_MAX_RANK; k++)
      sb_add(b, "%s%lld", k ? ", " : "", (long long)(k < sh->rank ? sh->d[k] : 0));
    sb_add(b, "}},\n");
  }
  if (g->nparams == 0) sb_add(b, "  {0, 0, {0, 0, 0, 0}}  /* placeholder: no parameters */\n");
  sb_add(b, "};\n\n");
}

static void emit_header(emitter *E) {
  const bc_graph *g = E->g;
  sbuf *b = &E->b;
  comment(E, "", "Generated by blockc %s from %s -- do not edit.", BC_VERSION, g->path);
  comment(E, "", "model %s: %d nodes, %d parameter tensors, workspace %lld floats (%.1f MiB)",
          g->model, g->nnodes, g->nparams, (long long)g->arena_floats,
          (double)g->arena_floats * 4.0 / (1 << 20));
  char dims[900] = "";
  for (int i = 0; i < g->ndims; i++) {
    size_t l = strlen(dims);
    snprintf(dims + l, sizeof dims - l, " %s=%lld", g->dims[i].name, (long long)g->dims[i].value);
  }
  comment(E, "", "dims%s", dims);
  if (E->o->profile)
    comment(E, "", "profile build: prof(pctx, i) runs before node i and prof(pctx, %d) at the end",
            g->nnodes);
  if (E->o->gemm_only)
    comment(E, "", "gemm-only build: the GEMM sequence alone (benchmark floor), NOT a model");
  sb_add(b, "\n");
  if (E->o->aot) {
    sb_add(b, "#include \"blockc_rt.h\"\n#include \"%s.h\"\n\n", g->model);
    emit_aot_tables(E);
    return;
  }
  sb_add(b, "%s\n", rt_decls);
  // Dims as named constants for the reader (the code uses literals).  Only
  // names that are C identifiers become DIM_<name>; the rest stay in the
  // comment above.
  bool any = false;
  for (int i = 0; i < g->ndims; i++) {
    const bc_dim *d = &g->dims[i];
    if (!is_ident(d->name, BC_MAX_IDENT) || d->value < 0 || d->value > 0x7fffffff) continue;
    bool dup = false;
    for (int j = 0; j < i; j++) dup |= strcmp(g->dims[j].name, d->name) == 0;
    if (dup) continue;
    sb_add(b, any ? ", DIM_%s = %lld" : "enum { DIM_%s = %lld", d->name, (long long)d->value);
    any = true;
  }
  if (any) sb_add(b, " };\n\n");
  comment(E, "", "Named weights: w[] holds one pointer per parameter in param-id order%s.",
          E->o->aot ? " (the AOT weights struct has the same layout)" : "");
  for (int i = 0; i < g->nparams; i++) {
    char shp[96];
    bc_shape_str(&g->params[i].shape, shp, sizeof shp);
    if (E->wmacro[i]) sb_add(b, "#define %s w[%d]", E->wexpr[i], i);
    else sb_add(b, "/* w[%d] */", i);
    comment(E, " ", "%s %s", g->params[i].name, shp);
  }
  sb_add(b, "\n");
}

// --- nodes ------------------------------------------------------------------

static void node_comment(emitter *E, const bc_node *n) {
  const bc_graph *g = E->g;
  char where[400] = "";
  if (n->loc.src)
    snprintf(where, sizeof where, "%s:%d:%d", n->loc.src->path, n->loc.line, n->loc.col);
  sb_add(&E->b, "\n");
  comment(E, "  ", "---- n%d: %s  %s%s%s", n->id, bcI_op_name(n->op), where,
          n->fused_from ? "  fused: " : "", n->fused_from ? n->fused_from : "");
  char line[900];
  size_t l = 0;
  line[0] = '\0';
  for (int k = 0; k < n->nout && l < sizeof line; k++) {
    int v = n->out[k];
    char shp[96] = "";
    if (v >= 0 && v < g->nvals) bc_shape_str(&g->vals[v].shape, shp, sizeof shp);
    l += (size_t)snprintf(line + l, sizeof line - l, "%s%%%d %s %s", k ? ", " : "", v,
                          v >= 0 && v < g->nvals ? g->vals[v].name : "_", shp);
  }
  if (l < sizeof line) l += (size_t)snprintf(line + l, sizeof line - l, " = %s(", bcI_op_name(n->op));
  for (int k = 0; k < n->nin && l < sizeof line; k++)
    l += (size_t)snprintf(line + l, sizeof line - l, "%s%%%d", k ? ", " : "", n->in[k]);
  if (l < sizeof line) l += (size_t)snprintf(line + l, sizeof line - l, ")");
  switch (n->op) {
  case BC_OP_ATTENTION:
    if (l < sizeof line)
      snprintf(line + l, sizeof line - l, " heads=%lld causal=%s", (long long)n->heads,
               n->causal ? "true" : "false");
    break;
  case BC_OP_FFN:
    if (l < sizeof line)
      snprintf(line + l, sizeof line - l, " hidden=%lld act=%s", (long long)n->hidden,
               bcI_act_name(n->act));
    break;
  case BC_OP_ADD: break;
  default:
    if (l < sizeof line) snprintf(line + l, sizeof line - l, " eps=%.9g", n->eps);
    break;
  }
  comment(E, "  ", "%s", line);
  for (int k = 0; k < BC_MAX_NODE_PARAMS; k++)
    if (n->param[k] >= 0 && n->param[k] < g->nparams)
      comment(E, "  ", "  %s = %s", E->wexpr[n->param[k]], g->params[n->param[k]].name);
}

// Elementwise ops: all operands must have the output's element count.
static bool same_numel(emitter *E, const bc_node *n, int nin) {
  int64_t want = numel_of(E, n->out[0] >= 0 ? n->out[0] : n->out[1]);
  for (int k = 0; k < nin; k++)
    if (numel_of(E, n->in[k]) != want) {
      fail(E, "node %d: operand %d has %lld elements, expected %lld", n->id, k,
           (long long)numel_of(E, n->in[k]), (long long)want);
      return false;
    }
  for (int k = 0; k < n->nout; k++)
    if (n->out[k] >= 0 && numel_of(E, n->out[k]) != want) {
      fail(E, "node %d: output %d has the wrong size", n->id, k);
      return false;
    }
  return true;
}

static void emit_add(emitter *E, const bc_node *n) {
  if (E->o->gemm_only || !same_numel(E, n, 2)) return;
  char a[64], b[64], y[64], fa[32], fb[32];
  sb_add(&E->b, "  bcrt_add(%lld, %s, %s, %s, %s, %s);\n", (long long)numel_of(E, n->out[0]),
         flit(E, n->alpha, fa, sizeof fa), vptr(E, n->in[0], a, sizeof a),
         flit(E, n->beta, fb, sizeof fb), vptr(E, n->in[1], b, sizeof b),
         vptr(E, n->out[0], y, sizeof y));
}

static void emit_layernorm(emitter *E, const bc_node *n) {
  if (E->o->gemm_only || !same_numel(E, n, 1)) return;
  int64_t d = ck_int(E, width_of(E, n->out[0]), "row width");
  int64_t rows = ck_int(E, numel_of(E, n->out[0]) / (d ? d : 1), "rows");
  char x[64], y[64], fe[32];
  sb_add(&E->b, "  bcrt_layernorm(%lld, %lld, %s, %s, %s, %s, %s);\n", (long long)rows,
         (long long)d, vptr(E, n->in[0], x, sizeof x), wptr(E, n, 0, d), wptr(E, n, 1, d),
         flit(E, n->eps, fe, sizeof fe), vptr(E, n->out[0], y, sizeof y));
}

static void emit_add_ln(emitter *E, const bc_node *n) {
  if (E->o->gemm_only || !same_numel(E, n, 2)) return;
  int64_t d = ck_int(E, width_of(E, n->out[0]), "row width");
  int64_t rows = ck_int(E, numel_of(E, n->out[0]) / (d ? d : 1), "rows");
  char a[64], b[64], s[64] = "0", y[64], fa[32], fb[32], fe[32];
  if (n->nout > 1 && n->out[1] >= 0) vptr(E, n->out[1], s, sizeof s);
  sb_add(&E->b, "  bcrt_add_layernorm(%lld, %lld, %s, %s, %s, %s, %s, %s, %s, %s, %s);\n",
         (long long)rows, (long long)d, flit(E, n->alpha, fa, sizeof fa),
         vptr(E, n->in[0], a, sizeof a), flit(E, n->beta, fb, sizeof fb),
         vptr(E, n->in[1], b, sizeof b), wptr(E, n, 0, d), wptr(E, n, 1, d),
         flit(E, n->eps, fe, sizeof fe), s, vptr(E, n->out[0], y, sizeof y));
}

// ResiDual: out0 = alpha*in0 + beta*in2 and out1 = LN(alpha2*in1 + beta2*in2).
// If a pass dropped one output, the node degrades to the kernel for the other.
static void emit_dual(emitter *E, const bc_node *n) {
  if (E->o->gemm_only || !same_numel(E, n, 3)) return;
  int ref = n->out[1] >= 0 ? n->out[1] : n->out[0];
  int64_t d = ck_int(E, width_of(E, ref), "row width");
  int64_t rows = ck_int(E, numel_of(E, ref) / (d ? d : 1), "rows");
  char xd[64], xa[64], u[64], od[64], oa[64], f0[32], f1[32], f2[32], f3[32], fe[32];
  vptr(E, n->in[0], xd, sizeof xd);
  vptr(E, n->in[1], xa, sizeof xa);
  vptr(E, n->in[2], u, sizeof u);
  flit(E, n->alpha, f0, sizeof f0);
  flit(E, n->beta, f1, sizeof f1);
  flit(E, n->alpha2, f2, sizeof f2);
  flit(E, n->beta2, f3, sizeof f3);
  flit(E, n->eps, fe, sizeof fe);
  const char *w = wptr(E, n, 0, d), *bias = wptr(E, n, 1, d);
  if (n->out[0] >= 0 && n->out[1] >= 0)
    sb_add(&E->b,
           "  bcrt_dual_add_layernorm(%lld, %lld, %s, %s, %s,\n"
           "                          %s, %s, %s, %s,\n"
           "                          %s, %s, %s, %s, %s);\n",
           (long long)rows, (long long)d, f0, xd, f1, f2, xa, f3, u, w, bias, fe,
           vptr(E, n->out[0], od, sizeof od), vptr(E, n->out[1], oa, sizeof oa));
  else if (n->out[1] >= 0)
    sb_add(&E->b, "  bcrt_add_layernorm(%lld, %lld, %s, %s, %s, %s, %s, %s, %s, 0, %s);\n",
           (long long)rows, (long long)d, f2, xa, f3, u, w, bias, fe,
           vptr(E, n->out[1], oa, sizeof oa));
  else if (n->out[0] >= 0)
    sb_add(&E->b, "  bcrt_add(%lld, %s, %s, %s, %s, %s);\n", (long long)numel_of(E, n->out[0]),
           f0, xd, f1, u, vptr(E, n->out[0], od, sizeof od));
}

// A linear layer y[m, n] = x[m, k] W[n, k]^T (+ y when beta = 1).
static void gemm_nt(emitter *E, const char *ind, int64_t m, int64_t nn, int64_t k, const char *x,
                    const char *w, const char *beta, const char *y) {
  sb_add(&E->b,
         "%scblas_sgemm(BCRT_ROW_MAJOR, BCRT_NO_TRANS, BCRT_TRANS, %lld, %lld, %lld,\n"
         "%s            1.0f, %s, %lld, %s, %lld, %s, %s, %lld);\n",
         ind, (long long)m, (long long)nn, (long long)k, ind, x, (long long)k, w, (long long)k,
         beta, y, (long long)nn);
}

// Bias via the output: rows <- bias, then the GEMM accumulates (beta = 1).
// Cheaper than a separate epilogue pass when there is no activation
// (runtime has no bias-only epilogue, and this touches y once before the
// GEMM instead of once after).
static void linear_bias(emitter *E, int64_t m, int64_t nn, int64_t k, const char *x,
                        const char *w, const char *bias, const char *y) {
  bool has_b = strcmp(bias, "0") != 0;
  if (has_b && !E->o->gemm_only)
    sb_add(&E->b, "  bcrt_fill_rows(%lld, %lld, %s, %s);\n", (long long)m, (long long)nn, bias, y);
  gemm_nt(E, "  ", m, nn, k, x, w, has_b ? "1.0f" : "0.0f", y);
}

// Rows per block for causal attention.  Rows [r0, r1) only attend to keys
// [0, r1), so splitting the T query rows into nb blocks skips the masked
// upper triangle: (nb + 1) / (2 nb) of the full score and PV work, at the
// price of smaller GEMMs.  Measured on one Attention node (D=512, H=8, one
// OpenBLAS thread, best of 40), unblocked -> 4 blocks:
//   T=256: 4.83 -> 4.55 ms   T=512: 11.65 -> 10.52 ms   T=1024: 33.1 -> 28.7 ms
// Blocks under 64 rows lose more in GEMM efficiency than they save (T=1024
// with 32-row blocks: 32.6 ms), and at T=128 every choice measured the same.
static int64_t causal_block_rows(int64_t T) {
  int64_t rb = (T + 3) / 4;
  rb = (rb + 15) / 16 * 16;
  if (rb < 64) rb = 64;
  return rb < T ? rb : T;
}

static bool scratch_ok(emitter *E, const bc_node *n, int k, int64_t need) {
  if (k >= n->nscratch || n->scratch[k] < 0 || numel_of(E, n->scratch[k]) < need) {
    fail(E, "node %d (%s): scratch %d missing or smaller than %lld floats", n->id,
         bcI_op_name(n->op), k, (long long)need);
    return false;
  }
  return true;
}

// Head loop body for one batch row block: S = scale Q K^T, softmax, O = P V.
static void attn_block(emitter *E, int64_t r0, int64_t r1, int64_t T, int64_t D, int64_t dh,
                       bool causal, const char *scale) {
  int64_t m = r1 - r0, kv = causal ? r1 : T;
  sb_add(&E->b,
         "      cblas_sgemm(BCRT_ROW_MAJOR, BCRT_NO_TRANS, BCRT_TRANS, %lld, %lld, %lld,\n"
         "                  %s, q + %lld, %lld, q + %lld, %lld, 0.0f, s + %lld, %lld);\n",
         (long long)m, (long long)kv, (long long)dh, scale, (long long)(r0 * 3 * D),
         (long long)(3 * D), (long long)D, (long long)(3 * D), (long long)(r0 * T), (long long)T);
  if (!E->o->gemm_only)
    sb_add(&E->b, "      bcrt_softmax(%lld, %lld, %lld, %d, %lld, s + %lld);\n", (long long)m,
           (long long)kv, (long long)T, causal ? 1 : 0, (long long)r0, (long long)(r0 * T));
  sb_add(&E->b,
         "      cblas_sgemm(BCRT_ROW_MAJOR, BCRT_NO_TRANS, BCRT_NO_TRANS, %lld, %lld, %lld,\n"
         "                  1.0f, s + %lld, %lld, q + %lld, %lld, 0.0f, o + %lld, %lld);\n",
         (long long)m, (long long)dh, (long long)kv, (long long)(r0 * T), (long long)T,
         (long long)(2 * D), (long long)(3 * D), (long long)(r0 * D), (long long)D);
}

// Multi-head attention without copies.  Scratch (from the planner):
//   0: qkv [B*T, 3D]   packed projections, Q | K | V column blocks
//   1: o   [B*T, D]    head outputs, head h in columns [h*dh, (h+1)*dh)
//   2: s   [T, T] or more: one head's scores, reused across heads
// Heads are strided views (ld = 3D) into qkv, so no transposes or copies.
static void emit_attention(emitter *E, const bc_node *n) {
  const bc_shape *sh = &E->g->vals[n->in[0]].shape;
  if (sh->rank < 2 || sh->rank > 3) { fail(E, "node %d: Attention input rank %d", n->id, sh->rank); return; }
  int64_t B = sh->rank == 3 ? sh->d[0] : 1, T = sh->d[sh->rank - 2], D = sh->d[sh->rank - 1];
  int64_t H = n->heads;
  if (H <= 0 || D % H || numel_of(E, n->out[0]) != B * T * D) { fail(E, "node %d: bad Attention shape", n->id); return; }
  int64_t dh = D / H, BT = B * T;
  ck_int(E, BT, "B*T");
  ck_int(E, 3 * D, "3*D");
  ck_int(E, T * T, "T*T");
  if (!scratch_ok(E, n, 0, BT * 3 * D) || !scratch_ok(E, n, 1, BT * D) || !scratch_ok(E, n, 2, T * T))
    return;
  char x[64], y[64], qkv[64], o[64], s[64], scale[32];
  vptr(E, n->in[0], x, sizeof x);
  vptr(E, n->out[0], y, sizeof y);
  vptr(E, n->scratch[0], qkv, sizeof qkv);
  vptr(E, n->scratch[1], o, sizeof o);
  vptr(E, n->scratch[2], s, sizeof s);
  flit(E, 1.0 / sqrt((double)dh), scale, sizeof scale);
  const char *w_in = wptr(E, n, 0, 3 * D * D), *b_in = wptr(E, n, 1, 3 * D);
  const char *w_out = wptr(E, n, 2, D * D), *b_out = wptr(E, n, 3, D);

  linear_bias(E, BT, 3 * D, D, x, w_in, b_in, qkv);
  sb_add(&E->b, "  for (long b = 0; b < %lld; b++) {\n", (long long)B);
  sb_add(&E->b, "    for (long h = 0; h < %lld; h++) {\n", (long long)H);
  sb_add(&E->b, "      const float *q = %s + b * %lld + h * %lld;  // Q_h; K_h at +%lld, V_h at +%lld\n",
         qkv, (long long)(T * 3 * D), (long long)dh, (long long)D, (long long)(2 * D));
  sb_add(&E->b, "      float *o = %s + b * %lld + h * %lld;\n", o, (long long)(T * D), (long long)dh);
  sb_add(&E->b, "      float *s = %s;\n", s);
  int64_t rb = n->causal ? causal_block_rows(T) : T;
  for (int64_t r0 = 0; r0 < T; r0 += rb)
    attn_block(E, r0, r0 + rb < T ? r0 + rb : T, T, D, dh, n->causal, scale);
  sb_add(&E->b, "    }\n  }\n");
  linear_bias(E, BT, D, D, o, w_out, b_out, y);
}

static const char *act_macro(bc_act a) {
  switch (a) {
  case BC_ACT_GELU: return "BCRT_ACT_GELU";
  case BC_ACT_GELU_TANH: return "BCRT_ACT_GELU_TANH";
  default: return "BCRT_ACT_RELU";
  }
}

// FFN: h = act(x W1^T + b1) with bias and activation in one epilogue pass
// after the GEMM, then y = h W2^T + b2.  Scratch 0: h [B*T, hidden].
static void emit_ffn(emitter *E, const bc_node *n) {
  int64_t D = width_of(E, n->in[0]), F = n->hidden;
  int64_t BT = numel_of(E, n->in[0]) / (D ? D : 1);
  if (F <= 0 || numel_of(E, n->out[0]) != BT * D) { fail(E, "node %d: bad FFN shape", n->id); return; }
  ck_int(E, BT, "rows");
  ck_int(E, F, "hidden");
  ck_int(E, D, "width");
  if (!scratch_ok(E, n, 0, BT * F)) return;
  if (n->act < 0 || n->act >= BC_ACT_COUNT) { fail(E, "node %d: bad activation", n->id); return; }
  char x[64], y[64], h[64];
  vptr(E, n->in[0], x, sizeof x);
  vptr(E, n->out[0], y, sizeof y);
  vptr(E, n->scratch[0], h, sizeof h);
  const char *w1 = wptr(E, n, 0, F * D), *b1 = wptr(E, n, 1, F);
  const char *w2 = wptr(E, n, 2, D * F), *b2 = wptr(E, n, 3, D);
  gemm_nt(E, "  ", BT, F, D, x, w1, "0.0f", h);
  if (!E->o->gemm_only)
    sb_add(&E->b, "  bcrt_bias_act(%lld, %lld, %s, %s, %s);\n", (long long)BT, (long long)F, b1,
           act_macro(n->act), h);
  linear_bias(E, BT, D, F, h, w2, b2, y);
}

// Linear: y = x W^T + b, W (K, D); the last dim changes from D to K.
static void emit_linear(emitter *E, const bc_node *n) {
  int64_t D = width_of(E, n->in[0]), K = n->hidden;
  int64_t rows = numel_of(E, n->in[0]) / (D ? D : 1);
  if (K <= 0 || width_of(E, n->out[0]) != K || numel_of(E, n->out[0]) != rows * K) {
    fail(E, "node %d: bad Linear shape", n->id);
    return;
  }
  ck_int(E, rows, "rows");
  ck_int(E, K, "out");
  ck_int(E, D, "width");
  char x[64], y[64];
  vptr(E, n->in[0], x, sizeof x);
  vptr(E, n->out[0], y, sizeof y);
  linear_bias(E, rows, K, D, x, wptr(E, n, 0, K * D), wptr(E, n, 1, K), y);
}

static void emit_node(emitter *E, const bc_node *n) {
  node_comment(E, n);
  for (int k = 0; k < n->nin; k++)
    if (n->in[k] < 0 || n->in[k] >= E->g->nvals) { fail(E, "node %d: bad input", n->id); return; }
  if (n->nout < 1 || (n->out[0] < 0 && (n->nout < 2 || n->out[1] < 0))) { fail(E, "node %d: no output", n->id); return; }
  if (E->o->profile) sb_add(&E->b, "  prof(pctx, %d);\n", n->id);
  switch (n->op) {
  case BC_OP_ADD: emit_add(E, n); break;
  case BC_OP_LAYERNORM: emit_layernorm(E, n); break;
  case BC_OP_ADD_LN: emit_add_ln(E, n); break;
  case BC_OP_DUAL_ADD_LN: emit_dual(E, n); break;
  case BC_OP_ATTENTION: emit_attention(E, n); break;
  case BC_OP_FFN: emit_ffn(E, n); break;
  case BC_OP_LINEAR: emit_linear(E, n); break;
  default: fail(E, "node %d: unknown op %d", n->id, (int)n->op); break;
  }
}

static void emit_function(emitter *E) {
  const bc_graph *g = E->g;
  sbuf *b = &E->b;
  if (E->o->aot) {
    sb_add(b, "int %s_forward(const %s_weights *w, const float *x, float *y, void *workspace) {\n",
           g->model, g->model);
    sb_add(b, "  if (!w || !x || !y || !workspace) return %s_EINVAL;\n", E->upper);
    sb_add(b, "  if (!bcrt_is_aligned(workspace, %s_WORKSPACE_ALIGN)) return %s_EINVAL;\n",
           E->upper, E->upper);
    for (int i = 0; i < g->nparams; i++)
      sb_add(b, "  if (!%s) return %s_EINVAL;\n", E->wexpr[i], E->upper);
  } else if (E->o->profile)
    sb_add(b, "int %s_forward_profile(const float *const *w, const float *x, float *y, void *workspace,\n"
              "    void (*prof)(void *pctx, int node), void *pctx) {\n", g->model);
  else
    sb_add(b, "int %s_forward(const float *const *w, const float *x, float *y, void *workspace) {\n",
           g->model);
  sb_add(b, "  float *const ws = (float *)workspace;  // %lld floats\n", (long long)g->arena_floats);
  sb_add(b, "  (void)w; (void)x; (void)y; (void)ws;\n");
  if (g->output == g->input && !E->o->gemm_only)
    sb_add(b, "  bcrt_copy(%lld, x, y);  // the graph is the identity\n",
           (long long)numel_of(E, g->input));
  for (int i = 0; i < g->nnodes && !E->err; i++) emit_node(E, &g->nodes[i]);
  if (E->o->profile) sb_add(b, "\n  prof(pctx, %d);\n", g->nnodes);
  if (E->o->aot) sb_add(b, "  return %s_OK;\n}\n", E->upper);
  else sb_add(b, "  return 0;\n}\n");
  for (int i = 0; i < g->nparams; i++)
    if (E->wmacro[i]) sb_add(b, "#undef %s\n", E->wexpr[i]);
}

// Issue 10's ops and attributes run in the interpreter; the compiled back
// ends reject them with a message until their kernels land.
static const char *unsupported(const bc_node *n) {
  if (n->op == BC_OP_RMSNORM || n->rms) return "RMSNorm";
  if (n->op == BC_OP_FFN && bc_act_gated(n->act)) return "gated FFN activations (swiglu, geglu)";
  if (n->in_out) return "layout=in_out";
  if (n->op != BC_OP_ATTENTION) return NULL;
  if (n->rope) return "rope=true";
  if (n->kv_heads && n->kv_heads != n->heads) return "kv_heads";
  if (n->param[4] >= 0) return "separate q/k/v projections";
  for (int k = 0; k < 4; k++)
    if ((k == 1 || k == 3) && n->param[k] < 0) return "bias=false";
  return NULL;
}

// What both entry points need before emitting anything: a plan, and a
// model name that is a C identifier (it becomes part of function names; the
// parser checks too, this is the emitter's own guard).
static bool emittable(bc_ctx *ctx, const bc_graph *g) {
  if (!g->planned) {
    bc_error(ctx, BC_EINTERNAL, "internal error: emit needs a planned graph (run bcM_plan)");
    return false;
  }
  for (int i = 0; i < g->nnodes; i++) {
    const char *what = unsupported(&g->nodes[i]);
    if (what) {
      bc_error_at(ctx, g->nodes[i].loc, "%s is not supported by the compiled back ends (jit, aot) "
                  "yet; run it with --backend interp", what);
      return false;
    }
  }
  if (!is_ident(g->model, BC_MAX_IDENT)) {
    bc_error(ctx, BC_EINPUT, "error: model name is not a C identifier; cannot emit C");
    return false;
  }
  if (g->input < 0 || g->input >= g->nvals || g->output < 0 || g->output >= g->nvals) {
    bc_error(ctx, BC_EINTERNAL, "internal error: emit: graph has no input or output");
    return false;
  }
  return true;
}

char *bcE_emit_c(bc_ctx *ctx, const bc_graph *g, const bc_emit_opts *o) {
  bc_emit_opts none = {0};
  emitter E = {.ctx = ctx, .g = g, .o = o ? o : &none};
  if (!emittable(ctx, g)) return NULL;
  if (o && o->aot && (o->profile || o->gemm_only)) {
    bc_error(ctx, BC_EINTERNAL, "internal error: emit-c: AOT code has no profile or gemm-only variant");
    return NULL;
  }
  if (name_params(&E) == BC_OK && (!E.o->aot || name_fields(&E) == BC_OK)) {
    emit_header(&E);
    emit_function(&E);
  }
  char *res = NULL;
  if (!E.err && E.b.oom) E.err = bc_error(ctx, BC_ENOMEM, "error: out of memory emitting C");
  if (!E.err) {
    res = bc_strndup(ctx, E.b.p ? E.b.p : "", E.b.len);
    if (!res) bc_error(ctx, BC_ENOMEM, "error: out of memory");
  }
  free(E.b.p);
  return res;
}

// --- the AOT header -------------------------------------------------------------

// A block comment that cannot be closed early: sanitize() breaks up "*/".
static void bcomment(emitter *E, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bcomment(emitter *E, const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  sanitize(line);
  sb_add(&E->b, "%s", line);
}

static void shape_macros(emitter *E, const char *what, const bc_shape *s) {
  sb_add(&E->b, "#define %s_%s_RANK %d\n", E->upper, what, s->rank);
  sb_add(&E->b, "#define %s_%s_NUMEL %lld\n", E->upper, what, (long long)bc_shape_numel(s));
}

static void emit_h(emitter *E, const char *provenance) {
  const bc_graph *g = E->g;
  sbuf *b = &E->b;
  const char *m = g->model, *M = E->upper;
  char in[96], out[96];
  bc_shape_str(&g->vals[g->input].shape, in, sizeof in);
  bc_shape_str(&g->vals[g->output].shape, out, sizeof out);
  sb_add(b, "/* %s.h -- ", m);
  bcomment(E, "the forward pass of model %s, generated by blockc %s. Do not edit.", m, BC_VERSION);
  sb_add(b, "\n *\n * ");
  bcomment(E, "%s", provenance ? provenance : "");
  sb_add(b, "\n *\n * Contract:\n");
  sb_add(b, " *   input  x: float32 %s, C order (%s_IN_NUMEL floats)\n", in, M);
  sb_add(b, " *   output y: float32 %s, C order (%s_OUT_NUMEL floats); y must not overlap x\n", out, M);
  sb_add(b, " *   workspace: %s_WORKSPACE_BYTES bytes, aligned to %s_WORKSPACE_ALIGN; caller-owned,\n"
            " *     contents need not be initialised; one per concurrent call\n", M, M);
  sb_add(b, " *   %s_forward is reentrant: no globals, no allocation, no I/O.  It\n"
            " *   returns %s_OK, or %s_EINVAL (nothing computed) when a pointer (or a\n"
            " *   weight) is NULL or the workspace is misaligned.\n", m, M, M);
  sb_add(b, " *   %s_weights holds one pointer per parameter, in the order of\n"
            " *   %s_params[], and is laid out exactly like `const float *[%s_NPARAMS]`\n"
            " *   (checked when %s.c compiles); %s_slots lets a loader fill it by index.\n",
         m, m, M, m, m);
  sb_add(b, " *\n * Usage (with runtime/blockc_rt.{c,h}; error handling trimmed):\n"
            " *\n"
            " *   %s_slots w;\n"
            " *   void *storage;\n"
            " *   char err[256];\n"
            " *   if (bcrt_st_load(\"model.safetensors\", %s_params, %s_NPARAMS, w.slots,\n"
            " *                    &storage, err, sizeof err) != BCRT_OK) { puts(err); exit(1); }\n"
            " *   void *ws = bcrt_aligned_alloc(%s_WORKSPACE_ALIGN, %s_WORKSPACE_BYTES);\n"
            " *   float *x = ..., *y = malloc(%s_OUT_NUMEL * sizeof(float));\n"
            " *   int st = %s_forward(&w.w, x, y, ws);  (%s_OK on success)\n"
            " *   bcrt_aligned_free(ws);\n"
            " *   bcrt_st_free(storage);\n"
            " */\n",
         m, m, M, M, M, M, m, M);
  sb_add(b, "#ifndef BLOCKC_MODEL_%s_H\n#define BLOCKC_MODEL_%s_H\n\n", M, M);
  sb_add(b, "#include \"blockc_rt.h\" /* bcrt_param_info */\n\n");
  sb_add(b, "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n");
  sb_add(b, "/* Dims of this build (the code is specialised to them). */\n");
  for (int i = 0; i < g->ndims; i++) {
    const bc_dim *d = &g->dims[i];
    bool dup = false;
    for (int j = 0; j < i; j++) dup |= strcmp(g->dims[j].name, d->name) == 0;
    if (dup) continue;
    if (!is_ident(d->name, BC_MAX_IDENT) || reserved_suffix(d->name)) {
      sb_add(b, "/* dim ");
      bcomment(E, "%s = %lld (no macro: the name is taken)", d->name, (long long)d->value);
      sb_add(b, " */\n");
      continue;
    }
    sb_add(b, "#define %s_%s %lld%s\n", M, d->name, (long long)d->value,
           d->overridden ? " /* set with -D */" : "");
  }
  sb_add(b, "\n");
  shape_macros(E, "IN", &g->vals[g->input].shape);
  shape_macros(E, "OUT", &g->vals[g->output].shape);
  sb_add(b, "#define %s_WORKSPACE_BYTES %lldul\n", M, (long long)bcM_workspace_bytes(g));
  sb_add(b, "#define %s_WORKSPACE_ALIGN 64\n", M);
  sb_add(b, "#define %s_NPARAMS %d\n\n", M, g->nparams);
  sb_add(b, "typedef enum {\n  %s_OK = 0,\n  %s_EINVAL = 1 /* NULL pointer or misaligned workspace */\n} %s_status;\n\n",
         M, M, m);
  sb_add(b, "typedef struct {\n");
  for (int i = 0; i < g->nparams; i++) {
    char shp[96];
    const bc_shape *sh = &g->params[i].shape;
    size_t k = (size_t)snprintf(shp, sizeof shp, "(");
    for (int r = 0; r < sh->rank && k < sizeof shp; r++)
      k += (size_t)snprintf(shp + k, sizeof shp - k, r ? ", %lld" : "%lld", (long long)sh->d[r]);
    if (k < sizeof shp) snprintf(shp + k, sizeof shp - k, sh->rank == 1 ? ",)" : ")");
    sb_add(b, "  const float *%s; /* ", E->field[i]);
    bcomment(E, "\"%s\" %s", g->params[i].name, shp);
    sb_add(b, " */\n");
  }
  if (g->nparams == 0) sb_add(b, "  const float *unused; /* the graph has no parameters */\n");
  sb_add(b, "} %s_weights;\n\n", m);
  sb_add(b, "/* The weights by index: fill .slots[i] for %s_params[i], pass &.w. */\n", m);
  sb_add(b, "typedef union {\n  %s_weights w;\n  const float *slots[%s_NPARAMS ? %s_NPARAMS : 1];\n} %s_slots;\n\n",
         m, M, M, m);
  sb_add(b, "/* Name, rank and shape of every parameter (PyTorch state_dict names). */\n");
  sb_add(b, "typedef bcrt_param_info %s_param_info;\n", m);
  sb_add(b, "extern const %s_param_info %s_params[];\n\n", m, m);
  sb_add(b, "int %s_forward(const %s_weights *w, const float *x, float *y, void *workspace);\n\n", m, m);
  sb_add(b, "#ifdef __cplusplus\n}\n#endif\n#endif\n");
}

char *bcE_emit_h(bc_ctx *ctx, const bc_graph *g, const char *provenance) {
  bc_emit_opts aot = {.aot = true};
  emitter E = {.ctx = ctx, .g = g, .o = &aot};
  if (!emittable(ctx, g)) return NULL;
  if (name_params(&E) == BC_OK && name_fields(&E) == BC_OK) emit_h(&E, provenance);
  char *res = NULL;
  if (!E.err && E.b.oom) E.err = bc_error(ctx, BC_ENOMEM, "error: out of memory emitting C");
  if (!E.err) {
    res = bc_strndup(ctx, E.b.p ? E.b.p : "", E.b.len);
    if (!res) bc_error(ctx, BC_ENOMEM, "error: out of memory");
  }
  free(E.b.p);
  return res;
}
