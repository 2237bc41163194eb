// stepwise.c — the step entry from the command line.
//
// `blockc run GRAPH --stepwise [--chunk K]` feeds the float and tokens inputs' stepped
// sequence axis K positions at a time through `<model>_step` (pos = 0, K,
// 2K, ...; the last chunk may be shorter) and concatenates the outputs, so
// it prints and writes what the full forward does (within float summation
// order).  Inputs without the stepped axis (a decoder's memory) are passed
// whole to every call.  Both backends: the JIT's step entry or the AOT
// module's `<model>_step_abi`.
//
// `blockc bench GRAPH --decode --context C` times generation: the prefill
// of a C-position prompt (one step call at pos 0 with C rows, median), then
// single-token steps at pos = C, C+1, ... reusing the cache (wrapping back
// to C at the bound: re-stepping a position only rewrites its cache row),
// median ms per token.  Next to it, the weight-read floor: one plain
// vectorised read of every weight byte, timed in the same run (the idea of
// tools/bench_kernels.c), and the ratio.  With --batch B (issue 26) the
// graph's batch dim is set to B and the steps go through
// `<model>_step_rows`, row b at its own position (C - b mod 4, each row
// wrapping back to its start at the bound): tokens/s = B / ms per step.
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "blockc_rt.h"  // bcrt_stream_sum, bcrt_pool

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int cli_step_call(const cli_step *s, const bc_weights *w, void *const *io, const long *rt,
                  long pos, void *cache, void *ws) {
  if (s->aot && s->pool && s->aot_pool)
    return s->aot_pool((const void *)w->p, io, rt, pos, cache, (size_t)s->cache_bytes, ws, s->pool);
  if (s->aot) return s->aot((const void *)w->p, io, rt, pos, cache, (size_t)s->cache_bytes, ws);
  if (s->pool && s->jit_pool)
    return s->jit_pool((const float *const *)w->p, io, rt, pos, cache, (size_t)s->cache_bytes, ws,
                       s->pool);
  return s->jit((const float *const *)w->p, io, rt, pos, cache, (size_t)s->cache_bytes, ws);
}

bool cli_step_has_last(const cli_step *s) { return s->aot ? s->aot_last != NULL : s->jit_last != NULL; }

int cli_step_last_call(const cli_step *s, const bc_weights *w, void *const *io, const long *rt,
                       const long *pos, void *cache, void *ws) {
  if (s->aot && s->pool && s->aot_last_pool)
    return s->aot_last_pool((const void *)w->p, io, rt, pos, cache, (size_t)s->cache_bytes, ws,
                            s->pool);
  if (s->aot) return s->aot_last((const void *)w->p, io, rt, pos, cache, (size_t)s->cache_bytes, ws);
  return s->jit_last((const float *const *)w->p, io, rt, pos, cache, (size_t)s->cache_bytes, ws,
                     s->pool);
}

// Where the stepped dim sits in array i (-1: nowhere), and the floats
// before (outer) and after (inner) that axis at the actual shape.
typedef struct {
  int axis;
  int64_t outer, inner;
} seq_split;

static seq_split split_of(const bc_graph *g, int v, const bc_shape *actual, int seq) {
  seq_split r = {-1, 1, 1};
  const bc_shape *s = &g->vals[v].shape;
  for (int a = 0; a < s->rank; a++)
    if (s->sym[a] == seq + 1) r.axis = a;
  for (int a = 0; r.axis >= 0 && a < actual->rank; a++) {
    if (a < r.axis) r.outer *= actual->d[a];
    if (a > r.axis) r.inner *= actual->d[a];
  }
  return r;
}

// Rows [t0, t0 + t) of full [outer, T, inner] to or from part [outer, t, inner].
static void move_rows(float *full, int64_t T, float *part, int64_t t0, int64_t t,
                      const seq_split *sp, bool to_part) {
  size_t n = (size_t)(t * sp->inner) * sizeof(float);
  for (int64_t o = 0; o < sp->outer; o++) {
    float *f = full + (o * T + t0) * sp->inner, *p = part + o * t * sp->inner;
    memcpy(to_part ? p : f, to_part ? f : p, n);
  }
}

