// gguf.c — llama.cpp's GGUF files as checkpoints (issue 25).
//
// The bytes are parsed by the runtime's reader (runtime/src/gguf.c,
// bcrt_gguf_open_source: the whole header validated before any tensor is
// read).  This file presents an opened GGUF file as the tensor table the
// weights loader reads (bc_st_file, as a safetensors file is), under the
// names and layouts of the Hugging Face checkpoint it was converted from,
// so the shipped whole-model graphs load it as they are:
//
//   general.architecture "llama": token_embd -> model.embed_tokens,
//     blk.{i}.attn_norm -> model.layers.{i}.input_layernorm, attn_q/k/v/output
//     -> self_attn.q_proj/k_proj/v_proj/o_proj, ffn_norm ->
//     post_attention_layernorm, ffn_gate/up/down -> mlp.gate_proj/up_proj/
//     down_proj, output_norm -> model.norm, output -> lm_head.  llama.cpp's
//     converter permutes the rows of attn_q and attn_k per head for its
//     interleaved rope (HF row h*dh + j*dh/2 + i is stored at h*dh + 2i + j);
//     reading undoes it (heads: llama.attention.head_count for q,
//     head_count_kv for k), so the graphs' rotate_half rope applies.
//   "gpt2": token_embd -> transformer.wte, position_embd -> transformer.wpe,
//     blk.{i}.attn_norm / ffn_norm -> transformer.h.{i}.ln_1 / ln_2,
//     attn_qkv / attn_output -> attn.c_attn / attn.c_proj, ffn_up / ffn_down
//     -> mlp.c_fc / mlp.c_proj, output_norm -> transformer.ln_f, output ->
//     lm_head.  The converter transposed GPT-2's Conv1D matrices to (out, in);
//     reading transposes them back to HF's (in, out), which layout=in_out
//     graphs (gpt2_lm.blk) read.
//   any other architecture: the GGUF names as they are, shapes in PyTorch
//     order (ne reversed), so a graph that names its parameters that way loads.
//
// Every tensor type the runtime converts (F32, F16, BF16, Q8_0, Q4_0, Q4_1,
// Q5_0, Q5_1, Q4_K, Q6_K) reads as float32.  bcF_gguf_defs turns the
// metadata into -D values (D, H, KV, F, N, V, P) for the dims a graph
// declares, and bcF_gguf_apply sets the norms' eps and rope's theta the file
// states (cli_load; docs/checkpoints.md).
#define _POSIX_C_SOURCE 200809L
#include "bc.h"
#include "blockc_rt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

typedef enum { GG_AS_IS, GG_TRANSPOSE, GG_UNPERMUTE_Q, GG_UNPERMUTE_K } gg_xform;

// One tensor of the view: the file's tensor and how it becomes the HF one.
struct bc_gg_view {
  const bcrt_gguf_tensor *src;
  gg_xform x;
  int64_t heads;             // the row permutation's heads (GG_UNPERMUTE_*)
};

// A name pattern: "%d" stands for the layer index (digits, no leading zero).
typedef struct {
  const char *gguf, *hf;
  gg_xform x;
} gg_name;

static const gg_name llama_names[] = {
    {"token_embd.weight", "model.embed_tokens.weight", GG_AS_IS},
    {"output_norm.weight", "model.norm.weight", GG_AS_IS},
    {"output.weight", "lm_head.weight", GG_AS_IS},
    {"blk.%d.attn_norm.weight", "model.layers.%d.input_layernorm.weight", GG_AS_IS},
    {"blk.%d.attn_q.weight", "model.layers.%d.self_attn.q_proj.weight", GG_UNPERMUTE_Q},
    {"blk.%d.attn_k.weight", "model.layers.%d.self_attn.k_proj.weight", GG_UNPERMUTE_K},
    {"blk.%d.attn_v.weight", "model.layers.%d.self_attn.v_proj.weight", GG_AS_IS},
    {"blk.%d.attn_output.weight", "model.layers.%d.self_attn.o_proj.weight", GG_AS_IS},
    {"blk.%d.ffn_norm.weight", "model.layers.%d.post_attention_layernorm.weight", GG_AS_IS},
    {"blk.%d.ffn_gate.weight", "model.layers.%d.mlp.gate_proj.weight", GG_AS_IS},
    {"blk.%d.ffn_up.weight", "model.layers.%d.mlp.up_proj.weight", GG_AS_IS},
    {"blk.%d.ffn_down.weight", "model.layers.%d.mlp.down_proj.weight", GG_AS_IS},
    {NULL, NULL, GG_AS_IS},
};

