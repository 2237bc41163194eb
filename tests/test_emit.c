// test_emit.c — the C emitter: the code it writes, that gcc, clang and tcc
// accept it without a warning, and that graph text cannot inject code.
// The compiler sweeps run a part in make test and the rest in make check
// (tu_run_tiers: the *_all / *_fixed cases).
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aot.h"
#include "fixture_graphs.h"
#include "io_graphs.h"

static const fx_cfg small = {2, 16, 32, 4, 64, 1, FX_POST_LN_FUSED, false, BC_ACT_GELU};

static bc_graph *planned(bc_ctx *ctx, const fx_cfg *c) {
  bc_graph *g = fx_build_planned(ctx, c);
  assert_non_null(g);
  return g;
}

static char *emit(bc_ctx *ctx, const bc_graph *g, bool profile, bool gemm_only) {
  bc_emit_opts o = {.profile = profile, .gemm_only = gemm_only};
  char *src = bcE_emit_c(ctx, g, &o);
  assert_non_null(src);
  return src;
}

static int count(const char *s, const char *needle) {
  int n = 0;
  for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

// Writes src to a temp file and runs `cc flags -c file`; returns the exit
// status (0 = compiled warning-free, since flags include -Werror).  The
// object goes to a temp file too, never -o /dev/null: tcc unlinks its output
// before writing it, so as root it would replace /dev/null with a file.
static int compile_with(const char *cc, const char *flags, const char *src, const char *prefix) {
  char path[256], obj[300], cmd[1024];
  tu_tmp_path(path, sizeof path, ".c");
  snprintf(obj, sizeof obj, "%s.o", path);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  if (prefix) fputs(prefix, f);
  fputs(src, f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "%s %s -c %s -o %s", cc, flags, path, obj);
  int rc = system(cmd);
  unlink(obj);
  if (rc != 0) fprintf(stderr, "failed: %s (kept %s)\n", cmd, path);
  else unlink(path);
  return rc;
}

static const char *c99_flags = "-std=c99 -Wall -Wextra -Werror -pedantic";

static void compiles_everywhere(const char *src) {
  assert_int_equal(compile_with("gcc", c99_flags, src, NULL), 0);
  if (tu_have("clang")) assert_int_equal(compile_with("clang", c99_flags, src, NULL), 0);
  if (tu_have("tcc")) assert_int_equal(compile_with("tcc", "-Wall -Werror", src, NULL), 0);
}

// --- the code ----------------------------------------------------------------

static void test_gemm_calls_with_constant_strides(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  char *src = emit(ctx, planned(ctx, &small), false, false);
  // Packed QKV projection: [B*T=32, 3D=96] = x [32, 32] W_in^T + b.  32
  // rows (<= BCRT_SMALL_M): bcrt_linear_pool (bcrt_linear over the entry's
  // pool), the weight's packed copy at offset 0 of `packed` (w->packed,
  // after the 12 parameters), bias in the call.
  assert_non_null(strstr(src, "bcrt_linear_pool(pool, 32, 96, 32, x, 32, w->layers_0_self_attn_in_proj_weight, 32, "
                              "BCRT_TRANS,\n              packed, 0, "
                              "w->layers_0_self_attn_in_proj_bias, 0.0f, qkv, 96);"));
  assert_non_null(strstr(src, "  const float *const packed = w->packed;"));
  assert_int_equal(count(src, "bcrt_linear_pool(pool, "), 4);
  assert_int_equal(count(src, "bcrt_linear("), 1);  // the prototype
  // <model>_pack: one bcrt_pack_nt per matrix, at the offsets the calls use.
  assert_non_null(strstr(src, "void fx_pack(const fx_weights *w, float *packed) {\n"
                              "  bcrt_pack_nt(96, 32, w->layers_0_self_attn_in_proj_weight, packed);\n"
                              "  bcrt_pack_nt(32, 32, w->layers_0_self_attn_out_proj_weight, packed + 3072);\n"
                              "  bcrt_pack_nt(64, 32, w->layers_0_linear1_weight, packed + 4096);\n"
                              "  bcrt_pack_nt(32, 64, w->layers_0_linear2_weight, packed + 6144);\n}\n"));
  assert_int_equal(bcY_packed_floats(planned(ctx, &small)), 8192);
  // Attention: every head in one tiled call, Q, K and V straight from the
  // packed projections (row stride 3D, K at column D, V vcol = D after K),
  // 1/sqrt(dh = 8) the scale, the heads' outputs into columns of heads
  // (row stride D); no score buffer.
  assert_non_null(strstr(src, "  bcrt_attention(pool, 2, 16, 4, /*group=*/1, /*dh=*/8, qkv, 96, qkv + 32, 96,\n"
                              "                 /*kvrows=*/16, /*vcol=*/32, /*nk=*/0, /*S=*/16, /*causal=*/0,\n"
                              "                 /*row0=*/0, /*rowpos=*/0, /*window=*/0, 0.35355338f, /*cap=*/0.0f, heads, 32);\n"));
  assert_null(strstr(src, "float *scores"));
  // Buffers are named once per value name, with their shape: values the
  // planner put in one range keep their own names.
  assert_non_null(strstr(src, "  float *qkv = ws + 0;  // [32, 96]\n"));
  assert_non_null(strstr(src, "  float *hidden = ws + 0;  // [32, 64]\n"));
  assert_int_equal(count(src, "ws + "), 8);
  // FFN: GEMM then one bias+activation epilogue; second layer bias in the call.
  assert_non_null(strstr(src, "bcrt_linear_pool(pool, 32, 64, 32, x2, 32, w->layers_0_linear1_weight, 32, "
                              "BCRT_TRANS,\n              packed, 4096, 0, 0.0f, hidden, 64);"));
  assert_non_null(strstr(src, ", w->layers_0_linear1_bias, BCRT_ACT_GELU, hidden);"));
  assert_non_null(strstr(src, "packed, 6144, w->layers_0_linear2_bias, 0.0f, "));
  assert_null(strstr(src, "bcrt_fill_rows(32"));
  // Shortest round-trip literals.
  assert_non_null(strstr(src, ", 1e-05f, "));
  assert_int_equal(count(src, "cblas_sgemm(BCRT_ROW_MAJOR"), 0);  // attention's are its own
  assert_int_equal(count(src, "bcrt_add_layernorm("), 2 + 1);  // + prototype
  // One section per node naming its graph line; no run-time shape math.
  assert_non_null(strstr(src, "// ---- n0: Attention  fixture.blk:10:1"));
  assert_non_null(strstr(src, "fused: Add@1 + LayerNorm@2"));
  assert_non_null(strstr(src, "int fx_run(const fx_weights *w, void *const *io, const long *rt, void *workspace) {"));
  assert_non_null(strstr(src, "int fx_forward(const fx_weights *w, const float *x, float *y, void *workspace) {"));
  assert_non_null(strstr(src, "  return fx_run(w, io, 0, workspace);"));
  // the entry without a pool is the pool entry on the calling thread
  assert_non_null(strstr(src, "int fx_run_pool(const fx_weights *w, void *const *io, const long *rt, "
                              "void *workspace,\n    bcrt_pool *pool) {"));
  assert_non_null(strstr(src, "  return fx_run_pool(w, io, rt, workspace, 0);\n}\n"));
  assert_null(strstr(src, "#include"));
  assert_non_null(strstr(src, "enum { DIM_B = 2, DIM_T = 16, DIM_D = 32, DIM_H = 4, DIM_F = 64, DIM_N = 1 };"));
  bc_ctx_free(ctx);
}

// A fixed row count above BCRT_SMALL_M (B*T = 80): the choice is made at
// emit time, cblas with the bias filled first, and nothing is packed.
static void test_many_rows_stay_on_cblas(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  fx_cfg c = small;
  c.T = 40;
  bc_graph *g = planned(ctx, &c);
  char *src = emit(ctx, g, false, false);
  assert_int_equal(count(src, "bcrt_linear("), 1);  // the prototype only
  // cblas in runs of columns over the pool, no packed copy (0, 0), the bias
  // (0) filled first: beta 1
  assert_int_equal(count(src, "bcrt_linear_pool(pool, "), 4);
  assert_int_equal(count(src, "cblas_sgemm(BCRT_ROW_MAJOR"), 0);
  assert_non_null(strstr(src, "bcrt_linear_pool(pool, 80, 96, 32, x, 32, w->layers_0_self_attn_in_proj_weight, 32, "
                              "BCRT_TRANS,\n                   0, 0, 0, 1.0f, "));
  assert_non_null(strstr(src, "bcrt_fill_rows(80, 32, w->layers_0_linear2_bias, "));
  assert_null(strstr(src, "const float *const packed"));
  assert_non_null(strstr(src, "void fx_pack(const fx_weights *w, float *packed) {\n"
                              "  (void)w;\n  (void)packed;  // no GEMM has few rows\n}\n"));
  assert_int_equal(bcY_packed_floats(g), 0);
  compiles_everywhere(src);
  bc_ctx_free(ctx);
}

static void test_causal_row_blocks(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  fx_cfg c = {1, 256, 32, 2, 32, 1, FX_PRE_LN, true, BC_ACT_RELU};
  char *src = emit(ctx, planned(ctx, &c), false, false);
  // Causal: one call; bcrt_attention skips the key tiles above each
  // 64-row query block's diagonal (test_attention checks what it computes).
  assert_non_null(strstr(src, "  bcrt_attention(pool, 1, 256, 2, /*group=*/1, /*dh=*/16, qkv, 96, qkv + 32, 96,\n"
                              "                 /*kvrows=*/256, /*vcol=*/32, /*nk=*/0, /*S=*/256, /*causal=*/1,\n"));
  assert_int_equal(count(src, "bcrt_softmax("), 1);  // the prototype
  compiles_everywhere(src);
  bc_ctx_free(ctx);
}

static void test_float_literals_exact(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  fx_cfg c = small;
  c.wiring = FX_POST_LN;
  bc_graph *g = fx_build(ctx, &c);
  assert_non_null(g);
  double vals[] = {3.0, 0.1, 1e20, 1.0 / 3.0, 1e-40};
  fx_plan_trivial(g);
  for (size_t k = 0; k < sizeof vals / sizeof vals[0]; k++) {
    for (int i = 0; i < g->nnodes; i++)  // alpha is an attribute of the Add family only
      if (g->nodes[i].op == BC_OP_ADD) g->nodes[i].alpha = vals[k];
    char *src = emit(ctx, g, false, false);
    const char *p = strstr(src, "  bcrt_add(");
    assert_non_null(p);
    p = strchr(p, ',') + 2;  // the alpha literal
    char *end;
    float f = strtof(p, &end);
    assert_true(f == (float)vals[k]);
    assert_int_equal(*end, 'f');
    assert_true(memchr(p, '.', (size_t)(end - p)) || memchr(p, 'e', (size_t)(end - p)));
  }
  bc_ctx_free(ctx);
}

// --- compilers ---------------------------------------------------------------

// make test: ResiDual; make check: the other wirings.
static void compiles_warning_free(bool quick) {
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  for (int wiring = FX_POST_LN; wiring <= FX_RESIDUAL; wiring++) {
    if ((wiring == FX_RESIDUAL) != quick) continue;
    fx_cfg c = small;
    c.wiring = (fx_wiring)wiring;
    c.causal = wiring & 1;
    bc_graph *g = planned(ctx, &c);
    compiles_everywhere(emit(ctx, g, false, false));
    compiles_everywhere(emit(ctx, g, true, false));
    compiles_everywhere(emit(ctx, g, false, true));
  }
  bc_ctx_free(ctx);
}

static void test_compiles_warning_free(void **state) {
  (void)state;
  compiles_warning_free(true);
}

static void test_compiles_warning_free_all(void **state) {
  (void)state;
  compiles_warning_free(false);
}

// The step entry with a row-wise tail (<model>_step_any, _step_rows_pool and
// _step_last_pool over it; test_step_last.c runs it): the JIT's code and
// the AOT pair of llama_lm and gemma2_lm (a tail inside the last layer, a
// soft-cap) compile warning-free with gcc, clang and tcc.
static void test_step_last_compiles(void **state) {
  (void)state;
  const char *rt = access("runtime/blockc_rt.h", R_OK) == 0 ? "runtime" : "../runtime";
  if (access(rt, R_OK) != 0) skip();
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  const bc_define d[] = {{"D", 32}, {"H", 4}, {"KV", 2}, {"N", 2}, {"T", 16}, {"V", 50}, {"F", 64},
                         {"W", 8}};
  const char *graphs[] = {"graphs/llama_lm.blk", "graphs/gemma2_lm.blk"};
  for (int k = 0; k < 2; k++) {
    bc_graph *g = bcP_parse_file(ctx, graphs[k], d, k ? 8 : 6);
    if (!g || bcO_run_until(g, NULL)) fail_msg("%s: %s", graphs[k], errs.buf);
    assert_true(bcY_step_tail(g) > 0);
    char *src = emit(ctx, g, false, false);
    assert_non_null(strstr(src, "_step_last_pool("));
    assert_non_null(strstr(src, "  if (last) {\n"));
    compiles_everywhere(src);
    char dir[256], hdr[300], flags[600];
    tu_tmp_path(dir, sizeof dir, ".d");
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(hdr, sizeof hdr, "%s/%s.h", dir, g->model);
    FILE *f = fopen(hdr, "w");
    assert_non_null(f);
    char *h = bcE_emit_h(ctx, g, "test");
    assert_non_null(h);
    fputs(h, f);
    fclose(f);
    bc_emit_opts o = {.aot = true};
    char *asrc = bcE_emit_c(ctx, g, &o);
    assert_non_null(asrc);
    snprintf(flags, sizeof flags, "%s -I%s -I%s", c99_flags, rt, dir);
    assert_int_equal(compile_with("gcc", flags, asrc, NULL), 0);
    if (tu_have("clang")) assert_int_equal(compile_with("clang", flags, asrc, NULL), 0);
    snprintf(flags, sizeof flags, "-Wall -Werror -I%s -I%s", rt, dir);
    if (tu_have("tcc")) assert_int_equal(compile_with("tcc", flags, asrc, NULL), 0);
    unlink(hdr);
    rmdir(dir);
  }
  bc_ctx_free(ctx);
}

// The inline prototypes must agree with runtime/blockc_rt.h: compiling both
// in one translation unit fails on any mismatch.  AOT output includes the
// header (and a <model>.h, empty here) instead.
static void test_prototypes_match_runtime_header(void **state) {
  (void)state;
  const char *rt = access("runtime/blockc_rt.h", R_OK) == 0 ? "runtime" : "../runtime";
  if (access(rt, R_OK) != 0) skip();
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = planned(ctx, &small);
  char flags[512];
  snprintf(flags, sizeof flags, "%s -I%s", c99_flags, rt);
  assert_int_equal(compile_with("gcc", flags, emit(ctx, g, false, false), "#include \"blockc_rt.h\"\n"), 0);

  char dir[256], hdr[300];
  tu_tmp_path(dir, sizeof dir, ".d");
  assert_int_equal(mkdir(dir, 0700), 0);
  snprintf(hdr, sizeof hdr, "%s/fx.h", dir);
  FILE *f = fopen(hdr, "w");
  assert_non_null(f);
  char *h = bcE_emit_h(ctx, g, "test");  // the real contract header
  assert_non_null(h);
  fputs(h, f);
  fclose(f);
  bc_emit_opts o = {.aot = true};
  char *src = bcE_emit_c(ctx, g, &o);
  assert_non_null(src);
  assert_non_null(strstr(src, "#include \"blockc_rt.h\"\n#include \"fx.h\"\n"));
  assert_null(strstr(src, "void cblas_sgemm("));
  snprintf(flags, sizeof flags, "%s -I%s -I%s", c99_flags, rt, dir);
  assert_int_equal(compile_with("gcc", flags, src, NULL), 0);
  unlink(hdr);
  rmdir(dir);
  bc_ctx_free(ctx);
}

static void test_profile_and_gemm_only(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  fx_cfg c = small;
  c.N = 4;  // Pre-LN: layer 0's first norm is not fused, so layers 1..3 are the loop
  c.wiring = FX_PRE_LN;
  bc_graph *g = planned(ctx, &c);
  char *full = emit(ctx, g, false, false);
  char *prof = emit(ctx, g, true, false);
  char *gemm = emit(ctx, g, false, true);
  assert_non_null(strstr(prof, "int fx_run_profile(const fx_weights *w, void *const *io, "
                               "const long *rt, void *workspace,\n"
                               "    void (*prof)(void *pctx, int node), void *pctx) {"));
  // The two layers are one function: its nodes are marked n0 + j, the
  // loop passes n0 = first + l*period, and the nodes outside it their ids.
  const bc_layers *L = &g->layers;
  assert_int_equal(L->count, 3);
  assert_int_equal(count(prof, "  prof(pctx, "), g->nnodes - (L->count - 1) * L->period + 1);
  assert_non_null(strstr(prof, "  prof(pctx, n0);\n"));
  assert_non_null(strstr(prof, "  prof(pctx, n0 + 1);\n"));
  char call[64];
  snprintf(call, sizeof call, "pctx, %d + %d*l);", L->first, L->period);
  assert_non_null(strstr(prof, call));
  assert_null(strstr(prof, "int fx_forward("));
  assert_null(strstr(prof, "int fx_run("));
  // The floor: the very same GEMMs (bias-free) and nothing else but the
  // attention kernel (its products are inside it).
  assert_int_equal(count(gemm, "cblas_sgemm(BCRT_ROW_MAJOR"), count(full, "cblas_sgemm(BCRT_ROW_MAJOR"));
  assert_int_equal(count(gemm, "bcrt_linear_pool(pool, "), count(full, "bcrt_linear_pool(pool, "));
  assert_int_equal(count(prof, "  bcrt_linear("), count(full, "bcrt_linear_pool(pool, "));  // no pool there
  const char *body = strstr(gemm, "// ---- n0");
  assert_non_null(body);
  for (const char *p = strstr(body, "bcrt_"); p; p = strstr(p + 1, "bcrt_"))
    if (strncmp(p, "bcrt_pool", 9) && strncmp(p, "bcrt_attention(", 15))  // attention counted whole
      assert_int_equal(strncmp(p, "bcrt_linear_pool(", 17), 0);
  assert_non_null(strstr(body, "packed, 6144, 0, 0.0f, "));  // the second FFN layer, no bias
  bc_ctx_free(ctx);
}


// --- several inputs and outputs, run-time dims --------------------------------

static const char *rt_dir(void) {
  return access("runtime/blockc_rt.h", R_OK) == 0 ? "runtime" : "../runtime";
}

// The AOT pair for g in a fresh directory, compiled by every compiler.
static void aot_pair_compiles(bc_ctx *ctx, bc_graph *g, bool all) {
  char dir[256], path[300], flags[700];
  tu_tmp_path(dir, sizeof dir, ".d");
  assert_int_equal(mkdir(dir, 0700), 0);
  char *h = bcE_emit_h(ctx, g, "test");
  bc_emit_opts o = {.aot = true};
  char *c = bcE_emit_c(ctx, g, &o);
  assert_non_null(h);
  assert_non_null(c);
  snprintf(path, sizeof path, "%s/%s.h", dir, g->model);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(h, f);
  fclose(f);
  snprintf(flags, sizeof flags, "%s -I%s -I%s", c99_flags, rt_dir(), dir);
  assert_int_equal(compile_with("gcc", flags, c, NULL), 0);
  if (all && tu_have("clang")) assert_int_equal(compile_with("clang", flags, c, NULL), 0);
  snprintf(flags, sizeof flags, "-Wall -Werror -I%s -I%s", rt_dir(), dir);
  if (all && tu_have("tcc")) assert_int_equal(compile_with("tcc", flags, c, NULL), 0);
  // C++ users include the header too.
  snprintf(flags, sizeof flags, "-x c++ -Wall -Wextra -Werror -I%s -I%s", rt_dir(), dir);
  if (all && tu_have("g++")) {
    char inc[400];
    snprintf(inc, sizeof inc, "#include \"%s.h\"\n", g->model);
    assert_int_equal(compile_with("g++", flags, inc, NULL), 0);
  }
  unlink(path);
  rmdir(dir);
}

static bc_graph *parsed_planned(bc_ctx *ctx, tu_errors *errs, const char *text) {
  bc_graph *g = tu_parse(ctx, text);
  if (!g) fail_msg("parse: %s", errs->buf);
  assert_int_equal(bcO_run_until(g, NULL), BC_OK);
  return g;
}

// Variant 0 (run-time T and S) in make test; 1 (all fixed) and 2 (B too) in
// make check.
static void io_graph_code(int from, int to) {
  for (int variant = from; variant <= to; variant++) {  // run-time T and S; all fixed; B too
    bool fixed = variant == 1, rtB = variant == 2;
    tu_errors errs;
    bc_ctx *ctx = tu_ctx(&errs);
    ig_cfg cfg = {.B = 2, .D = 18, .H = 3, .F = 20, .T = 70, .S = 9, .fixT = fixed, .fixS = fixed,
                  .causal = true, .rtB = rtB};
    char text[2048];
    bc_graph *g = parsed_planned(ctx, &errs, ig_text(text, sizeof text, &cfg));
    char *src = emit(ctx, g, false, false);
    assert_null(strstr(src, "dec_forward"));  // several inputs: no _forward
    assert_non_null(strstr(src, "int dec_run(const dec_weights *w, void *const *io, const long *rt, void *workspace) {"));
    assert_non_null(strstr(src, "  const int *len = (const int *)io[2];"));
    assert_non_null(strstr(src, "  float *c = (float *)io[5];"));
    // Cross-attention: Q from x, K|V in one GEMM over rows D..3D of
    // in_proj_weight (B*S <= 18 rows: bcrt_linear, its own packed block).
    assert_non_null(strstr(src, "w->multihead_attn_in_proj_weight + 324, 18, BCRT_TRANS,\n"
                                "              packed, "));
    assert_non_null(strstr(src, "w->multihead_attn_in_proj_bias + 18, 0.0f, qkv + "));
    // the memory's valid keys per batch row (mem_len, NULL: all S)
    assert_non_null(strstr(src, "/*kvrows=*/S, /*vcol=*/18, /*nk=*/mem_len, /*S=*/S, /*causal=*/0,")
                    || strstr(src, "/*nk=*/mem_len, /*S=*/9, /*causal=*/0,"));
    assert_non_null(strstr(src, "bcrt_fill_rows("));
    if (rtB) {
      assert_non_null(strstr(src, "  const int B = (int)rt[0];"));
      assert_non_null(strstr(src, "bcrt_linear_pool(pool, B*T, 54, 18, x, 18, w->self_attn_in_proj_weight, 18,"));
      assert_non_null(strstr(src, "  bcrt_attention(pool, B, T, 3, /*group=*/1, /*dh=*/6, qkv, 54, qkv + 18, 54,"));
    } else if (!fixed) {
      assert_non_null(strstr(src, "  const int T = (int)rt[0];"));
      assert_non_null(strstr(src, "  if (rt[0] < 1 || rt[0] > 70) return 2;"));
      assert_non_null(strstr(src, "  const int S = (int)rt[1];"));
      assert_non_null(strstr(src, "      if (len[b] < 1 || len[b] > T) return 3;"));
      assert_non_null(strstr(src, "      if (mem_len[b] < 1 || mem_len[b] > S) return 3;"));
      assert_non_null(strstr(src, "bcrt_linear_pool(pool, 2*T, 54, 18, x, 18, w->self_attn_in_proj_weight, 18,"));
      assert_non_null(strstr(src, "  bcrt_attention(pool, 2, T, 3, /*group=*/1, /*dh=*/6, qkv, 54, qkv + 18, 54,"));
    } else {
      assert_non_null(strstr(src, "  (void)rt;"));
      assert_non_null(strstr(src, "      if (len[b] < 1 || len[b] > 70) return 3;"));
      // B*T = 140 rows: cblas, decided at emit time; the memory's 18: packed.
      assert_non_null(strstr(src, "  bcrt_fill_rows(140, 54, w->self_attn_in_proj_bias, qkv);\n"
                                  "  bcrt_linear_pool(pool, 140, 54, 18, x, 18, w->self_attn_in_proj_weight, 18, BCRT_TRANS,\n"
                                  "                   0, 0, 0, 1.0f, qkv, 54);"));
      assert_non_null(strstr(src, "bcrt_linear_pool(pool, 18, 36, 18, mem, 18, "));
    }
    compiles_everywhere(src);
    compiles_everywhere(emit(ctx, g, true, false));
    compiles_everywhere(emit(ctx, g, false, true));
    aot_pair_compiles(ctx, g, true);
    bc_ctx_free(ctx);
  }
}

static void test_io_graph_code(void **state) {
  (void)state;
  io_graph_code(0, 0);
}

static void test_io_graph_code_fixed(void **state) {
  (void)state;
  io_graph_code(1, 2);
}

// An output named like an input (`output x` of the input x, passed
// through) and an output x_2 (issue 20 item 8): io_info carries the graph's
// own names in order (x, x, x_2; before, x_2 and x_2_2, so a program bound
// x_2= to the other output), and the _io member renamed for output x takes
// no name another entry has.
static void test_io_names_are_the_graphs(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = parsed_planned(ctx, &errs,
                               "model pass\ndim B = 1\ndim T <= 4\ndim D = 8\ninput x : [B, T, D]\n"
                               "x_2 = Linear(x, out=D, params=lin)\noutput x\noutput x_2\n");
  bc_emit_opts o = {.aot = true};
  char *c = bcE_emit_c(ctx, g, &o), *h = bcE_emit_h(ctx, g, "t");
  assert_non_null(c);
  assert_non_null(h);
  const char *in = strstr(c, "  {\"x\", BCRT_IO_INPUT,"), *o1 = strstr(c, "  {\"x\", BCRT_IO_OUTPUT,");
  const char *o2 = strstr(c, "  {\"x_2\", BCRT_IO_OUTPUT,");
  if (!in || !o1 || !o2 || !(in < o1 && o1 < o2)) fail_msg("io_info:\n%s", c);
  const char *m0 = strstr(h, "  const float *x; /* input"), *m1 = strstr(h, "  float *x_3; /* output");
  const char *m2 = strstr(h, "  float *x_2; /* output");
  if (!m0 || !m1 || !m2 || !(m0 < m1 && m1 < m2)) fail_msg("pass_io:\n%s", h);
  assert_non_null(strstr(c, "  float *x_3 = (float *)io[1];  // output x "));
  assert_non_null(strstr(c, "  float *x_2 = (float *)io[2];  // output x_2 "));
  aot_pair_compiles(ctx, g, true);
  bc_ctx_free(ctx);
}

// Names from the graph that would clash with C or with generated names
// become fallbacks; the code still compiles everywhere.
// Each name in one role in make test (name i in role i % 3), in the other
// two in make check.
static void hostile_io_names(bool quick) {
  static const char *names[] = {"int", "ws", "w", "io", "rt", "b", "h", "sc", "qkv", "int32_t",
                                "INT8_MAX", "size_t", "bcrt_add", "BCRT_OK", "cblas_sgemm",
                                "W_x", "DIM_T", "m_run", "M_OK", "slot", "workspace", "main",
                                "NULL", "errno", "in0", "out0", "rt0", "x"};
  static const char *roles[] = {
      "model m\ndim B = 1\ndim %1$s <= 9\ndim D = 8\ninput x : [B, %1$s, D]\n"
      "y = Linear(x, out=D, params=lin)\noutput y\n",
      "model m\ndim B = 1\ndim T <= 9\ndim D = 8\ninput %1$s : [B, T, D]\ninput q : [B, T, D]\n"
      "y = Add(Linear(%1$s, out=D, params=lin), q)\noutput y\n",
      "model m\ndim B = 1\ndim T <= 9\ndim D = 8\ninput x : [B, T, D]\n"
      "%1$s = Linear(x, out=D, params=lin)\ny = Add(%1$s, x)\noutput y\noutput %1$s\n"};
  int parsed = 0, tried = 0;
  for (size_t r = 0; r < 3; r++)
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
      if ((i % 3 == r) != quick) continue;
      tried++;
      tu_errors errs;
      bc_ctx *ctx = tu_ctx(&errs);
      char text[1024];
      snprintf(text, sizeof text, roles[r], names[i]);
      bc_graph *g = tu_parse(ctx, text);
      if (!g) {  // the parser may refuse a name itself (a C keyword): fine
        bc_ctx_free(ctx);
        continue;
      }
      parsed++;
      assert_int_equal(bcO_run_until(g, NULL), BC_OK);
      assert_int_equal(compile_with("gcc", c99_flags, emit(ctx, g, false, false), NULL), 0);
      aot_pair_compiles(ctx, g, false);
      bc_ctx_free(ctx);
    }
  assert_true(parsed * 7 >= tried * 5);  // most names are legal in graph files
  if (!quick) return;
  // A model named like the JIT's own prefixes, with a param / dim named
  // like the entry points: Wm_run must stay the function, not w[i] (Wm:
  // `model W` is refused, its W_OK would be <unistd.h>'s).
  static const char *clash[] = {
      "model Wm\ndim B = 1\ndim T = 4\ndim D = 8\ninput x : [B, T, D]\n"
      "y = Linear(x, out=D, params=run)\noutput y\n",
      "model DIM\ndim B = 1\ndim run = 4\ndim forward = 2\ndim D = 8\ninput x : [B, run, D]\n"
      "y = Linear(x, out=D, params=lin)\noutput y\n"};
  for (size_t i = 0; i < 2; i++) {
    tu_errors errs;
    bc_ctx *ctx = tu_ctx(&errs);
    bc_graph *g = tu_parse(ctx, clash[i]);
    if (!g) fail_msg("%s", errs.buf);
    assert_int_equal(bcO_run_until(g, NULL), BC_OK);
    compiles_everywhere(emit(ctx, g, false, false));
    compiles_everywhere(emit(ctx, g, true, false));
    bc_ctx_free(ctx);
  }
}

