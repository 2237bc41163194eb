// tools.c — `blockc weights` and `blockc dot`: files for the world
// outside blockc.
//
// `weights` writes the seeded parameters `blockc run --seed S` uses (or a
// checkpoint's, --weights) into a safetensors or GGUF file, rounded through
// --weight-dtype, so a vendored AOT program, PyTorch or llama.cpp can run
// the very model the CLI ran without any training or export step.  A GGUF
// file carries the tokenizer too when one is given (--tokenizer, --vocab +
// --merges) or the GGUF --weights IN has one (weights_tokenizer).
//
// `dot` writes the graph (as parsed, or after a pass) in Graphviz's DOT
// language: one box per node with its op, attributes, output shapes and,
// for fused nodes, the parts it was fused from; one ellipse per graph input
// and output; edges labelled with the value's source name.  Layer loops are
// unrolled by the parser, so the clusters are recovered from parameter
// names, by this rule:
//
//   - a node with parameters belongs to the cluster named by its first
//     parameter's name up to and including the first all-digit component
//     ("layers.3.self_attn.in_proj_weight" -> "layers.3"); a name without a
//     numeric component ("norm.weight") puts the node at the top level;
//   - a node without parameters (Add) joins the cluster of its latest
//     producer: of the nodes that compute its inputs, the one that runs
//     last (graph inputs are skipped; no producer: top level).
//
// So `xd = Add(xd, a)` sits with the attention of its own layer, and the
// final `y = Add(xa, LayerNorm(xd))` with the final norm at the top level.
// Everything taken from the graph file is escaped before it reaches DOT.
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "ops.h"

#include "blockc_tok.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

// --- blockc weights -----------------------------------------------------------

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && !strcmp(s + n - k, suffix);
}

// The tokenizer a GGUF output carries, into m (nkv 0: none) and its
// description into desc: --tokenizer FILE (a tokenizer.json as
// blockc_tokenizer_to_ggml writes it, exactly or not at all; a GGUF file's
// tokenizer.* entries as they are, once blockc reads them), --vocab +
// --merges (GPT-2's), else the tokenizer.* entries of a GGUF --weights IN.
static int weights_tokenizer(bc_ctx *ctx, const cli_opts *o, bool gguf, bc_gguf_meta *m, char *desc, size_t descn) {
  *m = (bc_gguf_meta){.n_tokens = -1};
  desc[0] = '\0';
  char err[1024];
  if (!o->tokenizer && !o->vocab) {
    if (!gguf || !o->weights || !bcF_is_gguf(o->weights)) return BC_OK;
    int st = bcF_gguf_meta_copy(ctx, o->weights, m);
    if (!st && m->nkv) snprintf(desc, descn, "; tokenizer: the tokenizer.* entries of %s", o->weights);
    return st;
  }
  if (o->tokenizer && o->vocab)
    return bc_error(ctx, BC_EUSAGE, "blockc: error: weights: give --tokenizer FILE or --vocab FILE --merges FILE "
                    "(one of them)");
  if (!gguf)
    return bc_error(ctx, BC_EUSAGE, "blockc: error: weights: --%s is for a .gguf output (-o W.gguf); a "
                    "safetensors file carries no tokenizer", o->tokenizer ? "tokenizer" : "vocab");
  const char *src = o->tokenizer ? o->tokenizer : o->vocab;
  char what[96] = "";
  if (o->tokenizer && bcF_is_gguf(o->tokenizer)) {  // checked, then copied as it is
    blockc_tokenizer *t = cli_gguf_tokenizer(o->tokenizer, err, sizeof err, what, sizeof what, NULL);
    if (!t) return bc_error(ctx, BC_EINPUT, "blockc: error: %s", err);
    blockc_tokenizer_free(t);
    int st = bcF_gguf_meta_copy(ctx, o->tokenizer, m);
    if (!st) snprintf(desc, descn, "; tokenizer %s, the tokenizer.* entries of %s", what, src);
    return st;
  }
  blockc_tokenizer *t = o->tokenizer ? blockc_tokenizer_load(o->tokenizer, err, sizeof err)
                                     : blockc_tokenizer_load_bpe(o->vocab, o->merges, err, sizeof err);
  if (!t) return bc_error(ctx, BC_EINPUT, "blockc: error: %s", err);
  blockc_tokenizer_ggml v;
  int st = blockc_tokenizer_to_ggml(t, src, &v, err, sizeof err) ? bc_error(ctx, BC_EINPUT, "blockc: error: %s", err)
                                                                  : bcF_gguf_meta_tokenizer(ctx, &v, src, m);
  if (!st)
    snprintf(desc, descn, "; tokenizer %s %s, %zu tokens, from %s", v.model, v.scores ? "SentencePiece" : "BPE",
             v.n_tokens, src);
  blockc_tokenizer_ggml_free(&v);
  blockc_tokenizer_free(t);
  return st;
}

