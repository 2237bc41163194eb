/* blockc.h — embed blockc: load a graph, specialise it, JIT it, run it.
 *
 * A blockc_model owns everything: the parsed graph, its weights and the
 * compiled code. Errors go to a callback (stderr by default) as complete
 * "file:line:col: error: ..." messages; functions return BLOCKC_OK (0) or a
 * status code. Once compiled, blockc_run and blockc_forward are reentrant:
 * call them from any number of threads, each with its own workspace (their
 * messages are serialised through the callback).
 *
 *   blockc_model *m = blockc_new();
 *   blockc_set_dim(m, "T", 64);           (a fixed dim, or a run-time dim's bound)
 *   if (blockc_load_graph(m, "graphs/residual.blk") ||
 *       blockc_load_weights(m, "w.safetensors") || blockc_compile(m)) ...
 *   size_t n = blockc_workspace_size(m);
 *   void *ws = aligned_alloc(64, n);
 *   blockc_forward_ws(m, x, y, ws, n);     (one input, one output, fixed dims)
 *   blockc_run(m, inputs, outputs, dims, ws, n);   (any graph)
 *   blockc_step(m, inputs, outputs, dims, pos, cache, cn, ws, n);  (decoding, KV cache)
 *   blockc_step_rows(m, inputs, outputs, dims, pos_b, cache, cn, ws, n); (a pos per row)
 *   blockc_step_last(m, inputs, outputs, dims, pos_b, cache, cn, ws, n); (prefill: the
 *       outputs of each row's last new position only, [B, 1, ...])
 *   blockc_generate(m, prompt, n, &opts, out, cap, &n_out, NULL, NULL);  (token ids)
 *   blockc_delete(m);
 *
 * Misuse (NULL arguments, calls in the wrong order, a workspace that is too
 * small or misaligned, outputs overlapping inputs) is BLOCKC_EUSAGE with a
 * message, never a crash; with a NULL model the message goes to stderr.
 * blockc_delete(NULL) does nothing; deleting a model twice, or using it
 * after blockc_delete, is undefined behaviour (as free()).
 */
#ifndef BLOCKC_H
#define BLOCKC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
  BLOCKC_OK = 0,
  BLOCKC_EINPUT = 1,    /* bad graph, weights, arrays or run-time values (message reported) */
  BLOCKC_EUSAGE = 2,    /* API misuse: wrong order of calls, bad argument */
  BLOCKC_EIO = 3,       /* the OS refused a file operation */
  BLOCKC_ENOMEM = 4,    /* out of memory, or a limit was hit */
  BLOCKC_EINTERNAL = 5  /* a blockc bug (e.g. tcc rejected generated code) */
};

typedef struct blockc_model blockc_model;
typedef void (*blockc_error_fn)(void *opaque, const char *msg);

/* Create an empty model; NULL if out of memory. */
blockc_model *blockc_new(void);
/* Free the model, its weights and its compiled code.  NULL is a no-op. */
void blockc_delete(blockc_model *m);
/* Send error messages to fn(opaque, msg) instead of stderr. */
void blockc_set_error_func(blockc_model *m, void *opaque, blockc_error_fn fn);
/* Override a dim of the graph; for a run-time dim (`dim T <= N`) this sets
 * the bound.  Call before loading. */
int blockc_set_dim(blockc_model *m, const char *name, long long value);
/* Parse, unroll and shape-check a graph file. */
int blockc_load_graph(blockc_model *m, const char *path);
/* The same from a string; name is used in error messages. */
int blockc_load_graph_string(blockc_model *m, const char *name, const char *text);
/* Load every parameter by name from a safetensors file (checked): each
 * parameter's tensor must be there with its shape (F32, F16 or BF16,
 * finite), and, unless allowed, no tensor the graph does not use (a
 * byte-identical copy of a used one, such as a tied lm_head.weight saved
 * beside transformer.wte.weight, is not an extra). */