static void test_hostile_io_names(void **state) {
  (void)state;
  hostile_io_names(true);
}

static void test_hostile_io_names_all_roles(void **state) {
  (void)state;
  hostile_io_names(false);
}

// Issue 12 item 7: an all-uppercase model with a dim named like any name
// the header generates.  Each such macro is left out (a comment says so)
// and the pair compiles.
// A third of the names in make test (i % 3 == 0), the rest in make check.
static void header_name_collisions(bool quick) {
  static const char *gen[] = {"weights", "slots", "param_info", "params", "forward", "run",
                              "run_abi", "io", "status", "layout_check_", "OK", "EINVAL",
                              "EDIM", "ELEN", "NPARAMS", "WORKSPACE_BYTES", "WORKSPACE_ALIGN",
                              "IN_NUMEL", "OUT_NUMEL", "IN_RANK", "OUT_RANK", "IN_SHAPE",
                              "OUT_SHAPE", "IN_RT", "OUT_RT", "NINPUTS",
                              "NOUTPUTS", "NRT", "T_MAX", "layer_weights", "layer",
                              "layer_step", "step", "step_abi", "run_profile"};
  for (size_t i = 0; i < sizeof gen / sizeof gen[0]; i++)
    for (int rt = 0; rt <= 1 && (i % 3 == 0) == quick; rt++) {
      tu_errors errs;
      bc_ctx *ctx = tu_ctx(&errs);
      char text[1024];
      if (rt)
        snprintf(text, sizeof text,
                 "model M\ndim B = 1\ndim %s <= 9\ndim D = 8\ninput x : [B, %s, D]\n"
                 "h = x\nfor i in 0..3 as layers.{i} { h = LayerNorm(Add(h, Linear(h, out=D, params=lin)), params=ln) }\n"
                 "y = h\noutput y\n", gen[i], gen[i]);
      else
        snprintf(text, sizeof text,
                 "model M\ndim B = 1\ndim %s = 4\ndim T <= 9\ndim D = 8\ninput x : [B, T, D]\n"
                 "h = x\nfor i in 0..3 as layers.{i} { h = LayerNorm(Add(h, Linear(h, out=D, params=lin)), params=ln) }\n"
                 "y = h\noutput y\n", gen[i]);
      bc_graph *g = tu_parse(ctx, text);
      if (!g) fail_msg("%s: %s", gen[i], errs.buf);
      assert_int_equal(bcO_run_until(g, NULL), BC_OK);
      char *h = bcE_emit_h(ctx, g, "t");
      assert_non_null(h);
      // Layers 0 and 1 are a loop: the header has the layer struct too.
      assert_non_null(strstr(h, "} M_layer_weights;"));
      // Fixed: M_<dim> meets a generated name, so it is left out (for
      // T_MAX it is T's bound macro M_T_MAX that goes: the first dim keeps
      // a contested name).  Run-time: M_<dim>_MAX meets nothing.
      char want[128];
      if (rt) snprintf(want, sizeof want, "#define M_%s_MAX 9\n", gen[i]);
      else if (!strcmp(gen[i], "T_MAX")) snprintf(want, sizeof want, "/* dim T <= 9 (no macro");
      else snprintf(want, sizeof want, "/* dim %s = 4 (no macro: the name is taken) */", gen[i]);
      if (!strstr(h, want)) fail_msg("dim %s (rt %d): no '%s' in\n%s", gen[i], rt, want, h);
      aot_pair_compiles(ctx, g, false);
      bc_ctx_free(ctx);
    }
}

