// aot.h — ahead-of-time output: the vendorable <model>.c/.h pair (emit.c,
// aot.c), and the `--backend aot` path that builds it with the system C
// compiler into a cached shared object (aot.c).
#ifndef BC_AOT_H
#define BC_AOT_H
#include "bc.h"

// The contract header for a planned graph (emit.c).  `provenance` is one
// line of text (sanitised into a comment).  NUL-terminated ctx memory.
char *bcE_emit_h(bc_ctx *ctx, const bc_graph *g, const char *provenance);

// What bcA_generate makes the pair from.  The provenance hash covers the
// graph file's bytes and the overrides (see aot.c).
typedef struct bc_aot_gen {
  const char *path;       // the graph file (hashed for the provenance line)
  const bc_define *defs;  // the -D overrides it was (or is to be) parsed with
  int ndefs;
  bc_graph *graph;        // NULL: parse path here; else parsed from it (passes and
                          // plan run here unless graph->planned)
  bool backward;          // also the training step <model>_backward (emit_grad.c;
                          // `blockc emit --backward`) with its prototype and
                          // <MODEL>_BACKWARD_WORKSPACE_BYTES in the header
  bool train;             // also the whole step <model>_train_step (emit_train.c;
                          // `blockc emit --train`; implies backward)
  int weight_type;        // a graph parsed here gets this bc_weight_type
                          // (`blockc emit --weight-dtype`); a given graph keeps its own
} bc_aot_gen;

// The pair: the graph it was made from, both files' text (ctx memory), and
// the backward's workspace bytes (0 without backward).
typedef struct bc_aot_pair {
  bc_graph *g;
  char *c_src, *h_src;
  int64_t bwd_ws;
} bc_aot_pair;

// The one entry point of AOT generation: runs the pipeline and emits both
// files.  *out is set only on success.
int bcA_generate(bc_ctx *ctx, const bc_aot_gen *in, bc_aot_pair *out);

// Writes dir/<model>.c and dir/<model>.h atomically, creating dir if needed:
// both temp files are written before either is renamed, so on failure the
// old pair (or nothing) is left, never half of a new one.
int bcA_write_pair(bc_ctx *ctx, const char *dir, const char *model, const char *c_src,
                   const char *h_src);
// The same with DIR/<model>_weights.c (w_src, bcA_weights_c) written in the
// same atomic set (w_src NULL: the pair only).
int bcA_write_files(bc_ctx *ctx, const char *dir, const char *model, const char *c_src,
                    const char *h_src, const char *w_src);
// <model>_weights.c (aot_weights.c): w's parameters as const float arrays
// and the header's <model>_embedded slots pointing at them; NULL after
// reporting (over max_bytes of text when max_bytes > 0, a non-finite value).
const char *bcA_weights_c(bc_ctx *ctx, const bc_graph *g, const bc_weights *w, int64_t max_bytes);

// The AOT forward: `w` is the <model>_weights struct, whose layout is the
// JIT's `const float *const *` array (parameters, then the packed copy), so
// bc_weights.p can be passed as is (or bcA_args, with the module's packing).
typedef int (*bc_aot_fn)(const void *w, const float *x, float *y, void *ws);
// The module's <model>_run_abi: the JIT's bc_run_fn with the weights struct.
typedef int (*bc_aot_run_fn)(const void *w, void *const *io, const long *rt, void *ws);
// The module's <model>_step_abi: the JIT's bc_step_fn with the weights struct.
typedef int (*bc_aot_step_fn)(const void *w, void *const *io, const long *rt, long pos,
                              void *cache, size_t cache_bytes, void *ws);
// The module's <model>_step_rows_abi: bc_step_rows_fn with the weights struct.
typedef int (*bc_aot_step_rows_fn)(const void *w, void *const *io, const long *rt,
                                   const long *pos, void *cache, size_t cache_bytes, void *ws);
// <model>_run_pool / _step_pool: the same with the caller's thread pool.
struct bcrt_pool;
typedef int (*bc_aot_run_pool_fn)(const void *w, void *const *io, const long *rt, void *ws,
                                  struct bcrt_pool *pool);
typedef int (*bc_aot_step_pool_fn)(const void *w, void *const *io, const long *rt, long pos,
                                   void *cache, size_t cache_bytes, void *ws,
                                   struct bcrt_pool *pool);
