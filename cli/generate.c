// generate.c — `blockc generate`: token ids (or text, with a tokenizer) in,
// generated tokens out.
//
// The graph needs one token-ids input ([1, T], T the stepped run-time dim)
// and a logits [1, T, V] output (named `logits`, or the only output).  The
// token loop is the library's (compiler/generate.c: the prompt in one call,
// then one token per call, bcrt_sample picking each); this file gives it a
// step per backend:
//   jit, aot  the step entry (`<model>_step`, the AOT module's _step_abi)
//             with a KV cache: t new positions per call;
//   interp    the reference interpreter has no cache: every call recomputes
//             the whole prefix (positions 0 .. pos+t-1) in double and takes
//             the last row, so the ids match jit/aot's unless two logits are
//             within float rounding of each other.
// stdout gets the tokens as they are picked (text through the tokenizer's
// stream decoder, or ids), or one JSON object at the end (--json); stderr
// gets llama.cpp-like timings and why generation ended.
#define _POSIX_C_SOURCE 200809L
#include "aot.h"
#include "blockc_tok.h"
#include "blockc_rt.h"  // bcrt_pool_free
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// One generation: the graph bound to a backend.
typedef struct gen_run {
  bc_ctx *ctx;
  const bc_graph *g;
  const bc_weights *w;     // for aot: with the module's packed copy (bcA_args)
  cli_backend backend;
  int tok, logits;         // io indices of the token ids and the logits
  long vocab, bound;       // V; the bound of the stepped dim T
  int trt;                 // T's index in rt
  cli_step s;              // jit / aot
  void *cache, *ws;
  void **io;
  long *rt;
  int32_t *hist;           // interp: the sequence so far (bound ids)
} gen_run;

// --- binding the graph ------------------------------------------------------------

static int bind_io(bc_ctx *ctx, const char *path, const bc_graph *g, gen_run *r) {
  r->tok = r->logits = -1;
  for (int i = 0; i < g->ninputs; i++) {
    const bc_value *v = &g->vals[g->inputs[i]];
    if (v->type == BC_VT_F32)
      return bc_error(ctx, BC_EINPUT, "%s: error: generate: input '%s' is float; generation "
                      "feeds token ids only (`input ids : tokens[1, T]`)", path, v->name);
    if (v->shape.rank != 2) continue;  // a lengths input: left out (full lengths)
    if (r->tok >= 0)
      return bc_error(ctx, BC_EINPUT, "%s: error: generate: two token-ids inputs ('%s' and "
                      "'%s')", path, g->vals[g->inputs[r->tok]].name, v->name);
    r->tok = i;
  }
  if (r->tok < 0)
    return bc_error(ctx, BC_EINPUT, "%s: error: generate: the graph has no token-ids input "
                    "(`input ids : tokens[1, T]`)", path);
  for (int i = 0; i < g->noutputs; i++)
    if (g->noutputs == 1 || !strcmp(g->output_names[i], "logits")) r->logits = g->ninputs + i;
  if (r->logits < 0)
    return bc_error(ctx, BC_EINPUT, "%s: error: generate: %d outputs and none is named 'logits'",
                    path, g->noutputs);
  int st = bcY_step_check(ctx, g);
  if (st) return st;
  int seq = bcY_step_dim(g);
  const bc_shape *ls = &g->vals[g->outputs[r->logits - g->ninputs]].shape;
  const bc_shape *ts = &g->vals[g->inputs[r->tok]].shape;
  const char *T = g->dims[seq].name;
  if (ts->sym[0] || ts->d[0] != 1 || ts->sym[1] != seq + 1 || ls->rank != 3 || ls->sym[0] ||
      ls->d[0] != 1 || ls->sym[1] != seq + 1 || ls->sym[2])
    return bc_error(ctx, BC_EINPUT, "%s: error: generate: needs token ids [1, %s] and logits "
                    "[1, %s, V] (batch 1; -D B=1 if B is a dim)", path, T, T);
  r->vocab = (long)ls->d[2];
  r->bound = (long)g->dims[seq].value;
  r->trt = g->dims[seq].rt;
  return BC_OK;
}