static void test_header_name_collisions(void **state) {
  (void)state;
  header_name_collisions(true);
}

static void test_header_name_collisions_all(void **state) {
  (void)state;
  header_name_collisions(false);
}

// --- layers as a loop ------------------------------------------------------------

// The shipped ResiDual stack at N=6: one layer function, called in one loop
// over the weights' layer array, in the JIT source and the AOT .c alike; the
// layer's code (two fused norms) is there once.
static void test_layer_loop_residual(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = bcP_parse_file(ctx, "graphs/residual.blk", NULL, 0);
  assert_non_null(g);
  assert_int_equal(bcO_run_until(g, NULL), BC_OK);
  assert_int_equal(g->layers.count, 6);
  assert_int_equal(g->layers.first, 0);
  for (int aot = 0; aot < 2; aot++) {
    bc_emit_opts o = {.aot = aot};
    char *src = bcE_emit_c(ctx, g, &o);
    assert_non_null(src);
    assert_int_equal(count(src, "static void residual_layer("), 1);
    assert_int_equal(count(src, "for (int l = 0; l < 6; l++)"), 1);
    // Each trip's packed weight blocks: poff floats into w->packed.
    assert_int_equal(count(src, "residual_layer(&w->layers[l], l == 0 ? x : xa, l == 0 ? x : xd, "
                                "len, T, ws,\n        packed, 3145728*l, pool);"), 1);
    assert_non_null(strstr(src, "const int *len, int T, float *ws, const float *packed, long poff,\n"
                                "    bcrt_pool *pool) {"));
    assert_non_null(strstr(src, "    float *lp = packed + 3145728*i;\n"
                                "    bcrt_pack_nt(1536, 512, l->self_attn_in_proj_weight, lp);\n"));
    assert_int_equal(count(src, "  bcrt_dual_add_layernorm("), 2);
    assert_non_null(strstr(src, "l->self_attn_in_proj_weight, 512, BCRT_TRANS,\n"
                                "              packed, poff, l->self_attn_in_proj_bias, 0.0f, qkv, 1536);"));
    assert_null(strstr(src, "#define W_"));
    assert_null(strstr(src, "layers_3"));
    if (!aot) {  // the JIT compiles the header's weight types
      assert_non_null(strstr(src, "} residual_layer_weights;"));
      assert_non_null(strstr(src, "  residual_layer_weights layers[6]; "));
      compiles_everywhere(src);
    }
  }
  bc_ctx_free(ctx);
}

