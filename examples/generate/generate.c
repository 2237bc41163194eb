/* generate.c -- text generation around any blockc AOT model with token ids
 * in and logits out, as a user would vendor it: what llama2.c's run.c is,
 * for any graph.  Five files beside it: the `blockc emit` pair <model>.{c,h},
 * runtime/blockc_rt.{c,h} and runtime/blockc_tok.{c,h} (the tokenizer):
 *
 *   cc -O3 -march=native -DBLOCKC_MODEL=tiny_lm -DBLOCKC_MODEL_UC=TINY_LM -I. \
 *      generate.c tiny_lm.c blockc_rt.c blockc_tok.c \
 *      -lopenblas -lpcre2-8 -lutf8proc -lm -o generate
 *   ./generate model.safetensors tokenizer.json "Once upon a time" -n 64 -t 0.8
 *
 * Options: -n N tokens (default 64), -t temperature (default 0: greedy),
 * -k top-k (0: off), -p top-p (1: off), -s seed (default 0), -x PREFIX (the
 * weights' name prefix, as --weights-prefix), -e (ignore extra tensors, as
 * --allow-extra).  The model: the input whose kind is BCRT_IO_TOKENS ([1,
 * T], T a run-time dim) and the output named `logits` (or the only one),
 * [1, T, V]; found in <model>_io_info, nothing here names them.  The prompt
 * goes through <model>_step_abi in one call (<model>_step_last_abi, the
 * last position's logits only, when the header says <MODEL>_STEP_LAST 1),
 * then one token per call with the KV cache; bcrt_sample picks each token exactly as `blockc generate`
 * does, so the same weights, prompt and seed give the same text.  It stops
 * after N tokens, at the tokenizer's end-of-sequence token, or when the
 * sequence fills T's bound. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blockc_rt.h"
#include "blockc_tok.h"

#ifndef BLOCKC_MODEL
#define BLOCKC_MODEL tiny_lm
#define BLOCKC_MODEL_UC TINY_LM
#endif
#define G_CAT_(a, b) a##b
#define G_CAT(a, b) G_CAT_(a, b)
#define G_STR_(x) #x
#define G_STR(x) G_STR_(x)
#define M(name) G_CAT(BLOCKC_MODEL, name)    /* M(_step_abi): tiny_lm_step_abi */
#define U(name) G_CAT(BLOCKC_MODEL_UC, name) /* U(_NRT): TINY_LM_NRT */
#include G_STR(BLOCKC_MODEL.h)

#define NIO (U(_NINPUTS) + U(_NOUTPUTS))
#define NRT (U(_NRT) ? U(_NRT) : 1)

/* The model, its io array and what a generation needs. */
typedef struct {
  M(_slots) w;
  void *storage, *ws, *cache, *io[NIO];
  float *packed;
  long rt[NRT];
  int tok, logits, trt; /* io index of the ids and the logits; T's index in rt */
  long vocab, bound;
  int32_t *ids;         /* the sequence: prompt, then generated */
} model;

/* The token-ids input, the logits output and T, from the io tables. */
static int find_io(model *m) {
  int i;
  m->tok = m->logits = -1;
  for (i = 0; i < NIO; i++) {
    const bcrt_io_info *io = &M(_io_info)[i];
    if (io->kind == BCRT_IO_TOKENS) m->tok = i;
    if (io->kind == BCRT_IO_INPUT) return fprintf(stderr, "input '%s' is float\n", io->name), 1;
    if (io->kind == BCRT_IO_OUTPUT && (U(_NOUTPUTS) == 1 || !strcmp(io->name, "logits")))
      m->logits = i;
  }
  if (m->tok < 0 || m->logits < 0 || M(_io_info)[m->tok].rt[1] < 0 ||
      M(_io_info)[m->tok].dims[0] != 1 || M(_io_info)[m->logits].rank != 3)
    return fprintf(stderr, "the model needs token ids [1, T] in and logits [1, T, V] out\n"), 1;
  m->trt = M(_io_info)[m->tok].rt[1];
  m->vocab = M(_io_info)[m->logits].dims[2];
  m->bound = M(_rt_info)[m->trt].bound;
  return 0;
}

/* Weights, packed copy, workspace, cache, and outputs for `rows` positions. */
static int load(model *m, const char *path, const char *prefix, unsigned flags, long rows) {
  char err[4096];
  int i, k, a;
  if (bcrt_st_load_ex(path, M(_params), U(_NPARAMS), m->w.slots, &m->storage, prefix, flags, err,
                      sizeof err) != BCRT_OK)
    return fprintf(stderr, "%s\n", err), 1;
  m->packed = (float *)bcrt_aligned_alloc(U(_PACKED_ALIGN), U(_PACKED_BYTES));
  m->ws = bcrt_aligned_alloc(U(_WORKSPACE_ALIGN), U(_WORKSPACE_BYTES));
  m->cache = bcrt_aligned_alloc(U(_CACHE_ALIGN), U(_CACHE_BYTES));
  m->ids = (int32_t *)malloc((size_t)m->bound * sizeof *m->ids);
  if (!m->packed || !m->ws || !m->cache || !m->ids) return fprintf(stderr, "out of memory\n"), 1;
  M(_pack)(&m->w.w, m->packed);
  m->w.w.packed = m->packed;
  for (k = 0; k < U(_NRT); k++) m->rt[k] = M(_rt_info)[k].bound;
  for (i = U(_NINPUTS); i < NIO; i++) {
    long n = 1;
    for (a = 0; a < M(_io_info)[i].rank; a++)
      n *= M(_io_info)[i].rt[a] == m->trt ? rows : M(_io_info)[i].dims[a];
    if (!(m->io[i] = malloc((size_t)n * sizeof(float)))) return fprintf(stderr, "out of memory\n"), 1;
  }
  return 0;
}

