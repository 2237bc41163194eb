// test_weights_c.c — `blockc emit --weights-c` (issue 25, "Embedded"): the
// weights as const C arrays.  A vendored program built with the pair, the
// weights file and the runtime (-DBLOCKC_NO_BLAS: no OpenBLAS, no file
// read for the weights) checks that every embedded array holds exactly the
// floats `blockc weights` writes for the same seed (bit for bit), runs the
// model on pre_ln_embedded's weights, and its output matches `blockc run`
// on the same seed (the interpreter; float vs double summation: 1e-4).
// Then --weights FILE, and the usage error for --weights without it.
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blockc_rt.h"

static const char *PROG =
    "#include <stdio.h>\n#include <string.h>\n#include \"pre_ln.h\"\n"
    "int main(int argc, char **argv) {\n"
    "  (void)argc;\n"
    "  pre_ln_slots w; void *storage; char err[512];\n"
    "  if (bcrt_st_load(argv[1], pre_ln_params, PRE_LN_NPARAMS, w.slots, &storage, err, sizeof err)) {\n"
    "    puts(err); return 2; }\n"
    "  for (int i = 0; i < PRE_LN_NPARAMS; i++) {\n"
    "    long n = 1;\n"
    "    for (int k = 0; k < pre_ln_params[i].rank; k++) n *= pre_ln_params[i].shape[k];\n"
    "    if (memcmp(w.slots[i], pre_ln_embedded.slots[i], (size_t)n * sizeof(float))) {\n"
    "      printf(\"param %d differs\\n\", i); return 3; }\n"
    "  }\n"
    "  if (pre_ln_embedded.w.packed) return 4;\n"
    "  static float x[1 * 8 * 32], y[1 * 8 * 32];\n"
    "  for (int i = 0; i < 8 * 32; i++) x[i] = (float)((i * 37) % 23) / 11.0f - 1.0f;\n"
    "  void *ws = bcrt_aligned_alloc(PRE_LN_WORKSPACE_ALIGN, PRE_LN_WORKSPACE_BYTES);\n"
    "  pre_ln_io io = {0};\n"
    "  io.x = x; io.y = y; io.T = 8;\n"
    "  if (!ws || pre_ln_run(&pre_ln_embedded.w, &io, ws) != PRE_LN_OK) return 5;\n"
    "  long shp[3] = {1, 8, 32};\n"
    "  if (bcrt_npy_write(argv[2], x, shp, 3, err, sizeof err) || bcrt_npy_write(argv[3], y, shp, 3, err, sizeof err)) {\n"
    "    puts(err); return 6; }\n"
    "  bcrt_aligned_free(ws); bcrt_st_free(storage);\n"
    "  puts(\"embedded ok\");\n"
    "  return 0;\n"
    "}\n";

#define DIMS "-D", "D=32", "-D", "N=2", "-D", "F=64", "-D", "H=4", "-D", "T=8"

// The files of one build in dir: the program's main.c and binary, x.npy,
// its y.npy and the reference's y2.npy, the pair's .c and weights .c, and
// -Idir; ix and oy the --input / --output arguments for x and y2.
typedef struct {
  char prog[600], exe[600], x[600], y[600], y2[600], c[600], w[600], inc[600], ix[700], oy[700];
} wpaths;

static void wpaths_in(wpaths *p, const char *dir) {
  snprintf(p->prog, sizeof p->prog, "%s/main.c", dir);
  snprintf(p->exe, sizeof p->exe, "%s/prog", dir);
  snprintf(p->x, sizeof p->x, "%s/x.npy", dir);
  snprintf(p->y, sizeof p->y, "%s/y.npy", dir);
  snprintf(p->y2, sizeof p->y2, "%s/y2.npy", dir);
  snprintf(p->c, sizeof p->c, "%s/pre_ln.c", dir);
  snprintf(p->w, sizeof p->w, "%s/pre_ln_weights.c", dir);
  snprintf(p->inc, sizeof p->inc, "-I%s", dir);
  snprintf(p->ix, sizeof p->ix, "x=%s", p->x);
  snprintf(p->oy, sizeof p->oy, "y=%s", p->y2);
}

// Runs argv (a compiler or a built program), failing with its output
// unless it exits 0 (and prints want, when given).
static void spawn_ok(char *const *argv, const char *want) {
  static char out[1 << 16], err[1 << 14];
  int st = tu_spawn(argv, out, sizeof out, err, sizeof err);
  if (st != 0 || (want && !strstr(out, want))) {
    print_error("%s: exit %d\n%s\n%s\n", argv[0], st, out, err);
    fail();
  }
}

