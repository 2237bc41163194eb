// cli.h — the commands of the blockc program and what they call in each
// other, file by file.  The files depend on each other one way only:
//
//   main.c      dispatch                         -> options.c
//   options.c   the table of commands and options, the parser, help
//               (it points at every command's function; it calls none)
//   run.c       check, dump, run, emit-c         -> aot_cmds.c, stepwise.c
//   bench.c     bench                            -> aot_cmds.c, stepwise.c
//   analyze.c   grad, analyze                    -> aot_cmds.c
//   tools.c     weights, dot
//   tokenize.c  tokenize, detokenize (the tokenizer of runtime/blockc_tok.h)
//   gguf_tok.c  the tokenizer a GGUF file carries (tokenizer.ggml.*)
//   aot_cmds.c  emit; run/grad --backend aot; bench's AOT column -> stepwise.c
//   stepwise.c  run --stepwise, bench --decode, the read floor
//   generate.c  generate (the token loop of generate.c in the library) -> stepwise.c
//   train.c     train: the loop, progress, log  -> train_data.c, train_init.c, train_io.c
//   train_data.c  token files and batch windows (train.h)
//   train_pairs.c  sequence-to-sequence pair files and batches (train.h)
//   train_init.c  --init torch|gpt2|xavier (train.h)
//   train_io.c  checkpoints, the SVG plot (train.h)
//   common.c    what they all share (common.h)   -> the library only
//
// tools/check_deps.py (make check-deps) fails on a circle between files.
#ifndef BC_CLI_H
#define BC_CLI_H
#include "common.h"
#include "aot.h"  // bc_aot_step_fn

// options.c: one row per option and per command.  needs: the option
// without which this one would mean nothing (CLI_OPT_NONE: none).
typedef struct cli_option {
  const char *flag, *alias;   // "--output", "-o"
  const char *arg;            // the value's placeholder; NULL: a switch
  const char *help;
  cli_opt_id needs;
} cli_option;
// A set of options, one bit per cli_opt_id (more than 64 of them: GCC's and
// Clang's 128-bit integer; the CLI is never built by tcc).
__extension__ typedef unsigned __int128 cli_optset;
_Static_assert(CLI_OPT_COUNT <= 128, "cli_optset holds 128 options");
typedef struct cli_command {
  const char *name;
  int (*fn)(bc_ctx *ctx, const cli_opts *o);
  const char *usage, *summary, *text;
  cli_optset opts;            // bit i: accepts option i
  bool plain_output;          // -o FILE is never NAME=FILE
  bool no_graph;              // takes no GRAPH: its arguments go to o->args
} cli_command;
const cli_option *cli_options(void);          // CLI_OPT_COUNT rows
const cli_command *cli_commands(int *n);
const cli_command *cli_command_find(const char *name);
bool cli_accepts(const cli_command *c, cli_opt_id id);
void cli_print_usage(FILE *out);
void cli_print_help(FILE *out, const cli_command *c);
// argv[2..] of command c into *o (zeroed first): 0, or 2 after a message.
int cli_parse_args(int argc, char **argv, const cli_command *c, cli_opts *o);
void cli_free_opts(cli_opts *o);
// "blockc: error: <fmt with arg>" + the --help hint; returns 2.
__attribute__((format(printf, 1, 0))) int cli_usage_error(const char *fmt, const char *arg);

// The commands: each returns a bc_status; main maps it to the exit code.
// run.c:
int cli_check(bc_ctx *ctx, const cli_opts *o);
int cli_dump(bc_ctx *ctx, const cli_opts *o);
int cli_run(bc_ctx *ctx, const cli_opts *o);
int cli_emit_c(bc_ctx *ctx, const cli_opts *o);
int cli_bench(bc_ctx *ctx, const cli_opts *o);     // bench.c
int cli_generate(bc_ctx *ctx, const cli_opts *o);  // generate.c
// tools.c: `blockc weights` (seeded weights as safetensors) and `blockc
// dot` (Graphviz); cli_write_dot writes the DOT text of g to f.
int cli_cmd_weights(bc_ctx *ctx, const cli_opts *o);
int cli_cmd_dot(bc_ctx *ctx, const cli_opts *o);
int cli_write_dot(bc_ctx *ctx, const bc_graph *g, const char *stage, FILE *f);
int cli_grad(bc_ctx *ctx, const cli_opts *o);      // analyze.c
int cli_analyze(bc_ctx *ctx, const cli_opts *o);   // analyze.c
// tokenize.c: `blockc tokenize` / `blockc detokenize` (runtime/blockc_tok.h).
int cli_tokenize(bc_ctx *ctx, const cli_opts *o);
int cli_detokenize(bc_ctx *ctx, const cli_opts *o);
// gguf_tok.c: the tokenizer a GGUF file carries (its tokenizer.ggml.* metadata); NULL and
// the message in err when it has none or it is bad; desc (may be NULL) gets
// "gpt2 BPE, 50257 tokens"; *none (may be NULL) is 1 when the file has no
// tokenizer.ggml.model.  cli_tokenizer_load: a GGUF file's, or a
// tokenizer.json.
struct blockc_tokenizer *cli_gguf_tokenizer(const char *path, char *err, size_t errn, char *desc, size_t descn,
                                            int *none);
