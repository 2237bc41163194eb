/* blockc.h — embed blockc: load a graph, specialise it, JIT it, run it.
 *
 * A blockc_model owns everything: the parsed graph, its weights and the
 * compiled code. Errors go to a callback (stderr by default) as complete
 * "file:line:col: error: ..." messages; functions return BLOCKC_OK (0) or a
 * status code. Once compiled, blockc_forward is reentrant: call it from any
 * number of threads, each with its own workspace.
 *
 *   blockc_model *m = blockc_new();
 *   blockc_set_dim(m, "T", 64);
 *   if (blockc_load_graph(m, "graphs/residual.blk") ||
 *       blockc_load_weights(m, "w.safetensors") || blockc_compile(m)) ...
 *   void *ws = aligned_alloc(64, blockc_workspace_size(m));
 *   blockc_forward(m, x, y, ws);
 *   blockc_delete(m);
 */
#ifndef BLOCKC_H
#define BLOCKC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
  BLOCKC_OK = 0,
  BLOCKC_EINPUT = 1,    /* bad graph, weights or arrays (message reported) */
  BLOCKC_EUSAGE = 2,    /* API misuse: wrong order of calls, bad argument */
  BLOCKC_EIO = 3,       /* the OS refused a file operation */
  BLOCKC_ENOMEM = 4,    /* out of memory, or a limit was hit */
  BLOCKC_EINTERNAL = 5  /* a blockc bug (e.g. tcc rejected generated code) */
};

typedef struct blockc_model blockc_model;
typedef void (*blockc_error_fn)(void *opaque, const char *msg);

/* Create an empty model; NULL if out of memory. */
blockc_model *blockc_new(void);
/* Free the model, its weights and its compiled code. */
void blockc_delete(blockc_model *m);
/* Send error messages to fn(opaque, msg) instead of stderr. */
void blockc_set_error_func(blockc_model *m, void *opaque, blockc_error_fn fn);
/* Override a dim of the graph (like -D NAME=VALUE); call before loading. */
int blockc_set_dim(blockc_model *m, const char *name, long long value);
/* Parse, unroll and shape-check a graph file. */
int blockc_load_graph(blockc_model *m, const char *path);
/* The same from a string; name is used in error messages. */
int blockc_load_graph_string(blockc_model *m, const char *name, const char *text);
/* Load every parameter by name from a safetensors file (checked). */
int blockc_load_weights(blockc_model *m, const char *path);
/* Deterministic random weights (xavier-uniform, zero biases, LN weight 1). */
int blockc_init_weights(blockc_model *m, unsigned long long seed);
/* Run the passes, plan memory, emit C and compile it with libtcc. */
int blockc_compile(blockc_model *m);
/* The generated C source (after blockc_compile), NUL-terminated. */
const char *blockc_c_source(const blockc_model *m);
/* Bytes of workspace one forward call needs (64-byte aligned). */
size_t blockc_workspace_size(const blockc_model *m);
/* Number of floats in the input / output tensors. */
size_t blockc_input_size(const blockc_model *m);
size_t blockc_output_size(const blockc_model *m);
/* y = model(x). Reentrant: concurrent calls need separate workspaces. */
int blockc_forward(const blockc_model *m, const float *x, float *y, void *workspace);

#ifdef __cplusplus
}
#endif
#endif