// Output arrays of `rows` positions, the run-time dims at their bounds.
static int alloc_io(bc_ctx *ctx, const bc_graph *g, gen_run *r, long rows) {
  r->io = calloc((size_t)(g->ninputs + g->noutputs), sizeof *r->io);
  r->rt = calloc((size_t)(g->nrt ? g->nrt : 1), sizeof *r->rt);
  if (!r->io || !r->rt) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  for (int k = 0; k < g->ndims; k++)
    if (g->dims[k].rt >= 0) r->rt[g->dims[k].rt] = (long)g->dims[k].value;
  r->rt[r->trt] = rows;
  for (int i = g->ninputs; i < g->ninputs + g->noutputs; i++) {
    bc_shape s = bcI_shape_at(g, &g->vals[g->outputs[i - g->ninputs]].shape, r->rt);
    if (!(r->io[i] = malloc((size_t)bc_shape_numel(&s) * sizeof(float) + 4)))
      return bc_error(ctx, BC_ENOMEM, "error: out of memory for output '%s'",
                      g->output_names[i - g->ninputs]);
  }
  return BC_OK;
}

static void free_run(const bc_graph *g, gen_run *r) {
  for (int i = g->ninputs; r->io && i < g->ninputs + g->noutputs; i++) free(r->io[i]);
  free(r->io);
  free(r->rt);
  free(r->cache);
  free(r->ws);
  free(r->hist);
}

// The step of compiler/generate.c's loop, on this run's backend.
static int gen_step(void *opaque, const int32_t *ids, long t, long pos, float *logits) {
  gen_run *r = opaque;
  long rows = t;
  int st;
  if (r->backend == CLI_BACKEND_INTERP) {
    memcpy(r->hist + pos, ids, (size_t)t * sizeof *ids);
    rows = pos + t;
    r->io[r->tok] = r->hist;
    r->rt[r->trt] = rows;
    st = bcR_run_io(r->ctx, r->g, r->w, r->io, r->rt);
  } else {
    r->io[r->tok] = (void *)ids;
    r->rt[r->trt] = t;
    st = bcR_check_io(r->ctx, r->g, r->io, r->rt);  // token ids in range, with a message
    // The prompt (t > 1): the last position's logits only, when the graph has that entry.
    bool last = t > 1 && cli_step_has_last(&r->s);
    long p1[1] = {pos};  // batch 1 (bind_io)
    int rc = st ? 0 : last ? cli_step_last_call(&r->s, r->w, r->io, r->rt, p1, r->cache, r->ws)
                           : cli_step_call(&r->s, r->w, r->io, r->rt, pos, r->cache, r->ws);
    if (last) rows = 1;
    if (rc)
      st = bc_error(r->ctx, BC_EINTERNAL, "internal error: the step entry returned status %d at "
                    "pos %ld", rc, pos);
  }
  if (!st)
    memcpy(logits, (const float *)r->io[r->logits] + (size_t)(rows - 1) * (size_t)r->vocab,
           (size_t)r->vocab * sizeof *logits);
  return st;
}

// --- the prompt -------------------------------------------------------------------

// "1,2,3" (commas, optional spaces) into ids.
static int parse_id_list(bc_ctx *ctx, const char *s, int32_t **ids, long *n) {
  long cap = 1;
  for (const char *p = s; *p; p++) cap += *p == ',';
  *ids = malloc((size_t)cap * sizeof **ids);
  if (!*ids) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  *n = 0;
  for (const char *p = s;;) {
    while (*p == ' ') p++;
    char *end;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (end == p || errno || v < 0 || v > INT32_MAX)
      return bc_error(ctx, BC_EUSAGE, "blockc: error: --prompt-ids %s: expects token ids "
                      "separated by commas (1,2,3) or a .npy file", s);
    (*ids)[(*n)++] = (int32_t)v;
    for (p = end; *p == ' '; p++) {}
    if (!*p) return BC_OK;
    if (*p++ != ',' || !*p)
      return bc_error(ctx, BC_EUSAGE, "blockc: error: --prompt-ids %s: expects token ids "
                      "separated by commas (1,2,3) or a .npy file", s);
  }
}

static bool ends_with(const char *s, const char *tail) {
  size_t a = strlen(s), b = strlen(tail);
  return a >= b && !strcmp(s + a - b, tail);
}

// The file the tokenizer comes from: --tokenizer, or the GGUF --weights.
static const char *tk_name(const cli_opts *o) { return o->tokenizer ? o->tokenizer : o->weights; }