// max |a - b| / max |b| over two .npy files of the same size.
static double npy_rel_diff(const char *pa, const char *pb) {
  float *a = NULL, *b = NULL;
  long sa[BCRT_NPY_MAX_RANK], sb[BCRT_NPY_MAX_RANK];
  int ra, rb;
  char e[512];
  assert_int_equal(bcrt_npy_read(pa, &a, sa, &ra, e, sizeof e), BCRT_OK);
  assert_int_equal(bcrt_npy_read(pb, &b, sb, &rb, e, sizeof e), BCRT_OK);
  assert_int_equal(ra, rb);
  long n = 1;
  for (int k = 0; k < ra; k++) assert_int_equal(sa[k], sb[k]), n *= sa[k];
  double worst = 0, big = tu_max_abs(b, (size_t)n);
  for (long i = 0; i < n; i++) worst = fmax(worst, fabs((double)a[i] - (double)b[i]));
  assert_true(big > 0.1);  // a real output, not zeros
  bcrt_free(a);
  bcrt_free(b);
  return worst / big;
}

static void build_and_check(const char *dir, const char *weights) {
  wpaths p;
  wpaths_in(&p, dir);
  tu_write_bytes(p.prog, PROG, strlen(PROG));
  char *cc[] = {"/usr/bin/cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-DBLOCKC_NO_BLAS", p.inc, "-Iruntime",
                p.prog, p.c, p.w, "runtime/blockc_rt.c", "-lm", "-lpthread", "-o", p.exe, NULL};
  spawn_ok(cc, NULL);
  char *run[] = {p.exe, (char *)weights, p.x, p.y, NULL};
  spawn_ok(run, "embedded ok");
  tu_run_result *r = malloc(sizeof *r);
  TU_RUN(r, "run", "graphs/pre_ln.blk", DIMS, "--weights", weights, "--input", p.ix, "--output", p.oy, "--backend",
         "interp");
  tu_expect_run(r, 0, NULL, NULL);
  free(r);
  assert_true(npy_rel_diff(p.y, p.y2) < 1e-4);
}

static void test_embedded_program(void **state) {
  (void)state;
  if (!tu_have("cc")) {
    print_error("no C compiler: this test needs cc\n");
    fail();
  }
  char dir[512], w[600];
  tu_mktmpdir(dir, sizeof dir, "weights-c");
  snprintf(w, sizeof w, "%s/w.safetensors", dir);
  tu_run_result *r = malloc(sizeof *r);
  TU_RUN(r, "weights", "graphs/pre_ln.blk", DIMS, "--seed", "3", "-o", w);
  tu_expect_run(r, 0, NULL, NULL);
  TU_RUN(r, "emit", "graphs/pre_ln.blk", DIMS, "-o", dir, "--weights-c", "--seed", "3");
  tu_expect_run(r, 0, "pre_ln_weights.c", NULL);
  build_and_check(dir, w);
  // from a weights file: a different seed's weights, embedded and compared with that file
  TU_RUN(r, "weights", "graphs/pre_ln.blk", DIMS, "--seed", "9", "-o", w);
  tu_expect_run(r, 0, NULL, NULL);
  TU_RUN(r, "emit", "graphs/pre_ln.blk", DIMS, "-o", dir, "--weights-c", "--weights", w);
  tu_expect_run(r, 0, NULL, NULL);
  build_and_check(dir, w);
  free(r);
  assert_int_equal(tu_rm_rf(dir), 0);
}

