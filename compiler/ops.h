// ops.h — the op table: one description per op that every stage reads.
//
// Lua keeps one table of opcodes (lopcodes.c) that the parser, the code
// generator and the VM all read; ggml asserts GGML_OP_COUNT against its
// tables.  blockc does the same: every op has one row, a bc_op_def, written
// in the file of its kind under compiler/ops/ (add.c, mul.c, norm.c,
// attention.c, ffn.c, linear.c, embedding.c, positions.c, loss.c, dropout.c,
// softcap.c, param.c, act.c) and collected by ops/table.c.
// A row holds
//
//   - the graph-file spelling and arity (bc_op_info, bc.h: name, positional
//     inputs, attributes with their types, input and output slots);
//   - the in-place rules (which input slots each output may overwrite,
//     read by the inplace pass) and whether the op is a norm that a
//     residual Add fuses into (the fusion passes); whether its inputs
//     broadcast to its output (the operand checks of interp.c and grad.c);
//   - its parameter slots, in words (the layout is bc.h's table), and
//     their names for a graph file's `init.SEL=` (init_sel, init_part);
//   - one function per stage: the parser's shape checks and parameters,
//     the reference interpreter, the reference backward (weights, tape
//     forward, reverse step), the emitted forward, the emitted backward
//     (check, buffers, forward half, backward half) and the attribute
//     printer that `dump`, the emitted comments and `dot` share;
//   - optionally, run-time checks of the call's dims (a learned Positions
//     table's length: run_check, emit_check, grad_emit_check) and the
//     extra BC_RUN_E* statuses they return.
//
// The stages keep no switch on the op: they call bcT_def(op)->entry.  A NULL
// entry is a bug that tests/test_ops.c catches (it walks BC_OP_COUNT and
// checks every row has every stage).  A stage an op does not take says so
// explicitly: the parser's entry of the fused ops is bcP_build_none (an
// internal error naming the op and the parser); the emitted backward's
// grad_check returns the reason, which bcG_check reports at the node with
// the op's name before any grad_fwd / grad_bwd runs.  The interpreter and
// the emitted forward take every op (the interpreter is the oracle).
//
// Each stage's working state is private to its file: the entries receive
// it as an incomplete struct pointer and reach it through the functions
// below ("what a stage function may use").  ops/add.c, ops/mul.c,
// ops/linear.c and ops/ffn.c are written entirely against them; the other
// kinds' rows (the norms, Attention) still name stage functions that live in
// their stage's file (parse.c, interp.c, grad.c, emit.c, emit_grad.c), next
// to the private helpers they share.
//
// Adding an op (ops/mul.c, Mul(a, b), was the first added this way; then
// ops/param.c, a node without inputs, and ops/act.c):
//   1. bc.h: BC_OP_<NAME> in bc_op before BC_OP_COUNT.  If it has attributes
//      of its own, a struct of them in bc_node's attribute union (Mul has
//      none and uses Add's family: bcT_norm_defaults / bcT_norm_same).
//   2. compiler/ops/<name>.c: its row (bcT_<name>) and one static function
//      per stage, written against this header; ops/add.c is the template for
//      an elementwise op, ops/mul.c for one that broadcasts (the row's
//      `broadcast`), ops/linear.c for one built on a GEMM.  The Makefile
//      takes every file of compiler/ops/.
//   3. compiler/ops/table.c: `extern` the row and put it at [BC_OP_<NAME>]
//      (the table's _Static_assert fails while the last op has no row).
//   4. the runtime kernels the emitted code calls, when new: the definition
//      in runtime/src/ (kernels.c, kernels_bwd.c) and one X(...) line in
//      runtime/blockc_rt.h's kernel lists (the JIT's declarations and symbol
//      allowlist come from them); `make runtime` then regenerates the
//      committed runtime/blockc_rt.c.
//   5. tests: test_ops.c checks the row by itself; the op's cases go into
//      test_interp_ops (oracle), test_grad (finite differences), test_jit_ops,
//      test_aot and test_grad_emit (compiled vs reference), test_parse (its
//      errors); docs/language.md's node table.
#ifndef BC_OPS_H
#define BC_OPS_H

#include "bc.h"

