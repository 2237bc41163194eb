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

// Sets up w with a NULL slot per parameter, so bcW_free works at any point.
static int alloc_slots(bc_ctx *ctx, const bc_graph *g, bc_weights *w) {
  w->n = 0;
  w->p = calloc(g->nparams ? (size_t)g->nparams : 1, sizeof *w->p);
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
//   any other rank <= 1 (biases, in_proj_bias): zeros.
// Parameters draw from one stream in param-id order.
static void init_param(const bc_param *p, bc_rng *rng, float *dst) {
  int64_t n = bc_shape_numel(&p->shape);
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

int bcW_init_random(bc_ctx *ctx, const bc_graph *g, uint64_t seed, bc_weights *w) {
  int rc = alloc_slots(ctx, g, w);
  bc_rng rng;
  bc_rng_seed(&rng, seed);
  for (int i = 0; rc == BC_OK && i < g->nparams; i++) {
    rc = alloc_param(ctx, g, i, w);
    if (rc == BC_OK) init_param(&g->params[i], &rng, w->p[i]);
  }
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

// Presence, dtype and shape of one parameter's tensor. Returns NULL after
// reporting if it is unusable.
static const bc_st_tensor *check_tensor(bc_ctx *ctx, const bc_st_file *f, const bc_param *p) {
  char want[96], got[256];
  bc_shape_str(&p->shape, want, sizeof want);
  const bc_st_tensor *t = bcS_find(f, p->name);
  if (!t) {
    const char *alt = prefixed_name(f, p->name);
    if (alt)
      bc_error(ctx, BC_EINPUT, "%s: error: missing tensor '%s' (expected shape %s); the file has '%s' "
               "(exported with a different name prefix?)", f->path, p->name, want, alt);
    else
      bc_error(ctx, BC_EINPUT, "%s: error: missing tensor '%s' (expected shape %s)", f->path, p->name, want);
    return NULL;
  }
  bool bad = false;
  if (t->dtype == BC_DT_OTHER) {
    bc_error(ctx, BC_EINPUT, "%s: error: tensor '%s' has dtype %s, expected F32, F16 or BF16", f->path,
             p->name, t->dtype_name);
    bad = true;
  }
  if (!shape_matches(t, &p->shape)) {
    bc_error(ctx, BC_EINPUT, "%s: error: tensor '%s' has shape %s, expected %s", f->path, p->name,
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

// Tensors in the file that no parameter asked for: likely a checkpoint of
// a different model (or a renamed one), so it is an error, not a warning.
static int report_extras(bc_ctx *ctx, const bc_graph *g, const bc_st_file *f) {
  int extras = 0;
  for (int i = 0; i < f->ntensors; i++) {
    const bc_st_tensor *t = &f->tensors[i];
    if (bcI_find_param(g, t->name) >= 0) continue;
    char s[256];
    bc_error(ctx, BC_EINPUT, "%s: error: unexpected tensor '%s' %s (not one of the graph's %d parameters)",
             f->path, t->name, tensor_shape_str(t, s, sizeof s), g->nparams);
    extras++;
  }
  return extras;
}

int bcW_load(bc_ctx *ctx, const bc_graph *g, const char *path, bc_weights *w) {
  w->n = 0;
  w->p = NULL;
  bc_st_file *f;
  int rc = bcS_open(ctx, path, &f);
  if (rc != BC_OK) return rc;
  rc = alloc_slots(ctx, g, w);
  int problems = 0;
  for (int i = 0; rc == BC_OK && i < g->nparams; i++) {
    const bc_param *p = &g->params[i];
    const bc_st_tensor *t = check_tensor(ctx, f, p);
    if (!t) {
      problems++;
      continue;
    }
    rc = alloc_param(ctx, g, i, w);
    if (rc == BC_OK) rc = bcS_read_f32(ctx, f, t, w->p[i]);
    if (rc == BC_OK && check_finite(ctx, path, p, w->p[i]) != BC_OK) problems++;
  }
  if (rc == BC_OK) problems += report_extras(ctx, g, f);
  if (rc == BC_OK && problems > 0)
    rc = bc_error(ctx, BC_EINPUT, "%s: error: %d problem%s with the weights (the graph has %d parameter%s, "
                  "the file %d tensor%s)", path, problems, problems == 1 ? "" : "s", g->nparams,
                  g->nparams == 1 ? "" : "s", f->ntensors, f->ntensors == 1 ? "" : "s");
  bcS_close(f);
  if (rc != BC_OK) bcW_free(w);
  return rc;
}