// The weights of --weights IN (safetensors or GGUF: cli_load took a GGUF
// file's dims, eps and theta, and its block type unless --weight-dtype says
// one) or the seeded init, rounded through --weight-dtype T, written to -o:
// a .gguf name gets GGUF (bcF_write_gguf: T's blocks), any other name
// float32 safetensors (the rounded values, so `run --weights OUT` computes
// the T model at f32; with f16 the matrices are F16 tensors, the same values).
int cli_cmd_weights(bc_ctx *ctx, const cli_opts *o) {
  if (!o->output || o->noutputs != 1)
    return bc_error(ctx, BC_EUSAGE, "blockc: error: weights needs -o FILE (one .safetensors or .gguf file)");
  bool gguf = ends_with(o->output, ".gguf");
  bc_graph *g = cli_load(ctx, o);
  if (!g) return BC_EINPUT;
  bc_weights w = {0};
  bc_mem_use use = {.what = "weights"};
  bc_gguf_meta tok;
  char tokdesc[700];
  int st = weights_tokenizer(ctx, o, gguf, &tok, tokdesc, sizeof tokdesc);
  if (st) return st;
  st = bcW_check_memory_use(ctx, g, &use, o->max_memory);
  if (!st && !o->weights) {
    st = bcW_init_random(ctx, g, o->seed, &w);
  } else if (!st) {
    bc_load_opts lo = {.allow_extra = o->allow_extra, .prefix = o->weights_prefix,
                       .max_memory = o->max_memory};
    st = bcW_load_opts(ctx, g, o->weights, &lo, &w);
    if (!st && lo.ignored)
      fprintf(stderr, "blockc: note: %s: ignored %d tensor%s the graph does not use (--allow-extra)\n",
              o->weights, lo.ignored, lo.ignored == 1 ? "" : "s");
  }
  if (!st) st = bcY_round_weights(ctx, g, &w);
  const char **names = bc_alloc(ctx, (size_t)(g->nparams + 1) * sizeof *names);
  bc_shape *shapes = bc_alloc(ctx, (size_t)(g->nparams + 1) * sizeof *shapes);
  if (!st && (!names || !shapes)) st = bc_error(ctx, BC_ENOMEM, "error: out of memory");
  for (int i = 0; !st && i < g->nparams; i++) {
    names[i] = g->params[i].name;
    shapes[i] = g->params[i].shape;
  }
  if (!st && gguf) st = bcF_write_gguf_meta(ctx, o->output, g, &w, &tok);
  else if (!st && g->weight_type == BC_WT_F16) {  // the matrices as F16 (their values are halves)
    bool *half = bc_alloc(ctx, (size_t)(g->nparams + 1) * sizeof *half);
    bcY_pblock *b = bc_alloc(ctx, (size_t)(g->nnodes > 0 ? g->nnodes : 1) * 5 * sizeof *b);
    int64_t total;
    int nb = half && b ? bcY_pack_layout(g, b, &total) : -1;
    if (nb < 0) st = bc_error(ctx, BC_ENOMEM, "error: out of memory");
    for (int i = 0; i < nb; i++) half[b[i].param] = true;
    if (!st) st = bcS_write_f16(ctx, o->output, g->nparams, names, shapes, (const float *const *)w.p, half);
  } else if (!st) st = bcS_write(ctx, o->output, g->nparams, names, shapes, (const float *const *)w.p);
  if (!st) {
    printf("wrote %s: %s%d tensors, %lld parameters of model %s (", o->output, gguf ? "GGUF, " : "",
           g->nparams, (long long)bcI_param_count(g), g->model);
    if (o->weights) printf("from %s", o->weights);
    else printf("seed %llu", (unsigned long long)o->seed);
    if (g->weight_type != BC_WT_F32)
      printf("; matrices %s %s", gguf ? "as" : "rounded through", bc_weight_type_name(g->weight_type));
    printf("%s)\n", tokdesc);
  }
  bcF_gguf_meta_free(&tok);
  bcW_free(&w);
  return st;
}