static int step_status(bc_ctx *ctx, int rc, long pos) {
  static const char *const nm[] = {"OK", "EINVAL", "EDIM", "ELEN", "ECACHE", "ESEQ", "ETOKEN", "EPOS"};
  return bc_error(ctx, BC_EINTERNAL, "internal error: the step entry returned %s (%d) at pos %ld",
                  rc > 0 && rc <= 7 ? nm[rc] : "an unknown status", rc, pos);
}

// The per-call arrays of one chunk: io pointers into part buffers (stepped
// arrays) or the whole arrays (the rest).
typedef struct {
  void **p;
  seq_split *sp;
} chunk_io;

static int chunk_new(bc_ctx *ctx, const bc_graph *g, const cli_io *io, int seq, long chunk,
                     chunk_io *c) {
  c->p = calloc((size_t)io->n, sizeof *c->p);
  c->sp = calloc((size_t)io->n, sizeof *c->sp);
  if (!c->p || !c->sp) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  for (int i = 0; i < io->n; i++) {
    int v = i < g->ninputs ? g->inputs[i] : g->outputs[i - g->ninputs];
    c->sp[i] = split_of(g, v, &io->shape[i], seq);
    if (bcI_is_lengths(g, v)) {  // (token ids are stepped like float rows: 4 bytes each)
      if (io->p[i])
        return bc_error(ctx, BC_EUSAGE, "blockc: error: --stepwise: lengths input '%s' was given; "
                        "the step entry has no padding (leave it out)", g->vals[v].name);
      continue;
    }
    if (c->sp[i].axis < 0) {
      if (i >= g->ninputs)
        return bc_error(ctx, BC_EINPUT, "%s: error: --stepwise: output '%s' has no %s axis to "
                        "concatenate", g->path, g->output_names[i - g->ninputs], g->dims[seq].name);
      c->p[i] = io->p[i];  // the memory: whole, every call
      continue;
    }
    if (!(c->p[i] = malloc((size_t)(c->sp[i].outer * chunk * c->sp[i].inner) * sizeof(float))))
      return bc_error(ctx, BC_ENOMEM, "error: out of memory for the step arrays");
  }
  return BC_OK;
}

static void chunk_free(const cli_io *io, chunk_io *c) {
  for (int i = 0; c->p && c->sp && i < io->n; i++)
    if (c->sp[i].axis >= 0) free(c->p[i]);
  free(c->p);
  free(c->sp);
}

long cli_step_chunk(const bc_graph *g, const cli_io *io, long chunk) {
  int seq = bcY_step_dim(g);
  long T = seq < 0 ? 1 : io->rt[g->dims[seq].rt];
  if (chunk < 1) chunk = 1;
  return chunk > T ? T : chunk;
}

int cli_run_stepwise(bc_ctx *ctx, const bc_graph *g, const cli_step *s, const bc_weights *w,
                     cli_io *io, long chunk, void *ws, double *ms) {
  int seq = bcY_step_dim(g);
  if (seq < 0 || (!s->jit && !s->aot)) return bcY_step_check(ctx, g);
  long T = io->rt[g->dims[seq].rt];
  chunk = cli_step_chunk(g, io, chunk);
  void *cache = aligned_alloc(64, (size_t)s->cache_bytes);
  chunk_io c = {0};
  int st = cache ? chunk_new(ctx, g, io, seq, chunk, &c)
                 : bc_error(ctx, BC_ENOMEM, "error: cannot allocate the %lld-byte KV cache",
                            (long long)s->cache_bytes);
  long *rt = st ? NULL : malloc((size_t)g->nrt * sizeof *rt);
  if (!st && !rt) st = bc_error(ctx, BC_ENOMEM, "error: out of memory");
  *ms = 0;
  for (long pos = 0; pos < T && !st; pos += chunk) {
    long t = pos + chunk <= T ? chunk : T - pos;
    memcpy(rt, io->rt, (size_t)g->nrt * sizeof *rt);
    rt[g->dims[seq].rt] = t;
    for (int i = 0; i < g->ninputs; i++)
      if (c.p[i] && c.sp[i].axis >= 0) move_rows(io->p[i], T, c.p[i], pos, t, &c.sp[i], true);
    double t0 = cli_now_ms();
    int rc = cli_step_call(s, w, c.p, rt, pos, cache, ws);
    *ms += cli_now_ms() - t0;
    if (rc) st = step_status(ctx, rc, pos);
    for (int i = g->ninputs; i < io->n && !st; i++)
      move_rows(io->p[i], T, c.p[i], pos, t, &c.sp[i], false);
  }
  free(rt);
  chunk_free(io, &c);
  free(cache);
  return st;
}

