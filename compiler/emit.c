// emit.c — C emission: a planned graph becomes C that reads like llm.c.
//
// Every graph gets `<model>_run(w, io, rt, ws)` (the ABI in bc.h): one
// pointer per input and output in io, the run-time dims in rt.  Its body is a
// sequence of cblas_sgemm calls and calls to the precompiled kernels of
// runtime/blockc_rt.h (bcrt_linear for products that may have few rows:
// the small-M kernel on `<model>_pack`'s packed copy of the weights, see
// "packed weights" below), one commented section per node.  The run of
// identical layers (g->layers, planned periodically by plan.c) is one
// `static void <model>_layer(l, ...)` whose body is one trip's nodes,
// called in `for (int l = 0; l < N; l++)` with `&w->layers[l]`.  Weights are
// members of the <model>_weights struct in JIT and AOT code alike (the
// JIT compiles the same typedefs as the AOT header).  Sizes are literals,
// or C expressions in the run-time dims (`const int T = (int)rt[0];` once
// rt[0] is checked against T's bound, then `2*T` rows); arena offsets are
// literals (the plan is made at the bounds) and every buffer is named once
// at the top (`float *xd = ws + 4096;`).
// Simple graphs (one float input, one output, no lengths, no run-time dim)
// also get the `<model>_forward(w, x, y, ws)` wrapper.
//
// The code must compile warning-free under tcc (JIT), gcc and clang (AOT),
// so the JIT flavour includes no header: it declares the few prototypes it
// uses.  The AOT pair also passes the strict flags firmware builds use
// (-Wpedantic -Wconversion -Wdouble-promotion -Wcast-qual -Wshadow; checked
// by tools/strict_emit.sh): what the kernels take as int is int (run-time
// dims, loop counters, the step entry's pos), checked in range first, and a
// product whose bound passes INT_MAX is computed in long.  Nothing read from the graph file reaches the output unchecked: code
// only contains identifiers built or checked here (names go through
// local_ok / is_ident and a uniquing set), everything else is a number, and
// graph text that lands in a comment is sanitised so it cannot end the
// comment or splice a line.
#include "ops.h"
#include "aot.h"
#include "blockc_rt.h"  // BCRT_KERNELS, BCRT_ACT_*

#include <math.h>
#include <stdlib.h>
#include <string.h>

// --- output buffer: bc_sbuf (ctx.c), shared with emit_grad.c -----------------

typedef bc_sbuf sbuf;
#define sb_vadd bc_sb_vadd
#define sb_add bc_sb_add
typedef bcY_pblock pblock;  // a packed block (layout.c)

// --- emitter state ----------------------------------------------------------

// A set of C identifiers in use (open addressing; names are ctx memory).
typedef struct {
  const char **slot;
  size_t cap, n;
} nameset;

// A size: k times the product of run-time dims in s ("" for none); bound
// is its value with every run-time dim at its bound.
typedef struct {
  int64_t k, bound;
  char s[160];
} ex;

#define RING 64

