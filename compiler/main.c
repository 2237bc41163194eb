// main.c — the blockc command-line interface.
//
//   blockc check GRAPH [-D N=V]...          validate, print a one-line summary
//   blockc dump GRAPH [--after PASS]        print the IR (after a pass)
//   blockc dump --passes                    list the passes
//   blockc run GRAPH [options]              run it (JIT by default)
//   blockc emit-c GRAPH                     print the generated C
//   blockc bench GRAPH [options]            time compile and forward
//   blockc weights GRAPH -o W.safetensors   the seeded weights `run` uses
//   blockc dot GRAPH [--after PASS]         Graphviz DOT of the graph
//   blockc grad GRAPH [options]             gradients of sum(y * dy)
//   blockc analyze GRAPH... [options]       per-layer gradient norm, RMS, cosine
//
// Exit status: 0 success, 1 bad input (graph, weights, arrays), 2 bad usage.
// This file only parses flags and prints; the work is done by the library.
#define _POSIX_C_SOURCE 200809L
#include "bc.h"
#include "cli.h"

#include <errno.h>
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *usage_text =
    "usage: blockc COMMAND GRAPH [options]\n"
    "\n"
    "commands:\n"
    "  check GRAPH     validate the graph; print model, dims, nodes, parameters\n"
    "  dump GRAPH      print the IR (--after PASS: after that pass; --passes: list them)\n"
    "  run GRAPH       run the graph and print the output's shape and statistics\n"
    "  emit-c GRAPH    print the C that the JIT compiles\n"
    "  emit GRAPH -o DIR   write DIR/<model>.c and DIR/<model>.h for vendoring (AOT)\n"
    "  bench GRAPH     time parse/passes/emit, tcc compile, forward vs GEMM-only\n"
    "  weights GRAPH -o FILE   write the seeded weights `run --seed S` uses (safetensors)\n"
    "  dot GRAPH       Graphviz DOT of the graph (--after PASS; -o FILE)\n"
    "  grad GRAPH -o G.safetensors   gradients of sum(y * dy) (emitted backward or reference)\n"
    "  analyze GRAPH...   per layer: gradient norm, stream RMS, cosine to the previous\n"
    "  help [COMMAND]  show help\n"
    "\n"
    "options:\n"
    "  -D NAME=VALUE   override a dim of the graph (repeatable)\n"
    "  --backend B     run, grad: jit (default), interp (reference), aot (cc -O3)\n"
    "  --weights FILE  safetensors weights (default: seeded random init)\n"
    "  --allow-extra   ignore tensors in --weights that the graph does not use\n"
    "  --weights-prefix P  read parameter NAME from tensor P+NAME (or NAME minus P)\n"
    "  --max-memory N  limit on parameter + workspace bytes (default 16G; K/M/G/T suffixes)\n"
    "  --input [NAME=]FILE   .npy input (float32; lengths: int32/int64); repeatable,\n"
    "                  NAME= picks the graph input (default: seeded normal random,\n"
    "                  full lengths); run-time dims are taken from the arrays' shapes\n"
    "  --output [NAME=]FILE  write an output as .npy (atomically); repeatable\n"
    "  --seed S        seed for random weights and input (default 0)\n"
    "  --threads N     BLAS threads (default 1)\n"
    "  --iters K       bench: forward runs to take the median of (default 20)\n"
    "  --dy, --dx [NAME=]FILE   grad: dy (default seeded N(0, 1)); write d input\n"
    "  --svg FILE      analyze: plot every GRAPH given\n"
    "  --json          bench, analyze: print JSON\n"
    "  --profile       bench: time per node\n"
    "  --stepwise      run: feed the input through the step entry (KV cache)\n"
    "  --chunk K       run --stepwise: positions per step call (default 1)\n"
    "  --decode        bench: prefill time and ms per generated token (KV cache)\n"
    "  --context C     bench --decode: the prompt length (default: half the bound)\n"
    "  --help, --version\n";