// --- bench --decode --------------------------------------------------------------

// Whether op reads only some rows of its parameter table (a gather): the
// embedding lookup and the learned positions.
static bool gathers(bc_op op) { return op == BC_OP_POSITIONS || op == BC_OP_EMBEDDING; }

// Floats of parameter k one call reads: all of them, unless rows > 0 and
// every node reading k gathers rows from it (then rows rows).  A table
// that a Linear also reads (a tied LM head) is read whole.
static int64_t param_read_floats(const bc_graph *g, int k, int64_t rows) {
  int64_t all = bc_shape_numel(&g->params[k].shape);
  const bc_shape *s = &g->params[k].shape;
  bool gather_only = rows > 0 && s->rank == 2, read = false;
  for (int i = 0; i < g->nnodes && gather_only; i++)
    for (int j = 0; j < BC_MAX_NODE_PARAMS; j++)
      if (g->nodes[i].param[j] == k) {
        read = true;
        gather_only &= gathers(g->nodes[i].op);
      }
  if (!gather_only || !read) return all;
  int64_t part = rows * s->d[1];
  return part < all ? part : all;
}

// Floats of table k that gathers read per call (rows rows; 0 when no
// Embedding or learned Positions reads k, or rows == 0).
static int64_t param_gathered_floats(const bc_graph *g, int k, int64_t rows) {
  const bc_shape *s = &g->params[k].shape;
  bool gathered = false;
  for (int i = 0; i < g->nnodes && rows > 0 && s->rank == 2; i++)
    for (int j = 0; j < BC_MAX_NODE_PARAMS; j++)
      gathered |= g->nodes[i].param[j] == k && gathers(g->nodes[i].op);
  return gathered ? rows * s->d[1] : 0;
}

int cli_floor_init(bc_ctx *ctx, cli_floor *f, const bc_graph *g, const bc_weights *w,
                   int64_t extra_bytes, int64_t rows) {
  *f = (cli_floor){.g = g, .w = w, .nextra = (size_t)(extra_bytes > 0 ? extra_bytes : 0) / 4};
  f->extra = malloc((f->nextra ? f->nextra : 1) * sizeof *f->extra);
  f->count = malloc((size_t)(g->nparams ? g->nparams : 1) * sizeof *f->count);
  if (!f->extra || !f->count) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  for (size_t i = 0; i < f->nextra; i++) f->extra[i] = 1.0f;  // real pages, not the zero page
  f->bytes = (int64_t)f->nextra * 4;
  bool *packed = NULL;  // the params a weight type packs: read as stored
  if (g->weight_type != BC_WT_F32) {
    int nb;
    bcY_pblock *b = bcY_pack_blocks(g, &nb, &f->npacked);
    packed = calloc((size_t)(g->nparams ? g->nparams : 1), sizeof *packed);
    if (!packed) nb = -1;
    for (int i = 0; i < nb; i++) packed[b[i].param] = true;
    free(b);
    if (nb < 0 || !w->p[w->n]) {
      free(packed);
      return bc_error(ctx, nb < 0 ? BC_ENOMEM : BC_EINTERNAL,
                      nb < 0 ? "error: out of memory" : "internal error: the floor needs the packed copy");
    }
    f->bytes += f->npacked * 4;
  }
  for (int k = 0; k < g->nparams; k++) {
    f->count[k] = param_read_floats(g, k, rows);
    if (packed && packed[k]) {  // the matrix is read packed; of its floats only gathered rows
      int64_t all = bc_shape_numel(&g->params[k].shape), gath = param_gathered_floats(g, k, rows);
      f->count[k] = gath < all ? gath : all;
    }
    f->bytes += f->count[k] * 4;
    if (f->count[k] < bc_shape_numel(&g->params[k].shape)) f->gathered += f->count[k] * 4;
  }
  free(packed);
  return BC_OK;
}

