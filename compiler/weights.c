// weights.c — the float arrays behind a graph's parameters, and the RNG.
//
// A bc_weights holds one malloc'ed float array per graph parameter, in
// param-id order (the order the generated forward() takes them).  They come
// either from a deterministic random init (for `blockc run` without a
// weights file, and for tests) or from a safetensors file checked name by
// name against the graph.  Loading reports every problem it finds — missing,
// misshaped, wrongly typed, unexpected and non-finite tensors — before
// failing, because a mismatched checkpoint usually has many wrong entries
// and fixing them one run at a time is miserable.
//
// A parameter the graph file gives an init override (`init=normal(0.02)`,
// bc_param.init) is drawn again after the scheme, from a stream of its own
// (bcW_apply_inits), so the override changes no other parameter.
//
// The RNG is xoshiro256** seeded through splitmix64 (the seeding its authors
// recommend): fast, tiny state, and identical on every machine, so a seed
// names the same weights and inputs everywhere.
#include "bc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// RNG
// ---------------------------------------------------------------------------
static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

void bc_rng_seed(bc_rng *r, uint64_t seed) {
  // splitmix64 never yields four zero words, the one state xoshiro forbids.
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t bc_rng_next(bc_rng *r) {
  uint64_t *s = r->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

// The top 53 bits scaled by 2^-53: every double in [0, 1) on that grid is
// equally likely, and 1.0 is never returned.
double bc_rng_uniform(bc_rng *r) { return (double)(bc_rng_next(r) >> 11) * 0x1.0p-53; }

// Box-Muller with no cached second value (bc_rng has no room for one, and
// no cache keeps the stream a pure function of the state): each call uses
// two uniforms. 1 - u is in (0, 1], so the log is finite.
double bc_rng_normal(bc_rng *r) {
  double u1 = 1.0 - bc_rng_uniform(r);
  double u2 = bc_rng_uniform(r);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

// ---------------------------------------------------------------------------
// Allocation
// ---------------------------------------------------------------------------
void bcW_free(bc_weights *w) {
  if (!w) return;
  if (w->p)
    for (int i = 0; i < w->n; i++) free(w->p[i]);
  free(w->p);
  w->p = NULL;
  w->n = 0;
}

// Sets up w with a NULL slot per parameter, so bcW_free works at any point,
// and the NULL packed slot p[n] after them (bc.h).
static int alloc_slots(bc_ctx *ctx, const bc_graph *g, bc_weights *w) {
  w->n = 0;
  w->p = calloc((size_t)g->nparams + 1, sizeof *w->p);
  if (!w->p) return bc_error(ctx, BC_ENOMEM, "error: out of memory allocating weights");
  w->n = g->nparams;
  return BC_OK;
}

static int alloc_param(bc_ctx *ctx, const bc_graph *g, int i, bc_weights *w) {
  int64_t n = bc_shape_numel(&g->params[i].shape);
  w->p[i] = malloc(n > 0 ? (size_t)n * sizeof(float) : sizeof(float));
  if (!w->p[i])
    return bc_error(ctx, BC_ENOMEM, "error: out of memory for parameter '%s' (%lld floats)",
                    g->params[i].name, (long long)n);
  return BC_OK;
}

// ---------------------------------------------------------------------------
// Random init
// ---------------------------------------------------------------------------
static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

// Conventions (those of PyTorch's nn.TransformerEncoderLayer after
// xavier_uniform_ on its matrices):
//   rank >= 2: xavier-uniform, U(-a, a) with a = sqrt(6 / (fan_in + fan_out)),
//              fan_out = shape[0], fan_in = shape[1] (times the product of
//              any further dims, PyTorch's "receptive field");
//   rank 1 named "*.weight": ones (LayerNorm scale);
//   any other rank <= 1 (biases, in_proj_bias): zeros;
//   read by a Param (bc_param.unit, any rank): ones (a scale).
// Parameters draw from one stream in param-id order.  Then (issue 23, no
// draws): an RMSNorm with offset= gets weight 1 - offset, so that its scale
// offset + w starts at 1 (Gemma's zeros for offset=1), and Attention's
// head scales start at 1 (NormFormer).
static void init_param(const bc_param *p, bc_rng *rng, float *dst) {
  int64_t n = bc_shape_numel(&p->shape);
  if (p->unit) {
    for (int64_t i = 0; i < n; i++) dst[i] = 1.0f;
    return;
  }
  if (p->shape.rank >= 2) {
    int64_t rf = 1;
    for (int k = 2; k < p->shape.rank; k++) rf *= p->shape.d[k];
    double fan = (double)(p->shape.d[0] + p->shape.d[1]) * (double)rf;
    double a = fan > 0 ? sqrt(6.0 / fan) : 0.0;
    for (int64_t i = 0; i < n; i++) dst[i] = (float)((2.0 * bc_rng_uniform(rng) - 1.0) * a);
    return;
  }
  float v = (p->shape.rank == 1 && ends_with(p->name, ".weight")) ? 1.0f : 0.0f;
  for (int64_t i = 0; i < n; i++) dst[i] = v;
}

// fan_in + fan_out of a matrix as init_param (and PyTorch) count them: the
// layout does not matter, only the sum.
static double fan_sum(const bc_shape *s) {
  int64_t rf = 1;
  for (int k = 2; k < s->rank; k++) rf *= s->d[k];
  return s->rank >= 2 ? (double)(s->d[0] + s->d[1]) * (double)rf : 0.0;
}

// One override into dst (n floats), from its own stream r.
static void fill_init(const bc_init *in, const bc_shape *s, bc_rng *r, float *dst, int64_t n) {
  double fan = fan_sum(s), a = in->arg;
  switch (in->kind) {
  case BC_INIT_NONE: case BC_INIT_COUNT: return;
  case BC_INIT_ZEROS: case BC_INIT_ONES: case BC_INIT_CONST: {
    float v = in->kind == BC_INIT_ONES ? 1.0f : in->kind == BC_INIT_CONST ? (float)in->arg : 0.0f;
    for (int64_t i = 0; i < n; i++) dst[i] = v;
    return;
  }
  case BC_INIT_XAVIER: a = fan > 0 ? in->arg * sqrt(6.0 / fan) : 0.0; break;
  case BC_INIT_XAVIER_NORMAL: a = fan > 0 ? in->arg * sqrt(2.0 / fan) : 0.0; break;
  case BC_INIT_NORMAL: case BC_INIT_UNIFORM: break;
  }
  bool normal = in->kind == BC_INIT_NORMAL || in->kind == BC_INIT_XAVIER_NORMAL;
  for (int64_t i = 0; i < n; i++)
    dst[i] = (float)(normal ? bc_rng_normal(r) * a : (2.0 * bc_rng_uniform(r) - 1.0) * a);
}

// Block j of packed matrix p (rows, or columns with part_cols) from its own
// stream, as if it were a matrix of its own: [len, in] (or [in, len]),
// elements in storage order.  tmp holds the block's numel floats.
static void fill_part(const bc_param *p, int j, bc_rng *r, float *dst, float *tmp) {
  if (p->shape.rank == 1) {  // a block of a packed bias: elements [at, at + len)
    bc_shape b = {.rank = 1, .d = {p->part_n[j]}};
    fill_init(&p->part[j], &b, r, tmp, p->part_n[j]);
    memcpy(dst + p->part_at[j], tmp, (size_t)p->part_n[j] * sizeof *dst);
    return;
  }
  int64_t rows = p->shape.d[0], cols = p->shape.d[1], at = p->part_at[j], len = p->part_n[j];
  bc_shape b = p->part_cols ? (bc_shape){.rank = 2, .d = {rows, len}}
                            : (bc_shape){.rank = 2, .d = {len, cols}};
  fill_init(&p->part[j], &b, r, tmp, b.d[0] * b.d[1]);
  if (!p->part_cols) {
    memcpy(dst + at * cols, tmp, (size_t)(len * cols) * sizeof *dst);
    return;
  }
  for (int64_t i = 0; i < rows; i++)
    memcpy(dst + i * cols + at, tmp + i * len, (size_t)len * sizeof *dst);
}

// The stream of parameter `name`'s override (part < 0) or of block part:
// seed ^ fnv1a(name), or seed ^ fnv1a(name + "#q" / "#k" / "#v").
static void init_stream(bc_rng *r, uint64_t seed, const char *name, int part) {
  uint64_t h = bc_fnv1a(BC_FNV_OFFSET, name, strlen(name));
  if (part >= 0) h = bc_fnv1a(h, (const char[]){'#', "qkv"[part]}, 2);
  bc_rng_seed(r, seed ^ h);
}

int bcW_apply_inits(bc_ctx *ctx, const bc_graph *g, uint64_t seed, bc_weights *w) {
  for (int i = 0; i < g->nparams && i < w->n; i++) {
    const bc_param *p = &g->params[i];
    if (!w->p[i]) continue;
    bc_rng r;
    if (p->init.kind != BC_INIT_NONE) {
      init_stream(&r, seed, p->name, -1);
      fill_init(&p->init, &p->shape, &r, w->p[i], bc_shape_numel(&p->shape));
    }
    for (int j = 0; j < 3; j++) {
      if (p->part[j].kind == BC_INIT_NONE || p->shape.rank < 1 || p->shape.rank > 2) continue;
      int64_t other = p->shape.rank == 1 ? 1 : p->part_cols ? p->shape.d[0] : p->shape.d[1];
      float *tmp = malloc((size_t)(p->part_n[j] * other + 1) * sizeof *tmp);
      if (!tmp) return bc_error(ctx, BC_ENOMEM, "error: out of memory initialising '%s'", p->name);
      init_stream(&r, seed, p->name, j);
      fill_part(p, j, &r, w->p[i], tmp);
      free(tmp);
    }
  }
  return BC_OK;
}

const char *bcW_init_str(const bc_init *in, char *buf, size_t n) {
  static const char *const names[BC_INIT_COUNT] = {"none", "zeros", "ones", "normal", "uniform",
                                                   "xavier", "xavier_normal", "const"};
  const char *name = in->kind >= 0 && in->kind < BC_INIT_COUNT ? names[in->kind] : "?";
  bool arg = in->kind == BC_INIT_NORMAL || in->kind == BC_INIT_UNIFORM || in->kind == BC_INIT_CONST ||
             ((in->kind == BC_INIT_XAVIER || in->kind == BC_INIT_XAVIER_NORMAL) && in->arg != 1.0);
  if (!arg) {
    snprintf(buf, n, "%s", name);
    return buf;
  }
  for (int prec = 1; prec <= 17; prec++) {  // the shortest spelling that reads back exactly
    snprintf(buf, n, "%s(%.*g)", name, prec, in->arg);
    if (strtod(buf + strlen(name) + 1, NULL) == in->arg) break;
  }
  return buf;
}

int bcW_init_random(bc_ctx *ctx, const bc_graph *g, uint64_t seed, bc_weights *w) {
  w->n = 0;
  w->p = NULL;
  int rc = alloc_slots(ctx, g, w);
  bc_rng rng;
  bc_rng_seed(&rng, seed);
  for (int i = 0; rc == BC_OK && i < g->nparams; i++) {
    rc = alloc_param(ctx, g, i, w);
    if (rc == BC_OK) init_param(&g->params[i], &rng, w->p[i]);
  }
  for (int i = 0; rc == BC_OK && i < g->nnodes; i++) {
    const bc_node *n = &g->nodes[i];
    bool rms = n->op == BC_OP_RMSNORM ||
               ((n->op == BC_OP_ADD_LN || n->op == BC_OP_DUAL_ADD_LN) && n->rms);
    int p = rms && n->offset != 0                        ? n->param[0]
            : n->op == BC_OP_ATTENTION && n->head_scale ? n->param[12]
                                                         : -1;
    float v = rms ? (float)(1.0 - n->offset) : 1.0f;
    for (int64_t k = 0, m = p >= 0 ? bc_shape_numel(&g->params[p].shape) : 0; k < m; k++) w->p[p][k] = v;
  }
  if (rc == BC_OK) rc = bcW_apply_inits(ctx, g, seed, w);
  if (rc != BC_OK) bcW_free(w);
  return rc;
}

// ---------------------------------------------------------------------------
// Loading
// ---------------------------------------------------------------------------
static const char *tensor_shape_str(const bc_st_tensor *t, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < t->rank && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, i ? ", %lld" : "%lld", (long long)t->shape[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

static bool shape_matches(const bc_st_tensor *t, const bc_shape *s) {
  if (t->rank != s->rank) return false;
  for (int i = 0; i < s->rank; i++)
    if (t->shape[i] != s->d[i]) return false;
  return true;
}

// Reports are capped per kind: a checkpoint of another model can have a
// million mismatches, and a million lines help nobody.
#define REPORT_MAX 8

typedef struct {
  bc_ctx *ctx;
  const bc_graph *g;
  const bc_st_file *f;
  bc_load_opts *o;
  bool *used;             // per file tensor: some parameter read it
  int missing, misshaped; // counts (only the first REPORT_MAX of each are printed)
  int hints;              // prefix hints given (each one scans the file)
  // (graph size, file size) pairs seen in mismatched shapes, for the diagnosis
  int64_t want[16], got[16];
  int npairs;
  bool inconsistent;
} loader;

// A file tensor named "<prefix>.<name>" (e.g. "model.encoder.layers.0...."
// from a wrapper module's state_dict), to suggest when `name` is missing.
static const char *prefixed_name(const bc_st_file *f, const char *name) {
  size_t n = strlen(name);
  for (int i = 0; i < f->ntensors; i++) {
    const char *t = f->tensors[i].name;
    size_t k = strlen(t);
    if (k > n + 1 && t[k - n - 1] == '.' && strcmp(t + k - n, name) == 0) return t;
  }
  return NULL;
}

// The file tensor for parameter `name`, honouring --weights-prefix.
static const bc_st_tensor *find_for(loader *L, const char *name) {
  const char *pre = L->o ? L->o->prefix : NULL;
  if (!pre || !*pre) return bcS_find(L->f, name);
  size_t pn = strlen(pre);
  char *full = malloc(pn + strlen(name) + 1);
  const bc_st_tensor *t = NULL;
  if (full) {
    memcpy(full, pre, pn);
    strcpy(full + pn, name);
    t = bcS_find(L->f, full);
    free(full);
  }
  if (!t && !strncmp(name, pre, pn)) t = bcS_find(L->f, name + pn);
  return t;
}

// Records the size pairs of a rank-matching shape mismatch.
static void note_pairs(loader *L, const bc_st_tensor *t, const bc_shape *s) {
  if (t->rank != s->rank) return;
  for (int i = 0; i < s->rank; i++) {
    int64_t w = s->d[i], g = t->shape[i];
    int k = 0;
    while (k < L->npairs && L->want[k] != w) k++;
    if (k < L->npairs) {
      if (L->got[k] != g) L->inconsistent = true;
    } else if (L->npairs < 16) {
      L->want[k] = w, L->got[k] = g, L->npairs++;
    } else {
      L->inconsistent = true;
    }
  }
}

// "; tried 'model.x' and 'x' (--weights-prefix model.)": the names find_for
// looked up, for the missing-tensor message ("" without a prefix).
// Under the API: "(prefix 'model.' of blockc_set_weights_options)".
static const char *tried_names(loader *L, const char *name) {
  const char *pre = L->o ? L->o->prefix : NULL;
  if (!pre || !*pre) return "";
  size_t pn = strlen(pre);
  const char *how = L->o->api ? bc_fmt(L->ctx, "prefix '%s' of %s", pre, L->o->api)
                              : bc_fmt(L->ctx, "--weights-prefix %s", pre);
  if (!strncmp(name, pre, pn))
    return bc_fmt(L->ctx, "; tried '%s%s' and '%s' (%s)", pre, name, name + pn, how);
  return bc_fmt(L->ctx, "; tried '%s%s' (%s)", pre, name, how);
}

// How the caller sets a prefix / allows extras: the CLI's flag, or the API
// function's argument.
static const char *prefix_hint(const loader *L) {
  return L->o && L->o->api ? bc_fmt(L->ctx, "give %s a prefix", L->o->api) : "try --weights-prefix";
}
static const char *extra_hint(const loader *L) {
  return L->o && L->o->api ? bc_fmt(L->ctx, "call %s(m, prefix, 1) to ignore them", L->o->api)
                           : "pass --allow-extra to ignore them";
}

// Presence, dtype and shape of one parameter's tensor. Returns NULL after
// reporting if it is unusable.
static const bc_st_tensor *check_tensor(loader *L, const bc_param *p) {
  bc_ctx *ctx = L->ctx;
  const bc_st_file *f = L->f;
  char want[96], got[256];
  bc_shape_str(&p->shape, want, sizeof want);
  const bc_st_tensor *t = find_for(L, p->name);
  if (!t) {
    if (++L->missing > REPORT_MAX) return NULL;
    const char *alt = L->hints++ < REPORT_MAX ? prefixed_name(f, p->name) : NULL;
    if (alt)
      bc_error(ctx, BC_EINPUT, "%s: error: missing tensor '%s' (expected shape %s%s); the file has "
               "'%s' (exported with a different name prefix? %s)", f->path,
               p->name, want, tried_names(L, p->name), alt, prefix_hint(L));
    else
      bc_error(ctx, BC_EINPUT, "%s: error: missing tensor '%s' (expected shape %s%s)", f->path,
               p->name, want, tried_names(L, p->name));
    return NULL;
  }
  L->used[t - f->tensors] = true;
  bool bad = false;
  if (t->dtype == BC_DT_OTHER) {
    bc_error(ctx, BC_EINPUT, "%s: error: tensor '%s' has dtype %s, expected F32, F16 or BF16%s", f->path,
             t->name, t->dtype_name, f->gg ? " (or in GGUF Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q6_K)" : "");
    bad = true;
  }
  if (!shape_matches(t, &p->shape)) {
    note_pairs(L, t, &p->shape);
    if (++L->misshaped <= REPORT_MAX)
      bc_error(ctx, BC_EINPUT, "%s: error: tensor '%s' has shape %s, expected %s", f->path, t->name,
               tensor_shape_str(t, got, sizeof got), want);
    bad = true;
  }
  return bad ? NULL : t;
}
// "[1, 2]": the multi-index of flat element i in a C-ordered shape.
static const char *index_str(const bc_shape *s, int64_t i, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int d = 0; d < s->rank && k < n; d++) {
    int64_t stride = 1;
    for (int e = d + 1; e < s->rank; e++) stride *= s->d[e];
    k += (size_t)snprintf(buf + k, n - k, d ? ", %lld" : "%lld", (long long)(i / stride));
    i %= stride;
  }
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

// NaN or Inf in weights always means a broken export or training run; we
// say where the first one is so it can be found in the source checkpoint.
static int check_finite(bc_ctx *ctx, const char *path, const bc_param *p, const float *x) {
  int64_t n = bc_shape_numel(&p->shape);
  for (int64_t i = 0; i < n; i++) {
    if (isfinite(x[i])) continue;
    char idx[128];
    return bc_error(ctx, BC_EINPUT, "%s: error: tensor '%s' has a non-finite value (%s) at index %s",
                    path, p->name, isnan(x[i]) ? "nan" : x[i] > 0 ? "inf" : "-inf",
                    index_str(&p->shape, i, idx, sizeof idx));
  }
  return BC_OK;
}

// The used tensor that unused tensor t is a tied copy of (bcS_is_copy: a
// head saved twice, lm_head.weight beside transformer.wte.weight), or NULL;
// *like: a used tensor of t's dtype and shape, for the message.  *rc is set
// on a read error.
static const bc_st_tensor *copy_of(loader *L, const bc_st_tensor *t, const bc_st_tensor **like,
                                   int *rc) {
  *like = NULL;
  for (int j = 0; j < L->f->ntensors; j++) {
    const bc_st_tensor *u = &L->f->tensors[j];
    if (!L->used[j] || u == t || u->dtype != t->dtype || strcmp(u->dtype_name, t->dtype_name) ||
        u->rank != t->rank || memcmp(u->shape, t->shape, (size_t)t->rank * sizeof *t->shape))
      continue;
    bool same = false;
    if ((*rc = bcS_is_copy(L->ctx, L->f, t, u, &same)) != BC_OK) return NULL;
    if (same) return u;
    if (!*like) *like = u;
  }
  return NULL;
}

// Tensors in the file that no parameter asked for: likely a checkpoint of
// a different model (or a renamed one), so it is an error unless
// --allow-extra says the checkpoint is known to be bigger (embeddings, an
// LM head), or the tensor is a tied copy of one a parameter read (the first
// pass marks those used).  A few are named (a lone one with the shape of a
// used tensor says it is no copy of it: an untied head); the count and the
// flag end the list.  *rc: a read error.
static int report_extras(loader *L, int *rc) {
  int extras = 0;
  bool allow = L->o && L->o->allow_extra;
  const bc_st_tensor *like;
  for (int i = 0; i < L->f->ntensors && !allow; i++) {
    if (L->used[i]) continue;
    if (copy_of(L, &L->f->tensors[i], &like, rc)) {
      L->used[i] = true;
      if (L->o) L->o->tied++;
    } else if (*rc != BC_OK) {
      return 0;
    } else {
      extras++;
    }
  }
  for (int i = 0, listed = 0; i < L->f->ntensors && extras && listed < REPORT_MAX; i++) {
    if (L->used[i]) continue;
    const bc_st_tensor *t = &L->f->tensors[i];
    listed++;
    if (extras > 1 || copy_of(L, t, &like, rc) || *rc != BC_OK) like = NULL;
    char s[256];
    bc_error(L->ctx, BC_EINPUT, "%s: error: unexpected tensor '%s' %s (not one of the graph's %d parameters%s)",
             L->f->path, t->name, tensor_shape_str(t, s, sizeof s), L->g->nparams,
             like ? bc_fmt(L->ctx, "; it has the shape of '%s' but is no tied copy of it", like->name)
                  : "");
  }
  if (allow) {
    for (int i = 0; i < L->f->ntensors; i++) L->o->ignored += !L->used[i];
    return 0;
  }
  if (extras > 0)
    bc_error(L->ctx, BC_EINPUT, "%s: error: %d tensor%s in the file %s not used by the graph%s; %s",
             L->f->path, extras, extras == 1 ? "" : "s", extras == 1 ? "is" : "are",
             extras > REPORT_MAX ? " (the first few are listed above)" : "", extra_hint(L));
  return extras;  // each one is a problem
}

// "checkpoint has D=64; the graph was built with D=128: try -D D=64" when
// every mismatched size maps consistently to another one and those sizes
// are the values of the graph's dims.
static void diagnose_dims(loader *L) {
  if (L->inconsistent || L->npairs == 0) return;
  char has[512] = "", built[512] = "", try_[512] = "";
  size_t a = 0, b = 0, c = 0;
  int found = 0;
  for (int k = 0; k < L->npairs; k++) {
    if (L->want[k] == L->got[k]) continue;
    for (int i = 0; i < L->g->ndims; i++) {
      const bc_dim *d = &L->g->dims[i];
      if (d->rt >= 0 || d->value != L->want[k] || a >= sizeof has || b >= sizeof built ||
          c >= sizeof try_)
        continue;
      a += (size_t)snprintf(has + a, sizeof has - a, "%s%s=%lld", found ? ", " : "", d->name,
                            (long long)L->got[k]);
      b += (size_t)snprintf(built + b, sizeof built - b, "%s%s=%lld", found ? ", " : "", d->name,
                            (long long)d->value);
      c += (size_t)snprintf(try_ + c, sizeof try_ - c, "%s-D %s=%lld", found ? " " : "", d->name,
                            (long long)L->got[k]);
      found++;
    }
  }
  if (found)
    bc_error(L->ctx, BC_EINPUT, "%s: note: the checkpoint has %s; the graph was built with %s: try %s",
             L->f->path, has, built, try_);
}

static void report_capped(loader *L) {
  if (L->missing > REPORT_MAX)
    bc_error(L->ctx, BC_EINPUT, "%s: error: ... %d missing tensors in all (the first %d are listed)",
             L->f->path, L->missing, REPORT_MAX);
  if (L->misshaped > REPORT_MAX)
    bc_error(L->ctx, BC_EINPUT, "%s: error: ... %d tensors with the wrong shape in all (the first %d "
             "are listed)", L->f->path, L->misshaped, REPORT_MAX);
}

int bcW_load(bc_ctx *ctx, const bc_graph *g, const char *path, bc_weights *w) {
  return bcW_load_opts(ctx, g, path, NULL, w);
}

int bcW_load_opts(bc_ctx *ctx, const bc_graph *g, const char *path, bc_load_opts *o,
                  bc_weights *w) {
  w->n = 0;
  w->p = NULL;
  if (o) o->ignored = o->tied = 0;
  int rc = bcW_check_memory(ctx, g, o ? o->max_memory : 0);
  if (rc != BC_OK) return rc;
  bc_st_file *f;
  rc = bcS_open(ctx, path, &f);
  if (rc != BC_OK) return rc;
  loader L = {.ctx = ctx, .g = g, .f = f, .o = o};
  L.used = calloc((size_t)(f->ntensors ? f->ntensors : 1), sizeof *L.used);
  rc = L.used ? alloc_slots(ctx, g, w) : bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", path);
  int problems = 0;
  for (int i = 0; rc == BC_OK && i < g->nparams; i++) {
    const bc_param *p = &g->params[i];
    const bc_st_tensor *t = check_tensor(&L, p);
    if (!t) {
      problems++;
      continue;
    }
    rc = alloc_param(ctx, g, i, w);
    if (rc == BC_OK) rc = bcS_read_f32(ctx, f, t, w->p[i]);
    if (rc == BC_OK && check_finite(ctx, path, p, w->p[i]) != BC_OK) problems++;
  }
  if (rc == BC_OK) {
    report_capped(&L);
    problems += report_extras(&L, &rc);
  }
  if (rc == BC_OK && problems > 0) {
    diagnose_dims(&L);
    rc = bc_error(ctx, BC_EINPUT, "%s: error: %d problem%s with the weights (the graph has %d parameter%s, "
                  "the file %d tensor%s)", path, problems, problems == 1 ? "" : "s", g->nparams,
                  g->nparams == 1 ? "" : "s", f->ntensors, f->ntensors == 1 ? "" : "s");
  }
  free(L.used);
  bcS_close(f);
  if (rc != BC_OK) bcW_free(w);
  return rc;
}

// ---------------------------------------------------------------------------
// Memory budget
// ---------------------------------------------------------------------------
// One part of the sum, for the message: ", 123 bytes of workspace".
static void mem_part(char *buf, size_t n, double bytes, const char *name) {
  if (bytes <= 0) return;
  size_t len = strlen(buf);
  snprintf(buf + len, n - len, ", %.0f bytes of %s", bytes, name);
}

int bcW_check_memory_use(bc_ctx *ctx, const bc_graph *g, const bc_mem_use *u, int64_t limit) {
  if (limit <= 0) limit = BC_MAX_MEMORY;
  bc_mem_use run = {.forward = true};
  if (!u) u = &run;
  // Parameter counts are bounded (nodes x BC_MAX_ELEMS), so doubles are
  // exact enough and cannot overflow where an int64 sum could.
  double params = 0;
  for (int i = 0; i < g->nparams; i++) params += (double)bc_shape_numel(&g->params[i].shape) * 4;
  bool fwd = u->forward && g->planned;
  double ws = fwd ? (double)bcY_workspace_bytes(g) : 0;
  double packed = fwd ? (double)bcY_packed_floats(g) * 4 : 0;
  if (packed < 0) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  double cache = (double)u->cache_bytes, bwd = (double)u->backward_bytes;
  double grads = u->grads ? params : 0, tape = u->tape_bytes;
  double total = params + ws + packed + cache + bwd + grads + tape;
  if (total <= (double)limit) return BC_OK;
  char parts[512] = "";
  if (fwd) {  // both, even when 0, as the message always said
    snprintf(parts, sizeof parts, ", %.0f bytes of workspace, %.0f of packed weights", ws, packed);
  }
  mem_part(parts, sizeof parts, cache, "KV cache");
  mem_part(parts, sizeof parts, bwd, "backward workspace");
  mem_part(parts, sizeof parts, grads, "parameter gradients");
  mem_part(parts, sizeof parts, tape, "the reference backward's tape (double)");
  return bc_error(ctx, BC_ENOMEM,
                  "%s: error: %s needs %.0f bytes (%.1f GiB: %.0f bytes of parameters%s), "
                  "over the limit of %lld bytes (%.1f GiB); raise it with --max-memory BYTES",
                  g->path ? g->path : "graph", u->what ? u->what : "the run", total,
                  total / 1073741824.0, params, parts, (long long)limit,
                  (double)limit / 1073741824.0);
}

int bcW_check_memory(bc_ctx *ctx, const bc_graph *g, int64_t limit) {
  return bcW_check_memory_use(ctx, g, NULL, limit);
}
