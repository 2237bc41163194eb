// train_io.c — what `blockc train` writes besides its progress (train.h):
// the checkpoint pair and the loss plot.
//
// Checkpoint pair (docs/training.md):
//   W.safetensors        every parameter under its graph name (PyTorch's),
//                        float32; __metadata__ {"format": "pt",
//                        "blockc.step": N, "blockc.graph": fingerprint}
//   W.optim.safetensors  AdamW: exp_avg.NAME and exp_avg_sq.NAME; SGD:
//                        momentum_buffer.NAME; __metadata__ "blockc.step",
//                        "blockc.micro" (micro-batches drawn: the sequential
//                        data position), "blockc.rng" (the data generator's
//                        xoshiro256** state, four 64-bit hex words),
//                        "blockc.optimizer", "blockc.graph".
// Each file is written atomically (bc_write_file_atomic: temp + rename),
// the optimizer file first; on resume the two steps must agree, so a pair
// torn by a crash between the two renames is refused, never half-used.
// Nothing in the metadata depends on the time or the path, so the same
// training state always gives the same bytes (the resume identity).
#define _POSIX_C_SOURCE 200809L
#include "train.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t tr_graph_id(const bc_graph *g) {
  uint64_t h = bc_fnv1a(BC_FNV_OFFSET, g->model, strlen(g->model) + 1);
  for (int p = 0; p < g->nparams; p++) {
    const bc_param *q = &g->params[p];
    h = bc_fnv1a(h, q->name, strlen(q->name) + 1);
    h = bc_fnv1a(h, &q->shape.rank, sizeof q->shape.rank);
    for (int k = 0; k < q->shape.rank; k++) h = bc_fnv1a(h, &q->shape.d[k], sizeof q->shape.d[k]);
  }
  return h;
}

const char *tr_optim_path(bc_ctx *ctx, const char *weights) {
  size_t n = strlen(weights), k = strlen(".safetensors");
  if (n > k && !strcmp(weights + n - k, ".safetensors")) n -= k;
  return bc_fmt(ctx, "%.*s.optim.safetensors", (int)n, weights);
}

// One safetensors file: n float32 tensors (names as prefix + the graph's
// parameter names) and the __metadata__ members meta ("\"k\":\"v\",...").
static int write_st(bc_ctx *ctx, const char *path, const bc_graph *g, const char *prefix,
                    float *const *data, const char *meta) {
  bc_sbuf h = {0};
  bc_sb_add(&h, "{\"__metadata__\":{%s}", meta);
  uint64_t off = 0;
  for (int p = 0; p < g->nparams; p++) {
    const bc_param *q = &g->params[p];
    uint64_t bytes = (uint64_t)bc_shape_numel(&q->shape) * 4;
    bc_sb_add(&h, ",\"%s%s\":{\"dtype\":\"F32\",\"shape\":[", prefix, q->name);
    for (int k = 0; k < q->shape.rank; k++) bc_sb_add(&h, k ? ",%lld" : "%lld", (long long)q->shape.d[k]);
    bc_sb_add(&h, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", off, off + bytes);
    off += bytes;
  }
  bc_sb_add(&h, "}");
  while (!h.oom && h.len % 8) bc_sb_add(&h, " ");
  int nparts = 2 + g->nparams, st = BC_OK;
  const void **parts = malloc((size_t)nparts * sizeof *parts);
  size_t *lens = malloc((size_t)nparts * sizeof *lens);
  unsigned char len8[8];
  if (h.oom || !parts || !lens) st = bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", path);
  for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)h.len >> (8 * i));
  if (!st) {
    parts[0] = len8, lens[0] = 8, parts[1] = h.p, lens[1] = h.len;
    for (int p = 0; p < g->nparams; p++)  // little-endian hosts (as the rest of the CLI's writers)
      parts[2 + p] = data[p], lens[2 + p] = (size_t)bc_shape_numel(&g->params[p].shape) * 4;
    st = bc_write_file_atomic(ctx, path, nparts, parts, lens);
  }
  free(parts);
  free(lens);
  free(h.p);
  return st;
}