// --- blockc dot ---------------------------------------------------------------

// s as the inside of a DOT string: quotes and backslashes escaped, control
// and non-ASCII bytes as \xNN text (DOT has no byte escapes of its own).
static void put_escaped(FILE *f, const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
    else if (*p < 0x20 || *p >= 0x7f) fprintf(f, "\\\\x%02x", *p);
    else fputc(*p, f);
  }
}

// Length of the cluster prefix of a parameter name: up to and including the
// first all-digit dotted component, not counting the dot after it; 0 if none.
static size_t cluster_prefix(const char *name) {
  const char *c = name;
  while (*c) {
    const char *e = strchr(c, '.');
    size_t n = e ? (size_t)(e - c) : strlen(c);
    bool digits = n > 0;
    for (size_t k = 0; k < n; k++) digits = digits && isdigit((unsigned char)c[k]);
    if (digits) return (size_t)(c - name) + n;
    if (!e) break;
    c = e + 1;
  }
  return 0;
}

typedef struct dot_clusters {
  int *of_node;          // cluster index per node, -1 at top level
  const char **name;     // per cluster: "layers.3"
  int n;
} dot_clusters;

static int find_or_add_cluster(bc_ctx *ctx, dot_clusters *c, const char *name, size_t len) {
  for (int i = 0; i < c->n; i++)
    if (strlen(c->name[i]) == len && !strncmp(c->name[i], name, len)) return i;
  char *s = bc_strndup(ctx, name, len);
  if (!s) return -2;
  c->name[c->n] = s;
  return c->n++;
}

// The rule in the file comment, in execution order (producers first).
static int assign_clusters(bc_ctx *ctx, const bc_graph *g, dot_clusters *c) {
  c->of_node = bc_alloc(ctx, (size_t)(g->nnodes + 1) * sizeof *c->of_node);
  c->name = bc_alloc(ctx, (size_t)(g->nnodes + 1) * sizeof *c->name);
  if (!c->of_node || !c->name) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  c->n = 0;
  for (int i = 0; i < g->nnodes; i++) {
    const bc_node *n = &g->nodes[i];
    int k = -1, p = -1;
    for (int s = 0; s < BC_MAX_NODE_PARAMS && p < 0; s++) p = n->param[s];
    if (p >= 0) {
      size_t len = cluster_prefix(g->params[p].name);
      if (len && (k = find_or_add_cluster(ctx, c, g->params[p].name, len)) == -2)
        return bc_error(ctx, BC_ENOMEM, "error: out of memory");
    } else {
      int latest = -1;
      for (int s = 0; s < n->nin; s++) {
        int v = n->in[s];
        int d = v >= 0 ? g->vals[v].def : -1;
        if (d > latest) latest = d;
      }
      k = latest >= 0 ? c->of_node[latest] : -1;
    }
    c->of_node[i] = k;
  }
  return BC_OK;
}

