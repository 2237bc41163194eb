// ops/attention.c — Attention: multi-head attention with packed or separate
// Q/K/V projections, self or cross (kv=), causal, rotary positions (rope),
// grouped-query heads (kv_heads), padding masks (lengths=, kv_lengths=) and
// dropout=p on the softmax weights [B, H, T, S] in training, and issue 23's
// options: qk_norm=rms|layernorm of q and k before RoPE (per head or over
// the projection), window=W (sliding-window causal mask), softcap=c on the
// scores, scale= (the factor of q.k), head_scale=true (NormFormer), head_dim=K
// (a head width independent of D: Qwen3, Gemma 2)  (as PyTorch's
// MultiheadAttention and Hugging Face's attention modules; grad.c and
// emit_grad.c draw the masks, inference never drops).
//
// Input slots and the eight parameter slots are bc.h's.  Its GEMMs read
// every input row while output rows are written, so nothing is in place.
#include "ops.h"

static void attention_defaults(bc_node *n) {
  n->heads = n->kv_heads = 0;  // the parser sets both; bcI_verify: kv_heads 0 means heads
  n->causal = n->rope = false;
  n->rope_theta = 10000.0;
  n->qk_norm = 0;
  n->qk_norm_per_head = true;
  n->qk_norm_eps = 1e-6;
  n->window = 0;
  n->softcap = n->scale = 0.0;
  n->head_scale = false;
  n->head_dim = 0;
}

static bool attention_same(const bc_node *a, const bc_node *b) {
  return a->heads == b->heads && a->kv_heads == b->kv_heads && a->causal == b->causal &&
         a->rope == b->rope && a->rope_theta == b->rope_theta && a->dropout == b->dropout &&
         a->qk_norm == b->qk_norm && a->qk_norm_per_head == b->qk_norm_per_head &&
         a->qk_norm_eps == b->qk_norm_eps && a->window == b->window &&
         a->softcap == b->softcap && a->scale == b->scale && a->head_scale == b->head_scale &&
         a->head_dim == b->head_dim;
}

static void attention_attrs(const bc_node *n, bc_attrs_view view, bc_sbuf *out) {
  if (view == BC_ATTRS_DOT) {
    bc_sb_add(out, "\\nheads=%lld%s%s", (long long)n->heads, n->causal ? " causal" : "",
              n->nin > 1 && n->in[1] >= 0 ? " cross" : "");
    return;
  }
  bc_sb_add(out, " heads=%lld causal=%s", (long long)n->heads, n->causal ? "true" : "false");
  if (view != BC_ATTRS_DUMP) return;
  if (n->kv_heads != n->heads) bc_sb_add(out, " kv_heads=%lld", (long long)n->kv_heads);
  if (n->rope) bc_sb_add(out, " rope_theta=%.9g", n->rope_theta);
  if (n->in_out) bc_sb_add(out, " layout=in_out");
  if (n->dropout > 0) bc_sb_add(out, " dropout=%.9g", n->dropout);
  if (n->qk_norm)
    bc_sb_add(out, " qk_norm=%s qk_norm_per_head=%s qk_norm_eps=%.9g",
              n->qk_norm == 1 ? "rms" : "layernorm", n->qk_norm_per_head ? "true" : "false",
              n->qk_norm_eps);
  if (n->window) bc_sb_add(out, " window=%lld", (long long)n->window);
  if (n->softcap > 0) bc_sb_add(out, " softcap=%.9g", n->softcap);
  if (n->scale > 0) bc_sb_add(out, " scale=%.9g", n->scale);
  if (n->head_scale) bc_sb_add(out, " head_scale=true");
  if (n->head_dim) bc_sb_add(out, " head_dim=%lld", (long long)n->head_dim);
}

// init.SEL= selectors: slot 0 is the packed "qkv" (params=, qkv=) or "q"
// (q=, k=, v=); "o" the out projection; each with ".bias".
static const char *attention_init_sel(const bc_node *n, int k) {
  static const char *const sep[] = {"q", "q.bias", "o", "o.bias", "k", "k.bias", "v", "v.bias"};
  static const char *const packed[] = {"qkv", "qkv.bias", "o", "o.bias"};
  static const char *const opt[] = {"q_norm", "q_norm.bias", "k_norm", "k_norm.bias",
                                    "head_scale"};
  if (k < 0 || k >= BC_MAX_NODE_PARAMS) return NULL;
  if (k >= 8) return opt[k - 8];
  if (n->param[4] >= 0) return sep[k];
  return k < 4 ? packed[k] : NULL;
}