int tr_save(bc_ctx *ctx, const char *path, const bc_graph *g, const bc_weights *w,
            float *const *m1, float *const *m2, const tr_state *s) {
  const char *opath = tr_optim_path(ctx, path);
  const char *meta = bc_fmt(ctx,
      "\"format\":\"pt\",\"blockc.step\":\"%ld\",\"blockc.micro\":\"%lld\","
      "\"blockc.rng\":\"%016llx%016llx%016llx%016llx\",\"blockc.optimizer\":\"%s\","
      "\"blockc.graph\":\"%016llx\"",
      s->step, (long long)s->micro, s->rng.s[0], s->rng.s[1], s->rng.s[2], s->rng.s[3],
      s->optimizer == CLI_OPTIM_SGD ? "sgd" : "adamw", (unsigned long long)s->graph_id);
  const char *wmeta = bc_fmt(ctx, "\"format\":\"pt\",\"blockc.step\":\"%ld\",\"blockc.graph\":"
                             "\"%016llx\"", s->step, (unsigned long long)s->graph_id);
  if (!opath || !meta || !wmeta) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  int st;
  if (s->optimizer == CLI_OPTIM_SGD) {
    st = write_st(ctx, opath, g, "momentum_buffer.", m1, meta);
  } else {
    // Both moments in one file: write them as one table of 2 * nparams.
    bc_graph two = *g;
    bc_param *pp = malloc(2 * (size_t)(g->nparams ? g->nparams : 1) * sizeof *pp);
    float **data = malloc(2 * (size_t)(g->nparams ? g->nparams : 1) * sizeof *data);
    st = pp && data ? BC_OK : bc_error(ctx, BC_ENOMEM, "error: out of memory");
    for (int p = 0; !st && p < g->nparams; p++) {
      pp[p] = g->params[p], pp[g->nparams + p] = g->params[p];
      pp[p].name = bc_fmt(ctx, "exp_avg.%s", g->params[p].name);
      pp[g->nparams + p].name = bc_fmt(ctx, "exp_avg_sq.%s", g->params[p].name);
      data[p] = m1[p], data[g->nparams + p] = m2[p];
      if (!pp[p].name || !pp[g->nparams + p].name) st = bc_error(ctx, BC_ENOMEM, "error: out of memory");
    }
    two.params = pp, two.nparams = 2 * g->nparams;
    if (!st) st = write_st(ctx, opath, &two, "", data, meta);
    free(pp);
    free(data);
  }
  if (!st) st = write_st(ctx, path, g, "", w->p, wmeta);
  return st;
}

// The header JSON of a safetensors file (ctx memory), for its metadata.
static char *read_header(bc_ctx *ctx, const char *path) {
  uint64_t size;
  FILE *f = bc_open_regular(ctx, path, &size);
  if (!f) return NULL;
  unsigned char b[8];
  uint64_t n = 0;
  char *h = NULL;
  if (fread(b, 1, 8, f) == 8) {
    for (int i = 0; i < 8; i++) n |= (uint64_t)b[i] << (8 * i);
    if (n <= size - 8 && n < (1u << 28) && (h = bc_alloc(ctx, (size_t)n + 1)) &&
        fread(h, 1, (size_t)n, f) == n)
      h[n] = '\0';
    else
      h = NULL;
  }
  fclose(f);
  if (!h) bc_error(ctx, BC_EINPUT, "%s: error: not a safetensors file (its header cannot be read)", path);
  return h;
}

// The string value of metadata key in header h, or NULL.
static const char *meta_get(bc_ctx *ctx, const char *h, const char *key) {
  const char *k = bc_fmt(ctx, "\"%s\":\"", key);
  const char *p = k ? strstr(h, k) : NULL;
  if (!p) return NULL;
  p += strlen(k);
  const char *e = strchr(p, '"');
  return e ? bc_strndup(ctx, p, (size_t)(e - p)) : NULL;
}

