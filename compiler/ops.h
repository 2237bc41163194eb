// ops.h — the op table: one description per op that every stage reads.
//
// Lua keeps one table of opcodes (lopcodes.c) that the parser, the code
// generator and the VM all read; ggml asserts GGML_OP_COUNT against its
// tables.  blockc does the same: every op has one row, a bc_op_def, written
// in the file of its kind under compiler/ops/ (add.c, norm.c, attention.c,
// ffn.c, linear.c) and collected by ops/table.c.  A row holds
//
//   - the graph-file spelling and arity (bc_op_info, bc.h: name, positional
//     inputs, attributes with their types, input and output slots);
//   - the in-place rules (which input slots each output may overwrite,
//     read by the inplace pass) and whether the op is a norm that a
//     residual Add fuses into (the fusion passes);
//   - its parameter slots, in words (the layout is bc.h's table);
//   - one function per stage: the parser's shape checks and parameters,
//     the reference interpreter, the reference backward (weights, tape
//     forward, reverse step), the emitted forward, the emitted backward
//     (check, buffers, forward half, backward half) and the attribute
//     printer that `dump`, the emitted comments and `dot` share.
//
// The stages keep no switch on the op: they call bcT_def(op)->stage.  A
// stage an op does not take has an explicit entry (bcT_no_*, below) that
// fails with a message naming the op and the stage; a NULL entry is a bug
// that tests/test_ops.c catches (it walks BC_OP_COUNT).
//
// Each stage's working state is private to its file; the stage functions
// receive it as an incomplete struct pointer, so a row only names them.
//
// Adding an op (e.g. Mul(a, b), elementwise):
//   1. bc.h: BC_OP_MUL in bc_op before BC_OP_COUNT (and its attributes in
//      bc_node if it has new ones; its parameter slots in the table there).
//   2. compiler/ops/mul.c (or the file of its kind): its bc_op_def row and
//      the functions the row names, one per stage (a stage it cannot take:
//      the matching bcT_no_* entry).
//   3. compiler/ops/table.c: `extern` the row and put it at [BC_OP_MUL].
//   4. its runtime kernel (runtime/blockc_rt.{c,h}, jit.c's symbol list) if
//      the emitted code calls a new one.
//   5. tests: test_ops.c checks the row; add the op's cases to
//      test_interp_ops / test_grad / test_jit_ops.
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

typedef struct bc_op_def {
  bc_op op;                           // its own index (the test checks it)
  bc_op_info info;                    // spelling and arity (bc.h)
  // In place: inplace[k] is the mask of input slots output k may overwrite
  // (the kernel reads each element before it writes it); 0: none.
  unsigned inplace[BC_MAX_NODE_OUT];
  bool norm;                          // a norm a residual Add fuses into (fuse-add-ln, fuse-dual)
  const char *params;                 // its parameter slots, in words
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
} bc_op_def;

// The row of op; NULL for an invalid op.
const bc_op_def *bcT_def(bc_op op);
// The one attribute printer: n's attributes in view into out (appended).
void bcT_attrs(const bc_node *n, bc_attrs_view view, bc_sbuf *out);

// --- the stages' functions, per op -------------------------------------------
// ops/: the attribute families shared by several ops
void bcT_norm_defaults(bc_node *n);   // Add and the norms (ops/norm.c)
bool bcT_norm_same(const bc_node *a, const bc_node *b);
void bcT_dense_defaults(bc_node *n);  // FFN and Linear (ops/ffn.c)
bool bcT_dense_same(const bc_node *a, const bc_node *b);
// parse.c
#define BC_BUILD(name)                                                                   \
  void name(struct bcP_parser *P, const bc_op_info *info, bc_node *n, const bc_token *optok, \
            const bc_loc *posloc, const struct bcP_attr_vals *av, const bc_shape *inp,       \
            bc_shape *out)