// init.q / init.k / init.v of a packed projection (params=, qkv=): the row
// blocks [0, D), [D, D + kvd), [D + kvd, D + 2 kvd) of slot 0, columns with
// layout=in_out; j = 3..5, init.q.bias / init.k.bias / init.v.bias: the same
// ranges of the packed bias (slot 1), when there is one.
static bool attention_init_part(const bc_graph *g, const bc_node *n, int j, bc_init_part *b) {
  static const char *const names[] = {"q", "k", "v", "q.bias", "k.bias", "v.bias"};
  if (j < 0 || j > 5 || n->param[0] < 0 || n->param[4] >= 0) return false;
  if (j >= 3 && n->param[1] < 0) return false;
  const bc_shape *s = &g->params[n->param[0]].shape;
  if (s->rank != 2) return false;
  int64_t rows = n->in_out ? s->d[1] : s->d[0], D = n->in_out ? s->d[0] : s->d[1];
  int64_t kvd = (rows - D) / 2;
  int q = j % 3;
  *b = (bc_init_part){names[j], j < 3 ? 0 : 1, q == 0 ? 0 : D + (q - 1) * kvd, q == 0 ? D : kvd,
                      j < 3 && n->in_out};
  return true;
}

const bc_op_def bcT_attention = {
    .op = BC_OP_ATTENTION,
    .info = {"Attention", true, 1, 1, 4, 1, 1,
             "multi-head attention (self, or cross with kv=), optional padding masks",
             {{"heads", BC_AT_INT, true, 0}, {"causal", BC_AT_BOOL, false, 0},
              {"params", BC_AT_PATH, false, 0}, {"kv", BC_AT_VALUE, false, 1},
              {"lengths", BC_AT_VALUE, false, 2},
              {"kv_lengths", BC_AT_VALUE, false, 3},
              {"kv_heads", BC_AT_INT, false, 0}, {"qkv", BC_AT_PATH, false, 0},
              {"q", BC_AT_PATH, false, 0}, {"k", BC_AT_PATH, false, 0},
              {"v", BC_AT_PATH, false, 0}, {"o", BC_AT_PATH, false, 0},
              {"bias", BC_AT_BOOL, false, 0}, {"layout", BC_AT_LAYOUT, false, 0},
              {"rope", BC_AT_BOOL, false, 0}, {"rope_theta", BC_AT_FLOAT, false, 0},
              {"dropout", BC_AT_FLOAT, false, 0},
              {"qk_norm", BC_AT_WORD, false, 0}, {"qk_norm_per_head", BC_AT_BOOL, false, 0},
              {"q_norm", BC_AT_PATH, false, 0}, {"k_norm", BC_AT_PATH, false, 0},
              {"qk_norm_eps", BC_AT_FLOAT, false, 0}, {"window", BC_AT_INT, false, 0},
              {"softcap", BC_AT_FLOAT, false, 0}, {"scale", BC_AT_FLOAT, false, 0},
              {"head_scale", BC_AT_BOOL, false, 0}, {"head_dim", BC_AT_INT, false, 0}}},
    .params = "packed Q|K|V weight and bias (or Q's), out weight and bias, "
              "then K and V weights and biases (separate projections), then q_norm "
              "weight and bias, k_norm weight and bias (qk_norm=), head_scale (H)",
    .init_sel = attention_init_sel,
    .init_part = attention_init_part,
    .dot_color = "#fde2c8",
    .defaults = attention_defaults,
    .same_attrs = attention_same,
    .attrs = attention_attrs,
    .build = bcP_build_attention,
    .scratch = bcM_scratch_attention,
    .interp = bcR_run_attention,
    .ref_weights = bcR_attention_pieces,
    .ref_fwd = bcR_fwd_attention,
    .ref_bwd = bcR_bwd_attention,
    .emit = bcE_emit_attention,
    .grad_check = bcG_check_attention,
    .grad_buffers = bcG_bufs_attention,
    .grad_fwd = bcG_fwd_attention,
    .grad_bwd = bcG_bwd_attention,
};
