// cli.h — the command implementations behind main.c (cli.c, bench.c).
#ifndef BC_CLI_H
#define BC_CLI_H
#include "bc.h"

#define CLI_MAX_DEFS 64
#define CLI_MAX_FILES 64

// --input / --output: NAME=FILE, or a bare FILE (name NULL).
typedef struct cli_file {
  const char *name, *path;
} cli_file;

typedef struct cli_opts {
  const char *graph;
  const char *backend;        // "jit", "interp", "aot"
  bool backend_set;           // --backend was given
  bool backward;              // emit --backward: add <model>_backward to the pair
  bool verbose;               // emit, emit-c --verbose: notes on the layer loop
  const char *weights, *input, *output, *after, *cc;
  uint64_t seed;
  int threads, iters;
  bool json, profile, list_passes;
  bool stepwise;              // run --stepwise: through the step entry (KV cache)
  long chunk;                 // --chunk K: positions per step call (0: 1)
  bool decode;                // bench --decode: prefill + ms per generated token
  long context;               // --context C: the prompt length for --decode (0: bound / 2)
  bool allow_extra;           // --allow-extra
  const char *weights_prefix; // --weights-prefix P
  int64_t max_memory;         // --max-memory BYTES (0: BC_MAX_MEMORY)
  bc_define defs[CLI_MAX_DEFS];
  int ndefs;
  cli_file inputs[CLI_MAX_FILES], outputs[CLI_MAX_FILES];  // input/output: the first bare ones
  int ninputs, noutputs;
  bc_define lens[CLI_MAX_DEFS];  // --length NAME=VALUE: run-time dim values (run, bench)
  int nlens;
  // grad / analyze (analyze.c):
  cli_file dys[CLI_MAX_FILES], dxs[CLI_MAX_FILES];  // --dy, --dx [NAME=]FILE
  int ndys, ndxs;
  const char *svg;            // analyze --svg FILE
  bool many_graphs;           // the command takes several GRAPHs (analyze)
  const char *graphs[CLI_MAX_FILES];  // every GRAPH given; graphs[0] == graph
  int ngraphs;
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

// Shared by the commands (cli.c):
// Under --verbose: why layers of g are not in the emitted layer loop, as
// notes on stderr.
int cli_layer_notes(bc_ctx *ctx, const cli_opts *o, const bc_graph *g);
double cli_now_ms(void);               // monotonic wall clock
double cli_cpu_ms(void);               // this thread's CPU time
double cli_median(double *t, int n);   // sorts t
// s as a JSON string literal to out (bytes outside printable ASCII as \u00XX).
void cli_json_str(const char *s, FILE *out);
// A number as JSON (null when not finite).
void cli_json_num(double v, FILE *out);
int cli_weights(bc_ctx *ctx, const cli_opts *o, const bc_graph *g, bc_weights *w);
void cli_print_stats(const bc_shape *s, const float *y);
int cli_compile_jit(bc_ctx *ctx, bc_graph *g, const bc_emit_opts *eo, bc_jit **j,
                    bc_forward_fn *fn);
void *cli_workspace(bc_ctx *ctx, const bc_graph *g);
void cli_set_threads(int n);   // BLAS threads

// Each returns a bc_status; main maps it to the exit code.
int cli_check(bc_ctx *ctx, const cli_opts *o);
int cli_dump(bc_ctx *ctx, const cli_opts *o);
int cli_run(bc_ctx *ctx, const cli_opts *o);
int cli_emit_c(bc_ctx *ctx, const cli_opts *o);
int cli_emit(bc_ctx *ctx, const cli_opts *o);
int cli_bench(bc_ctx *ctx, const cli_opts *o);
// tools_cli.c: `blockc weights` (seeded weights as safetensors) and `blockc
// dot` (Graphviz); cli_write_dot writes the DOT text of g to f.
int cli_cmd_weights(bc_ctx *ctx, const cli_opts *o);
int cli_cmd_dot(bc_ctx *ctx, const cli_opts *o);
int cli_write_dot(bc_ctx *ctx, const bc_graph *g, const char *stage, FILE *f);
int cli_grad(bc_ctx *ctx, const cli_opts *o);      // analyze.c
// grad --backend aot (aot.c): builds the pair with <model>_backward and runs
// it; dw->p and dx arrays allocated by the caller.
int cli_grad_aot(bc_ctx *ctx, const cli_opts *o, bc_graph *g, const bc_weights *w,
                 void *const *io, const long *rt, const float *const *dy, bc_weights *dw,
                 float **dx);
int cli_analyze(bc_ctx *ctx, const cli_opts *o);   // analyze.c
// The --backend aot half of cli_run (cli_aot.c), for any graph: the module's
// _run_abi over io's arrays, or with o->stepwise its _step_abi (cli_run_stepwise).
int cli_run_aot_io(bc_ctx *ctx, const cli_opts *o, bc_graph *g, const bc_weights *w,
                   cli_io *io, double *compile_ms, double *forward_ms);
// The step entry of one build (stepwise.c): the JIT's, or the AOT module's
// <model>_step_abi (the same ABI with the weights struct); cache_bytes its cache.
typedef int (*cli_aot_step_fn)(const void *w, void *const *io, const long *rt, long pos,
                               void *cache, void *ws);
typedef struct cli_step {
  bc_step_fn jit;
  cli_aot_step_fn aot;   // used when not NULL
  int64_t cache_bytes;
} cli_step;
int cli_step_call(const cli_step *s, const bc_weights *w, void *const *io, const long *rt,
                  long pos, void *cache, void *ws);
// `run --stepwise`: io's float inputs (bound by cli_io_bind) go through the
// step entry chunk positions at a time from pos 0; the outputs are
// concatenated into io's outputs.  Lengths inputs must be absent.  *ms: the
// time spent in step calls.  Not steppable: the reason, naming the node.
int cli_run_stepwise(bc_ctx *ctx, const bc_graph *g, const cli_step *s, const bc_weights *w,
                     cli_io *io, long chunk, void *ws, double *ms);
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
  int64_t bytes;  // what one sample reads
} cli_floor;
int cli_floor_init(bc_ctx *ctx, cli_floor *f, const bc_graph *g, const bc_weights *w,
                   int64_t extra_bytes);
void cli_floor_sample(const cli_floor *f, double *ms, double *cpu_ms);
void cli_floor_free(cli_floor *f);
// bench's AOT column (cli_aot.c): build (0 on a cache hit) and run median.
int cli_bench_aot(bc_ctx *ctx, const cli_opts *o, bc_graph *g, const bc_weights *w,
                  void *const *io, const long *rt, void *ws, double *build_ms,
                  double *forward_ms);
#endif