// A graph without a loop emits no layer function and flat weights.
static void test_no_loop_no_layer_function(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = parsed_planned(ctx, &errs,
                               "model m\ndim D = 8\ninput x : [4, D]\n"
                               "y = LayerNorm(Linear(x, out=D, params=a), params=b)\noutput y\n");
  assert_int_equal(g->layers.count, 0);
  char *src = emit(ctx, g, false, false);
  assert_null(strstr(src, "_layer("));
  assert_null(strstr(src, "layer_weights"));
  assert_null(strstr(src, "for (int l = 0;"));
  assert_non_null(strstr(src, "  const float *a_weight; /* \"a.weight\" (8, 8) */"));
  assert_non_null(strstr(src, "bcrt_layernorm(4, 8, buf, w->b_weight, w->b_bias, "));
  compiles_everywhere(src);
  bc_ctx_free(ctx);
}

// Found by the long fuzz run: a graph that plans but whose packed copy or KV
// cache would pass the 16 GiB workspace limit still emits: without packed
// blocks (cblas everywhere) and without a step entry (bcY_step_check says
// why), instead of failing with an internal error.
static void test_oversized_pack_and_cache_degrade(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  // Two 16384 x 65536 weights per layer: 4 layers pack to ~34 GB.
  bc_graph *g = parsed_planned(ctx, &errs,
                               "model m\ndim T <= 4\ndim D = 16384\ninput x : [T, D]\n"
                               "for i in 0..4 as l.{i} { x = FFN(x, hidden=4 * D, params=(a, b)) }\n"
                               "output x\n");
  assert_int_equal(bcY_packed_floats(g), 0);
  char *src = emit(ctx, g, false, false);
  assert_non_null(src);
  assert_null(strstr(src, " bcrt_linear(T"));  // no call (the prototype stays)
  assert_non_null(strstr(src, "cblas_sgemm("));
  bc_ctx_free(ctx);
  ctx = tu_ctx(&errs);
  // Causal, T <= 4096, D = 16384, 64 layers: a 32 GiB KV cache.
  g = parsed_planned(ctx, &errs,
                     "model m\ndim T <= 4096\ndim D = 16384\ninput x : [T, D]\n"
                     "for i in 0..64 as l.{i} { x = Attention(x, heads=8, causal=true, params=a) }\n"
                     "output x\n");
  assert_int_equal(bcY_cache_bytes(g), 0);
  assert_int_equal(bcY_step_check(ctx, g), BC_EINPUT);
  assert_non_null(strstr(ctx->last_error, "KV cache would be over the 16 GiB workspace limit"));
  src = emit(ctx, g, false, false);
  assert_non_null(src);
  assert_null(strstr(src, "m_step("));
  bc_ctx_free(ctx);
}