int blockc_load_weights(blockc_model *m, const char *path);
/* How blockc_load_weights matches a checkpoint to the graph, as `blockc
 * run`'s --weights-prefix and --allow-extra do; call before it (it applies
 * to every later load).  prefix P (NULL or "": none): parameter NAME is read
 * from tensor P NAME, or, when NAME starts with P, from NAME without it
 * (so "transformer." loads both a GPT2LMHeadModel file into a graph of bare
 * GPT2Model names and a bare GPT2Model file into graphs/gpt2_lm.blk).
 * allow_extra 1: tensors no parameter reads are ignored; 0: refused.
 * BLOCKC_EUSAGE for allow_extra other than 0 / 1 or a prefix over 4096
 * bytes (the options are then unchanged). */
int blockc_set_weights_options(blockc_model *m, const char *prefix, int allow_extra);
/* Deterministic random weights (xavier-uniform, zero biases, LN weight 1). */
int blockc_init_weights(blockc_model *m, unsigned long long seed);
/* Run the passes, plan memory, emit C and compile it with libtcc.  Once
 * both the code and the weights exist (in either order, and again when the
 * weights are reloaded), the model keeps a packed copy of the matrices that
 * products with few rows read (up to BCRT_SMALL_M = 64 rows: decoding, small
 * batches), streamed once per call by the small-M kernel; it costs about
 * the weights' size again in memory. */
int blockc_compile(blockc_model *m);
/* The element type of the matrices of Linear / Attention / FFN (an LM head
 * too): "f32" (the default), "bf16", "f16" (IEEE half; a weight past
 * 65504 that rounds to Inf is an error), "q8_0" or "q4_0" (llama.cpp's blocks of
 * 32 weights along the in dim with one scale each), `--weight-dtype` of the
 * CLI.  Call after loading the graph and before blockc_compile.  With a type
 * other than f32 the packed copy holds the matrices in that type (1.125 bytes
 * a weight for q8_0, 0.625 for q4_0, 2 for bf16 and f16) and every product reads it,
 * whatever its row count; the model's float weights are rounded to the
 * values it holds (so blockc_run on any path computes with the same
 * weights); norms, biases and embedding lookups stay float.  q8_0 and q4_0
 * products also quantize their inputs per block of 32 (8-bit codes, as
 * llama.cpp's do: integer dot products), the interpreter too.  Inference
 * only: blockc_compile_backward refuses a model with one.  BLOCKC_EUSAGE for
 * another name or the wrong order of calls. */
int blockc_set_weight_dtype(blockc_model *m, const char *dtype);
/* Threads for blockc_run, blockc_forward, blockc_step and blockc_generate:
 * n = 1..256 (1, the default: the calling thread only).  n > 1 starts a
 * pool of n - 1 worker threads, kept until the next call or blockc_delete,
 * over which every matrix product of the compiled code splits its output
 * columns; outputs are bit-identical for every n.  OpenBLAS is set to one
 * thread (a process-wide setting), so the two never oversubscribe the
 * cores; the backward and the training step do not use the pool yet.
 * Concurrent runs of one model share its pool: their products take turns.
 * Call it when no run of the model is in flight.  BLOCKC_EUSAGE for n out
 * of range, BLOCKC_ENOMEM when the threads cannot be started (the old pool
 * is kept).  blockc_threads: the current count. */
int blockc_set_threads(blockc_model *m, int n);
int blockc_threads(const blockc_model *m);
/* The generated C source (after blockc_compile), NUL-terminated. */
const char *blockc_c_source(const blockc_model *m);
/* Bytes of workspace one call needs (64-byte aligned; sized for the
 * bounds of the run-time dims).  0 before blockc_compile. */
size_t blockc_workspace_size(const blockc_model *m);

/* --- The graph's interface (after loading; -1 / NULL / 0 before) ---------
 * Inputs and outputs are numbered in declaration order.  A shape entry that
 * is a run-time dim holds its bound, and blockc_*_shape puts the dim's name
 * in dim_names[k] (NULL for fixed entries; dim_names may be NULL). */