void cli_floor_sample(const cli_floor *f, double *ms, double *cpu_ms) {
  volatile float sink = 0;
  for (int pf = 0; pf < 2; pf++) {
    double t0 = cli_now_ms(), c0 = cli_cpu_ms();
    for (int k = 0; k < f->g->nparams; k++)
      sink += bcrt_stream_sum((long)f->count[k], f->w->p[k], pf);
    sink += bcrt_stream_sum((long)f->nextra, f->extra, pf);
    if (f->npacked) sink += bcrt_stream_sum((long)f->npacked, f->w->p[f->w->n], pf);
    double t = cli_now_ms() - t0, c = cli_cpu_ms() - c0;
    if (!pf || t < *ms) {
      *ms = t;
      *cpu_ms = c;
    }
  }
  (void)sink;
}

// The same read split over a pool's threads (each array in nt contiguous
// parts): the floor that decoding on that many threads is measured
// against (how far the memory system scales with cores).
typedef struct {
  const cli_floor *f;
  int prefetch;
  float sink[BCRT_POOL_MAX_THREADS];
} floor_job;

static float part_sum(long n, const float *x, int t, int nt, int pf) {
  long a = n * t / nt, b = n * (t + 1) / nt;
  return bcrt_stream_sum(b - a, x + a, pf);
}

static void floor_task(void *arg, int t, int nt) {
  floor_job *j = arg;
  const cli_floor *f = j->f;
  float s = 0;
  for (int k = 0; k < f->g->nparams; k++) s += part_sum((long)f->count[k], f->w->p[k], t, nt, j->prefetch);
  s += part_sum((long)f->nextra, f->extra, t, nt, j->prefetch);
  if (f->npacked) s += part_sum((long)f->npacked, f->w->p[f->w->n], t, nt, j->prefetch);
  j->sink[t] = s;
}

double cli_floor_sample_pool(const cli_floor *f, bcrt_pool *pool) {
  int nt = bcrt_pool_nthreads(pool);
  double best = 0;
  for (int pf = 0; pf < 2; pf++) {
    floor_job j = {.f = f, .prefetch = pf};
    double t0 = cli_now_ms();
    bcrt_pool_run(pool, nt, floor_task, &j);
    double t = cli_now_ms() - t0;
    if (!pf || t < best) best = t;
  }
  return best;
}

void cli_floor_free(cli_floor *f) {
  free(f->extra);
  free(f->count);
  f->extra = NULL;
  f->count = NULL;
}

typedef struct {
  long context;
  long batch;                     // rows per step call
  bool rows;                      // through <model>_step_rows, row b at its own pos
  int steps;
  double prefill, decode, floor;  // floor: the weights' read floor
  double prefill_last;            // the same prefill through <model>_step_last_pool, -1: none
  double floor_kv;                // the weights and the cache rows a step reads
  double floor_threads;           // the weights' read split over the pool's threads
  double decode_cpu, floor_cpu, floor_kv_cpu;  // the same medians in thread CPU time
  int64_t weight_bytes, cache_bytes, read_bytes, packed_bytes;
  int64_t gathered_bytes;  // of weight_bytes: the embedding / position rows a step gathers
} decode_result;