static const gg_name gpt2_names[] = {
    {"token_embd.weight", "transformer.wte.weight", GG_AS_IS},
    {"position_embd.weight", "transformer.wpe.weight", GG_AS_IS},
    {"output_norm.weight", "transformer.ln_f.weight", GG_AS_IS},
    {"output_norm.bias", "transformer.ln_f.bias", GG_AS_IS},
    {"output.weight", "lm_head.weight", GG_AS_IS},
    {"blk.%d.attn_norm.weight", "transformer.h.%d.ln_1.weight", GG_AS_IS},
    {"blk.%d.attn_norm.bias", "transformer.h.%d.ln_1.bias", GG_AS_IS},
    {"blk.%d.attn_qkv.weight", "transformer.h.%d.attn.c_attn.weight", GG_TRANSPOSE},
    {"blk.%d.attn_qkv.bias", "transformer.h.%d.attn.c_attn.bias", GG_AS_IS},
    {"blk.%d.attn_output.weight", "transformer.h.%d.attn.c_proj.weight", GG_TRANSPOSE},
    {"blk.%d.attn_output.bias", "transformer.h.%d.attn.c_proj.bias", GG_AS_IS},
    {"blk.%d.ffn_norm.weight", "transformer.h.%d.ln_2.weight", GG_AS_IS},
    {"blk.%d.ffn_norm.bias", "transformer.h.%d.ln_2.bias", GG_AS_IS},
    {"blk.%d.ffn_up.weight", "transformer.h.%d.mlp.c_fc.weight", GG_TRANSPOSE},
    {"blk.%d.ffn_up.bias", "transformer.h.%d.mlp.c_fc.bias", GG_AS_IS},
    {"blk.%d.ffn_down.weight", "transformer.h.%d.mlp.c_proj.weight", GG_TRANSPOSE},
    {"blk.%d.ffn_down.bias", "transformer.h.%d.mlp.c_proj.bias", GG_AS_IS},
    {NULL, NULL, GG_AS_IS},
};

// The metadata a family states, as -D dims of the shipped graphs; NULL key:
// taken from a tensor's shape instead (V from token_embd's rows).
typedef struct {
  const char *dim, *key;
} gg_dim;

static const gg_dim llama_dims[] = {
    {"D", "embedding_length"}, {"N", "block_count"}, {"H", "attention.head_count"},
    {"KV", "attention.head_count_kv"}, {"F", "feed_forward_length"}, {NULL, NULL},
};
static const gg_dim gpt2_dims[] = {
    {"D", "embedding_length"}, {"N", "block_count"}, {"H", "attention.head_count"},
    {"F", "feed_forward_length"}, {"P", "context_length"}, {NULL, NULL},
};

static const struct {
  const char *arch;
  const gg_name *names;
  const gg_dim *dims;
  const char *eps_key;   // the norms' epsilon
} gg_archs[] = {
    {"llama", llama_names, llama_dims, "attention.layer_norm_rms_epsilon"},
    {"gpt2", gpt2_names, gpt2_dims, "attention.layer_norm_epsilon"},
};

static int arch_index(const bcrt_gguf_file *gf) {
  const bcrt_gguf_kv *a = bcrt_gguf_get(gf, "general.architecture");
  if (!a || a->type != BCRT_GGUF_STRING) return -1;
  for (int i = 0; i < (int)(sizeof gg_archs / sizeof gg_archs[0]); i++)
    if (!strcmp(a->str, gg_archs[i].arch)) return i;
  return -1;
}

// name against pattern p; the layer index's digits into *digits (they are
// copied, not parsed: any length is the same layer in both names).
static bool match(const char *p, const char *name, const char **digits, size_t *nd) {
  const char *pc = strstr(p, "%d");
  if (!pc) return !strcmp(p, name) && (*nd = 0, true);
  size_t pre = (size_t)(pc - p);
  if (strncmp(p, name, pre)) return false;
  const char *d = name + pre, *e = d;
  while (*e >= '0' && *e <= '9') e++;
  if (e == d || (*d == '0' && e - d > 1) || strcmp(e, pc + 2)) return false;
  *digits = d, *nd = (size_t)(e - d);
  return true;
}