int blockc_num_inputs(const blockc_model *m);
int blockc_num_outputs(const blockc_model *m);
const char *blockc_input_name(const blockc_model *m, int i);
const char *blockc_output_name(const blockc_model *m, int i);
/* 1 if input i is a lengths input (int32, one valid length per batch row,
 * each 1..its sequence axis), 0 if float32, -1 if there is no input i. */
int blockc_input_is_lengths(const blockc_model *m, int i);
/* 1 if input i is a tokens input (`input ids : tokens[B, T]`: int32 token
 * ids, C order, each 0..V-1 with V the vocab of the Embedding reading it;
 * CrossEntropy targets: each 0..V-1, V the logits' width, or ignore_index),
 * 0 if not, -1 if there is no input i.  blockc_run, blockc_step and
 * blockc_backward take a const int32_t * for it (never NULL); an id out of
 * range is BLOCKC_EINPUT with a message naming it ("input ids: row 0,
 * position 5: token id 50300 is outside 0..50256"), nothing guaranteed
 * written. */
int blockc_input_is_tokens(const blockc_model *m, int i);
/* Rank (<= 4) and shape[0..rank) of input / output i; -1 if none. */
int blockc_input_shape(const blockc_model *m, int i, long long shape[4], const char *dim_names[4]);
int blockc_output_shape(const blockc_model *m, int i, long long shape[4], const char *dim_names[4]);
/* Run-time dims (`dim T <= N`): how many, and each one's name and bound,
 * in the order blockc_run's dims[] takes them. */
int blockc_num_dims(const blockc_model *m);
const char *blockc_dim_name(const blockc_model *m, int k);
long long blockc_dim_bound(const blockc_model *m, int k);
/* Number of floats in the first input / output (at the bounds). */
size_t blockc_input_size(const blockc_model *m);
size_t blockc_output_size(const blockc_model *m);

/* --- Running ------------------------------------------------------------
 * blockc_run computes every output: inputs[i] points at input i (const
 * float *, or const int32_t * for a lengths input, where NULL means full
 * lengths, or for a tokens input), outputs[i] at output i (float *), all C order at the ACTUAL
 * sizes (the run-time dims replaced by dims[k]); dims[k] is the value of
 * run-time dim k, 1..its bound (dims may be NULL when there are none).
 * workspace: workspace_size >= blockc_workspace_size(m) bytes, 64-byte
 * aligned.  No output may overlap an input or another output.  Returns
 * BLOCKC_OK; BLOCKC_EUSAGE for misuse; BLOCKC_EINPUT for a dim, a
 * length or a token id out of range (nothing is guaranteed written then). */
int blockc_run(const blockc_model *m, const void *const *inputs, void *const *outputs,
               const long long *dims, void *workspace, size_t workspace_size);
/* y = model(x) for a graph with one float input, one output and fixed dims.
 * blockc_forward_ws checks the workspace size; blockc_forward trusts that
 * the workspace has blockc_workspace_size(m) bytes.  y must not overlap x. */
int blockc_forward_ws(const blockc_model *m, const float *x, float *y, void *workspace,
                      size_t workspace_size);
int blockc_forward(const blockc_model *m, const float *x, float *y, void *workspace);