static int read_prompt(bc_ctx *ctx, const cli_opts *o, const blockc_tokenizer *tk, int32_t **ids,
                       long *n) {
  if (o->prompt) {
    char err[512];
    size_t len;
    if (blockc_tokenizer_encode(tk, o->prompt, strlen(o->prompt), 1, ids, &len, err, sizeof err))
      return bc_error(ctx, BC_EINPUT, "%s: error: --prompt: %s", tk_name(o), err);
    *n = (long)len;
    return BC_OK;
  }
  if (!ends_with(o->prompt_ids, ".npy")) return parse_id_list(ctx, o->prompt_ids, ids, n);
  bc_shape s;
  int st = bcN_read_i32(ctx, o->prompt_ids, &s, ids);
  if (st) return st;
  if (s.rank > 2 || (s.rank == 2 && s.d[0] != 1)) {
    char buf[96];
    return bc_error(ctx, BC_EINPUT, "%s: error: --prompt-ids: shape %s; expects [n] or [1, n]",
                    o->prompt_ids, bc_shape_str(&s, buf, sizeof buf));
  }
  *n = (long)bc_shape_numel(&s);
  for (long i = 0; i < *n; i++)
    if ((*ids)[i] < 0)
      return bc_error(ctx, BC_EINPUT, "%s: error: --prompt-ids: id %ld is %d (negative)",
                      o->prompt_ids, i, (int)(*ids)[i]);
  return BC_OK;
}

// --- printing ---------------------------------------------------------------------

typedef struct gen_print {
  const cli_opts *o;
  const blockc_tokenizer *tk;
  blockc_tokenizer_stream *stream;
  long n;                     // tokens printed
  const int32_t *stop;
  int nstop;
  int st;                     // a stream error
} gen_print;

static bool stops(const gen_print *p, int32_t id) {
  for (int i = 0; i < p->nstop; i++)
    if (p->stop[i] == id) return true;
  return false;
}

static int print_token(void *opaque, int32_t id) {
  gen_print *p = opaque;
  if (p->o->json) return 0;
  if (!p->stream) {
    printf("%s%d", p->n++ ? " " : "", (int)id);
  } else if (!stops(p, id)) {
    const char *text;
    size_t len;
    if (blockc_tokenizer_stream_push(p->stream, id, &text, &len)) return p->st = BC_EINPUT;
    fwrite(text, 1, len, stdout);
  }
  fflush(stdout);
  return 0;
}

static void json_ids(const char *key, const int32_t *ids, long n) {
  printf("\"%s\": [", key);
  for (long i = 0; i < n; i++) printf("%s%d", i ? ", " : "", (int)ids[i]);
  printf("]");
}

// The shortest of %.15g / %.17g that reads back as v (0.8, not 0.80000000000000004).
static void json_real(double v) {
  char buf[64];
  snprintf(buf, sizeof buf, "%.15g", v);
  if (strtod(buf, NULL) != v) snprintf(buf, sizeof buf, "%.17g", v);
  fputs(buf, stdout);
}

static const char *end_name(bc_gen_end e) {
  static const char *const names[] = {"max_new_tokens", "stop", "bound", "callback"};
  return names[e];
}

typedef struct gen_times {
  double load_ms, compile_ms;
} gen_times;

static void print_json(const cli_opts *o, const bc_graph *g, const gen_run *r,
                       const bc_gen_opts *go, const int32_t *prompt, const int32_t *out,
                       const bc_gen_result *res, const char *text, const gen_times *tm) {
  printf("{\"graph\": ");
  cli_json_str(o->graph, stdout);
  printf(", \"model\": ");
  cli_json_str(g->model, stdout);
  printf(", \"backend\": \"%s\", \"vocab\": %ld, \"bound\": %ld, ", cli_backend_name(o->backend),
         r->vocab, r->bound);
  json_ids("prompt_ids", prompt, res->prompt);
  printf(", ");
  json_ids("generated_ids", out, res->n);
  printf(", \"text\": ");
  if (text) cli_json_str(text, stdout);
  else printf("null");
  printf(", \"end\": \"%s\", \"sampling\": {\"temperature\": ", end_name(res->end));
  json_real(go->temperature);
  printf(", \"top_k\": %d, \"top_p\": ", go->top_k);
  json_real(go->top_p);
  printf(", \"seed\": %llu, ", (unsigned long long)go->seed);
  json_ids("stop_ids", go->stop, go->nstop);
  printf("}, \"timings\": {\"load_ms\": %.3f, \"compile_ms\": %.3f, \"prompt_tokens\": %ld, "
         "\"prompt_ms\": %.3f, \"generated_tokens\": %ld, \"decode_steps\": %ld, "
         "\"decode_ms\": %.3f, \"decode_ms_per_token\": %.4f, \"sample_ms\": %.3f}}\n",
         tm->load_ms, tm->compile_ms, res->prompt, res->prefill_ms, res->n, res->steps,
         res->decode_ms, res->steps ? res->decode_ms / (double)res->steps : 0.0, res->sample_ms);
}

