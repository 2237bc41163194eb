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
  int64_t rows, cols;  // a 2-D file (tr_pairs_read): [rows, cols], n = rows * cols
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

// A 2-D .npy [pairs, L] of <i4 or <u2 (sequence-to-sequence data, one file
// per token input): the reader of tr_tokens_read with rank 2 required.
int tr_pairs_read(bc_ctx *ctx, const char *path, tr_tokens *t);

// --- train_pairs.c -------------------------------------------------------
// Sequence-to-sequence data (docs/training.md, "Sequence-to-sequence"): one
// 2-D file per token input, row i of every file is pair i, right-padded
// with the pad id; a row's length is the count before its first pad.  The
// target input (the decoder's: the token input whose [B, T] axes are those
// of `logits`) is fed row[:-1] with `targets` row[1:] (ignore_index -100 past
// the row's end: teacher forcing); every other token input its row.  The
// lengths input masking a token input's stream (Attention lengths= /
// kv_lengths=) is fed its row lengths (the target's: length - 1).
#define TR_MAX_SEQ 16
typedef struct tr_seq {
  const char *name;      // the token input
  int input;             // its index among the trained graph's inputs
  int len_input;         // the lengths input fed its row lengths (-1: none)
  bool target;           // teacher forcing: row[:-1] in, row[1:] into `targets`
  int rt;                // its sequence dim's index among the run-time dims (-1: fixed)
  int dim;               // that dim's index in g->dims
  long bound;            // that dim's value (fixed) or bound
  tr_tokens f[2];        // the train and val files
  int32_t *len[2];       // each row's length (the count before the first pad)
  long width[2];         // the sequence length fed: f.cols (- 1 for the target), or a fixed dim's value
} tr_seq;
typedef struct tr_pairs {
  int n;
  tr_seq s[TR_MAX_SEQ];
  int targets_input;     // the trained graph's `targets` input
  int32_t pad;
  int64_t rows[2];       // the pairs of the train and val files
} tr_pairs;
// The target token input of g: the one whose [B, T] are the first two axes
// of ref (the same sizes and dims) — output `logits` of a graph train adds
// the loss to, or the input `targets` of a graph with its own loss; when
// several are, the one named `tgt`.  what names ref in the errors.  *name,
// or an error.
int tr_pairs_target(bc_ctx *ctx, const char *path, const bc_graph *g, const bc_shape *ref,
                    const char *what, const char **name);
// Fills p from the trained graph g (inputs, `targets`, the lengths inputs'
// owners, dims) for the target token input `target`; an error names
// what cannot be told.
int tr_pairs_plan(bc_ctx *ctx, const char *path, const bc_graph *g, const char *target,
                  tr_pairs *p);
// Reads and checks the files of set k (0: --data, 1: --val) given as
// NAME=FILE, one per token input of p, with the vocabulary V of each
// (path: the graph file, for messages).
int tr_pairs_load(bc_ctx *ctx, const char *path, const bc_graph *g, tr_pairs *p, int k,
                  const cli_file *files, int nfiles, const char *flag);
// Checks the rows of one file: right-padded (nothing but pads after the
// first pad), a length >= 1 (>= 2 for the target), ids in 0..V-1, the
// length fed within width; len[r] gets each row's length.
int tr_pairs_rows(bc_ctx *ctx, const tr_tokens *f, int32_t pad, int64_t V, bool target, long width,
                  const char *dim, int32_t *len);
// Pair of row r of micro-batch k: sequential (k*B + r) mod P; random
// bcrt_rng_next() mod P.
int64_t tr_pair_seq(int64_t k, long B, long r, int64_t P);
int64_t tr_pair_rand(bcrt_rng *rng, int64_t P);
// One micro-batch of set k (pairs[0..B)) into io (each token input's ids,
// pads past a row's end as id 0; the lengths inputs; `targets`); rt gets the
// run-time dims of the token inputs.
void tr_pairs_fill(const tr_pairs *p, int k, const int64_t *pairs, long B, void *const *io,
                   long *rt);
void tr_pairs_free(tr_pairs *p);

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
