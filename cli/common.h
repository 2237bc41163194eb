// common.h — what the command-line program's files share (common.c): the
// parsed options, the arrays of one run bound to a graph, the weights under
// the memory budget, the JIT compile and workspace, clocks and JSON.  It
// includes the library's bc.h only; the commands are declared in cli.h.
#ifndef BC_CLI_COMMON_H
#define BC_CLI_COMMON_H
#include "bc.h"

#define CLI_MAX_DEFS 64
#define CLI_MAX_FILES 64

// The options of the command line, one row each of options.c's table.
typedef enum cli_opt_id {
  CLI_OPT_NONE, CLI_OPT_DEFINE = CLI_OPT_NONE, CLI_OPT_BACKEND, CLI_OPT_WEIGHTS, CLI_OPT_ALLOW_EXTRA,
  CLI_OPT_WEIGHTS_PREFIX, CLI_OPT_MAX_MEMORY, CLI_OPT_INPUT, CLI_OPT_OUTPUT, CLI_OPT_LENGTH,
  CLI_OPT_SEED, CLI_OPT_THREADS, CLI_OPT_ITERS, CLI_OPT_CC, CLI_OPT_DY, CLI_OPT_DX, CLI_OPT_SVG,
  CLI_OPT_JSON, CLI_OPT_PROFILE, CLI_OPT_TRAIN, CLI_OPT_DECODE, CLI_OPT_CONTEXT, CLI_OPT_STEPWISE,
  CLI_OPT_CHUNK, CLI_OPT_BACKWARD, CLI_OPT_AFTER, CLI_OPT_PASSES, CLI_OPT_VERBOSE,
  CLI_OPT_TOKENIZER, CLI_OPT_VOCAB, CLI_OPT_MERGES, CLI_OPT_FILE, CLI_OPT_ADD_SPECIAL,
  CLI_OPT_PROMPT, CLI_OPT_PROMPT_IDS, CLI_OPT_MAX_NEW_TOKENS, CLI_OPT_TEMPERATURE,
  CLI_OPT_TOP_K, CLI_OPT_TOP_P, CLI_OPT_STOP, CLI_OPT_IDS, CLI_OPT_RANDOM_WEIGHTS, CLI_OPT_MAIN, CLI_OPT_WEIGHTS_C,
  // train (train.c):
  CLI_OPT_DATA, CLI_OPT_VAL, CLI_OPT_STEPS, CLI_OPT_BATCH, CLI_OPT_SEQ, CLI_OPT_LR,
  CLI_OPT_SCHEDULE, CLI_OPT_WARMUP, CLI_OPT_MIN_LR, CLI_OPT_OPTIMIZER, CLI_OPT_BETA1,
  CLI_OPT_BETA2, CLI_OPT_EPS, CLI_OPT_WEIGHT_DECAY, CLI_OPT_CLIP, CLI_OPT_ACCUM, CLI_OPT_INIT,
  CLI_OPT_DATA_ORDER, CLI_OPT_EVAL_EVERY, CLI_OPT_EVAL_BATCHES, CLI_OPT_OUT, CLI_OPT_SAVE_EVERY,
  CLI_OPT_RESUME, CLI_OPT_LOG, CLI_OPT_STOP_AFTER,
  CLI_OPT_DROPOUT_SEED, CLI_OPT_STEP, CLI_OPT_PAD_ID, CLI_OPT_LABEL_SMOOTHING, CLI_OPT_DECAY,
  CLI_OPT_NO_DECAY, CLI_OPT_ADMIN_OMEGA, CLI_OPT_WEIGHT_DTYPE,
  CLI_OPT_COUNT
} cli_opt_id;

// The backends, by the one table of their names (common.c).
typedef enum cli_backend { CLI_BACKEND_JIT, CLI_BACKEND_INTERP, CLI_BACKEND_AOT } cli_backend;
const char *cli_backend_name(cli_backend b);
bool cli_backend_parse(const char *name, cli_backend *b);

// --input / --output / --dy / --dx: NAME=FILE, or a bare FILE (name NULL);
// flag and arg as typed, for messages.
typedef struct cli_file {
  const char *name, *path;
  const char *flag, *arg;
} cli_file;