static int read_moment(bc_ctx *ctx, const bc_st_file *f, const char *path, const bc_graph *g,
                       const char *prefix, float *const *m) {
  for (int p = 0; p < g->nparams; p++) {
    const char *name = bc_fmt(ctx, "%s%s", prefix, g->params[p].name);
    const bc_st_tensor *t = name ? bcS_find(f, name) : NULL;
    if (!t)
      return bc_error(ctx, BC_EINPUT, "%s: error: no tensor '%s': not the optimizer state of "
                      "this graph and --optimizer", path, name ? name : prefix);
    if (bc_shape_numel(&g->params[p].shape) != (t->rank ? t->shape[0] : 1) * (t->rank > 1 ? t->shape[1] : 1) *
        (t->rank > 2 ? t->shape[2] : 1) * (t->rank > 3 ? t->shape[3] : 1))
      return bc_error(ctx, BC_EINPUT, "%s: error: '%s' has the wrong size for this graph", path, name);
    int st = bcS_read_f32(ctx, f, t, m[p]);
    if (st) return st;
  }
  return BC_OK;
}

int tr_load_optim(bc_ctx *ctx, const char *wpath, const bc_graph *g, float *const *m1,
                  float *const *m2, tr_state *s) {
  const char *path = tr_optim_path(ctx, wpath);
  char *wh = path ? read_header(ctx, wpath) : NULL;
  char *h = wh ? read_header(ctx, path) : NULL;
  if (!h) return BC_EINPUT;
  const char *step = meta_get(ctx, h, "blockc.step"), *micro = meta_get(ctx, h, "blockc.micro");
  const char *rng = meta_get(ctx, h, "blockc.rng"), *opt = meta_get(ctx, h, "blockc.optimizer");
  const char *gid = meta_get(ctx, h, "blockc.graph"), *wstep = meta_get(ctx, wh, "blockc.step");
  if (!step || !micro || !rng || strlen(rng) != 64 || !opt || !gid)
    return bc_error(ctx, BC_EINPUT, "%s: error: no blockc training state in its __metadata__ "
                    "(blockc.step, blockc.micro, blockc.rng, blockc.optimizer, blockc.graph): "
                    "not written by `blockc train --out`", path);
  char want[24];
  snprintf(want, sizeof want, "%016llx", (unsigned long long)tr_graph_id(g));
  if (strcmp(gid, want))
    return bc_error(ctx, BC_EINPUT, "%s: error: the optimizer state is of another graph "
                    "(fingerprint %s, this graph's %s)", path, gid, want);
  if (!wstep || strcmp(wstep, step))
    return bc_error(ctx, BC_EINPUT, "%s: error: the weights (step %s) and the optimizer state "
                    "(step %s) are of different steps", wpath, wstep ? wstep : "unknown", step);
  if (strcmp(opt, s->optimizer == CLI_OPTIM_SGD ? "sgd" : "adamw"))
    return bc_error(ctx, BC_EINPUT, "%s: error: the optimizer state is %s's, this run's "
                    "--optimizer is %s", path, opt, s->optimizer == CLI_OPTIM_SGD ? "sgd" : "adamw");
  s->step = strtol(step, NULL, 10);
  s->micro = strtoll(micro, NULL, 10);
  for (int k = 0; k < 4; k++) {
    char w16[17];
    memcpy(w16, rng + 16 * k, 16);
    w16[16] = '\0';
    s->rng.s[k] = strtoull(w16, NULL, 16);
  }
  bc_st_file *f = NULL;
  int st = bcS_open(ctx, path, &f);
  if (!st && s->optimizer == CLI_OPTIM_SGD) st = read_moment(ctx, f, path, g, "momentum_buffer.", m1);
  if (!st && s->optimizer == CLI_OPTIM_ADAMW) st = read_moment(ctx, f, path, g, "exp_avg.", m1);
  if (!st && s->optimizer == CLI_OPTIM_ADAMW) st = read_moment(ctx, f, path, g, "exp_avg_sq.", m2);
  if (f) bcS_close(f);
  return st;
}