struct blockc_tokenizer *cli_tokenizer_load(const char *path, char *err, size_t errn);
int cli_train(bc_ctx *ctx, const cli_opts *o);     // train.c

// aot_cmds.c: `blockc emit -o DIR`; grad --backend aot builds the pair with
// <model>_backward and runs it (dw->p and dx arrays allocated by the caller).
int cli_emit(bc_ctx *ctx, const cli_opts *o);
int cli_grad_aot(bc_ctx *ctx, const cli_opts *o, bc_graph *g, const bc_weights *w,
                 void *const *io, const long *rt, const float *const *dy, bc_weights *dw,
                 float **dx);
// The --backend aot half of cli_run, for any graph: the module's
// _run_abi over io's arrays, or with o->stepwise its _step_abi (cli_run_stepwise).
int cli_run_aot_io(bc_ctx *ctx, const cli_opts *o, bc_graph *g, const bc_weights *w,
                   cli_io *io, double *compile_ms, double *forward_ms);
// The step entry of one build (stepwise.c): the JIT's, or the AOT module's
// <model>_step_abi (bc_aot_step_fn: the same ABI with the weights struct);
// cache_bytes its cache.
typedef struct cli_step {
  bc_step_fn jit;
  bc_aot_step_fn aot;    // used when not NULL
  int64_t cache_bytes;
  bc_step_pool_fn jit_pool;  // the JIT's <model>_step_pool, used with pool
  bc_aot_step_pool_fn aot_pool;  // the module's, used with aot and pool
  struct bcrt_pool *pool;    // --threads (cli_pool), or NULL
  bc_step_rows_pool_fn jit_rows;  // <model>_step_rows_pool (bench --decode --batch), or NULL
  // <model>_step_last_pool (JIT) or the module's _step_last_abi / _pool: each
  // batch row's last new position only, outputs [B, 1, ...]; NULL without a
  // row-wise tail (bcY_step_tail).
  bc_step_rows_pool_fn jit_last;
  bc_aot_step_rows_fn aot_last;
  bc_aot_step_rows_pool_fn aot_last_pool;
} cli_step;
int cli_step_call(const cli_step *s, const bc_weights *w, void *const *io, const long *rt,
                  long pos, void *cache, void *ws);
// Whether s has the last-position entry, and the call of it (pos per batch row).
bool cli_step_has_last(const cli_step *s);
int cli_step_last_call(const cli_step *s, const bc_weights *w, void *const *io, const long *rt,
                       const long *pos, void *cache, void *ws);
// `run --stepwise`: io's float inputs (bound by cli_io_bind) go through the
// step entry chunk positions at a time from pos 0; the outputs are
// concatenated into io's outputs.  Lengths inputs must be absent.  *ms: the
// time spent in step calls.  Not steppable: the reason, naming the node.
int cli_run_stepwise(bc_ctx *ctx, const bc_graph *g, const cli_step *s, const bc_weights *w,
                     cli_io *io, long chunk, void *ws, double *ms);
// The chunk cli_run_stepwise uses for --chunk K: K clamped to 1..T (the
// stepped dim's run-time value).
long cli_step_chunk(const bc_graph *g, const cli_io *io, long chunk);
// `bench --decode` (stepwise.c).
int cli_bench_decode(bc_ctx *ctx, const cli_opts *o);
// The read floor (stepwise.c): one read of every weight of w plus `extra`
// bytes more (a KV cache's worth), sampled between the runs it is compared
// with.  cli_floor_sample times a plain vectorised read and one that
// prefetches 2 KiB ahead (as the small-M kernel does; faster on this
// machine) and gives the faster: the stricter floor.
typedef struct cli_floor {
  const bc_graph *g;
  const bc_weights *w;
  float *extra;
  size_t nextra;
  int64_t *count;   // floats read of each parameter
  int64_t bytes;    // what one sample reads
  int64_t gathered; // of which rows of gathered tables (embeddings, learned positions)
  int64_t npacked;  // floats of w's packed copy read (a weight type's matrices), else 0
} cli_floor;
// rows > 0: a table that only gathers read (Embedding, learned Positions)
// counts `rows` rows (what a call with that many positions reads of it);
// everything else, the LM head included, counts whole.  With a weight type
// (g->weight_type) the matrices count as stored: the bytes of the packed
// copy (w->p[w->n], which must be packed already) instead of their floats.
int cli_floor_init(bc_ctx *ctx, cli_floor *f, const bc_graph *g, const bc_weights *w,
                   int64_t extra_bytes, int64_t rows);
void cli_floor_sample(const cli_floor *f, double *ms, double *cpu_ms);
// The same read split over pool's threads (best of plain and prefetched), ms.
double cli_floor_sample_pool(const cli_floor *f, struct bcrt_pool *pool);
void cli_floor_free(cli_floor *f);
// bench's AOT column (aot_cmds.c): build (0 on a cache hit) and run median.
int cli_bench_aot(bc_ctx *ctx, const cli_opts *o, bc_graph *g, const bc_weights *w,
                  void *const *io, const long *rt, void *ws, double *build_ms,
                  double *forward_ms);
#endif