static const char *cmd_help(const char *cmd) {
  if (!strcmp(cmd, "check"))
    return "usage: blockc check GRAPH [-D NAME=VALUE]...\n"
           "Parses, unrolls and shape-checks GRAPH and prints one line: model, dims,\n"
           "node count and parameter count. Errors print file:line:col and exit 1.\n";
  if (!strcmp(cmd, "dump"))
    return "usage: blockc dump GRAPH [-D NAME=VALUE]... [--after PASS]\n"
           "       blockc dump --passes\n"
           "Prints the IR: one line per node with its output values, shapes, inputs,\n"
           "attributes, parameters and the graph line it came from. --after runs the\n"
           "pipeline up to and including PASS first.\n";
  if (!strcmp(cmd, "run"))
    return "usage: blockc run GRAPH [--backend jit|interp|aot] [--weights W.safetensors]\n"
           "                  [--input [NAME=]X.npy]... [--output [NAME=]Y.npy]... [--seed S]\n"
           "                  [--threads N] [-D NAME=VALUE]... [--stepwise [--chunk K]]\n"
           "Runs GRAPH and prints each output's shape, statistics and timing. Without\n"
           "--weights, parameters are initialised from --seed (xavier-uniform matrices,\n"
           "zero biases, LayerNorm weight 1). Each graph input comes from --input NAME=FILE\n"
           "(a bare FILE when the graph has one float input): float32 arrays, or int32/int64\n"
           "valid lengths for `lengths` inputs. Inputs not given are N(0, 1); lengths not\n"
           "given are full. Run-time dims (dim T <= 2048) take their values from the input\n"
           "arrays' shapes, so one compiled model serves every length up to the bound.\n"
           "--output NAME=FILE writes that output (a bare FILE when there is one output).\n"
           "--backend aot builds the `blockc emit` pair with runtime/blockc_rt.c using\n"
           "--cc CC (default cc) and $BLOCKC_CFLAGS (default -O3 -march=native) into a\n"
           "shared object cached in $BLOCKC_CACHE_DIR, $XDG_CACHE_HOME/blockc or\n"
           "~/.cache/blockc; the runtime is found via $BLOCKC_RUNTIME_DIR, <exe>/../runtime,\n"
           "<exe>/../share/blockc/runtime (installed) or the build-time path.\n"
           "--stepwise feeds the inputs through the step entry (token-by-token decoding\n"
           "with a KV cache) --chunk K positions at a time (default 1) and prints and\n"
           "writes the concatenated outputs: the full forward's, within float summation\n"
           "order (~1e-5 relative).  Graphs whose self-attentions are all causal over a\n"
           "run-time dim only; lengths inputs must be left out.\n";
  if (!strcmp(cmd, "emit-c"))
    return "usage: blockc emit-c GRAPH [-D NAME=VALUE]... [--verbose]\n"
           "Prints the dimension-specialised C that the JIT compiles.\n"
           "--verbose notes on stderr why layers are not in the layer loop (also\n"
           "comments atop the entry).\n";
  if (!strcmp(cmd, "emit"))
    return "usage: blockc emit GRAPH -o DIR [-D NAME=VALUE]... [--backward] [--verbose]\n"
           "Writes DIR/<model>.c and DIR/<model>.h (atomically; DIR must exist) for\n"
           "vendoring with runtime/blockc_rt.{c,h}. See examples/vendor/README.md.\n"
           "--backward adds the training step <model>_backward (declared in the header\n"
           "with <MODEL>_BACKWARD_WORKSPACE_BYTES).\n"
           "--verbose notes on stderr why layers are not in the layer loop.\n";
  if (!strcmp(cmd, "bench"))
    return "usage: blockc bench GRAPH [-D NAME=VALUE]... [--length NAME=VALUE]... [--threads N]\n"
           "                    [--iters K] [--json] [--profile] [--decode [--context C]]\n"
           "Prints parse+passes+emit time, tcc compile time, gcc -O2 compile time of the\n"
           "same C, forward median, GEMM-only median and their ratio.  A run-time dim\n"
           "(dim T <= N) runs at its bound unless --length T=VALUE picks 1..N (-D T=N\n"
           "sets the bound itself); inputs are seeded-random, lengths full.\n"
           "--decode times generation through the step entry instead: the prefill of a\n"
           "C-position prompt, then the median ms per single-position step at pos = C,\n"
           "C+1, ... (reusing the KV cache; --iters steps), next to the time of one plain\n"
           "read of every weight (the memory-bandwidth floor) and the ratio.  JSON keys:\n"
           "prefill_ms, decode_ms_per_token, context, read_floor_ms, decode_over_floor.\n";
  if (!strcmp(cmd, "weights"))
    return "usage: blockc weights GRAPH -o W.safetensors [--seed S] [-D NAME=VALUE]...\n"
           "Writes the parameters `blockc run GRAPH --seed S` initialises (xavier-uniform\n"
           "matrices, zero biases, LayerNorm weight 1) as float32 safetensors, named like\n"
           "a PyTorch state_dict, so a vendored program or PyTorch can load them.\n";
  if (!strcmp(cmd, "dot"))
    return "usage: blockc dot GRAPH [--after PASS] [-o FILE] [-D NAME=VALUE]...\n"
           "Writes the graph in Graphviz's DOT language (to stdout, or FILE atomically):\n"
           "a box per node with op, attributes, output shapes and fused parts, an ellipse\n"
           "per input and output. Layer loops become clusters, named by the parameter\n"
           "prefix up to the first numeric component (layers.3); nodes without\n"
           "parameters join the cluster of the input computed last. Render it with\n"
           "  blockc dot graphs/residual.blk --after inplace | dot -Tsvg -o residual.svg\n";
  if (!strcmp(cmd, "grad"))
    return "usage: blockc grad GRAPH -o GRADS.safetensors [--weights W] [--input [NAME=]X.npy]...\n"
           "                   [--dy [NAME=]DY.npy]... [--dx [NAME=]DX.npy]... [--seed S] [-D N=V]...\n"
           "                   [--backend jit|interp|aot]\n"
           "Computes the gradient of sum(y * dy) and writes every parameter's gradient\n"
           "under the parameter's own name. --dx writes the gradient w.r.t. a float input.\n"
           "Without --dy, dy is seeded N(0, 1) from --seed.  Backends: jit (default) and\n"
           "aot run the emitted training step <model>_backward (float32); interp the\n"
           "reference backward (double).  A node the emitted backward could not take\n"
           "would be an error with --backend jit|aot, and a note and interp without\n"
           "--backend; every op of the language is covered.\n";
  if (!strcmp(cmd, "analyze"))
    return "usage: blockc analyze GRAPH [GRAPH...] [-D N=48]... [--seed S] [--weights W]\n"
           "                      [--json] [--svg FILE]\n"
           "Per layer of the outermost `layers.{i}` stack: the norm of the gradient of\n"
           "sum(y * dy) (dy seeded N(0, 1)) w.r.t. the layer's parameters, the RMS of the\n"
           "main stream after the layer, and the mean token-wise cosine between it and the\n"
           "previous layer's. --json prints one object per graph (an array for several);\n"
           "--svg FILE plots every graph given. See docs/analysis.md.\n";
  return NULL;
}

