// generate.c — the token loop shared by `blockc generate` (cli/generate.c)
// and blockc_generate (api.c).
//
// The prompt goes through the step in ONE call (positions 0 .. n-1), then
// each picked token is fed back one position at a time.  The loop knows
// nothing of backends: the caller's step function runs the model (the step
// entry with its KV cache, or the interpreter recomputing the prefix) and
// gives back the last position's logits.  Tokens are picked by the
// runtime's bcrt_sample, so every backend and every vendored program draws
// the same tokens from the same logits and seed.
//
// It ends after max_new tokens, after a stop id (kept in the output), when
// the sequence fills the bound of the stepped dim (the last token picked
// from the logits of position bound-1 is kept; there is no room to feed
// it), or when the caller's token callback asks to.
#define _POSIX_C_SOURCE 200809L
#include "bc.h"
#include "blockc_rt.h"

#include <math.h>
#include <stdlib.h>
#include <time.h>

static double gen_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int bcX_check_opts(bc_ctx *ctx, const bc_gen_opts *o, long vocab) {
  if (o->max_new < 0)
    return bc_error(ctx, BC_EUSAGE, "blockc: error: max new tokens %ld is negative", o->max_new);
  if (!(o->temperature >= 0) || !isfinite(o->temperature))
    return bc_error(ctx, BC_EUSAGE, "blockc: error: temperature %g: expects a finite number >= 0 "
                    "(0: greedy)", o->temperature);
  if (o->top_k < 0)
    return bc_error(ctx, BC_EUSAGE, "blockc: error: top-k %d is negative (0: off)", o->top_k);
  if (!(o->top_p > 0 && o->top_p <= 1))
    return bc_error(ctx, BC_EUSAGE, "blockc: error: top-p %g is outside (0, 1] (1: off)", o->top_p);
  if (vocab < 1 || vocab > INT32_MAX)
    return bc_error(ctx, BC_EUSAGE, "blockc: error: a vocabulary of %ld tokens", vocab);
  for (int i = 0; i < o->nstop; i++)
    if (o->stop[i] < 0 || o->stop[i] >= vocab)
      return bc_error(ctx, BC_EUSAGE, "blockc: error: stop id %d is outside 0..%ld (the "
                      "vocabulary)", (int)o->stop[i], vocab - 1);
  return BC_OK;
}

static bool is_stop(const bc_gen_opts *o, int32_t id) {
  for (int i = 0; i < o->nstop; i++)
    if (o->stop[i] == id) return true;
  return false;
}

// Prompt ids within the vocabulary and the prompt within the bound.
static int check_prompt(bc_ctx *ctx, long vocab, long bound, const int32_t *prompt, long n) {
  if (n < 1 || !prompt)
    return bc_error(ctx, BC_EUSAGE, "blockc: error: the prompt is empty (generation needs at "
                    "least one token to start from)");
  if (n > bound)
    return bc_error(ctx, BC_EINPUT, "blockc: error: the prompt has %ld tokens; the model holds "
                    "%ld positions (the bound of its sequence dim; -D raises it)", n, bound);
  for (long i = 0; i < n; i++)
    if (prompt[i] < 0 || prompt[i] >= vocab)
      return bc_error(ctx, BC_EINPUT, "blockc: error: prompt token %ld: id %d is outside 0..%ld",
                      i, (int)prompt[i], vocab - 1);
  return BC_OK;
}

// One token from the logits, or an error naming the position.
static int pick(bc_ctx *ctx, const float *logits, long vocab, const bc_gen_opts *o, bcrt_rng *rng,
                void *scratch, long pos, int32_t *id) {
  int v = bcrt_sample(logits, (int)vocab, o->temperature, o->top_k, o->top_p, rng, scratch);
  if (v < 0)
    return bc_error(ctx, BC_EINPUT, "blockc: error: the logits of position %ld are all NaN or "
                    "-inf: no token can be picked", pos);
  *id = v;
  return BC_OK;
}

int bcX_generate(bc_ctx *ctx, long vocab, long bound, const int32_t *prompt, long nprompt,
                 const bc_gen_opts *o, bc_gen_step_fn step, void *step_opaque,
                 bc_gen_token_fn on_token, void *token_opaque, int32_t *out, long cap,
                 bc_gen_result *r) {
  *r = (bc_gen_result){.prompt = nprompt};
  int st = bcX_check_opts(ctx, o, vocab);
  if (!st) st = check_prompt(ctx, vocab, bound, prompt, nprompt);
  if (!st && (cap < o->max_new || (o->max_new && !out)))
    st = bc_error(ctx, BC_EUSAGE, "blockc: error: the output holds %ld ids; %ld asked for", cap,
                  o->max_new);
  if (st) return st;
  float *logits = malloc((size_t)vocab * sizeof *logits);
  void *scratch = malloc(BCRT_SAMPLE_SCRATCH_BYTES(vocab));
  if (!logits || !scratch) {
    free(logits);
    free(scratch);
    return bc_error(ctx, BC_ENOMEM, "error: out of memory for the logits");
  }
  bcrt_rng rng;
  bcrt_rng_seed(&rng, o->seed);
  double t0 = gen_now_ms();
  if (o->max_new > 0) st = step(step_opaque, prompt, nprompt, 0, logits);
  r->prefill_ms = gen_now_ms() - t0;
  long pos = nprompt;  // the position the next token will take
  while (!st && r->n < o->max_new) {
    double t1 = gen_now_ms();
    int32_t id;
    st = pick(ctx, logits, vocab, o, &rng, scratch, pos - 1, &id);
    r->sample_ms += gen_now_ms() - t1;
    if (st) break;
    out[r->n++] = id;
    if (on_token && on_token(token_opaque, id)) {
      r->end = BC_GEN_CALLBACK;
      break;
    }
    if (is_stop(o, id)) {
      r->end = BC_GEN_STOP;
      break;
    }
    if (r->n == o->max_new) break;
    if (pos >= bound) {
      r->end = BC_GEN_BOUND;
      break;
    }
    double t2 = gen_now_ms();
    st = step(step_opaque, &id, 1, pos, logits);
    r->decode_ms += gen_now_ms() - t2;
    r->steps++;
    pos++;
  }
  free(logits);
  free(scratch);
  return st;
}