/* --- Stepping: token-by-token decoding with a KV cache -------------------
 * For graphs whose self-attentions are all causal over one run-time dim T
 * (the stepped sequence; cross-attention over a memory is allowed).
 * blockc_cache_size: bytes of KV cache one sequence (or batch) needs, to be
 * 64-byte aligned and owned by the caller; 0 before blockc_compile or when
 * the graph cannot be stepped (blockc_step then reports why, naming the
 * node by file:line:col).
 * blockc_step computes the outputs of the positions pos .. pos+t-1 only,
 * where t = dims[k] of T (1..the bound): inputs and outputs as for
 * blockc_run but holding just those t rows; the keys and values of the
 * earlier positions come from cache (cache_size >= blockc_cache_size(m)
 * bytes), and this call's are appended.  Start a sequence (or reset) with
 * pos = 0, no clearing needed; then pass pos = the positions already
 * stepped.  pos may also rewind (0 < pos < the positions stepped): that
 * truncates the sequence to its first pos positions and continues from
 * there; it may not skip ahead.  The cache records which model filled it,
 * how many positions it holds and the run-time dims the sequence keeps.  A
 * cross-attention's memory is projected at pos = 0 and kept in the cache:
 * give the same memory (and its dims, as the batch's) on every call of the
 * sequence.  Lengths inputs must be NULL (no padding).  A tokens input
 * holds the new positions' ids only ([B, t]; an embedding does not depend
 * on the position).
 * The outputs equal blockc_run's rows for the same positions up to float
 * summation order (about 1e-5 relative).  Returns BLOCKC_OK; BLOCKC_EINPUT
 * when pos + t exceeds the bound of T (the cache is full: nothing written)
 * or a dim is out of range; BLOCKC_EUSAGE for misuse, with nothing written
 * (pos < 0; a NULL, misaligned or too small cache or workspace; pos > 0
 * on a cache that does not hold this model's sequence (another model's, or
 * one never started), pos past the positions the cache holds, a kept dim
 * such as the memory's S that differs from the sequence's start; a lengths
 * input given; a graph that cannot be stepped). */
size_t blockc_cache_size(const blockc_model *m);
int blockc_step(const blockc_model *m, const void *const *inputs, void *const *outputs,
                const long long *dims, long long pos, void *cache, size_t cache_size,
                void *workspace, size_t workspace_size);

/* blockc_step_rows: blockc_step with a position per batch row (batched
 * decoding of sequences of different lengths, issue 26).  pos holds B
 * entries, B the batch dim of the model's attentions (dims[k] when it is
 * a run-time dim, else its value): row b's t new positions are pos[b] ..
 * pos[b]+t-1 (rotary and learned positions from pos[b], its keys and values
 * appended at its cache rows pos[b]..), and its queries see its cache rows
 * 0 .. pos[b]+i.  The cache records the positions each row holds: a row
 * starts (or restarts) its sequence with pos[b] = 0 while the other rows go
 * on, and may rewind its own, never skip ahead.  blockc_step(..., pos, ...)
 * is blockc_step_rows with every pos[b] = pos, and one cache serves both.
 * A cross-attention's memory is projected into the cache for the rows
 * that start (pos[b] == 0) only: the memory input must hold their memories
 * then; the rows going on keep theirs from the cache (their part of the
 * input is not read).
 * Each row's outputs equal those of stepping that row alone to float
 * summation order.  Returns as blockc_step, with the row named: BLOCKC_EINPUT
 * when some pos[b] + t exceeds the bound of T (nothing written),
 * BLOCKC_EUSAGE when pos is NULL, some pos[b] < 0 or skips ahead of the
 * positions its row holds (nothing written). */
int blockc_step_rows(const blockc_model *m, const void *const *inputs, void *const *outputs,
                     const long long *dims, const long long *pos, void *cache,
                     size_t cache_size, void *workspace, size_t workspace_size);

/* blockc_step_last: blockc_step_rows (same arguments, a pos per batch row)
 * for a prefill that needs each row's last new position only.  The layers
 * and the cache are computed exactly as blockc_step_rows does; the
 * row-wise tail after the last attention (the final norm and the LM head,
 * say: every node after it an Add, norm, Linear, FFN, Mul, activation or
 * soft-cap) runs for row b's position pos[b]+t-1 alone, and each output is
 * written compactly as [B, 1, ...] (row b at the start of row b: outputs
 * need B rows, not B * t).  The values equal blockc_step_rows' last rows to
 * float summation order (about 1e-6 relative: one row takes the small-M
 * kernels, t rows the GEMM).  Every error is blockc_step_rows'; a model
 * without such a tail (some output not computed by row-wise nodes after
 * the last attention and the layer loop: an attention's output itself, or
 * a Post-LN stack whose last norm is in its layer loop) has no such entry: blockc_has_step_last(m) is 0 and blockc_step_last returns
 * BLOCKC_EUSAGE, nothing written (use blockc_step_rows and read row t-1).
 * blockc_generate uses it for the prompt when the model has it. */