static void print_timings(const cli_opts *o, const bc_graph *g, const gen_run *r,
                          const bc_gen_result *res, const gen_times *tm) {
  const char *T = g->dims[bcY_step_dim(g)].name;
  fprintf(stderr, "blockc generate: %s backend, load %.2f ms, compile %.2f ms\n",
          cli_backend_name(o->backend), tm->load_ms, tm->compile_ms);
  fprintf(stderr, "blockc generate: prompt eval %10.2f ms / %5ld tokens (%8.2f ms per token, "
          "%9.2f tokens per second)\n", res->prefill_ms, res->prompt,
          res->prefill_ms / (double)res->prompt,
          res->prefill_ms > 0 ? 1e3 * (double)res->prompt / res->prefill_ms : 0.0);
  fprintf(stderr, "blockc generate:        eval %10.2f ms / %5ld runs   (%8.2f ms per token, "
          "%9.2f tokens per second)%s\n", res->decode_ms, res->steps,
          res->steps ? res->decode_ms / (double)res->steps : 0.0,
          res->decode_ms > 0 ? 1e3 * (double)res->steps / res->decode_ms : 0.0,
          r->backend == CLI_BACKEND_INTERP ? "  (interp: the prefix recomputed each token)" : "");
  fprintf(stderr, "blockc generate:    sampling %10.2f ms / %5ld tokens\n", res->sample_ms, res->n);
  if (res->end == BC_GEN_BOUND)
    fprintf(stderr, "blockc generate: stopped at the bound of %s: the model holds %ld positions "
            "(-D %s=N raises it); %ld of --max-new-tokens %ld generated\n", T, r->bound, T,
            res->n, o->max_new_tokens);
}

// --- the backends -----------------------------------------------------------------

// jit: compile, pack; aot: build (or find) the module.  Then the cache and
// the workspace.  *aw receives the weights the step is called with.
static int setup_backend(bc_ctx *ctx, const cli_opts *o, bc_graph *g, bc_weights *w,
                         gen_run *r, bc_compiled *c, bc_aot **a, bc_weights *aw) {
  int st = BC_OK;
  if (o->backend == CLI_BACKEND_JIT) {
    bc_emit_opts eo = {0};
    st = bcD_compile(ctx, g, &eo, c);
    r->s = (cli_step){.jit = c->step, .cache_bytes = c->cache_bytes, .jit_pool = c->step_pool,
                      .jit_last = c->step_last_pool};
  } else {
    bc_aot_pair p;
    bc_aot_fn fn = NULL;
    bool hit = false;
    const char *so = NULL;
    bc_aot_opts ao = {.cc = o->cc};
    st = bcA_generate(ctx, &(bc_aot_gen){o->graph, o->defs, o->ndefs, g, false, false, 0}, &p);
    if (!st) st = bcA_build(ctx, g, p.c_src, p.h_src, &ao, a, &fn, &hit, &so);
    if (!st)
      r->s = (cli_step){.aot = bcA_step(*a), .cache_bytes = bcY_cache_bytes(g),
                        .aot_pool = bcA_step_pool(*a), .aot_last = bcA_step_last(*a),
                        .aot_last_pool = bcA_step_last_pool(*a)};
  }
  if (st) return st;
  bc_mem_use use = {.forward = true, .cache_bytes = r->s.cache_bytes, .what = "generate"};
  st = bcW_check_memory_use(ctx, g, &use, o->max_memory);
  if (!st && o->backend == CLI_BACKEND_JIT) {
    st = bcD_pack(ctx, c, w);
    // a weight type: the float matrices are done with once packed
    if (!st && bcD_release_packed(g, w) < 0) st = bc_error(ctx, BC_ENOMEM, "error: out of memory");
    *aw = *w;
  } else if (!st) {
    *aw = (bc_weights){.n = w->n, .p = (float **)bcA_args(ctx, *a, g, w)};
    if (!aw->p) st = BC_ENOMEM;
  }
  if (!st && !(r->ws = cli_workspace(ctx, g))) st = BC_ENOMEM;
  if (!st && !(r->cache = aligned_alloc(64, (size_t)r->s.cache_bytes)))
    st = bc_error(ctx, BC_ENOMEM, "error: cannot allocate the %lld-byte KV cache",
                  (long long)r->s.cache_bytes);
  return st;
}

