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
//
// bcF_write_gguf (the last section) is the way back: a graph's weights as
// the GGUF file llama.cpp's converter would have written for the llama or
// gpt2 family, which this view reads back as exactly the same floats
// (`blockc weights GRAPH -o W.gguf`), with the tokenizer.ggml.* metadata of
// a tokenizer when one is given (bcF_write_gguf_meta: bcF_gguf_meta_tokenizer
// from a tokenizer.json's values, bcF_gguf_meta_copy from a GGUF file).
#define _POSIX_C_SOURCE 200809L
#include "bc.h"
#include "blockc_rt.h"
#include "blockc_tok.h"

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

// The pattern of family a that names HF parameter name (its layer digits
// into *digits, *nd), or NULL.
static const gg_name *hf_pattern(int a, const char *name, const char **digits, size_t *nd) {
  *digits = "", *nd = 0;
  for (const gg_name *m = gg_archs[a].names; m->gguf; m++)
    if (match(m->hf, name, digits, nd)) return m;
  return NULL;
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

// The file's tensor a graph parameter loads from (name, or prefix + name
// with --weights-prefix), found as the view finds it: through the family's
// name table when the file has one (the inverse of the view's mapping),
// else by the name itself.
static const bcrt_gguf_tensor *find_param(const bcrt_gguf_file *gf, int a, const char *name) {
  if (a < 0) return bcrt_gguf_find(gf, name);
  const char *digits;
  size_t nd;
  const gg_name *m = hf_pattern(a, name, &digits, &nd);
  char *gn = m ? render(m->gguf, digits, nd) : NULL;
  const bcrt_gguf_tensor *t = gn ? bcrt_gguf_find(gf, gn) : NULL;
  free(gn);
  return t;
}

int bcF_gguf_weight_type(bc_ctx *ctx, const char *path, const bc_graph *g, const char *prefix,
                         int *wt, char *note, size_t nnote) {
  static const struct { const char *file; int wt; } kept[] = {
      {"Q8_0", BC_WT_Q8_0}, {"Q4_0", BC_WT_Q4_0}, {"BF16", BC_WT_BF16}, {"F16", BC_WT_F16}};
  *wt = BC_WT_F32;
  if (note && nnote) note[0] = '\0';
  bc_graph probe = *g;  // the layout of a weight-typed build: every matrix
  probe.weight_type = BC_WT_Q8_0;
  int nb;
  int64_t total;
  bcY_pblock *b = bcY_pack_blocks(&probe, &nb, &total);
  gg_meta f = {0};
  int st = nb < 0 ? bc_error(ctx, BC_ENOMEM, "error: out of memory") : open_meta(ctx, path, &f);
  const char *first = NULL, *other = NULL;
  int a = st ? -1 : arch_index(f.gf);
  for (int i = 0; !st && i < nb; i++) {
    const char *name = g->params[b[i].param].name;
    const bcrt_gguf_tensor *t = find_param(f.gf, a, name);
    if (!t && prefix && *prefix) t = find_param(f.gf, a, bc_fmt(ctx, "%s%s", prefix, name));
    if (!t) continue;  // the loader reports it
    if (!first) first = t->type_name;
    else if (strcmp(first, t->type_name)) other = t->type_name;
  }
  free(b);
  int rc = st || !first ? st : BC_OK;
  if (!st && first) {
    for (size_t k = 0; !other && k < sizeof kept / sizeof kept[0]; k++)
      if (!strcmp(first, kept[k].file)) *wt = kept[k].wt;
    if (note && nnote && *wt != BC_WT_F32)
      snprintf(note, nnote, "the matrices are %s: kept so (--weight-dtype %s); --weight-dtype f32 "
               "converts them", first, bc_weight_type_name(*wt));
    else if (note && nnote && (other || strcmp(first, "F32")))
      snprintf(note, nnote, "the matrices are %s%s%s: computed as f32 (--weight-dtype q8_0, q4_0, "
               "bf16 or f16 rounds them to one of those)", first, other ? " and " : "", other ? other : "");
  }
  if (!st) close_meta(&f);
  return rc;
}

bool bcF_is_gguf(const char *path) {
  FILE *fp = path ? fopen(path, "rb") : NULL;
  char m[4] = {0};
  bool yes = fp && fread(m, 1, 4, fp) == 4 && !memcmp(m, "GGUF", 4);
  if (fp) fclose(fp);
  return yes;
}

// ---------------------------------------------------------------------------
// Writing: `blockc weights GRAPH -o W.gguf` (bcF_write_gguf)
// ---------------------------------------------------------------------------
// The inverse of the view.  The family is the first of gg_archs whose table
// names every parameter; each parameter is stored under its GGUF name in the
// layout that family's converter writes, so reading the file undoes it
// exactly: GG_TRANSPOSE's HF (in, out) matrix is stored (out, in), and
// GG_UNPERMUTE_Q/K's HF row h*dh + j*dh/2 + i is stored at row h*dh + 2i + j,
// with the head counts the metadata states (the ones the view reads).  The
// matrices the weight type packs are stored in ggml's blocks along ne[0]
// (the in dim, the axis the packed copy quantizes along): BF16 and F16
// rounded to nearest even, Q8_0 (f16 d, 32 int8) and Q4_0 (f16 d, 16 bytes: low
// nibbles elements 0..15, high 16..31) quantized as ggml's
// quantize_row_q8_0_ref / q4_0_ref, including the runtime packer's answers
// where ggml's are undefined (blockc_rt.h, bcrt_pack_nt_wt), so the blocks
// dequantize to what bcY_round_weights gives.  Header, metadata, tensor
// infos and the data (each tensor at a multiple of 32) are one atomic write.

// A growing byte buffer; integers little-endian, as GGUF's are.
typedef struct {
  unsigned char *p;
  size_t n, cap;
  bool oom;
} wb_buf;

static void wb_put(wb_buf *b, const void *d, size_t n) {
  if (b->oom) return;
  if (b->n + n > b->cap) {
    size_t c = b->cap ? b->cap : 1024;
    while (c < b->n + n) c *= 2;
    unsigned char *q = realloc(b->p, c);
    if (!q) {
      b->oom = true;
      return;
    }
    b->p = q, b->cap = c;
  }
  if (n) memcpy(b->p + b->n, d, n);
  b->n += n;
}

static void wb_uint(wb_buf *b, uint64_t v, int bytes) {
  unsigned char c[8];
  for (int i = 0; i < bytes; i++) c[i] = (unsigned char)(v >> (8 * i));
  wb_put(b, c, (size_t)bytes);
}

static void wb_str(wb_buf *b, const char *s) {
  wb_uint(b, strlen(s), 8);
  wb_put(b, s, strlen(s));
}

// Metadata entries: key, value type (GGUF's 4 uint32, 6 float32, 8 string), value.
static void wb_kv_u32(wb_buf *b, int *nkv, const char *arch, const char *key, uint64_t v) {
  char k[320];
  snprintf(k, sizeof k, "%s%s%s", arch ? arch : "", arch ? "." : "", key);
  wb_str(b, k), wb_uint(b, 4, 4), wb_uint(b, v, 4);
  ++*nkv;
}

static void wb_kv_f32(wb_buf *b, int *nkv, const char *arch, const char *key, double v) {
  char k[320];
  float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  snprintf(k, sizeof k, "%s.%s", arch, key);
  wb_str(b, k), wb_uint(b, 6, 4), wb_uint(b, u, 4);
  ++*nkv;
}

static void wb_kv_str(wb_buf *b, int *nkv, const char *key, const char *v) {
  wb_str(b, key), wb_uint(b, 8, 4), wb_str(b, v);
  ++*nkv;
}

// f as IEEE half bits: to nearest even, overflow to +-Inf, NaN a quiet NaN
// (GGML_FP32_TO_FP16; the runtime packer's own, for scales and F16 weights).
static uint16_t to_fp16(float f) { return bcrt_f32_to_f16(f); }

static uint16_t to_bf16(float f) {  // to nearest even; NaN stays a quiet NaN
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

// ggml's Q8_0 (34 bytes) or Q4_0 (18 bytes) block of v[0..32) at out.
// The runtime packer's own quantizer (bcrt_quant_block), so the file holds
// exactly the values `--weight-dtype` computes with.
static void quant_block(int wt, const float *v, unsigned char *out) {
  unsigned char code[32];
  float d = bcrt_quant_block(wt, v, 32, code);
  uint16_t h = to_fp16(d);
  out[0] = (unsigned char)(h & 0xff), out[1] = (unsigned char)(h >> 8);
  if (wt == BC_WT_Q8_0) memcpy(out + 2, code, 32);
  else
    for (int j = 0; j < 16; j++) out[2 + j] = (unsigned char)(code[j] | code[16 + j] << 4);
}

// One tensor of the file being written.
typedef struct {
  char *name;            // the GGUF name (malloc'ed)
  gg_xform x;
  int64_t heads;         // GG_UNPERMUTE_*: the permutation's heads
  int type;              // ggml type id
  int rank;
  uint64_t ne[4];
  uint64_t numel, bytes, off;
  const void *data;      // bytes of the file: own, or the parameter itself (F32 as it is)
  void *own;
} gw_out;

static const struct {
  int ggml, file_type;   // the matrices' ggml type; general.file_type (llama_ftype)
} wt_file[BC_WT_COUNT] = {
    [BC_WT_F32] = {0, 0}, [BC_WT_BF16] = {30, 32}, [BC_WT_Q8_0] = {8, 7}, [BC_WT_Q4_0] = {2, 2},
    [BC_WT_F16] = {1, 1}};

static bool host_le(void) {
  uint16_t one = 1;
  unsigned char c;
  memcpy(&c, &one, 1);
  return c == 1;
}

static const bc_dim *graph_dim(const bc_graph *g, const char *name) {
  for (int i = 0; i < g->ndims; i++)
    if (!strcmp(g->dims[i].name, name)) return &g->dims[i];
  return NULL;
}

// The file-order floats of parameter values x (t's transform), into y.
static void to_file_order(const gw_out *t, const bc_shape *s, const float *x, float *y) {
  if (t->x == GG_TRANSPOSE) {  // HF (in, out) -> file (out, in)
    int64_t in = s->d[0], out = s->d[1];
    for (int64_t r = 0; r < out; r++)
      for (int64_t c = 0; c < in; c++) y[r * in + c] = x[c * out + r];
  } else {  // file row h*dh + 2i + j holds HF row h*dh + j*half + i
    uint64_t rows = (uint64_t)s->d[0], cols = (uint64_t)s->d[1], dh = rows / (uint64_t)t->heads, half = dh / 2;
    for (uint64_t h = 0; h < (uint64_t)t->heads; h++)
      for (uint64_t i = 0; i < half; i++)
        for (uint64_t j = 0; j < 2; j++)
          memcpy(y + (h * dh + 2 * i + j) * cols, x + (h * dh + j * half + i) * cols, cols * sizeof *y);
  }
}

// t's bytes (own) from the file-order floats y.
static int encode(bc_ctx *ctx, const char *path, gw_out *t, const float *y, int wt) {
  if (!(t->own = malloc(t->bytes ? (size_t)t->bytes : 1)))
    return bc_error(ctx, BC_ENOMEM, "%s: error: out of memory writing '%s'", path, t->name);
  unsigned char *o = t->own;
  if (t->type == 0) {
    for (uint64_t i = 0; i < t->numel; i++) {
      uint32_t u;
      memcpy(&u, &y[i], sizeof u);
      for (int k = 0; k < 4; k++) o[4 * i + (uint64_t)k] = (unsigned char)(u >> (8 * k));
    }
  } else if (wt == BC_WT_BF16 || wt == BC_WT_F16) {
    for (uint64_t i = 0; i < t->numel; i++) {
      uint16_t h = wt == BC_WT_BF16 ? to_bf16(y[i]) : to_fp16(y[i]);
      o[2 * i] = (unsigned char)(h & 0xff), o[2 * i + 1] = (unsigned char)(h >> 8);
    }
  } else {
    size_t bb = wt == BC_WT_Q8_0 ? 34 : 18;
    for (uint64_t b = 0; b < t->numel / 32; b++) quant_block(wt, y + 32 * b, o + bb * b);
  }
  t->data = t->own;
  return BC_OK;
}

// The family that names every parameter; else the error naming the first
// parameter the closest family (the most leading parameters named) cannot.
static int pick_arch(bc_ctx *ctx, const char *path, const bc_graph *g) {
  int best = 0, best_k = -1;
  const char *digits;
  size_t nd;
  for (int a = 0; a < (int)(sizeof gg_archs / sizeof gg_archs[0]); a++) {
    int k = 0;
    while (k < g->nparams && hf_pattern(a, g->params[k].name, &digits, &nd)) k++;
    if (k == g->nparams) return a;
    if (k > best_k) best = a, best_k = k;
  }
  bc_error(ctx, BC_EINPUT, "%s: error: parameter '%s' has no GGUF tensor name in the %s family (GGUF is "
           "written for llama and gpt2 models, every parameter named as in their Hugging Face "
           "checkpoints); write a .safetensors file instead", path, g->params[best_k].name,
           gg_archs[best].arch);
  return -1;
}

// The metadata, into kv (*nkv entries); the head counts the view will
// un-permute q and k with into *heads, *kv_heads.
static void write_meta(const bc_graph *g, int a, const gw_out *t, wb_buf *kv, int *nkv, int64_t *heads,
                       int64_t *kv_heads) {
  const char *arch = gg_archs[a].arch;
  const bc_node *att = NULL, *ffn = NULL, *norm = NULL, *rope = NULL;
  for (int i = 0; i < g->nnodes; i++) {
    const bc_node *n = &g->nodes[i];
    if (n->op == BC_OP_ATTENTION && !att) att = n;
    if (n->op == BC_OP_ATTENTION && n->rope && !rope) rope = n;
    if (n->op == BC_OP_FFN && !ffn) ffn = n;
    if ((n->op == BC_OP_LAYERNORM || n->op == BC_OP_RMSNORM) && !norm) norm = n;
  }
  int64_t emb_rows = 0, emb_cols = 0, pos_rows = 0, layers = 0;
  for (int i = 0; i < g->nparams; i++) {
    const bc_shape *s = &g->params[i].shape;
    if (!strcmp(t[i].name, "token_embd.weight") && s->rank == 2) emb_rows = s->d[0], emb_cols = s->d[1];
    if (!strcmp(t[i].name, "position_embd.weight") && s->rank >= 1) pos_rows = s->d[0];
    if (!strncmp(t[i].name, "blk.", 4)) {
      int64_t l = strtoll(t[i].name + 4, NULL, 10);
      if (l + 1 > layers) layers = l + 1;
    }
  }
  wb_kv_str(kv, nkv, "general.architecture", arch);
  wb_kv_str(kv, nkv, "general.name", g->model ? g->model : "blockc");
  // No general.alignment: the data is aligned to GGUF's default, 32, which
  // every reader assumes without the key (llama.cpp's converters do not
  // write it either; the gguf-py snapshot of `make gguf-check` even refuses
  // the uint32 the spec and ggml's reader require).
  wb_kv_u32(kv, nkv, NULL, "general.file_type", (uint64_t)wt_file[g->weight_type].file_type);
  *heads = att ? att->heads : 0;
  *kv_heads = att ? (att->kv_heads > 0 ? att->kv_heads : att->heads) : 0;
  bool has_ctx = false, has_kv = false;
  for (const gg_dim *m = gg_archs[a].dims; m->dim; m++) {
    const bc_dim *d = graph_dim(g, m->dim);
    int64_t v = d ? d->value
              : !strcmp(m->key, "embedding_length") ? emb_cols
              : !strcmp(m->key, "block_count") ? layers
              : !strcmp(m->key, "attention.head_count") ? *heads
              : !strcmp(m->key, "attention.head_count_kv") ? *kv_heads
              : !strcmp(m->key, "feed_forward_length") ? (ffn ? ffn->hidden : 0)
              : !strcmp(m->key, "context_length") ? pos_rows : 0;
    if (v <= 0 || v > (int64_t)UINT32_MAX) continue;
    wb_kv_u32(kv, nkv, arch, m->key, (uint64_t)v);
    if (!strcmp(m->key, "attention.head_count")) *heads = v;
    if (!strcmp(m->key, "attention.head_count_kv")) *kv_heads = v, has_kv = true;
    has_ctx |= !strcmp(m->key, "context_length");
  }
  if (!has_kv) *kv_heads = *heads;  // what the view assumes without the key
  const bc_dim *T = graph_dim(g, "T");
  if (!has_ctx && T && T->value > 0 && T->value <= (int64_t)UINT32_MAX)
    wb_kv_u32(kv, nkv, arch, "context_length", (uint64_t)T->value);
  if (att && att->head_dim > 0) {
    wb_kv_u32(kv, nkv, arch, "attention.key_length", (uint64_t)att->head_dim);
    wb_kv_u32(kv, nkv, arch, "attention.value_length", (uint64_t)att->head_dim);
  }
  if (norm) wb_kv_f32(kv, nkv, arch, gg_archs[a].eps_key, norm->eps);
  if (rope) wb_kv_f32(kv, nkv, arch, "rope.freq_base", rope->rope_theta);
  if (emb_rows > 0 && emb_rows <= (int64_t)UINT32_MAX) wb_kv_u32(kv, nkv, arch, "vocab_size", (uint64_t)emb_rows);
}

// Tensor i's name, shape, type and bytes; packed: the weight type packs it,
// in_out: as a (in, out) matrix.
static int plan_tensor(bc_ctx *ctx, const char *path, const bc_graph *g, int a, int i, bool packed, bool in_out,
                       int64_t heads, int64_t kv_heads, gw_out *t) {
  const bc_param *p = &g->params[i];
  const bc_shape *s = &p->shape;
  const char *arch = gg_archs[a].arch;
  if (s->rank < 1 || s->rank > 4)
    return bc_error(ctx, BC_EINPUT, "%s: error: parameter '%s' has %d dims (GGUF tensors have 1 to 4)", path,
                    p->name, s->rank);
  t->rank = s->rank;
  t->numel = (uint64_t)bc_shape_numel(s);
  for (int k = 0; k < s->rank; k++) t->ne[k] = (uint64_t)s->d[s->rank - 1 - k];
  if (t->x == GG_TRANSPOSE && s->rank != 2) t->x = GG_AS_IS;  // as the view reads it
  if (t->x == GG_TRANSPOSE) t->ne[0] = (uint64_t)s->d[0], t->ne[1] = (uint64_t)s->d[1];
  if (t->x == GG_UNPERMUTE_Q || t->x == GG_UNPERMUTE_K) {
    t->heads = t->x == GG_UNPERMUTE_Q ? heads : kv_heads;
    uint64_t rows = s->rank == 2 ? (uint64_t)s->d[0] : 0;
    if (t->heads <= 0 || rows % (uint64_t)t->heads || (rows / (uint64_t)t->heads) % 2)
      return bc_error(ctx, BC_EINPUT, "%s: error: parameter '%s' (%llu rows) cannot be permuted for llama.cpp's "
                      "rope in %lld heads (%s.attention.head_count%s)", path, p->name, (unsigned long long)rows,
                      (long long)t->heads, arch, t->x == GG_UNPERMUTE_K ? "_kv" : "");
  }
  int wt = packed ? g->weight_type : BC_WT_F32;
  t->type = wt_file[wt].ggml;
  if (wt == BC_WT_Q8_0 || wt == BC_WT_Q4_0) {
    const char *ty = wt == BC_WT_Q8_0 ? "Q8_0" : "Q4_0";
    if (in_out != (t->x == GG_TRANSPOSE))
      return bc_error(ctx, BC_EINPUT, "%s: error: matrix '%s' is quantized along its %s dim, but GGUF's %s "
                      "tensor '%s' holds blocks along the other one; write a .safetensors file instead",
                      path, p->name, in_out ? "first" : "second", arch, t->name);
    if (s->rank != 2 || t->ne[0] % 32)
      return bc_error(ctx, BC_EINPUT, "%s: error: matrix '%s' (GGUF '%s'): rows of %llu weights are not whole "
                      "%s blocks of 32, which ggml needs (--weight-dtype bf16, f16 or f32, or a .safetensors file)",
                      path, p->name, t->name, (unsigned long long)t->ne[0], ty);
    t->bytes = t->numel / 32 * (wt == BC_WT_Q8_0 ? 34 : 18);
  } else {
    t->bytes = t->numel * (wt == BC_WT_BF16 || wt == BC_WT_F16 ? 2 : 4);
  }
  return BC_OK;
}

int bcF_write_gguf(bc_ctx *ctx, const char *path, const bc_graph *g, const bc_weights *w) {
  return bcF_write_gguf_meta(ctx, path, g, w, NULL);
}

// The extra metadata (a tokenizer) against the model: its tokens must be
// the rows of the token embedding, which llama.cpp (and generate) index by
// token id.
static int check_vocab(bc_ctx *ctx, const char *path, const bc_graph *g, const gw_out *t, const bc_gguf_meta *extra) {
  if (!extra || extra->n_tokens < 0) return BC_OK;
  for (int i = 0; i < g->nparams; i++)
    if (!strcmp(t[i].name, "token_embd.weight")) {
      int64_t rows = g->params[i].shape.rank == 2 ? g->params[i].shape.d[0] : -1;
      if (rows == extra->n_tokens) return BC_OK;
      return bc_error(ctx, BC_EINPUT, "%s: error: the tokenizer%s%s has %lld tokens, but the model's token "
                      "embedding '%s' (GGUF token_embd.weight) has %lld rows: a GGUF file's vocabulary must be "
                      "its embedding's (the tokenizer of another model?)", path, extra->what[0] ? " of " : "",
                      extra->what, (long long)extra->n_tokens, g->params[i].name, (long long)rows);
    }
  return bc_error(ctx, BC_EINPUT, "%s: error: the model has no token embedding (GGUF token_embd.weight) to "
                  "carry the tokenizer%s%s's %lld tokens: a tokenizer is for a whole language model "
                  "(graphs/llama_lm.blk, gpt2_lm.blk)", path, extra->what[0] ? " of " : "", extra->what,
                  (long long)extra->n_tokens);
}

static void meta_str(wb_buf *b, int *nkv, const char *key, const char *v);

int bcF_write_gguf_meta(bc_ctx *ctx, const char *path, const bc_graph *g, const bc_weights *w,
                        const bc_gguf_meta *extra) {
  if (!w || w->n != g->nparams) return bc_error(ctx, BC_EINTERNAL, "internal error: weights of another graph");
  if (g->weight_type < 0 || g->weight_type >= BC_WT_COUNT)
    return bc_error(ctx, BC_EINTERNAL, "internal error: weight type %d", g->weight_type);
  int a = pick_arch(ctx, path, g);
  if (a < 0) return BC_EINPUT;
  int n = g->nparams;
  gw_out *t = calloc((size_t)(n ? n : 1), sizeof *t);
  bool *packed = calloc((size_t)(n ? n : 1), 2 * sizeof *packed), *in_out = packed ? packed + n : NULL;
  bcY_pblock *b = NULL;
  wb_buf kv = {0}, hdr = {0};
  int nkv = 0, st = t && packed ? BC_OK : bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", path);
  const char *digits;
  size_t nd;
  for (int i = 0; !st && i < n; i++) {  // the names (pick_arch found every one)
    const gg_name *m = hf_pattern(a, g->params[i].name, &digits, &nd);
    t[i].x = m->x;
    if (!(t[i].name = render(m->gguf, digits, nd))) st = bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", path);
  }
  int64_t total;
  int nb = 0;
  if (!st && g->weight_type != BC_WT_F32) b = bcY_pack_blocks(g, &nb, &total);
  if (nb < 0) st = bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", path);
  for (int k = 0; k < nb; k++) packed[b[k].param] = true, in_out[b[k].param] = b[k].in_out;
  int64_t heads = 0, kv_heads = 0;
  if (!st) st = check_vocab(ctx, path, g, t, extra);
  if (!st) write_meta(g, a, t, &kv, &nkv, &heads, &kv_heads);
  if (!st && extra && extra->nkv) wb_put(&kv, extra->p, extra->n), nkv += extra->nkv;
  else if (!st)  // no tokenizer: llama.cpp's "no vocabulary", without which it refuses the file
    meta_str(&kv, &nkv, "tokenizer.ggml.model", "none");
  uint64_t off = 0;
  for (int i = 0; !st && i < n; i++) {
    st = plan_tensor(ctx, path, g, a, i, packed[i], in_out[i], heads, kv_heads, &t[i]);
    t[i].off = off;
    off += (t[i].bytes + 31) / 32 * 32;
  }
  // the data: F32 parameters as they are straight from memory, the rest converted
  float *tmp = NULL;
  for (int i = 0; !st && i < n; i++) {
    const float *x = w->p[i];
    if (t[i].type == 0 && t[i].x == GG_AS_IS && host_le()) {
      t[i].data = x;
      continue;
    }
    const float *y = x;
    if (t[i].x != GG_AS_IS) {
      free(tmp);
      if (!(tmp = malloc((size_t)t[i].numel * sizeof *tmp))) {
        st = bc_error(ctx, BC_ENOMEM, "%s: error: out of memory writing '%s'", path, t[i].name);
        break;
      }
      to_file_order(&t[i], &g->params[i].shape, x, tmp);
      y = tmp;
    }
    st = encode(ctx, path, &t[i], y, packed[i] ? g->weight_type : BC_WT_F32);
  }
  free(tmp);
  if (!st) {  // header, metadata, tensor infos, padding to the alignment
    wb_put(&hdr, "GGUF", 4);
    wb_uint(&hdr, 3, 4);
    wb_uint(&hdr, (uint64_t)n, 8);
    wb_uint(&hdr, (uint64_t)nkv, 8);
    wb_put(&hdr, kv.p, kv.n);
    for (int i = 0; i < n; i++) {
      wb_str(&hdr, t[i].name);
      wb_uint(&hdr, (uint64_t)t[i].rank, 4);
      for (int k = 0; k < t[i].rank; k++) wb_uint(&hdr, t[i].ne[k], 8);
      wb_uint(&hdr, (uint64_t)t[i].type, 4);
      wb_uint(&hdr, t[i].off, 8);
    }
    while (hdr.n % 32 && !hdr.oom) wb_uint(&hdr, 0, 1);
    if (hdr.oom || kv.oom) st = bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", path);
  }
  static const unsigned char zeros[32];
  const void **parts = st ? NULL : malloc((size_t)(1 + 2 * n) * sizeof *parts);
  size_t *lens = st ? NULL : malloc((size_t)(1 + 2 * n) * sizeof *lens);
  if (!st && (!parts || !lens)) st = bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", path);
  if (!st) {
    parts[0] = hdr.p, lens[0] = hdr.n;
    for (int i = 0; i < n; i++) {
      parts[1 + 2 * i] = t[i].data, lens[1 + 2 * i] = (size_t)t[i].bytes;
      parts[2 + 2 * i] = zeros, lens[2 + 2 * i] = (size_t)((32 - t[i].bytes % 32) % 32);
    }
    st = bc_write_file_atomic(ctx, path, 1 + 2 * n, parts, lens);
  }
  free(parts);
  free(lens);
  for (int i = 0; t && i < n; i++) free(t[i].name), free(t[i].own);
  free(t);
  free(packed);
  free(b);
  free(kv.p);
  free(hdr.p);
  return st;
}

// ---------------------------------------------------------------------------
// A tokenizer for the file: bc_gguf_meta (bcF_write_gguf_meta's extra)
// ---------------------------------------------------------------------------
// The tokenizer.ggml.* entries are written as llama.cpp's gguf-py writes them
// (GGUFWriter.add_tokenizer_model, add_tokenizer_pre, add_token_list,
// add_token_scores, add_token_types, add_token_merges, add_bos_token_id, ...,
// add_add_bos_token): strings, arrays of strings, float32 and int32 arrays,
// uint32 ids and bools, in convert_hf_to_gguf.py's order.  A GGUF source's
// tokenizer is copied instead: every tokenizer.* entry as the file has it
// (values and types; a chat template and ids blockc does not read too).

static void wb_strn(wb_buf *b, const char *s, size_t n) {
  wb_uint(b, n, 8);
  wb_put(b, s, n);
}

static void meta_str(wb_buf *b, int *nkv, const char *key, const char *v) {
  wb_str(b, key), wb_uint(b, 8, 4), wb_str(b, v);
  ++*nkv;
}

static void meta_u32(wb_buf *b, int *nkv, const char *key, int64_t v) {
  if (v < 0) return;
  wb_str(b, key), wb_uint(b, 4, 4), wb_uint(b, (uint64_t)v, 4);
  ++*nkv;
}

static void meta_bool(wb_buf *b, int *nkv, const char *key, int v) {
  if (v < 0) return;
  wb_str(b, key), wb_uint(b, 7, 4), wb_uint(b, v ? 1 : 0, 1);
  ++*nkv;
}

// An array's head: key, ARRAY, element type, count.
static void meta_array(wb_buf *b, int *nkv, const char *key, int elem, uint64_t count) {
  wb_str(b, key), wb_uint(b, 9, 4), wb_uint(b, (uint64_t)elem, 4), wb_uint(b, count, 8);
  ++*nkv;
}

int bcF_gguf_meta_tokenizer(bc_ctx *ctx, const struct blockc_tokenizer_ggml *v, const char *what, bc_gguf_meta *m) {
  *m = (bc_gguf_meta){.n_tokens = -1};
  wb_buf b = {0};
  int nkv = 0;
  meta_str(&b, &nkv, "tokenizer.ggml.model", v->model);
  if (v->pre) meta_str(&b, &nkv, "tokenizer.ggml.pre", v->pre);
  meta_array(&b, &nkv, "tokenizer.ggml.tokens", 8, v->n_tokens);
  for (size_t i = 0; i < v->n_tokens; i++) wb_str(&b, v->tokens[i]);
  if (v->scores) {
    meta_array(&b, &nkv, "tokenizer.ggml.scores", 6, v->n_tokens);
    for (size_t i = 0; i < v->n_tokens; i++) {
      uint32_t u;
      memcpy(&u, &v->scores[i], sizeof u);
      wb_uint(&b, u, 4);
    }
  }
  if (v->token_type) {
    meta_array(&b, &nkv, "tokenizer.ggml.token_type", 5, v->n_tokens);
    for (size_t i = 0; i < v->n_tokens; i++) wb_uint(&b, (uint32_t)v->token_type[i], 4);
  }
  if (v->merges) {
    meta_array(&b, &nkv, "tokenizer.ggml.merges", 8, v->n_merges);
    for (size_t i = 0; i < v->n_merges; i++) wb_str(&b, v->merges[i]);
  }
  meta_u32(&b, &nkv, "tokenizer.ggml.bos_token_id", v->bos);
  meta_u32(&b, &nkv, "tokenizer.ggml.eos_token_id", v->eos);
  meta_u32(&b, &nkv, "tokenizer.ggml.unknown_token_id", v->unk);
  meta_u32(&b, &nkv, "tokenizer.ggml.padding_token_id", v->pad);
  meta_bool(&b, &nkv, "tokenizer.ggml.add_bos_token", v->add_bos);
  meta_bool(&b, &nkv, "tokenizer.ggml.add_eos_token", v->add_eos);
  meta_bool(&b, &nkv, "tokenizer.ggml.add_space_prefix", v->add_space_prefix);
  if (b.oom) {
    free(b.p);
    return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  }
  *m = (bc_gguf_meta){b.p, b.n, nkv, (int64_t)v->n_tokens, ""};
  snprintf(m->what, sizeof m->what, "%s", what ? what : "");
  return BC_OK;
}

static int copy_string(void *ud, unsigned long long i, const char *s, unsigned long len) {
  (void)i;
  wb_strn(ud, s, len);
  return 0;
}

int bcF_gguf_meta_copy(bc_ctx *ctx, const char *path, bc_gguf_meta *m) {
  *m = (bc_gguf_meta){.n_tokens = -1};
  gg_meta f;
  int st = open_meta(ctx, path, &f);
  if (st) return st;
  static const int width[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
  wb_buf b = {0};
  int nkv = 0;
  unsigned char *raw = NULL;
  for (int i = 0; !st && i < bcrt_gguf_kv_count(f.gf); i++) {
    const bcrt_gguf_kv *kv = bcrt_gguf_kv_at(f.gf, i);
    if (strncmp(kv->key, "tokenizer.", 10)) continue;
    if (kv->type == BCRT_GGUF_STRING) {
      meta_str(&b, &nkv, kv->key, kv->str);
    } else if (kv->type != BCRT_GGUF_ARRAY) {
      double d = kv->f;
      float fl = (float)d;
      uint64_t u = kv->neg ? (uint64_t)kv->i : kv->u;
      uint32_t u32;
      memcpy(&u32, &fl, sizeof u32);
      if (kv->type == BCRT_GGUF_FLOAT32) u = u32;
      if (kv->type == BCRT_GGUF_FLOAT64) memcpy(&u, &d, 8);
      wb_str(&b, kv->key), wb_uint(&b, (uint64_t)kv->type, 4), wb_uint(&b, u, width[kv->type]);
      nkv++;
    } else if (kv->elem_type == BCRT_GGUF_STRING) {
      meta_array(&b, &nkv, kv->key, BCRT_GGUF_STRING, kv->count);
      if (bcrt_gguf_array_strings(f.gf, kv, copy_string, &b))
        st = bc_error(ctx, BC_EINPUT, "%s: error: %s: cannot be read", path, kv->key);
      if (!strcmp(kv->key, "tokenizer.ggml.tokens")) m->n_tokens = (int64_t)kv->count;
    } else if (kv->elem_type >= 0 && kv->elem_type < 13 && width[kv->elem_type]) {
      size_t n = (size_t)kv->count * (size_t)width[kv->elem_type];  // inside the file: the reader checked
      free(raw);
      raw = malloc(n ? n : 1);
      if (!raw) st = bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", path);
      else if (n && fp_read(f.fp, kv->offset, raw, (unsigned long)n))
        st = bc_error(ctx, BC_EIO, "%s: error: %s: cannot be read", path, kv->key);
      meta_array(&b, &nkv, kv->key, kv->elem_type, kv->count);
      if (!st) wb_put(&b, raw, n);
    } else {
      st = bc_error(ctx, BC_EINPUT, "%s: error: %s: an array of arrays, which blockc does not copy", path, kv->key);
    }
  }
  free(raw);
  close_meta(&f);
  if (!st && b.oom) st = bc_error(ctx, BC_ENOMEM, "%s: error: out of memory", path);
  if (st) {
    free(b.p);
    m->n_tokens = -1;
    return st;
  }
  m->p = b.p, m->n = b.n, m->nkv = nkv;
  snprintf(m->what, sizeof m->what, "%s", path);
  return BC_OK;
}

void bcF_gguf_meta_free(bc_gguf_meta *m) {
  if (!m) return;
  free(m->p);
  *m = (bc_gguf_meta){.n_tokens = -1};
}