// --- stage state, private to each stage's file -------------------------------
struct bcP_parser;      // parse.c: the parser
struct bcP_attr_vals;   // parse.c: the attribute values of one call
struct bcR_interp;      // interp.c: the interpreter
struct bcR_operands;    // interp.c: a node's inputs and outputs
struct bcR_ops;         // grad.c: a node's value ids and sizes
struct bcR_nweights;    // grad.c: a node's weights widened to double
struct bcR_nsave;       // grad.c: a node's saved intermediates
struct bcR_bwd;         // grad.c: the reverse walk
struct bcE_emitter;     // emit.c: the forward emitter
struct bcG_emitter;     // emit_grad.c: the backward emitter

// The views of the one attribute printer (bcT_attrs).
typedef enum {
  BC_ATTRS_DUMP,        // `blockc dump`: every attribute that is set
  BC_ATTRS_COMMENT,     // the emitted C's node comments: the main ones
  BC_ATTRS_DOT,         // `blockc dot` boxes: a short line ("\nheads=8 causal")
} bc_attrs_view;

// A block of a packed matrix an init override may name (bc_param.part).
typedef struct bc_init_part {
  const char *sel;      // "q"
  int slot;             // the node's parameter slot holding the matrix
  int64_t at, len;      // its first row and row count
  bool cols;            // the rows are columns (layout=in_out)
} bc_init_part;

typedef struct bc_op_def {
  bc_op op;                           // its own index (the test checks it)
  bc_op_info info;                    // spelling and arity (bc.h)
  // In place: inplace[k] is the mask of input slots output k may overwrite
  // (the kernel reads each element before it writes it); 0: none.
  unsigned inplace[BC_MAX_NODE_OUT];
  bool norm;                          // a norm a residual Add fuses into (fuse-add-ln, fuse-dual)
  // Row-wise at inference: each row of its outputs (the last dim) follows
  // from the same row of its inputs alone, whatever the row's position, so
  // the step entry may run it on the last position only (bcY_step_tail).
  bool rowwise;
  // Its float inputs broadcast (bc_shape_broadcasts) to output 0's shape,
  // which the interpreter and the reference backward then check them
  // against and take as the query shape (bcR_operands.s, bcR_ops.s);
  // otherwise every float input has input 0's shape.
  bool broadcast;
  // Input slot 0 is a tokens input (int32 ids [B, T], bcI_is_tokens; the
  // operands' `ids`), and output 0 ([B, T, D]) gives the query shape.
  bool tokens;
  // Input slot 1 is a tokens input of targets (CrossEntropy): int32 ids
  // [B, T] of input 0's rows, each 0..V-1 or the node's ignore_index
  // (bcI_tokens_ignore; the operands' `tgt`).
  bool targets;
  // Output 0 is a scalar (shape [], one float): a loss.
  bool scalar;
  const char *params;                 // its parameter slots, in words
  // The selector of n's parameter slot k in a graph file's `init.SEL=`
  // ("o", "down.bias", "weight"), NULL for a slot that has none; NULL for
  // an op without parameters (`init=` on it is an error).
  const char *(*init_sel)(const bc_node *n, int k);
  // Optional (NULL: none): block j (0, 1, 2) of a slot's matrix that
  // `init.SEL=` may name (Attention's q, k, v of a packed projection) into
  // *b; false when n has no block j.
  bool (*init_part)(const bc_graph *g, const bc_node *n, int j, struct bc_init_part *b);
  const char *dot_color;              // fill colour of its `dot` box
  // Attributes: set n's to the op's defaults (bcI_add_node); whether two
  // nodes of the op have the same ones (the layer finder).
  void (*defaults)(bc_node *n);
  bool (*same_attrs)(const bc_node *a, const bc_node *b);
  // Attribute printer: appends " name=value ..." (the view's choice) to out.
  void (*attrs)(const bc_node *n, bc_attrs_view view, bc_sbuf *out);
  // Parser (parse.c): shape checks, attributes and parameters of one call
  // whose inputs are in n; *out (preset to *in) receives the output shape.
  // Reports at the call and does not return on an error.
  void (*build)(struct bcP_parser *P, const bc_op_info *info, bc_node *n,
                const bc_token *optok, const bc_loc *posloc, const struct bcP_attr_vals *av,
                const bc_shape *in, bc_shape *out);
  // Memory planner (plan.c): n's node-local scratch values (shapes, names,
  // count <= BC_MAX_NODE_SCRATCH); BC_EINPUT past a size limit.
  int (*scratch)(bc_graph *g, const bc_node *n, bc_shape sh[], const char *names[], int *cnt);
  // Reference interpreter (interp.c): computes n's outputs in o.
  int (*interp)(struct bcR_interp *in, const bc_node *n, const struct bcR_operands *o);
  // Reference backward (grad.c): n's weights widened to double, its tape
  // forward (values and saved intermediates), its reverse step.
  int (*ref_weights)(const bc_tape *tp, const bc_node *n, int64_t d, struct bcR_nweights *nw);
  int (*ref_fwd)(bc_tape *tp, const bc_node *n, const struct bcR_ops *o,
                 const struct bcR_nweights *nw, struct bcR_nsave *sv);
  int (*ref_bwd)(struct bcR_bwd *b, const bc_node *n, const struct bcR_ops *o,
                 const struct bcR_nweights *nw);
  // Emitted forward (emit.c): n's statements into the emitter's buffer.
  void (*emit)(struct bcE_emitter *E, const bc_node *n);
  // Emitted backward (emit_grad.c): why it cannot take n (NULL: it can),
  // n's saved and temporary buffers (-1 on OOM), its forward half and its
  // backward half.
  const char *(*grad_check)(const bc_graph *g, const bc_node *n);
  int (*grad_buffers)(struct bcG_emitter *E, const bc_node *n);
  void (*grad_fwd)(struct bcG_emitter *E, const bc_node *n);
  void (*grad_bwd)(struct bcG_emitter *E, const bc_node *n);
  // Run-time checks, optional (NULL: the op has none; ops/positions.c has
  // them).  run_check: n's check of the run-time dims rt (and, in the step
  // entry, of the positions pos.. of the stepped dim) before a run or step;
  // reports "<who>: ..." and returns BC_EINPUT on a refusal.  emit_check:
  // the same check as statements of the emitted prologue (returning one of
  // `statuses`, a mask of 1u << BC_RUN_E* codes beyond the common ones,
  // which the AOT header's status enum then lists for a graph with the op).
  int (*run_check)(bc_ctx *ctx, const bc_graph *g, const bc_node *n, const long *rt, long pos,
                   bool step, const char *who);
  void (*emit_check)(struct bcE_emitter *E, const bc_node *n);
  void (*grad_emit_check)(struct bcG_emitter *E, const bc_node *n);  // <model>_backward's
  unsigned statuses;
} bc_op_def;