// --- the command ------------------------------------------------------------------

static int check_flags(bc_ctx *ctx, const cli_opts *o) {
  if (!o->given[CLI_OPT_MAX_NEW_TOKENS])
    return bc_error(ctx, BC_EUSAGE, "blockc: error: generate needs --max-new-tokens N");
  if (!o->prompt == !o->prompt_ids)
    return bc_error(ctx, BC_EUSAGE, "blockc: error: generate needs one prompt: --prompt TEXT "
                    "(with --tokenizer) or --prompt-ids IDS");
  if (!o->weights == !o->given[CLI_OPT_RANDOM_WEIGHTS])
    return bc_error(ctx, BC_EUSAGE, "blockc: error: generate needs --weights W.safetensors or "
                    "--random-weights SEED (one of them)");
  return BC_OK;
}

// The sampling options and the stop ids: --stop's, then the tokenizer's EOS.
static int gen_options(bc_ctx *ctx, const cli_opts *o, const blockc_tokenizer *tk, long vocab,
                       int32_t *stop, bc_gen_opts *go) {
  int n = 0;
  for (int i = 0; i < o->nstop; i++) stop[n++] = o->stop[i];
  int32_t eos = tk ? blockc_tokenizer_eos_id(tk) : -1;
  if (eos >= 0 && eos < vocab) stop[n++] = eos;
  *go = (bc_gen_opts){.max_new = o->max_new_tokens, .temperature = o->temperature,
                      .top_k = o->top_k, .top_p = o->given[CLI_OPT_TOP_P] ? o->top_p : 1.0,
                      .seed = o->seed, .stop = stop, .nstop = n};
  return bcX_check_opts(ctx, go, vocab);
}

// The tokens as text (for --json), all of them but stop ids.
static int decode_all(bc_ctx *ctx, const cli_opts *o, const blockc_tokenizer *tk,
                      const int32_t *ids, long n, const bc_gen_opts *go, char **text) {
  int32_t *keep = malloc((size_t)(n ? n : 1) * sizeof *keep);
  if (!keep) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  long m = 0;
  for (long i = 0; i < n; i++) {
    bool s = false;
    for (int k = 0; k < go->nstop; k++) s |= go->stop[k] == ids[i];
    if (!s) keep[m++] = ids[i];
  }
  char err[512];
  size_t len;
  int st = blockc_tokenizer_decode(tk, keep, (size_t)m, 1, text, &len, err, sizeof err)
               ? bc_error(ctx, BC_EINPUT, "%s: error: %s", tk_name(o), err)
               : BC_OK;
  free(keep);
  return st;
}