// --weight-dtype q8_0 (and f16): the weights file holds the packed copy (the
// matrices' slots NULL), the program runs on it with nothing loaded, and
// matches the interpreter on the rounded weights of the same seed.  Built
// with plain -O2 (no -march): f16's portable conversion, not vcvtph2ps.
static const char *PROG_Q =
    "#include <stdio.h>\n#include \"pre_ln.h\"\n"
    "int main(int argc, char **argv) {\n"
    "  (void)argc;\n"
    "  int null = 0;\n"
    "  for (int i = 0; i < PRE_LN_NPARAMS; i++) null += !pre_ln_embedded.slots[i];\n"
    "  if (!pre_ln_embedded.w.packed || null == 0 || null == PRE_LN_NPARAMS) return 4;\n"
    "  if (PRE_LN_WEIGHT_TYPE != WANT_WT) return 7;\n"
    "  static float x[1 * 8 * 32], y[1 * 8 * 32];\n"
    "  char err[512];\n"
    "  for (int i = 0; i < 8 * 32; i++) x[i] = (float)((i * 37) % 23) / 11.0f - 1.0f;\n"
    "  void *ws = bcrt_aligned_alloc(PRE_LN_WORKSPACE_ALIGN, PRE_LN_WORKSPACE_BYTES);\n"
    "  pre_ln_io io = {0};\n"
    "  io.x = x; io.y = y; io.T = 8;\n"
    "  if (!ws || pre_ln_run(&pre_ln_embedded.w, &io, ws) != PRE_LN_OK) return 5;\n"
    "  long shp[3] = {1, 8, 32};\n"
    "  if (bcrt_npy_write(argv[1], x, shp, 3, err, sizeof err) || bcrt_npy_write(argv[2], y, shp, 3, err, sizeof err)) {\n"
    "    puts(err); return 6; }\n"
    "  bcrt_aligned_free(ws);\n"
    "  printf(\"embedded ok: %d matrices in the packed copy only\\n\", null);\n"
    "  return 0;\n"
    "}\n";

static void embedded_case(const char *dtype, const char *want_wt, double max_ratio) {
  char dir[512];
  tu_mktmpdir(dir, sizeof dir, "weights-c-q8");
  wpaths p;
  wpaths_in(&p, dir);
  tu_run_result *r = malloc(sizeof *r);
  TU_RUN(r, "emit", "graphs/pre_ln.blk", DIMS, "-o", dir, "--weights-c", "--seed", "3");
  tu_expect_run(r, 0, "pre_ln_weights.c", NULL);
  size_t f32_len, q8_len;
  free(tu_slurp(p.w, &f32_len));
  TU_RUN(r, "emit", "graphs/pre_ln.blk", DIMS, "-o", dir, "--weights-c", "--seed", "3", "--weight-dtype", dtype);
  tu_expect_run(r, 0, "pre_ln_weights.c", NULL);
  char *text = tu_slurp(p.w, &q8_len);
  assert_non_null(text);
  assert_non_null(strstr(text, "pre_ln_packed_copy"));
  free(text);
  // the text of about 1.1 (q8_0) or 2 (f16) bytes a matrix weight, not a float's
  if (!((double)q8_len < max_ratio * (double)f32_len))
    print_error("%s: %zu bytes of C against f32's %zu\n", dtype, q8_len, f32_len);
  assert_true((double)q8_len < max_ratio * (double)f32_len);
  tu_write_bytes(p.prog, PROG_Q, strlen(PROG_Q));
  char want[64];
  snprintf(want, sizeof want, "-DWANT_WT=%s", want_wt);
  char *cc[] = {"/usr/bin/cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-DBLOCKC_NO_BLAS", want, p.inc, "-Iruntime",
                p.prog, p.c, p.w, "runtime/blockc_rt.c", "-lm", "-lpthread", "-o", p.exe, NULL};
  spawn_ok(cc, NULL);
  char *run[] = {p.exe, p.x, p.y, NULL};
  spawn_ok(run, "embedded ok");
  TU_RUN(r, "run", "graphs/pre_ln.blk", DIMS, "--seed", "3", "--weight-dtype", dtype, "--input", p.ix, "--output",
         p.oy, "--backend", "interp");
  tu_expect_run(r, 0, NULL, NULL);
  free(r);
  assert_true(npy_rel_diff(p.y, p.y2) < 1e-4);
  assert_int_equal(tu_rm_rf(dir), 0);
}

static void test_embedded_q8_0(void **state) {
  (void)state;
  embedded_case("q8_0", "BCRT_WT_Q8_0", 0.5);
  embedded_case("f16", "BCRT_WT_F16", 0.8);  // measured 0.70
}