// A first layer that differs (Pre-LN: layer 0's first norm reads the input
// unfused, later ones are fused with the previous layer's residual add)
// stays inline before the loop; a last one that writes the graph output
// (Post-LN) is in the loop: the layer function writes the stream through a
// carried-out pointer, the output on the last trip.
static void test_layer_loop_differing_ends(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  fx_cfg c = small;
  c.wiring = FX_PRE_LN;
  c.N = 5;
  bc_graph *g = planned(ctx, &c);
  const bc_layers *L = &g->layers;
  assert_int_equal(L->count, 4);    // layers 1..4
  assert_int_equal(L->index0, 1);
  assert_int_equal(L->first, 4);    // after layer 0's 4 nodes
  char *src = emit(ctx, g, false, false);
  assert_int_equal(count(src, "static void fx_layer("), 1);
  // The weights' array holds layer 0 too (its parameters are alike).
  assert_non_null(strstr(src, "for (int l = 0; l < 4; l++)\n    fx_layer(&w->layers[1 + l], "));
  assert_non_null(strstr(src, "  fx_layer_weights layers[5]; /* \"layers.0.*\" .. \"layers.4.*\" */"));
  assert_non_null(strstr(src, "w->layers[0].norm1_weight"));  // layer 0 inline
  compiles_everywhere(src);
  c.wiring = FX_POST_LN;
  c.N = 4;
  g = planned(ctx, &c);
  assert_int_equal(g->layers.count, 4);  // layers 0..3
  assert_int_equal(g->layers.first, 0);
  src = emit(ctx, g, false, false);
  assert_non_null(strstr(src, "for (int l = 0; l < 4; l++)\n    fx_layer(&w->layers[l], "));
  assert_non_null(strstr(src, "l == 3 ? "));  // layer 3 writes the output
  assert_null(strstr(src, "w->layers[3]."));
  compiles_everywhere(src);
  bc_ctx_free(ctx);
}