/* Positions pos..pos+t-1 (ids m->ids[pos..]); the last one's logits. */
static const float *step(model *m, long pos, long t) {
  int st;
  m->io[m->tok] = m->ids + pos;
  m->rt[m->trt] = t;
#if U(_STEP_LAST)
  if (t > 1) { /* the prompt: the final norm and the LM head for its last position only */
    long p[1];
    p[0] = pos;
    st = M(_step_last_abi)(&m->w.w, m->io, m->rt, p, m->cache, U(_CACHE_BYTES), m->ws);
    if (st != U(_OK)) return fprintf(stderr, "the model returned status %d at pos %ld\n", st, pos), NULL;
    return (const float *)m->io[m->logits];
  }
#endif
  st = M(_step_abi)(&m->w.w, m->io, m->rt, pos, m->cache, U(_CACHE_BYTES), m->ws);
  if (st != U(_OK)) return fprintf(stderr, "the model returned status %d at pos %ld\n", st, pos), NULL;
  return (const float *)m->io[m->logits] + (size_t)(t - 1) * (size_t)m->vocab;
}

static double now_ms(void) { return 1e3 * (double)clock() / CLOCKS_PER_SEC; }

int main(int argc, char **argv) {
  model m;
  long n = 64, np = 0, gen = 0, pos;
  double temp = 0, top_p = 1, t0, t1;
  int top_k = 0, i, st = 1, flags = 0;
  unsigned long long seed = 0;
  const char *prefix = NULL, *text;
  char err[512];
  int32_t *prompt = NULL, eos;
  size_t len, nids;
  const float *logits;
  blockc_tokenizer *tk = NULL;
  blockc_tokenizer_stream *out = NULL;
  bcrt_rng rng;
  void *scratch = NULL;
  memset(&m, 0, sizeof m);
  if (argc < 4) {
    fprintf(stderr, "usage: %s MODEL.safetensors TOKENIZER.json PROMPT [-n N] [-t TEMP] [-k K] "
                    "[-p P] [-s SEED] [-x PREFIX] [-e]\n", argv[0]);
    return 2;
  }
  for (i = 4; i < argc; i++) {
    char f = argv[i][0] == '-' && argv[i][1] && !argv[i][2] ? argv[i][1] : '?';
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (f == 'e') {
      flags = BCRT_ST_ALLOW_EXTRA;
      continue;
    }
    if (!v || !strchr("ntkpsx", f))
      return fprintf(stderr, "unknown option, or no value after it: '%s'\n", argv[i]), 2;
    i++;
    if (f == 'n') n = atol(v);
    else if (f == 't') temp = atof(v);
    else if (f == 'k') top_k = atoi(v);
    else if (f == 'p') top_p = atof(v);
    else if (f == 's') seed = strtoull(v, NULL, 10);
    else prefix = v;
  }
  if (find_io(&m)) return 1;
  if (!(tk = blockc_tokenizer_load(argv[2], err, sizeof err))) return fprintf(stderr, "%s\n", err), 1;
  if (blockc_tokenizer_encode(tk, argv[3], strlen(argv[3]), 1, &prompt, &nids, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    goto done;
  }
  np = (long)nids;
  if (np < 1 || np > m.bound) {
    fprintf(stderr, "the prompt has %ld tokens; the model holds 1..%ld\n", np, m.bound);
    goto done;
  }
  if (load(&m, argv[1], prefix, (unsigned)flags, np)) goto done;
  out = blockc_tokenizer_stream_new(tk, 1);
  scratch = malloc(BCRT_SAMPLE_SCRATCH_BYTES(m.vocab));
  if (!out || !scratch) goto done;
  if (blockc_tokenizer_stream_prime(out, prompt, nids)) goto done; /* text after the prompt */
  memcpy(m.ids, prompt, (size_t)np * sizeof *prompt);
  eos = blockc_tokenizer_eos_id(tk);
  bcrt_rng_seed(&rng, seed);
  t0 = now_ms();
  logits = step(&m, 0, np); /* the prompt in one call */
  t1 = now_ms();
  for (pos = np; logits && gen < n; pos++) {
    int id = bcrt_sample(logits, (int)m.vocab, temp, top_k, top_p, &rng, scratch);
    if (id < 0) { fprintf(stderr, "no token to sample (NaN logits or a bad option)\n"); goto done; }
    gen++;
    if (id == eos) break;
    if (blockc_tokenizer_stream_push(out, id, &text, &len)) goto done;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    if (pos == m.bound) break; /* the sequence is full */
    m.ids[pos] = id;
    if (gen < n) logits = step(&m, pos, 1);
  }
  if (!logits) goto done;
  if (!blockc_tokenizer_stream_finish(out, &text, &len)) fwrite(text, 1, len, stdout);
  printf("\n");
  fprintf(stderr, "prompt %ld tokens %.2f ms; %ld generated, %.3f ms per token\n", np, t1 - t0,
          gen, gen > 1 ? (now_ms() - t1) / (double)(gen - 1) : 0.0);
  st = 0;
done:
  for (i = U(_NINPUTS); i < NIO; i++) free(m.io[i]);
  bcrt_aligned_free(m.packed);
  bcrt_aligned_free(m.ws);
  bcrt_aligned_free(m.cache);
  bcrt_st_free(m.storage);
  blockc_tokenizer_stream_free(out);
  blockc_tokenizer_free(tk);
  free(m.ids);
  free(prompt);
  free(scratch);
  return st;
}