// -DBLOCKC_FLOAT_ONLY (single-precision FPUs): the runtime's norms, RoPE and
// sinusoid in float.  `blockc run --backend aot` with the flag in
// $BLOCKC_CFLAGS against the interpreter (double), for LayerNorm (pre_ln),
// RMSNorm + RoPE (llama_lm) and the sinusoid (the experiment's LM): within
// 2e-4 of the largest output (measured: docs/weight-types.md, "Embedded");
// and the default build, which takes them in double, for comparison.
static double aot_vs_interp(const char *const *args, int nargs, const char *dir, const char *flags) {
  char cache[600], ya[600], yi[700], oa[700], oi[700];
  snprintf(cache, sizeof cache, "%s/cache", dir);
  snprintf(ya, sizeof ya, "%s/ya.npy", dir);
  snprintf(yi, sizeof yi, "%s/yi.npy", dir);
  snprintf(oa, sizeof oa, "%s", ya);
  snprintf(oi, sizeof oi, "%s", yi);
  setenv("BLOCKC_CACHE_DIR", cache, 1);
  setenv("BLOCKC_CFLAGS", flags, 1);
  const char *av[40];
  tu_run_result *r = malloc(sizeof *r);
  for (int pass = 0; pass < 2; pass++) {
    int n = 0;
    av[n++] = "run";
    for (int i = 0; i < nargs; i++) av[n++] = args[i];
    av[n++] = "--backend";
    av[n++] = pass ? "interp" : "aot";
    av[n++] = "--output";
    av[n++] = pass ? oi : oa;
    av[n] = NULL;
    tu_run(r, av);
    tu_expect_run(r, 0, NULL, NULL);
  }
  free(r);
  unsetenv("BLOCKC_CFLAGS");
  return npy_rel_diff(ya, yi);
}

static void test_float_only(void **state) {
  (void)state;
  char dir[512];
  tu_mktmpdir(dir, sizeof dir, "float-only");
  static const char *const pre_ln[] = {"graphs/pre_ln.blk", DIMS, "--seed", "4"};
  static const char *const llama[] = {"graphs/llama_lm.blk", "-D", "D=64", "-D", "H=4", "-D", "KV=2", "-D", "F=96",
                                      "-D", "N=2", "-D", "V=50", "--length", "T=200", "--seed", "4"};
  static const char *const sinus[] = {"experiments/residual/lm_pre_ln.blk", "-D", "D=32", "-D", "H=4", "-D", "N=2",
                                      "--length", "T=120", "--seed", "4"};
  const struct {
    const char *name;
    const char *const *args;
    int n;
  } cases[] = {{"pre_ln (LayerNorm)", pre_ln, 11}, {"llama_lm (RMSNorm, RoPE)", llama, 17},
               {"lm_pre_ln (sinusoid)", sinus, 11}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    double f = aot_vs_interp(cases[i].args, cases[i].n, dir, "-O2 -DBLOCKC_FLOAT_ONLY");
    double d = aot_vs_interp(cases[i].args, cases[i].n, dir, "-O2");
    printf("  %-26s max |aot - interp| / max |interp|: -DBLOCKC_FLOAT_ONLY %.2e, default %.2e\n",
           cases[i].name, f, d);
    assert_true(f < 2e-4);
    assert_true(d < 2e-4);
  }
  assert_int_equal(tu_rm_rf(dir), 0);
}