// Printed through bc_error like every blockc message, so what the argument
// quotes (an option, a file name) is escaped.
__attribute__((format(printf, 1, 0)))
static int usage_error(const char *fmt, const char *arg) {
  bc_ctx *ctx = bc_ctx_new();
  if (!ctx) return 2;
  char *full = bc_fmt(ctx, "blockc: error: %s\nTry 'blockc --help'.", fmt);
  if (full) bc_error(ctx, BC_EUSAGE, full, arg);
  bc_ctx_free(ctx);
  return 2;
}

// Parses a decimal integer that must fit in [lo, hi].
static bool parse_int(const char *s, long long lo, long long hi, long long *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

// NAME=VALUE into defs (-D, or bench's --length); flag names the option in
// messages.
static int parse_define_into(bc_define *defs, int *ndefs, const char *flag, const char *arg) {
  char msg[512];
  const char *eq = strchr(arg, '=');
  if (!eq || eq == arg)
    return snprintf(msg, sizeof msg, "%s expects NAME=VALUE, got '%s'", flag, arg), usage_error("%s", msg);
  size_t n = (size_t)(eq - arg);
  for (size_t i = 0; i < n; i++) {
    char c = arg[i];
    bool ok = c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i && c >= '0' && c <= '9');
    if (!ok || n > BC_MAX_IDENT)
      return snprintf(msg, sizeof msg, "%s %s: not a valid dim name", flag, arg), usage_error("%s", msg);
  }
  long long v;
  if (!parse_int(eq + 1, LLONG_MIN, LLONG_MAX, &v))
    return snprintf(msg, sizeof msg, "%s %s: the value must be an integer", flag, arg), usage_error("%s", msg);
  if (*ndefs == CLI_MAX_DEFS)
    return snprintf(msg, sizeof msg, "too many %s options (limit 64)", flag), usage_error("%s", msg);
  for (int i = 0; i < *ndefs; i++)
    if (strlen(defs[i].name) == n && !strncmp(defs[i].name, arg, n))
      return snprintf(msg, sizeof msg, "%s %s: this dim was already set with %s (give each dim once)",
                      flag, arg, flag), usage_error("%s", msg);
  char *name = malloc(n + 1);
  if (!name) return usage_error("%s", "out of memory");
  memcpy(name, arg, n);
  name[n] = '\0';
  defs[(*ndefs)++] = (bc_define){name, v};
  return 0;
}