int blockc_step_last(const blockc_model *m, const void *const *inputs, void *const *outputs,
                     const long long *dims, const long long *pos, void *cache,
                     size_t cache_size, void *workspace, size_t workspace_size);
/* 1 when m is compiled and has blockc_step_last's entry, else 0. */
int blockc_has_step_last(const blockc_model *m);

/* --- Generation: token ids in, token ids out ------------------------------
 * blockc_generate runs the prompt through the step entry in one call
 * (positions 0 .. n_prompt-1: n_prompt must not exceed the bound of the
 * stepped dim), then feeds back each picked token one position at a time
 * with the KV cache, up to opts->max_new_tokens tokens.  For compiled
 * models with one token-ids input (`input ids : tokens[B, T]`, B == 1),
 * any lengths inputs (left out), no float inputs, and an output named
 * `logits` (or a single output) of shape [1, T, V].  Tokens are picked by
 * the runtime's bcrt_sample (blockc_rt.h documents it exactly): temperature
 * 0 (a zeroed options struct) is greedy argmax, lowest id on ties;
 * otherwise logits / temperature, then top_k (0: off), then top_p (0 or 1:
 * off), one draw from the generator seeded with seed.  The same logits and
 * seed give the same ids as `blockc generate` and examples/generate/.
 * Generation ends after max_new_tokens ids, after an id in stop_ids (it is
 * written to out_ids too), when the sequence reaches the bound (the id
 * picked at the last position is kept), or when on_token (may be NULL),
 * called with each id as it is picked, returns non-zero.  out_ids:
 * out_cap >= max_new_tokens ids; *n_out receives the count (also on
 * failure: the ids written so far).  It allocates its own cache, workspace
 * and logits.  Returns BLOCKC_OK; BLOCKC_EUSAGE for misuse or a graph it
 * cannot generate with (the message says why), BLOCKC_EINPUT for a prompt
 * id outside 0..V-1, a prompt past the bound, or logits that are all NaN
 * or -inf. */
typedef struct blockc_generate_options {
  long long max_new_tokens;
  double temperature;        /* 0: greedy */
  int top_k;                 /* 0: off */
  double top_p;              /* 0 or 1: off */
  unsigned long long seed;
  const int *stop_ids;       /* NULL or n_stop ids */
  int n_stop;
} blockc_generate_options;
typedef int (*blockc_token_fn)(void *opaque, int id);
int blockc_generate(const blockc_model *m, const int *prompt_ids, size_t n_prompt,
                    const blockc_generate_options *opts, int *out_ids, size_t out_cap,
                    size_t *n_out, blockc_token_fn on_token, void *opaque);

/* --- The training step: gradients ------------------------------
 * blockc_compile_backward compiles the emitted backward (after loading a
 * graph; every op the language has is covered).  blockc_backward runs the forward (outputs
 * receive y) and then the backward of loss = sum over outputs k of
 * sum(y_k * dy[k]): dy[k] is an array of output k's actual size (NULL: not
 * in the loss); dparams[p] receives d loss / d parameter p (blockc_param_size
 * floats each, in the order of blockc_param_name, overwritten); dinputs is
 * NULL or one pointer per input (NULL entries and lengths inputs skipped)
 * receiving d loss / d input.  inputs, outputs, dims as blockc_run; the
 * workspace has blockc_backward_workspace_size(m) bytes (its own: the kept
 * activations and the gradient buffers), 64-byte aligned.  Float32
 * throughout: agrees with the double reference (`blockc grad --backend
 * interp`) to ~1e-6 of each tensor's largest gradient.  Reentrant like
 * blockc_run. */
int blockc_compile_backward(blockc_model *m);
size_t blockc_backward_workspace_size(const blockc_model *m);
int blockc_num_params(const blockc_model *m);
const char *blockc_param_name(const blockc_model *m, int i);
size_t blockc_param_size(const blockc_model *m, int i);
int blockc_backward(const blockc_model *m, const void *const *inputs, void *const *outputs,
                    const float *const *dy, float *const *dparams, float *const *dinputs,
                    const long long *dims, void *workspace, size_t workspace_size);