static char *render(const char *p, const char *digits, size_t nd) {
  const char *pc = strstr(p, "%d");
  size_t n = strlen(p) + nd + 1;
  char *s = malloc(n);
  if (!s) return NULL;
  if (!pc) memcpy(s, p, strlen(p) + 1);
  else snprintf(s, n, "%.*s%.*s%s", (int)(pc - p), p, (int)nd, digits, pc + 2);
  return s;
}

// key under the family's prefix ("llama." key), as a non-negative integer.
static bool meta_uint(const bcrt_gguf_file *gf, const char *arch, const char *key, uint64_t *v) {
  char k[320];
  snprintf(k, sizeof k, "%s.%s", arch, key);
  const bcrt_gguf_kv *kv = bcrt_gguf_get(gf, k);
  if (!kv || !kv->is_int || kv->neg) return false;
  *v = kv->u;
  return true;
}

static bool meta_float(const bcrt_gguf_file *gf, const char *arch, const char *key, double *v) {
  char k[320];
  snprintf(k, sizeof k, "%s.%s", arch, key);
  const bcrt_gguf_kv *kv = bcrt_gguf_get(gf, k);
  if (!kv || kv->type == BCRT_GGUF_STRING || kv->type == BCRT_GGUF_ARRAY || !isfinite(kv->f)) return false;
  *v = kv->f;
  return true;
}

static int cmp_view(const void *a, const void *b) {
  return strcmp(((const bc_st_tensor *)a)->name, ((const bc_st_tensor *)b)->name);
}

int bcF_open_view(bc_ctx *ctx, bc_st_file *f) {
  bcrt_error e;
  if (bcrt_gguf_open_source(f->src, &f->gg, &e)) return bcS_rt_error(ctx, f->path, &e);
  int a = arch_index(f->gg), n = bcrt_gguf_count(f->gg);
  f->ntensors = n;
  f->tensors = calloc((size_t)(n ? n : 1), sizeof *f->tensors);
  f->ggv = calloc((size_t)(n ? n : 1), sizeof *f->ggv);
  if (!f->tensors || !f->ggv) return bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", f->path);
  uint64_t heads = 0, kv_heads = 0;
  if (a >= 0) {
    meta_uint(f->gg, gg_archs[a].arch, "attention.head_count", &heads);
    if (!meta_uint(f->gg, gg_archs[a].arch, "attention.head_count_kv", &kv_heads)) kv_heads = heads;
  }
  for (int i = 0; i < n; i++) {
    const bcrt_gguf_tensor *r = bcrt_gguf_tensor_at(f->gg, i);
    bc_st_tensor *t = &f->tensors[i];
    struct bc_gg_view *v = &f->ggv[i];
    v->src = r;
    const char *name = r->name, *digits = "";
    size_t nd = 0;
    char *hf = NULL;
    for (const gg_name *m = a >= 0 ? gg_archs[a].names : NULL; m && m->gguf && !hf; m++)
      if (match(m->gguf, name, &digits, &nd)) {
        if (!(hf = render(m->hf, digits, nd))) return bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", f->path);
        v->x = m->x;
      }
    t->name = hf ? hf : name;
    t->owned_name = hf != NULL;
    t->dtype_name = r->type_name;
    t->dtype = bcrt_gguf_can_read(r->type) ? BC_DT_F32 : BC_DT_OTHER;
    t->rank = r->rank;
    for (int k = 0; k < r->rank; k++) t->shape[k] = (int64_t)r->ne[r->rank - 1 - k];
    if (v->x == GG_TRANSPOSE && r->rank != 2) v->x = GG_AS_IS;
    if (v->x == GG_TRANSPOSE) t->shape[0] = (int64_t)r->ne[0], t->shape[1] = (int64_t)r->ne[1];
    if (v->x == GG_UNPERMUTE_Q || v->x == GG_UNPERMUTE_K) {
      v->heads = (int64_t)(v->x == GG_UNPERMUTE_Q ? heads : kv_heads);
      // the permutation needs rows = heads * (even head width); a file that
      // states no (or a wrong) head count is refused here, not misread
      uint64_t rows = r->rank == 2 ? r->ne[1] : 0;
      if (v->heads <= 0 || rows % (uint64_t)v->heads || (rows / (uint64_t)v->heads) % 2)
        return bc_error(ctx, BC_EINPUT, "%s: error: tensor '%s' (%llu rows) cannot be un-permuted for rope: "
                        "%s.attention.head_count%s is %lld", f->path, name, (unsigned long long)rows,
                        gg_archs[a].arch, v->x == GG_UNPERMUTE_K ? "_kv" : "", (long long)v->heads);
    }
    t->begin = r->offset, t->end = r->offset + r->bytes;
  }
  // sorted by (mapped) name, as bcS_find searches; the views follow their tensors
  for (int i = 0; i < n; i++) f->tensors[i].view = i;
  qsort(f->tensors, (size_t)n, sizeof *f->tensors, cmp_view);
  for (int i = 1; i < n; i++)
    if (!strcmp(f->tensors[i - 1].name, f->tensors[i].name))
      return bc_error(ctx, BC_EINPUT, "%s: error: two tensors map to '%s'", f->path, f->tensors[i].name);
  f->data_off = 0, f->data_len = f->size;
  return BC_OK;
}