int cli_generate(bc_ctx *ctx, const cli_opts *o) {
  int st = check_flags(ctx, o);
  if (st) return st;
  double t0 = cli_now_ms();
  gen_times tm = {0};
  blockc_tokenizer *tk = NULL;
  char err[1024], desc[96];
  if (o->tokenizer) {
    if (!(tk = cli_tokenizer_load(o->tokenizer, err, sizeof err)))
      return bc_error(ctx, BC_EINPUT, "blockc: error: %s", err);
  } else if (o->weights && bcF_is_gguf(o->weights) && (o->prompt || !o->ids)) {
    // A GGUF file carries its tokenizer (tokenizer.ggml.*): used unless --tokenizer says otherwise.
    int none = 0;
    if ((tk = cli_gguf_tokenizer(o->weights, err, sizeof err, desc, sizeof desc, &none)))
      fprintf(stderr, "blockc: note: %s: its tokenizer (%s)\n", o->weights, desc);
    else if (!none)
      return bc_error(ctx, BC_EINPUT, "blockc: error: %s", err);
  }
  if (o->prompt && !tk)
    return bc_error(ctx, BC_EUSAGE, "blockc: error: --prompt needs --tokenizer (or --weights W.gguf that "
                    "carries one)");
  bc_graph *g = cli_load(ctx, o);
  gen_run r = {.ctx = ctx, .g = g, .backend = o->backend};
  bc_weights w = {0}, aw = {0};
  bc_compiled c = {0};
  bc_aot *a = NULL;
  int32_t *prompt = NULL, *out = NULL, stop[CLI_MAX_FILES + 1];
  long np = 0;
  bc_gen_opts go;
  char *text = NULL;
  st = g ? bind_io(ctx, o->graph, g, &r) : BC_EINPUT;
  if (!st) st = gen_options(ctx, o, tk, r.vocab, stop, &go);
  if (!st) st = read_prompt(ctx, o, tk, &prompt, &np);
  if (!st && np > r.bound)
    st = bc_error(ctx, BC_EINPUT, "blockc: error: the prompt has %ld tokens; %s holds %ld "
                  "positions (the bound of %s; -D %s=N raises it)", np, o->graph, r.bound,
                  g->dims[bcY_step_dim(g)].name, g->dims[bcY_step_dim(g)].name);
  cli_opts wo = *o;  // --random-weights SEED is the init's seed; --seed the sampler's
  wo.seed = o->random_weights;
  if (!st) st = cli_weights(ctx, &wo, g, &w);
  tm.load_ms = cli_now_ms() - t0;
  long rows = np + o->max_new_tokens < r.bound ? np + o->max_new_tokens : r.bound;
  if (!st) st = alloc_io(ctx, g, &r, o->backend == CLI_BACKEND_INTERP ? rows : (np ? np : 1));
  double t1 = cli_now_ms();
  if (!st && o->backend == CLI_BACKEND_INTERP) {
    r.w = &w;
    if (!(r.hist = malloc((size_t)r.bound * sizeof *r.hist)))
      st = bc_error(ctx, BC_ENOMEM, "error: out of memory");
  } else if (!st) {
    st = setup_backend(ctx, o, g, &w, &r, &c, &a, &aw);
    r.w = &aw;
  }
  tm.compile_ms = cli_now_ms() - t1;
  if (!st && !(out = malloc((size_t)(o->max_new_tokens ? o->max_new_tokens : 1) * sizeof *out)))
    st = bc_error(ctx, BC_ENOMEM, "error: out of memory");
  gen_print pr = {.o = o, .tk = tk, .stop = go.stop, .nstop = go.nstop};
  if (!st && tk && !o->ids && !(pr.stream = blockc_tokenizer_stream_new(tk, 1)))
    st = bc_error(ctx, BC_ENOMEM, "error: out of memory");
  // The prompt's tokens come first: the text printed is what follows them
  // (a Llama 2 continuation "\u2581world" keeps its space).
  if (!st && pr.stream && blockc_tokenizer_stream_prime(pr.stream, prompt, (size_t)np))
    st = bc_error(ctx, BC_EINPUT, "%s: error: %s", tk_name(o),
                  blockc_tokenizer_stream_error(pr.stream));
  bc_gen_result res = {0};
  if (!st) st = cli_pool(ctx, o->threads, &r.s.pool);
  if (!st) {
    st = bcX_generate(ctx, r.vocab, r.bound, prompt, np, &go, gen_step, &r, print_token, &pr,
                      out, o->max_new_tokens, &res);
    if (!st && pr.st) st = bc_error(ctx, BC_EINPUT, "%s: error: the stream decoder failed",
                                    tk_name(o));
    const char *tail;
    size_t len;
    if (pr.stream && !blockc_tokenizer_stream_finish(pr.stream, &tail, &len) && !o->json)
      fwrite(tail, 1, len, stdout);
    if (!o->json && (res.n || !st)) printf("\n");
    fflush(stdout);
  }
  if (!st && o->json && tk) st = decode_all(ctx, o, tk, out, res.n, &go, &text);
  if (!st && o->json) print_json(o, g, &r, &go, prompt, out, &res, text, &tm);
  if (!st) print_timings(o, g, &r, &res, &tm);
  if (!st && res.end == BC_GEN_STOP)
    fprintf(stderr, "blockc generate: stopped at token %d (a stop id)\n", (int)out[res.n - 1]);
  bcrt_pool_free(r.s.pool);
  r.s.pool = NULL;
  free(text);
  blockc_tokenizer_stream_free(pr.stream);
  free(out);
  free(prompt);
  if (g) free_run(g, &r);
  bcA_free(a);
  bcD_free(&c);
  bcW_free(&w);
  blockc_tokenizer_free(tk);
  return st;
}