// <model>_step_last_pool (bcY_step_tail >= 0): the step_rows ABI with the pool.
typedef int (*bc_aot_step_rows_pool_fn)(const void *w, void *const *io, const long *rt,
                                        const long *pos, void *cache, size_t cache_bytes,
                                        void *ws, struct bcrt_pool *pool);
typedef struct bc_aot bc_aot;

typedef struct bc_aot_opts {
  const char *cc;          // NULL: "cc"
  const char *cflags;      // NULL: $BLOCKC_CFLAGS, else "-O3 -march=native"
  const char *cache_dir;   // NULL: $BLOCKC_CACHE_DIR, $XDG_CACHE_HOME/blockc, ~/.cache/blockc
  const char *runtime_dir; // NULL: $BLOCKC_RUNTIME_DIR, <exe>/../runtime,
                           // <exe>/../share/blockc/runtime, build-time path
  int timeout_s;           // 0: $BLOCKC_AOT_TIMEOUT, else 600; the compiler is killed after it
  size_t max_source;       // 0: 8 MiB; bigger generated C is refused (use the JIT)
} bc_aot_opts;

// Builds (or finds in the cache) the shared object for the pair and loads
// it.  The cache directory and the module must be owned by this user and
// not group/world-writable (else refused); the key covers the sources, the
// runtime, the compiler's resolved path and --version, the flags and the
// CPU; a cached module is loaded only when it matches the checksum
// written beside it (aot_cache.c), else it is rebuilt under the key
// directory's lock.  The runtime is compiled once per compiler, flags, CPU
// and runtime source into the cache and linked into each module.  *cache_hit says
// whether the compiler ran; *so_path (ctx memory) is the module.  *fn is
// <model>_forward (NULL unless bcE_is_simple(g)); bcA_run gives
// <model>_run_abi, which every module has.
int bcA_build(bc_ctx *ctx, const bc_graph *g, const char *c_src, const char *h_src,
              const bc_aot_opts *o, bc_aot **out, bc_aot_fn *fn, bool *cache_hit,
              const char **so_path);
bc_aot_run_fn bcA_run(const bc_aot *a);
// <model>_step_abi when the graph can be stepped (bcY_cache_bytes > 0), else NULL.
bc_aot_step_fn bcA_step(const bc_aot *a);
// <model>_step_rows_abi, or NULL.
bc_aot_step_rows_fn bcA_step_rows(const bc_aot *a);
// <model>_step_last_abi / _step_last_pool when the graph has a row-wise tail
// (bcY_step_tail >= 0), else NULL.
bc_aot_step_rows_fn bcA_step_last(const bc_aot *a);
bc_aot_step_rows_pool_fn bcA_step_last_pool(const bc_aot *a);
bc_aot_run_pool_fn bcA_run_pool(const bc_aot *a);    // <model>_run_pool (every module)
bc_aot_step_pool_fn bcA_step_pool(const bc_aot *a);  // <model>_step_pool, with bcA_step
// <model>_backward when the pair was generated with it, else NULL.
bc_backward_fn bcA_backward(const bc_aot *a);
bc_backward_ex_fn bcA_backward_ex(const bc_aot *a);  // NULL: no dropout in the graph
// <model>_train_step and <model>_train_init when the pair was generated with
// them (bc_aot_gen.train), else NULL.
bc_train_fn bcA_train(const bc_aot *a);
bc_train_init_fn bcA_train_init(const bc_aot *a);
// Their pool bodies, <model>_backward_pool and <model>_train_step_pool
// (NULL when the module predates them, or has no backward / step).
bc_backward_pool_fn bcA_backward_pool(const bc_aot *a);
bc_train_pool_fn bcA_train_pool(const bc_aot *a);
// The weights argument of the module's entries: w's parameters, then the
// packed copy the module's <model>_pack made of them (bcY_packed_floats(g)
// floats; NULL when there are none), both owned by a until bcA_free or the
// next call.  NULL (reported) when out of memory.
const void *bcA_args(bc_ctx *ctx, bc_aot *a, const bc_graph *g, const bc_weights *w);
void bcA_free(bc_aot *a);
#endif