const bc_st_tensor *bcF_find(const bc_st_file *f, const char *name) {
  int lo = 0, hi = f->ntensors - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2, c = strcmp(f->tensors[mid].name, name);
    if (c == 0) return &f->tensors[mid];
    if (c < 0) lo = mid + 1;
    else hi = mid - 1;
  }
  return NULL;
}

int bcF_read_f32(bc_ctx *ctx, const bc_st_file *f, const bc_st_tensor *t, float *dst) {
  const struct bc_gg_view *v = &f->ggv[t->view];
  bcrt_error e;
  if (v->x == GG_AS_IS) {
    if (bcrt_gguf_read_f32(f->gg, v->src, dst, &e)) return bcS_rt_error(ctx, f->path, &e);
    return BC_OK;
  }
  uint64_t n = v->src->numel, cols = v->src->ne[0], rows = v->src->ne[1];
  float *tmp = malloc((size_t)n * sizeof *tmp);
  if (!tmp) return bc_error(ctx, BC_ENOMEM, "%s: error: out of memory reading '%s'", f->path, t->name);
  if (bcrt_gguf_read_f32(f->gg, v->src, tmp, &e)) {
    free(tmp);
    return bcS_rt_error(ctx, f->path, &e);
  }
  if (v->x == GG_TRANSPOSE) {  // file (rows = out, cols = in) -> HF (in, out)
    for (uint64_t r = 0; r < rows; r++)
      for (uint64_t c = 0; c < cols; c++) dst[c * rows + r] = tmp[r * cols + c];
  } else {  // HF row h*dh + j*half + i is the file's row h*dh + 2i + j
    uint64_t dh = rows / (uint64_t)v->heads, half = dh / 2;
    for (uint64_t h = 0; h < (uint64_t)v->heads; h++)
      for (uint64_t i = 0; i < half; i++)
        for (uint64_t j = 0; j < 2; j++)
          memcpy(dst + (h * dh + j * half + i) * cols, tmp + (h * dh + 2 * i + j) * cols, cols * sizeof *dst);
  }
  free(tmp);
  return BC_OK;
}

int bcF_is_copy(bc_ctx *ctx, const bc_st_file *f, const bc_st_tensor *a, const bc_st_tensor *b, bool *same) {
  *same = false;
  if (a->rank != b->rank) return BC_OK;
  for (int k = 0; k < a->rank; k++)
    if (a->shape[k] != b->shape[k]) return BC_OK;
  if (a->dtype != BC_DT_F32 || b->dtype != BC_DT_F32) return BC_OK;
  uint64_t n = f->ggv[a->view].src->numel;
  float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
  int rc = x && y ? BC_OK : bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", f->path);
  if (rc == BC_OK) rc = bcF_read_f32(ctx, f, a, x);
  if (rc == BC_OK) rc = bcF_read_f32(ctx, f, b, y);
  if (rc == BC_OK) {
    bool constant = true;
    for (uint64_t i = 1; i < n && constant; i++) constant = x[i] == x[0];
    *same = !constant && !memcmp(x, y, (size_t)n * sizeof *x);
  }
  free(x);
  free(y);
  return rc;
}