// Every layer stack loops, and a layer left out says why, atop the entry
// (bcE_layer_notes; `--verbose` prints the same).  The Pre-LN decoder's
// periodic plan costs 10% more arena than the plain one, whose offsets are
// periodic anyway: the planner keeps the run (it used to drop it).
static void test_layer_notes(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = bcP_parse_file(ctx, "graphs/decoder_pre_ln.blk", NULL, 0);
  assert_non_null(g);
  assert_int_equal(bcO_run_until(g, NULL), BC_OK);
  assert_int_equal(g->layers.count, 5);  // layers 1..5
  assert_null(g->layers_dropped);
  char *src = emit(ctx, g, false, false);
  assert_int_equal(count(src, "static void decoder_pre_ln_layer("), 1);
  assert_non_null(strstr(src, "// layer layers.0 (n0..n5) is not in the layer loop: its node n0 is "
                              "LayerNorm where a trip\n//   has AddLayerNorm"));
  const char *notes = bcE_layer_notes(ctx, g);
  assert_non_null(notes);
  assert_int_equal(count(notes, "\n"), 1);
  assert_non_null(strstr(notes, "layer layers.0 (n0..n5) is not in the layer loop"));
  compiles_everywhere(src);
  bc_ctx_free(ctx);
  // Two stacks: the encoder's loops, the decoder's is unrolled.
  ctx = tu_ctx(&errs);
  g = bcP_parse_file(ctx, "graphs/transformer.blk", NULL, 0);
  assert_non_null(g);
  assert_int_equal(bcO_run_until(g, NULL), BC_OK);
  notes = bcE_layer_notes(ctx, g);
  assert_non_null(strstr(notes, "layers decoder.layers.0..5 (n25..n60) are not in the layer loop: "
                                "one layer loop per model"));
  bc_ctx_free(ctx);
  // Every layer in the loop: nothing to say.
  ctx = tu_ctx(&errs);
  g = bcP_parse_file(ctx, "graphs/post_ln.blk", NULL, 0);
  assert_int_equal(bcO_run_until(g, NULL), BC_OK);
  assert_string_equal(bcE_layer_notes(ctx, g), "");
  bc_ctx_free(ctx);
  // Layers that differ: no loop, and why.
  ctx = tu_ctx(&errs);
  g = parsed_planned(ctx, &errs,
                     "model m\ndim D = 8\ninput x : [4, D]\n"
                     "x = FFN(x, hidden=16, params=(l.0.a, l.0.b))\n"
                     "x = FFN(x, hidden=32, params=(l.1.a, l.1.b))\noutput x\n");
  assert_int_equal(g->layers.count, 0);
  assert_string_equal(bcE_layer_notes(ctx, g),
                      "layers l.0..1 (n0..n1) are not in the layer loop: no two consecutive layers "
                      "are identical node for node (ops, attributes, shapes or wiring differ)\n");
  src = emit(ctx, g, false, false);
  assert_non_null(strstr(src, "// layers l.0..1 (n0..n1) are not in the layer loop: no two"));
  bc_ctx_free(ctx);
}