static const char *fill_color(bc_op op) {
  const bc_op_def *d = bcT_def(op);
  return d ? d->dot_color : "#d6e6f7";
}

// Attributes worth seeing in a picture, as "heads=8 causal" (the op table's printer).
static void put_attrs(FILE *f, const bc_node *n) {
  bc_sbuf b = {0};
  bcT_attrs(n, BC_ATTRS_DOT, &b);
  if (b.len) fputs(b.p, f);
  free(b.p);
}

// The passes' note "Add graphs/x.blk:18:10 + LayerNorm graphs/x.blk:19:10",
// shortened to "Add@18:10 + LayerNorm@19:10" (the file is the graph's).
static void put_fused(FILE *f, const char *note, const char *path) {
  size_t plen = path ? strlen(path) : 0;
  char *s = strdup(note), *out = s;
  if (!s) {
    put_escaped(f, note);
    return;
  }
  for (const char *p = note; *p;) {
    if (plen && p > note && p[-1] == ' ' && !strncmp(p, path, plen) && p[plen] == ':') {
      out[-1] = '@';
      p += plen + 1;
      continue;
    }
    *out++ = *p++;
  }
  *out = '\0';
  put_escaped(f, s);
  free(s);
}

static void put_node(FILE *f, const bc_graph *g, const bc_node *n, const char *indent) {
  fprintf(f, "%sn%d [label=\"%s", indent, n->id, bcI_op_name(n->op));
  put_attrs(f, n);
  for (int k = 0; k < n->nout; k++) {
    if (n->out[k] < 0) continue;
    char buf[96];
    const bc_value *v = &g->vals[n->out[k]];
    fprintf(f, "\\n");
    if (n->nout > 1 && v->name && *v->name) {
      put_escaped(f, v->name);
      fprintf(f, " ");
    }
    put_escaped(f, bc_shape_str(&v->shape, buf, sizeof buf));
  }
  if (n->fused_from) {
    fprintf(f, "\\nfused: ");
    put_fused(f, n->fused_from, g->path);
  }
  fprintf(f, "\", fillcolor=\"%s\"];\n", fill_color(n->op));
}

static void put_io(FILE *f, const bc_graph *g) {
  for (int i = 0; i < g->ninputs; i++) {
    const bc_value *v = &g->vals[g->inputs[i]];
    char buf[96];
    fprintf(f, "  in%d [shape=ellipse, fillcolor=\"#ffffff\", label=\"input ", i);
    put_escaped(f, v->name ? v->name : "");
    fprintf(f, "%s\\n", v->tokens ? " (tokens)" : v->type == BC_VT_I32 ? " (lengths)" : "");
    put_escaped(f, bc_shape_str(&v->shape, buf, sizeof buf));
    fprintf(f, "\"];\n");
  }
  for (int i = 0; i < g->noutputs; i++) {
    fprintf(f, "  out%d [shape=ellipse, fillcolor=\"#ffffff\", label=\"output ", i);
    put_escaped(f, g->output_names && g->output_names[i] ? g->output_names[i] : "");
    fprintf(f, "\"];\n");
  }
}

// "in2" for a graph input, "n7" for a node's value.
static void put_source(FILE *f, const bc_graph *g, int v) {
  int d = g->vals[v].def;
  if (d >= 0) {
    fprintf(f, "n%d", d);
    return;
  }
  for (int i = 0; i < g->ninputs; i++)
    if (g->inputs[i] == v) fprintf(f, "in%d", i);
}

static void put_edge_label(FILE *f, const bc_value *v) {
  if (v->name && *v->name) {
    fprintf(f, " [label=\"");
    put_escaped(f, v->name);
    fprintf(f, "\"]");
  }
}