// Prefill, then decode steps, each followed by one sample of each floor
// (fl[0]: the weights, fl[1]: the weights and the cache rows a step reads),
// so the ratios compare medians taken over the same stretch of time.
static int time_decode(bc_ctx *ctx, const bc_graph *g, const cli_step *s, const bc_weights *w,
                       cli_io *io, void *ws, int iters, const cli_floor fl[2],
                       decode_result *r) {
  int seq = bcY_step_dim(g);
  long C = r->context, tmax = (long)g->dims[seq].value;
  chunk_io c = {0}, one = {0};
  void *cache = aligned_alloc(64, (size_t)s->cache_bytes);
  int st = cache ? chunk_new(ctx, g, io, seq, C, &c) : bc_error(ctx, BC_ENOMEM, "error: out of memory");
  if (!st) st = chunk_new(ctx, g, io, seq, 1, &one);
  long *rt = st ? NULL : malloc((size_t)g->nrt * sizeof *rt);
  double *t = st ? NULL : malloc((size_t)(iters + 2) * 8 * sizeof *t);
  double *tc = t ? t + iters + 2 : NULL, *f = t ? t + 2 * (iters + 2) : NULL;
  if (!st && (!rt || !t)) st = bc_error(ctx, BC_ENOMEM, "error: out of memory");
  if (!st) {
    memcpy(rt, io->rt, (size_t)g->nrt * sizeof *rt);
    for (int i = 0; i < g->ninputs; i++)
      if (c.p[i] && c.sp[i].axis >= 0) {
        move_rows(io->p[i], C, c.p[i], 0, C, &c.sp[i], true);
        move_rows(io->p[i], C, one.p[i], 0, 1, &one.sp[i], true);  // the "new token": row 0
      }
  }
  // Prefill: pos 0, C rows (a reset each time); median of a few, or with
  // several batch rows (B x C positions a call) one timed call after the
  // warm-up, or the prefills would take most of the run.  Alternating with
  // it, the same prefill through the last-position entry (when the graph
  // has one): every row at pos 0, the outputs of position C-1 only.
  int np = r->batch > 1 ? 1 : iters < 5 ? iters : 5;
  bool last = cli_step_has_last(s);
  long *p0 = st || !last ? NULL : calloc((size_t)r->batch, sizeof *p0);
  if (!st && last && !p0) st = bc_error(ctx, BC_ENOMEM, "error: out of memory");
  double *tl = t ? t + 7 * (iters + 2) : NULL;  // after the floors' samples
  for (int k = 0; k < np + 1 && !st; k++) {
    rt[g->dims[seq].rt] = C;
    double t0 = cli_now_ms();
    int rc = cli_step_call(s, w, c.p, rt, 0, cache, ws);
    if (k) t[k - 1] = cli_now_ms() - t0;
    if (rc) st = step_status(ctx, rc, 0);
    if (st || !last) continue;
    t0 = cli_now_ms();
    rc = cli_step_last_call(s, w, c.p, rt, p0, cache, ws);
    if (k) tl[k - 1] = cli_now_ms() - t0;
    if (rc) st = step_status(ctx, rc, 0);
  }
  free(p0);
  if (!st) r->prefill = cli_median(t, np);
  r->prefill_last = !st && last ? cli_median(tl, np) : -1;
  // Decode: one position per call at pos = C, C+1, ... (wrapping to C at the bound);
  // per row (--batch): row b from C - b mod 4 (less than C), wrapping to its start.
  long pos = C, *prow = NULL, stag = C < 4 ? C : 4;
  if (!st && r->rows && !(prow = malloc((size_t)r->batch * sizeof *prow)))
    st = bc_error(ctx, BC_ENOMEM, "error: out of memory");
  for (long b = 0; prow && b < r->batch; b++) prow[b] = C - b % stag;
  for (int k = 0; k < iters + 2 && !st; k++) {
    rt[g->dims[seq].rt] = 1;
    double t0 = cli_now_ms(), c0 = cli_cpu_ms();
    int rc = prow ? s->jit_rows((const float *const *)w->p, one.p, rt, prow, cache,
                                (size_t)s->cache_bytes, ws, s->pool)
                  : cli_step_call(s, w, one.p, rt, pos, cache, ws);
    t[k] = cli_now_ms() - t0;
    tc[k] = cli_cpu_ms() - c0;
    if (rc) st = step_status(ctx, rc, prow ? prow[0] : pos);
    if (++pos >= tmax) pos = C;
    for (long b = 0; prow && b < r->batch; b++)
      if (++prow[b] >= tmax) prow[b] = C - b % stag;
    for (int j = 0; j < 2; j++) {
      double *fj = f + (size_t)(2 * j) * (size_t)(iters + 2);
      cli_floor_sample(&fl[j], &fj[k], &fj[k + iters + 2]);
    }
    f[(size_t)4 * (size_t)(iters + 2) + (size_t)k] =
        s->pool ? cli_floor_sample_pool(&fl[0], s->pool) : f[k];
  }
  if (!st) {  // two warm-ups left out
    size_t n = (size_t)iters + 2;
    r->decode = cli_median(t + 2, iters);
    r->decode_cpu = cli_median(tc + 2, iters);
    r->floor = cli_median(f + 2, iters);
    r->floor_cpu = cli_median(f + n + 2, iters);
    r->floor_kv = cli_median(f + 2 * n + 2, iters);
    r->floor_kv_cpu = cli_median(f + 3 * n + 2, iters);
    r->floor_threads = cli_median(f + 4 * n + 2, iters);
    r->weight_bytes = fl[0].bytes;
    r->gathered_bytes = fl[0].gathered;
    r->read_bytes = fl[1].bytes;
  }
  r->steps = iters;
  free(prow);
  free(t);
  free(rt);
  chunk_free(io, &c);
  chunk_free(io, &one);
  free(cache);
  return st;
}