/* Dropout in the training step.  blockc_backward never drops (inference
 * behaviour, as blockc_run); blockc_backward_ex with rng->training != 0
 * drops every Dropout node and Attention/FFN dropout= with the masks of
 * (rng->seed, rng->step): element e of node n is kept iff u >= p, with u in
 * [0, 1) a pure function of (seed, step, n, e) (runtime/src/rng.c documents
 * it), and kept values are scaled by 1/(1-p).  The same (seed, step) gives
 * the same masks bit for bit on every backend; pass the optimizer step as
 * step so that every step draws new masks.  rng NULL or training 0: as
 * blockc_backward. */
typedef struct blockc_train_rng {
  unsigned long long seed, step;
  int training;
} blockc_train_rng;
int blockc_backward_ex(const blockc_model *m, const void *const *inputs, void *const *outputs,
                       const float *const *dy, float *const *dparams, float *const *dinputs,
                       const long long *dims, const blockc_train_rng *rng, void *workspace,
                       size_t workspace_size);
/* --- Training: the whole step (issue 22) ---------------------------------
 * blockc_train_new compiles the emitted training step `<model>_train_step`
 * (forward, loss, backward, accumulation, clipping, optimizer update: one
 * generated function, docs/training.md) for a model with a graph and
 * weights, and allocates the optimizer state (AdamW: exp_avg and
 * exp_avg_sq per parameter; SGD: momentum_buffer) and the workspace.  The
 * loss is the output named `loss` (else the only output; a non-scalar one
 * is summed).  Each blockc_train_step updates the model's weights in place
 * (blockc_run etc. see them after blockc_train_sync, which save and free
 * call too).  NULL on failure, with a message. */
#define BLOCKC_OPT_ADAMW 0
#define BLOCKC_OPT_SGD 1
#define BLOCKC_LR_CONSTANT 0     /* lr (after the warm-up) */
#define BLOCKC_LR_LINEAR 1       /* llm.c: warm-up lr (s+1)/W, then linear to min_lr */
#define BLOCKC_LR_COSINE 2       /* llm.c: warm-up, then cosine to min_lr */
#define BLOCKC_LR_INVERSE_SQRT 3 /* fairseq: lr s/W, then lr sqrt(W/s) */
#define BLOCKC_ENONFINITE 6      /* blockc_train_step: the loss or a gradient is not finite */
typedef struct blockc_train_hparams {
  int optimizer;         /* BLOCKC_OPT_ADAMW (default) or BLOCKC_OPT_SGD */
  int schedule;          /* BLOCKC_LR_* */
  double lr;             /* peak learning rate (3e-4) */
  double min_lr;         /* the end of linear / cosine decay (0) */
  long warmup;           /* warm-up steps (0) */
  long steps;            /* the run's length, for the decay (0: no decay) */
  double beta1, beta2;   /* AdamW (0.9, 0.999) */
  double eps;            /* AdamW (1e-8) */
  double weight_decay;   /* decoupled for AdamW, L2 for SGD (0.01) */
  double momentum;       /* SGD (0) */
  int nesterov;          /* SGD (0) */
  double clip;           /* max global gradient norm; <= 0: off (1.0) */
  int accum;             /* micro-batches per step, K >= 1 (1) */
  const unsigned char *decay_mask; /* NULL: decay on parameters of rank >= 2 only;
                                      else one byte per parameter (copied) */
  unsigned long long dropout_seed; /* a graph with dropout drops in every step, micro-
                                      batch j (counting all trained) with the masks of
                                      (dropout_seed, j) as blockc_backward_ex's (0) */
} blockc_train_hparams;
typedef struct blockc_train blockc_train;
/* The defaults above, into *hp. */
void blockc_train_defaults(blockc_train_hparams *hp);
blockc_train *blockc_train_new(blockc_model *m, const blockc_train_hparams *hp);
/* One optimizer step.  inputs: hp.accum consecutive sets of
 * blockc_num_inputs(m) pointers (micro-batch k's at inputs[k * ninputs]),
 * each as blockc_run's; dims as blockc_run's (the same for every micro-batch).
 * The outputs are computed into buffers of t's own.  *loss_out: the mean
 * loss of the micro-batches; *grad_norm_out: the global gradient norm
 * before clipping (either may be NULL).  Returns BLOCKC_OK; BLOCKC_EINPUT
 * for bad ids, dims or lengths (nothing updated); BLOCKC_ENONFINITE when
 * the loss or the norm is not finite (nothing updated: the weights and
 * state are the last good ones); BLOCKC_EUSAGE for misuse.  Dropout is
 * active: micro-batch j (0-based, counting every micro-batch of every step
 * taken; j = s*accum + k for micro-batch k of step s when accum does not
 * change) draws the masks of (hp.dropout_seed, j), which a checkpoint
 * keeps (its "micro_batches"). */