static void put_edges(FILE *f, const bc_graph *g) {
  for (int i = 0; i < g->nnodes; i++) {
    const bc_node *n = &g->nodes[i];
    for (int s = 0; s < n->nin; s++) {
      if (n->in[s] < 0) continue;
      fprintf(f, "  ");
      put_source(f, g, n->in[s]);
      fprintf(f, " -> n%d", n->id);
      put_edge_label(f, &g->vals[n->in[s]]);
      fprintf(f, ";\n");
    }
  }
  for (int i = 0; i < g->noutputs; i++) {
    fprintf(f, "  ");
    put_source(f, g, g->outputs[i]);
    fprintf(f, " -> out%d;\n", i);
  }
}

int cli_write_dot(bc_ctx *ctx, const bc_graph *g, const char *stage, FILE *f) {
  dot_clusters c = {0};
  int st = assign_clusters(ctx, g, &c);
  if (st) return st;
  fprintf(f, "digraph \"");
  put_escaped(f, g->model);
  fprintf(f, "\" {\n  graph [rankdir=TB, fontname=\"Helvetica\", labelloc=t, label=\"");
  put_escaped(f, g->model);
  fprintf(f, " (");
  put_escaped(f, stage);
  fprintf(f, ")\\n");
  for (int i = 0; i < g->ndims; i++) {
    fprintf(f, "%s", i ? " " : "");
    put_escaped(f, g->dims[i].name);
    fprintf(f, "=%lld", (long long)g->dims[i].value);
  }
  fprintf(f, "\"];\n  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", "
             "fontsize=10];\n  edge [fontname=\"Helvetica\", fontsize=8];\n");
  put_io(f, g);
  for (int k = 0; k < c.n; k++) {
    fprintf(f, "  subgraph \"cluster_%d\" {\n    label=\"", k);
    put_escaped(f, c.name[k]);
    fprintf(f, "\"; style=\"rounded,dashed\"; color=\"#888888\";\n");
    for (int i = 0; i < g->nnodes; i++)
      if (c.of_node[i] == k) put_node(f, g, &g->nodes[i], "    ");
    fprintf(f, "  }\n");
  }
  for (int i = 0; i < g->nnodes; i++)
    if (c.of_node[i] < 0) put_node(f, g, &g->nodes[i], "  ");
  put_edges(f, g);
  fprintf(f, "}\n");
  return BC_OK;
}

// Writes the DOT text to o->output atomically, or to stdout.
static int emit_dot(bc_ctx *ctx, const cli_opts *o, const bc_graph *g, const char *stage) {
  if (!o->output) {
    int st = cli_write_dot(ctx, g, stage, stdout);
    return st ? st : fflush(stdout) ? bc_error(ctx, BC_EIO, "error: cannot write to stdout") : BC_OK;
  }
  char *text = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&text, &len);
  if (!m) return bc_error(ctx, BC_ENOMEM, "error: out of memory");
  int st = cli_write_dot(ctx, g, stage, m);
  if (fclose(m) && !st) st = bc_error(ctx, BC_ENOMEM, "error: out of memory");
  if (!st) {
    const void *parts[1] = {text};
    st = bc_write_file_atomic(ctx, o->output, 1, parts, &len);
  }
  free(text);
  return st;
}

int cli_cmd_dot(bc_ctx *ctx, const cli_opts *o) {
  if (o->noutputs > 1 || (o->noutputs == 1 && !o->output))
    return bc_error(ctx, BC_EUSAGE, "blockc: error: dot takes one -o FILE");
  if (o->after && !bcO_find(o->after))
    return bc_error(ctx, BC_EUSAGE, "blockc: error: unknown pass '%s' (see blockc dump --passes)",
                    o->after);
  bc_graph *g = bcP_parse_file(ctx, o->graph, o->defs, o->ndefs);
  if (!g) return BC_EINPUT;
  int st = o->after ? bcO_run_until(g, o->after) : BC_OK;
  if (st) return st;
  return emit_dot(ctx, o, g, o->after ? bc_fmt(ctx, "after %s", o->after) : "as parsed");
}