static void print_decode(const cli_opts *o, const bc_graph *g, const decode_result *r) {
  double ratio = r->floor > 0 ? r->decode / r->floor : 0;
  double ratio_kv = r->floor_kv > 0 ? r->decode / r->floor_kv : 0;
  double ratio_kv_cpu = r->floor_kv_cpu > 0 ? r->decode_cpu / r->floor_kv_cpu : 0;
  double tps = r->decode > 0 ? (double)r->batch * 1000.0 / r->decode : 0;
  if (o->json) {
    printf("{\"graph\": ");
    cli_json_str(o->graph, stdout);
    printf(", \"model\": ");
    cli_json_str(g->model, stdout);
    printf(", \"context\": %ld, \"prefill_ms\": %.4f, ", r->context, r->prefill);
    if (r->prefill_last >= 0) printf("\"prefill_last_ms\": %.4f, ", r->prefill_last);
    else printf("\"prefill_last_ms\": null, ");
    printf("\"decode_ms_per_token\": %.4f, \"decode_steps\": %d, \"weight_bytes\": %lld, "
           "\"read_floor_ms\": %.4f, \"decode_over_floor\": %.3f, \"cache_bytes\": %lld, "
           "\"decode_cpu_ms_per_token\": %.4f, \"read_floor_cpu_ms\": %.4f, "
           "\"read_bytes\": %lld, \"read_floor_kv_ms\": %.4f, \"read_floor_kv_cpu_ms\": %.4f, "
           "\"decode_over_floor_kv\": %.3f, \"decode_over_floor_kv_cpu\": %.3f, "
           "\"packed_bytes\": %lld, \"gathered_bytes\": %lld, \"threads\": %d, "
           "\"batch\": %ld, \"tokens_per_s\": %.2f, \"read_floor_threads_ms\": %.4f, "
           "\"decode_over_floor_threads\": %.3f}\n",
           r->decode, r->steps,
           (long long)r->weight_bytes, r->floor, ratio, (long long)r->cache_bytes, r->decode_cpu,
           r->floor_cpu, (long long)r->read_bytes, r->floor_kv, r->floor_kv_cpu, ratio_kv,
           ratio_kv_cpu, (long long)r->packed_bytes, (long long)r->gathered_bytes, o->threads,
           r->batch, tps, r->floor_threads,
           r->floor_threads > 0 ? r->decode / r->floor_threads : 0);
    return;
  }
  printf("%s: model %s, decode at context %ld, %d thread%s\n", o->graph, g->model,
         r->context, o->threads, o->threads == 1 ? "" : "s");
  printf("prefill   %9.3f ms  (%ld positions, one step call, median)\n", r->prefill, r->context);
  if (r->prefill_last >= 0)
    printf("prefill1  %9.3f ms  (the same %ld positions, the outputs of the last only: "
           "%s_step_last, median)\n", r->prefill_last, r->context, g->model);
  else
    printf("prefill1  none  (%s has no last-position step entry: some output is not computed "
           "by row-wise nodes after the last attention and the layer loop)\n", g->model);
  if (r->rows)
    printf("decode    %9.3f ms per step of %ld rows, each at its own position  (median of %d "
           "steps)  %.1f tokens/s\n", r->decode, r->batch, r->steps, tps);
  else
    printf("decode    %9.3f ms per token  (median of %d single-position steps)  %.1f tokens/s\n",
           r->decode, r->steps, tps);
  printf("floor     %9.3f ms  (one read of the %.1f MB of weights a step reads, the LM head "
         "included; %.1f KB of it gathered embedding/position rows)  decode/floor %.2fx\n",
         r->floor, (double)r->weight_bytes / 1e6, (double)r->gathered_bytes / 1e3, ratio);
  if (o->threads > 1)
    printf("floor x%-2d %9.3f ms  (the same read split over the %d threads: %.2fx of one thread's)  "
           "decode/floor %.2fx\n", o->threads, r->floor_threads, o->threads,
           r->floor_threads > 0 ? r->floor / r->floor_threads : 0,
           r->floor_threads > 0 ? r->decode / r->floor_threads : 0);
  printf("floor+kv  %9.3f ms  (the weights and the %.1f MB of cache rows a step reads)  "
         "decode/floor %.2fx\n", r->floor_kv, (double)(r->read_bytes - r->weight_bytes) / 1e6,
         ratio_kv);
  printf("cpu time  decode %.3f ms, floor %.3f ms, floor+kv %.3f ms  (thread CPU medians)  "
         "%.2fx, %.2fx\n", r->decode_cpu, r->floor_cpu, r->floor_kv_cpu,
         r->floor_cpu > 0 ? r->decode_cpu / r->floor_cpu : 0, ratio_kv_cpu);
  printf("kv cache  %9.1f MB;  packed weights %.1f MB\n", (double)r->cache_bytes / 1e6,
         (double)r->packed_bytes / 1e6);
}