static int parse_define(cli_opts *o, const char *arg) {
  return parse_define_into(o->defs, &o->ndefs, "-D", arg);
}

// Flags that take a value: returns the value or NULL after reporting.
static const char *flag_value(int argc, char **argv, int *i) {
  if (*i + 1 >= argc) {
    usage_error("option '%s' needs a value", argv[*i]);
    return NULL;
  }
  return argv[++*i];
}

// A byte count with an optional K, M, G or T suffix (powers of 1024).
static bool parse_bytes(const char *s, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || v < 1) return false;
  int shift = 0;
  if (*end) {
    const char *u = strchr("KMGT", *end);
    if (!u || end[1]) return false;
    shift = 10 * (int)(u - "KMGT" + 1);
  }
  if (v > (INT64_MAX >> shift)) return false;
  *out = (int64_t)v << shift;
  return true;
}

// --input/--output NAME=FILE (NAME an identifier) or a bare FILE; the first
// bare one is also kept in *bare (emit's -o DIR, bench's --input).
static int add_file(cli_file *f, int *n, const char **bare, const char *flag, const char *v) {
  if (*n == CLI_MAX_FILES) return usage_error("too many %s options (limit 64)", flag);
  const char *eq = strchr(v, '=');
  size_t len = eq ? (size_t)(eq - v) : 0;
  bool named = eq && len > 0 && len <= BC_MAX_IDENT && (isalpha((unsigned char)v[0]) || v[0] == '_');
  for (size_t k = 0; named && k < len; k++)
    named = isalnum((unsigned char)v[k]) || v[k] == '_';
  if (named && !eq[1]) return usage_error("NAME=FILE: the file name is missing in '%s'", v);
  char *name = named ? strndup(v, len) : NULL;
  if (named && !name) return usage_error("%s", "out of memory");
  for (int k = 0; k < *n; k++)
    if ((!name && !f[k].name) || (name && f[k].name && !strcmp(name, f[k].name))) {
      free(name);
      return usage_error(named ? "%s given twice for the same name" : "%s given twice without a name", flag);
    }
  f[(*n)++] = (cli_file){name, named ? eq + 1 : v};
  if (!named && !*bare) *bare = v;
  return 0;
}

