// bc.h — the one header every compiler file includes.
//
// blockc turns a graph file (a Transformer stack written as Add / LayerNorm /
// Attention / FFN nodes) into a flat, typed graph IR, checks it, runs passes
// over it, and either interprets it (the exact, slow oracle) or emits C that
// libtcc compiles in memory (JIT) or that users vendor (AOT).
//
// Pipeline and the file that implements each stage:
//
//   graph text --lex.c--> tokens --parse.c--> bc_graph (unrolled, shape-checked)
//   bc_graph --passes.c--> fused bc_graph --plan.c--> arena offsets
//   bc_graph --interp.c--> reference output (double accumulation)
//   bc_graph --grad.c--> reference gradients (reverse mode, double)
//   bc_graph --layout.c--> workspace, packed-weights and KV-cache sizes
//   bc_graph --emit.c--> C source (+ emit_grad.c: <model>_backward) --jit.c--> callable run()
//
// What each op means to each stage is not in the stage: the op table
// (compiler/ops.h, one file per op kind under compiler/ops/) holds one row
// per op with its spelling, arity, attributes, in-place rules and one
// function per stage (parser build, planner scratch, interpreter, reference
// backward, emitted forward and backward, attribute printer).  A stage walks
// the graph and calls bcT_def(n->op)->its_entry; none switches on the op.
//
// There is no global state: a bc_ctx owns the error sink and every
// allocation made while compiling (an arena freed in one go).  Module
// prefixes follow Lua's habit: bcL_ lexer, bcP_ parser, bcI_ IR, bcR_
// reference interpreter, bcO_ optimisation passes, bcM_ memory planner,
// bcY_ layout (workspace, packed weights, KV cache sizes), bcE_ emitter,
// bcJ_ JIT, bcS_ safetensors, bcF_ GGUF, bcN_ npy, bcW_ weights, bcT_ op table
// (ops.h; bcG_ the emitted backward, bcD_ the driver).
#ifndef BC_H
#define BC_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define BC_VERSION "0.1.0"

// ---------------------------------------------------------------------------
// Limits. Every one is enforced with an error message that names it.
// ---------------------------------------------------------------------------
#define BC_MAX_RANK 4                   // tensor rank
#define BC_MAX_DIM (1LL << 24)          // any single dimension
#define BC_MAX_ELEMS (1LL << 31)        // elements in one tensor
#define BC_MAX_NODES 200000             // nodes after unrolling
#define BC_MAX_IDENT 64                 // identifier length (bytes)
#define BC_MAX_NEST 128                 // nesting depth of expressions/blocks
#define BC_MAX_PARAM_NAME 256           // full parameter name length
#define BC_MAX_WORKSPACE (16LL << 30)   // arena bytes
#define BC_MAX_MEMORY (16LL << 30)      // parameters + workspace of a run (--max-memory)
#define BC_MAX_SOURCE (16 << 20)        // graph file size in bytes

// Status codes at every API boundary. The CLI exits with 1 for BC_EINPUT
// (a bad graph, weights or array file) and 2 for BC_EUSAGE (bad flags).
typedef enum {
  BC_OK = 0,
  BC_EINPUT = 1,     // the user's input is wrong; a message was reported
  BC_EUSAGE = 2,     // bad command-line usage
  BC_EIO = 3,        // the OS refused (open/read/write); message reported
  BC_ENOMEM = 4,     // allocation failed or a limit was hit
  BC_EINTERNAL = 5,  // a blockc bug (e.g. tcc rejected generated code)
} bc_status;

// ---------------------------------------------------------------------------
// Context and diagnostics (ctx.c)
// ---------------------------------------------------------------------------
typedef void (*bc_error_fn)(void *opaque, const char *msg);

// A loaded source file; locations point into it so errors can show the line.
typedef struct bc_src {
  const char *path;   // as given by the user
  const char *text;   // NUL-terminated contents
  size_t len;
} bc_src;

typedef struct bc_loc {
  const bc_src *src;  // NULL for "no location"
  int line, col;      // 1-based
  int len;            // length of the offending token (carets), >= 1
} bc_loc;

typedef struct bc_arena_block bc_arena_block;

typedef struct bc_ctx {
  bc_error_fn on_error;     // receives each complete, formatted message
  void *error_opaque;
  int nerrors;
  char *last_error;         // copy of the most recent message (tests read it)
  bc_arena_block *arena;    // everything bc_alloc'ed; freed by bc_ctx_free
  int max_nodes;            // 0: BC_MAX_NODES; a lower cap (the parse fuzzer's), never higher
} bc_ctx;