typedef struct bcE_emitter {
  bc_ctx *ctx;
  const bc_graph *g;
  const bc_emit_opts *o;
  sbuf b;               // the function body (declarations are added in front)
  const char **wexpr;   // per param: "w->norm_weight", "w->layers[3].linear1_weight"
  const char **field;   // the weights-struct member of each param ("layers[3].linear1_weight")
  const char *upper;    // the model name upper-cased (AOT macro prefix)
  nameset names;        // every identifier the function body declares
  const char **dimvar;  // per dim: the C variable of a run-time dim, else NULL
  const char **vname;   // per value: its C name (inputs, outputs, buffers)
  const char **outname; // per graph output: its C name (one value may be two outputs)
  const char **member;  // AOT: <model>_io member per input, output, run-time dim
  const char **bufname; // per value that is a buffer root: the declared name (NULL if unused)
  int *bufroot;         // per value: the value whose offset names its buffer, -1
  bool *bufused;        // per value (root): referenced by the body
  char ring[RING][200]; // scratch strings for one sb_add call's arguments
  int ri;
  // The step entry: set when the graph can be stepped and this
  // build has one (not profile, not gemm-only).
  bool steppable;
  bool step;            // emitting <model>_step now (else <model>_run)
  int tail;             // the step entry's row-wise tail (bcY_step_tail), -1: none
  bool last;            // emitting that tail for each row's last new position (T = 1)
  int seq;              // the stepped sequence dim (index in g->dims)
  const char *rows;     // the batch rows as C (the attentions' batch dim; "1": none)
  int64_t rows_max;     // its bound: the header's per-row words (bcY_cache_rows)
  int64_t *cache_off;   // per node: its K|V block's offset in the cache (floats), -1
  const char **cache_name; // per attention node: the C pointer to its block
  const char *cache_hdr;   // the C pointer to the cache's header (its words)
  bool *cache_keep;     // per run-time dim (rt index): the sequence keeps it (bcY_cache_keeps)
  int64_t cache_bytes;  // bcY_cache_bytes
  uint64_t cache_id;    // bcY_cache_id
  // The layer loop: g->layers becomes <model>_layer(), called once per trip.
  bool lay;             // this build has the layer function (the plan is periodic)
  const char *larray;   // the weights member holding the layers ("layers")
  int abefore, acount;  // the array: the run's layers, and abefore alike ones before it
  const char **lmember; // per member of <model>_layer_weights: its name
  const char **lexpr;   // per member: "l->linear1_weight"
  bool in_layer;        // emitting the layer function's body (trip 1 as the template)
  int *largs;           // values the layer function takes as arguments, in first-use order
  int nlargs;
  const char **larg;    // per value: its argument name in the layer function, NULL
  bool *lused;          // per value: an argument of the layer function being emitted
  bool lws, lpos, lcache; // the layer function takes ws, pos, cache
  bool lposlo;          // ... and pos_lo (a cross-attention's memory, projected at 0)
  bool *ldim;           // per dim: the layer function takes this run-time dim
  // Packed weights: the blocks of bcY_pack_layout, and whether the
  // function being emitted reads `packed`.
  bcY_pblock *pb;
  int npb;
  int64_t packed_floats;
  bool packed_used;
  bool *pkonly;         // bcY_packed_only: params only <model>_pack reads (weight types)
  int npkonly;
  int pk_lo, pk_per;    // with the layer loop: the run's blocks are [pk_lo, pk_lo + count*pk_per)
  bool lpacked;         // the layer function takes packed and poff
  bool pool;            // the function being emitted has `pool` (the run and step entries)
  bool lpool;           // the layer function takes pool
  const char *lwhy;     // why the run in g->layers has no layer loop (setup_layers), NULL
  bool tokens;          // the graph has a tokens input (<M>_ETOKEN exists)
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

static int oom(emitter *E) {
  if (!E->err) E->err = bc_error(E->ctx, BC_ENOMEM, "error: out of memory");
  return E->err;
}

static char *ring(emitter *E) { return E->ring[E->ri++ % RING]; }

static char *rfmt(emitter *E, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *rfmt(emitter *E, const char *fmt, ...) {
  char *r = ring(E);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r, sizeof E->ring[0], fmt, ap);
  va_end(ap);
  return r;
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

// fmt's text, sanitised, between pre and post.
static void vcomment(emitter *E, const char *pre, const char *post, const char *fmt, va_list ap) {
  char line[1024];
  vsnprintf(line, sizeof line, fmt, ap);
  sanitize(line);
  sb_add(&E->b, "%s%s%s", pre, line, post);
}

// A // comment line.
static void comment(emitter *E, const char *indent, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void comment(emitter *E, const char *indent, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sb_add(&E->b, "%s", indent);
  vcomment(E, "// ", "\n", fmt, ap);
  va_end(ap);
}

// A block comment's text, which cannot close it early: sanitize() breaks up "*/".
static void bcomment(emitter *E, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bcomment(emitter *E, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vcomment(E, "", "", fmt, ap);
  va_end(ap);
}

// The shortest float literal that reads back as exactly (float)v in any C
// compiler ("1e-05f", not "9.99999975e-06f"); a '.0' keeps "1" from
// becoming the invalid token "1f".
static const char *flit(emitter *E, double v, char *buf, size_t n) {
  float f = (float)v;
  if (!isfinite(f)) {
    fail(E, "non-finite constant %g", v);
    snprintf(buf, n, "0.0f");
    return buf;
  }
  for (int p = 1; p <= 9; p++) {
    snprintf(buf, n, "%.*g", p, (double)f);
    if (strtof(buf, NULL) == f) break;
  }
  if (!strpbrk(buf, ".en")) strncat(buf, ".0", n - strlen(buf) - 1);
  strncat(buf, "f", n - strlen(buf) - 1);
  return buf;
}

// Checks that a size passed as a C int in generated code fits one.
static int64_t ck_int(emitter *E, int64_t v, const char *what) {
  if (v < 0 || v > 0x7fffffff) fail(E, "%s = %lld does not fit a 32-bit int", what, (long long)v);
  return v;
}

// --- names --------------------------------------------------------------------

static bool is_alpha_(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

static bool is_ident_char(char c) { return is_alpha_(c) || (c >= '0' && c <= '9'); }

static bool is_ident(const char *s, size_t max) {
  size_t n = strlen(s);
  if (n == 0 || n > max) return false;
  for (size_t i = 0; i < n; i++)
    if (!(i ? is_ident_char(s[i]) : is_alpha_(s[i]))) return false;
  return true;
}

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
      "concept", "requires", "wchar_t", "char8_t", "char16_t", "char32_t", "NULL", "main",
      "errno", "assert", "offsetof", "defined"};
  for (size_t i = 0; i < sizeof kw / sizeof kw[0]; i++)
    if (!strcmp(s, kw[i])) return true;
  return false;
}

// A name graph text may give to a generated identifier (a buffer, a
// run-time dim, a struct member): an identifier of at most 31 bytes that
// is no keyword and cannot meet a name the generated files or the headers
// they include define: the model's own prefix (functions and macros),
// blockc's (W_, DIM_, bcrt, BCRT, cblas) and <stdint.h>'s (*_t, INT*, ...).
static bool prefixed(const char *s, const char *p) {
  size_t n = strlen(p);
  return !strncmp(s, p, n) && (s[n] == '_' || s[n] == '\0');
}

static bool header_safe_n(const emitter *E, const char *s, size_t max) {
  static const char *const pre[] = {"W_", "DIM_", "bcrt", "BCRT", "cblas", "BC_", "BLOCKC",
                                    "INT", "UINT", "SIZE_", "PTRDIFF_", "SIG_ATOMIC_",
                                    "WCHAR_", "WINT_"};
  if (!is_ident(s, max) || s[0] == '_' || is_keyword(s)) return false;
  for (size_t i = 0; i < sizeof pre / sizeof pre[0]; i++)
    if (!strncmp(s, pre[i], strlen(pre[i]))) return false;
  size_t n = strlen(s);
  if (n >= 2 && s[n - 2] == '_' && s[n - 1] == 't') return false;
  return !prefixed(s, E->g->model) && !(E->upper && prefixed(s, E->upper));
}

static bool header_safe(const emitter *E, const char *s) { return header_safe_n(E, s, 31); }

bool bcE_name_ok(const bc_graph *g, const char *s) {
  char up[BC_MAX_IDENT + 1];
  size_t n = strlen(g->model);
  if (n > BC_MAX_IDENT) return false;
  for (size_t i = 0; i <= n; i++)
    up[i] = (g->model[i] >= 'a' && g->model[i] <= 'z') ? (char)(g->model[i] - 'a' + 'A') : g->model[i];
  emitter E = {.g = g, .upper = up};
  return header_safe(&E, s);
}

static size_t ns_hash(const char *s, size_t cap) {
  return (size_t)bc_fnv1a(BC_FNV_OFFSET, s, strlen(s)) & (cap - 1);
}

static bool ns_has(const nameset *s, const char *k) {
  if (!s->cap) return false;
  for (size_t i = ns_hash(k, s->cap);; i = (i + 1) & (s->cap - 1)) {
    if (!s->slot[i]) return false;
    if (!strcmp(s->slot[i], k)) return true;
  }
}

static bool ns_put(nameset *s, const char *k) {
  if (2 * (s->n + 1) > s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 64;
    const char **slot = calloc(cap, sizeof *slot);
    if (!slot) return false;
    for (size_t i = 0; i < s->cap; i++)
      if (s->slot[i]) {
        size_t j = ns_hash(s->slot[i], cap);
        while (slot[j]) j = (j + 1) & (cap - 1);
        slot[j] = s->slot[i];
      }
    free(s->slot);
    s->slot = slot;
    s->cap = cap;
  }
  size_t j = ns_hash(k, s->cap);
  while (s->slot[j]) j = (j + 1) & (s->cap - 1);
  s->slot[j] = k;
  s->n++;
  return true;
}

// A fresh identifier for the body: `want` if it is safe and free, else
// `fallback`; either gets _2, _3, ... until unused.  NULL on OOM.
static const char *local_name(emitter *E, nameset *set, const char *want, const char *fallback) {
  const char *base = want && header_safe(E, want) ? want : fallback;
  const char *name = base;
  for (int i = 2; name && ns_has(set, name); i++) name = bc_fmt(E->ctx, "%s_%d", base, i);
  if (!name || !ns_put(set, name)) {
    oom(E);
    return fallback;
  }
  return name;
}

// Names n entries at once in set: entry i wants want[i] (NULL: none) and
// falls back to fb[i].  Every wanted name that is safe and free goes to the
// first entry wanting it; then the names of reserve[0..nres) are taken too,
// and only then the others are renamed (local_name), so a rename never
// takes a name another entry has.  out[i] receives each name (NULL for an
// entry with neither want nor fallback: it gets none).
static void name_entries(emitter *E, nameset *set, const char *const *want, const char *const *fb,
                         int n, const char *const *reserve, int nres, const char **out) {
  for (int i = 0; i < n && !E->err; i++) {
    out[i] = NULL;
    if (want[i] && header_safe(E, want[i]) && !ns_has(set, want[i])) {
      if (!ns_put(set, want[i])) oom(E);
      out[i] = want[i];
    }
  }
  for (int i = 0; i < nres && !E->err; i++)
    if (reserve[i] && !ns_has(set, reserve[i]) && !ns_put(set, reserve[i])) oom(E);
  for (int i = 0; i < n && !E->err; i++)
    if (!out[i] && (want[i] || fb[i])) out[i] = local_name(E, set, want[i], fb[i]);
}

// --- sizes ----------------------------------------------------------------------

static ex ex_lit(int64_t k) { return (ex){.k = k, .bound = k}; }

static ex ex_mul(ex a, ex b) {
  ex r = {.k = a.k * b.k, .bound = a.bound * b.bound};
  size_t la = strlen(a.s), lb = strlen(b.s);
  if (la && lb && la + lb + 2 <= sizeof r.s) {
    memcpy(r.s, a.s, la);
    r.s[la] = '*';
    memcpy(r.s + la + 1, b.s, lb + 1);
  } else if (la || lb) {
    const char *one = la ? a.s : b.s;
    size_t l = strlen(one) < sizeof r.s ? strlen(one) : sizeof r.s - 1;
    memcpy(r.s, one, l);
    r.s[l] = '\0';
  }
  return r;
}

// Entry i of shape s: a literal, or its run-time dim's variable.
static ex ex_dim(const emitter *E, const bc_shape *s, int i) {
  int k = s->sym[i];
  if (E->last && k == E->seq + 1) return ex_lit(1);  // the tail at one position a row
  if (k > 0 && k <= E->g->ndims && E->dimvar[k - 1]) {
    ex r = {.k = 1, .bound = s->d[i]};
    snprintf(r.s, sizeof r.s, "%s", E->dimvar[k - 1]);
    return r;
  }
  return ex_lit(s->d[i]);
}

static ex ex_prod(const emitter *E, const bc_shape *s, int from, int to) {
  ex r = ex_lit(1);
  for (int i = from; i < to && i < s->rank; i++) r = ex_mul(r, ex_dim(E, s, i));
  return r;
}

static bool ex_fixed(const ex *a) { return a->s[0] == '\0'; }

// The C text of a size: "16", "T", "3*T" (ring memory).  Run-time dims
// are ints (checked in range first), so a product whose bound passes
// INT_MAX is computed in long: "768L*T", "(long)T*S".
static const char *X(emitter *E, ex a) {
  if (ex_fixed(&a)) return rfmt(E, "%lld", (long long)a.k);
  bool wide = a.bound > 0x7fffffff;
  if (a.k == 1) return rfmt(E, wide ? "(long)%s" : "%s", a.s);
  return rfmt(E, wide ? "%lldL*%s" : "%lld*%s", (long long)a.k, a.s);
}

// A ring string that must outlive many more calls: copied to ctx memory.
static const char *keep(emitter *E, const char *s) {
  const char *k = bc_strdup(E->ctx, s);
  if (!k) oom(E);
  return k ? k : "0";
}

static const char *plus_k(emitter *E, const char *p, int64_t off) {
  return off ? rfmt(E, "%s + %lld", p, (long long)off) : p;
}

// --- values and parameters --------------------------------------------------

static ex numel_ex(const emitter *E, int v);
// (The bound at the stepped dim's actual 1 while emitting the last-position tail.)
static int64_t numel_of(const emitter *E, int v) {
  if (v < 0 || v >= E->g->nvals) return 0;
  return E->last ? numel_ex(E, v).bound : bc_shape_numel(&E->g->vals[v].shape);
}

// Row width (last dimension) of value v; never a run-time dim.
static int64_t width_of(const emitter *E, int v) {
  if (v < 0 || v >= E->g->nvals) return 1;
  const bc_shape *s = &E->g->vals[v].shape;
  return s->rank ? s->d[s->rank - 1] : 1;
}

// Element count and row count of value v at the actual sizes.
static ex numel_ex(const emitter *E, int v) {
  const bc_shape *s = &E->g->vals[v].shape;
  return ex_prod(E, s, 0, s->rank);
}

static ex rows_ex(const emitter *E, int v) {
  const bc_shape *s = &E->g->vals[v].shape;
  return ex_prod(E, s, 0, s->rank - 1);
}

// Where value v lives, as a C expression: its input or output pointer, or
// the name of its arena buffer.  Every arena range is checked against the
// arena size, so a planner bug is an error here rather than an
// out-of-bounds write in generated code.
static const char *layer_arg(emitter *E, int v);
static bool carried_out(const emitter *E, int v);

static const char *vptr(emitter *E, int v) {
  const bc_graph *g = E->g;
  if (v < 0 || v >= g->nvals) { fail(E, "bad value id %d", v); return "ws"; }
  if (E->in_layer && (g->vals[v].def < g->layers.first + g->layers.period || carried_out(E, v)))
    return layer_arg(E, v);
  if (E->vname[v]) return E->vname[v];
  const bc_value *val = &g->vals[v];
  int r = E->bufroot[v];
  if (val->offset < 0 || r < 0) { fail(E, "value %%%d has no arena offset", v); return "ws"; }
  int64_t numel = bc_shape_numel(&val->shape);
  if (val->offset + numel > g->arena_floats)
    fail(E, "value %%%d [%lld, %lld) lies outside the %lld-float arena", v,
         (long long)val->offset, (long long)(val->offset + numel), (long long)g->arena_floats);
  E->bufused[r] = true;
  return E->bufname[r];
}

// The C expression of param p: a member of *w, or in the layer function
// (whose template is trip 1) a member of *l.
static const char *wname(emitter *E, int p) {
  if (!E->in_layer) return E->wexpr[p];
  int m = p - E->g->layers.param0 - E->g->layers.nparams;
  if (m < 0 || m >= E->g->layers.nparams) {
    fail(E, "param %d is not one of the layer's", p);
    return "0";
  }
  return E->lexpr[m];
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
  return wname(E, p);
}

// Weights are members of the <model>_weights struct in JIT and AOT code
// alike (`w->norm_weight`; in the layer function `l->linear1_weight`).  A
// parameter name becomes a member by '.' -> '_' when every byte is in
// [A-Za-z0-9_.] and the result is at most 60 bytes, starts with a letter,
// is a name no header macro can replace (header_safe), is unique among its
// struct's members and is not of the form p<digits> nor `packed` (the
// member after the parameters); every other member is p<index> (unique by
// construction, so the two schemes never collide).
typedef struct { const char *id; int param; } mangled;

static int cmp_mangled(const void *a, const void *b) {
  const mangled *x = a, *y = b;
  int c = strcmp(x->id, y->id);
  return c ? c : x->param - y->param;
}

static const char *mangle(emitter *E, const char *name) {
  size_t n = strlen(name);
  if (n == 0 || n > 60) return NULL;
  char *id = bc_alloc(E->ctx, n + 1);
  if (!id) return NULL;
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    if (!is_ident_char(c) && c != '.') return NULL;
    id[i] = c == '.' ? '_' : c;
  }
  return id;
}

// The functions and types the file defines (a model called DIM with a dim
// `run` gets no enum constant DIM_run).
static bool is_entry_name(const emitter *E, const char *id) {
  static const char *const sfx[] = {"run", "forward", "run_profile", "run_abi", "run_pool", "step",
                                    "step_abi", "step_pool", "step_rows", "step_rows_abi",
                                    "step_rows_pool", "step_last", "step_last_abi",
                                    "step_last_pool", "step_any", "weights", "layer_weights", "layer",
                                    "layer_step", "slots", "io", "params", "param_info", "pack"};
  size_t ml = strlen(E->g->model);
  if (!id || strncmp(id, E->g->model, ml) || id[ml] != '_') return false;
  for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++)
    if (!strcmp(id + ml + 1, sfx[i])) return true;
  return false;
}

static bool is_p_index(const char *s) {
  if (s[0] != 'p' || !s[1]) return false;
  for (const char *q = s + 1; *q; q++)
    if (*q < '0' || *q > '9') return false;
  return true;
}

// Members for n names (out[i]; "p<i>" where a name cannot be one).
static int name_members_of(emitter *E, const char *const *names, int n, const char **out) {
  mangled *m = calloc((size_t)(n ? n : 1), sizeof *m);
  if (!m) return oom(E);
  int nm = 0;
  for (int i = 0; i < n; i++) {
    const char *id = mangle(E, names[i]);
    out[i] = NULL;
    if (id && is_alpha_(id[0]) && id[0] != '_' && strcmp(id, "packed") &&
        !is_p_index(id) && header_safe_n(E, id, 60))
      m[nm++] = (mangled){id, i};
  }
  qsort(m, (size_t)nm, sizeof *m, cmp_mangled);
  for (int i = 0; i < nm; i++)
    if (!(i > 0 && !strcmp(m[i].id, m[i - 1].id)) && !(i + 1 < nm && !strcmp(m[i].id, m[i + 1].id)))
      out[m[i].param] = m[i].id;
  free(m);
  for (int i = 0; i < n; i++)
    if (!out[i] && !(out[i] = bc_fmt(E->ctx, "p%d", i))) return oom(E);
  return E->err;
}

// The weights struct: flat members, or with a layer run the members before
// it, `<model>_layer_weights <array>[count]` and the members after it.
static int name_fields(emitter *E) {
  const bc_graph *g = E->g;
  int np = g->nparams;
  size_t n = (size_t)(np ? np : 1);
  E->field = bc_alloc(E->ctx, n * sizeof *E->field);
  E->wexpr = bc_alloc(E->ctx, n * sizeof *E->wexpr);
  const char **names = bc_alloc(E->ctx, n * sizeof *names);
  if (!E->field || !E->wexpr || !names) return oom(E);
  const bc_layers *L = &g->layers;
  int lo = E->lay ? L->param0 - E->abefore * L->nparams : np;
  int hi = E->lay ? lo + E->acount * L->nparams : np;
  int nflat = 0;
  for (int i = 0; i < np; i++)
    if (i < lo || i >= hi) names[nflat++] = g->params[i].name;
  if (E->lay) names[nflat++] = L->stack;  // the array
  const char **flat = bc_alloc(E->ctx, (size_t)(nflat ? nflat : 1) * sizeof *flat);
  if (!flat || name_members_of(E, names, nflat, flat)) return oom(E);
  for (int i = 0, k = 0; i < np; i++)
    if (i < lo || i >= hi) {
      E->field[i] = is_p_index(flat[k]) ? bc_fmt(E->ctx, "p%d", i) : flat[k];
      k++;
    }
  if (E->lay) {
    E->larray = flat[nflat - 1];  // the stack's name, else the first free layers, layers_2, ...
    for (int k = 1; is_p_index(E->larray); k++) {
      const char *c = k == 1 ? "layers" : bc_fmt(E->ctx, "layers_%d", k);
      if (!c) return oom(E);
      bool taken = false;
      for (int i = 0; i + 1 < nflat; i++) taken |= !strcmp(flat[i], c);
      if (!taken) E->larray = c;
    }
    size_t slen = strlen(L->stack);
    int q = L->nparams;
    E->lmember = bc_alloc(E->ctx, (size_t)(q ? q : 1) * sizeof *E->lmember);
    E->lexpr = bc_alloc(E->ctx, (size_t)(q ? q : 1) * sizeof *E->lexpr);
    if (!E->lmember || !E->lexpr) return oom(E);
    for (int m = 0; m < q; m++) names[m] = bcI_layer_member(g->params[L->param0 + m].name, slen);
    if (name_members_of(E, names, q, E->lmember)) return E->err;
    for (int m = 0; m < q; m++) E->lexpr[m] = bc_fmt(E->ctx, "l->%s", E->lmember[m]);
    for (int i = lo; i < hi; i++)
      E->field[i] = bc_fmt(E->ctx, "%s[%d].%s", E->larray, (i - lo) / q, E->lmember[(i - lo) % q]);
  }
  for (int i = 0; i < np; i++)
    if (!E->field[i] || !(E->wexpr[i] = bc_fmt(E->ctx, "w->%s", E->field[i]))) return oom(E);
  return E->err;
}

static void upper_name(emitter *E) {
  size_t ml = strlen(E->g->model);
  char *up = bc_alloc(E->ctx, ml + 1);
  if (!up) { oom(E); return; }
  for (size_t i = 0; i < ml; i++) {
    char c = E->g->model[i];
    up[i] = (c >= 'a' && c <= 'z') ? (char)(c - 'a' + 'A') : c;
  }
  E->upper = up;
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

// --- the graph's interface ------------------------------------------------------

bool bcE_is_simple(const bc_graph *g) {
  return g->ninputs == 1 && g->noutputs == 1 && g->nrt == 0 &&
         g->vals[g->inputs[0]].type == BC_VT_F32;
}

// Index of v among the graph inputs, -1 if it is none.
static int input_index(const bc_graph *g, int v) {
  for (int i = 0; i < g->ninputs; i++)
    if (g->inputs[i] == v) return i;
  return -1;
}

static int output_index(const bc_graph *g, int v) {
  for (int i = 0; i < g->noutputs; i++)
    if (g->outputs[i] == v) return i;
  return -1;
}

// The names the body uses.  Reserved first: the parameters and the
// per-node locals; then the run-time dims, the inputs and outputs, and one
// name per arena buffer (the first value placed at that offset names it).
static const char *const reserved_locals[] = {
    "w", "io", "rt", "workspace", "ws", "prof", "pctx", "b", "h", "i", "qh", "kh", "vh", "oh",
    "sc", "nk", "nkr", "r0", "r1", "rb", "slot", "reads", "pos", "cache", "cache_bytes", "packed", "poff",
    "l", "n0", "pool", "pos_lo", "pos_hi", "last"};

typedef struct { int64_t off; const char *name; int v; } offv;

static int cmp_offv(const void *pa, const void *pb) {
  const offv *a = pa, *b = pb;
  if (a->off != b->off) return a->off < b->off ? -1 : 1;
  int c = strcmp(a->name, b->name);
  return c ? c : a->v - b->v;
}

static int name_interface(emitter *E) {
  const bc_graph *g = E->g;
  size_t nv = (size_t)(g->nvals ? g->nvals : 1);
  E->dimvar = bc_alloc(E->ctx, (size_t)(g->ndims ? g->ndims : 1) * sizeof *E->dimvar);
  E->vname = bc_alloc(E->ctx, nv * sizeof *E->vname);
  E->bufname = bc_alloc(E->ctx, nv * sizeof *E->bufname);
  E->bufroot = bc_alloc(E->ctx, nv * sizeof *E->bufroot);
  E->bufused = bc_alloc(E->ctx, nv * sizeof *E->bufused);
  E->outname = bc_alloc(E->ctx, (size_t)(g->noutputs ? g->noutputs : 1) * sizeof *E->outname);
  if (!E->outname || !E->dimvar || !E->vname || !E->bufname || !E->bufroot || !E->bufused) return oom(E);
  for (size_t i = 0; i < sizeof reserved_locals / sizeof reserved_locals[0]; i++)
    if (!ns_put(&E->names, reserved_locals[i])) return oom(E);
  for (int i = 0; i < g->ndims; i++)
    if (g->dims[i].rt >= 0) {
      char fb[32];
      snprintf(fb, sizeof fb, "rt%d", g->dims[i].rt);
      E->dimvar[i] = local_name(E, &E->names, g->dims[i].name, bc_strdup(E->ctx, fb));
    }
  // The inputs, then the outputs (one name per input value listed twice);
  // an output named like an input (`output x`) is renamed past every
  // other entry's name.
  int nio = g->ninputs + g->noutputs;
  const char **want = bc_alloc(E->ctx, (size_t)nio * 3 * sizeof *want);
  if (!want) return oom(E);
  const char **fb = want + nio, **got = fb + nio;
  for (int i = 0; i < nio; i++) {
    int v = i < g->ninputs ? g->inputs[i] : g->outputs[i - g->ninputs];
    bool dup = i < g->ninputs && input_index(g, v) != i;
    want[i] = dup ? NULL : i < g->ninputs ? g->vals[v].name
              : g->output_names ? g->output_names[i - g->ninputs] : NULL;
    fb[i] = dup ? NULL : i < g->ninputs ? bc_fmt(E->ctx, "in%d", i)
            : bc_fmt(E->ctx, "out%d", i - g->ninputs);
  }
  name_entries(E, &E->names, want, fb, nio, want, nio, got);
  if (E->err) return E->err;
  for (int i = 0; i < g->ninputs; i++)
    if (input_index(g, g->inputs[i]) == i) E->vname[g->inputs[i]] = got[i];
  for (int i = 0; i < g->noutputs; i++) {
    int v = g->outputs[i];
    E->outname[i] = got[g->ninputs + i];
    if (!E->vname[v]) E->vname[v] = E->outname[i];
  }
  // Buffers: one pointer per (offset, value name), so code reads `heads`
  // and `scores` even where the planner put both in one range; values with
  // no usable name are `buf`.
  offv *ids = malloc(nv * sizeof *ids);
  if (!ids) return oom(E);
  int n = 0;
  for (int v = 0; v < g->nvals; v++) {
    E->bufroot[v] = -1;
    const char *nm = g->vals[v].name && header_safe(E, g->vals[v].name) ? g->vals[v].name : "buf";
    if (!E->vname[v] && g->vals[v].offset >= 0) ids[n++] = (offv){g->vals[v].offset, nm, v};
  }
  qsort(ids, (size_t)n, sizeof *ids, cmp_offv);
  for (int i = 0, r = -1; i < n; i++) {
    int v = ids[i].v;
    if (r < 0 || ids[i - 1].off != ids[i].off || strcmp(ids[i - 1].name, ids[i].name)) r = v;
    E->bufroot[v] = r;
  }
  // The layer function's buffers are named first: its code is the part
  // read most, so it gets `x` and `a` rather than `x_3` and `a_2`.
  bool *mine = calloc(nv, sizeof *mine);
  if (!mine) {
    free(ids);
    return oom(E);
  }
  const bc_layers *L = &g->layers;
  for (int v = 0; v < g->nvals && E->lay; v++) {
    int d = g->vals[v].def;
    if (E->bufroot[v] >= 0 && d >= L->first + L->period && d < L->first + 2 * L->period)
      mine[E->bufroot[v]] = true;
  }
  for (int pass = 0; pass < 2 && !E->err; pass++)
    for (int i = 0; i < n && !E->err; i++) {
      int v = ids[i].v;
      if (E->bufroot[v] == v && mine[v] == (pass == 0))
        E->bufname[v] = local_name(E, &E->names, ids[i].name, "buf");
    }
  free(mine);
  free(ids);
  return E->err;
}

// --- the file prologue ------------------------------------------------------

// The declarations of runtime/blockc_rt.h that generated code uses, made
// from the header's own values and kernel lists (BCRT_KERNELS), so they
// cannot drift from it.  JIT builds carry them inline because tcc must not
// read system or OpenBLAS headers.
#define RT_STR_(x) #x
#define RT_STR(x) RT_STR_(x)
#define RT_STRV_(...) #__VA_ARGS__
#define RT_STRV(...) RT_STRV_(__VA_ARGS__)
#define RT_DEFINE(name) "#define " #name " " RT_STR(name) "\n"
#define RT_DECL_TEXT(ret, name, params) #ret " " #name #params ";\n"
static const char rt_decls[] =
    RT_DEFINE(BCRT_ACT_RELU) RT_DEFINE(BCRT_ACT_GELU) RT_DEFINE(BCRT_ACT_GELU_TANH)
    RT_DEFINE(BCRT_ACT_SWIGLU) RT_DEFINE(BCRT_ACT_GEGLU) RT_DEFINE(BCRT_ACT_GEGLU_TANH)
    RT_DEFINE(BCRT_ROW_MAJOR) RT_DEFINE(BCRT_NO_TRANS) RT_DEFINE(BCRT_TRANS)
    RT_DEFINE(BCRT_LR_CONSTANT) RT_DEFINE(BCRT_LR_LINEAR) RT_DEFINE(BCRT_LR_COSINE)
    RT_DEFINE(BCRT_LR_INVERSE_SQRT) RT_DEFINE(BCRT_OPT_ADAMW) RT_DEFINE(BCRT_OPT_SGD)
    RT_DEFINE(BCRT_WT_F32) RT_DEFINE(BCRT_WT_BF16) RT_DEFINE(BCRT_WT_Q8_0) RT_DEFINE(BCRT_WT_Q4_0)
    RT_DEFINE(BCRT_WT_F16)
    "#ifndef BCRT_TRAIN_HPARAMS_DEFINED\n#define BCRT_TRAIN_HPARAMS_DEFINED 1\n"
    "typedef struct bcrt_train_hparams { " RT_STRV(BCRT_TRAIN_HPARAMS_FIELDS) " } bcrt_train_hparams;\n"
    "#endif\n"
    "#ifndef BCRT_POOL_TYPEDEF\n#define BCRT_POOL_TYPEDEF 1\ntypedef struct bcrt_pool bcrt_pool;\n#endif\n"
    "void cblas_sgemm(int order, int transa, int transb, int m, int n, int k,\n"
    "                 float alpha, const float *a, int lda, const float *b, int ldb,\n"
    "                 float beta, float *c, int ldc);\n"
    BCRT_KERNELS(RT_DECL_TEXT);

// The IR's activations are the runtime's, value for value (the emitter
// prints BCRT_ACT_* names, the interpreter and grad read bc_act).
typedef char bc_act_is_bcrt_act[BC_ACT_RELU == BCRT_ACT_RELU && BC_ACT_GELU == BCRT_ACT_GELU &&
                                        BC_ACT_GELU_TANH == BCRT_ACT_GELU_TANH &&
                                        BC_ACT_SWIGLU == BCRT_ACT_SWIGLU &&
                                        BC_ACT_GEGLU == BCRT_ACT_GEGLU &&
                                        BC_ACT_GEGLU_TANH == BCRT_ACT_GEGLU_TANH &&
                                        BC_ACT_COUNT == BCRT_ACT_GEGLU_TANH + 1
                                    ? 1
                                    : -1];

// Dim macros are <MODEL>_<dim> (fixed) and <MODEL>_<dim>_MAX (run-time);
// these are every other name the header and the .c define, so a dim macro
// equal to one of them (or to another dim's) is left out, with a comment.
static const char *const gen_suffix[] = {
    "OK", "EINVAL", "EDIM", "ELEN", "NPARAMS", "WORKSPACE_BYTES", "WORKSPACE_ALIGN",
    "IN_NUMEL", "OUT_NUMEL", "IN_RANK", "OUT_RANK", "IN_SHAPE", "OUT_SHAPE", "IN_RT", "OUT_RT",
    "NINPUTS", "NOUTPUTS", "NRT", "ECACHE", "ESEQ", "EPOS", "CACHE_BYTES", "CACHE_ALIGN", "STEP_LAST", "PACKED_FLOATS",
    "PACKED_BYTES", "PACKED_ALIGN", "WEIGHT_DTYPE", "WEIGHT_TYPE", "BACKWARD_WORKSPACE_BYTES", "ENONFINITE", "TRAIN_STATE_BYTES",
    "TRAIN_WORKSPACE_BYTES", "TRAIN_WORKSPACE_BYTES_K1", "TRAIN_BLOCK_FLOATS", "TRAIN_LOSS_OUTPUT"};
static const char *const gen_lower[] = {"weights", "slots", "param_info", "params", "forward",
                                        "run", "run_abi", "run_pool", "io", "status", "layout_check_",
                                        "io_info", "rt_info", "step", "step_abi", "step_pool",
                                        "step_rows", "step_rows_abi", "step_rows_pool", "step_last",
                                        "step_last_abi", "step_last_pool", "step_any", "pack",
                                        "layer_weights", "layer", "layer_step", "run_profile",
                                        "backward", "backward_ex", "backward_pool", "train_numel",
                                        "train_offset", "train_decay", "train_init", "train_step",
                                        "train_step_pool"};

// The macro name for dim i ("TINY_D", "TINY_T_MAX"), or NULL when it
// would collide with a generated name or another dim's macro.
static const char *dim_macro(emitter *E, int i) {
  const bc_graph *g = E->g;
  const bc_dim *d = &g->dims[i];
  if (!is_ident(d->name, BC_MAX_IDENT)) return NULL;
  const char *m = bc_fmt(E->ctx, "%s_%s%s", E->upper, d->name, d->rt >= 0 ? "_MAX" : "");
  if (!m) return NULL;
  for (size_t k = 0; k < sizeof gen_suffix / sizeof gen_suffix[0]; k++)
    if (!strcmp(m + strlen(E->upper) + 1, gen_suffix[k])) return NULL;
  for (size_t k = 0; k < sizeof gen_lower / sizeof gen_lower[0]; k++) {
    char buf[160];
    snprintf(buf, sizeof buf, "%s_%s", g->model, gen_lower[k]);
    if (!strcmp(m, buf)) return NULL;
  }
  char guard[160];
  snprintf(guard, sizeof guard, "BLOCKC_MODEL_%s_H", E->upper);
  if (!strcmp(m, guard)) return NULL;
  for (int j = 0; j < g->ndims; j++) {
    if (j == i || !is_ident(g->dims[j].name, BC_MAX_IDENT)) continue;
    char other[160];
    snprintf(other, sizeof other, "%s_%s%s", E->upper, g->dims[j].name,
             g->dims[j].rt >= 0 ? "_MAX" : "");
    if (!strcmp(m, other) && j < i) return NULL;  // the first of equal ones keeps it
  }
  return m;
}

// The graph's name for io entry i (NULL for an unnamed output).
static const char *graph_io_name(const bc_graph *g, int i) {
  const char *nm = i < g->ninputs ? g->vals[g->inputs[i]].name
                   : g->output_names ? g->output_names[i - g->ninputs] : NULL;
  return nm && nm[0] ? nm : NULL;
}

// The name a generic program binds io entry i by: the graph's own name
// for that input or output (an output may share its input's name: `output
// x`), or for an unnamed output its <model>_io member, which name_members
// keeps apart from every graph name.
static const char *io_name(emitter *E, int i) {
  const char *nm = graph_io_name(E->g, i);
  return nm ? nm : E->member[i];
}

// <model>_io_info (one entry per io pointer of _run_abi: inputs, then
// outputs) and <model>_rt_info (one per run-time dim, in rt order): what a
// program needs to size and check arrays without naming the model's dims.
static void emit_io_tables(emitter *E) {
  const bc_graph *g = E->g;
  sbuf *b = &E->b;
  const char *m = g->model, *M = E->upper;
  int nio = g->ninputs + g->noutputs;
  sb_add(b, "const bcrt_io_info %s_io_info[%s_NINPUTS + %s_NOUTPUTS] = {\n", m, M, M);
  for (int i = 0; i < nio; i++) {
    int v = i < g->ninputs ? g->inputs[i] : g->outputs[i - g->ninputs];
    const bc_shape *sh = &g->vals[v].shape;
    const char *kind = i >= g->ninputs              ? "BCRT_IO_OUTPUT"
                       : bcI_is_tokens(g, v)          ? "BCRT_IO_TOKENS"
                       : g->vals[v].type == BC_VT_I32 ? "BCRT_IO_LENGTHS"
                                                      : "BCRT_IO_INPUT";
    sb_add(b, "  {");
    str_lit(b, io_name(E, i));
    sb_add(b, ", %s, %d, {", kind, sh->rank);
    for (int k = 0; k < BC_MAX_RANK; k++)
      sb_add(b, "%s%lld", k ? ", " : "", (long long)(k < sh->rank ? sh->d[k] : 0));
    sb_add(b, "}, {");
    for (int k = 0; k < BC_MAX_RANK; k++) {
      int rt = k < sh->rank && sh->sym[k] > 0 && sh->sym[k] <= g->ndims ? g->dims[sh->sym[k] - 1].rt : -1;
      sb_add(b, "%s%d", k ? ", " : "", rt);
    }
    sb_add(b, "}},\n");
  }
  sb_add(b, "};\n\n");
  sb_add(b, "const bcrt_rt_info %s_rt_info[%s_NRT ? %s_NRT : 1] = {\n", m, M, M);
  for (int k = 0; k < g->nrt; k++)
    for (int d = 0; d < g->ndims; d++)
      if (g->dims[d].rt == k) {
        sb_add(b, "  {");
        str_lit(b, g->dims[d].name);
        sb_add(b, ", %lld},\n", (long long)g->dims[d].value);
        break;
      }
  if (g->nrt == 0) sb_add(b, "  {0, 0}  /* placeholder: no run-time dims */\n");
  sb_add(b, "};\n\n");
}

// AOT .c prologue: the parameter table the header declares, and a
// compile-time proof that the weights struct is laid out exactly like the
// JIT's `const float *w[NPARAMS + 1]` (the parameters, then `packed`;
// negative array size otherwise; C99 has no _Static_assert).
static void emit_aot_tables(emitter *E) {
  const bc_graph *g = E->g;
  sbuf *b = &E->b;
  const char *m = g->model, *M = E->upper;
  sb_add(b, "typedef char %s_layout_check_[sizeof(%s_weights) == "
            "((%s_NPARAMS ? %s_NPARAMS : 1) + 1) * sizeof(const float *) ? 1 : -1];\n\n",
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
  emit_io_tables(E);
}

// `  const float *name; /* "the.param.name" (1536, 512) */` (shown: the name
// as the comment gives it).
static void member_line(emitter *E, const char *field, const char *shown, const bc_shape *sh) {
  char shp[96];
  size_t k = (size_t)snprintf(shp, sizeof shp, "(");
  for (int r = 0; r < sh->rank && k < sizeof shp; r++)
    k += (size_t)snprintf(shp + k, sizeof shp - k, r ? ", %lld" : "%lld", (long long)sh->d[r]);
  if (k < sizeof shp) snprintf(shp + k, sizeof shp - k, sh->rank == 1 ? ",)" : ")");
  sb_add(&E->b, "  const float *%s; /* ", field);
  bcomment(E, "\"%s\" %s", shown, shp);
  sb_add(&E->b, " */\n");
}

// The weights types, the same text in the JIT source and the AOT header:
// <model>_weights holds one pointer per parameter in the order of the
// params; with a layer run, the run's parameters are an array of
// <model>_layer_weights (one pointer per member), which keeps the layout of
// `const float *[NPARAMS]`.
static void emit_weight_types(emitter *E) {
  const bc_graph *g = E->g;
  const bc_layers *L = &g->layers;
  sbuf *b = &E->b;
  const char *m = g->model;
  int lo = E->lay ? L->param0 - E->abefore * L->nparams : g->nparams;
  int hi = E->lay ? lo + E->acount * L->nparams : lo;
  if (E->lay) {
    size_t slen = strlen(L->stack);
    sb_add(b, "/* One layer's weights: %s.<i>.* for i = %d..%d, in the order of the params. */\n",
           L->stack, L->index0 - E->abefore, L->index0 - E->abefore + E->acount - 1);
    sb_add(b, "typedef struct {\n");
    for (int k = 0; k < L->nparams; k++) {
      const bc_param *pr = &g->params[L->param0 + k];
      char shown[BC_MAX_PARAM_NAME + 16];
      snprintf(shown, sizeof shown, "%s.<i>.%s", L->stack, bcI_layer_member(pr->name, slen));
      member_line(E, E->lmember[k], shown, &pr->shape);
    }
    sb_add(b, "} %s_layer_weights;\n\n", m);
  }
  sb_add(b, "typedef struct {\n");
  for (int i = 0; i < g->nparams; i++) {
    if (i == lo) {
      sb_add(b, "  %s_layer_weights %s[%d]; /* ", m, E->larray, E->acount);
      bcomment(E, "\"%s.%d.*\" .. \"%s.%d.*\"", L->stack, L->index0 - E->abefore, L->stack,
               L->index0 - E->abefore + E->acount - 1);
      sb_add(b, " */\n");
    }
    if (i < lo || i >= hi) member_line(E, E->field[i], g->params[i].name, &g->params[i].shape);
  }
  if (g->nparams == 0) sb_add(b, "  const float *unused; /* the graph has no parameters */\n");
  if (g->weight_type != BC_WT_F32)
    sb_add(b, "  const float *packed; /* %s_pack's %s copy of the above's matrices (required) */\n",
           m, bc_weight_type_name(g->weight_type));
  else
    sb_add(b, "  const float *packed; /* NULL (cblas everywhere), or %s_pack's copy of the above */\n",
           m);
  sb_add(b, "} %s_weights;\n\n", m);
}

// Without OpenBLAS (-DBLOCKC_NO_BLAS) the forward and step entries pass the
// workspace's tail (bcY_workspace_bytes past the arena) to the portable GEMM,
// so they allocate nothing: every function that multiplies has the workspace
// as `ws`.  bcE_emit_c ends the section before the backward (which keeps
// bcrt_sgemm's per-call buffers).
static void emit_no_blas_gemm(emitter *E) {
  long long off = (long long)bcY_arena_bytes(E->g);
  sb_add(&E->b, "/* Without OpenBLAS (-DBLOCKC_NO_BLAS) the matrix products pack into the\n"
                " * workspace's tail (BCRT_SGEMM_WS_FOR the graph's largest product)\n"
                " * instead of allocating. */\n"
                "#ifdef BLOCKC_NO_BLAS\n"
                "#define cblas_sgemm(...) bcrt_sgemm_cblas((char *)ws + %lld, __VA_ARGS__)\n"
                "#define bcrt_linear(...) bcrt_linear_ws((char *)ws + %lld, __VA_ARGS__)\n"
                "#define bcrt_linear_pool(p, ...) bcrt_linear_pool_ws(p, (char *)ws + %lld, __VA_ARGS__)\n"
                "#endif\n\n", off, off, off);
}

static void emit_file_header(emitter *E) {
  const bc_graph *g = E->g;
  sbuf *b = &E->b;
  comment(E, "", "Generated by blockc %s from %s -- do not edit.", BC_VERSION, g->path);
  comment(E, "", "model %s: %d nodes, %d parameter tensors, workspace %lld floats (%.1f MiB)",
          g->model, g->nnodes, g->nparams, (long long)g->arena_floats,
          (double)g->arena_floats * 4.0 / (1 << 20));
  char dims[900] = "";
  for (int i = 0; i < g->ndims; i++) {
    size_t l = strlen(dims);
    snprintf(dims + l, sizeof dims - l, " %s%s%lld", g->dims[i].name,
             g->dims[i].rt >= 0 ? "<=" : "=", (long long)g->dims[i].value);
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
    emit_no_blas_gemm(E);
    emit_aot_tables(E);
    return;
  }
  sb_add(b, "%s\n", rt_decls);
  // Fixed dims as named constants for the reader (the code uses literals).
  // Only names that are C identifiers become DIM_<name>; the rest stay in
  // the comment above, as do the run-time dims (C variables in the code).
  bool any = false;
  for (int i = 0; i < g->ndims; i++) {
    const bc_dim *d = &g->dims[i];
    if (d->rt >= 0 || !is_ident(d->name, BC_MAX_IDENT) || d->value < 0 || d->value > 0x7fffffff)
      continue;
    bool dup = false;
    for (int j = 0; j < i; j++) dup |= strcmp(g->dims[j].name, d->name) == 0;
    if (dup || is_entry_name(E, bc_fmt(E->ctx, "DIM_%s", d->name))) continue;
    sb_add(b, any ? ", DIM_%s = %lld" : "enum { DIM_%s = %lld", d->name, (long long)d->value);
    any = true;
  }
  if (any) sb_add(b, " };\n\n");
  emit_weight_types(E);
  sb_add(b, "typedef char %s_layout_check_[sizeof(%s_weights) == %d * sizeof(const float *) ? 1 : -1];\n\n",
         g->model, g->model, (g->nparams ? g->nparams : 1) + 1);
}

// --- nodes ------------------------------------------------------------------

static void node_comment(emitter *E, const bc_node *n) {
  const bc_graph *g = E->g;
  char where[400] = "";
  if (n->loc.src)
    snprintf(where, sizeof where, "%s:%d:%d", n->loc.src->path, n->loc.line, n->loc.col);
  sb_add(&E->b, "\n");
  char id[64];
  if (E->in_layer)  // the template is trip 1: name the node by trip 0's id
    snprintf(id, sizeof id, "n%d (+%d per layer)", n->id - g->layers.period, g->layers.period);
  else
    snprintf(id, sizeof id, "n%d", n->id);
  comment(E, "  ", "---- %s: %s  %s%s%s", id, bcI_op_name(n->op), where,
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
    l += (size_t)snprintf(line + l, sizeof line - l, n->in[k] >= 0 ? "%s%%%d" : "%s_", k ? ", " : "",
                          n->in[k]);
  if (l < sizeof line) l += (size_t)snprintf(line + l, sizeof line - l, ")");
  bc_sbuf attrs = {0};
  bcT_attrs(n, BC_ATTRS_COMMENT, &attrs);
  if (l < sizeof line) snprintf(line + l, sizeof line - l, "%s", attrs.len ? attrs.p : "");
  free(attrs.p);
  comment(E, "  ", "%s", line);
  for (int k = 0; k < BC_MAX_NODE_PARAMS; k++) {
    int p = n->param[k];
    if (p < 0 || p >= g->nparams) continue;
    if (E->in_layer)
      comment(E, "  ", "  %s = %s.<i>.%s", wname(E, p), g->layers.stack,
              bcI_layer_member(g->params[p].name, strlen(g->layers.stack)));
    else
      comment(E, "  ", "  %s = %s", wname(E, p), g->params[p].name);
  }
}

// Elementwise ops: all operands must have the output's shape (the same
// element count at the bounds and the same run-time dims).
static bool same_numel(emitter *E, const bc_node *n, int nin) {
  int ref = n->out[0] >= 0 ? n->out[0] : n->out[1];
  int64_t want = numel_of(E, ref);
  const char *wx = X(E, numel_ex(E, ref));
  for (int k = 0; k < nin + n->nout; k++) {
    int v = k < nin ? n->in[k] : n->out[k - nin];
    if (v < 0 && k >= nin) continue;
    if (numel_of(E, v) != want || strcmp(X(E, numel_ex(E, v)), wx)) {
      fail(E, "node %d: operand %d has %lld elements, expected %lld", n->id, k,
           (long long)numel_of(E, v), (long long)want);
      return false;
    }
  }
  return true;
}

void bcE_emit_layernorm(emitter *E, const bc_node *n) {
  if (E->o->gemm_only || !same_numel(E, n, 1)) return;
  int64_t d = ck_int(E, width_of(E, n->out[0]), "row width");
  ex rows = rows_ex(E, n->out[0]);
  ck_int(E, rows.bound, "rows");
  char fe[32], fo[32];
  if (n->op == BC_OP_RMSNORM && n->offset != 0)  // Gemma: x / rms * (offset + w)
    sb_add(&E->b, "  bcrt_rmsnorm_off(%s, %lld, %s, %s, %s, %s, %s);\n", X(E, rows), (long long)d,
           vptr(E, n->in[0]), wptr(E, n, 0, d), flit(E, n->offset, fo, sizeof fo),
           flit(E, n->eps, fe, sizeof fe), vptr(E, n->out[0]));
  else if (n->op == BC_OP_RMSNORM)
    sb_add(&E->b, "  bcrt_rmsnorm(%s, %lld, %s, %s, %s, %s);\n", X(E, rows), (long long)d,
           vptr(E, n->in[0]), wptr(E, n, 0, d), flit(E, n->eps, fe, sizeof fe), vptr(E, n->out[0]));
  else
    sb_add(&E->b, "  bcrt_layernorm(%s, %lld, %s, %s, %s, %s, %s);\n", X(E, rows), (long long)d,
           vptr(E, n->in[0]), wptr(E, n, 0, d), wptr(E, n, 1, d), flit(E, n->eps, fe, sizeof fe),
           vptr(E, n->out[0]));
}

void bcE_emit_add_ln(emitter *E, const bc_node *n) {
  if (E->o->gemm_only || !same_numel(E, n, 2)) return;
  int64_t d = ck_int(E, width_of(E, n->out[0]), "row width");
  ex rows = rows_ex(E, n->out[0]);
  ck_int(E, rows.bound, "rows");
  const char *s = n->nout > 1 && n->out[1] >= 0 ? vptr(E, n->out[1]) : "/*sum=*/0";
  char fa[32], fb[32], fe[32], fo[32];
  bool extra = bcT_add_extra(n);  // scaled / activated operands (fuse-scale, fuse-act)
  if (n->rms && n->offset != 0)   // never with extra operands (bcO_fuse_add_ln)
    sb_add(&E->b, "  bcrt_add_rmsnorm_off(%s, %lld, %s, %s, %s, %s, %s, %s, %s, %s, %s);\n",
           X(E, rows), (long long)d, flit(E, n->alpha, fa, sizeof fa), vptr(E, n->in[0]),
           flit(E, n->beta, fb, sizeof fb), vptr(E, n->in[1]), wptr(E, n, 0, d),
           flit(E, n->offset, fo, sizeof fo), flit(E, n->eps, fe, sizeof fe), s,
           vptr(E, n->out[0]));
  else if (extra && n->rms)
    sb_add(&E->b, "  bcrt_add_rmsnorm_sc(%s, %lld, %s, %s, %s, %d, %s, %s, %s, %d, %s, %s, %s, %s);\n",
           X(E, rows), (long long)d, flit(E, n->alpha, fa, sizeof fa), vptr(E, n->in[0]),
           bcE_scale(E, n, 2), bcT_opact_rt(n, 0), flit(E, n->beta, fb, sizeof fb),
           vptr(E, n->in[1]), bcE_scale(E, n, 3), bcT_opact_rt(n, 1), wptr(E, n, 0, d),
           flit(E, n->eps, fe, sizeof fe), s, vptr(E, n->out[0]));
  else if (extra)
    sb_add(&E->b,
           "  bcrt_add_layernorm_sc(%s, %lld, %s, %s, %s, %d, %s, %s, %s, %d, %s, %s, %s, %s, %s);\n",
           X(E, rows), (long long)d, flit(E, n->alpha, fa, sizeof fa), vptr(E, n->in[0]),
           bcE_scale(E, n, 2), bcT_opact_rt(n, 0), flit(E, n->beta, fb, sizeof fb),
           vptr(E, n->in[1]), bcE_scale(E, n, 3), bcT_opact_rt(n, 1), wptr(E, n, 0, d),
           wptr(E, n, 1, d), flit(E, n->eps, fe, sizeof fe), s, vptr(E, n->out[0]));
  else if (n->rms)
    sb_add(&E->b, "  bcrt_add_rmsnorm(%s, %lld, %s, %s, %s, %s, %s, %s, %s, %s);\n", X(E, rows),
           (long long)d, flit(E, n->alpha, fa, sizeof fa), vptr(E, n->in[0]),
           flit(E, n->beta, fb, sizeof fb), vptr(E, n->in[1]), wptr(E, n, 0, d),
           flit(E, n->eps, fe, sizeof fe), s, vptr(E, n->out[0]));
  else
    sb_add(&E->b, "  bcrt_add_layernorm(%s, %lld, %s, %s, %s, %s, %s, %s, %s, %s, %s);\n",
           X(E, rows), (long long)d, flit(E, n->alpha, fa, sizeof fa), vptr(E, n->in[0]),
           flit(E, n->beta, fb, sizeof fb), vptr(E, n->in[1]), wptr(E, n, 0, d), wptr(E, n, 1, d),
           flit(E, n->eps, fe, sizeof fe), s, vptr(E, n->out[0]));
}

// ResiDual: out0 = alpha*in0 + beta*in2 and out1 = LN(alpha2*in1 + beta2*in2).
// If a pass dropped one output, the node degrades to the kernel for the other.
void bcE_emit_dual(emitter *E, const bc_node *n) {
  if (E->o->gemm_only || !same_numel(E, n, 3)) return;
  int ref = n->out[1] >= 0 ? n->out[1] : n->out[0];
  int64_t d = ck_int(E, width_of(E, ref), "row width");
  ex rows = rows_ex(E, ref);
  ck_int(E, rows.bound, "rows");
  char f0[32], f1[32], f2[32], f3[32], fe[32];
  const char *xd = vptr(E, n->in[0]), *xa = vptr(E, n->in[1]), *u = vptr(E, n->in[2]);
  flit(E, n->alpha, f0, sizeof f0);
  flit(E, n->beta, f1, sizeof f1);
  flit(E, n->alpha2, f2, sizeof f2);
  flit(E, n->beta2, f3, sizeof f3);
  flit(E, n->eps, fe, sizeof fe);
  const char *w = wptr(E, n, 0, d), *bias = wptr(E, n, 1, d);
  char fo[32];
  flit(E, n->offset, fo, sizeof fo);
  if (n->rms && n->offset != 0 && n->out[0] >= 0 && n->out[1] >= 0)
    sb_add(&E->b,
           "  bcrt_dual_add_rmsnorm_off(%s, %lld, %s, %s, %s,\n"
           "                            %s, %s, %s, %s,\n"
           "                            %s, %s, %s, %s, %s);\n",
           X(E, rows), (long long)d, f0, xd, f1, f2, xa, f3, u, w, fo, fe, vptr(E, n->out[0]),
           vptr(E, n->out[1]));
  else if (n->rms && n->offset != 0 && n->out[1] >= 0)
    sb_add(&E->b, "  bcrt_add_rmsnorm_off(%s, %lld, %s, %s, %s, %s, %s, %s, %s, /*sum=*/0, %s);\n",
           X(E, rows), (long long)d, f2, xa, f3, u, w, fo, fe, vptr(E, n->out[1]));
  else if (n->rms && n->out[0] >= 0 && n->out[1] >= 0)
    sb_add(&E->b,
           "  bcrt_dual_add_rmsnorm(%s, %lld, %s, %s, %s,\n"
           "                        %s, %s, %s, %s,\n"
           "                        %s, %s, %s, %s);\n",
           X(E, rows), (long long)d, f0, xd, f1, f2, xa, f3, u, w, fe, vptr(E, n->out[0]),
           vptr(E, n->out[1]));
  else if (n->rms && n->out[1] >= 0)
    sb_add(&E->b, "  bcrt_add_rmsnorm(%s, %lld, %s, %s, %s, %s, %s, %s, /*sum=*/0, %s);\n",
           X(E, rows), (long long)d, f2, xa, f3, u, w, fe, vptr(E, n->out[1]));
  else if (n->out[0] >= 0 && n->out[1] >= 0)
    sb_add(&E->b,
           "  bcrt_dual_add_layernorm(%s, %lld, %s, %s, %s,\n"
           "                          %s, %s, %s, %s,\n"
           "                          %s, %s, %s, %s, %s);\n",
           X(E, rows), (long long)d, f0, xd, f1, f2, xa, f3, u, w, bias, fe,
           vptr(E, n->out[0]), vptr(E, n->out[1]));
  else if (n->out[1] >= 0)
    sb_add(&E->b, "  bcrt_add_layernorm(%s, %lld, %s, %s, %s, %s, %s, %s, %s, /*sum=*/0, %s);\n",
           X(E, rows), (long long)d, f2, xa, f3, u, w, bias, fe, vptr(E, n->out[1]));
  else if (n->out[0] >= 0)
    sb_add(&E->b, "  bcrt_add(%s, %s, %s, %s, %s, %s);\n", X(E, numel_ex(E, n->out[0])), f0, xd,
           f1, u, vptr(E, n->out[0]));
}

// --- packed weights -------------------------------------------------
//
// The blocks of the packed copy of the GEMM weights are layout.c's
// (bcY_pack_layout).  The code names a block only through pk_of (an offset
// into `packed`; in the layer function, into the trip's blocks: poff +
// offset), and `packed` itself is w->packed, the member after the
// parameters (JIT and AOT alike): NULL there means cblas everywhere.

static int setup_packed(emitter *E) {
  const bc_graph *g = E->g;
  E->pb = bc_alloc(E->ctx, (size_t)(g->nnodes > 0 ? g->nnodes : 1) * BCY_PBLOCKS_PER_NODE * sizeof *E->pb);
  if (!E->pb) return oom(E);
  const char *wt = bc_weight_type_name(g->weight_type);
  if (!wt) return fail(E, "weight type %d is not one of f32, bf16, f16, q8_0, q4_0", g->weight_type);
  if (g->weight_type != BC_WT_F32 && (E->o->profile || E->o->gemm_only))
    return fail(E, "--weight-dtype %s: profiling and GEMM-only builds read f32 weights only", wt);
  if (g->weight_type != BC_WT_F32 && (E->o->backward || E->o->train))
    return fail(E, "--weight-dtype %s is for inference: the backward and the training step "
                   "read f32 weights", wt);
  E->npb = bcY_pack_layout(g, E->pb, &E->packed_floats);
  if (E->npb < 0) return oom(E);
  E->pkonly = bc_alloc(E->ctx, (size_t)(g->nparams > 0 ? g->nparams : 1) * sizeof *E->pkonly);
  if (!E->pkonly || (E->npkonly = bcY_packed_only(g, E->pkonly)) < 0) return oom(E);
  if (E->packed_floats > INT64_MAX / 8 || E->packed_floats * 4 > BC_MAX_WORKSPACE)
    return fail(E, "the packed weights (%lld floats) are too big", (long long)E->packed_floats);
  return BC_OK;
}

// The offset in `packed` of node n's param-slot rows [row0, row0 + rows),
// as a C expression; NULL when no block holds them (cblas reads the
// weight itself).  The one place code names a packed operand.
static const char *pk_of(emitter *E, const bc_node *n, int slot, int64_t row0, int64_t rows) {
  int p = n->param[slot];
  int lo = E->in_layer ? E->pk_lo + E->pk_per : 0, hi = E->in_layer ? lo + E->pk_per : E->npb;
  for (int i = lo; p >= 0 && i < hi; i++) {
    const pblock *b = &E->pb[i];
    if (b->param == p && b->row0 == row0 && b->rows == rows && b->in_out == n->in_out)
      return keep(E, E->in_layer ? plus_k(E, "poff", b->off - E->pb[lo].off)  // the trip's blocks
                                 : rfmt(E, "%lld", (long long)b->off));
  }
  return NULL;
}

// With a layer run, its packed blocks must be trip after trip, each trip's
// the previous one's shifted by one stride (bcY_pack_layout goes in node
// order, so they are); sets pk_lo and pk_per.  False when they are not.
static bool pack_periodic(emitter *E) {
  const bc_layers *L = &E->g->layers;
  int lo = -1, hi = -1, p0 = L->param0, p1 = L->param0 + L->count * L->nparams;
  for (int i = 0; i < E->npb; i++) {
    bool in = E->pb[i].param >= p0 && E->pb[i].param < p1;
    if (in && lo < 0) lo = i;
    if (in && hi >= 0) return false;  // not contiguous
    if (!in && lo >= 0 && hi < 0) hi = i;
  }
  if (lo < 0) return true;  // no packed block in the run
  if (hi < 0) hi = E->npb;
  if ((hi - lo) % L->count) return false;
  int per = (hi - lo) / L->count;
  int64_t stride = per ? E->pb[lo + per].off - E->pb[lo].off : 0;
  for (int i = lo + per; i < hi; i++) {
    const pblock *a = &E->pb[i - per], *b = &E->pb[i];
    if (b->param != a->param + L->nparams || b->row0 != a->row0 || b->rows != a->rows ||
        b->k != a->k || b->in_out != a->in_out || b->off != a->off + stride)
      return false;
  }
  E->pk_lo = lo;
  E->pk_per = per;
  return true;
}

// The runtime's name of a weight type, "BCRT_WT_Q8_0".
static const char *wt_macro(int wt) {
  static const char *const nm[BC_WT_COUNT] = {"BCRT_WT_F32", "BCRT_WT_BF16", "BCRT_WT_Q8_0",
                                              "BCRT_WT_Q4_0", "BCRT_WT_F16"};
  return wt >= 0 && wt < BC_WT_COUNT ? nm[wt] : "BCRT_WT_F32";
}

// A weight matrix as a GEMM reads it: PyTorch's (out, in) rows (BCRT_TRANS),
// or (in, out) rows (layout=in_out, BCRT_NO_TRANS), ld floats apart; the
// expression may point inside a packed matrix.  pk: the offset of its
// packed copy in `packed` (pk_of), NULL when no small-M product reads it.
typedef bcE_wmat wmat;  // ops.h

// y[m, nn] (row stride ldy) = x[m, k] W^T + bias (+ y when beta = 1).  With
// a packed copy, one bcrt_linear call (the small-M kernel when the rows are
// few and `packed` is set, else cblas; bias in its epilogue); without, a
// cblas_sgemm, the bias having been written into y first (linear_w).
static void gemm_w(emitter *E, const char *m, int64_t nn, int64_t k, const char *x, wmat W,
                   const char *bias, const char *beta, const char *y, int64_t ldy) {
  const char *tr = W.in_out ? "BCRT_NO_TRANS" : "BCRT_TRANS";
  if (E->g->weight_type != BC_WT_F32) {  // the packed copy is the matrix: every row count
    if (!W.pk) {
      fail(E, "internal error: a %s matrix product without its packed copy",
           bc_weight_type_name(E->g->weight_type));
      return;
    }
    E->packed_used = true;
    sb_add(&E->b,
           "  bcrt_linear_wt%s(%s%s, %s, %lld, %lld, %s, %lld,\n"
           "                 packed, 4L * (%s), %s, %s, %s, %lld);\n",
           E->pool ? "_pool" : "", E->pool ? "pool, " : "", wt_macro(E->g->weight_type), m,
           (long long)nn, (long long)k, x, (long long)k, W.pk, bias, beta, y, (long long)ldy);
    return;
  }
  if (W.pk) {
    E->packed_used = true;
    sb_add(&E->b,
           "  bcrt_linear%s(%s%s, %lld, %lld, %s, %lld, %s, %lld, %s,\n"
           "              packed, %s, %s, %s, %s, %lld);\n",
           E->pool ? "_pool" : "", E->pool ? "pool, " : "", m, (long long)nn, (long long)k, x,
           (long long)k, W.w, (long long)W.ld, tr, W.pk, bias, beta, y, (long long)ldy);
    return;
  }
  if (E->pool) {  // no packed copy: cblas by runs of columns over the pool
    sb_add(&E->b,
           "  bcrt_linear_pool(pool, %s, %lld, %lld, %s, %lld, %s, %lld, %s,\n"
           "                   0, 0, 0, %s, %s, %lld);\n",
           m, (long long)nn, (long long)k, x, (long long)k, W.w, (long long)W.ld, tr, beta, y,
           (long long)ldy);
    return;
  }
  sb_add(&E->b,
         "  cblas_sgemm(BCRT_ROW_MAJOR, BCRT_NO_TRANS, %s, %s, %lld, %lld,\n"
         "              1.0f, %s, %lld, %s, %lld, %s, %s, %lld);\n",
         tr, m, (long long)nn, (long long)k, x, (long long)k, W.w, (long long)W.ld, beta, y,
         (long long)ldy);
}

// y = x W^T + bias into y (a column block of a wider matrix when ldy > nn).
// Without a packed copy the bias goes in first (rows <- bias, then the GEMM
// accumulates with beta = 1): cheaper than a separate epilogue pass when
// there is no activation, as y is touched once before the GEMM instead of
// once after.
static void linear_w(emitter *E, const char *m, int64_t nn, int64_t k, const char *x, wmat W,
                     const char *bias, const char *y, int64_t ldy) {
  bool has_b = strcmp(bias, "0") != 0 && !E->o->gemm_only;
  if (W.pk) {
    gemm_w(E, m, nn, k, x, W, has_b ? bias : "0", "0.0f", y, ldy);
    return;
  }
  if (has_b) {
    if (ldy == nn) sb_add(&E->b, "  bcrt_fill_rows(%s, %lld, %s, %s);\n", m, (long long)nn, bias, y);
    else sb_add(&E->b, "  bcrt_fill_cols(%s, %lld, %lld, %s, %s);\n", m, (long long)nn,
                (long long)ldy, bias, y);
  }
  gemm_w(E, m, nn, k, x, W, "0", strcmp(bias, "0") ? "1.0f" : "0.0f", y, ldy);
}

// The whole (out, in) matrix in param slot `slot` of node n, in its layout.
static wmat wfull(emitter *E, const bc_node *n, int slot, int64_t out, int64_t in) {
  return (wmat){wptr(E, n, slot, out * in), n->in_out ? out : in, n->in_out,
                pk_of(E, n, slot, 0, out)};
}

static bool scratch_ok(emitter *E, const bc_node *n, int k, int64_t need) {
  if (k >= n->nscratch || n->scratch[k] < 0 || numel_of(E, n->scratch[k]) < need) {
    fail(E, "node %d (%s): scratch %d missing or smaller than %lld floats", n->id,
         bcI_op_name(n->op), k, (long long)need);
    return false;
  }
  return true;
}

static int kvv_of(const bc_node *n) { return n->nin > 1 ? n->in[1] : -1; }

// One attention problem as the loops see it.
typedef struct {
  ex B, T, S;               // batch, query rows, key rows (S = T for self-attention)
  int64_t D, H, dh;
  int64_t QD;               // the query width H*dh: the head outputs' row stride
  const char *q, *k, *v;    // Q, K, V base pointers (column blocks of the projections)
  int64_t ldq, ldkv;        // their row strides
  const char *o;            // head outputs [B*T, QD]
  const char *scale;
  bool causal;
  int64_t vcol;             // V's column offset from K (the K/V width KV*dh)
  int64_t group;            // query heads per key/value head (grouped-query)
  int64_t window;           // sliding window (0: none; issue 23)
  const char *cap;          // the scores' soft-cap as C ("0.0f": none)
  const char *prow;         // step entry: row b's first new position as an int
} attn;

// The step entry's first new position of batch row bi as an int: pos[bi]
// (the entry's `const long *pos`, which the layer function takes too),
// which the prologue checked to be in 0 .. the sequence bound.
static const char *pos_int(emitter *E, const char *bi) { return rfmt(E, "(int)pos[%s]", bi); }

// The rotation of `heads` heads (rows ld floats apart) of buf, as Q or K:
// in the step entry (step) each batch row from its own position pos[b]
// (a.prow; one call for B = 1, a loop over b else), elsewhere all rows
// (total, with n positions per batch row) from position 0.
static void attn_rope(emitter *E, const attn *a, bool step, bool one, const char *total,
                      const char *n, int64_t heads, int64_t ld, const char *th, const char *buf,
                      const char *what) {
  const char *T = keep(E, X(E, a->T));
  if (step && one)
    sb_add(&E->b, "  bcrt_rope(%s, %s, /*pos0=*/%s, %lld, %lld, %lld, %s, %s);  // rotary %s\n",
           T, T, a->prow, (long long)heads, (long long)a->dh, (long long)ld, th, buf, what);
  else if (step)
    sb_add(&E->b, "  for (int b = 0; b < %s; b++)  // rotary %s, row b from pos[b]\n"
                  "    bcrt_rope(%s, %s, /*pos0=*/%s, %lld, %lld, %lld, %s, %s + b*%s);\n",
           X(E, a->B), what, T, T, a->prow, (long long)heads, (long long)a->dh, (long long)ld,
           th, buf, X(E, ex_mul(a->T, ex_lit(ld))));
  else
    sb_add(&E->b, "  bcrt_rope(%s, %s, /*pos0=*/0, %lld, %lld, %lld, %s, %s);  // rotary %s\n",
           total, n, (long long)heads, (long long)a->dh, (long long)ld, th, buf, what);
}

// Q into a.q (row stride a.ldq) from x, K and V into kbuf (row stride
// a.ldkv, V a.vcol columns after K) from kvx: one GEMM over the packed
// Q|K|V matrix for self-attention, one for Q and one for K|V (its row
// block) for cross-attention, or one per separate projection.  guard
// (cross-attention only): the K and V GEMMs open `if (guard) {`, which the
// caller closes (the step entry projects the memory once).
static void attn_projections(emitter *E, const bc_node *n, const attn *a, const char *x,
                             const char *kvx, const char *BT, const char *BS, const char *kbuf,
                             int64_t kvd, const char *guard) {
  int64_t D = a->D, QD = a->QD;
  const char *open = "%s";  // guard: the line opening the memory's block
  if (n->param[4] >= 0) {  // q=, k=, v=
    linear_w(E, BT, QD, D, x, wfull(E, n, 0, QD, D), wptr(E, n, 1, QD), a->q, a->ldq);
    if (guard) sb_add(&E->b, open, guard);
    linear_w(E, BS, kvd, D, kvx, wfull(E, n, 4, kvd, D), wptr(E, n, 5, kvd),
             kbuf, a->ldkv);
    linear_w(E, BS, kvd, D, kvx, wfull(E, n, 6, kvd, D), wptr(E, n, 7, kvd),
             keep(E, plus_k(E, kbuf, kvd)), a->ldkv);
    return;
  }
  if (QD != D) {
    fail(E, "node %d: a packed QKV projection with head_dim=%lld", n->id, (long long)a->dh);
    return;
  }
  int64_t rows = D + 2 * kvd;
  const char *w = wptr(E, n, 0, rows * D), *b = wptr(E, n, 1, rows);
  // Q, K, V are row blocks of an (out, in) matrix, column blocks of (in, out).
  int64_t ld = n->in_out ? rows : D, step = n->in_out ? 1 : D;
  if (kvv_of(n) < 0) {
    linear_w(E, BT, rows, D, x, (wmat){w, ld, n->in_out, pk_of(E, n, 0, 0, rows)}, b, a->q, a->ldq);
    return;
  }
  linear_w(E, BT, D, D, x, (wmat){w, ld, n->in_out, pk_of(E, n, 0, 0, D)}, b, a->q, a->ldq);
  if (guard) sb_add(&E->b, open, guard);
  linear_w(E, BS, 2 * kvd, D, kvx,
           (wmat){keep(E, plus_k(E, w, D * step)), ld, n->in_out, pk_of(E, n, 0, D, 2 * kvd)},
           strcmp(b, "0") ? keep(E, plus_k(E, b, D)) : "0", kbuf, a->ldkv);
}

static const char *len_ptr(emitter *E, const bc_node *n, int slot) {
  if (slot >= n->nin || n->in[slot] < 0) return NULL;
  int v = n->in[slot];
  if (E->g->vals[v].type != BC_VT_I32 || input_index(E->g, v) < 0) {
    fail(E, "node %d: lengths slot %d is not a lengths input", n->id, slot);
    return NULL;
  }
  return vptr(E, v);
}

// Multi-head attention without copies.  Scratch (from the planner):
//   0: self: qkv [B*T, 3D], packed Q | K | V column blocks
//      cross: q [B*T, D] then kv [B*S, 2D] (K | V) right after it
//      (with head_dim=: Q is H*dh wide, K and V KV*dh)
//   1: o  [B*T, H*dh]  head outputs, head h in columns [h*dh, (h+1)*dh)
//   2: sc [T, S] or more: one head's (row block's) scores, reused
// Heads are strided views into the projections: no transposes or copies.
// Keys past a lengths entry are never computed (the GEMMs and the softmax
// run over the first nk columns), and output rows past it are zeroed.
void bcE_emit_attention(emitter *E, const bc_node *n) {
  const bc_graph *g = E->g;
  const bc_shape *sh = &g->vals[n->in[0]].shape;
  int kvv = n->nin > 1 ? n->in[1] : -1;
  const bc_shape *ks = kvv >= 0 ? &g->vals[kvv].shape : sh;
  if (sh->rank < 2 || sh->rank > 3 || ks->rank != sh->rank) {
    fail(E, "node %d: Attention input rank %d", n->id, sh->rank);
    return;
  }
  attn a = {.B = sh->rank == 3 ? ex_dim(E, sh, 0) : ex_lit(1), .T = ex_dim(E, sh, sh->rank - 2),
            .S = ex_dim(E, ks, ks->rank - 2), .D = sh->d[sh->rank - 1], .H = n->heads,
            .causal = n->causal};
  int64_t D = a.D;
  if (a.H <= 0 || (!n->head_dim && D % a.H) || ks->d[ks->rank - 1] != D || numel_of(E, n->out[0]) != bc_shape_numel(sh) ||
      (kvv >= 0 && strcmp(X(E, a.B), X(E, ks->rank == 3 ? ex_dim(E, ks, 0) : ex_lit(1)))) ||
      (kvv >= 0 && n->causal)) {
    fail(E, "node %d: bad Attention shape", n->id);
    return;
  }
  a.dh = bc_head_dim(n, D);
  int64_t QD = a.QD = a.H * a.dh;
  ex BT = ex_mul(a.B, a.T), BS = ex_mul(a.B, a.S);
  ck_int(E, BT.bound, "B*T");
  ck_int(E, BS.bound, "B*S");
  ck_int(E, 3 * D, "3*D");
  ck_int(E, QD + 2 * n->kv_heads * a.dh, "Q|K|V width");
  ck_int(E, a.T.bound * a.S.bound, "T*S");
  int64_t KV = n->kv_heads ? n->kv_heads : a.H, kvd = KV * a.dh, group = a.H / KV;
  int64_t proj = kvv >= 0 ? BT.bound * QD + BS.bound * 2 * kvd : BT.bound * (QD + 2 * kvd);
  // Offsets into the projections, the head outputs, the output and the
  // cache are int arithmetic in the run-time dims (r0*ldq, (b*T + len[b])*D).
  ck_int(E, proj, "the Q|K|V projections");
  ck_int(E, BT.bound * (QD > D ? QD : D), "B*T*width");
  if (E->step) ck_int(E, a.B.bound * E->g->dims[E->seq].value * 2 * kvd, "the K|V cache block");
  if (!scratch_ok(E, n, 0, proj) || !scratch_ok(E, n, 1, BT.bound * QD)) return;
  const char *x = vptr(E, n->in[0]), *y = vptr(E, n->out[0]);
  const char *qkv = vptr(E, n->scratch[0]);
  a.o = vptr(E, n->scratch[1]);
  char scale[32], cap[32];
  a.scale = flit(E, n->scale > 0 ? n->scale : 1.0 / sqrt((double)a.dh), scale, sizeof scale);
  a.cap = n->softcap > 0 ? flit(E, n->softcap, cap, sizeof cap) : "0.0f";
  a.window = n->window;
  const char *b_out = wptr(E, n, 3, D);
  const char *len = len_ptr(E, n, 2), *kvlen = len_ptr(E, n, 3);
  if (kvv < 0 && kvlen) { fail(E, "node %d: kv_lengths without kv", n->id); return; }
  if (E->step) len = kvlen = NULL;  // the step entry takes no lengths (its prologue checks)
  const char *keylen = kvv >= 0 ? kvlen : len;  // what limits the keys
  const char *T = keep(E, X(E, a.T)), *S = keep(E, X(E, a.S));

  a.q = qkv;
  a.ldq = kvv < 0 ? QD + 2 * kvd : QD;
  a.ldkv = kvv < 0 ? QD + 2 * kvd : 2 * kvd;
  a.vcol = kvd;
  a.group = group;
  const char *kbuf = keep(E, kvv < 0 ? plus_k(E, qkv, QD) : plus_k(E, qkv, BT.bound * QD));
  // Step entry: this node's block of the KV cache.  Cross-attention
  // projects the memory straight into it, once (pos == 0).
  const char *kc = E->step ? E->cache_name[n->id] : NULL;
  bool cross_step = E->step && kvv >= 0;
  if (cross_step) kbuf = kc;
  // A cross-attention's memory is projected into the cache once per
  // sequence: in the step entry, for the batch rows that start (pos[bm] ==
  // 0, bm's memory: S rows at bm*S), the others' cached K|V kept.
  bool one = ex_fixed(&a.B) && a.B.k == 1;
  const char *kvx = kvv >= 0 ? vptr(E, kvv) : x, *mrows = X(E, BS), *mkbuf = kbuf, *guard = NULL;
  if (cross_step && one) {
    guard = "  if (pos_lo == 0) {  // the memory's K|V: once per sequence, kept in the cache\n";
  } else if (cross_step) {
    guard = keep(E, rfmt(E, "  for (int bm = 0; bm < %s; bm++)\n"
                            "    if (pos[bm] == 0) {  // row bm starts: its memory's K|V into the cache\n",
                         X(E, a.B)));
    kvx = keep(E, rfmt(E, "%s + (long)bm*%s*%lld", kvx, S, (long long)D));
    mkbuf = keep(E, rfmt(E, "%s + (long)bm*%s*%lld", kbuf, S, (long long)a.ldkv));
    mrows = S;
  }
  mrows = keep(E, mrows);
  attn_projections(E, n, &a, x, kvx, X(E, BT), mrows, mkbuf, kvd, guard);
  a.prow = keep(E, pos_int(E, one ? "0" : "b"));
  // QK-norm (issue 23): q and k normalised in place before the rotations.
  bool qkn = n->qk_norm && !E->o->gemm_only;
  char qe[32];
  flit(E, n->qk_norm_eps, qe, sizeof qe);
  int64_t wq = n->qk_norm_per_head ? a.dh : QD, wk = n->qk_norm_per_head ? a.dh : kvd;
  if (qkn)
    sb_add(&E->b, "  bcrt_seg_norm(%s, %lld, %lld, %lld, %s, %s, %s, %d, %s);  // k_norm\n",
           cross_step ? mrows : X(E, BS), (long long)(n->qk_norm_per_head ? KV : 1), (long long)wk,
           (long long)a.ldkv, wptr(E, n, 10, wk), wptr(E, n, 11, wk), qe, n->qk_norm == 1,
           cross_step ? mkbuf : kbuf);
  char th[32];
  flit(E, n->rope_theta, th, sizeof th);
  bool rope = n->rope && !E->o->gemm_only;
  if (rope)  // the memory's keys (cross-attention) sit at positions 0..S-1
    attn_rope(E, &a, E->step && kvv < 0, one, cross_step ? mrows : keep(E, X(E, BS)), S, KV, a.ldkv,
              th, cross_step ? mkbuf : kbuf, "K");
  if (cross_step) sb_add(&E->b, one ? "  }\n" : "    }\n");
  if (qkn)
    sb_add(&E->b, "  bcrt_seg_norm(%s, %lld, %lld, %lld, %s, %s, %s, %d, %s);  // q_norm\n",
           X(E, BT), (long long)(n->qk_norm_per_head ? a.H : 1), (long long)wq, (long long)a.ldq,
           wptr(E, n, 8, wq), wptr(E, n, 9, wq), qe, n->qk_norm == 1, a.q);
  if (rope) attn_rope(E, &a, E->step, one, keep(E, X(E, BT)), T, a.H, a.ldq, th, a.q, "Q");
  if (E->step && kvv < 0) {
    // Append the new rows' K|V to the cache (rows pos[b] .. pos[b]+T-1 of
    // batch row b of the block [B, Tmax, 2*kvd]); the heads then read every
    // key from there.
    int64_t tmax = E->g->dims[E->seq].value, kvw = 2 * kvd;
    sb_add(&E->b, "  // K|V of the new rows -> cache rows pos[b].. of %s [B, %lld, %lld]\n", kc,
           (long long)tmax, (long long)kvw);
    if (one)
      sb_add(&E->b, "  bcrt_copy_rows(%s, %lld, %s, %lld, %s + pos[0]*%lld, %lld);\n", T,
             (long long)kvw, kbuf, (long long)a.ldkv, kc, (long long)kvw, (long long)kvw);
    else
      sb_add(&E->b, "  for (int b = 0; b < %s; b++)\n"
                    "    bcrt_copy_rows(%s, %lld, %s + b*%s, %lld, %s + (b*%lld + pos[b])*%lld, %lld);\n",
             X(E, a.B), T, (long long)kvw, kbuf, X(E, ex_mul(a.T, ex_lit(a.ldkv))),
             (long long)a.ldkv, kc, (long long)tmax, (long long)kvw, (long long)kvw);
    kbuf = kc;
    a.ldkv = kvw;
    a.S = ex_lit(tmax);  // the batch stride of the cache block, in rows
  }
  qkv = kbuf;  // K (and V, vcol columns on) live here
  // Every head of every batch row in one call: tiled, online softmax, no
  // score matrix; the (row, head, query block) tasks over the pool.  The
  // step entry's self-attention reads the cache: kvrows its rows per
  // batch row, the keys of row i of batch row b those up to pos[b] + i
  // (causal; rowpos = the entry's pos, a position per batch row).
  const char *kvrows = keep(E, X(E, a.S));
  const char *nkeys = E->step && kvv < 0 ? kvrows : S;
  sb_add(&E->b, "  // softmax(scale Q K^T) V for every head: tiled, no [T, S] scores\n");
  sb_add(&E->b,
         "  bcrt_attention(%s, %s, %s, %lld, /*group=*/%lld, /*dh=*/%lld, %s, %lld, %s, %lld,\n"
         "                 /*kvrows=*/%s, /*vcol=*/%lld, /*nk=*/%s, /*S=*/%s, /*causal=*/%d,\n"
         "                 /*row0=*/0, /*rowpos=*/%s, /*window=*/%lld, %s, /*cap=*/%s, %s, %lld);\n",
         E->pool ? "pool" : "0", X(E, a.B), T, (long long)a.H, (long long)a.group,
         (long long)a.dh, a.q, (long long)a.ldq, qkv, (long long)a.ldkv, kvrows,
         (long long)a.vcol, keylen ? keylen : "0", nkeys, a.causal ? 1 : 0,
         E->step && kvv < 0 ? "pos" : "0", (long long)a.window, a.scale, a.cap, a.o,
         (long long)QD);
  if (n->head_scale && !E->o->gemm_only)  // NormFormer: head h's output times head_scale[h]
    sb_add(&E->b, "  bcrt_head_scale(%s, %lld, %lld, %lld, %s, %s);\n", X(E, BT), (long long)a.H,
           (long long)a.dh, (long long)QD, wptr(E, n, 12, a.H), a.o);
  linear_w(E, X(E, BT), D, QD, a.o, wfull(E, n, 2, D, QD), b_out, y, D);
  if (len && !E->o->gemm_only) {
    sb_add(&E->b, "  if (%s)  // padded query rows are exactly zero\n", len);
    if (one)
      sb_add(&E->b, "    bcrt_fill_rows(%s - %s[0], %lld, /*bias=*/0, %s + %s[0]*%lld);\n", T, len,
             (long long)D, y, len, (long long)D);
    else {
      sb_add(&E->b, "    for (int b = 0; b < %s; b++)\n", X(E, a.B));
      sb_add(&E->b, "      bcrt_fill_rows(%s - %s[b], %lld, /*bias=*/0, %s + (b*%s + %s[b])*%lld);\n",
             T, len, (long long)D, y, T, len, (long long)D);
    }
  }
}

static const char *act_macro(bc_act a) {
  switch (a) {
  case BC_ACT_GELU: return "BCRT_ACT_GELU";
  case BC_ACT_GELU_TANH: return "BCRT_ACT_GELU_TANH";
  case BC_ACT_SWIGLU: return "BCRT_ACT_SWIGLU";
  case BC_ACT_GEGLU: return "BCRT_ACT_GEGLU";
  case BC_ACT_GEGLU_TANH: return "BCRT_ACT_GEGLU_TANH";
  default: return "BCRT_ACT_RELU";
  }
}

const char *bcE_act_macro(bc_act a) { return act_macro(a); }

// What op files use (ops.h).
bool bcE_gemm_only(const emitter *E) { return E->o->gemm_only; }
const bc_graph *bcE_graph(const emitter *E) { return E->g; }
const char *bcE_batch(emitter *E, int v) {
  const bc_shape *s = &E->g->vals[v].shape;
  return X(E, s->rank == 3 ? ex_dim(E, s, 0) : ex_lit(1));
}
const char *bcE_seq(emitter *E, int v) {
  const bc_shape *s = &E->g->vals[v].shape;
  return X(E, s->rank >= 2 ? ex_dim(E, s, s->rank - 2) : ex_lit(1));
}
const char *bcE_pos0(emitter *E, int v) {
  const bc_shape *s = &E->g->vals[v].shape;
  return E->step && s->rank >= 2 && s->sym[s->rank - 2] == E->seq + 1 ? "pos" : "0";
}
static const char *ret(emitter *E, int code);
const char *bcE_ret(emitter *E, int code) { return ret(E, code); }
bc_sbuf *bcE_body(emitter *E) { return &E->b; }
const char *bcE_keep(emitter *E, const char *s) { return keep(E, s); }
bool bcE_scratch_ok(emitter *E, const bc_node *n, int k, int64_t need) {
  return scratch_ok(E, n, k, need);
}
void bcE_gemm_w(emitter *E, const char *m, int64_t nn, int64_t k, const char *x, wmat W,
                const char *bias, const char *beta, const char *y, int64_t ldy) {
  gemm_w(E, m, nn, k, x, W, bias, beta, y, ldy);
}
int bcE_fail(emitter *E, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return fail(E, "%s", msg);
}
bool bcE_same_numel(emitter *E, const bc_node *n, int nin) { return same_numel(E, n, nin); }
const char *bcE_numel(emitter *E, int v) { return X(E, numel_ex(E, v)); }
const char *bcE_scale(emitter *E, const bc_node *n, int k) {
  int v = k < n->nin ? n->in[k] : -1;
  if (v < 0) return "0, 0";
  return bc_fmt(E->ctx, "%s, %lld", vptr(E, v), (long long)bc_shape_numel(&E->g->vals[v].shape));
}
const char *bcE_vptr(emitter *E, int v) { return vptr(E, v); }
const char *bcE_flit(emitter *E, double v, char *buf, size_t n) { return flit(E, v, buf, n); }
int64_t bcE_width(const emitter *E, int v) { return width_of(E, v); }
int64_t bcE_numel_bound(const emitter *E, int v) { return numel_of(E, v); }
int64_t bcE_rows_bound(const emitter *E, int v) { return rows_ex(E, v).bound; }
const char *bcE_rows(emitter *E, int v) { return X(E, rows_ex(E, v)); }
int64_t bcE_ck_int(emitter *E, int64_t v, const char *what) { return ck_int(E, v, what); }
const char *bcE_wptr(emitter *E, const bc_node *n, int slot, int64_t need) {
  return wptr(E, n, slot, need);
}
wmat bcE_wfull(emitter *E, const bc_node *n, int slot, int64_t out, int64_t in) {
  return wfull(E, n, slot, out, in);
}
void bcE_linear_w(emitter *E, const char *m, int64_t nn, int64_t k, const char *x, wmat W,
                  const char *bias, const char *y, int64_t ldy) {
  linear_w(E, m, nn, k, x, W, bias, y, ldy);
}

static void emit_node(emitter *E, const bc_node *n) {
  node_comment(E, n);
  const bc_op_info *info = bcI_op_info(n->op);
  if (!info) { fail(E, "node %d: unknown op %d", n->id, (int)n->op); return; }
  for (int k = 0; k < n->nin; k++)
    if (n->in[k] >= E->g->nvals || (n->in[k] < 0 && k < info->nin_min)) {
      fail(E, "node %d: bad input", n->id);
      return;
    }
  if (n->nout < 1 || (n->out[0] < 0 && (n->nout < 2 || n->out[1] < 0))) { fail(E, "node %d: no output", n->id); return; }
  if (E->o->profile && E->in_layer)  // node n0 + j of the trip
    sb_add(&E->b, "  prof(pctx, %s);\n",
           plus_k(E, "n0", n->id - E->g->layers.first - E->g->layers.period));
  else if (E->o->profile)
    sb_add(&E->b, "  prof(pctx, %d);\n", n->id);
  const bc_op_def *d = bcT_def(n->op);
  if (!d) { fail(E, "node %d: unknown op %d", n->id, (int)n->op); return; }
  d->emit(E, n);
}

// --- the step entry ---------------------------------------------------
//
// Whether g can be stepped, and its cache's header and blocks, are
// layout.c's (bcY_step_dim, bcY_cache_layout); this is the code over them.

// Sets up the step entry when this build has one: the sequence dim, the
// layout and one named pointer per attention node's block.
static int setup_step(emitter *E) {
  const bc_graph *g = E->g;
  if (E->o->profile || E->o->gemm_only || (E->seq = bcY_step_dim(g)) < 0) return E->err;
  if (!E->dimvar[E->seq]) return fail(E, "the stepped dim has no C name");
  size_t nn = (size_t)(g->nnodes ? g->nnodes : 1);
  E->cache_off = bc_alloc(E->ctx, nn * sizeof *E->cache_off);
  E->cache_name = bc_alloc(E->ctx, nn * sizeof *E->cache_name);
  E->cache_keep = bc_alloc(E->ctx, (size_t)(g->nrt ? g->nrt : 1) * sizeof *E->cache_keep);
  if (!E->cache_off || !E->cache_name || !E->cache_keep) return oom(E);
  int64_t total = bcY_cache_layout(g, E->cache_off);
  if (total * 4 > BC_MAX_WORKSPACE) return fail(E, "the KV cache (%lld floats) is too big", (long long)total);
  E->cache_bytes = total * 4;
  E->cache_id = bcY_cache_id(g);
  for (int k = 0; k < g->nrt; k++) E->cache_keep[k] = bcY_cache_keeps(g, E->seq, k);
  E->cache_hdr = local_name(E, &E->names, "cache_hdr", "cache_hdr");
  // The batch rows each have their own position (<model>_step_rows): one
  // batch axis shared by every attention.
  E->rows = NULL;
  for (int i = 0; i < g->nnodes && !E->err; i++) {
    const bc_node *n = &g->nodes[i];
    if (n->op != BC_OP_ATTENTION || n->heads <= 0 || n->in[0] < 0) continue;
    const bc_shape *sh = &g->vals[n->in[0]].shape;
    const char *r = keep(E, X(E, sh->rank == 3 ? ex_dim(E, sh, 0) : ex_lit(1)));
    if (!E->rows) E->rows = r;
    else if (strcmp(E->rows, r))
      return fail(E, "the step entry needs one batch dim for every attention (%s and %s)",
                  E->rows, r);
  }
  if (!E->rows) E->rows = "1";
  E->rows_max = bcY_cache_rows(g);
  for (int i = 0; i < g->nnodes && !E->err; i++)
    if (E->cache_off[i] >= 0)
      E->cache_name[i] = local_name(E, &E->names, bc_fmt(E->ctx, "kv_cache%d", i), "kv_cache");
  E->steppable = !E->err;
  if (E->steppable) E->tail = bcY_step_tail(g);
  return E->err;
}

// The cache offset (floats) of trip t's first K|V block (0 when it has none).
static int64_t layer_cache_base(const emitter *E, int t) {
  const bc_layers *L = &E->g->layers;
  for (int j = 0; j < L->period; j++) {
    int64_t o = E->cache_off[L->first + t * L->period + j];
    if (o >= 0) return o;
  }
  return 0;
}

// Nodes [*lo, *hi) are the layer run's (empty without a layer loop).
static void run_nodes(const emitter *E, int *lo, int *hi) {
  const bc_layers *L = &E->g->layers;
  *lo = *hi = 0;
  if (E->lay) *lo = L->first, *hi = L->first + L->count * L->period;
}

// The step entry's named cache blocks (prologue): the nodes outside the
// layer run in the entry, the template trip's in the layer function, whose
// `cache` points at its trip's blocks.
static void emit_cache_names(emitter *E) {
  const bc_graph *g = E->g;
  int lo, hi;
  run_nodes(E, &lo, &hi);
  int64_t base = E->in_layer ? layer_cache_base(E, 1) : 0;
  for (int i = 0; i < g->nnodes; i++) {
    if (E->cache_off[i] < 0) continue;
    bool mine = E->in_layer ? i >= lo + g->layers.period && i < lo + 2 * g->layers.period
                            : i < lo || i >= hi;
    if (!mine) continue;
    const bc_node *n = &g->nodes[i];
    if (E->in_layer)
      sb_add(&E->b, "  float *const %s = %s;  // %s K|V\n", E->cache_name[i],
             plus_k(E, "cache", E->cache_off[i] - base),
             kvv_of(n) >= 0 ? "the memory's" : "every position's");
    else
      sb_add(&E->b, "  float *const %s = (float *)cache + %lld;  // n%d: %s K|V\n", E->cache_name[i],
             (long long)E->cache_off[i], i, kvv_of(n) >= 0 ? "the memory's" : "every position's");
  }
}

// --- the function -------------------------------------------------------------

// `return N;` with the status name: the AOT enum, or a comment in the JIT.
static const char *ret(emitter *E, int code) {
  static const char *const nm[] = {"OK",     "EINVAL", "EDIM",   "ELEN",
                                   "ECACHE", "ESEQ",   "ETOKEN", "EPOS"};
  if (code < 0 || code >= (int)(sizeof nm / sizeof nm[0])) {
    fail(E, "status %d", code);
    code = 1;
  }
  if (E->o->aot) return rfmt(E, "return %s_%s;", E->upper, nm[code]);
  return rfmt(E, "return %d;  // %s", code, code == 0 ? "ok" : nm[code]);
}

// Each dim the sequence keeps as `<pre>cache_hdr[2 + k] <op> (unsigned
// long long)S<post>`.
static void cache_dims(emitter *E, const char *pre, const char *op, const char *post) {
  const bc_graph *g = E->g;
  for (int d = 0; d < g->ndims; d++) {
    int k = g->dims[d].rt;
    if (k < 0 || !E->cache_keep[k] || !E->dimvar[d]) continue;
    sb_add(&E->b, "%s%s[%d] %s (unsigned long long)%s%s", pre, E->cache_hdr, 2 + k, op,
           E->dimvar[d], post);
  }
}

// The step entry's check of the cache header (prologue): when a row goes
// on past position 0 the cache must hold this model's sequence with the
// dims it started with, and each row's must be filled up to its pos at
// least (a row may rewind, not skip ahead).
static void emit_cache_check(emitter *E) {
  sbuf *b = &E->b;
  int64_t r0 = 2 + E->g->nrt;
  comment(E, "  ", "The cache's header: [0] model %016llx, [1] positions every row holds, [2 + k]",
          (unsigned long long)E->cache_id);
  comment(E, "  ", "rt[k] kept by the sequence, [%lld + b] positions row b holds.  A row's pos",
          (long long)r0);
  comment(E, "  ", "may rewind (truncate), not skip ahead.");
  sb_add(b, "  unsigned long long *const %s = (unsigned long long *)cache;\n", E->cache_hdr);
  sb_add(b, "  if (pos_hi > 0 && (%s[0] != 0x%016llxull", E->cache_hdr,
         (unsigned long long)E->cache_id);
  cache_dims(E, " ||\n                     ", "!=", "");
  sb_add(b, "))\n    %s\n", ret(E, 5));
  sb_add(b, "  for (int b = 0; b < %s; b++)\n"
            "    if (pos[b] > 0 && (unsigned long long)pos[b] > %s[%lld + b]) %s\n",
         E->rows, E->cache_hdr, (long long)r0, ret(E, 5));
}

// On success: the header names this model, the positions filled (every
// row's least, and each row's) and the sequence's dims.
static void emit_cache_update(emitter *E) {
  sbuf *b = &E->b;
  sb_add(b, "  %s[0] = 0x%016llxull;  // the cache holds this model's sequence\n", E->cache_hdr,
         (unsigned long long)E->cache_id);
  sb_add(b, "  %s[1] = (unsigned long long)(pos_lo + %s);  // positions every row holds\n",
         E->cache_hdr, E->dimvar[E->seq]);
  sb_add(b, "  for (int b = 0; b < %s; b++)  // positions row b holds\n"
            "    %s[%lld + b] = (unsigned long long)(pos[b] + %s);\n",
         E->rows, E->cache_hdr, (long long)(2 + E->g->nrt), E->dimvar[E->seq]);
  cache_dims(E, "  ", "=", ";  // kept for the sequence\n");
}

// The run and step entries are emitted as <model>_run_pool / _step_pool,
// whose matrix products split over the caller's thread pool (NULL: the
// calling thread alone), and the entry without a pool calls them with NULL.
static void emit_signature(emitter *E, sbuf *b) {
  const char *m = E->g->model;
  if (E->step && E->tail >= 0)  // one body for _step_rows_pool (last = 0) and _step_last_pool
    sb_add(b, "static int %s_step_any(const %s_weights *w, void *const *io, const long *rt,\n"
              "    const long *pos, void *cache, %s cache_bytes, void *workspace,\n"
              "    bcrt_pool *pool, int last) {\n", m, m, E->o->aot ? "size_t" : "unsigned long");
  else if (E->step)
    sb_add(b, "int %s_step_rows_pool(const %s_weights *w, void *const *io, const long *rt,\n"
              "    const long *pos, void *cache, %s cache_bytes, void *workspace,\n"
              "    bcrt_pool *pool) {\n", m, m, E->o->aot ? "size_t" : "unsigned long");
  else if (E->o->profile)
    sb_add(b, "int %s_run_profile(const %s_weights *w, void *const *io, const long *rt, void *workspace,\n"
              "    void (*prof)(void *pctx, int node), void *pctx) {\n", m, m);
  else
    sb_add(b, "int %s_run_pool(const %s_weights *w, void *const *io, const long *rt, void *workspace,\n"
              "    bcrt_pool *pool) {\n", m, m);
}

static void emit_no_pool_entry(emitter *E) {
  const char *m = E->g->model;
  sbuf *b = &E->b;
  if (E->o->profile) return;
  const char *szt = E->o->aot ? "size_t" : "unsigned long";
  if (E->step && E->tail >= 0) {
    for (int last = 0; last < 2; last++) {
      sb_add(b, "\n");
      if (last) {
        comment(E, "", "Each batch row's last new position only through the row-wise tail (n%d..n%d):",
                E->tail, E->g->nnodes - 1);
        comment(E, "", "every output [B, 1, ...], the layers and the cache as %s_step_rows_pool.", m);
      }
      sb_add(b, "int %s_step_%s_pool(const %s_weights *w, void *const *io, const long *rt,\n"
                "    const long *pos, void *cache, %s cache_bytes, void *workspace,\n"
                "    bcrt_pool *pool) {\n"
                "  return %s_step_any(w, io, rt, pos, cache, cache_bytes, workspace, pool, %d);\n}\n",
             m, last ? "last" : "rows", m, szt, m, last);
    }
    for (int last = 0; last < 2; last++)
      sb_add(b, "\nint %s_step_%s%s(const %s_weights *w, void *const *io, const long *rt,\n"
                "    const long *pos, void *cache, %s cache_bytes, void *workspace) {\n"
                "  return %s_step_%s_pool(w, io, rt, pos, cache, cache_bytes, workspace, 0);\n}\n",
             m, last ? "last" : "rows", E->o->aot ? "_abi" : "", m, szt, m, last ? "last" : "rows");
  } else if (E->step)
    sb_add(b, "\nint %s_step_rows%s(const %s_weights *w, void *const *io, const long *rt,\n"
              "    const long *pos, void *cache, %s cache_bytes, void *workspace) {\n"
              "  return %s_step_rows_pool(w, io, rt, pos, cache, cache_bytes, workspace, 0);\n}\n",
           m, E->o->aot ? "_abi" : "", m, E->o->aot ? "size_t" : "unsigned long", m);
  else
    sb_add(b, "\nint %s_run%s(const %s_weights *w, void *const *io, const long *rt, void *workspace) {\n"
              "  return %s_run_pool(w, io, rt, workspace, 0);\n}\n",
           m, E->o->aot ? "_abi" : "", m, m);
}

// Lengths inputs are checked against every axis they are used for.
static void emit_length_checks(emitter *E) {
  const bc_graph *g = E->g;
  if (E->step) {  // the step entry has no padding: every lengths input must be NULL
    for (int i = 0; i < g->ninputs; i++)
      if (bcI_is_lengths(g, g->inputs[i]) && input_index(g, g->inputs[i]) == i)
        sb_add(&E->b, "  if (%s) %s  // no lengths in step mode\n", E->vname[g->inputs[i]],
               ret(E, 1));
    return;
  }
  char seen[64][96];
  int nseen = 0;
  for (int i = 0; i < g->nnodes; i++) {
    const bc_node *n = &g->nodes[i];
    if (n->op != BC_OP_ATTENTION) continue;
    for (int slot = 2; slot <= 3 && slot < n->nin; slot++) {
      int lv = n->in[slot], src = slot == 2 ? n->in[0] : (n->nin > 1 ? n->in[1] : -1);
      if (lv < 0 || src < 0 || g->vals[lv].type != BC_VT_I32) continue;
      const bc_shape *ss = &g->vals[src].shape, *ls = &g->vals[lv].shape;
      const char *axis = X(E, ex_dim(E, ss, ss->rank - 2));
      const char *name = vptr(E, lv);
      char key[96];
      snprintf(key, sizeof key, "%s %s", name, axis);
      bool dup = false;
      for (int k = 0; k < nseen; k++) dup |= !strcmp(seen[k], key);
      if (dup) continue;
      if (nseen < 64) snprintf(seen[nseen++], sizeof seen[0], "%s", key);
      sb_add(&E->b, "  if (%s)\n    for (int b = 0; b < %s; b++)\n", name,
             X(E, ls->rank ? ex_dim(E, ls, 0) : ex_lit(1)));
      sb_add(&E->b, "      if (%s[b] < 1 || %s[b] > %s) %s\n", name, name, axis, ret(E, 3));
    }
  }
}

// Whether g has a tokens input of CrossEntropy targets.
static bool has_targets(const bc_graph *g) {
  for (int i = 0; i < g->ninputs; i++)
    if (bcI_is_tokens(g, g->inputs[i]) && bcI_tokens_ignore(g, g->inputs[i], NULL)) return true;
  return false;
}

// The header's words for tokens input v's values.
static const char *tokens_range(emitter *E, int v) {
  int64_t ig = 0, V = bcI_tokens_vocab(E->g, v);
  if (bcI_tokens_ignore(E->g, v, &ig))
    return bc_fmt(E->ctx, ", each 0..%lld or %lld (CrossEntropy targets: classes, ignore_index)",
                  (long long)(V - 1), (long long)ig);
  return bc_fmt(E->ctx, ", each 0..%lld (the Embedding's vocab - 1)", (long long)(V - 1));
}

// Token ids: each in 0..V-1 (V the vocab of the Embedding reading them),
// checked before anything is written.
static void emit_token_checks(emitter *E) {
  const bc_graph *g = E->g;
  for (int i = 0; i < g->ninputs; i++) {
    int v = g->inputs[i];
    int64_t V = bcI_tokens_vocab(g, v);
    if (!bcI_is_tokens(g, v) || input_index(g, v) != i || V < 1) continue;
    ck_int(E, V, "vocab");
    ck_int(E, numel_ex(E, v).bound, "token ids");
    const char *name = E->vname[v];
    sb_add(&E->b, "  for (int i = 0; i < %s; i++)  // token ids 0..%lld\n", X(E, numel_ex(E, v)),
           (long long)(V - 1));
    int64_t ig = 0;
    if (bcI_tokens_ignore(g, v, &ig))  // CrossEntropy targets: ignore_index passes
      sb_add(&E->b, "    if ((%s[i] < 0 || %s[i] > %lld) && %s[i] != %lld) %s\n", name, name,
             (long long)(V - 1), name, (long long)ig, ret(E, 6));
    else
      sb_add(&E->b, "    if (%s[i] < 0 || %s[i] > %lld) %s\n", name, name, (long long)(V - 1),
             ret(E, 6));
  }
}

// Checks and names: everything before the first node.
static void emit_prologue(emitter *E) {
  const bc_graph *g = E->g;
  sbuf *b = &E->b;
  if (E->o->aot)
    sb_add(b, "  if (!w || !io || !workspace || !bcrt_is_aligned(workspace, %s_WORKSPACE_ALIGN)) %s\n",
           E->upper, ret(E, 1));
  else
    sb_add(b, "  if (!w || !io || !workspace || ((unsigned long)workspace & 63u)) %s\n", ret(E, 1));
  if (E->step && E->o->aot)
    sb_add(b, "  if (!cache || !bcrt_is_aligned(cache, %s_CACHE_ALIGN) || !pos ||\n"
              "      cache_bytes < %s_CACHE_BYTES) %s\n", E->upper, E->upper, ret(E, 1));
  else if (E->step)
    sb_add(b, "  if (!cache || ((unsigned long)cache & 63u) || !pos || cache_bytes < %lldul) %s\n",
           (long long)E->cache_bytes, ret(E, 1));
  if (g->nrt) sb_add(b, "  if (!rt) %s\n", ret(E, 1));
  else sb_add(b, "  (void)rt;  // no run-time dims\n");
  if (g->nparams && E->npkonly > 0) {  // a weight type: its matrices may be NULL once packed
    sb_add(b, "  // The parameters this code reads; the %s matrices (0) only %s_pack does,\n"
              "  // and may be NULL once it has.\n  static const unsigned char reads[%d] = {",
           bc_weight_type_name(g->weight_type), g->model, g->nparams);
    for (int i = 0; i < g->nparams; i++) sb_add(b, "%s%d", i ? ", " : "", !E->pkonly[i]);
    sb_add(b, "};\n  const float *const *slot = (const float *const *)(const void *)w;\n"
              "  for (int i = 0; i < %d; i++)\n    if (reads[i] && !slot[i]) %s\n",
           g->nparams, ret(E, 1));
  } else if (g->nparams)
    sb_add(b, "  const float *const *slot = (const float *const *)(const void *)w;\n"
              "  for (int i = 0; i < %s; i++)\n    if (!slot[i]) %s\n",
           E->o->aot ? rfmt(E, "%s_NPARAMS", E->upper) : rfmt(E, "%d", g->nparams), ret(E, 1));
  if (E->packed_used && g->weight_type != BC_WT_F32)
    sb_add(b, "  const float *const packed = w->packed;  // %s_pack's %s copy: the only matrices\n"
              "  if (!packed) %s\n", g->model, bc_weight_type_name(g->weight_type), ret(E, 1));
  else if (E->packed_used)
    sb_add(b, "  const float *const packed = w->packed;  // %s_pack's copy, or NULL: cblas everywhere\n",
           g->model);
  for (int i = 0; i < g->ndims; i++) {
    const bc_dim *d = &g->dims[i];
    if (d->rt < 0 || !E->dimvar[i]) continue;
    // An int, as the kernels take it, once rt[k] is known to be in range.
    ck_int(E, d->value, d->name);
    sb_add(b, "  if (rt[%d] < 1 || rt[%d] > %lld) %s\n", d->rt, d->rt, (long long)d->value,
           ret(E, 2));
    sb_add(b, "  const int %s = (int)rt[%d];  ", E->dimvar[i], d->rt);
    comment(E, "", "run-time dim %s: 1..%lld", d->name, (long long)d->value);
  }
  if (E->step) {
    const bc_dim *d = &g->dims[E->seq];
    sb_add(b, "  long pos_lo = pos[0], pos_hi = pos[0];  // the rows' least and greatest pos\n"
              "  for (int b = 1; b < %s; b++) {\n"
              "    if (pos[b] < pos_lo) pos_lo = pos[b];\n"
              "    if (pos[b] > pos_hi) pos_hi = pos[b];\n  }\n", E->rows);
    sb_add(b, "  if (pos_lo < 0) %s\n", ret(E, 1));
    sb_add(b, "  if (pos_hi > %lld - %s) %s  // the cache holds %lld positions per row\n",
           (long long)d->value, E->dimvar[E->seq], ret(E, 4), (long long)d->value);
    emit_cache_check(E);
    emit_cache_names(E);
  }
  for (int i = 0; i < g->nnodes; i++) {  // the ops' own checks (a learned table's length)
    const bc_op_def *d = bcT_def(g->nodes[i].op);
    if (d && d->emit_check) d->emit_check(E, &g->nodes[i]);
  }
  char shp[96];
  for (int i = 0; i < g->ninputs; i++) {
    int v = g->inputs[i];
    bool len = g->vals[v].type == BC_VT_I32, tok = bcI_is_tokens(g, v);
    if (input_index(g, v) != i) continue;  // listed twice
    sb_add(b, "  const %s *%s = (const %s *)io[%d];  ", len ? "int" : "float", E->vname[v],
           len ? "int" : "float", i);
    comment(E, "", "input %s %s%s", g->vals[v].name, bc_shape_str(&g->vals[v].shape, shp, sizeof shp),
            tok ? " token ids" : len ? " valid lengths (NULL: full)" : "");
  }
  for (int i = 0; i < g->noutputs; i++) {
    int v = g->outputs[i];
    sb_add(b, "  float *%s = (float *)io[%d];  ", E->outname[i], g->ninputs + i);
    comment(E, "", "output %s %s", g->output_names[i], bc_shape_str(&g->vals[v].shape, shp, sizeof shp));
  }
  sb_add(b, "  if (");
  int k = 0;
  for (int i = 0; i < g->ninputs; i++)
    if (!bcI_is_lengths(g, g->inputs[i]) && input_index(g, g->inputs[i]) == i)
      sb_add(b, "%s!%s", k++ ? " || " : "", E->vname[g->inputs[i]]);
  for (int i = 0; i < g->noutputs; i++) sb_add(b, "%s!%s", k++ ? " || " : "", E->outname[i]);
  sb_add(b, ") %s\n", ret(E, 1));
  emit_length_checks(E);
  emit_token_checks(E);
}

// The buffers the body used, named once, each with what it holds.
static void emit_buffers(emitter *E, sbuf *b) {
  const bc_graph *g = E->g;
  bool any = false;
  for (int r = 0; r < g->nvals; r++) any |= E->bufname[r] && E->bufused[r];
  if (!E->in_layer && (any || (E->lay && E->lws)))  // the layer function gets ws as an argument
    sb_add(b, "  float *const ws = (float *)workspace;  // %lld floats\n", (long long)g->arena_floats);
  if (!any) return;
  for (int r = 0; r < g->nvals; r++) {
    if (!E->bufname[r] || !E->bufused[r]) continue;
    int big = r;
    for (int v = r; v < g->nvals; v++)
      if (E->bufroot[v] == r && bc_shape_numel(&g->vals[v].shape) > bc_shape_numel(&g->vals[big].shape))
        big = v;
    char line[300];
    bc_shape_str(&g->vals[big].shape, line, sizeof line);
    sanitize(line);
    sb_add(b, "  float *%s = ws + %lld;  // %s\n", E->bufname[r], (long long)g->vals[r].offset, line);
  }
}

// Outputs no node writes: an output that is an input, or a value bound to
// two outputs, is copied at the end.
static void emit_output_copies(emitter *E) {
  const bc_graph *g = E->g;
  for (int i = 0; i < g->noutputs; i++) {
    int v = g->outputs[i];
    bool is_in = input_index(g, v) >= 0;
    int first = output_index(g, v);
    if (!is_in && first == i) continue;
    if (g->vals[v].type != BC_VT_F32) { fail(E, "output %d is a lengths input", i); return; }
    sb_add(&E->b, "  bcrt_copy(%s, %s, %s);  // output %s is %s\n", X(E, numel_ex(E, v)),
           is_in ? E->vname[v] : E->outname[first], E->outname[i], E->outname[i],
           is_in ? "an input" : "another output");
  }
}

// --- the layer loop ---------------------------------------------------------------
//
// The layer run becomes `static void <model>_layer(l, <args>)`, whose body
// is trip 1's nodes (the template: every value it reads from before the
// trip is an argument), called in `for (int l = 0; l < count; l++)`.  The
// planner laid the run out periodically, so the trip's own buffers are the
// same `ws + offset` on every trip; what a trip reads from the trip before
// (the streams) is an argument: for l == 0 the values before the run (the
// input, an embedding), then the previous trip's buffers.  What the last
// trip writes to a graph output (Post-LN's stream) is a carried-out
// argument: the trip's buffer on every other trip.  Values from
// before the run read by every trip (lengths, an encoder's memory) are
// arguments under the entry's own names; so are the run-time dims, ws, and
// for the step entry pos and the trip's K|V cache blocks.

// The value the run's last trip writes where the template trip writes v
// (v itself when v is not the template trip's).
static int last_trip_value(const emitter *E, int v) {
  const bc_layers *L = &E->g->layers;
  int d = E->g->vals[v].def, j = d - L->first - L->period;
  if (j < 0 || j >= L->period) return v;
  const bc_node *n = &E->g->nodes[d];
  for (int k = 0; k < n->nout; k++)
    if (n->out[k] == v) {
      int w = bcI_layer_value(E->g, L->count - 1, j, k);
      return w >= 0 ? w : v;
    }
  return v;
}

// Whether v is carried out of the layer function (a pointer argument it
// writes): a value of the template trip whose counterpart in the last trip
// is a graph output.
static bool carried_out(const emitter *E, int v) {
  const bc_layers *L = &E->g->layers;
  int d = E->g->vals[v].def;
  return d >= L->first + L->period && d < L->first + 2 * L->period &&
         bcI_in_caller_memory(E->g, last_trip_value(E, v));
}

// The layer function's name for v: a value from before the template trip,
// or a carried-out value of the template trip.
static const char *layer_arg(emitter *E, int v) {
  const bc_graph *g = E->g;
  if (!E->larg[v]) {
    const bc_value *val = &g->vals[v];
    bool named = val->name && val->name[0];
    if (carried_out(E, v)) {  // written by every trip, to y by the last
      E->larg[v] = local_name(E, &E->names, named ? bc_fmt(E->ctx, "%s_out", val->name) : NULL, "out");
    } else if (val->def >= g->layers.first) {  // the previous trip's: carried in
      E->larg[v] = local_name(E, &E->names, named ? bc_fmt(E->ctx, "%s_in", val->name) : NULL, "in");
    } else if (E->vname[v]) {
      E->larg[v] = E->vname[v];
    } else if (E->bufroot[v] >= 0 && val->offset >= 0) {
      E->larg[v] = E->bufname[E->bufroot[v]];
    } else {
      fail(E, "value %%%d read by the layer has no storage", v);
      return "0";
    }
  }
  if (!E->lused[v]) {
    E->lused[v] = true;
    E->largs[E->nlargs++] = v;
  }
  return E->larg[v];
}

// What trip 0 reads where the template trip reads v (carried from trip 0).
static int carried_from(const emitter *E, int v) { return bcI_layer_carried_from(E->g, v); }

// Whether the code (not the comments) in b uses identifier id.
static bool uses_ident(const sbuf *b, const char *id) {
  size_t n = strlen(id);
  const char *p = b->p, *end = b->p ? b->p + b->len : NULL;
  for (; p && p < end; p++) {
    if (p[0] == '/' && p + 1 < end && p[1] == '/') {
      while (p < end && *p != '\n') p++;
      continue;
    }
    bool start = p == b->p || !(is_ident_char(p[-1]));
    if (start && (size_t)(end - p) >= n && !strncmp(p, id, n) && (p + n == end || !is_ident_char(p[n])))
      return true;
  }
  return false;
}

bool bcE_uses_ident(const bc_sbuf *b, const char *id) { return uses_ident(b, id); }

// An argument list being written: signature or call, wrapped at 96 columns
// with continuation lines indented by `ind`.
typedef struct {
  sbuf *b;
  size_t col;
  int ind;
} arglist;

// Appends ", <arg>".
static void add_arg(arglist *a, const char *arg) {
  size_t n = strlen(arg);
  if (a->col + n + 2 > 96) {
    sb_add(a->b, ",\n%*s%s", a->ind, "", arg);
    a->col = (size_t)a->ind + n;
  } else {
    sb_add(a->b, ", %s", arg);
    a->col += 2 + n;
  }
}

static void emit_layer_function(emitter *E) {
  const bc_graph *g = E->g;
  const bc_layers *L = &g->layers;
  const char *m = g->model;
  size_t nv = (size_t)(g->nvals ? g->nvals : 1);
  memset(E->bufused, 0, nv * sizeof *E->bufused);
  memset(E->lused, 0, nv * sizeof *E->lused);
  E->nlargs = 0;
  E->in_layer = true;
  sbuf head = E->b;
  E->b = (sbuf){0};
  if (E->step) emit_cache_names(E);
  for (int j = 0; j < L->period && !E->err; j++) emit_node(E, &g->nodes[L->first + L->period + j]);
  sbuf body = E->b;
  E->b = (sbuf){0};
  emit_buffers(E, &E->b);
  sbuf bufs = E->b;
  E->b = head;
  sbuf *b = &E->b;
  comment(E, "", "One layer: the weights %s.<i>.* (nodes n%d..n%d for i = %d, then every %d nodes),",
          L->stack, L->first, L->first + L->period - 1, L->index0, L->period);
  comment(E, "", "run for i = %d..%d by the loop below; the same buffers on every trip.",
          L->index0, L->index0 + L->count - 1);
  sb_add(b, "static void %s_layer%s(const %s_layer_weights *l", m, E->step ? "_step" : "", m);
  arglist al = {b, strlen(m) * 2 + 48, 4};
  // Values looked up but not read (the step entry's lengths) are no arguments.
  int nused = 0;
  for (int i = 0; i < E->nlargs; i++)
    if (uses_ident(&body, E->larg[E->largs[i]])) E->largs[nused++] = E->largs[i];
  E->nlargs = nused;
  // The streams carried into the trip first, then those carried out, then
  // what every trip reads.
  int nc = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int i = nc; i < E->nlargs; i++) {
      int v = E->largs[i];
      if (pass == 0 ? g->vals[v].def >= L->first && !carried_out(E, v) : carried_out(E, v)) {
        memmove(E->largs + nc + 1, E->largs + nc, (size_t)(i - nc) * sizeof *E->largs);
        E->largs[nc++] = v;
      }
    }
  for (int i = 0; i < E->nlargs; i++) {
    int v = E->largs[i];
    add_arg(&al, rfmt(E, "%s%s *%s", carried_out(E, v) ? "" : "const ",
                          g->vals[v].type == BC_VT_I32 ? "int" : "float", E->larg[v]));
  }
  for (int i = 0; i < g->ndims; i++) {
    E->ldim[i] = g->dims[i].rt >= 0 && E->dimvar[i] && uses_ident(&body, E->dimvar[i]);
    if (E->ldim[i]) add_arg(&al, rfmt(E, "int %s", E->dimvar[i]));
  }
  E->lws = uses_ident(&bufs, "ws");
  E->lpacked = uses_ident(&body, "poff");
  E->lpool = E->pool && uses_ident(&body, "pool");
  E->lpos = E->step && uses_ident(&body, "pos");
  E->lposlo = E->step && uses_ident(&body, "pos_lo");
  E->lcache = E->step && uses_ident(&body, "cache");
  if (E->lws) add_arg(&al, "float *ws");
  if (E->lpacked) {
    add_arg(&al, "const float *packed");
    add_arg(&al, "long poff");
  }
  if (E->lpos) add_arg(&al, "const long *pos");
  if (E->lposlo) add_arg(&al, "long pos_lo");
  if (E->lcache) add_arg(&al, "float *cache");
  if (E->lpool) add_arg(&al, "bcrt_pool *pool");
  if (E->o->profile) {
    add_arg(&al, "void (*prof)(void *pctx, int node)");
    add_arg(&al, "void *pctx, int n0");
  }
  sb_add(b, ") {\n%.*s", (int)bufs.len, bufs.p ? bufs.p : "");
  sb_add(b, "%.*s}\n\n", (int)body.len, body.p ? body.p : "");
  b->oom |= body.oom || bufs.oom;
  free(body.p);
  free(bufs.p);
  E->in_layer = false;
}

// The call of the layer function for every trip, in the entry's body.
static void emit_layer_loop(emitter *E) {
  const bc_graph *g = E->g;
  const bc_layers *L = &g->layers;
  sbuf *b = &E->b;
  sb_add(b, "\n");
  comment(E, "  ", "---- n%d..n%d: layers %d..%d, %d nodes each", L->first,
          L->first + L->count * L->period - 1, L->index0, L->index0 + L->count - 1, L->period);
  sb_add(b, "  for (int l = 0; l < %d; l++)\n    %s_layer%s(&w->%s[%sl]", L->count, g->model,
         E->step ? "_step" : "", E->larray, E->abefore ? rfmt(E, "%d + ", E->abefore) : "");
  arglist al = {b, 30 + strlen(g->model) + strlen(E->larray), 8};
  for (int i = 0; i < E->nlargs; i++) {
    int v = E->largs[i];
    if (g->vals[v].def < L->first) {
      add_arg(&al, vptr(E, v));
      continue;
    }
    if (carried_out(E, v)) {  // the trip's buffer, the graph output on the last trip
      const char *last = keep(E, vptr(E, last_trip_value(E, v)));
      add_arg(&al, rfmt(E, "l == %d ? %s : %s", L->count - 1, last, vptr(E, v)));
      continue;
    }
    int from = carried_from(E, v);
    if (from < 0) {
      fail(E, "value %%%d carried into the layer has no first value", v);
      return;
    }
    const char *first = keep(E, vptr(E, from)), *prev = vptr(E, v);
    add_arg(&al, strcmp(first, prev) ? rfmt(E, "l == 0 ? %s : %s", first, prev) : prev);
  }
  for (int i = 0; i < g->ndims; i++)
    if (E->ldim[i]) add_arg(&al, E->dimvar[i]);
  if (E->lws) add_arg(&al, "ws");
  if (E->lpacked) {  // the trip's packed blocks: poff floats into packed
    int64_t base = E->pb[E->pk_lo].off, stride = E->pb[E->pk_lo + E->pk_per].off - base;
    E->packed_used = true;
    add_arg(&al, "packed");
    // In long past INT_MAX (a large model's packed copy).
    bool wide = base + stride * L->count > 0x7fffffff;
    add_arg(&al, rfmt(E, wide ? "%s%lldL*l" : "%s%lld*l", base ? rfmt(E, "%lld + ", (long long)base) : "",
                          (long long)stride));
  }
  if (E->lpos) add_arg(&al, "pos");
  if (E->lposlo) add_arg(&al, "pos_lo");
  if (E->lcache) {
    int64_t base = layer_cache_base(E, 0), stride = layer_cache_base(E, 1) - base;
    bool wide = base + stride * L->count > 0x7fffffff;
    add_arg(&al, rfmt(E, wide ? "(float *)cache + %s%lldL*l" : "(float *)cache + %s%lld*l",
                          base ? rfmt(E, "%lld + ", (long long)base) : "", (long long)stride));
  }
  if (E->lpool) add_arg(&al, "pool");
  if (E->o->profile) add_arg(&al, rfmt(E, "prof, pctx, %d + %d*l", L->first, L->period));
  sb_add(b, ");\n");
}

// sb's text into E->b, every non-empty line indented two more spaces.
static void put_indented(emitter *E, const sbuf *sb) {
  const char *p = sb->p ? sb->p : "";
  size_t n = sb->len;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && p[j] != '\n') j++;
    if (j > i) sb_add(&E->b, "  %.*s", (int)(j - i), p + i);
    if (j < n) sb_add(&E->b, "\n");
    i = j + 1;
  }
  E->b.oom |= sb->oom;
}

// The step entry's row-wise tail (nodes E->tail..): for `last`, each batch
// row's last new position only.  The values the tail reads from before it
// are compacted in place (row b*T + T-1 to row b: increasing b, so no row
// is overwritten before it is read; every later reader is a tail node, and
// the planner gave them disjoint buffers); the tail then runs with the
// stepped dim at 1, so every output comes out as [B, 1, ...].  Otherwise the
// tail as the full step runs it.  Both after the layers, which are shared.
static void emit_tail(emitter *E) {
  const bc_graph *g = E->g;
  sbuf head = E->b, part[2] = {{0}, {0}};
  for (int pass = 0; pass < 2 && !E->err; pass++) {
    E->b = (sbuf){0};
    E->last = pass == 1;
    if (E->last) {
      int64_t *done = bc_alloc(E->ctx, (size_t)(g->nvals ? g->nvals : 1) * sizeof *done);
      int ndone = 0;
      if (!done) oom(E);
      const char *T = E->dimvar[E->seq];
      for (int i = E->tail; done && i < g->nnodes; i++) {
        const bc_node *n = &g->nodes[i];
        for (int k = 0; k < n->nin; k++) {
          int v = n->in[k];
          if (v < 0 || g->vals[v].def >= E->tail) continue;
          const bc_shape *sh = &g->vals[v].shape;
          if (sh->rank < 2 || sh->sym[sh->rank - 2] != E->seq + 1) continue;  // broadcast
          bool dup = false;
          for (int d = 0; d < ndone; d++) dup |= done[d] == g->vals[v].offset;
          if (dup) continue;
          done[ndone++] = g->vals[v].offset;
          int64_t D = ck_int(E, width_of(E, v), "row width");
          ck_int(E, D * sh->d[sh->rank - 2], "row width times the stepped bound");
          const char *p = keep(E, vptr(E, v)), *rows = keep(E, X(E, ex_prod(E, sh, 0, sh->rank - 2)));
          char shp[96];
          comment(E, "  ", "%s %s: row b*%s + %s-1 -> row b", p,
                  bc_shape_str(&g->vals[v].shape, shp, sizeof shp), T, T);
          sb_add(&E->b, "  if (%s > 1) bcrt_copy_rows(%s, %lld, %s + (%s - 1)*%lld, %s*%lld, %s, %lld);\n",
                 T, rows, (long long)D, p, T, (long long)D, T, (long long)D, p, (long long)D);
        }
      }
    }
    for (int i = E->tail; i < g->nnodes && !E->err; i++) emit_node(E, &g->nodes[i]);
    if (!E->o->gemm_only) emit_output_copies(E);
    part[pass] = E->b;
  }
  E->last = false;
  E->b = head;
  const char *T = E->dimvar[E->seq];
  sb_add(&E->b, "\n  if (last) {\n");
  comment(E, "    ", "Each batch row's last new position only: the values the tail reads compacted");
  comment(E, "    ", "in place (row b*%s + %s-1 to row b), then the tail with %s = 1, so every", T, T, T);
  comment(E, "    ", "output is [B, 1, ...].");
  put_indented(E, &part[1]);
  sb_add(&E->b, "  } else {  // every new position\n");
  put_indented(E, &part[0]);
  sb_add(&E->b, "  }\n");
  free(part[0].p);
  free(part[1].p);
}

static void emit_function(emitter *E) {
  const bc_graph *g = E->g;
  E->pool = !E->o->profile;
  if (E->lay) emit_layer_function(E);
  memset(E->bufused, 0, (size_t)(g->nvals ? g->nvals : 1) * sizeof *E->bufused);
  E->packed_used = false;
  sbuf head = E->b;
  E->b = (sbuf){0};
  int lo, hi;
  run_nodes(E, &lo, &hi);
  bool tail = E->step && E->tail >= 0;
  for (int i = 0; i < g->nnodes && !E->err && !(tail && i == E->tail); i++) {
    if (i == lo && hi > lo) {
      emit_layer_loop(E);
      i = hi - 1;
      continue;
    }
    emit_node(E, &g->nodes[i]);
  }
  if (tail) emit_tail(E);
  else if (!E->o->gemm_only) emit_output_copies(E);
  if (E->step) emit_cache_update(E);
  if (E->o->profile) sb_add(&E->b, "\n  prof(pctx, %d);\n", g->nnodes);
  sb_add(&E->b, "  %s\n}\n", ret(E, 0));
  sbuf body = E->b;
  E->b = (sbuf){0};
  emit_prologue(E);
  sbuf pro = E->b;
  E->b = head;
  emit_signature(E, &E->b);
  if (E->pool && !uses_ident(&body, "pool"))
    sb_add(&E->b, "  (void)pool;  // no product here to split\n");
  sb_add(&E->b, "%.*s", (int)pro.len, pro.p ? pro.p : "");
  emit_buffers(E, &E->b);
  sb_add(&E->b, "%.*s", (int)body.len, body.p ? body.p : "");
  E->b.oom |= body.oom || pro.oom;
  free(body.p);
  free(pro.p);
  emit_no_pool_entry(E);
  E->pool = false;
}

// One bcrt_pack_nt / bcrt_pack_nn call: block p from weight expression w
// into dst.
static void pack_block(emitter *E, const char *ind, const pblock *p, const char *w, const char *dst) {
  int wt = E->g->weight_type;
  if (wt != BC_WT_F32 && p->in_out)
    sb_add(&E->b, "%sbcrt_pack_nn_wt(%s, %lld, %lld, %s, %lld, %s);", ind, wt_macro(wt),
           (long long)p->rows, (long long)p->k, plus_k(E, w, p->row0), (long long)p->out, dst);
  else if (wt != BC_WT_F32)
    sb_add(&E->b, "%sbcrt_pack_nt_wt(%s, %lld, %lld, %s, %s);", ind, wt_macro(wt),
           (long long)p->rows, (long long)p->k, plus_k(E, w, p->row0 * p->k), dst);
  else if (p->in_out)
    sb_add(&E->b, "%sbcrt_pack_nn(%lld, %lld, %s, %lld, %s);", ind, (long long)p->rows,
           (long long)p->k, plus_k(E, w, p->row0), (long long)p->out, dst);
  else
    sb_add(&E->b, "%sbcrt_pack_nt(%lld, %lld, %s, %s);", ind, (long long)p->rows, (long long)p->k,
           plus_k(E, w, p->row0 * p->k), dst);
  if (p->row0 || p->rows != p->out)
    comment(E, "  ", "rows %lld..%lld", (long long)p->row0, (long long)(p->row0 + p->rows));
  else
    sb_add(&E->b, "\n");
}

// <model>_pack: every block of bcY_pack_layout from the weights; the layer
// run's blocks in a loop over its layers, as the code reads them.
static void emit_pack(emitter *E) {
  const bc_graph *g = E->g;
  const bc_layers *L = &g->layers;
  sbuf *b = &E->b;
  const char *m = g->model;
  if (E->o->profile || E->o->gemm_only) return;
  sb_add(b, "\n");
  if (g->weight_type != BC_WT_F32) {
    comment(E, "", "The %s copy of the GEMM weights that every matrix product reads: %lld bytes",
            bc_weight_type_name(g->weight_type), (long long)E->packed_floats * 4);
    comment(E, "", "(64-byte aligned); w->packed must point at it.");
  } else {
    comment(E, "", "The packed copy of the GEMM weights that small-M products read: %lld floats",
            (long long)E->packed_floats);
    comment(E, "", "(64-byte aligned for speed); pass it as w->packed so the code uses it.");
  }
  sb_add(b, "void %s_pack(const %s_weights *w, float *packed) {\n", m, m);
  if (!E->npb) sb_add(b, "  (void)w;\n  (void)packed;  // no GEMM has few rows\n");
  bool loop = E->lay && E->pk_per > 0;
  for (int i = 0; i < E->npb; i++) {
    if (loop && i == E->pk_lo) {
      const pblock *t1 = &E->pb[i + E->pk_per];
      int64_t base = E->pb[i].off, stride = t1->off - base;
      sb_add(b, "  for (int i = 0; i < %d; i++) {  // layers %d..%d\n", L->count, L->index0,
             L->index0 + L->count - 1);
      sb_add(b, "    const %s_layer_weights *l = &w->%s[%si];\n", m, E->larray,
             E->abefore ? rfmt(E, "%d + ", E->abefore) : "");
      sb_add(b, base + stride * L->count > 0x7fffffff ? "    float *lp = packed + %s%lldL*i;\n"
                                                      : "    float *lp = packed + %s%lld*i;\n",
             base ? rfmt(E, "%lld + ", (long long)base) : "", (long long)stride);
      E->in_layer = true;  // members of *l, as the layer function names them
      for (int k = 0; k < E->pk_per; k++)
        pack_block(E, "    ", &t1[k], wname(E, t1[k].param), plus_k(E, "lp", t1[k].off - t1->off));
      E->in_layer = false;
      sb_add(b, "  }\n");
      i += L->count * E->pk_per - 1;
      continue;
    }
    pack_block(E, "  ", &E->pb[i], E->wexpr[E->pb[i].param], plus_k(E, "packed", E->pb[i].off));
  }
  sb_add(b, "}\n");
}

// Pointer i of the ABI's io (void *) from the caller's pointer: an input's
// const is dropped through an integer, which -Wcast-qual accepts (inputs
// are only read); uintptr_t in AOT code, unsigned long in the JIT's, which
// includes no header (tcc on the host, where it holds a pointer).
static const char *unconst(const emitter *E, int i) {
  if (i >= E->g->ninputs) return "";
  return E->o->aot ? "(void *)(uintptr_t)" : "(void *)(unsigned long)";
}

static const char *unconst_why(const bc_graph *g) {
  return g->ninputs ? "  // inputs are only read" : "";
}

// <model>_step_pool: every batch row at the one pos, through
// <model>_step_rows_pool; <model>_step(_abi) calls it without a pool.
static void emit_step_shared(emitter *E) {
  sbuf *b = &E->b;
  const char *m = E->g->model, *abi = E->o->aot ? "_abi" : "";
  const char *szt = E->o->aot ? "size_t" : "unsigned long";
  sb_add(b, "\n");
  comment(E, "", "The step entry with one pos for every batch row.");
  sb_add(b, "int %s_step_pool(const %s_weights *w, void *const *io, const long *rt, long pos,\n"
            "    void *cache, %s cache_bytes, void *workspace, bcrt_pool *pool) {\n", m, m, szt);
  sb_add(b, "  long p[%lld];  // row b's pos\n", (long long)E->rows_max);
  sb_add(b, "  for (int b = 0; b < %lld; b++) p[b] = pos;\n", (long long)E->rows_max);
  sb_add(b, "  return %s_step_rows_pool(w, io, rt, p, cache, cache_bytes, workspace, pool);\n}\n", m);
  sb_add(b, "\nint %s_step%s(const %s_weights *w, void *const *io, const long *rt, long pos,\n"
            "    void *cache, %s cache_bytes, void *workspace) {\n"
            "  return %s_step_pool(w, io, rt, pos, cache, cache_bytes, workspace, 0);\n}\n",
         m, abi, m, szt, m);
}

// The entry points around <model>_run: `_forward` for simple graphs, and
// in AOT builds `_run` over the named <model>_io struct.
static void emit_wrappers(emitter *E) {
  const bc_graph *g = E->g;
  sbuf *b = &E->b;
  const char *m = g->model, *M = E->upper;
  if (E->o->profile) return;
  if (E->o->aot) {
    int nio = g->ninputs + g->noutputs;
    sb_add(b, "\nint %s_run(const %s_weights *w, const %s_io *io, void *workspace) {\n", m, m, m);
    sb_add(b, "  void *p[%d];%s\n", nio, unconst_why(g));
    if (g->nrt) sb_add(b, "  long rt[%d];\n", g->nrt);
    sb_add(b, "  if (!io) return %s_EINVAL;\n", M);
    for (int i = 0; i < nio; i++)
      sb_add(b, "  p[%d] = %sio->%s;\n", i, unconst(E, i), E->member[i]);
    for (int i = 0; i < g->ndims; i++)
      if (g->dims[i].rt >= 0)
        sb_add(b, "  rt[%d] = io->%s;\n", g->dims[i].rt, E->member[nio + g->dims[i].rt]);
    sb_add(b, "  return %s_run_abi(w, p, %s, workspace);\n}\n", m, g->nrt ? "rt" : "0");
    // The same unpacking for the step entries (_step_last with a tail only).
    for (int rows = 0; E->steppable && rows < 3; rows++) {
      const char *sfx = rows == 2 ? "_last" : rows ? "_rows" : "";
      if (rows == 2 && E->tail < 0) break;
      sb_add(b, "\nint %s_step%s(const %s_weights *w, const %s_io *io, %s, void *cache,\n"
                "    size_t cache_bytes, void *workspace) {\n", m, sfx, m, m,
             rows ? "const long *pos" : "long pos");
      sb_add(b, "  void *p[%d];%s\n  long rt[%d];\n", nio, unconst_why(g),
             g->nrt);
      sb_add(b, "  if (!io) return %s_EINVAL;\n", M);
      for (int i = 0; i < nio; i++) sb_add(b, "  p[%d] = %sio->%s;\n", i, unconst(E, i), E->member[i]);
      for (int i = 0; i < g->ndims; i++)
        if (g->dims[i].rt >= 0)
          sb_add(b, "  rt[%d] = io->%s;\n", g->dims[i].rt, E->member[nio + g->dims[i].rt]);
      sb_add(b, "  return %s_step%s_abi(w, p, rt, pos, cache, cache_bytes, workspace);\n}\n", m, sfx);
    }
  }
  if (!bcE_is_simple(g)) return;
  sb_add(b, "\nint %s_forward(const %s_weights *w, const float *x, float *y, void *workspace) {\n", m, m);
  sb_add(b, "  void *io[2];%s\n  io[0] = %sx;\n  io[1] = y;\n",
         unconst_why(g), unconst(E, 0));
  sb_add(b, "  return %s_run%s(w, io, 0, workspace);\n}\n", m, E->o->aot ? "_abi" : "");
}

// What both entry points need before emitting anything: a plan, and a
// model name that is a C identifier (it becomes part of function names; the
// parser checks too, this is the emitter's own guard).
static bool emittable(bc_ctx *ctx, const bc_graph *g) {
  if (!g->planned) {
    bc_error(ctx, BC_EINTERNAL, "internal error: emit needs a planned graph (run bcM_plan)");
    return false;
  }
  if (!is_ident(g->model, BC_MAX_IDENT)) {
    bc_error(ctx, BC_EINPUT, "error: model name is not a C identifier; cannot emit C");
    return false;
  }
  if (g->ninputs < 1 || g->noutputs < 1) {
    bc_error(ctx, BC_EINTERNAL, "internal error: emit: graph has no input or output");
    return false;
  }
  for (int i = 0; i < g->ninputs + g->noutputs; i++) {
    int v = i < g->ninputs ? g->inputs[i] : g->outputs[i - g->ninputs];
    if (v < 0 || v >= g->nvals) {
      bc_error(ctx, BC_EINTERNAL, "internal error: emit: bad input or output %d", v);
      return false;
    }
  }
  return true;
}

static int name_members(emitter *E);

static char *finish(emitter *E) {
  char *res = NULL;
  if (!E->err && E->b.oom) E->err = bc_error(E->ctx, BC_ENOMEM, "error: out of memory emitting C");
  if (!E->err) {
    res = bc_strndup(E->ctx, E->b.p ? E->b.p : "", E->b.len);
    if (!res) bc_error(E->ctx, BC_ENOMEM, "error: out of memory");
  }
  free(E->b.p);
  free(E->names.slot);
  return res;
}

// The layer loop is used when the plan is periodic: every value a trip
// writes is at its counterparts' offset (the planner makes it so, or
// dropped g->layers; the last trip's graph outputs excepted), and for the
// step entry, every trip's K|V blocks are its predecessor's shifted by one
// stride.
static int setup_layers(emitter *E) {
  const bc_graph *g = E->g;
  const bc_layers *L = &g->layers;
  if (L->count < 2 || L->period < 1 || L->first < 0 || L->first + L->count * L->period > g->nnodes ||
      L->param0 < 0 || L->param0 + L->count * L->nparams > g->nparams || !L->stack)
    return BC_OK;
  E->lwhy = "the plan does not lay the layers out alike";
  for (int t = 0; t < L->count; t++)
    for (int j = 0; j < L->period; j++)
      for (int k = 0; k < BC_MAX_NODE_OUT + BC_MAX_NODE_SCRATCH; k++) {
        int u = bcI_layer_value(g, 1, j, k), v = bcI_layer_value(g, t, j, k);
        if (t == L->count - 1 && v >= 0 && bcI_in_caller_memory(g, v))
          continue;  // the last trip's graph output: carried out (layers.c)
        if ((u < 0) != (v < 0) || (u >= 0 && (g->vals[u].offset < 0 || g->vals[u].offset != g->vals[v].offset)))
          return BC_OK;
      }
  E->lwhy = "the packed copies of the layers' weights are not alike";
  if (!pack_periodic(E)) return BC_OK;
  E->lwhy = NULL;
  size_t nv = (size_t)(g->nvals ? g->nvals : 1);
  E->larg = bc_alloc(E->ctx, nv * sizeof *E->larg);
  E->lused = bc_alloc(E->ctx, nv * sizeof *E->lused);
  E->largs = bc_alloc(E->ctx, nv * sizeof *E->largs);
  E->ldim = bc_alloc(E->ctx, (size_t)(g->ndims ? g->ndims : 1) * sizeof *E->ldim);
  if (!E->larg || !E->lused || !E->largs || !E->ldim) return oom(E);
  E->lay = true;
  // The weights' layer array also holds the layers around the run whose
  // parameters are alike (Pre-LN's first layer), so that layers[i] is
  // layer i.
  while (bcI_layer_params_at(g, -E->abefore - 1)) E->abefore++;
  E->acount = E->abefore + L->count;
  while (bcI_layer_params_at(g, E->acount - E->abefore)) E->acount++;
  return BC_OK;
}

// --- why layers stay unrolled ---------------------------------------------------
//
// Every layer the loop does not run is reported: a comment atop the entry
// and, with `--verbose`, a note (bcE_layer_notes).  A node belongs to the
// layer of its first layer parameter (bcI_layer_of_name); consecutive
// layers of one stack outside the loop make one line.

enum { MAX_NOTES = 16 };

typedef struct {
  const char *stack;  // the parameter name the stack is a prefix of (NULL: no layer)
  size_t slen;
  int index;
} layer_id;

static layer_id node_layer(const bc_graph *g, const bc_node *n) {
  for (int k = 0; k < BC_MAX_NODE_PARAMS; k++) {
    int p = n->param[k];
    size_t sl;
    int i = p >= 0 ? bcI_layer_of_name(g->params[p].name, &sl) : -1;
    if (i >= 0) return (layer_id){g->params[p].name, sl, i};
  }
  return (layer_id){NULL, 0, -1};
}

static bool same_stack(layer_id a, layer_id b) {
  return a.stack && b.stack && a.slen == b.slen && !strncmp(a.stack, b.stack, a.slen);
}

// How layer `id`, whose nodes are [lo, hi), differs from a trip of the loop.
static const char *trip_difference(emitter *E, layer_id id, int lo, int hi) {
  const bc_graph *g = E->g;
  const bc_layers *L = &g->layers;
  if (!E->lay)
    return "no two consecutive layers are identical node for node (ops, attributes, shapes or "
           "wiring differ)";
  if (!same_stack(id, node_layer(g, &g->nodes[L->first])))
    return bc_fmt(E->ctx, "one layer loop per model, and it runs the longest run of identical "
                  "layers, %s.%d..%d", L->stack ? L->stack : "?", L->index0, L->index0 + L->count - 1);
  if (hi - lo != L->period)
    return bc_fmt(E->ctx, "it has %d nodes after the passes, a trip of the loop %d (the passes "
                  "fused nodes across the stack's ends)", hi - lo, L->period);
  for (int j = 0; j < L->period; j++) {
    const bc_node *a = &g->nodes[lo + j], *b = &g->nodes[L->first + j];
    if (a->op != b->op)
      return bc_fmt(E->ctx, "its node n%d is %s where a trip has %s (the passes fused nodes "
                    "across the stack's ends)", lo + j, bcI_op_name(a->op), bcI_op_name(b->op));
  }
  return "its nodes read or write other values than a trip's";
}

static void add_note(const char **notes, int *n, const char *s) {
  if (*n < MAX_NOTES) notes[(*n)++] = s;
}

// The notes, up to MAX_NOTES.
static int layer_notes(emitter *E, const char **notes) {
  const bc_graph *g = E->g;
  int n = 0, lo, hi;
  if (!E->lay && (g->layers.count >= 2 || g->layers_dropped)) {
    add_note(notes, &n, bc_fmt(E->ctx, "no layer loop: %s", g->layers_dropped ? g->layers_dropped : E->lwhy ? E->lwhy : "?"));
    return n;
  }
  run_nodes(E, &lo, &hi);
  layer_id cur = {NULL, 0, -1};
  int first = 0, c0 = 0, c1 = 0;  // cur: layers first..cur.index, nodes [c0, c1)
  for (int i = 0; i <= g->nnodes; i++) {
    layer_id a = i < g->nnodes && !(i >= lo && i < hi) ? node_layer(g, &g->nodes[i])
                                                       : (layer_id){NULL, 0, -1};
    if (a.stack && same_stack(a, cur) && a.index - cur.index <= 1 && a.index >= cur.index) {
      cur.index = a.index;
      c1 = i + 1;
      continue;
    }
    if (!a.stack && cur.stack && i < g->nnodes && !(i >= lo && i < hi)) continue;  // an Add
    if (cur.stack && (E->lay || first != cur.index)) {
      const char *why = trip_difference(E, cur, c0, c1);
      add_note(notes, &n, first == cur.index
          ? bc_fmt(E->ctx, "layer %.*s.%d (n%d..n%d) is not in the layer loop: %s", (int)cur.slen,
                   cur.stack, first, c0, c1 - 1, why)
          : bc_fmt(E->ctx, "layers %.*s.%d..%d (n%d..n%d) are not in the layer loop: %s",
                   (int)cur.slen, cur.stack, first, cur.index, c0, c1 - 1, why));
    }
    cur = a;
    first = a.index;
    c0 = i;
    c1 = i + 1;
  }
  return n;
}

// The notes as comments atop the entry, wrapped at 96 columns.
static void emit_layer_notes(emitter *E) {
  const char *notes[MAX_NOTES];
  int n = layer_notes(E, notes);
  for (int i = 0; i < n; i++) {
    const char *p = notes[i];
    while (*p) {
      size_t len = strlen(p), cut = len;
      if (len > 90) {
        cut = 90;
        while (cut > 20 && p[cut] != ' ') cut--;
      }
      comment(E, "", "%s%.*s", p == notes[i] ? "" : "  ", (int)cut, p);
      p += cut;
      while (*p == ' ') p++;
    }
  }
  if (n) sb_add(&E->b, "\n");
}

const char *bcE_layer_notes(bc_ctx *ctx, const bc_graph *g) {
  bc_emit_opts none = {0};
  emitter E = {.ctx = ctx, .g = g, .o = &none};
  if (!emittable(ctx, g)) return NULL;
  if (!setup_packed(&E)) setup_layers(&E);
  const char *notes[MAX_NOTES], *s = "";
  int n = E.err ? 0 : layer_notes(&E, notes);
  for (int i = 0; i < n && s; i++) s = bc_fmt(ctx, "%s%s\n", s, notes[i]);
  return E.err || !s ? NULL : s;
}

static int check_layer_cache(emitter *E) {
  const bc_layers *L = &E->g->layers;
  if (!E->lay || !E->steppable) return E->err;
  int64_t stride = layer_cache_base(E, 1) - layer_cache_base(E, 0);
  for (int t = 0; t < L->count; t++)
    for (int j = 0; j < L->period; j++) {
      int64_t a = E->cache_off[L->first + L->period + j], b = E->cache_off[L->first + t * L->period + j];
      if ((a < 0) != (b < 0) || (a >= 0 && b != a + (t - 1) * stride))
        return fail(E, "the layers' K|V cache blocks are not periodic");
    }
  return E->err;
}

static int setup(emitter *E) {
  E->tail = -1;
  for (int i = 0; i < E->g->ninputs; i++) E->tokens |= bcI_is_tokens(E->g, E->g->inputs[i]);
  upper_name(E);
  if (!E->err) setup_packed(E);
  if (!E->err) setup_layers(E);
  if (!E->err) name_fields(E);
  if (!E->err) name_interface(E);
  if (!E->err && E->o->aot) name_members(E);
  if (!E->err) setup_step(E);
  if (!E->err) check_layer_cache(E);
  return E->err;
}

char *bcE_emit_c(bc_ctx *ctx, const bc_graph *g, const bc_emit_opts *o) {
  bc_emit_opts none = {0};
  emitter E = {.ctx = ctx, .g = g, .o = o ? o : &none};
  if (!emittable(ctx, g)) return NULL;
  if (o && o->aot && (o->profile || o->gemm_only)) {
    bc_error(ctx, BC_EINTERNAL, "internal error: emit-c: AOT code has no profile or gemm-only variant");
    return NULL;
  }
  if (setup(&E) == BC_OK) {
    emit_file_header(&E);
    emit_layer_notes(&E);
    emit_function(&E);
    if (E.steppable) {  // <model>_step_rows: the same body over the KV cache
      E.step = true;
      sb_add(&E.b, "\n");
      comment(&E, "", "The step entry: t_new = %s new positions of batch row b at pos[b].., K|V",
              E.g->dims[E.seq].name);
      comment(&E, "", "kept in cache.");
      emit_function(&E);
      E.step = false;
      emit_step_shared(&E);
    }
    emit_pack(&E);
    emit_wrappers(&E);
    if (E.o->aot)
      sb_add(&E.b, "\n#ifdef BLOCKC_NO_BLAS\n#undef cblas_sgemm\n#undef bcrt_linear\n"
                   "#undef bcrt_linear_pool\n#endif\n");
  }
  return finish(&E);
}

// --- the AOT header -------------------------------------------------------------

static bool is_numbered(const char *s, const char *prefix) {
  size_t n = strlen(prefix);
  if (strncmp(s, prefix, n) || !s[n]) return false;
  for (const char *q = s + n; *q; q++)
    if (*q < '0' || *q > '9') return false;
  return true;
}

// <model>_io members: one per input, output and run-time dim, named after
// them when header_safe and unique, else in<i>, out<i>, rt<i>; a renamed
// member (`output x` of an input x) never takes another entry's name.
static int name_members(emitter *E) {
  const bc_graph *g = E->g;
  int n = g->ninputs + g->noutputs + g->nrt;
  E->member = bc_alloc(E->ctx, (size_t)(n ? n : 1) * sizeof *E->member);
  const char **want = bc_alloc(E->ctx, (size_t)(n ? n : 1) * 3 * sizeof *want);
  if (!E->member || !want) return oom(E);
  const char **fb = want + n, **graph = fb + n;
  for (int i = 0; i < n; i++) {
    graph[i] = NULL;
    if (i < g->ninputs) {
      graph[i] = g->vals[g->inputs[i]].name;
      fb[i] = bc_fmt(E->ctx, "in%d", i);
    } else if (i < g->ninputs + g->noutputs) {
      graph[i] = g->output_names ? g->output_names[i - g->ninputs] : NULL;
      fb[i] = bc_fmt(E->ctx, "out%d", i - g->ninputs);
    } else {
      int k = i - g->ninputs - g->noutputs;
      for (int d = 0; d < g->ndims; d++)
        if (g->dims[d].rt == k) graph[i] = g->dims[d].name;
      fb[i] = bc_fmt(E->ctx, "rt%d", k);
    }
    if (!fb[i]) return oom(E);
    want[i] = graph[i];
    if (want[i] && (is_numbered(want[i], "in") || is_numbered(want[i], "out") ||
                    is_numbered(want[i], "rt")))
      want[i] = NULL;  // the fallback scheme's own names
  }
  nameset set = {0};
  name_entries(E, &set, want, fb, n, graph, n, E->member);
  free(set.slot);
  return E->err;
}

// RANK, NUMEL (at the bounds), SHAPE (the bounds) and RT (per axis, the
// index of its run-time dim in rt[], -1 when fixed) as initialisers.
static void shape_macros(emitter *E, const char *what, const bc_shape *s) {
  sb_add(&E->b, "#define %s_%s_RANK %d\n", E->upper, what, s->rank);
  sb_add(&E->b, "#define %s_%s_NUMEL %lld\n", E->upper, what, (long long)bc_shape_numel(s));
  sb_add(&E->b, "#define %s_%s_SHAPE {", E->upper, what);
  for (int i = 0; i < s->rank; i++) sb_add(&E->b, "%s%lld", i ? ", " : "", (long long)s->d[i]);
  sb_add(&E->b, "}\n#define %s_%s_RT {", E->upper, what);
  for (int i = 0; i < s->rank; i++) {
    int k = s->sym[i];
    sb_add(&E->b, "%s%d", i ? ", " : "", k > 0 && k <= E->g->ndims ? E->g->dims[k - 1].rt : -1);
  }
  sb_add(&E->b, "}\n");
}

// The step entry's part of the contract (steppable graphs only).
static void h_step_contract(emitter *E) {
  const bc_graph *g = E->g;
  sbuf *b = &E->b;
  const char *m = g->model, *M = E->upper;
  const bc_dim *T = &g->dims[E->seq];
  sb_add(b, " *\n * Step entry (token-by-token decoding with a KV cache):\n");
  sb_add(b, " *   %s_step(&w, &io, pos, cache, cache_bytes, workspace) computes the\n"
            " *   outputs of the positions pos .. pos+", m);
  bcomment(E, "%s-1 only: io holds those rows, with %s", T->name, T->name);
  sb_add(b, "\n *   (1..%lld) the number of new positions; the earlier positions' keys and\n"
            " *   values come from the cache.\n", (long long)T->value);
  sb_add(b, " *   cache: caller-owned, cache_bytes >= %s_CACHE_BYTES bytes aligned to\n"
            " *     %s_CACHE_ALIGN, one per sequence (or batch of sequences); contents need\n"
            " *     not be initialised.  Its header records the model, the positions\n"
            " *     filled and the run-time dims the sequence keeps (the batch, a memory's\n"
            " *     length).  Start a sequence, or reset, by calling with pos == 0 (no\n"
            " *     clearing needed); then pass pos = the positions already stepped, or\n"
            " *     fewer: pos may rewind to truncate the sequence (the positions from pos\n"
            " *     on are recomputed and the later ones dropped), never skip ahead.\n"
            " *     Cross-attention keys/values of the memory are computed at pos == 0 and\n"
            " *     kept: the memory and its run-time dims must stay the same for the\n"
            " *     whole sequence.\n", M, M);
  sb_add(b, " *   Returns %s_ECACHE (nothing written) when pos + new positions exceeds the\n"
            " *   capacity (%lld positions); %s_ESEQ (nothing written) when pos > 0 and the\n"
            " *   cache does not hold this model's sequence up to pos with the same kept\n"
            " *   dims (another model's cache, one never started, pos past the positions\n"
            " *   filled, a memory of another length); %s_EINVAL for pos < 0, a NULL or\n"
            " *   misaligned cache, cache_bytes < %s_CACHE_BYTES, or a lengths input that\n"
            " *   is not NULL (the step entry has no padding).\n",
         M, (long long)T->value, M, M, M);
  sb_add(b, " *   The outputs equal %s_run's rows for the same positions up to float\n"
            " *   summation order (about 1e-5 relative).  %s_step_abi(w, io, rt, pos, cache,\n"
            " *   cache_bytes, workspace) is the same with the ABI of %s_run_abi.\n", m, m, m);
  sb_add(b, " *   %s_step_rows(&w, &io, pos, cache, cache_bytes, workspace), pos an array\n"
            " *   of one position per batch row (B entries, B <= %lld the batch dim), is\n"
            " *   the same with batch row b at its own pos[b] (batched decoding of\n"
            " *   sequences of different lengths): its new positions are pos[b].., its\n"
            " *   keys and values go to its cache rows pos[b].., its queries see its cache\n"
            " *   rows up to their own position.  The header keeps each row's positions:\n"
            " *   a row may start (pos[b] == 0), go on or rewind while the others go on,\n"
            " *   never skip ahead.  %s_ECACHE when any pos[b] + new positions exceeds the\n"
            " *   capacity, %s_ESEQ when any row skips ahead (or the cache is another\n"
            " *   model's and some pos[b] > 0), %s_EINVAL for a NULL pos or any pos[b] < 0:\n"
            " *   all with nothing written.  A memory is projected for the rows that\n"
            " *   start (pos[b] == 0) only.  %s_step is %s_step_rows with every\n"
            " *   pos[b] = pos, on the same cache; %s_step_rows_abi(w, io, rt, pos, cache,\n"
            " *   cache_bytes, workspace) has the ABI of %s_run_abi.\n",
         m, (long long)E->rows_max, M, M, M, m, m, m, m);
  if (E->tail < 0) {
    sb_add(b, " *   (No %s_step_last: some output is not computed by row-wise nodes after\n"
              " *   the last attention and the layer loop, so there is no tail to run for\n"
              " *   the last position alone; a prompt's last position is row T-1 of\n"
              " *   %s_step_rows' outputs.)\n", m, m);
    return;
  }
  sb_add(b, " *   %s_step_last(&w, &io, pos, cache, cache_bytes, workspace) (a prefill that\n"
            " *   needs the last position only) is %s_step_rows with the row-wise tail\n"
            " *   after the last attention (nodes n%d..n%d: norms, Linear, ...) run for\n"
            " *   each batch row's last new position only: the layers, the cache and\n"
            " *   every status are %s_step_rows', and each output is written compactly as\n"
            " *   [B, 1, ...] (row b's last position at the start of row b, so an output\n"
            " *   needs B rows, not B * %s); its values equal %s_step_rows' row\n"
            " *   b*%s + %s-1 up to float summation order (about 1e-6 relative: one row\n"
            " *   runs the small-M kernels, many the GEMM).  %s_step_last_abi and\n"
            " *   %s_step_last_pool have the ABI of %s_step_rows_abi / _pool.\n",
         m, m, E->tail, g->nnodes - 1, m, T->name, m, T->name, T->name, m, m, m);
}

static void h_contract(emitter *E) {
  const bc_graph *g = E->g;
  sbuf *b = &E->b;
  const char *m = g->model, *M = E->upper;
  int nio = g->ninputs + g->noutputs;
  char shp[96];
  sb_add(b, " *\n * Contract:\n");
  sb_add(b, " *   %s_run(&w, &io, workspace) computes every output from the inputs.\n", m);
  sb_add(b, " *   %s_io holds (arrays are C order at the ACTUAL sizes):\n", m);
  for (int i = 0; i < nio; i++) {
    int v = i < g->ninputs ? g->inputs[i] : g->outputs[i - g->ninputs];
    bool len = g->vals[v].type == BC_VT_I32, tok = bcI_is_tokens(g, v);
    sb_add(b, " *     %-10s ", E->member[i]);
    bcomment(E, "%s %s %s%s", i < g->ninputs ? "input " : "output",
             tok ? "int32 token ids" : len ? "int32 lengths" : "float32",
             bc_shape_str(&g->vals[v].shape, shp, sizeof shp),
             tok ? tokens_range(E, v)
             : len ? ", one per batch row, each 1..its axis (NULL: full lengths)" : "");
    sb_add(b, "\n");
  }
  for (int i = 0; i < g->ndims; i++)
    if (g->dims[i].rt >= 0) {
      sb_add(b, " *     %-10s ", E->member[nio + g->dims[i].rt]);
      bcomment(E, "run-time dim %s, 1..%lld", g->dims[i].name, (long long)g->dims[i].value);
      sb_add(b, "\n");
    }
  sb_add(b, " *   Outputs must not overlap the inputs or each other.\n");
  sb_add(b, " *   workspace: %s_WORKSPACE_BYTES bytes (sized for the bounds), aligned to\n"
            " *     %s_WORKSPACE_ALIGN; caller-owned, contents need not be initialised; one per\n"
            " *     concurrent call.\n", M, M);
  sb_add(b, " *   Returns %s_OK, or with nothing guaranteed written: %s_EINVAL (a NULL\n"
            " *   pointer or weight, a misaligned workspace), %s_EDIM (a run-time dim\n"
            " *   outside 1..its bound), %s_ELEN (a length outside 1..its axis)%s\n", M, M, M, M,
         E->tokens || (bcT_statuses(g) & (1u << BC_RUN_EPOS)) ? "," : ".");
  if (E->tokens)
    sb_add(b, " *   %s_ETOKEN (a token id outside 0..V-1, V the vocab of the Embedding\n"
              " *   that reads it; the step entry checks the new positions' ids%s)%s\n", M,
           has_targets(g) ? ";\n *   or a CrossEntropy target outside 0..V-1 that is not its ignore_index"
                          : "",
           bcT_statuses(g) & (1u << BC_RUN_EPOS) ? "," : ".");
  if (bcT_statuses(g) & (1u << BC_RUN_EPOS))
    sb_add(b, " *   %s_EPOS (nothing written, the step entry's cache included): a position\n"
              " *   past max= of a learned Positions table (the sequence here, pos + the new\n"
              " *   positions in the step entry).\n", M);
  sb_add(b, " *   Reentrant: no globals, no allocation, no I/O.\n");
  sb_add(b, " *   %s_run_abi(w, io, rt, workspace) is the same entry with io an array of\n"
            " *   pointers (inputs, then outputs, in the order above) and rt the run-time\n"
            " *   dims in order (NULL when there are none): the ABI of blockc's JIT, used by\n"
            " *   `blockc run --backend aot`.\n", m);
  sb_add(b, " *   %s_run_pool(w, io, rt, workspace, pool) is %s_run_abi with its matrix\n"
            " *   products split over the threads of pool (bcrt_pool_create, blockc_rt.h;\n"
            " *   NULL: the calling thread only); the outputs are bit-identical for every\n"
            " *   pool.  With OpenBLAS, set it to one thread (openblas_set_num_threads(1))\n"
            " *   when a pool has several.  %s_step_pool is the same for %s_step_abi.\n",
         m, m, m, m);
  if (E->steppable) h_step_contract(E);
  if (bcE_is_simple(g))
    sb_add(b, " *   %s_forward(w, x, y, workspace) is %s_run for the one input x and the\n"
              " *   one output y (%s_IN_NUMEL and %s_OUT_NUMEL floats; y must not overlap x).\n",
           m, m, M, M);
  sb_add(b, " *   %s_io_info[] describes the io array of %s_run_abi, one\n"
            " *   bcrt_io_info per input then output: name (the graph's own; an output\n"
            " *   may share an input's name, `output x`), kind (BCRT_IO_INPUT,\n"
            " *   BCRT_IO_LENGTHS, BCRT_IO_OUTPUT), rank, dims[] (a size, or the bound\n"
            " *   of a run-time dim) and rt[] (the index in rt of that axis's run-time\n"
            " *   dim, else -1); %s_rt_info[] names each run-time dim, in rt order, with\n"
            " *   its bound (%s_NRT entries; one placeholder when there are none).  A\n"
            " *   program can size, check and bind every array from these two tables.\n",
         m, m, m, M);
  if (E->tokens)
    sb_add(b, " *   A tokens input's kind is BCRT_IO_TOKENS (int32 token ids, each\n"
              " *   0..V-1).\n");
  sb_add(b, " *   %s_weights holds one pointer per parameter, in the order of\n"
            " *   %s_params[], then `packed`, and is laid out exactly like\n"
            " *   `const float *[%s_NPARAMS + 1]` (checked when %s.c compiles; with no\n"
            " *   parameters, one unused pointer comes first); %s_slots lets a loader\n"
            " *   fill the parameters by index.\n", m, m, M, m, m);
  if (E->g->weight_type != BC_WT_F32)
    sb_add(b, " *   packed: required (%s_run returns %s_EINVAL on NULL): a caller-owned\n"
              " *     buffer of %s_PACKED_BYTES bytes (%s_PACKED_ALIGN-byte aligned) that\n"
              " *     %s_pack(&w, packed) filled from the parameters: every matrix of a\n"
              " *     Linear, Attention or FFN as %s (%s_WEIGHT_DTYPE), the only form\n"
              " *     of them the matrix products read: %s_pack alone reads their\n"
              " *     floats, and once it has, their slots may be NULL (the float\n"
              " *     matrices freed); norms, biases and tables are read as floats.\n",
           m, M, M, M, m, bc_weight_type_name(E->g->weight_type), M, m);
  else
    sb_add(b, " *   packed: NULL, and every matrix product runs cblas_sgemm on the\n"
            " *     parameters; or a caller-owned buffer of %s_PACKED_BYTES bytes\n"
            " *     (%s_PACKED_ALIGN-byte aligned for speed) that %s_pack(&w, packed)\n"
            " *     filled from the same parameters (again whenever they change): the\n"
            " *     products with at most BCRT_SMALL_M rows (decoding, small batches)\n"
            " *     then stream it with bcrt_gemm_small, each weight read once.  The\n"
            " *     results agree within float summation order (about 1e-5 relative).\n"
            " *     %s_pack reads every parameter (all must be set) and writes only\n"
            " *     packed; it is reentrant.\n", M, M, m, m);
  sb_add(b, " *\n * Usage (with runtime/blockc_rt.{c,h}; error handling trimmed):\n"
            " *\n"
            " *   %s_slots w;\n"
            " *   void *storage;\n"
            " *   char err[256];\n"
            " *   if (bcrt_st_load(\"model.safetensors\", %s_params, %s_NPARAMS, w.slots,\n"
            " *                    &storage, err, sizeof err) != BCRT_OK) { puts(err); exit(1); }\n"
            " *   (a whole model's file: bcrt_st_load_ex(..., &storage, \"transformer.\",\n"
            " *   BCRT_ST_ALLOW_EXTRA, err, sizeof err) reads parameter NAME from tensor\n"
            " *   P NAME or NAME minus P, and ignores tensors no parameter reads:\n"
            " *   `blockc run`'s --weights-prefix and --allow-extra)\n"
            " *   void *ws = bcrt_aligned_alloc(%s_WORKSPACE_ALIGN, %s_WORKSPACE_BYTES);\n",
         m, m, M, M, M);
  sb_add(b, " *   float *packed = bcrt_aligned_alloc(%s_PACKED_ALIGN, %s_PACKED_BYTES);\n"
            " *   if (packed) %s_pack(&w.w, packed);\n"
            " *   w.w.packed = packed;  (NULL works too: no packed copy, cblas everywhere)\n",
         M, M, m);
  sb_add(b, " *   %s_io io = {0};  (set every input, output and run-time dim member)\n"
            " *   int st = %s_run(&w.w, &io, ws);  (%s_OK on success)\n"
            " *   bcrt_aligned_free(ws);\n"
            " *   bcrt_aligned_free(packed);\n"
            " *   bcrt_st_free(storage);\n"
            " */\n", m, m, M);
}

static void h_macros(emitter *E) {
  const bc_graph *g = E->g;
  sbuf *b = &E->b;
  const char *M = E->upper;
  sb_add(b, "/* Dims of this build (the code is specialised to them; run-time dims by\n"
            " * their bound, <MODEL>_<dim>_MAX). */\n");
  for (int i = 0; i < g->ndims; i++) {
    const bc_dim *d = &g->dims[i];
    bool dup = false;
    for (int j = 0; j < i; j++) dup |= strcmp(g->dims[j].name, d->name) == 0;
    if (dup) continue;
    const char *mac = dim_macro(E, i);
    if (!mac) {
      sb_add(b, "/* dim ");
      bcomment(E, "%s %s %lld (no macro: the name is taken)", d->name, d->rt >= 0 ? "<=" : "=",
               (long long)d->value);
      sb_add(b, " */\n");
      continue;
    }
    sb_add(b, "#define %s %lld%s\n", mac, (long long)d->value,
           d->overridden ? " /* set with -D */" : "");
  }
  sb_add(b, "\n");
  sb_add(b, "/* The first input and output: rank, size and shape at the bounds, and per\n"
            " * axis the index of its run-time dim in rt[] (-1: fixed).  %s_NINPUTS,\n"
            " * _NOUTPUTS and _NRT count all inputs, outputs and run-time dims. */\n", M);
  shape_macros(E, "IN", &g->vals[g->input].shape);
  shape_macros(E, "OUT", &g->vals[g->output].shape);
  sb_add(b, "#define %s_NINPUTS %d\n#define %s_NOUTPUTS %d\n#define %s_NRT %d\n", M, g->ninputs,
         M, g->noutputs, M, g->nrt);
  sb_add(b, "#define %s_WORKSPACE_BYTES %lldul\n", M, (long long)bcY_workspace_bytes(g));
  sb_add(b, "#define %s_WORKSPACE_ALIGN 64\n", M);
  sb_add(b, "#define %s_NPARAMS %d\n\n", M, g->nparams);
  sb_add(b, "/* The packed weights %s_pack writes (see the contract; 0: none). */\n"
            "#define %s_PACKED_FLOATS %lldul\n#define %s_PACKED_BYTES %lldul\n"
            "#define %s_PACKED_ALIGN 64\n\n", E->g->model, M, (long long)E->packed_floats, M,
         (long long)E->packed_floats * 4, M);
  sb_add(b, "/* The element type of the packed matrices (`blockc emit --weight-dtype`):\n"
            " * f32, or bf16 / f16 / q8_0 / q4_0, which every matrix product reads. */\n"
            "#define %s_WEIGHT_DTYPE \"%s\"\n#define %s_WEIGHT_TYPE %s\n\n", M,
         bc_weight_type_name(g->weight_type), M, wt_macro(g->weight_type));
  if (E->steppable)
    sb_add(b, "/* The step entry's KV cache (see the contract). */\n"
              "#define %s_CACHE_BYTES %lldul\n#define %s_CACHE_ALIGN 64\n\n", M,
           (long long)bcY_cache_bytes(g), M);
  if (E->steppable)
    sb_add(b, "/* 1: %s_step_last and its _abi / _pool forms exist (the outputs of each\n"
              " * batch row's last new position only; see the contract); 0: they do not. */\n"
              "#define %s_STEP_LAST %d\n\n", g->model, M, E->tail >= 0);
}

static void h_types(emitter *E) {
  const bc_graph *g = E->g;
  sbuf *b = &E->b;
  const char *m = g->model, *M = E->upper;
  bool epos = bcT_statuses(g) & (1u << BC_RUN_EPOS);  // a learned Positions table
  sb_add(b, "typedef enum {\n  %s_OK = 0,\n  %s_EINVAL = 1, /* NULL pointer or misaligned workspace */\n"
            "  %s_EDIM = 2,   /* a run-time dim outside 1..its bound */\n"
            "  %s_ELEN = 3%s   /* a length outside 1..its axis */\n",
         M, M, M, M, E->steppable || E->tokens || epos ? "," : " ");
  if (E->steppable)
    sb_add(b, "  %s_ECACHE = 4, /* step: pos + new positions past the cache's capacity */\n"
              "  %s_ESEQ = 5%s   /* step: the cache does not hold this sequence up to pos */\n", M,
           M, E->tokens || epos ? "," : " ");
  if (E->tokens)
    sb_add(b, "  %s_ETOKEN = 6%s  /* a token id outside 0..V-1 (the Embedding's vocab)%s */\n", M,
           epos ? "," : " ", has_targets(E->g) ? ", or a bad CrossEntropy target" : "");
  if (epos)
    sb_add(b, "  %s_EPOS = 7    /* a position past max= of a learned Positions table */\n", M);
  sb_add(b, "} %s_status;\n\n", m);
  emit_weight_types(E);
  sb_add(b, "/* The weights by index: fill .slots[i] for %s_params[i], pass &.w; the last\n"
            " * slot is .w.packed. */\n", m);
  sb_add(b, "typedef union {\n  %s_weights w;\n  const float *slots[(%s_NPARAMS ? %s_NPARAMS : 1) + 1];\n} %s_slots;\n\n",
         m, M, M, m);
  sb_add(b, "/* The weights as C arrays, defined by %s_weights.c when it was written\n"
            " * (`blockc emit --weights-c`): pass &%s_embedded.w. */\n"
            "extern const %s_slots %s_embedded;\n\n", m, m, m, m);
  sb_add(b, "/* Name, rank and shape of every parameter (PyTorch state_dict names). */\n");
  sb_add(b, "typedef bcrt_param_info %s_param_info;\n", m);
  sb_add(b, "extern const %s_param_info %s_params[];\n\n", m, m);
  sb_add(b, "/* The inputs, outputs and run-time dims of one call (see the contract). */\n");
  sb_add(b, "typedef struct {\n");
  int nio = g->ninputs + g->noutputs;
  char shp[96];
  for (int i = 0; i < nio; i++) {
    int v = i < g->ninputs ? g->inputs[i] : g->outputs[i - g->ninputs];
    bool len = g->vals[v].type == BC_VT_I32;
    sb_add(b, "  %s%s; /* ", i >= g->ninputs ? "float *" : len ? "const int32_t *" : "const float *",
           E->member[i]);
    bcomment(E, "%s %s", i < g->ninputs ? "input" : "output", bc_shape_str(&g->vals[v].shape, shp, sizeof shp));
    sb_add(b, " */\n");
  }
  for (int i = 0; i < g->ndims; i++)
    if (g->dims[i].rt >= 0) {
      sb_add(b, "  long %s; /* ", E->member[nio + g->dims[i].rt]);
      bcomment(E, "run-time dim %s, 1..%lld", g->dims[i].name, (long long)g->dims[i].value);
      sb_add(b, " */\n");
    }
  sb_add(b, "} %s_io;\n\n", m);
  sb_add(b, "/* The io array of %s_run_abi and the run-time dims, described (see the contract). */\n", m);
  sb_add(b, "extern const bcrt_io_info %s_io_info[%s_NINPUTS + %s_NOUTPUTS];\n", m, M, M);
  sb_add(b, "extern const bcrt_rt_info %s_rt_info[%s_NRT ? %s_NRT : 1];\n\n", m, M, M);
}

static void emit_h(emitter *E, const char *provenance) {
  const bc_graph *g = E->g;
  sbuf *b = &E->b;
  const char *m = g->model, *M = E->upper;
  sb_add(b, "/* %s.h -- ", m);
  bcomment(E, "the forward pass of model %s, generated by blockc %s. Do not edit.", m, BC_VERSION);
  sb_add(b, "\n *\n * ");
  bcomment(E, "%s", provenance ? provenance : "");
  sb_add(b, "\n");
  h_contract(E);
  sb_add(b, "#ifndef BLOCKC_MODEL_%s_H\n#define BLOCKC_MODEL_%s_H\n\n", M, M);
  sb_add(b, "#include <stdint.h>\n%s#include \"blockc_rt.h\" /* bcrt_param_info, bcrt_io_info, bcrt_rt_info */\n\n",
         E->steppable ? "#include <stddef.h> /* size_t */\n" : "");
  sb_add(b, "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n");
  h_macros(E);
  h_types(E);
  sb_add(b, "int %s_run(const %s_weights *w, const %s_io *io, void *workspace);\n", m, m, m);
  sb_add(b, "int %s_run_abi(const %s_weights *w, void *const *io, const long *rt, void *workspace);\n",
         m, m);
  sb_add(b, "int %s_run_pool(const %s_weights *w, void *const *io, const long *rt, void *workspace,\n"
            "    bcrt_pool *pool);\n", m, m);
  if (bcE_is_simple(g))
    sb_add(b, "int %s_forward(const %s_weights *w, const float *x, float *y, void *workspace);\n", m, m);
  sb_add(b, "void %s_pack(const %s_weights *w, float *packed);\n", m, m);
  if (E->steppable) {
    sb_add(b, "int %s_step(const %s_weights *w, const %s_io *io, long pos, void *cache,\n"
              "    size_t cache_bytes, void *workspace);\n", m, m, m);
    sb_add(b, "int %s_step_abi(const %s_weights *w, void *const *io, const long *rt, long pos,\n"
              "    void *cache, size_t cache_bytes, void *workspace);\n", m, m);
    sb_add(b, "int %s_step_pool(const %s_weights *w, void *const *io, const long *rt, long pos,\n"
              "    void *cache, size_t cache_bytes, void *workspace, bcrt_pool *pool);\n", m, m);
    sb_add(b, "int %s_step_rows(const %s_weights *w, const %s_io *io, const long *pos,\n"
              "    void *cache, size_t cache_bytes, void *workspace);\n", m, m, m);
    sb_add(b, "int %s_step_rows_abi(const %s_weights *w, void *const *io, const long *rt,\n"
              "    const long *pos, void *cache, size_t cache_bytes, void *workspace);\n", m, m);
    sb_add(b, "int %s_step_rows_pool(const %s_weights *w, void *const *io, const long *rt,\n"
              "    const long *pos, void *cache, size_t cache_bytes, void *workspace,\n"
              "    bcrt_pool *pool);\n", m, m);
  }
  if (E->steppable && E->tail >= 0) {
    sb_add(b, "int %s_step_last(const %s_weights *w, const %s_io *io, const long *pos,\n"
              "    void *cache, size_t cache_bytes, void *workspace);\n", m, m, m);
    sb_add(b, "int %s_step_last_abi(const %s_weights *w, void *const *io, const long *rt,\n"
              "    const long *pos, void *cache, size_t cache_bytes, void *workspace);\n", m, m);
    sb_add(b, "int %s_step_last_pool(const %s_weights *w, void *const *io, const long *rt,\n"
              "    const long *pos, void *cache, size_t cache_bytes, void *workspace,\n"
              "    bcrt_pool *pool);\n", m, m);
  }
  sb_add(b, "\n#ifdef __cplusplus\n}\n#endif\n#endif\n");
}

char *bcE_emit_h(bc_ctx *ctx, const bc_graph *g, const char *provenance) {
  bc_emit_opts aot = {.aot = true};
  emitter E = {.ctx = ctx, .g = g, .o = &aot};
  if (!emittable(ctx, g)) return NULL;
  if (setup(&E) == BC_OK) emit_h(&E, provenance);
  return finish(&E);
}