static int parse_args(int argc, char **argv, cli_opts *o) {
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i], *v;
    if (!strcmp(a, "-D")) {
      if (!(v = flag_value(argc, argv, &i)) || parse_define(o, v)) return 2;
    } else if (!strncmp(a, "-D", 2)) {
      if (parse_define(o, a + 2)) return 2;
    } else if (!strcmp(a, "--backend")) {
      if (!(v = flag_value(argc, argv, &i))) return 2;
      if (strcmp(v, "jit") && strcmp(v, "interp") && strcmp(v, "aot"))
        return usage_error("unknown backend '%s' (expected jit, interp or aot)", v);
      o->backend = v;
      o->backend_set = true;
    } else if (!strcmp(a, "--backward")) {
      o->backward = true;
    } else if (!strcmp(a, "--verbose")) {
      o->verbose = true;
    } else if (!strcmp(a, "--weights")) {
      if (!(o->weights = flag_value(argc, argv, &i))) return 2;
    } else if (!strcmp(a, "--input")) {
      if (!(v = flag_value(argc, argv, &i)) || add_file(o->inputs, &o->ninputs, &o->input, a, v))
        return 2;
    } else if (!strcmp(a, "--output") || !strcmp(a, "-o")) {
      if (!(v = flag_value(argc, argv, &i)) || add_file(o->outputs, &o->noutputs, &o->output, a, v))
        return 2;
    } else if (!strcmp(a, "--dy") || !strcmp(a, "--dx")) {
      const char *bare = NULL;
      bool dy = a[3] == 'y';
      if (!(v = flag_value(argc, argv, &i)) ||
          add_file(dy ? o->dys : o->dxs, dy ? &o->ndys : &o->ndxs, &bare, a, v))
        return 2;
    } else if (!strcmp(a, "--svg")) {
      if (!(o->svg = flag_value(argc, argv, &i))) return 2;
    } else if (!strcmp(a, "--after")) {
      if (!(o->after = flag_value(argc, argv, &i))) return 2;
    } else if (!strcmp(a, "--cc")) {
      if (!(o->cc = flag_value(argc, argv, &i))) return 2;
    } else if (!strcmp(a, "--seed")) {
      long long s;
      if (!(v = flag_value(argc, argv, &i))) return 2;
      if (!parse_int(v, 0, LLONG_MAX, &s)) return usage_error("--seed expects a non-negative integer, got '%s'", v);
      o->seed = (uint64_t)s;
    } else if (!strcmp(a, "--length")) {  // bench: a run-time dim's value
      if (!(v = flag_value(argc, argv, &i)) || parse_define_into(o->lens, &o->nlens, "--length", v))
        return 2;
    } else if (!strcmp(a, "--threads")) {
      long long t;
      if (!(v = flag_value(argc, argv, &i))) return 2;
      if (!parse_int(v, 1, 256, &t)) return usage_error("--threads expects 1..256, got '%s'", v);
      o->threads = (int)t;
    } else if (!strcmp(a, "--iters")) {
      long long t;
      if (!(v = flag_value(argc, argv, &i))) return 2;
      if (!parse_int(v, 1, 1000000, &t)) return usage_error("--iters expects 1..1000000, got '%s'", v);
      o->iters = (int)t;
    } else if (!strcmp(a, "--allow-extra")) {
      o->allow_extra = true;
    } else if (!strcmp(a, "--weights-prefix")) {
      if (!(o->weights_prefix = flag_value(argc, argv, &i))) return 2;
    } else if (!strcmp(a, "--max-memory")) {
      if (!(v = flag_value(argc, argv, &i))) return 2;
      if (!parse_bytes(v, &o->max_memory))
        return usage_error("--max-memory expects a byte count such as 64G, got '%s'", v);
    } else if (!strcmp(a, "--json")) {
      o->json = true;
    } else if (!strcmp(a, "--stepwise")) {
      o->stepwise = true;
    } else if (!strcmp(a, "--decode")) {
      o->decode = true;
    } else if (!strcmp(a, "--chunk") || !strcmp(a, "--context")) {
      long long t;
      if (!(v = flag_value(argc, argv, &i))) return 2;
      if (!parse_int(v, 1, BC_MAX_DIM, &t))
        return usage_error(a[3] == 'h' ? "--chunk expects a positive integer, got '%s'"
                                       : "--context expects a positive integer, got '%s'", v);
      if (a[3] == 'h') o->chunk = (long)t;
      else o->context = (long)t;
    } else if (!strcmp(a, "--profile")) {
      o->profile = true;
    } else if (!strcmp(a, "--passes")) {
      o->list_passes = true;
    } else if (a[0] == '-' && a[1]) {
      return usage_error("unknown option '%s'", a);
    } else if (!o->graph || (o->many_graphs && o->ngraphs < CLI_MAX_FILES)) {
      if (!o->graph) o->graph = a;
      o->graphs[o->ngraphs++] = a;
    } else {
      return usage_error("unexpected argument '%s' (one graph file per command)", a);
    }
  }
  return 0;
}

