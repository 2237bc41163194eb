// train.h — the parts of `blockc train` (train.c) in their own files:
// token files and batch windows (train_data.c), the initialisation schemes
// (train_init.c), checkpoints and the loss plot (train_io.c).
// docs/training.md documents every rule stated here.
#ifndef BC_CLI_TRAIN_H
#define BC_CLI_TRAIN_H
#include "common.h"
#include "blockc_rt.h"  // bcrt_rng

// --- train_data.c --------------------------------------------------------
// A flat token file held as int32: a 1-D .npy of dtype <i4 or <u2, or an
// llm.c .bin (256 little-endian int32 header: magic 20240520, version 1,
// token count; then that many uint16 tokens and nothing after them).  The
// format is told by the content (the .npy magic, else the .bin magic).
// off/size: where token i sits in the file (off + i * size), for messages.
typedef struct tr_tokens {
  int32_t *tok;      // malloc'ed, n of them
  int64_t n;
  int64_t off;       // byte offset of token 0 in the file
  int size;          // bytes per token in the file (2 or 4)
  const char *path;
} tr_tokens;
int tr_tokens_read(bc_ctx *ctx, const char *path, tr_tokens *t);
// Every id in 0..V-1 (else an error naming the file offset, the index and
// the value) and at least T + 2 tokens (one window and a step).
int tr_tokens_check(bc_ctx *ctx, const tr_tokens *t, int64_t V, long T);
void tr_tokens_free(tr_tokens *t);
// Window start of row r of micro-batch k in sequential order:
// ((k*B + r) * T) mod (n - T - 1).
int64_t tr_window_seq(int64_t k, long B, long r, long T, int64_t n);
// A random window start: bcrt_rng_next(rng) mod (n - T - 1), one draw.
int64_t tr_window_rand(bcrt_rng *rng, long T, int64_t n);
// Fills ids[r*T + j] = tok[s_r + j] and targets[r*T + j] = tok[s_r + j + 1].
void tr_fill(const tr_tokens *t, const int64_t *starts, long B, long T, int32_t *ids,
             int32_t *targets);

// --- train_init.c --------------------------------------------------------
// Seeded initial weights of g by scheme (w allocated here; free with
// bcW_free).  xavier is bcW_init_random; torch and gpt2 as docs/training.md.
int tr_init_weights(bc_ctx *ctx, const bc_graph *g, cli_init scheme, uint64_t seed,
                    bc_weights *w);

// --- train_io.c ----------------------------------------------------------
// The state a checkpoint keeps beside the weights.
typedef struct tr_state {
  long step;             // optimizer steps done
  int64_t micro;         // micro-batches drawn (the sequential data position)
  bcrt_rng rng;          // the data generator's state (random order)
  cli_optim optimizer;
  uint64_t graph_id;     // tr_graph_id of the graph trained
} tr_state;
// A fingerprint of g's parameters (model name, names and shapes).
uint64_t tr_graph_id(const bc_graph *g);
// The optimizer file beside weights file W: W without a .safetensors
// suffix, then ".optim.safetensors" (ctx memory).
const char *tr_optim_path(bc_ctx *ctx, const char *weights);
// Writes W (the parameters under their names, __metadata__ with the step)
// and its optimizer file (m1 / m2: exp_avg.* and exp_avg_sq.* for AdamW,
// m1 as momentum_buffer.* for SGD; __metadata__ blockc.* keys), each
// atomically, the optimizer file first.
int tr_save(bc_ctx *ctx, const char *path, const bc_graph *g, const bc_weights *w,
            float *const *m1, float *const *m2, const tr_state *s);
// Reads the optimizer file of W into m1 / m2 (allocated by the caller) and s.
int tr_load_optim(bc_ctx *ctx, const char *path, const bc_graph *g, float *const *m1,
                  float *const *m2, tr_state *s);
// A small SVG line plot of the train loss (n points, step x[i]) and the val
// loss (nv points), written atomically.
int tr_write_svg(bc_ctx *ctx, const char *path, const double *x, const double *y, int n,
                 const double *vx, const double *vy, int nv);
#endif