// The positions one single-token step computes: the batch (the first input
// with the stepped axis, at its bounds with that axis 1, over its row width
// unless the axis is last, as in token ids [B, T]).
static int64_t step_rows(const bc_graph *g, int seq) {
  for (int i = 0; i < g->ninputs; i++) {
    const bc_shape *s = &g->vals[g->inputs[i]].shape;
    int64_t n = 1;
    bool has = false;
    for (int a = 0; a < s->rank; a++) {
      has |= s->sym[a] == seq + 1;
      if (s->sym[a] != seq + 1 && a < s->rank - 1) n *= s->d[a];
    }
    if (has) return n;
  }
  return 1;
}

// --batch B: the graph again with its batch dim (the attentions' first
// axis) set to B.
static bc_graph *with_batch(bc_ctx *ctx, const cli_opts *o, bc_graph *g) {
  long B = o->tr.batch;
  const char *name = NULL;
  for (int i = 0; i < g->nnodes && !name; i++) {
    const bc_node *n = &g->nodes[i];
    if (n->op != BC_OP_ATTENTION || n->in[0] < 0) continue;
    const bc_shape *s = &g->vals[n->in[0]].shape;
    int d = s->rank == 3 ? s->sym[0] - 1 : -1;
    for (int k = 0; s->rank == 3 && d < 0 && k < g->ndims; k++)  // a fixed dim: B by name
      if (!strcmp(g->dims[k].name, "B") && g->dims[k].value == s->d[0]) d = k;
    if (d < 0 || d >= g->ndims) {
      bc_error(ctx, BC_EUSAGE, "blockc: error: --batch %ld: %s has no batch dim B to set (the "
               "attentions' first axis is %s; -D NAME=%ld sets another one)", B, o->graph,
               s->rank == 3 ? "a number" : "absent", B);
      return NULL;
    }
    name = g->dims[d].name;
  }
  if (!name) {
    bc_error(ctx, BC_EUSAGE, "blockc: error: --batch %ld: %s has no attention", B, o->graph);
    return NULL;
  }
  if (B > 4096) {
    bc_error(ctx, BC_EUSAGE, "blockc: error: --batch %ld: at most 4096 rows", B);
    return NULL;
  }
  for (int k = 0; k < o->ndefs; k++)
    if (!strcmp(o->defs[k].name, name) && o->defs[k].value != B) {
      bc_error(ctx, BC_EUSAGE, "blockc: error: --batch %ld and -D %s=%lld disagree (--batch sets "
               "%s)", B, name, (long long)o->defs[k].value, name);
      return NULL;
    }
  if (o->ndefs >= CLI_MAX_DEFS) {
    bc_error(ctx, BC_EUSAGE, "blockc: error: too many -D");
    return NULL;
  }
  bc_define defs[CLI_MAX_DEFS];
  memcpy(defs, o->defs, (size_t)o->ndefs * sizeof *defs);
  defs[o->ndefs] = (bc_define){name, B};
  bc_graph *gb = bcP_parse_file(ctx, o->graph, defs, o->ndefs + 1);
  if (gb && bcY_step_rows(gb, NULL) != B) {
    bc_error(ctx, BC_EUSAGE, "blockc: error: --batch %ld: -D %s=%ld does not make %s's "
             "attentions %ld rows", B, name, B, o->graph, B);
    return NULL;
  }
  return gb;
}