static void free_opts(cli_opts *o) {
  for (int i = 0; i < o->ndefs; i++) free((char *)o->defs[i].name);
  for (int i = 0; i < o->nlens; i++) free((char *)o->lens[i].name);
  for (int i = 0; i < o->ninputs; i++) free((char *)o->inputs[i].name);
  for (int i = 0; i < o->noutputs; i++) free((char *)o->outputs[i].name);
  for (int i = 0; i < o->ndys; i++) free((char *)o->dys[i].name);
  for (int i = 0; i < o->ndxs; i++) free((char *)o->dxs[i].name);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage_text, stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
    fputs(usage_text, stdout);
    return 0;
  }
  if (!strcmp(cmd, "--version")) {
    printf("blockc %s\n", BC_VERSION);
    return 0;
  }
  if (!strcmp(cmd, "help")) {
    if (argc < 3) {
      fputs(usage_text, stdout);
      return 0;
    }
    const char *h = cmd_help(argv[2]);
    if (!h) return usage_error("no help for unknown command '%s'", argv[2]);
    fputs(h, stdout);
    return 0;
  }
  static const struct {
    const char *name;
    int (*fn)(bc_ctx *, const cli_opts *);
  } cmds[] = {{"check", cli_check}, {"dump", cli_dump}, {"run", cli_run},
              {"emit-c", cli_emit_c}, {"emit", cli_emit}, {"bench", cli_bench},
              {"weights", cli_cmd_weights}, {"dot", cli_cmd_dot},
              {"grad", cli_grad}, {"analyze", cli_analyze}};
  int (*fn)(bc_ctx *, const cli_opts *) = NULL;
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
    if (!strcmp(cmd, cmds[i].name)) fn = cmds[i].fn;
  if (!fn) return usage_error("unknown command '%s'", cmd);
  for (int i = 2; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(cmd_help(cmd), stdout);
      return 0;
    }
  cli_opts o = {.backend = "jit", .threads = 1, .iters = 20, .many_graphs = !strcmp(cmd, "analyze")};
  int st = parse_args(argc, argv, &o);
  if (st) {
    free_opts(&o);
    return st;
  }
  if (!o.graph && !(o.list_passes && !strcmp(cmd, "dump"))) {
    free_opts(&o);
    return usage_error("%s: missing GRAPH argument", cmd);
  }
  // The step entry's flags belong to one command each.
  const char *misplaced = o.stepwise && strcmp(cmd, "run") ? "--stepwise (run only)"
                          : o.chunk && !o.stepwise ? "--chunk (needs run --stepwise)"
                          : o.decode && strcmp(cmd, "bench") ? "--decode (bench only)"
                          : o.backward && strcmp(cmd, "emit") ? "--backward (emit only)"
                          : o.verbose && strncmp(cmd, "emit", 4) ? "--verbose (emit and emit-c only)"
                          : o.context && !o.decode ? "--context (needs bench --decode)"
                          : o.stepwise && !strcmp(o.backend, "interp") ? "--stepwise with --backend interp (jit or aot)"
                                                                       : NULL;
  if (misplaced) {
    free_opts(&o);
    return usage_error("%s: not allowed here", misplaced);
  }
  // --cc only reaches the AOT build (run and grad --backend aot, bench's AOT column).
  if (o.cc && !(((!strcmp(cmd, "run") || !strcmp(cmd, "grad")) && !strcmp(o.backend, "aot")) ||
                !strcmp(cmd, "bench")))
    fprintf(stderr, "blockc: warning: --cc is ignored: only run and grad --backend aot and bench "
            "compile with a C compiler\n");
  bc_ctx *ctx = bc_ctx_new();
  if (!ctx) return 1;
  st = fn(ctx, &o);
  bc_ctx_free(ctx);
  free_opts(&o);
  return st == BC_OK ? 0 : st == BC_EUSAGE ? 2 : 1;
}