void bcF_close_view(bc_st_file *f) {
  for (int i = 0; f->tensors && i < f->ntensors; i++)
    if (f->tensors[i].owned_name) free((char *)f->tensors[i].name);
  free(f->ggv);
  bcrt_gguf_close(f->gg);
}

// ---------------------------------------------------------------------------
// What the file states about the model
// ---------------------------------------------------------------------------
static bool declares(const bc_graph *g, const char *dim) {
  for (int i = 0; i < g->ndims; i++)
    if (!strcmp(g->dims[i].name, dim)) return true;
  return false;
}

static bool defined(const bc_define *defs, int n, const char *dim) {
  for (int i = 0; i < n; i++)
    if (!strcmp(defs[i].name, dim)) return true;
  return false;
}

// The metadata of the GGUF file at path (regular files only), opened with
// the runtime's reader straight (not through bcS_open, whose dispatch calls
// this file).  Close with close_meta.
typedef struct {
  FILE *fp;
  bcrt_source src;
  bcrt_gguf_file *gf;
} gg_meta;

static int fp_read(void *h, unsigned long long off, void *buf, unsigned long n) {
  FILE *fp = h;
  if (off > (unsigned long long)INT64_MAX || fseeko(fp, (off_t)off, SEEK_SET) != 0) return -1;
  return fread(buf, 1, n, fp) == n ? 0 : -1;
}

static int open_meta(bc_ctx *ctx, const char *path, gg_meta *m) {
  uint64_t size = 0;
  m->gf = NULL;
  if (!(m->fp = bc_open_regular(ctx, path, &size))) return BC_EIO;
  m->src = (bcrt_source){.handle = m->fp, .size = size, .read = fp_read};
  bcrt_error e;
  if (bcrt_gguf_open_source(&m->src, &m->gf, &e)) {
    fclose(m->fp);
    return bcS_rt_error(ctx, path, &e);
  }
  return BC_OK;
}

static void close_meta(gg_meta *m) {
  bcrt_gguf_close(m->gf);
  fclose(m->fp);
}

int bcF_gguf_defs(bc_ctx *ctx, const char *path, const bc_graph *g, const bc_define *user, int nuser,
                  bc_define **out, int *nout) {
  *out = NULL, *nout = 0;
  gg_meta f;
  int rc = open_meta(ctx, path, &f);
  if (rc != BC_OK) return rc;
  int a = arch_index(f.gf);
  bc_define *d = bc_alloc(ctx, (size_t)(nuser + 8) * sizeof *d);
  if (!d) {
    close_meta(&f);
    return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  }
  int n = 0;
  for (int i = 0; i < nuser; i++) d[n++] = user[i];
  for (const gg_dim *m = a >= 0 ? gg_archs[a].dims : NULL; m && m->dim; m++) {
    uint64_t v;
    if (!declares(g, m->dim) || defined(user, nuser, m->dim) || !meta_uint(f.gf, gg_archs[a].arch, m->key, &v))
      continue;
    if (v < 1 || v > (uint64_t)BC_MAX_DIM) {
      rc = bc_error(ctx, BC_EINPUT, "%s: error: %s.%s = %llu is out of range for dim %s", path, gg_archs[a].arch,
                    m->key, (unsigned long long)v, m->dim);
      break;
    }
    d[n++] = (bc_define){m->dim, (int64_t)v};
  }
  const bcrt_gguf_tensor *emb = a >= 0 ? bcrt_gguf_find(f.gf, gg_archs[a].names[0].gguf) : NULL;
  if (rc == BC_OK && emb && emb->rank == 2 && emb->ne[1] <= (uint64_t)BC_MAX_DIM && declares(g, "V") &&
      !defined(user, nuser, "V"))
    d[n++] = (bc_define){"V", (int64_t)emb->ne[1]};
  close_meta(&f);
  if (rc != BC_OK) return rc;
  *out = d, *nout = n;
  return BC_OK;
}

static bool same_setting(double graph, double file) { return graph == file || (float)graph == (float)file; }