// examples/firmware/main.c: static workspace, q8_0 weights in flash, the
// kernels-only runtime (-DBLOCKC_NO_IO -DBLOCKC_NO_BLAS -DBLOCKC_FLOAT_ONLY)
// on the host against the interpreter; and cross-compiled for a Cortex-M4F
// when clang has the target.
static void test_firmware_example(void **state) {
  (void)state;
  char dir[512];
  tu_mktmpdir(dir, sizeof dir, "firmware");
  wpaths p;
  wpaths_in(&p, dir);
  char *exe = p.exe, *xp = p.x, *yp = p.oy, *inc = p.inc, *cfile = p.c, *wfile = p.w, *ix = p.ix;
  tu_run_result *r = malloc(sizeof *r);
  TU_RUN(r, "emit", "graphs/pre_ln.blk", DIMS, "-o", dir, "--weights-c", "--seed", "3", "--weight-dtype", "q8_0");
  tu_expect_run(r, 0, NULL, NULL);
  static char out[1 << 16], err[8192];
  char *cc[] = {"/usr/bin/cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-DBLOCKC_NO_IO", "-DBLOCKC_NO_BLAS",
                "-DBLOCKC_FLOAT_ONLY", inc, "-Iruntime", "examples/firmware/main.c", cfile, wfile,
                "runtime/blockc_rt.c", "-lm", "-o", exe, NULL};
  spawn_ok(cc, NULL);
  char *run[] = {exe, NULL};
  assert_int_equal(tu_spawn(run, out, sizeof out, err, sizeof err), 0);
  static float x[8 * 32], y[8 * 32];
  for (int i = 0; i < 8 * 32; i++) x[i] = (float)((i * 37) % 23) / 11.0f - 1.0f;
  long shp[3] = {1, 8, 32};
  char e[512];
  assert_int_equal(bcrt_npy_write(xp, x, shp, 3, e, sizeof e), BCRT_OK);
  int n = 0;
  for (char *c = out, *q; n < 8 * 32 && *c; c = q, n++) {
    y[n] = strtof(c, &q);
    if (q == c) break;
  }
  assert_int_equal(n, 8 * 32);
  TU_RUN(r, "run", "graphs/pre_ln.blk", DIMS, "--seed", "3", "--weight-dtype", "q8_0", "--input", ix, "--output",
         yp, "--backend", "interp");
  tu_expect_run(r, 0, NULL, NULL);
  float *b = NULL;
  long sb[BCRT_NPY_MAX_RANK];
  int rb;
  assert_int_equal(bcrt_npy_read(p.y2, &b, sb, &rb, e, sizeof e), BCRT_OK);
  // q8_0 products quantize their inputs: an activation within float
  // rounding of a rounding boundary can land one code step apart in the
  // float build and the double interpreter (test_wdtype.c's Q_TOL), so:
  // at most 3e-2 of the largest output, and 6 of the 8 positions to 1e-4
  double worst = 0, mx = tu_max_abs(b, 8 * 32);
  int close = 0;
  for (int t = 0; t < 8; t++) {
    double wt = 0;
    for (int i = 32 * t; i < 32 * t + 32; i++) wt = fmax(wt, fabs((double)y[i] - (double)b[i]));
    worst = fmax(worst, wt);
    close += wt < 1e-4 * mx;
  }
  if (!(worst < 3e-2 * mx && close >= 6))
    fail_msg("firmware vs interpreter: %.3g of the largest output, %d of 8 positions to 1e-4", worst / mx, close);
  bcrt_free(b);
  // Cortex-M4F objects (no main), when clang has the target
  char probe[700];
  snprintf(probe, sizeof probe, "%s/probe.o", dir);
  char *pc[] = {"/usr/bin/clang", "--target=thumbv7em-none-eabihf", "-ffreestanding", "-x", "c", "-c",
                "/dev/null", "-o", probe, NULL};
  if (!tu_have("clang") || tu_spawn(pc, out, sizeof out, err, sizeof err) != 0) {
    printf("  (no clang with the thumbv7em-none-eabihf target: the Cortex-M4F build not checked)\n");
  } else {
    const char *srcs[] = {"examples/firmware/main.c", cfile, wfile, "runtime/blockc_rt.c"};
    for (int i = 0; i < 4; i++) {
      char obj[700];
      snprintf(obj, sizeof obj, "%s/m%d.o", dir, i);
      char *xc[] = {"/usr/bin/clang", "--target=thumbv7em-none-eabihf", "-mcpu=cortex-m4", "-mfloat-abi=hard",
                    "-ffreestanding", "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-DBLOCKC_NO_IO",
                    "-DBLOCKC_NO_BLAS", "-DBLOCKC_FLOAT_ONLY", "-DFIRMWARE_NO_MAIN", inc, "-Iruntime", "-c",
                    (char *)srcs[i], "-o", obj, NULL};
      spawn_ok(xc, NULL);
    }
    printf("  the firmware example builds for thumbv7em-none-eabihf (Cortex-M4F)\n");
  }
  free(r);
  assert_int_equal(tu_rm_rf(dir), 0);
}

static void test_usage(void **state) {
  (void)state;
  char dir[512];
  tu_mktmpdir(dir, sizeof dir, "weights-c-bad");
  tu_run_result *r = malloc(sizeof *r);
  TU_RUN(r, "emit", "graphs/pre_ln.blk", "-o", dir, "--weights", "tests/bad/ln.blk");
  tu_expect_run(r, 2, NULL, "--weights goes with --weights-c");
  // a weights file that does not fit: nothing is written
  TU_RUN(r, "emit", "graphs/pre_ln.blk", DIMS, "-o", dir, "--weights-c", "--weights", "tests/bad/st_valid.safetensors");
  assert_int_not_equal(r->status, 0);
  char p[700];
  snprintf(p, sizeof p, "%s/pre_ln.c", dir);
  assert_false(tu_exists(p));
  free(r);
  assert_int_equal(tu_rm_rf(dir), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_embedded_program),
      cmocka_unit_test(test_embedded_q8_0),
      cmocka_unit_test(test_float_only),
      cmocka_unit_test(test_firmware_example),
      cmocka_unit_test(test_usage),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