// `blockc train`'s options (train.c); the enums index the names in
// options.c's parser (cli_train_*_names).
typedef enum { CLI_SCHED_CONSTANT, CLI_SCHED_LINEAR, CLI_SCHED_COSINE, CLI_SCHED_INVERSE_SQRT } cli_sched;
typedef enum { CLI_OPTIM_ADAMW, CLI_OPTIM_SGD } cli_optim;
typedef enum { CLI_INIT_XAVIER, CLI_INIT_TORCH, CLI_INIT_GPT2 } cli_init;
typedef enum { CLI_ORDER_RANDOM, CLI_ORDER_SEQUENTIAL } cli_order;
// --decay: which parameters weight decay applies to (before --no-decay).
typedef enum { CLI_DECAY_MATRICES, CLI_DECAY_ALL } cli_decay;
enum { CLI_MAX_NO_DECAY = 32 };  // options.c's message says 32
typedef struct cli_train_opts {
  cli_file data[CLI_MAX_FILES];  // --data [NAME=]FILE (repeatable)
  int ndata;
  const char *data_bare;         // the first bare --data FILE
  cli_file vals[CLI_MAX_FILES];  // --val [NAME=]FILE (repeatable: one per token input)
  int nval;
  const char *val_bare;          // the first bare --val FILE
  const char *val;               // the first --val's file (NULL: none)
  const char *out, *resume, *log;
  long long pad_id;              // --pad-id P (sequence-to-sequence files; default 0)
  long steps, batch, seq, warmup, accum, eval_every, eval_batches, save_every, stop_after;
  double lr, min_lr, beta1, beta2, eps, weight_decay, clip;
  double label_smoothing;        // --label-smoothing E of the loss train adds (default 0)
  cli_sched schedule;
  cli_optim optimizer;
  cli_init init;
  cli_order order;
  cli_decay decay;                        // --decay (default matrices: rank >= 2)
  const char *no_decay[CLI_MAX_NO_DECAY];  // --no-decay GLOB (repeatable): names exempted
  int nno_decay;
} cli_train_opts;

typedef struct cli_opts {
  const char *command;        // "run", "grad", ...
  const char *graph;
  cli_backend backend;        // --backend (jit by default)
  bool backend_set;           // --backend was given
  bool given[CLI_OPT_COUNT];  // which options the command line has
  bool backward;              // emit --backward: add <model>_backward to the pair
  bool verbose;               // emit, emit-c --verbose: notes on the layer loop
  const char *weights, *input, *output, *after, *cc;
  const char *dy, *dx;        // the first bare --dy / --dx
  uint64_t seed;
  int threads, iters;
  bool json, profile, list_passes;
  bool train;                 // bench --train: time the training step too; emit --train: add <model>_train_step
  bool stepwise;              // run --stepwise: through the step entry (KV cache)
  long chunk;                 // --chunk K: positions per step call (0: 1)
  bool decode;                // bench --decode: prefill + ms per generated token
  long context;               // --context C: the prompt length for --decode (0: bound / 2)
  bool allow_extra;           // --allow-extra
  const char *weights_prefix; // --weights-prefix P
  int64_t max_memory;         // --max-memory BYTES (0: BC_MAX_MEMORY)
  int weight_type;            // --weight-dtype (bc_weight_type; 0: f32)
  bc_define defs[CLI_MAX_DEFS];
  int ndefs;
  cli_file inputs[CLI_MAX_FILES], outputs[CLI_MAX_FILES];  // input/output: the first bare ones
  int ninputs, noutputs;
  bc_define lens[CLI_MAX_DEFS];  // --length NAME=VALUE: run-time dim values (run, bench)
  int nlens;
  // grad / analyze (analyze.c):
  cli_file dys[CLI_MAX_FILES], dxs[CLI_MAX_FILES];  // --dy, --dx [NAME=]FILE
  int ndys, ndxs;
  // grad --dropout-seed S --step K: dropout active (a training step) with
  // that generator state; neither given: no dropout (inference masks).
  uint64_t drop_seed, drop_step;
  const char *svg;            // analyze --svg FILE
  bool admin_omega;           // analyze --admin-omega -o W: Admin's profiled omegas
  const char *graphs[CLI_MAX_FILES];  // every GRAPH given; graphs[0] == graph
  int ngraphs;
  // tokenize / detokenize (tokenize.c): the tokenizer files, the text file,
  // and the positional arguments (TEXT, or the IDS), pointing into argv.
  const char *tokenizer, *vocab, *merges, *text_file;
  bool add_special;
  const char **args;          // malloc'ed, nargs of them (no-GRAPH commands)
  int nargs;
  // generate (generate.c):
  const char *prompt;         // --prompt TEXT
  const char *prompt_ids;     // --prompt-ids 1,2,3 or FILE.npy
  long max_new_tokens;        // --max-new-tokens N
  double temperature, top_p;  // --temperature T, --top-p P (top_p read only when given)
  int top_k;                  // --top-k K
  int32_t stop[CLI_MAX_FILES];  // --stop ID, repeatable
  int nstop;
  bool ids;                   // --ids: print ids, not text
  uint64_t random_weights;    // --random-weights SEED
  const char *main_prog;      // emit --main generate
  bool weights_c;             // emit --weights-c: also DIR/<model>_weights.c
  cli_train_opts tr;          // train (train.c)
} cli_opts;