int cli_bench_decode(bc_ctx *ctx, const cli_opts *o) {
  bc_graph *g = bcP_parse_file(ctx, o->graph, o->defs, o->ndefs);
  if (!g) return BC_EINPUT;
  bool per_row = o->given[CLI_OPT_BATCH];
  if (per_row && !(g = with_batch(ctx, o, g))) return BC_EUSAGE;
  g->weight_type = o->weight_type;
  int st = bcO_run_until(g, NULL);
  if (st) return st;
  if ((st = bcY_step_check(ctx, g))) return st;
  int seq = bcY_step_dim(g);
  const bc_dim *T = &g->dims[seq];
  if (T->value < 2)  // no prompt length would leave a position to generate
    return bc_error(ctx, BC_EUSAGE, "blockc: error: bench --decode: %s runs up to %s = %lld; "
                    "decoding needs 2 positions at least (a prompt and one to generate); -D %s=N "
                    "raises the bound", o->graph, T->name, (long long)T->value, T->name);
  long C = o->context ? o->context : (long)T->value / 2;
  if (C < 1 || C >= T->value)
    return bc_error(ctx, BC_EUSAGE, "blockc: error: --context %ld: needs 1..%lld (the bound of %s "
                    "minus one position to generate; -D %s=N raises it)", C,
                    (long long)T->value - 1, T->name, T->name);
  cli_opts bo = *o;  // the prompt's arrays: C positions
  for (int k = 0; k < bo.nlens; k++)
    if (!strcmp(bo.lens[k].name, T->name))
      return bc_error(ctx, BC_EUSAGE, "blockc: error: --decode: give the prompt length with "
                      "--context, not --length %s", T->name);
  if (bo.nlens == CLI_MAX_DEFS) return bc_error(ctx, BC_EUSAGE, "blockc: error: too many --length");
  bo.lens[bo.nlens++] = (bc_define){T->name, C};
  bc_compiled c = {0};
  bc_weights w = {0};
  cli_io io = {0};
  void *ws = NULL;
  decode_result r = {.context = C, .rows = per_row};
  cli_floor fl[2] = {{0}, {0}};
  st = bcD_compile(ctx, g, NULL, &c);
  // The cache, and a second cache's worth that the read floor reads.
  bc_mem_use use = {.forward = true, .cache_bytes = c.cache_bytes + bcY_cache_read_bytes(g, C),
                    .what = "bench --decode"};
  if (!st) st = bcW_check_memory_use(ctx, g, &use, o->max_memory);
  if (!st) st = cli_weights(ctx, o, g, &w);
  int64_t rows = step_rows(g, seq);  // rows a gathered table gives one step
  if (!st) st = bcD_pack(ctx, &c, &w);
  if (!st && bcD_release_packed(g, &w) < 0) st = bc_error(ctx, BC_ENOMEM, "error: out of memory");
  if (!st) st = cli_floor_init(ctx, &fl[0], g, &w, 0, rows);
  if (!st) st = cli_floor_init(ctx, &fl[1], g, &w, bcY_cache_read_bytes(g, C), rows);
  if (!st) st = cli_io_bind(ctx, &bo, g, &io);
  if (!st && !(ws = cli_workspace(ctx, g))) st = BC_ENOMEM;
  if (!st) {
    cli_step s = {.jit = c.step, .cache_bytes = c.cache_bytes, .jit_pool = c.step_pool,
                  .jit_rows = c.step_rows_pool, .jit_last = c.step_last_pool};
    st = cli_pool(ctx, o->threads, &s.pool);
    r.cache_bytes = c.cache_bytes;
    r.batch = bcY_step_rows(g, io.rt);
    if (!st) st = time_decode(ctx, g, &s, &w, &io, ws, o->iters, fl, &r);
    r.packed_bytes = c.packed_floats * 4;
    bcrt_pool_free(s.pool);
  }
  if (!st) print_decode(o, g, &r);
  cli_floor_free(&fl[0]);
  cli_floor_free(&fl[1]);
  free(ws);
  cli_io_free(&io);
  bcW_free(&w);
  bcD_free(&c);
  return st;
}