bc_ctx *bc_ctx_new(void);                       // default sink: stderr
void bc_ctx_free(bc_ctx *ctx);
void bc_set_error_fn(bc_ctx *ctx, void *opaque, bc_error_fn fn);
void *bc_alloc(bc_ctx *ctx, size_t n);          // zeroed; NULL on OOM
char *bc_strdup(bc_ctx *ctx, const char *s);
char *bc_strndup(bc_ctx *ctx, const char *s, size_t n);
char *bc_fmt(bc_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// "file:line:col: error: msg" + the source line + a caret under the token.
// Returns BC_EINPUT so callers can `return bc_error_at(...)`.
int bc_error_at(bc_ctx *ctx, bc_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
// "error: msg" for errors without a source location (files, flags); callers
// put the file name in the message themselves: "w.safetensors: error: ...".
int bc_error(bc_ctx *ctx, bc_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
// bc_error, then `text` (e.g. a compiler's log) line by line, indented and
// escaped like every other quoted string.
int bc_error_with_text(bc_ctx *ctx, bc_status st, const char *text, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
// Messages escape whatever %s and %c insert (file contents, names, paths):
// control bytes, DEL, invalid UTF-8 and C1 controls print as \xNN.
// A note attached to the previous error ("file:line:col: note: ...").
void bc_note_at(bc_ctx *ctx, bc_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

// Reads a whole file into ctx memory (NUL-terminated). Reports on failure.
int bc_read_file(bc_ctx *ctx, const char *path, size_t max, char **data, size_t *len);
// The same into a malloc'ed buffer the caller frees (for files too big to
// keep in the arena until the context dies, e.g. weights).
int bc_read_file_malloc(bc_ctx *ctx, const char *path, uint64_t max, unsigned char **data,
                        size_t *len);
// Opens path for reading if it is a regular file and says how big it is.
// Reports and returns NULL otherwise.
FILE *bc_open_regular(bc_ctx *ctx, const char *path, uint64_t *size);
// Runs argv (no shell: posix_spawnp) in its own process group with stdout
// and stderr to the open file descriptor log_fd; returns the exit status
// (128 + signal if killed), or -1 if it could not start (the errno-like code
// in *err).  timeout_s > 0: the whole group is killed (SIGKILL) after that
// many seconds and BC_SPAWN_TIMEOUT is returned.
#define BC_SPAWN_TIMEOUT (-2)
int bc_spawn_fd(char *const *argv, int log_fd, int timeout_s, int *err);
// The same with output to the file `log` (created 0600, truncated; must not
// be a symbolic link) and no timeout.
int bc_spawn_wait(char *const *argv, const char *log, int *err);
// A growing text buffer (the emitters' output): p is malloc'ed (caller
// frees), NUL-terminated when len > 0; oom set once an allocation failed
// (later adds do nothing).
typedef struct bc_sbuf {
  char *p;
  size_t len, cap;
  bool oom;
} bc_sbuf;
void bc_sb_vadd(bc_sbuf *b, const char *fmt, va_list ap);
void bc_sb_add(bc_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// FNV-1a 64: h = bc_fnv1a(h, bytes, n), starting from BC_FNV_OFFSET.
#define BC_FNV_OFFSET 0xcbf29ce484222325ULL
uint64_t bc_fnv1a(uint64_t h, const void *p, size_t n);
// Writes parts to path.  A regular file (or a new one) is replaced
// atomically: a temp file with a short random name (O_EXCL) in the same
// directory, the old file's mode (and owner, as root), fsync, rename; on
// any failure nothing is left at path (nor the temp file).  A symbolic
// link is followed and its target replaced; a file with several hard links
// is rewritten in place (so every link sees the new contents); a device or
// FIFO is written directly (never replaced); a directory is refused.
int bc_write_file_atomic(bc_ctx *ctx, const char *path, int nparts,
                         const void *const *parts, const size_t *lens);
// n files, each one text: every temp file is written and synced first, then
// all are renamed, so a failure (ENOSPC) leaves the old set untouched.
int bc_write_files_atomic(bc_ctx *ctx, int n, const char *const *paths,
                          const char *const *texts);

// ---------------------------------------------------------------------------
// Shapes
// ---------------------------------------------------------------------------
// A shape entry is a fixed size, or a run-time dim (declared `dim T <= 2048`):
// then sym[i] = 1 + the dim's index in graph->dims and d[i] holds its bound.
// Zero-initialised shapes are fully fixed.  Sizes derived from a bounded
// shape (workspace, planning) use the bounds; code takes the actual values.
typedef struct bc_shape {
  int rank;
  int64_t d[BC_MAX_RANK];
  int16_t sym[BC_MAX_RANK];
} bc_shape;

int64_t bc_shape_numel(const bc_shape *s);           // at the bounds
bool bc_shape_eq(const bc_shape *a, const bc_shape *b); // same sizes and same run-time dims
// Whether a broadcasts to full: a equals full, is a suffix of it ([T, D] or
// [D] of [B, T, D]: sizes and run-time dims), or is [1].
bool bc_shape_broadcasts(const bc_shape *a, const bc_shape *full);
bool bc_shape_fixed(const bc_shape *s);                 // no run-time dim
// "[1, 128, 512]" into buf (at least 96 bytes); a run-time dim prints as
// "T<=128".
const char *bc_shape_str(const bc_shape *s, char *buf, size_t n);

// ---------------------------------------------------------------------------
// Graph IR
//
// A graph is a straight-line program: nodes are stored in execution order
// (the parser emits them in a valid topological order; passes keep it).
// Each node reads values and defines new ones (SSA: a value is written by
// exactly one node). Source-level rebinding (`xd = Add(xd, a)`) just makes
// the name point at a new value.
// ---------------------------------------------------------------------------
typedef enum {
  BC_OP_ADD,           // out0 = alpha*in0 + beta*in1 (fuse-scale, fuse-act:
                       //   alpha*(in2 . act0(in0)) + beta*(in3 . act1(in1)))
  BC_OP_LAYERNORM,     // out0 = (in0 - mean) / sqrt(var + eps) * w + b  (per last-dim row)
  BC_OP_ATTENTION,     // out0 = MHA(in0): packed QKV proj, softmax(QK^T/sqrt(dh)+mask)V, out proj
  BC_OP_FFN,           // out0 = act(in0 W1^T + b1) W2^T + b2
  BC_OP_LINEAR,        // out0 = in0 W^T + b   (W: (out, D)); changes the last dim
  BC_OP_RMSNORM,       // out0 = in0 / sqrt(mean(in0^2) + eps) * w      (per last-dim row)
  // Attention's input slots: in[0] queries x [B, T, D]; in[1] keys/values
  // source kv [B, S, D] for cross-attention (-1: self-attention); in[2]
  // lengths [B] of x (-1: none): keys (self) past it get zero weight and
  // query rows past it are written as zeros; in[3] kv_lengths [B] of kv
  // (cross-attention only, -1: none).  nin may be 1 when all are absent.
  // Produced by passes (never written in a graph file):
  // The fused norms normalise with RMSNorm instead of LayerNorm when node->rms.
  BC_OP_ADD_LN,        // s = alpha*in0 + beta*in1; out0 = LN(s); out1 = s (optional, -1 if unused);
                       // in2, in3: optional scales of in0, in1 (fuse-scale), 1 or D values
  BC_OP_DUAL_ADD_LN,   // ResiDual: out0 = alpha*in0 + beta*in2  (xd += u)
                       //           out1 = LN(alpha2*in1 + beta2*in2)   (xa = LN(xa + u))
  // Written in graph files again:
  BC_OP_MUL,           // out0 = in0 * in1, one of them broadcast (a suffix of the other's shape, or [1])
  BC_OP_EMBEDDING,     // out0[b, t, :] = scale * W[in0[b, t], :]; in0 a tokens input [B, T] (int32 ids)
  BC_OP_POSITIONS,     // out0 = in0 + PE[pos]: a learned table (param 0, (max, D)) or the sinusoid
  BC_OP_DROPOUT,       // out0 = in0 (inference); training: mask(seed, step, node, e) * in0 / (1 - p)
  // Losses (ops/loss.c): out0 a scalar (rank 0, one float).
  BC_OP_CROSS_ENTROPY, // out0 = mean over kept rows of -log softmax(in0)[in1] (label smoothing);
                       // in0 logits [B, T, V] or [N, V]; in1 a tokens input [B, T] (or [1, N]) of targets
  BC_OP_MSE,           // out0 = mean((in0 - in1)^2); in1 a float value of in0's shape
  BC_OP_PARAM,         // out0 = param 0 (a learned tensor as a value; no inputs; ops/param.c)
  BC_OP_ACT,           // out0 = act(in0) elementwise (bc_unary; ops/act.c)
  BC_OP_SOFTCAP,       // out0 = cap * tanh(in0 / cap) (Gemma 2's logit soft-cap)
  BC_OP_COUNT
} bc_op;

// FFN activations.  The gated ones (swiglu: silu, geglu: exact gelu) apply
// to the gate projection and multiply the up projection: down(act(gate x) * up x).
typedef enum { BC_ACT_RELU, BC_ACT_GELU, BC_ACT_GELU_TANH, BC_ACT_SWIGLU, BC_ACT_GEGLU,
               BC_ACT_GEGLU_TANH,  // gated, tanh gelu (Gemma's gelu_pytorch_tanh; issue 23)
               BC_ACT_COUNT } bc_act;
// Positions kinds (ops/positions.c): a learned table <params>.weight (max, D)
// (GPT-2, BERT), or the fixed sinusoid of "Attention Is All You Need".
typedef enum { BC_POS_LEARNED, BC_POS_SINUSOIDAL } bc_pos_kind;
bool bc_act_gated(bc_act a);
// The activations of the Act node (ops/act.c): one function of one element.
typedef enum { BC_UN_RELU, BC_UN_GELU, BC_UN_GELU_TANH, BC_UN_SILU, BC_UN_SIGMOID, BC_UN_TANH,
               BC_UN_COUNT } bc_unary;
const char *bcI_unary_name(bc_unary u);       // "relu", ..., "tanh"

// Parameter slots per op, in this order (-1 where absent: LayerNorm with
// affine=false, any bias with bias=false, RMSNorm's bias).  Shapes are the
// PyTorch (out, in) ones; a node with in_out stores every matrix (in, out).
// With H heads, KV kv_heads and head width dh (head_dim=, default D/H; see
// bc_head_dim), the Q projection has H*dh rows and a K/V projection KV*dh.
//   LAYERNORM, RMSNORM, ADD_LN, DUAL_ADD_LN: [weight (D), bias (D)]
//   ATTENTION: [0 Q weight (H dh, D), or the packed Q|K|V weight (D + 2 KV dh, D)
//               (in_proj_weight, or GPT-2's c_attn; packed only when dh = D/H), 1 its bias,
//               2 out weight (D, H dh), 3 out bias (D),
//               4 K weight (KV dh, D), 5 K bias, 6 V weight (KV dh, D), 7 V bias]
//               Slots 4..7 are used only with separate projections (q=, k=, v=).
//               8 q_norm weight (dh, or H dh with qk_norm_per_head=false), 9 its bias
//               (layernorm), 10 k_norm weight (dh, or KV dh), 11 its bias,
//               12 head_scale (H)   (qk_norm=, head_scale=true; issue 23)
//   FFN:       [0 up weight (F, D), 1 up bias (F), 2 down weight (D, F), 3 down bias (D),
//               4 gate weight (F, D), 5 gate bias (F)]   (gate: gated activations only)
//   LINEAR:    [weight (K, D), bias (K)]
//   EMBEDDING: [weight (V, D)]
//   POSITIONS: [weight (max, D)] (kind=learned; none for kind=sinusoidal)
#define BC_MAX_NODE_PARAMS 13
#define BC_MAX_NODE_IN 4
#define BC_MAX_NODE_OUT 2
#define BC_MAX_NODE_SCRATCH 3

typedef struct bc_node {
  int id;                       // index in graph->nodes
  bc_op op;
  int nin, nout;
  int in[BC_MAX_NODE_IN];       // value ids
  int out[BC_MAX_NODE_OUT];     // value ids, -1 if absent
  int param[BC_MAX_NODE_PARAMS];// param ids, -1 if absent
  // Attributes: one struct per op family, in a union (only the node's op's
  // is meaningful; bcI_add_node sets its defaults from the op table, and the
  // table's same_attrs compares them).
  union {
    struct {                    // ADD, LAYERNORM, RMSNORM, ADD_LN, DUAL_ADD_LN
      double alpha, beta;       // ADD, ADD_LN, DUAL_ADD_LN (first add); default 1, 1
      double alpha2, beta2;     // DUAL_ADD_LN second add; default 1, 1
      double eps;               // the norms; default 1e-5 (RMSNorm's graph-file default 1e-6)
      bool rms;                 // ADD_LN, DUAL_ADD_LN: the norm is RMSNorm (fused from RMSNORM)
      // RMSNorm (and the fused forms with rms): y = x / rms * (offset + w),
      // Gemma's `1 + weight` with offset=1; default 0.
      double offset;
      // ADD, ADD_LN (the fuse-act pass): 1 + the bc_unary applied to input
      // 0 / 1 before its scale and the sum (an Act folded in); 0: none.
      int8_t opact[2];
    };
    struct {                    // ATTENTION
      int64_t heads;
      int64_t kv_heads;         // heads of K and V (grouped-query); = heads by default
      bool causal;
      bool rope;                // rotary positions (HF LLaMA rotate_half) on Q and K
      double rope_theta;        // RoPE base, default 10000
      // Issue 23.  qk_norm: 0 none, 1 RMSNorm, 2 LayerNorm of q and k after
      // the projections and before RoPE, per head (weights [dh]) or over the
      // whole projection (qk_norm_per_head false: [D] and [KV*dh]), epsilon
      // qk_norm_eps (params slots 8..11).
      int qk_norm;
      bool qk_norm_per_head;
      double qk_norm_eps;
      int64_t window;           // sliding window W (causal): key j seen by query i iff i-W < j <= i; 0 none
      double softcap;           // scores s -> c*tanh(s/c) before the mask and softmax; 0 none
      double scale;             // the query scaling (multiplies q.k); 0: 1/sqrt(dh)
      bool head_scale;          // NormFormer: each head's output times a learned scale (slot 12)
      int64_t head_dim;         // head width (head_dim=); 0: D/heads (bc_head_dim)
    };
    struct {                    // FFN, LINEAR
      int64_t hidden;           // FFN hidden width; LINEAR output width
      bc_act act;               // FFN; default relu
    };
    struct {                    // EMBEDDING
      int64_t vocab;            // V: ids are 0..V-1
      int64_t emb_dim;          // D: the output's last dim
      double emb_scale;         // multiplies the gathered rows (a float32 value); default 1
    };
    struct {                    // POSITIONS
      bc_pos_kind pos_kind;     // default learned
      int64_t pos_max;          // learned: the table's rows P (positions 0..P-1); 0 sinusoidal
    };
    struct {                    // ACT
      bc_unary unary;           // default relu
    };
    struct {                    // CROSS_ENTROPY, MSE
      int64_t loss_vocab;       // CROSS_ENTROPY: V, the logits' last dim (targets 0..V-1)
      int64_t ignore_index;     // CROSS_ENTROPY: a target equal to it is left out; default -100
      double smoothing;         // CROSS_ENTROPY: label_smoothing in [0, 1]; default 0
    };
    struct {                    // SOFTCAP
      double cap;               // c of c * tanh(x / c), > 0
    };
  };
  bool in_out;                  // ATTENTION, FFN, LINEAR: matrices stored (in, out) (GPT-2 Conv1D)
  // Dropout's probability p (0 <= p < 1; 0: none), active only in training
  // (bc_train_rng): DROPOUT's own, ATTENTION's on the softmax weights, FFN's
  // on the hidden activation.  Default 0 (DROPOUT's graph-file default 0.1).
  double dropout;
  // The node's index as created (bcI_add_node: the graph file's call order),
  // kept by the passes that renumber nodes: the `node` of the dropout key.
  int key_node;
  // Node-local temporaries (e.g. ATTENTION's packed QKV, FFN's hidden),
  // allocated by the memory planner like any value but live only during
  // this node. Filled by bcM_plan (value ids, kind BC_VAL_SCRATCH).
  int nscratch;
  int scratch[BC_MAX_NODE_SCRATCH];
  bc_loc loc;                   // the graph-file call this node came from
  const char *fused_from;       // set by passes: human note, e.g. "Add@14 + LayerNorm@15"
} bc_node;

// An Attention node's head width for model width D: head_dim= when given,
// else D/heads (issue 23 follow-up: Qwen3 and Gemma 2 use a head width
// independent of D).  Its query projection is heads * this wide.
static inline int64_t bc_head_dim(const bc_node *n, int64_t D) {
  return n->head_dim > 0 ? n->head_dim : n->heads > 0 ? D / n->heads : 0;
}

typedef enum { BC_VAL_INPUT, BC_VAL_TEMP, BC_VAL_SCRATCH } bc_valkind;
// Element type of a value: float32 activations, or int32 valid lengths
// (`input len : lengths[B]`, one per batch row, 1..the sequence axis).
// Token ids (`input ids : tokens[B, T]`) are BC_VT_I32 too, with `tokens`
// set: rank 2, read by Embedding (ids, each 0..V-1) or by CrossEntropy
// (targets, each 0..V-1 or its ignore_index): bcI_tokens_vocab, bcI_tokens_ignore.
typedef enum { BC_VT_F32, BC_VT_I32 } bc_vtype;

typedef struct bc_value {
  int id;
  const char *name;       // source name it was bound to ("xa"), "" if anonymous
  bc_shape shape;
  bc_valkind kind;
  bc_vtype type;          // BC_VT_I32 only for lengths and tokens inputs
  bool tokens;            // a tokens input (BC_VT_I32, [B, T] ids); false: lengths
  int def;                // defining node id, -1 for an input
  bool is_output;         // a graph output (lives in caller memory)
  // Set by the planner (plan.c):
  int first_use, last_use;// live interval in node indices [def, last reader]
  int64_t offset;         // arena offset in floats; -1 = caller memory (x or y)
  int alias;              // value whose storage this one reuses in place, -1
} bc_value;

// A per-parameter initialisation override written in the graph file
// (`init=normal(0.02)`, `init.o=xavier(0.87)`; docs/language.md,
// "Initialisation overrides").  It wins over every seeded scheme
// (bcW_init_random, `blockc train --init`) and never touches weights read
// from a file.  arg: normal's std, uniform's bound a, xavier's gain.
typedef enum {
  BC_INIT_NONE,           // no override: the scheme's value
  BC_INIT_ZEROS, BC_INIT_ONES,
  BC_INIT_NORMAL,         // N(0, arg^2)
  BC_INIT_UNIFORM,        // U(-arg, arg)
  BC_INIT_XAVIER,         // U(-a, a), a = arg * sqrt(6 / (fan_in + fan_out))
  BC_INIT_XAVIER_NORMAL,  // N(0, s^2), s = arg * sqrt(2 / (fan_in + fan_out))
  BC_INIT_CONST,          // every element arg (any finite float: const(1e-4), const(-1))
  BC_INIT_COUNT
} bc_init_kind;
typedef struct bc_init {
  bc_init_kind kind;
  double arg;
  bc_loc loc;             // the scheme in the graph file
} bc_init;

typedef struct bc_param {
  const char *name;       // full PyTorch-style name: "layers.0.self_attn.in_proj_weight"
  bc_shape shape;
  bc_loc loc;             // first use
  bc_init init;           // the graph file's override (kind BC_INIT_NONE: none)
  // Read by a Param node (a learned scale): without an override, the seeded
  // schemes (bcW_init_random, `train --init`) start it at ones, any rank.
  bool unit;
  // Overrides of the Q, K and V blocks of a packed projection (Attention's
  // init.q / init.k / init.v with params= or qkv=): block j is rows
  // [part_at[j], part_at[j] + part_n[j]) of the (out, in) matrix, or those
  // columns of an (in, out) one (part_cols).  Drawn after `init`.
  bc_init part[3];
  int64_t part_at[3], part_n[3];
  bool part_cols;
} bc_param;

typedef struct bc_dim {
  const char *name;
  int64_t value;          // the value; for a run-time dim, its bound
  bc_loc loc;
  bool overridden;        // set from the command line with -D
  int rt;                 // run-time dim (`dim T <= 2048`): its index among the
                          // graph's run-time dims (the order of `rt` arrays); -1 if fixed
} bc_dim;

// The run of identical layers (layers.c): trips t = 0 .. count-1 are nodes
// [first + t*period, first + (t+1)*period), identical up to the parameters
// they read, which are [param0 + t*nparams, param0 + (t+1)*nparams), named
// <stack>.<index0 + t>.<member> with one member list for every trip.  Every
// value a trip writes is in the arena, except that outputs of the last trip
// may be graph outputs (a Post-LN stack's last layer writes y).
// count == 0: no run (a graph without loops, or layers that all differ).
typedef struct bc_layers {
  int first, period, count;
  int param0, nparams;
  int index0;             // the layer index of trip 0 in the parameter names
  const char *stack;      // "layers" (ctx memory)
} bc_layers;

typedef struct bc_graph {
  bc_ctx *ctx;
  const char *model;      // `model NAME`
  const char *path;       // graph file
  bc_dim *dims; int ndims;
  bc_value *vals; int nvals, capvals;
  bc_node *nodes; int nnodes, capnodes;
  bc_param *params; int nparams, capparams;
  int *param_index;       // open-addressing hash of param names -> id + 1 (0 empty)
  int param_index_cap;    // power of two; the index covers all params when != 0
  // Inputs and outputs, in declaration order.  A graph has at least one of
  // each; `input` and `output` are inputs[0] and outputs[0] (bcI_verify
  // keeps them in step, and fills the lists from them for hand-built graphs).
  int *inputs; int ninputs;
  int *outputs; int noutputs;
  const char **output_names;  // the name each output was bound to ("y")
  int input;
  int output;
  int nrt;                // number of run-time dims (dims with rt >= 0)
  // Memory plan (plan.c)
  int64_t arena_floats;       // workspace size in floats
  int64_t arena_lower_bound;  // max over time of the sum of live sizes (floats)
  bc_layers layers;           // the layer run, laid out periodically (bcI_find_layers)
  const char *layers_dropped; // why a run found could not be laid out so (ctx memory), NULL
  bool planned;
  // The element type of the packed copy of the GEMM weights (`--weight-dtype`,
  // bc_weight_type: bcrt's BCRT_WT_* numbers), set before compiling.  F32 (0,
  // the default) packs only the matrices a few-row product reads and leaves
  // the others to cblas on the parameters; any other type packs every matrix
  // of a Linear / Attention / FFN (an LM head is a Linear), every product
  // reads the packed copy, and the float parameters are only what
  // <model>_pack converts (bcY_round_weights makes them the values it keeps).
  int weight_type;
} bc_graph;

// The weight types of bc_graph.weight_type, by the one table of their names
// (layout.c): "f32", "bf16", "q8_0", "q4_0", "f16" (the runtime's numbers:
// f16 came last).
typedef enum { BC_WT_F32, BC_WT_BF16, BC_WT_Q8_0, BC_WT_Q4_0, BC_WT_F16, BC_WT_COUNT } bc_weight_type;
const char *bc_weight_type_name(int wt);       // NULL when wt is not one
int bc_weight_type_parse(const char *name);    // -1 when name is not one

// IR building (ir.c). All return ids; -1 on OOM/limit (error reported).
bc_graph *bcI_new(bc_ctx *ctx);
int bcI_add_value(bc_graph *g, const char *name, bc_shape shape, bc_valkind kind);
int bcI_add_node(bc_graph *g, bc_op op, bc_loc loc);   // attrs defaulted; in/out/param = -1
int bcI_add_param(bc_graph *g, const char *name, bc_shape shape, bc_loc loc); // dedups by name; reports shape conflicts
int bcI_find_param(const bc_graph *g, const char *name);
const char *bcI_op_name(bc_op op);            // "Add", "LayerNorm", ... "AddLayerNorm", "DualAddLayerNorm"
// Registers value v as the next graph input / output (name: the output's
// binding name).  -1 on OOM (reported).
int bcI_add_input(bc_graph *g, int v);
int bcI_add_output(bc_graph *g, int v, const char *name);
bool bcI_is_output(const bc_graph *g, int v);
// Whether a node of g drops in training (Dropout, or dropout= on Attention
// or FFN, with p > 0): its emitted backward is then <model>_backward_ex.
bool bcI_has_dropout(const bc_graph *g);
// Lengths and tokens inputs (both BC_VT_I32; tokens has value.tokens set).
bool bcI_is_lengths(const bc_graph *g, int v);
bool bcI_is_tokens(const bc_graph *g, int v);
// The ids tokens input v may hold: 0..V-1 with V the smallest vocab of the
// nodes reading it (the op table's `tokens` rows); 0 when none reads it.
int64_t bcI_tokens_vocab(const bc_graph *g, int v);
// Whether tokens input v holds CrossEntropy targets (the op table's `targets`
// rows read it), and then the ignore_index its ids may also equal.
bool bcI_tokens_ignore(const bc_graph *g, int v, int64_t *ignore_index);
// Whether v lives in the caller's memory (a graph input or output), not the arena.
bool bcI_in_caller_memory(const bc_graph *g, int v);
// A value seen as [B, T, D]: rank 3 as is, rank 2 [T, D] meaning B = 1,
// rank 1 [D] (a Param's vector) B = T = 1.
// False for other ranks, sizes outside 1..BC_MAX_DIM or over BC_MAX_ELEMS.
typedef struct bc_btd { int64_t b, t, d; } bc_btd;
bool bcI_as_btd(const bc_shape *s, bc_btd *v);
// The shape s at run time: every run-time dim replaced by rt[its index].
bc_shape bcI_shape_at(const bc_graph *g, const bc_shape *s, const long *rt);

// Layers (layers.c).  The layer index of a parameter name: its first
// all-digits dotted component after the first ("layers.7.linear1.weight":
// 7, the stack "layers" is name[0 .. *stack_len)); -1 when there is none.
int bcI_layer_of_name(const char *name, size_t *stack_len);
// The member of a layer parameter: the name after <stack>.<index>. ("linear1.weight").
const char *bcI_layer_member(const char *name, size_t stack_len);
// Finds the longest run of identical layers (see bc_layers and layers.c);
// L->count = 0 when there is none.  BC_ENOMEM on OOM (reported).
int bcI_find_layers(const bc_graph *g, bc_layers *L);
// The value trip t of g->layers writes at node j (of the trip), slot k
// (outputs, then scratch); -1 when absent or out of range.
int bcI_layer_value(const bc_graph *g, int t, int j, int k);
// Whether the parameters of "trip" t of g->layers (t < 0 or >= count: a
// layer before or after the run, which may differ in its nodes) exist and
// have the run's members and shapes: the weights struct's layer array
// covers them too.
bool bcI_layer_params_at(const bc_graph *g, int t);
// The stream v (a value from before the run) feeds into trip 0 of
// g->layers: the trip-0 value the template trip (1) reads where trip 0
// reads v; -1 when trip 0 reads v in no such place.
int bcI_layer_carried_to(const bc_graph *g, int v);
// What trip 0 reads where the template trip reads v (a trip-0 value: the
// stream carried into trip 1); -1 when the template does not read v.
int bcI_layer_carried_from(const bc_graph *g, int v);

// The graph-file spelling and arity of an op: part of its row in the op
// table (compiler/ops.h, compiler/ops/), as Lua's lopcodes; the row also
// holds the op's function for every stage, so that stages keep no switch on
// the op of their own.
// BC_AT_WORD: a bare identifier (kind=learned) the op's build checks
// against its choices (bcP_attr_vals.word).
// BC_AT_SHAPE: a fixed shape [d0, d1, ...] (Param's shape=; bcP_attr_vals.shape).
typedef enum { BC_AT_INT, BC_AT_FLOAT, BC_AT_BOOL, BC_AT_ACT, BC_AT_PATH, BC_AT_PATH2,
               BC_AT_VALUE, BC_AT_LAYOUT, BC_AT_WORD, BC_AT_SHAPE } bc_attr_type;
typedef struct bc_attr_info {
  const char *name;        // as written in a graph file
  bc_attr_type type;       // BC_AT_VALUE: a value name (kv=mem, lengths=len)
  bool required;
  int slot;                // BC_AT_VALUE: the input slot it fills
} bc_attr_info;
#define BC_MAX_ATTRS 32
typedef struct bc_op_info {
  const char *name;        // "Attention"
  bool in_language;        // written in graph files (fused ops are not)
  int npos;                // positional value arguments in a graph file
  int nin_min, nin_max;    // input slots (optional slots may hold -1)
  int nout_min, nout_max;  // outputs (optional outputs may hold -1)
  const char *doc;         // one line
  bc_attr_info attrs[BC_MAX_ATTRS];
} bc_op_info;
const bc_op_info *bcI_op_info(bc_op op);      // NULL for an invalid op
const char *bcI_act_name(bc_act act);         // "relu", "gelu", "gelu_tanh"
int64_t bcI_param_count(const bc_graph *g);   // total scalar parameters
// Recomputes def / use information; checks SSA and topological order.
// Returns BC_EINTERNAL with a message when a pass broke an invariant.
int bcI_verify(bc_graph *g);
// Deep copy (passes work on copies so dump --after shows each stage).
bc_graph *bcI_clone(const bc_graph *g);
// The stable text form printed by `blockc dump`.
void bcI_dump(const bc_graph *g, FILE *out);

// ---------------------------------------------------------------------------
// Front end (lex.c, parse.c)
// ---------------------------------------------------------------------------
typedef enum { BC_TK_IDENT, BC_TK_INT, BC_TK_FLOAT, BC_TK_PUNCT, BC_TK_EOF } bc_tokkind;

typedef struct bc_token {
  bc_tokkind kind;
  const char *p;      // points into the source text
  int len;
  int64_t ival;       // BC_TK_INT
  double fval;        // BC_TK_INT and BC_TK_FLOAT
  bc_loc loc;
} bc_token;

// Splits src into tokens (ctx memory); the last is BC_TK_EOF.
int bcL_tokenize(bc_ctx *ctx, const bc_src *src, bc_token **toks, int *ntoks);
bool bcL_is(const bc_token *t, const char *s);   // punctuator or identifier equal to s

typedef struct bc_define { const char *name; int64_t value; } bc_define;  // -D NAME=VALUE

// Parses, unrolls and shape-checks the graph file at path. On error reports
// the first problem (file:line:col + caret) and returns NULL.
bc_graph *bcP_parse_file(bc_ctx *ctx, const char *path,
                         const bc_define *defs, int ndefs);
bc_graph *bcP_parse_string(bc_ctx *ctx, const char *name, const char *text,
                           const bc_define *defs, int ndefs);

// ---------------------------------------------------------------------------
// Weights (weights.c): one float array per graph parameter.
// ---------------------------------------------------------------------------
typedef struct bc_weights {
  int n;                  // == graph->nparams
  float **p;              // p[i]: numel(params[i].shape) floats (malloc'ed);
                          // p[n]: the packed slot every compiled entry reads
                          // after the parameters (bc_run_fn): NULL, or
                          // borrowed from bcD_pack (never freed by bcW_free)
} bc_weights;

// Deterministic init: xavier-uniform for rank-2 params, zeros for biases,
// LayerNorm weight 1 / bias 0 (a rank-1 param named "*.weight" of a norm).
// Every parameter with an init override (bc_param.init) is then drawn again
// by bcW_apply_inits.
int bcW_init_random(bc_ctx *ctx, const bc_graph *g, uint64_t seed, bc_weights *w);
// Refills every parameter that has an init override in the graph file, each
// from its own bc_rng seeded with seed ^ bc_fnv1a(BC_FNV_OFFSET, name), then
// each overridden block of a packed matrix (bc_param.part) from one seeded
// with seed ^ fnv1a(name + "#q" | "#k" | "#v"): the other parameters keep
// their values, and the override is the same whatever scheme filled w
// before.  Called by bcW_init_random and after `blockc train --init
// torch|gpt2`; never for weights loaded from a file.  BC_ENOMEM (reported).
int bcW_apply_inits(bc_ctx *ctx, const bc_graph *g, uint64_t seed, bc_weights *w);
// The spelling of an override ("normal(0.02)", "xavier", "zeros") into buf.
const char *bcW_init_str(const bc_init *in, char *buf, size_t n);
// Loads and checks every parameter by name from a safetensors file.
int bcW_load(bc_ctx *ctx, const bc_graph *g, const char *path, bc_weights *w);
// How a checkpoint is matched to the graph (`blockc run` flags):
typedef struct bc_load_opts {
  bool allow_extra;       // --allow-extra: tensors no parameter uses are ignored
  const char *prefix;     // --weights-prefix P: parameter NAME is read from the
                          // tensor "P" NAME, or, if NAME starts with P, from NAME
                          // without it (NULL: names as they are)
  int64_t max_memory;     // bcW_check_memory's limit (0: BC_MAX_MEMORY)
  const char *api;        // the API function that set these options, named in
                          // the hints instead of the CLI's flags (NULL: the CLI)
  int ignored;            // out: tensors ignored under allow_extra
  int tied;               // out: unused tensors accepted as byte-identical
                          // copies of used ones (a tied head saved twice)
} bc_load_opts;
// Checks the parameters' memory first (bcW_check_memory).  Without
// allow_extra, unused tensors are errors: a few are listed, then
// how many there are and the flag; except a tied copy of a tensor a
// parameter read (bcS_is_copy: lm_head.weight saved beside the
// transformer.wte.weight a tied head reads): that is the same tensor.  Shape mismatches end with a one-line
// diagnosis when the whole file looks like other dims ("try -D D=64").
int bcW_load_opts(bc_ctx *ctx, const bc_graph *g, const char *path, bc_load_opts *o,
                  bc_weights *w);
// What one command allocates besides the parameters, for bcW_check_memory_use.
typedef struct bc_mem_use {
  const char *what;        // who needs it, in the message (NULL: "the run")
  bool forward;            // the planned workspace and the packed copy (once planned)
  int64_t cache_bytes;     // the step entry's KV cache (bcY_cache_bytes)
  int64_t backward_bytes;  // the emitted backward's workspace (bc_compiled.bwd_ws_bytes)
  bool grads;              // a float gradient per parameter (dw)
  double tape_bytes;       // the reference backward's tape (bcR_tape_bytes)
} bc_mem_use;
// Memory a command needs, counted before anything is allocated: parameter
// bytes plus what u lists (u NULL: the workspace and the packed weights
// once the graph is planned, as for a forward run).  limit <= 0 means
// BC_MAX_MEMORY.  Over it: BC_ENOMEM and a message giving each part and
// the flag (--max-memory) that raises the limit.  Every command of the CLI
// calls it with what it is about to allocate.
int bcW_check_memory_use(bc_ctx *ctx, const bc_graph *g, const bc_mem_use *u, int64_t limit);
// bcW_check_memory_use(ctx, g, NULL, limit).
int bcW_check_memory(bc_ctx *ctx, const bc_graph *g, int64_t limit);
void bcW_free(bc_weights *w);

// Deterministic RNG (splitmix64-seeded xoshiro256**), used for weights and
// random inputs so runs are reproducible across machines.
typedef struct bc_rng { uint64_t s[4]; } bc_rng;
void bc_rng_seed(bc_rng *r, uint64_t seed);
uint64_t bc_rng_next(bc_rng *r);
double bc_rng_uniform(bc_rng *r);   // [0, 1)
double bc_rng_normal(bc_rng *r);    // N(0, 1)

// ---------------------------------------------------------------------------
// File formats (safetensors.c, npy.c)
// ---------------------------------------------------------------------------
typedef enum { BC_DT_F32, BC_DT_F16, BC_DT_BF16, BC_DT_OTHER } bc_dtype;

typedef struct bc_st_tensor {
  const char *name;
  bc_dtype dtype;
  const char *dtype_name;     // as written in the file ("F32", "I64", ...)
  int rank;                   // up to 8 in the file format
  int64_t shape[8];
  uint64_t begin, end;        // byte offsets into the data section (GGUF: into the file)
  int view;                   // GGUF: its entry in bc_st_file.ggv
  bool owned_name;            // GGUF: name is a mapped copy (freed with the file)
} bc_st_tensor;

struct bcrt_error;    // runtime/blockc_rt.h
struct bcrt_source;
struct bcrt_st_file;
struct bcrt_gguf_file;
struct bc_gg_view;
typedef struct bc_st_file {
  const char *path;
  int ntensors;
  bc_st_tensor *tensors;      // sorted by name: the runtime reader's table
  uint64_t data_off;          // file offset of the data section (8 + header length)
  uint64_t data_len;          // bytes in the data section
  uint64_t size;              // the file's size
  FILE *fp;                   // the open file; tensors are read on demand
  struct bcrt_source *src;    // fp, for the runtime's reader (runtime/blockc_rt.h)
  struct bcrt_st_file *rt;    // the runtime's view of the file (safetensors)
  struct bcrt_gguf_file *gg;  // or: a GGUF file (gguf.c), rt NULL
  struct bc_gg_view *ggv;     // GGUF: per tensor, the file's tensor and its transform
} bc_st_file;

// The bytes of both formats are parsed by the runtime's readers
// (runtime/blockc_rt.c), the ones vendored programs ship; these functions
// open the file (a regular file only), pass blockc's limits, and turn the
// runtime's bcrt_error into "path: error: <reason>" (bcS_rt_error).
int bcS_rt_error(bc_ctx *ctx, const char *path, const struct bcrt_error *e);  // in ctx.c
// Opens path (regular files only) as a runtime source; NULL after reporting.
FILE *bcS_open_source(bc_ctx *ctx, const char *path, struct bcrt_source *src);

// Opens a safetensors file and fully validates its header (JSON, dtypes,
// shapes vs byte sizes, no escaped NUL in names, and, as the format
// requires, tensors that tile the data section exactly: no overlap, no gap,
// no trailing bytes) before reading any tensor data.  Only the 8-byte length
// and the header are read here; bcS_read_f32 reads one tensor on demand.
int bcS_open(bc_ctx *ctx, const char *path, bc_st_file **out);
const bc_st_tensor *bcS_find(const bc_st_file *f, const char *name);
// Converts a tensor (F32/F16/BF16) to float32 into dst (numel floats).
int bcS_read_f32(bc_ctx *ctx, const bc_st_file *f, const bc_st_tensor *t, float *dst);
// *same: a is a tied copy of b: the same dtype, shape and bytes, and not
// constant (bcrt_st_is_copy).
int bcS_is_copy(bc_ctx *ctx, const bc_st_file *f, const bc_st_tensor *a, const bc_st_tensor *b,
                bool *same);
void bcS_close(bc_st_file *f);

// GGUF files (gguf.c): bcS_open opens one (by its magic) as a bc_st_file
// whose tensors carry the names and layouts of the Hugging Face checkpoint
// it was converted from (general.architecture llama and gpt2; others keep
// their names), converted to float32 from any type the runtime reads; the
// bcS_ functions dispatch to these.
int bcF_open_view(bc_ctx *ctx, bc_st_file *f);
const bc_st_tensor *bcF_find(const bc_st_file *f, const char *name);
int bcF_read_f32(bc_ctx *ctx, const bc_st_file *f, const bc_st_tensor *t, float *dst);
int bcF_is_copy(bc_ctx *ctx, const bc_st_file *f, const bc_st_tensor *a, const bc_st_tensor *b, bool *same);
void bcF_close_view(bc_st_file *f);
bool bcF_is_gguf(const char *path);   // the file starts with GGUF's magic
// The user's defines (copied) followed by the dims the file states (D, N, H,
// KV, F, P from its metadata; V from token_embd's rows) for each dim g
// declares and the user did not set; *out is bc_alloc'ed.
int bcF_gguf_defs(bc_ctx *ctx, const char *path, const bc_graph *g, const bc_define *user, int nuser,
                  bc_define **out, int *nout);
// Sets every LayerNorm/RMSNorm's eps and every rope Attention's theta to
// the file's values (<arch>.attention.layer_norm[_rms]_epsilon,
// <arch>.rope.freq_base) where it states them; what changed goes to note.
int bcF_gguf_apply(bc_ctx *ctx, const char *path, bc_graph *g, char *note, size_t nnote);
// The weight type that keeps the file's matrices as they are: when every
// matrix g->weight_type would pack (bcY_pack_layout's params, found by
// name, prefix P NAME too) is stored as one of Q8_0, Q4_0 or BF16, that
// type; else F32 (F32 / F16 files, mixed or other types such as Q4_K),
// with the reason in note ("" when there is nothing to say).
int bcF_gguf_weight_type(bc_ctx *ctx, const char *path, const bc_graph *g, const char *prefix,
                         int *wt, char *note, size_t nnote);
// Writes w, the weights of g, to path as a GGUF v3 file llama.cpp reads
// (atomically: nothing at path on any error), under the first family of the
// name table (llama, gpt2) that names every parameter, in the layouts that
// family's converter stores (reading it back undoes them: bcW_load gives
// exactly w's floats back, rounded through g->weight_type).  The matrices
// g->weight_type packs (bcY_pack_layout's params, a tied head included) are
// F32 / BF16 / F16 / Q8_0 / Q4_0 tensors in ggml's blocks, everything else F32;
// the metadata states the dims, the norms' eps and rope theta that
// bcF_gguf_defs / bcF_gguf_apply read.  A parameter no family names, or a
// quantized matrix whose rows are not whole blocks of 32, is refused.
int bcF_write_gguf(bc_ctx *ctx, const char *path, const bc_graph *g, const bc_weights *w);
// More metadata for a GGUF file being written: nkv serialized entries (key,
// value type, value) in p[0..n); n_tokens the length of the
// tokenizer.ggml.tokens among them (-1: none); what names the source in
// messages.  Free with bcF_gguf_meta_free.
typedef struct bc_gguf_meta {
  unsigned char *p;
  size_t n;
  int nkv;
  int64_t n_tokens;
  char what[512];
} bc_gguf_meta;
struct blockc_tokenizer_ggml;
// The tokenizer.ggml.* entries of v (blockc_tok.h: blockc_tokenizer_to_ggml)
// as llama.cpp's gguf-py writes them: model, pre, tokens (strings), scores
// (float32), token_type (int32), merges (strings), bos / eos / unknown /
// padding_token_id (uint32, when >= 0), add_bos_token / add_eos_token /
// add_space_prefix (bool, when >= 0).
int bcF_gguf_meta_tokenizer(bc_ctx *ctx, const struct blockc_tokenizer_ggml *v, const char *what, bc_gguf_meta *m);
// Every tokenizer.* entry of the GGUF file at path, as it is (none: nkv 0).
int bcF_gguf_meta_copy(bc_ctx *ctx, const char *path, bc_gguf_meta *m);
void bcF_gguf_meta_free(bc_gguf_meta *m);
// bcF_write_gguf with extra's entries after the model's (extra NULL or
// empty: none).  Its tokens (n_tokens >= 0) must be the rows of the token
// embedding (token_embd.weight), else an error before anything is written.
int bcF_write_gguf_meta(bc_ctx *ctx, const char *path, const bc_graph *g, const bc_weights *w,
                        const bc_gguf_meta *extra);
// Writes float32 tensors atomically (used by tests and by `blockc init`).
int bcS_write(bc_ctx *ctx, const char *path, int n, const char *const *names,
              const bc_shape *shapes, const float *const *data);
// The same with the tensors i whose half[i] is set stored as F16 (rounded to
// nearest even: `blockc weights --weight-dtype f16`, whose matrices hold
// f16 values already).
int bcS_write_f16(bc_ctx *ctx, const char *path, int n, const char *const *names,
                  const bc_shape *shapes, const float *const *data, const bool *half);
// The same with __metadata__ entries keys[i]: vals[i] after "format": "pt"
// (JSON-escaped; "format" itself is refused).
int bcS_write_meta(bc_ctx *ctx, const char *path, int n, const char *const *names,
                   const bc_shape *shapes, const float *const *data, int nmeta,
                   const char *const *keys, const char *const *vals);
// The __metadata__ of a safetensors file bcS_open accepted: up to max
// entries, keys and values decoded (malloc'ed, into keys[i] / vals[i]);
// returns the count, or -1 after reporting (I/O, out of memory).
int bcS_read_meta(bc_ctx *ctx, const bc_st_file *f, int max, char **keys, char **vals);

// .npy: float32, little-endian, C order only; anything else is rejected with
// a message saying what was found. *data is malloc'ed (caller frees).
int bcN_read(bc_ctx *ctx, const char *path, bc_shape *shape, float **data);
// The same, with the header's shape checked against `expect` (a run-time dim
// accepts 1..its bound) before the data is read: "input has shape [..] but
// <who> expects [..]".
int bcN_read_expect(bc_ctx *ctx, const char *path, const bc_shape *expect, const char *who,
                    bc_shape *shape, float **data);
// Lengths arrays: '<i4' or '<i8' (each value range-checked into int32), C
// order, rank 1..BC_MAX_RANK; same checks and messages as bcN_read.
int bcN_read_i32(bc_ctx *ctx, const char *path, bc_shape *shape, int32_t **data);
// The same with the shape checked against `expect` before any data is read.
int bcN_read_i32_expect(bc_ctx *ctx, const char *path, const bc_shape *expect, const char *who,
                        bc_shape *shape, int32_t **data);
int bcN_write(bc_ctx *ctx, const char *path, const bc_shape *shape, const float *data);

// ---------------------------------------------------------------------------
// Reference interpreter (interp.c): plain loops, double accumulation. The
// oracle for every compiled path. Works on any IR stage (fused ops too).
// ---------------------------------------------------------------------------
//
// io holds one pointer per graph input (g->inputs order: float arrays, or
// int32 lengths), then one per output (g->outputs order); rt the value of
// each run-time dim (g->nrt of them; NULL when none).  Actual shapes are
// bcI_shape_at(g, shape, rt); arrays are C-order at those sizes.  Bad run-
// time values (a dim outside 1..bound, a length outside 1..its axis) are
// BC_EINPUT with a message.
int bcR_run_io(bc_ctx *ctx, const bc_graph *g, const bc_weights *w, void *const *io,
               const long *rt);
// The single-input, single-output, fixed-size case: y = graph(x).
int bcR_run(bc_ctx *ctx, const bc_graph *g, const bc_weights *w,
            const float *x, float *y);
// Checks run-time values before a compiled or interpreted run: rt against
// the bounds, every lengths input against its axis, every token id against
// its vocab ("input ids: row 0, position 5: token id 50300 is outside
// 0..50256"; a tokens input may not be NULL).  BC_EINPUT + message.
int bcR_check_io(bc_ctx *ctx, const bc_graph *g, void *const *io, const long *rt);

// ---------------------------------------------------------------------------
// Reference backward (grad.c): reverse-mode gradients over the IR, in double
// (values, intermediates and sums), the oracle for an emitted backward.
// Works on any IR stage (fused ops too); every op of this header has one.
// ---------------------------------------------------------------------------
//
// The loss is sum over outputs k of sum(y_k * dy[k]); bcR_grad returns its
// gradient with respect to every parameter and every float input:
//   io, rt   as bcR_run_io (inputs, then output arrays, which receive y).
//   dy       one array per output at its actual shape (NULL: that output is
//            not in the loss).
//   dw       filled: dw->n = g->nparams, dw->p[i] malloc'ed with param i's
//            gradient (zeros where the loss does not reach); free with bcW_free.
//   dx       NULL, or one pointer per graph input: an array of that input's
//            actual size receives its gradient (NULL entries, and lengths
//            inputs, are skipped).
// The forward is the interpreter's maths with values kept in double, so y
// agrees with bcR_run_io to float rounding.  BC_EINPUT/BC_EINTERNAL with a
// message naming the node on failure.
int bcR_grad(bc_ctx *ctx, const bc_graph *g, const bc_weights *w, void *const *io,
             const long *rt, const float *const *dy, bc_weights *dw, float **dx);
// Dropout's generator state for a training run (the public
// blockc_train_rng): training false (or the struct absent) is the
// inference behaviour, no element dropped; else a node with dropout p > 0
// keeps element e iff u(seed, step, key_node, e) >= p (runtime/src/rng.c
// has the function).
typedef struct bc_train_rng {
  unsigned long long seed, step;
  int training;
} bc_train_rng;
// bcR_grad with dropout active per rng (NULL: none, as bcR_grad).
int bcR_grad_ex(bc_ctx *ctx, const bc_graph *g, const bc_weights *w, void *const *io,
                const long *rt, const bc_train_rng *rng, const float *const *dy, bc_weights *dw,
                float **dx);
// The same in two steps, for tools that also read the activations (analyze)
// and as the shape an emitted backward follows: a forward that keeps every
// value plus each node's intermediates (Attention: Q, K, V, softmax weights,
// heads; FFN: pre-activation; LayerNorm: row mean and 1/std), then the
// reverse walk.  A tape borrows g, w and the lengths arrays in io until it
// is freed; bcR_tape_backward may be called several times.
typedef struct bc_tape bc_tape;
int bcR_tape_forward(bc_ctx *ctx, const bc_graph *g, const bc_weights *w, void *const *io,
                     const long *rt, bc_tape **out);
int bcR_tape_forward_ex(bc_ctx *ctx, const bc_graph *g, const bc_weights *w, void *const *io,
                        const long *rt, const bc_train_rng *rng, bc_tape **out);
int bcR_tape_backward(bc_tape *t, const float *const *dy, bc_weights *dw, float **dx);
// The bytes the tape and its backward hold at once, estimated from below
// (every value and its gradient in double, the parameters widened to double
// with their double gradients; a node's saved intermediates not counted), for
// bcW_check_memory_use before bcR_grad or bcR_tape_forward; rt NULL: the
// bounds.  Doubles: exact enough, no overflow.
double bcR_tape_bytes(const bc_graph *g, const long *rt);
// Value v's contents (double, C order) and its actual shape; NULL for a
// lengths input or an id out of range.
const double *bcR_tape_value(const bc_tape *t, int v, bc_shape *shape);
void bcR_tape_free(bc_tape *t);

// ---------------------------------------------------------------------------
// Passes (passes.c) and memory planning (plan.c). A pass rewrites the graph
// in place and leaves it valid (bcI_verify passes); callers that want every
// stage (dump --after) clone first.
// ---------------------------------------------------------------------------
typedef struct bc_pass {
  const char *name;               // "fuse-add-ln", as used by `dump --after`
  const char *doc;                // one line for `dump --passes`
  int (*run)(bc_graph *g);
} bc_pass;

const bc_pass *bcO_passes(int *n);              // the pipeline, in order
const bc_pass *bcO_find(const char *name);      // NULL if unknown
int bcO_run_until(bc_graph *g, const char *last);  // runs the pipeline up to and including `last` (NULL: all)
int bcO_dce(bc_graph *g);           // drop nodes whose outputs nobody reads
int bcO_fuse_dual(bc_graph *g);     // ResiDual: xd = xd + u & xa = LN(xa + u) -> DUAL_ADD_LN
int bcO_fuse_scale(bc_graph *g);    // Mul by a [D]/[1] value feeding an Add -> the Add's operand scale
int bcO_fuse_act(bc_graph *g);      // Act feeding an Add -> the Add's operand activation
int bcO_fuse_add_ln(bc_graph *g);   // Add feeding LayerNorm -> ADD_LN
int bcO_inplace(bc_graph *g);       // mark outputs that may reuse a dead input's storage
int bcM_plan(bc_graph *g);          // liveness + arena offsets; sets arena_floats/lower_bound
int bcM_check(const bc_graph *g);   // verifies no two simultaneously live values overlap
// The planner's placement on its own, for arenas that are not one graph's
// values (the emitted backward's, emit_grad.c): n buffers, buffer i live over
// times lo[i]..hi[i] (inclusive, within 0..ntimes-1) with size[i] floats;
// offset[i] receives its 64-byte-aligned offset, *total the arena in floats.
int bcM_place_intervals(bc_ctx *ctx, int ntimes, int n, const int *lo, const int *hi,
                        const int64_t *size, int64_t *offset, int64_t *total);
// The same, with *work (may be NULL) receiving the placement's cost in steps
// (run sets visited, binary-search steps, runs merged): the complexity tests.
int bcM_place_intervals_ex(bc_ctx *ctx, int ntimes, int n, const int *lo, const int *hi,
                           const int64_t *size, int64_t *offset, int64_t *total, int64_t *work);

// The same, items i with share[i] >= 0 sharing one offset per share id
// (their lives must be disjoint: the layer loop's buffers of every trip);
// share NULL: none shares.
int bcM_place_shared(bc_ctx *ctx, int ntimes, int n, const int *lo, const int *hi,
                     const int64_t *size, const int *share, int64_t *offset, int64_t *total);

// ---------------------------------------------------------------------------
// Layout (layout.c): the sizes and layouts of everything a compiled graph
// reads or writes besides its arrays, decided once, so that the emitter, the
// weights binder, the API, AOT, bench and `run --stepwise` agree.
// ---------------------------------------------------------------------------
// The arena in bytes: rounded up to 64-byte alignment, at least one unit.
int64_t bcY_arena_bytes(const bc_graph *g);
// Workspace bytes a planned graph needs: the arena (bcY_arena_bytes), then
// bcY_gemm_ws_bytes where generated code built with -DBLOCKC_NO_BLAS packs
// its matrix products (so a forward allocates nothing). JIT, AOT header and
// API all use this.
int64_t bcY_workspace_bytes(const bc_graph *g);
// The workspace's tail for the portable GEMM: BCRT_SGEMM_WS_FOR(b, b) with b
// the largest dim or row count of any value or parameter (at its bounds),
// which bounds m and k of every product the forward and step entries run;
// at most BCRT_SGEMM_WS_BYTES.
int64_t bcY_gemm_ws_bytes(const bc_graph *g);
// Floats -> workspace bytes: rounded up to 64, at least 64 (the backward's).
int64_t bcY_workspace_bytes_of(int64_t floats);
// One block of the packed weights: output rows [row0, row0 + rows) of the
// (out, in) matrix of param `param`, in the panel layout of bcrt_pack_nt
// (bcrt_pack_nn when in_out), at `off` floats into the packed buffer.
typedef struct bcY_pblock {
  int param;
  int64_t row0, rows, k;  // the block, and the in dim
  int64_t out;            // the matrix's out dim (ld of a layout=in_out matrix)
  bool in_out;
  int64_t off;            // floats into the packed buffer
  int next;               // the next block of the same param, -1: none
} bcY_pblock;
// The packed blocks of every GEMM weight a product with few rows may read
// (its rows a run-time expression or <= BCRT_SMALL_M), in node order; b has
// room for BCY_PBLOCKS_PER_NODE per node.  Returns the count (-1: out of
// memory); *total: the buffer's size in floats (0 and no blocks when it
// would pass the workspace limit: packing is only a speed-up).
#define BCY_PBLOCKS_PER_NODE 5
int bcY_pack_layout(const bc_graph *g, bcY_pblock *b, int64_t *total);
// The same into a malloc'ed array (free it; at least one element): *nb the
// count, *total the floats.  NULL with *nb = -1: out of memory.
bcY_pblock *bcY_pack_blocks(const bc_graph *g, int *nb, int64_t *total);
// Packs block b of weight type wt from its parameter's floats w (the whole
// (out, in) matrix, or (in, out) when b->in_out) into dst, which holds
// bcrt_pack_wt_bytes(wt, b->rows, b->k) bytes: what <model>_pack writes at
// b->off (in units of 4 bytes) of the packed copy.
void bcY_pack_block(int wt, const bcY_pblock *b, const float *w, void *dst);
// The packed copy of the GEMM weights that `<model>_pack` writes, in floats
// (0: no GEMM ever has few rows; -1: out of memory measuring it).  With a
// weight type other than F32 the blocks hold that type (bcrt_pack_wt_bytes
// each, in units of 4 bytes) and there is always a block per matrix.
int64_t bcY_packed_floats(const bc_graph *g);
// only[p] (g->nparams entries): whether parameter p is read only through
// the packed copy — a matrix g->weight_type packs that no other slot of any
// node reads (a tied table an Embedding also reads is not) — so that after
// <model>_pack its floats may be freed and its slot NULL.  All false for
// F32.  Returns how many (-1: out of memory).
int bcY_packed_only(const bc_graph *g, bool *only);
// Replaces every parameter that g->weight_type packs (bcY_pack_layout's
// blocks) by the values the packed copy holds: the weights rounded through
// bf16, f16, q8_0 or q4_0 (blocks of 32 along the in dim, ggml's quantizers).
// Every backend then computes with the same weights: the interpreter with
// the rounded floats, the compiled code with the packed copy made from them
// (quantizing rounded values again changes none).  Nothing for F32.  f16:
// a finite weight that rounds to +-Inf (|w| >= 65520) is a BC_EINPUT error
// naming its tensor (PyTorch's .half() would keep the Inf).
int bcY_round_weights(bc_ctx *ctx, const bc_graph *g, bc_weights *w);
// Whether g gets a step entry: every self-attention causal, all over the
// same run-time dim (the stepped sequence T), and no cross-attention whose
// keys come from T.  ctx non-NULL: the reason is reported (file:line:col of
// the offending node) and BC_EINPUT returned; ctx NULL: silent.
int bcY_step_check(bc_ctx *ctx, const bc_graph *g);
// The stepped sequence dim (index in g->dims), -1 when g cannot be stepped.
int bcY_step_dim(const bc_graph *g);
// The first node of the step entry's row-wise tail, or -1 when it has none:
// the nodes after the last node that mixes positions (and after the layer
// run), all row-wise and position-independent (Add, the norms and fused
// add-norms, Linear, FFN, Mul, Act, SoftCap, Dropout), when every graph
// output is one of their values with the stepped dim second last ([B, T,
// ...]) and every value they read from before the tail either has that
// axis (an arena buffer, which the last-position entry compacts in place)
// or no stepped axis at all.  Planned graphs only (-1 otherwise).  A graph
// with a tail gets `<model>_step_last_pool` (bc_step_rows_pool_fn), which
// runs the tail for each batch row's last new position only and writes
// every output as [B, 1, ...].
int bcY_step_tail(const bc_graph *g);
// The step entry's cache: a header, then one K|V block per attention node in
// node order, each a multiple of 64 bytes ([Bmax, Tmax, 2*KV*dh] for a
// causal self-attention, [Bmax, Smax, 2*KV*dh] for a cross-attention's
// memory).  The header is unsigned 64-bit words: [0] bcY_cache_id, [1] the
// positions filled in every batch row (the least of the rows'), [2 + k]
// run-time dim k where bcY_cache_keeps, [2 + nrt + b] the positions filled
// of batch row b (b < bcY_cache_rows); 2 + nrt + rows words rounded up to
// 64 bytes.  off (optional) receives each node's block
// offset in floats (-1: none).  Returns the total in floats.
int64_t bcY_cache_layout(const bc_graph *g, int64_t *off);
// The whole cache of a planned steppable graph, in bytes (a multiple of 64,
// the header included); 0 when g cannot be stepped.
int64_t bcY_cache_bytes(const bc_graph *g);
// Whether run-time dim k (its index in rt) must stay the same for a whole
// sequence: an axis of some cached keys other than the stepped dim seq
// (the batch, a memory's S).
bool bcY_cache_keeps(const bc_graph *g, int seq, int k);
// The model identity the cache header records: a hash of the model name,
// dims, parameter shapes, attention nodes and cache layout (never 0).
uint64_t bcY_cache_id(const bc_graph *g);
// The batch rows the cache header keeps positions for: the bound of the
// attentions' batch axis (1 without one).
int64_t bcY_cache_rows(const bc_graph *g);
// The batch rows a step call has (the entries of step_rows' pos) for
// run-time dims rt (NULL: the bound).
long bcY_step_rows(const bc_graph *g, const long *rt);
// Why the step entry refuses (BC_RUN_ESEQ) to continue the nrows batch rows
// at positions pos[0..nrows-1] on cache, whose size was checked, for
// run-time dims rt: NULL when it accepts (a row at pos 0 always starts its
// sequence), else the reason in words, written to buf.  id:
// bcY_cache_id(g).
const char *bcY_cache_refusal(const bc_graph *g, uint64_t id, const void *cache, const long *pos,
                              long nrows, const long *rt, char *buf, size_t n);
// The cache bytes one decode step at context C reads (every causal
// self-attention's K|V rows of C positions, every memory's at its bound).
int64_t bcY_cache_read_bytes(const bc_graph *g, long C);

// ---------------------------------------------------------------------------
// C emission (emit.c) and the libtcc JIT (jit.c)
// ---------------------------------------------------------------------------
typedef struct bc_emit_opts {
  bool aot;             // emit the vendorable .c (with #include of its .h)
  bool backward;        // also emit the training step <model>_backward (emit_grad.c)
  bool backward_fwd_only; // bench: <model>_backward stops after its forward half
  bool profile;         // call bc_prof_mark(i) between node sections
  bool gemm_only;       // benchmark floor: elementwise kernels left out
  bool train;           // also the whole step <model>_train_step (emit_train.c; needs backward)
} bc_emit_opts;

// Emits C for a planned graph. Returns NUL-terminated ctx memory.
char *bcE_emit_c(bc_ctx *ctx, const bc_graph *g, const bc_emit_opts *o);
// Why layers of the planned graph g are not in the emitted layer loop, one
// line each ("" when every layer is; NULL on error, reported): the comments
// atop the emitted entry, `blockc emit --verbose`'s notes.
const char *bcE_layer_notes(bc_ctx *ctx, const bc_graph *g);
// Whether graph text s may name a generated identifier (a buffer of g's
// code): a C identifier of at most 31 bytes no generated or included name
// can meet (emit.c's rule for the forward's buffers and members).
bool bcE_name_ok(const bc_graph *g, const char *s);
// Whether the code of b (not its // comments) names identifier id.
bool bcE_uses_ident(const bc_sbuf *b, const char *id);
// The runtime's macro for an activation, "BCRT_ACT_GELU" (emit_grad.c too).
const char *bcE_act_macro(bc_act a);
// One float input, one output, no run-time dim: `<model>_forward` exists.
bool bcE_is_simple(const bc_graph *g);
// The compiled entry every graph gets, `<model>_run(w, io, rt, ws)`: w is an
// array of nparams + 1 `const float *`: the parameters in param-id order,
// then the packed weights (the AOT weights struct has this layout, its
// `packed` member last): NULL, and every GEMM runs cblas_sgemm on the
// parameters; or bcY_packed_floats(g) floats (64-byte aligned for speed)
// written by the emitted `<model>_pack(w, packed)` from the same
// parameters, and GEMMs with at most BCRT_SMALL_M rows run bcrt_gemm_small
// on it (bcrt_linear chooses).  bcD_pack does that for JIT builds.  io and
// rt as for bcR_run_io; ws the planned workspace (bcY_workspace_bytes,
// 64-byte aligned).  Returns BC_RUN_OK, or a BC_RUN_E* code with nothing
// guaranteed written.
// BC_RUN_ETOKEN: a token id outside 0..V-1 (bcR_check_io names it).
// BC_RUN_EPOS (7): a position past the table of a learned Positions node
// (max=P): the run entry with a sequence longer than P (a run-time dim whose
// bound exceeds P), the step entry at pos + t_new > P; checked in the
// prologue, so nothing is written (not the cache either).
enum { BC_RUN_OK = 0, BC_RUN_EINVAL = 1, BC_RUN_EDIM = 2, BC_RUN_ELEN = 3, BC_RUN_ECACHE = 4,
       BC_RUN_ESEQ = 5, BC_RUN_ETOKEN = 6, BC_RUN_EPOS = 7 };
typedef int (*bc_run_fn)(const float *const *w, void *const *io, const long *rt, void *ws);
// The step entry (token-by-token decoding with a KV cache),
// `<model>_step(w, io, rt, pos, cache, cache_bytes, ws)`, emitted next to
// `_run` for every steppable graph (bcY_step_check).  w, io, rt, ws as for
// _run, except that the stepped sequence dim T (the query axis of the
// causal self-attentions) is t_new >= 1: inputs and outputs hold only the
// rows of the new positions pos .. pos+t_new-1.  cache: caller-owned,
// cache_bytes >= bcY_cache_bytes(g) bytes, 64-byte aligned, one per
// sequence (batch); a header (bcY_cache_id, the positions filled, the
// run-time dims the sequence keeps: the batch, a memory's S), then K|V rows
// [B, Tmax, 2*KV*dh] per causal self-attention and [B, S, 2*KV*dh] per
// cross-attention (the memory's, computed at pos == 0, where the memory
// input must be given; later calls read it from the cache, but every input
// pointer must still be non-NULL and the memory's dims unchanged).
// Start a sequence (or reset) by calling with pos == 0: no clearing needed.
// pos may rewind (pos <= the positions filled: the sequence is truncated
// to pos and continues from there), not skip ahead.
// pos + t_new > Tmax: BC_RUN_ECACHE with nothing written; pos > 0 on a
// cache that does not hold this model's sequence up to pos with the same
// kept dims: BC_RUN_ESEQ with nothing written (bcY_cache_refusal says
// why); pos < 0, a misaligned or too small cache or a lengths input that is
// not NULL: BC_RUN_EINVAL.  (The JIT spells size_t `unsigned long`: the
// same type on the LP64 hosts tcc runs on.)
typedef int (*bc_step_fn)(const float *const *w, void *const *io, const long *rt, long pos,
                          void *cache, size_t cache_bytes, void *ws);
// The step entry with a position per batch row (issue 26),
// `<model>_step_rows(w, io, rt, pos, cache, cache_bytes, ws)`: pos[b] for
// batch row b (B entries, B the attentions' batch dim: bcY_step_rows).
// Row b's t_new new positions are pos[b] .. pos[b]+t_new-1: rotary and
// learned / sinusoidal positions from pos[b], its K|V appended at cache rows
// pos[b].., its queries attending to cache rows 0 .. pos[b]+i (causal).
// The header keeps each row's positions filled: a row at pos[b] > 0 needs
// its row filled up to pos[b] at least (rewinding truncates that row only),
// and every row the same model and kept dims.  ECACHE when any pos[b] +
// t_new > Tmax, EPOS likewise for a learned table, ESEQ when any row skips
// ahead, EINVAL when any pos[b] < 0 or pos is NULL: all with nothing
// written.  A cross-attention's memory is projected for every row at a
// call where some row has pos[b] == 0 (the memory input must then hold
// every row's memory).  `<model>_step` is this with pos[b] = pos for all b.
typedef int (*bc_step_rows_fn)(const float *const *w, void *const *io, const long *rt,
                               const long *pos, void *cache, size_t cache_bytes, void *ws);
// `<model>_run_pool` / `<model>_step_pool`: the same entries with the matrix
// products split over a thread pool (runtime/src/pool.c; NULL: the calling
// thread), bit-identical for every pool; _run and _step call them with NULL.
struct bcrt_pool;
typedef int (*bc_run_pool_fn)(const float *const *w, void *const *io, const long *rt, void *ws,
                              struct bcrt_pool *pool);
typedef int (*bc_step_pool_fn)(const float *const *w, void *const *io, const long *rt, long pos,
                               void *cache, size_t cache_bytes, void *ws, struct bcrt_pool *pool);
typedef int (*bc_step_rows_pool_fn)(const float *const *w, void *const *io, const long *rt,
                                    const long *pos, void *cache, size_t cache_bytes, void *ws,
                                    struct bcrt_pool *pool);
// forward(weights, x, y, workspace): the wrapper emitted as `<model>_forward`
// when the graph has one float input, one output and no run-time dim.
typedef int (*bc_forward_fn)(const float *const *w, const float *x, float *y, void *ws);
// The profiling build's entry, `<model>_run_profile`: prof(pctx, i) runs
// before node i and prof(pctx, nnodes) at the end.
typedef int (*bc_run_profile_fn)(const float *const *w, void *const *io, const long *rt,
                                 void *ws, void (*prof)(void *pctx, int node), void *pctx);
// The training step, `<model>_backward(w, io, rt, dy, dw, dx, ws)` (emit_grad.c,
// emitted next to _run when bc_emit_opts.backward): runs the forward (io's
// outputs receive y) keeping what the backward needs, then the reverse walk,
// for the loss sum over outputs k of sum(y_k * dy[k]).  w, io, rt as _run;
// dy one array per output at its actual shape (NULL: not in the loss); dw
// one float array per parameter in param order, same layout as w,
// overwritten with d loss / d param; dx NULL or one array per graph input
// receiving d loss / d input (NULL entries and lengths inputs skipped); ws
// its own workspace of bcG_emit's ws_bytes, 64-byte aligned (the arena holds
// the kept activations and the liveness-planned gradient buffers).  Returns
// BC_RUN_OK or BC_RUN_EINVAL / EDIM / ELEN like _run.
typedef int (*bc_backward_fn)(const float *const *w, void *const *io, const long *rt,
                              const float *const *dy, float *const *dw, float *const *dx,
                              void *ws);
// A graph with dropout (bcI_has_dropout) also gets `<model>_backward_ex`,
// the same with the generator's state before ws: training != 0 drops with
// the masks of (seed, step) (runtime/src/rng.c); `<model>_backward` is then
// the call with training = 0 (no dropout).  Graphs without dropout have no
// _ex entry, and their code is unchanged.
typedef int (*bc_backward_ex_fn)(const float *const *w, void *const *io, const long *rt,
                                 const float *const *dy, float *const *dw, float *const *dx,
                                 int training, unsigned long long seed, unsigned long long step,
                                 void *ws);
// Every graph's backward also has `<model>_backward_pool`, the body both
// call: the _ex arguments (ignored without dropout), then ws and the pool
// its products and attention split over (NULL: the calling thread; the
// bits are the same for every pool).
struct bcrt_pool;
typedef int (*bc_backward_pool_fn)(const float *const *w, void *const *io, const long *rt,
                                   const float *const *dy, float *const *dw, float *const *dx,
                                   int training, unsigned long long seed, unsigned long long step,
                                   void *ws, struct bcrt_pool *pool);
// Emits that function for a planned graph (C text in ctx memory, to append
// to bcE_emit_c's output: it uses the runtime declarations there) and its
// workspace size.  Every op of this header is covered (the seed set,
// RMSNorm, gated FFNs, RoPE, grouped-query and cross-attention); a node it
// cannot take (causal or rotary cross-attention, which the parser refuses)
// is BC_EINPUT with a message at its file:line:col.
// o (may be NULL): gemm_only leaves the kernel calls out (bench's floor),
// backward_fwd_only stops after the forward half (bench).
int bcG_emit(bc_ctx *ctx, const bc_graph *g, const bc_emit_opts *o, char **csrc,
             int64_t *ws_bytes);
// Why the emitted backward of planned g does not loop over g->layers
// ("" when it does or g has no run; NULL on error, reported).
const char *bcG_layer_note(bc_ctx *ctx, const bc_graph *g);
// Whether bcG_emit can take g (any IR stage): BC_OK, or BC_EINPUT with that
// error reported to ctx (ctx NULL: silent).
int bcG_check(bc_ctx *ctx, const bc_graph *g);
typedef struct bc_jit bc_jit;
// Compiles C with libtcc (only the runtime's symbols can be linked); the
// module lives until bcJ_free.  bcJ_lookup finds a function in it.
int bcJ_compile_module(bc_ctx *ctx, const char *csrc, bc_jit **out);
int bcJ_lookup(bc_ctx *ctx, bc_jit *j, const char *name, void (**fn)(void));
// Both in one: compile, then look up fn_name as a forward function.
int bcJ_compile(bc_ctx *ctx, const char *csrc, const char *fn_name,
                bc_jit **out, bc_forward_fn *fn);
void bcJ_free(bc_jit *j);
// The i-th symbol generated code may call (cblas_sgemm, then blockc_rt.h's
// BCRT_KERNELS), NULL past the last: the JIT binds these and nothing else.
const char *bcJ_symbol(int i);

// ---------------------------------------------------------------------------
// The compile driver (driver.c): the one parse-free pipeline every user of
// the compiler calls (CLI, API, bench, AOT): passes and plan (unless the
// graph is planned already), emit, and for JIT builds tcc.
// ---------------------------------------------------------------------------
// The sizes of the emitted training step (bcU_layout).
typedef struct bc_train_layout {
  int loss;              // the loss output's index
  int64_t total;         // floats of one gradient or state block (each param 16-float aligned)
  int64_t ones;          // floats of dy (the loss output at its bounds)
  int64_t bwd_ws;        // the backward's workspace, rounded up to 64 bytes
  int64_t ws_bytes;      // <M>_TRAIN_WORKSPACE_BYTES (any accum)
  int64_t ws1_bytes;     // <M>_TRAIN_WORKSPACE_BYTES_K1: enough for accum 1 (no accumulation block)
  int64_t state_bytes;   // <M>_TRAIN_STATE_BYTES
} bc_train_layout;
// <model>_train_step and <model>_train_init (bcrt_train_hparams: blockc_rt.h).
struct bcrt_train_hparams;
typedef int (*bc_train_fn)(float *const *w, void *const *io, const long *rt,
                           const struct bcrt_train_hparams *hp, void *state, void *ws,
                           float *loss, float *grad_norm);
typedef int (*bc_train_pool_fn)(float *const *w, void *const *io, const long *rt,
                                const struct bcrt_train_hparams *hp, void *state, void *ws,
                                float *loss, float *grad_norm, struct bcrt_pool *pool);
typedef void (*bc_train_init_fn)(void *state);

typedef struct bc_compiled {
  char *csrc;                 // the generated C (ctx memory)
  bc_jit *jit;                // NULL for AOT emission
  bc_run_fn run;              // <model>_run (NULL for profile and AOT builds)
  bc_run_profile_fn profile;  // <model>_run_profile (profile builds only)
  bc_forward_fn forward;      // <model>_forward when bcE_is_simple(g), else NULL
  bc_step_fn step;            // <model>_step when the graph can be stepped (JIT), else NULL
  bc_step_rows_fn step_rows;  // <model>_step_rows likewise
  bc_run_pool_fn run_pool;    // <model>_run_pool (with run)
  bc_step_pool_fn step_pool;  // <model>_step_pool (with step)
  bc_step_rows_pool_fn step_rows_pool; // <model>_step_rows_pool (with step)
  bc_step_rows_pool_fn step_last_pool; // <model>_step_last_pool (with step, bcY_step_tail >= 0), else NULL
  int64_t ws_bytes;           // bcY_workspace_bytes(g)
  int64_t cache_bytes;        // bcY_cache_bytes(g): the step entry's KV cache (0: no step)
  uint64_t cache_id;          // bcY_cache_id(g) (with a step entry)
  bc_backward_fn backward;    // <model>_backward (JIT builds with opts.backward), else NULL
  bc_backward_ex_fn backward_ex; // <model>_backward_ex (those, when bcI_has_dropout), else NULL
  bc_backward_pool_fn backward_pool; // <model>_backward_pool (with backward)
  int64_t bwd_ws_bytes;       // its workspace (opts.backward), bytes
  bc_train_fn train;          // <model>_train_step (JIT builds with opts.train), else NULL
  bc_train_init_fn train_init;
  bc_train_pool_fn train_pool;  // <model>_train_step_pool (with train)
  bc_train_layout tl;         // its sizes (opts.train)
  void (*pack)(const float *const *w, float *packed);  // <model>_pack (JIT, not profile/gemm-only)
  int64_t packed_floats;      // bcY_packed_floats(g)
  float *packed;              // bcD_pack's buffer (64-byte aligned), owned; NULL before
} bc_compiled;
int bcD_compile(bc_ctx *ctx, bc_graph *g, const bc_emit_opts *o, bc_compiled *out);

// The whole training step (emit_train.c, whose header documents the
// generated <model>_train_step and its state).  bcU_loss_output: the index
// of the loss output (named `loss`, else the only output), or -1 with an
// error.  bcU_layout: the sizes of g's train step given the backward's
// workspace.  bcU_emit: the step's C (appended after <model>_backward);
// bcU_emit_h: its declarations for the AOT header (upper: the model's
// macro prefix).
int bcU_loss_output(bc_ctx *ctx, const bc_graph *g);
int bcU_layout(bc_ctx *ctx, const bc_graph *g, int64_t bwd_ws, bc_train_layout *l);
char *bcU_emit(bc_ctx *ctx, const bc_graph *g, const bc_train_layout *l);
char *bcU_emit_h(bc_ctx *ctx, const bc_graph *g, const bc_train_layout *l, const char *upper);
// Packs w's GEMM weights for c's small-M products into c->packed (allocated
// on the first call) and points w->p[w->n] at it, so every entry called with
// w->p uses it.  Call again after w's values change.  Builds without a pack
// entry or packed blocks leave w->p[w->n] NULL (cblas everywhere).  The
// buffer lives until bcD_free(c): do not run w through another build after.
int bcD_pack(bc_ctx *ctx, bc_compiled *c, bc_weights *w);
// After bcD_pack of a weight-typed build: frees the floats of every
// parameter only the packed copy holds (bcY_packed_only) and sets its slot
// NULL, so the model keeps ~1.1 (q8_0) or 0.6 (q4_0) bytes a matrix weight
// instead of 4 more.  The compiled entries accept that; bcD_pack, the
// interpreter and the backward do not (pack before, and only run after).
// Returns the bytes freed (0 for f32 builds; -1: out of memory, nothing freed).
int64_t bcD_release_packed(const bc_graph *g, bc_weights *w);
void bcD_free(bc_compiled *c);      // frees the JIT module and the packed buffer; zeroes *c

// ---------------------------------------------------------------------------
// Generation (generate.c): the token loop of `blockc generate` and
// blockc_generate, over any way of running the model's step (the JIT's or
// AOT module's step entry with a KV cache, or the interpreter recomputing
// the prefix).  Prefill the prompt in one call, then one token per call;
// tokens are picked by bcrt_sample (runtime/src/sample.c).
// ---------------------------------------------------------------------------
// Runs positions pos .. pos+t-1 whose token ids are ids[0..t) (the earlier
// positions were given to earlier calls of the same sequence) and writes the
// V logits of the LAST of them to logits.  BC_OK, or a status with the
// message already reported.
typedef int (*bc_gen_step_fn)(void *opaque, const int32_t *ids, long t, long pos, float *logits);
// Called with each generated token as soon as it is picked; a non-zero
// return ends the generation (BC_GEN_CALLBACK).
typedef int (*bc_gen_token_fn)(void *opaque, int32_t id);
typedef enum { BC_GEN_MAX = 0, BC_GEN_STOP, BC_GEN_BOUND, BC_GEN_CALLBACK } bc_gen_end;
typedef struct bc_gen_opts {
  long max_new;          // tokens to generate, >= 0
  double temperature;    // 0: greedy
  int top_k;             // 0: off
  double top_p;          // 1: off (0..1]
  uint64_t seed;         // bcrt_rng_seed
  const int32_t *stop;   // generation ends after one of these ids (it is kept in out)
  int nstop;
} bc_gen_opts;
typedef struct bc_gen_result {
  long n;                // tokens generated (written to out)
  bc_gen_end end;        // why it ended
  long prompt;           // prompt tokens
  long steps;            // single-token step calls after the prefill
  double prefill_ms, decode_ms, sample_ms;  // the prefill call, the step calls, bcrt_sample
} bc_gen_result;
// vocab: V (the logits' width); bound: the positions the step can hold (the
// bound of the stepped dim).  out: cap >= o->max_new ids.  Errors (reported
// through ctx): an empty prompt or one longer than bound, bad options,
// logits with no valid entry (all NaN or -inf), a failing step.
int bcX_generate(bc_ctx *ctx, long vocab, long bound, const int32_t *prompt, long nprompt,
                 const bc_gen_opts *o, bc_gen_step_fn step, void *step_opaque,
                 bc_gen_token_fn on_token, void *token_opaque, int32_t *out, long cap,
                 bc_gen_result *r);
// The options' own check (the CLI checks before compiling anything).
int bcX_check_opts(bc_ctx *ctx, const bc_gen_opts *o, long vocab);

// The training graph of a whole-model graph (ops/loss.c): a copy of g (as
// parsed, before passes) with a new tokens input `targets` of the shape of
// the tokens input named `ids`, and a new output `loss` = CrossEntropy(<the
// output named logits>, targets) (ignore_index -100, no smoothing); g is
// not changed.  keep: logits stays an output where it was and loss is the
// last output; otherwise loss takes logits' place (logits becomes an arena
// value).  NULL with a message (ctx) when g has no such input or output,
// logits is not [B, T, V] over ids' [B, T], g already has an input
// `targets` or an output `loss`, or g was compiled (planned: bcD_compile
// runs the passes on it in place).
bc_graph *bcX_with_lm_loss(bc_ctx *ctx, const bc_graph *g, const char *logits, const char *ids,
                           bool keep);

#endif