// Parameters not in the same order in every layer: no layer struct, no loop.
static void test_layer_params_out_of_order_fall_back(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  fx_cfg c = small;
  c.wiring = FX_RESIDUAL;
  c.N = 3;
  bc_graph *g = fx_build(ctx, &c);
  assert_non_null(g);
  int a = bcI_find_param(g, "layers.1.norm1.weight"), b = bcI_find_param(g, "layers.1.norm1.bias");
  assert_true(a >= 0 && b >= 0);
  bc_param t = g->params[a];
  g->params[a] = g->params[b];
  g->params[b] = t;
  for (int i = 0; i < g->nnodes; i++)
    for (int k = 0; k < BC_MAX_NODE_PARAMS; k++)
      if (g->nodes[i].param[k] == a || g->nodes[i].param[k] == b)
        g->nodes[i].param[k] = a + b - g->nodes[i].param[k];
  g->param_index_cap = 0;  // names moved: look them up by scanning
  assert_int_equal(bcO_run_until(g, NULL), BC_OK);
  assert_int_equal(g->layers.count, 0);
  char *src = emit(ctx, g, false, false);
  assert_null(strstr(src, "_layer("));
  assert_null(strstr(src, "layer_weights"));
  assert_non_null(strstr(src, "  const float *layers_1_norm1_bias; /* \"layers.1.norm1.bias\" (32,) */\n"
                              "  const float *layers_1_norm1_weight; /* \"layers.1.norm1.weight\" (32,) */\n"));
  compiles_everywhere(src);
  bc_ctx_free(ctx);
}

// --- hostile input -------------------------------------------------------------