BC_BUILD(bcP_build_add);
BC_BUILD(bcP_build_layernorm);
BC_BUILD(bcP_build_rmsnorm);
BC_BUILD(bcP_build_attention);
BC_BUILD(bcP_build_ffn);
BC_BUILD(bcP_build_linear);
BC_BUILD(bcP_build_none);   // not supported: a fused op (the passes make it; no graph file names it)
// interp.c
int bcR_run_add(struct bcR_interp *in, const bc_node *n, const struct bcR_operands *o);
int bcR_run_layernorm(struct bcR_interp *in, const bc_node *n, const struct bcR_operands *o);
int bcR_run_add_ln(struct bcR_interp *in, const bc_node *n, const struct bcR_operands *o);
int bcR_run_dual_add_ln(struct bcR_interp *in, const bc_node *n, const struct bcR_operands *o);
int bcR_run_attention(struct bcR_interp *in, const bc_node *n, const struct bcR_operands *o);
int bcR_run_ffn(struct bcR_interp *in, const bc_node *n, const struct bcR_operands *o);
int bcR_run_linear(struct bcR_interp *in, const bc_node *n, const struct bcR_operands *o);
// grad.c
int bcR_no_pieces(const bc_tape *tp, const bc_node *n, int64_t d, struct bcR_nweights *nw);
int bcR_norm_pieces(const bc_tape *tp, const bc_node *n, int64_t d, struct bcR_nweights *nw);
int bcR_attention_pieces(const bc_tape *tp, const bc_node *n, int64_t d, struct bcR_nweights *nw);
int bcR_ffn_pieces(const bc_tape *tp, const bc_node *n, int64_t d, struct bcR_nweights *nw);
int bcR_linear_pieces(const bc_tape *tp, const bc_node *n, int64_t d, struct bcR_nweights *nw);
#define BC_REF_FWD(name)                                                                  \
  int name(bc_tape *tp, const bc_node *n, const struct bcR_ops *o,                        \
           const struct bcR_nweights *nw, struct bcR_nsave *sv)
BC_REF_FWD(bcR_fwd_add);
BC_REF_FWD(bcR_fwd_ln_family);
BC_REF_FWD(bcR_fwd_attention);
BC_REF_FWD(bcR_fwd_ffn);
BC_REF_FWD(bcR_fwd_linear);
#define BC_REF_BWD(name)                                                                  \
  int name(struct bcR_bwd *b, const bc_node *n, const struct bcR_ops *o,                  \
           const struct bcR_nweights *nw)
BC_REF_BWD(bcR_bwd_add);
BC_REF_BWD(bcR_bwd_ln_family);
BC_REF_BWD(bcR_bwd_attention);
BC_REF_BWD(bcR_bwd_ffn);
BC_REF_BWD(bcR_bwd_linear);
// emit.c
void bcE_emit_add(struct bcE_emitter *E, const bc_node *n);
void bcE_emit_layernorm(struct bcE_emitter *E, const bc_node *n);   // and RMSNorm
void bcE_emit_add_ln(struct bcE_emitter *E, const bc_node *n);
void bcE_emit_dual(struct bcE_emitter *E, const bc_node *n);
void bcE_emit_attention(struct bcE_emitter *E, const bc_node *n);
void bcE_emit_ffn(struct bcE_emitter *E, const bc_node *n);
void bcE_emit_linear(struct bcE_emitter *E, const bc_node *n);
// emit_grad.c
const char *bcG_supported(const bc_graph *g, const bc_node *n);
const char *bcG_check_attention(const bc_graph *g, const bc_node *n);
int bcG_no_buffers(struct bcG_emitter *E, const bc_node *n);
int bcG_bufs_add_ln(struct bcG_emitter *E, const bc_node *n);
int bcG_bufs_dual(struct bcG_emitter *E, const bc_node *n);
int bcG_bufs_attention(struct bcG_emitter *E, const bc_node *n);
int bcG_bufs_ffn(struct bcG_emitter *E, const bc_node *n);
void bcG_fwd_add(struct bcG_emitter *E, const bc_node *n);
void bcG_fwd_layernorm(struct bcG_emitter *E, const bc_node *n);
void bcG_fwd_rmsnorm(struct bcG_emitter *E, const bc_node *n);
void bcG_fwd_add_ln(struct bcG_emitter *E, const bc_node *n);   // and DualAddLayerNorm
void bcG_fwd_attention(struct bcG_emitter *E, const bc_node *n);
void bcG_fwd_ffn(struct bcG_emitter *E, const bc_node *n);
void bcG_fwd_linear(struct bcG_emitter *E, const bc_node *n);
void bcG_bwd_add(struct bcG_emitter *E, const bc_node *n);
void bcG_bwd_norms(struct bcG_emitter *E, const bc_node *n);   // every norm, fused or not
void bcG_bwd_attention(struct bcG_emitter *E, const bc_node *n);
void bcG_bwd_ffn(struct bcG_emitter *E, const bc_node *n);
void bcG_bwd_linear(struct bcG_emitter *E, const bc_node *n);

#endif