int bcF_gguf_apply(bc_ctx *ctx, const char *path, bc_graph *g, char *note, size_t nnote) {
  if (note && nnote) note[0] = '\0';
  gg_meta f;
  int rc = open_meta(ctx, path, &f);
  if (rc != BC_OK) return rc;
  int a = arch_index(f.gf);
  double eps = 0, theta = 0;
  bool has_eps = a >= 0 && meta_float(f.gf, gg_archs[a].arch, gg_archs[a].eps_key, &eps) && eps > 0;
  bool has_theta = a >= 0 && meta_float(f.gf, gg_archs[a].arch, "rope.freq_base", &theta) && theta > 0;
  int neps = 0, ntheta = 0;
  double was_eps = 0, was_theta = 0;
  // llama.cpp's converters store both as float32: a graph value that rounds
  // to the file's float is the same setting (the graph's 1e-6 is kept)
  for (int i = 0; i < g->nnodes; i++) {
    bc_node *nd = &g->nodes[i];
    bool norm = nd->op == BC_OP_LAYERNORM || nd->op == BC_OP_RMSNORM;
    if (has_eps && norm && !same_setting(nd->eps, eps)) was_eps = nd->eps, nd->eps = eps, neps++;
    if (has_theta && nd->op == BC_OP_ATTENTION && nd->rope && !same_setting(nd->rope_theta, theta))
      was_theta = nd->rope_theta, nd->rope_theta = theta, ntheta++;
  }
  if (note && nnote && (neps || ntheta)) {
    size_t k = 0;
    if (neps) k += (size_t)snprintf(note, nnote, "the norms' eps %g from the file (the graph says %g)", eps, was_eps);
    if (ntheta && k < nnote)
      snprintf(note + k, nnote - k, "%srope theta %g from the file (the graph says %g)", neps ? "; " : "", theta,
               was_theta);
  }
  close_meta(&f);
  return BC_OK;
}

int bcF_gguf_weight_type(bc_ctx *ctx, const char *path, const bc_graph *g, const char *prefix,
                         int *wt, char *note, size_t nnote) {
  static const struct { const char *file; int wt; } kept[] = {
      {"Q8_0", BC_WT_Q8_0}, {"Q4_0", BC_WT_Q4_0}, {"BF16", BC_WT_BF16}};
  *wt = BC_WT_F32;
  if (note && nnote) note[0] = '\0';
  bc_graph probe = *g;  // the layout of a weight-typed build: every matrix
  probe.weight_type = BC_WT_Q8_0;
  bcY_pblock *b = malloc((size_t)(g->nnodes > 0 ? g->nnodes : 1) * 5 * sizeof *b);
  int64_t total;
  int nb = b ? bcY_pack_layout(&probe, b, &total) : -1;
  bc_st_file *f = NULL;
  int st = nb < 0 ? bc_error(ctx, BC_ENOMEM, "error: out of memory") : bcS_open(ctx, path, &f);
  const char *first = NULL, *other = NULL;
  for (int i = 0; !st && i < nb; i++) {
    const char *name = g->params[b[i].param].name;
    const bc_st_tensor *t = bcS_find(f, name);
    if (!t && prefix && *prefix) t = bcS_find(f, bc_fmt(ctx, "%s%s", prefix, name));
    if (!t) continue;  // the loader reports it
    if (!first) first = t->dtype_name;
    else if (strcmp(first, t->dtype_name)) other = t->dtype_name;
  }
  if (f) bcS_close(f);
  free(b);
  if (st || !first) return st;
  for (size_t k = 0; !other && k < sizeof kept / sizeof kept[0]; k++)
    if (!strcmp(first, kept[k].file)) *wt = kept[k].wt;
  if (note && nnote && *wt != BC_WT_F32)
    snprintf(note, nnote, "the matrices are %s: kept so (--weight-dtype %s); --weight-dtype f32 "
             "converts them", first, bc_weight_type_name(*wt));
  else if (note && nnote && (other || strcmp(first, "F32")))
    snprintf(note, nnote, "the matrices are %s%s%s: computed as f32 (--weight-dtype q8_0, q4_0 or "
             "bf16 rounds them to one of those)", first, other ? " and " : "", other ? other : "");
  return BC_OK;
}

bool bcF_is_gguf(const char *path) {
  FILE *fp = path ? fopen(path, "rb") : NULL;
  char m[4] = {0};
  bool yes = fp && fread(m, 1, 4, fp) == 4 && !memcmp(m, "GGUF", 4);
  if (fp) fclose(fp);
  return yes;
}