// Every code line (comments removed: // to the end of the line, /* .. */
// within it) must be free of the payload.
static void assert_not_in_code(const char *src, const char *payload) {
  const char *line = src;
  while (*line) {
    size_t len = strcspn(line, "\n");
    char buf[4096];
    size_t code = 0;
    for (size_t i = 0; i < len && code + 1 < sizeof buf; i++) {
      if (line[i] == '/' && i + 1 < len && line[i + 1] == '/') break;
      if (line[i] == '/' && i + 1 < len && line[i + 1] == '*') {
        const char *end = strstr(line + i + 2, "*/");
        if (!end || end >= line + len) break;
        i = (size_t)(end - line) + 1;
        continue;
      }
      buf[code++] = line[i];
    }
    buf[code] = '\0';
    if (strstr(buf, payload)) fail_msg("payload '%s' reached code: %s", payload, buf);
    for (size_t i = 0; i < len; i++) {
      unsigned char ch = (unsigned char)line[i];
      if (ch < 0x20 || ch > 0x7e) fail_msg("non-printable byte 0x%02x in output", ch);
    }
    if (len && line[len - 1] == '\\') fail_msg("line ends with a backslash: %.*s", (int)len, line);
    line += len + (line[len] == '\n');
  }
}

static void test_injection_is_neutralized(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  fx_cfg c = small;
  c.wiring = FX_RESIDUAL;
  bc_graph *g = fx_build(ctx, &c);
  assert_non_null(g);
  // Param names: a comment terminator, a newline, a line splice, a trigraph
  // splice, non-ASCII, quotes; and two names that mangle alike.
  g->params[0].name = "evil */ int evil0; /*";
  g->params[1].name = "x\nint evil1;";
  g->params[2].name = "y\\";
  g->params[3].name = "z?" "?/";
  g->params[4].name = "caf\xc3\xa9.weight";
  g->params[5].name = "a.b";
  g->params[6].name = "a_b";
  g->params[7].name = "\"); int evil7; //";
  g->vals[1].name = "v\\\nint evil2;";
  g->path = "dir/evil\\\nint evil3;.blk";
  static const bc_src evil_src = {"p\nint evil4;\\", "", 0};
  g->nodes[0].loc.src = &evil_src;
  g->nodes[1].fused_from = "*/ int evil5; /* \\";
  g->dims[0].name = "B; int evil6";
  assert_int_equal(bcO_run_until(g, NULL), BC_OK);
  char *src = emit(ctx, g, false, false);
  for (int k = 0; k <= 7; k++) {
    char p[16];
    snprintf(p, sizeof p, "evil%d", k);
    assert_not_in_code(src, p);
  }
  assert_not_in_code(src, "?" "?/");
  // Unsafe names and the colliding pair are members p<index>; safe ones are
  // named after the parameter.  No macros: the JIT reads the struct too.
  assert_null(strstr(src, "#define W_"));
  assert_null(strstr(src, "a_b;"));
  assert_non_null(strstr(src, "  const float *p5; /* \"a.b\" "));
  assert_non_null(strstr(src, "  const float *p6; /* \"a_b\" "));
  assert_non_null(strstr(src, "  const float *layers_0_linear2_weight; /* \"layers.0.linear2.weight\" "));
  assert_non_null(strstr(src, "w->layers_0_linear2_weight"));
  assert_null(strstr(src, "caf;"));
  assert_null(strstr(src, "DIM_B"));
  compiles_everywhere(src);
  bc_ctx_free(ctx);
}

static void test_bad_model_name_rejected(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g = planned(ctx, &small);
  const char *bad[] = {"a b", "x(){}int y", "1abc", "", "caf\xc3\xa9"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    g->model = bad[i];
    bc_emit_opts o = {0};
    assert_null(bcE_emit_c(ctx, g, &o));
  }
  assert_non_null(strstr(errs.buf, "model name is not a C identifier"));
  bc_ctx_free(ctx);
}

// Planner bugs must become errors, not out-of-bounds code.
static void test_bad_plans_rejected(void **state) {
  (void)state;
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_emit_opts o = {0};
  bc_graph *g = fx_build(ctx, &small);
  assert_null(bcE_emit_c(ctx, g, &o));  // not planned
  assert_non_null(strstr(errs.buf, "planned"));

  g = planned(ctx, &small);
  int64_t end = 0;  // the last value now sticks out of the arena
  for (int v = 0; v < g->nvals; v++)
    if (g->vals[v].offset >= 0 && g->vals[v].first_use >= 0)
      end = fmax(end, g->vals[v].offset + bc_shape_numel(&g->vals[v].shape));
  g->arena_floats = end - 1;
  assert_null(bcE_emit_c(ctx, g, &o));
  assert_non_null(strstr(errs.buf, "outside"));

  g = planned(ctx, &small);
  g->nodes[0].nscratch = 1;  // attention without its score buffer
  assert_null(bcE_emit_c(ctx, g, &o));
  assert_non_null(strstr(errs.buf, "scratch"));

  g = planned(ctx, &small);
  g->params[0].shape.d[0] = 3;  // in_proj_weight too small for the GEMM
  assert_null(bcE_emit_c(ctx, g, &o));
  bc_ctx_free(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gemm_calls_with_constant_strides),
      cmocka_unit_test(test_many_rows_stay_on_cblas),
      cmocka_unit_test(test_causal_row_blocks),
      cmocka_unit_test(test_float_literals_exact),
      cmocka_unit_test(test_compiles_warning_free),
      cmocka_unit_test(test_prototypes_match_runtime_header),
      cmocka_unit_test(test_step_last_compiles),
      cmocka_unit_test(test_profile_and_gemm_only),
      cmocka_unit_test(test_injection_is_neutralized),
      cmocka_unit_test(test_io_graph_code),
      cmocka_unit_test(test_io_names_are_the_graphs),
      cmocka_unit_test(test_hostile_io_names),
      cmocka_unit_test(test_header_name_collisions),
      cmocka_unit_test(test_oversized_pack_and_cache_degrade),
      cmocka_unit_test(test_layer_loop_residual),
      cmocka_unit_test(test_no_loop_no_layer_function),
      cmocka_unit_test(test_layer_loop_differing_ends),
      cmocka_unit_test(test_layer_params_out_of_order_fall_back),
      cmocka_unit_test(test_layer_notes),
      cmocka_unit_test(test_bad_model_name_rejected),
      cmocka_unit_test(test_bad_plans_rejected),
  };
  const struct CMUnitTest long_tests[] = {
      cmocka_unit_test(test_compiles_warning_free_all),
      cmocka_unit_test(test_io_graph_code_fixed),
      cmocka_unit_test(test_hostile_io_names_all_roles),
      cmocka_unit_test(test_header_name_collisions_all),
  };
  return tu_run_tiers(tests, long_tests);
}