int blockc_train_step(blockc_train *t, const void *const *inputs, const long long *dims,
                      float *loss_out, float *grad_norm_out);
/* The loss of one batch (inputs and dims as one micro-batch of
 * blockc_train_step) with the current weights, forward only (no dropout):
 * evaluation.  BLOCKC_OK or as blockc_run. */
int blockc_train_eval(blockc_train *t, const void *const *inputs, const long long *dims,
                      float *loss_out);
/* 1 if parameter p gets weight decay (the default rule: rank >= 2; or
 * hp.decay_mask), 0 if not, -1 if there is no parameter p. */
int blockc_train_param_decay(const blockc_train *t, int p);
/* Steps taken (0 after new; restored by load). */
long long blockc_train_steps_done(const blockc_train *t);
/* The learning rate of 0-based step s under t's schedule. */
double blockc_train_lr(const blockc_train *t, long long s);
/* Changes the hyper-parameters between steps (the optimizer may not change
 * once a step was taken: BLOCKC_EUSAGE). */
int blockc_train_set_hparams(blockc_train *t, const blockc_train_hparams *hp);
/* Refreshes the model's packed copy of the weights (blockc_compile's) from
 * the trained weights, so blockc_run / blockc_generate use them. */
int blockc_train_sync(blockc_train *t);
/* A checkpoint, one safetensors file written atomically (temp + rename):
 * the weights under the parameters' names, the optimizer state as
 * exp_avg.<param> and exp_avg_sq.<param> (AdamW) or momentum_buffer.<param>
 * (SGD), and __metadata__ {"format": "pt", "blockc_train": "1", "step",
 * "optimizer": "adamw" | "sgd", "nparams", "micro_batches" (trained: the
 * dropout masks' index)} plus the pairs given with blockc_train_set_meta.
 * blockc_run --weights reads it with --allow-extra.
 * blockc_train_save_weights writes the weights alone (PyTorch names). */
int blockc_train_save(blockc_train *t, const char *path);
int blockc_train_save_weights(blockc_train *t, const char *path);
/* Restores weights, state and step from blockc_train_save's file: every
 * parameter and moment tensor must be there with its shape, finite, and
 * the optimizer must be t's (else BLOCKC_EINPUT naming what differs; t is
 * then unchanged).  Continuing from it equals not having stopped, bit for
 * bit. */
int blockc_train_load(blockc_train *t, const char *path);
/* Extra metadata for the next saves (key and value copied; a key given
 * again is replaced; at most 32 keys of up to 255 bytes, values up to 4095;
 * the keys above are reserved), and the value of a key read by the last
 * blockc_train_load (NULL: absent).  A load also sets the pairs it read for
 * the next saves. */
int blockc_train_set_meta(blockc_train *t, const char *key, const char *value);
const char *blockc_train_get_meta(const blockc_train *t, const char *key);
/* Frees t (after blockc_train_sync); the model stays.  NULL: no-op. */
void blockc_train_free(blockc_train *t);

#ifdef __cplusplus
}
#endif
#endif