// The arrays of one run, bound to a graph: one per graph input, then one per
// output (bcR_run_io's order), at their actual sizes, and the run-time dims
// (taken from the input arrays' shapes; a dim no array fixes runs at its bound).
typedef struct cli_io {
  int n;               // ninputs + noutputs
  void **p;            // malloc'ed; NULL for a lengths input not given (full lengths)
  bc_shape *shape;     // actual shapes
  long *rt;            // the graph's run-time dims (NULL if none)
} cli_io;
int cli_io_bind(bc_ctx *ctx, const cli_opts *o, const bc_graph *g, cli_io *io);
// Writes every output given with --output; prints stats for each.
int cli_io_write(bc_ctx *ctx, const cli_opts *o, const bc_graph *g, const cli_io *io);
void cli_io_free(cli_io *io);
// The file --input gives graph input i (NAME=FILE, or the bare FILE standing
// for it), or NULL: the input is seeded (float, tokens) or absent (lengths).
const char *cli_input_file(const cli_opts *o, const bc_graph *g, int i);
// A bare FILE of f (standing for array bare_for, NULL when it cannot) and a
// NAME=FILE of that same array: a usage error naming both flags.
int cli_check_bare_named(bc_ctx *ctx, const cli_file *f, int n, const char *bare_for,
                         const char *what);
// Two of the n files one command writes are the same file (by device and
// inode, or the real directory + name of a new one): a usage error.
int cli_check_distinct(bc_ctx *ctx, const cli_file *const *f, int n);

// Shared by the commands:
bc_graph *cli_load(bc_ctx *ctx, const cli_opts *o);  // GRAPH with its -D overrides
// Under --verbose: why layers of g are not in the emitted layer loop, as
// notes on stderr.
int cli_layer_notes(bc_ctx *ctx, const cli_opts *o, const bc_graph *g);
double cli_now_ms(void);               // monotonic wall clock
double cli_cpu_ms(void);               // this thread's CPU time
double cli_median(double *t, int n);   // sorts t
// s as a JSON string literal to out: UTF-8 kept, controls escaped, bytes
// that are not UTF-8 as U+FFFD.
void cli_json_str(const char *s, FILE *out);
// A number as JSON (null when not finite).
void cli_json_num(double v, FILE *out);
int cli_weights(bc_ctx *ctx, const cli_opts *o, const bc_graph *g, bc_weights *w);
void cli_print_stats(const bc_shape *s, const float *y);
int cli_compile_jit(bc_ctx *ctx, bc_graph *g, const bc_emit_opts *eo, bc_jit **j,
                    bc_forward_fn *fn);
void *cli_workspace(bc_ctx *ctx, const bc_graph *g);
void cli_set_threads(int n);   // BLAS threads
// --threads for the forward and step entries: n > 1 creates a pool of n
// threads for the generated code's matrix products (*pool; the caller
// frees it with bcrt_pool_free) and keeps OpenBLAS to one thread, so the
// two do not oversubscribe the cores; n == 1: *pool = NULL, OpenBLAS at 1.
int cli_pool(bc_ctx *ctx, int n, struct bcrt_pool **pool);

// grad's dropout state: training when --dropout-seed or --step was given.
bc_train_rng cli_grad_rng(const cli_opts *o);

#endif