// --- the plot -------------------------------------------------------------
#define SVG_W 640
#define SVG_H 400
#define SVG_L 60
#define SVG_R 20
#define SVG_T 30
#define SVG_B 40

static void polyline(bc_sbuf *b, const double *x, const double *y, int n, double x0, double x1,
                     double y0, double y1, const char *color, bool dots) {
  double sx = (SVG_W - SVG_L - SVG_R) / (x1 > x0 ? x1 - x0 : 1);
  double sy = (SVG_H - SVG_T - SVG_B) / (y1 > y0 ? y1 - y0 : 1);
  bc_sb_add(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", color);
  for (int i = 0; i < n; i++)
    if (isfinite(y[i]))
      bc_sb_add(b, "%.1f,%.1f ", SVG_L + (x[i] - x0) * sx, SVG_H - SVG_B - (y[i] - y0) * sy);
  bc_sb_add(b, "\"/>\n");
  for (int i = 0; dots && i < n; i++)
    if (isfinite(y[i]))
      bc_sb_add(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n",
                SVG_L + (x[i] - x0) * sx, SVG_H - SVG_B - (y[i] - y0) * sy, color);
}

static void range(const double *v, int n, double *lo, double *hi) {
  for (int i = 0; i < n; i++)
    if (isfinite(v[i])) *lo = v[i] < *lo ? v[i] : *lo, *hi = v[i] > *hi ? v[i] : *hi;
}

int tr_write_svg(bc_ctx *ctx, const char *path, const double *x, const double *y, int n,
                 const double *vx, const double *vy, int nv) {
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  range(x, n, &x0, &x1), range(vx, nv, &x0, &x1);
  range(y, n, &y0, &y1), range(vy, nv, &y0, &y1);
  if (!isfinite(x0)) x0 = 0, x1 = 1;
  if (!isfinite(y0)) y0 = 0, y1 = 1;
  if (y1 <= y0) y1 = y0 + 1;
  bc_sbuf b = {0};
  bc_sb_add(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n",
            SVG_W, SVG_H, SVG_W, SVG_H);
  bc_sb_add(&b, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", SVG_W, SVG_H);
  bc_sb_add(&b, "<text x=\"%d\" y=\"18\">loss by step</text>\n", SVG_L);
  bc_sb_add(&b, "<path d=\"M%d %d V%d H%d\" stroke=\"black\" fill=\"none\"/>\n", SVG_L, SVG_T,
            SVG_H - SVG_B, SVG_W - SVG_R);
  bc_sb_add(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.4g</text>\n", SVG_L - 4, SVG_T + 4, y1);
  bc_sb_add(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.4g</text>\n", SVG_L - 4,
            SVG_H - SVG_B, y0);
  bc_sb_add(&b, "<text x=\"%d\" y=\"%d\">%.0f</text>\n", SVG_L, SVG_H - SVG_B + 16, x0);
  bc_sb_add(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.0f</text>\n", SVG_W - SVG_R,
            SVG_H - SVG_B + 16, x1);
  polyline(&b, x, y, n, x0, x1, y0, y1, "#1f77b4", false);
  if (nv) polyline(&b, vx, vy, nv, x0, x1, y0, y1, "#ff7f0e", true);
  bc_sb_add(&b, "<text x=\"%d\" y=\"18\" fill=\"#1f77b4\">train</text>\n", SVG_W - 160);
  if (nv) bc_sb_add(&b, "<text x=\"%d\" y=\"18\" fill=\"#ff7f0e\">val</text>\n", SVG_W - 100);
  bc_sb_add(&b, "</svg>\n");
  int st = b.oom ? bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", path)
                 : bc_write_file_atomic(ctx, path, 1, (const void *const[]){b.p}, &b.len);
  free(b.p);
  return st;
}