// The row of op; NULL for an invalid op.
const bc_op_def *bcT_def(bc_op op);
// The one attribute printer: n's attributes in view into out (appended).
void bcT_attrs(const bc_node *n, bc_attrs_view view, bc_sbuf *out);
// Every node's run_check (rows that have one), in node order: BC_OK, or the
// first refusal (reported).  step: the call is the step entry's at pos.
int bcT_run_checks(bc_ctx *ctx, const bc_graph *g, const long *rt, long pos, bool step,
                   const char *who);
// The init selector of n's parameter slot k (the row's init_sel), or NULL.
const char *bcT_init_sel(const bc_node *n, int k);
// The init_sel of a node with one weight and its bias: "weight", "bias".
const char *bcT_init_sel_wb(const bc_node *n, int k);
// The union of the `statuses` of g's nodes' rows.
unsigned bcT_statuses(const bc_graph *g);

// --- what a stage function may use --------------------------------------------
// Each stage keeps its state private; an op's functions reach it through
// these (the stage's own per-op functions, still in its file, use the
// state directly).
//
// Parser (parse.c).  Attribute values of one call, indexed like info->attrs.
typedef struct bcP_attr_vals {
  bool have[BC_MAX_ATTRS];
  bc_loc loc[BC_MAX_ATTRS];
  int64_t ival[BC_MAX_ATTRS];  // BC_AT_INT; BC_AT_VALUE: the value id
  double fval[BC_MAX_ATTRS];
  bool bval[BC_MAX_ATTRS];
  bc_act act[BC_MAX_ATTRS];
  const char *path[BC_MAX_ATTRS][2];
  const char *word[BC_MAX_ATTRS];  // BC_AT_WORD: the identifier as written
  bc_shape shape[BC_MAX_ATTRS];    // BC_AT_SHAPE
} bcP_attr_vals;
bc_graph *bcP_graph(struct bcP_parser *P);
// Reports at loc and abandons the parse (does not return).
_Noreturn void bcP_error_at(struct bcP_parser *P, bc_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char *bcP_shape_desc(struct bcP_parser *P, const bc_shape *s);  // "[2, T<=8, 16]"
int bcP_attr(struct bcP_parser *P, const bc_op_info *info, const char *name); // index in av
bool bcP_flag(struct bcP_parser *P, const bc_op_info *info, const bcP_attr_vals *av,
              const char *name, bool dflt);                 // a bool attribute, or dflt
bool bcP_have(struct bcP_parser *P, const bc_op_info *info, const bcP_attr_vals *av,
              const char *name);                            // whether the call set it
const char *bcP_path_of(struct bcP_parser *P, const bc_op_info *info, const bcP_attr_vals *av,
                        const char *name);                  // a path attribute's first path
bc_loc bcP_loc_of(struct bcP_parser *P, const bc_op_info *info, const bcP_attr_vals *av,
                  const char *name);                        // where the call set it
// Parameter `name` (the full name, no suffix added) of shape s, first used at
// loc: its id (a shared name must have one shape; reported, not returned).
int bcP_add_param(struct bcP_parser *P, const char *name, bc_shape s, bc_loc loc);
// The elements of s, reported at loc (as `what`) past BC_MAX_ELEMS.
int64_t bcP_checked_numel(struct bcP_parser *P, bc_loc loc, const bc_shape *s, const char *what);
// The last dim of in is fixed (param: the weight it sizes, for the message).
void bcP_check_fixed_width(struct bcP_parser *P, const bc_op_info *info, const bc_shape *in,
                           bc_loc loc, const char *param);
// Param slots w and b of n: <base>.weight (out, in) in n's layout, and
// <base>.bias (out) when bias.
void bcP_linear_params(struct bcP_parser *P, bc_node *n, int w, int b, const char *base,
                       int64_t out, int64_t in, bool bias, bc_loc loc);

// Interpreter (interp.c): a node's operands, checked before its entry runs.
// Every float input has the query shape s (B x T x D) unless the op says
// otherwise (Attention's kv input has kv; a broadcast op's inputs have nel[k]
// elements, a suffix of s or 1).
typedef struct bcR_operands {
  bc_btd s;                         // the common (query) shape; a broadcast op's output
  bc_btd kv;                        // Attention: the kv input's shape (= s for self)
  const float *x[BC_MAX_NODE_IN];   // float inputs, NULL where absent
  int64_t nel[BC_MAX_NODE_IN];      // their element counts (0 where absent)
  const int32_t *len[BC_MAX_NODE_IN]; // lengths inputs, NULL where absent
  const int32_t *ids;               // a tokens op's input 0 (s.b x s.t ids, checked), else NULL
  const int32_t *tgt;               // a targets op's input 1 (s.b x s.t ids, checked), else NULL
  float *y[BC_MAX_NODE_OUT];        // outputs, NULL where the node has none
} bcR_operands;
const bc_graph *bcR_interp_graph(const struct bcR_interp *in);  // the graph being run
// "internal error: interpreter: node N (Op): ..."; returns BC_EINTERNAL.
int bcR_node_error(struct bcR_interp *in, const bc_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
// Param slot of n, checked to be (d0, d1) in n's layout ((d0) when d1 == 0);
// *p NULL when absent and not required.
int bcR_fetch_param(struct bcR_interp *in, const bc_node *n, int slot, int64_t d0, int64_t d1,
                    bool required, const float **p);
int bcR_alloc_doubles(struct bcR_interp *in, int64_t n, double **out);  // free() it
// A weight matrix as the kernels read it: (o, k) of PyTorch's (out, in) is
// w[o*ld + k], or w[k*ld + o] stored (in, out).
typedef struct bcR_wview {
  const float *w;
  int64_t ld;
  bool in_out;
} bcR_wview;
bcR_wview bcR_wfull(const float *w, int64_t out, int64_t in, bool in_out);
// With a Q8_0 / Q4_0 weight type the kernels quantize every product's
// input (bcrt_quant_act, blocks of 32 along k): bcR_act_quant is that type
// (0 for the others), and bcR_quant_x(aq, ...) rounds rows of x the same
// way in place (nothing when aq is 0), before the bcR_k_linear calls that
// read them.
int bcR_act_quant(const struct bcR_interp *in);
void bcR_quant_x(int aq, int64_t rows, int64_t in, double *x);
// y[r, o] = sum_k x[r, k] W(o, k) + bias[o] (bias may be NULL), in double.
void bcR_k_linear(int64_t rows, int64_t in, int64_t out, const double *x, const bcR_wview *W,
                  const float *bias, double *y);

// Reference backward (grad.c): a node's value ids and query shape.
typedef struct bcR_ops {
  bc_btd s, kv;                     // input 0 (a broadcast op: output 0) as B x T x D;
                                    // Attention's kv input (= s for self)
  int vin[BC_MAX_NODE_IN];          // float input value ids, -1 where absent
  int64_t nel[BC_MAX_NODE_IN];      // their element counts (0 where absent)
  const int32_t *len[BC_MAX_NODE_IN]; // lengths inputs, NULL where absent
  const int32_t *ids;               // a tokens op's input 0 (s.b x s.t ids, checked), else NULL
  const int32_t *tgt;               // a targets op's input 1 (s.b x s.t ids, checked), else NULL
  int vout[BC_MAX_NODE_OUT];        // output value ids, -1 where absent
} bcR_ops;
double *bcR_tape_val(bc_tape *tp, int v);            // value v's doubles (written by its node)
const bc_graph *bcR_tape_graph(const bc_tape *tp);   // the tape's graph
const double *bcR_dy(struct bcR_bwd *b, int v);      // d loss / d v (NULL: not reached)
double *bcR_dacc(struct bcR_bwd *b, int v, int *st); // v's gradient to accumulate into (allocated)
bc_tape *bcR_bwd_tape(struct bcR_bwd *b);            // the forward's values
const bc_train_rng *bcR_tape_rng(const bc_tape *tp);  // dropout's generator of the run
// Dropout (ops/dropout.c): whether node n drops with probability p in this
// tape's run (a training run and p > 0), and its key bcrt_drop_key(seed,
// step, n->key_node) (runtime/src/rng.c); the factor of element e: 1/(1-p)
// when kept (u(e) >= p), else 0.
bool bcR_dropping(const bc_tape *tp, const bc_node *n, double p, unsigned long long *key);
double bcR_drop_factor(unsigned long long key, double p, int64_t e);
double *bcR_dalloc(const bc_tape *tp, int64_t n, int *st); // n zeroed doubles (free() them;
                                                     // NULL and *st set on OOM)
// A node's saved intermediates (the tape frees them): the slot to set in
// the forward, and its value in the backward.
typedef enum { BCR_SV_H, BCR_SV_GT } bcR_save_slot;   // FFN: up and gate pre-activations
double **bcR_saved(struct bcR_nsave *sv, bcR_save_slot k);
const double *bcR_saved_of(const bc_tape *tp, const bc_node *n, bcR_save_slot k);
int bcR_node_err(const bc_tape *tp, const bc_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));          // BC_EINTERNAL naming the node
// A node's weights are pieces (index i < 8, the op's own numbering), each
// rows r0..r0+rows of param slot `slot` seen as a (total, cols) matrix (a
// vector when cols == 0), widened to double in PyTorch's (out, in) order
// whatever the stored layout; ref_weights sets them, the forward and
// backward read bcR_nw_w and accumulate into bcR_nw_g (both NULL if absent).
int bcR_set_piece(const bc_tape *tp, const bc_node *n, struct bcR_nweights *nw, int i, int slot,
                  bool required, int64_t r0, int64_t rows, int64_t cols, int64_t total);
const double *bcR_nw_w(const struct bcR_nweights *nw, int i);
double *bcR_nw_g(const struct bcR_nweights *nw, int i);
// y = x W^T + b in double (W (out, in), b may be NULL); its backward:
// dx += dy W, dW += dy^T x, db += colsum dy (dx and db may be NULL).
void bcR_lin_fwd(int64_t rows, int64_t in, int64_t out, const double *x, const double *W,
                 const double *b, double *y);
void bcR_lin_bwd(int64_t rows, int64_t in, int64_t out, const double *x, const double *W,
                 const double *dy, double *dx, double *dW, double *db);
// Scaled operands (Add and AddLayerNorm after fuse-scale: slot 2 scales
// input 0, slot 3 input 1, each 1 or D values): out = alpha*(s2 . a) +
// beta*(s3 . b) in double; its backward given ds = d loss / d out
// (accumulated into a, b and the scales).
int bcR_scaled_sum(bc_tape *tp, const bc_node *n, const bcR_ops *o, double *out);
int bcR_scaled_sum_bwd(struct bcR_bwd *b, const bc_node *n, const bcR_ops *o, const double *ds);

// Emitted forward (emit.c).
bool bcE_gemm_only(const struct bcE_emitter *E);   // the benchmark floor: no elementwise kernels
const bc_graph *bcE_graph(const struct bcE_emitter *E);  // the graph being emitted
// v as [B, T, D] (rank 3; rank 2 [T, D]: B "1"): its batch count and its
// sequence length as C ("B", "4"), and the absolute position of its row t
// = 0: "pos" in the step entry when v's sequence axis is the stepped dim,
// else "0".
const char *bcE_batch(struct bcE_emitter *E, int v);
const char *bcE_seq(struct bcE_emitter *E, int v);
const char *bcE_pos0(struct bcE_emitter *E, int v);
// `return <code>;` as the entry spells it (AOT: the status enum's name).
const char *bcE_ret(struct bcE_emitter *E, int code);
bc_sbuf *bcE_body(struct bcE_emitter *E);          // the function body being written
const char *bcE_keep(struct bcE_emitter *E, const char *s);  // s copied to outlive the ring
// Whether n's scratch k holds need floats (fails the emission if not).
bool bcE_scratch_ok(struct bcE_emitter *E, const bc_node *n, int k, int64_t need);
int bcE_fail(struct bcE_emitter *E, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// Whether every operand (nin inputs, the outputs) has the output's element
// count (at the bounds and in run-time dims); fails the emission if not.
bool bcE_same_numel(struct bcE_emitter *E, const bc_node *n, int nin);
const char *bcE_numel(struct bcE_emitter *E, int v);  // v's element count as C
// The scale in input slot k of n (scaled operands) as the kernels take it:
// "<pointer>, <count>", or "0, 0" when absent.
const char *bcE_scale(struct bcE_emitter *E, const bc_node *n, int k);
const char *bcE_vptr(struct bcE_emitter *E, int v);   // v's float pointer as C
// The shortest float literal for v ("1e-05f") in buf.
const char *bcE_flit(struct bcE_emitter *E, double v, char *buf, size_t n);
int64_t bcE_width(const struct bcE_emitter *E, int v);        // v's last dim
int64_t bcE_numel_bound(const struct bcE_emitter *E, int v);  // v's elements at the bounds
int64_t bcE_rows_bound(const struct bcE_emitter *E, int v);   // v's rows (all but the last dim)
const char *bcE_rows(struct bcE_emitter *E, int v);           // ... as C
// v, checked to fit a C int in the generated code (fails the emission if not).
int64_t bcE_ck_int(struct bcE_emitter *E, int64_t v, const char *what);
// Param slot of n as C ("0" when absent), checked to hold `need` floats.
const char *bcE_wptr(struct bcE_emitter *E, const bc_node *n, int slot, int64_t need);
// A weight matrix as a GEMM reads it (see emit.c): its pointer, leading
// dimension, layout and packed copy (NULL: none).
typedef struct {
  const char *w;
  int64_t ld;
  bool in_out;
  const char *pk;
} bcE_wmat;
bcE_wmat bcE_wfull(struct bcE_emitter *E, const bc_node *n, int slot, int64_t out, int64_t in);
// y = beta y + x W^T (+ bias in the packed path; "0": none), m rows (C); see emit.c.
void bcE_gemm_w(struct bcE_emitter *E, const char *m, int64_t nn, int64_t k, const char *x,
                bcE_wmat W, const char *bias, const char *beta, const char *y, int64_t ldy);
// y = x W^T + bias (row stride ldy; bias "0": none), m rows (C).
void bcE_linear_w(struct bcE_emitter *E, const char *m, int64_t nn, int64_t k, const char *x,
                  bcE_wmat W, const char *bias, const char *y, int64_t ldy);

// Emitted backward (emit_grad.c).
typedef struct { const char *B, *T, *rows; int64_t D; } bcG_dims;  // C expressions, D
bcG_dims bcG_dims_of(struct bcG_emitter *E, int v);
// A statement calling an elementwise kernel (left out of the gemm-only build).
void bcG_kput(struct bcG_emitter *E, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const bc_graph *bcG_graph(const struct bcG_emitter *E);  // the graph being emitted
// Any statement (every build).
void bcG_put(struct bcG_emitter *E, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *bcG_fl(struct bcG_emitter *E, double v);   // a float literal
const char *bcG_val(struct bcG_emitter *E, int v);     // v's forward buffer as C
const char *bcG_dval(struct bcG_emitter *E, int v);    // v's gradient buffer as C
// Scaled operands: slot k's scale as "<pointer>, <count>" ("0, 0": none),
// and the backward of out = alpha*(s2 . a) + beta*(s3 . b) given ds (C).
const char *bcG_scale(struct bcG_emitter *E, const bc_node *n, int k);
void bcG_scaled_bwd(struct bcG_emitter *E, const bc_node *n, const char *ds);
// Dropout: n's key as C, "bcrt_drop_key(BC_seed, BC_step, <key_node>)".  The
// entry of a graph with dropout (bcI_has_dropout) is <model>_backward_ex,
// whose parameters BC_training, BC_seed, BC_step the statements may read.
const char *bcG_drop_key(struct bcG_emitter *E, const bc_node *n);
// n's buffers (grad_buffers; -1 on OOM): slot k of its saved ones (s<id>_<nm>,
// forward to backward), of its backward temporaries (t<id>_<nm>) and a
// temporary slot live in its forward only (f<id>_<nm>); then their names as C.
int64_t bcG_rows_bound(struct bcG_emitter *E, const bc_node *n);  // input 0's rows
int bcG_save_buf(struct bcG_emitter *E, const bc_node *n, int k, const char *nm, int64_t size);
int bcG_temp_buf(struct bcG_emitter *E, const bc_node *n, int k, const char *nm, int64_t size);
int bcG_fwd_temp_buf(struct bcG_emitter *E, const bc_node *n, int k, const char *nm,
                     int64_t size);
const char *bcG_saved(struct bcG_emitter *E, const bc_node *n, int k);
const char *bcG_temp(struct bcG_emitter *E, const bc_node *n, int k);
// dst += k * src over value v's elements.
void bcG_axpy(struct bcG_emitter *E, int v, double k, const char *src, const char *dst);
// A weight matrix (and bias) of n as the emitted GEMMs read it, with its gradient.
// whole: dp is the start of param dparam (rows r0 = 0), so a product of all
// its rows and columns writes every element of its gradient.
typedef struct {
  const char *p, *dp, *bias, *dbias;
  int64_t ld;
  bool io, whole;
  int dparam;
} bcG_wmat;
// Rows r0.. of param slot `slot` (bias slot bslot, -1: none) of a stored
// (total, in) matrix.
bcG_wmat bcG_wpiece(struct bcG_emitter *E, const bc_node *n, int slot, int bslot, int64_t r0,
                    int64_t in, int64_t total);
// y = x W^T + b (m rows, C); its backward: dx = beta dx + dy W, dW += dy^T x, db += colsum dy.
void bcG_lin_fwd(struct bcG_emitter *E, const char *m, int64_t out, int64_t in, const char *x,
                 int64_t ldx, bcG_wmat W, const char *y, int64_t ldy);
void bcG_lin_bwd(struct bcG_emitter *E, const char *m, int64_t out, int64_t in, const char *x,
                 int64_t ldx, bcG_wmat W, const char *dy, int64_t lddy, const char *dx,
                 int64_t lddx, const char *beta);

// --- the stages' functions, per op -------------------------------------------
// ops/: the attribute families shared by several ops
void bcT_norm_defaults(bc_node *n);   // Add and the norms (ops/norm.c)
// Add and AddLayerNorm after fuse-scale / fuse-act: whether n has a scaled
// or activated operand (input slots 2, 3; opact); the dump's " act1=silu";
// operand k's activation as the runtime takes it (-1: none, else BCRT_UN_*).
bool bcT_add_extra(const bc_node *n);
void bcT_opact_attrs(const bc_node *n, bc_sbuf *out);
int bcT_opact_rt(const bc_node *n, int k);
// The activations of Act (ops/act.c) in double, and their derivatives.
double bcT_unary_f(bc_unary u, double x);
double bcT_unary_df(bc_unary u, double x);
bool bcT_norm_same(const bc_node *a, const bc_node *b);
void bcT_dense_defaults(bc_node *n);  // FFN and Linear (ops/ffn.c)
bool bcT_dense_same(const bc_node *a, const bc_node *b);
// parse.c
#define BC_BUILD(name)                                                                   \
  void name(struct bcP_parser *P, const bc_op_info *info, bc_node *n, const bc_token *optok, \
            const bc_loc *posloc, const struct bcP_attr_vals *av, const bc_shape *inp,       \
            bc_shape *out)
BC_BUILD(bcP_build_layernorm);
BC_BUILD(bcP_build_rmsnorm);
BC_BUILD(bcP_build_attention);
BC_BUILD(bcP_build_none);   // not supported: a fused op (the passes make it; no graph file names it)
// plan.c
#define BC_SCRATCH(name) \
  int name(bc_graph *g, const bc_node *n, bc_shape sh[], const char *names[], int *cnt)
BC_SCRATCH(bcM_no_scratch);
BC_SCRATCH(bcM_scratch_attention);
BC_SCRATCH(bcM_scratch_ffn);
// interp.c
int bcR_run_layernorm(struct bcR_interp *in, const bc_node *n, const struct bcR_operands *o);
int bcR_run_add_ln(struct bcR_interp *in, const bc_node *n, const struct bcR_operands *o);
// Add and AddLayerNorm with scaled operands (the fuse-scale pass: input slot
// 2 scales a, slot 3 scales b, each 1 or D values; a and b of one shape):
// out = alpha*(s2 . a) + beta*(s3 . b), each scaled operand rounded to
// float first (as the Mul it replaces), then normalised for AddLayerNorm
// (s_out: the sum, NULL when not kept).
int bcR_add_scaled_rows(struct bcR_interp *in, const bc_node *n, const struct bcR_operands *o,
                        float *out, float *s_out);
int bcR_run_dual_add_ln(struct bcR_interp *in, const bc_node *n, const struct bcR_operands *o);
int bcR_run_attention(struct bcR_interp *in, const bc_node *n, const struct bcR_operands *o);
// grad.c
int bcR_no_pieces(const bc_tape *tp, const bc_node *n, int64_t d, struct bcR_nweights *nw);
int bcR_norm_pieces(const bc_tape *tp, const bc_node *n, int64_t d, struct bcR_nweights *nw);
int bcR_attention_pieces(const bc_tape *tp, const bc_node *n, int64_t d, struct bcR_nweights *nw);
#define BC_REF_FWD(name)                                                                  \
  int name(bc_tape *tp, const bc_node *n, const struct bcR_ops *o,                        \
           const struct bcR_nweights *nw, struct bcR_nsave *sv)
BC_REF_FWD(bcR_fwd_ln_family);
BC_REF_FWD(bcR_fwd_attention);
#define BC_REF_BWD(name)                                                                  \
  int name(struct bcR_bwd *b, const bc_node *n, const struct bcR_ops *o,                  \
           const struct bcR_nweights *nw)
BC_REF_BWD(bcR_bwd_ln_family);
BC_REF_BWD(bcR_bwd_attention);
// emit.c
void bcE_emit_layernorm(struct bcE_emitter *E, const bc_node *n);   // and RMSNorm
void bcE_emit_add_ln(struct bcE_emitter *E, const bc_node *n);
void bcE_emit_dual(struct bcE_emitter *E, const bc_node *n);
void bcE_emit_attention(struct bcE_emitter *E, const bc_node *n);
// emit_grad.c
const char *bcG_supported(const bc_graph *g, const bc_node *n);
const char *bcG_check_attention(const bc_graph *g, const bc_node *n);
int bcG_no_buffers(struct bcG_emitter *E, const bc_node *n);
int bcG_bufs_add_ln(struct bcG_emitter *E, const bc_node *n);
int bcG_bufs_dual(struct bcG_emitter *E, const bc_node *n);
int bcG_bufs_attention(struct bcG_emitter *E, const bc_node *n);
void bcG_fwd_layernorm(struct bcG_emitter *E, const bc_node *n);
void bcG_fwd_rmsnorm(struct bcG_emitter *E, const bc_node *n);
void bcG_fwd_add_ln(struct bcG_emitter *E, const bc_node *n);   // and DualAddLayerNorm
void bcG_fwd_attention(struct bcG_emitter *E, const bc_node *n);
void bcG_bwd_norms(struct bcG_emitter *E, const bc_node *n);   // every norm, fused or not
void bcG_bwd_attention(struct bcG_emitter *E, const bc_node *n);

#endif
