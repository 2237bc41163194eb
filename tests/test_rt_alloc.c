// test_rt_alloc.c — a forward allocates nothing (issue 19).
//
// The vendored pair of a model (bcA_generate + bcA_write_pair) is built into
// a small program with runtime/blockc_rt.c, once with OpenBLAS and once with
// -DBLOCKC_NO_BLAS (the portable GEMM, which packs into the workspace's
// tail).  The program defines malloc, calloc, realloc, posix_memalign,
// aligned_alloc and memalign itself (forwarding to glibc's __libc_*), so it
// sees every allocation, OpenBLAS's included: after one warm-up call (the
// first OpenBLAS call sets up its buffers and threads), three calls of
// <model>_run_abi must make none.  Both builds must also agree on the
// outputs (the packed-into-the-workspace GEMM computes the same products).
//
// Each allocation is attributed to the object that called the allocator
// (dladdr of the return address): ours (the program: generated code and
// runtime) must be zero everywhere.  OpenBLAS's own are counted apart: on
// AVX-512 machines OpenBLAS 0.3.21 picks its SkylakeX small-matrix sgemm
// kernel (sgemm_small_kernel_b0_nn_SKYLAKEX), which mallocs on every call
// for the M = 80 products; with OPENBLAS_CORETYPE=Haswell (the kernel
// AVX2 machines run) the same build must then allocate nothing at all.
//
// Models: tiny at T = 5 (10 rows: the small-M kernel on packed weights) and
// T = 40 (80 rows: every product through cblas_sgemm), each with and without
// the packed copy; decoder_pre_ln (cross-attention, lengths, run-time dims).
#define _GNU_SOURCE
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aot.h"

// The program, with %1$s the model's prefix and %2$s its macro prefix.
static const char prog[] =
    "#define _GNU_SOURCE\n"
    "#include <stddef.h>\n#include <stdio.h>\n#include <string.h>\n#include <math.h>\n#include <dlfcn.h>\n"
    "#include \"%1$s.h\"\n"
    "void *__libc_malloc(size_t n);\nvoid *__libc_calloc(size_t a, size_t b);\n"
    "void *__libc_realloc(void *p, size_t n);\nvoid *__libc_memalign(size_t a, size_t n);\n"
    "void __libc_free(void *p);\n"
    "/* The counter: malloc takes no context, so this test program keeps it global. */\n"
    "static int counting;\nstatic long calls, blas_calls;\n"
    "/* Who called the allocator: OpenBLAS, or anything else (ours). */\n"
    "static void count(void *ra) {\n"
    "  if (!counting) return;\n"
    "  Dl_info d;\n"
    "  if (dladdr(ra, &d) && d.dli_fname && strstr(d.dli_fname, \"libopenblas\")) blas_calls++;\n"
    "  else calls++;\n}\n"
    "#define COUNT count(__builtin_return_address(0))\n"
    "void *malloc(size_t n) { COUNT; return __libc_malloc(n); }\n"
    "void *calloc(size_t a, size_t b) { COUNT; return __libc_calloc(a, b); }\n"
    "void *realloc(void *p, size_t n) { COUNT; return __libc_realloc(p, n); }\n"
    "void free(void *p) { __libc_free(p); }\n"
    "int posix_memalign(void **p, size_t a, size_t n) {\n"
    "  COUNT; *p = __libc_memalign(a, n); return *p ? 0 : 12; }\n"
    "void *aligned_alloc(size_t a, size_t n) { COUNT; return __libc_memalign(a, n); }\n"
    "void *memalign(size_t a, size_t n) { COUNT; return __libc_memalign(a, n); }\n"
    "static float *fill(long n, unsigned *s, float scale) {\n"
    "  float *x = malloc((size_t)(n ? n : 1) * sizeof *x);\n"
    "  for (long i = 0; i < n; i++) { *s = *s * 1664525u + 1013904223u;\n"
    "    x[i] = scale * ((float)(*s >> 8) / 8388608.0f - 1.0f); }\n"
    "  return x;\n}\n"
    "int main(int argc, char **argv) {\n"
    "  unsigned s = 7;\n"
    "  %1$s_slots sl;\n"
    "  for (int i = 0; i < %2$s_NPARAMS; i++) {\n"
    "    long n = 1;\n"
    "    for (int r = 0; r < %1$s_params[i].rank; r++) n *= %1$s_params[i].shape[r];\n"
    "    sl.slots[i] = fill(n, &s, 0.3f);\n"
    "  }\n"
    "  sl.w.packed = NULL;\n"
    "  if (argc > 1 && %2$s_PACKED_FLOATS) {\n"
    "    float *p = bcrt_aligned_alloc(%2$s_PACKED_ALIGN, %2$s_PACKED_BYTES);\n"
    "    %1$s_pack(&sl.w, p);\n    sl.w.packed = p;\n  }\n"
    "  void *ws = bcrt_aligned_alloc(%2$s_WORKSPACE_ALIGN, %2$s_WORKSPACE_BYTES);\n"
    "  enum { NIO = %2$s_NINPUTS + %2$s_NOUTPUTS };\n"
    "  void *io[NIO];\n  long numel[NIO], rt[%2$s_NRT ? %2$s_NRT : 1];\n"
    "  for (int i = 0; i < %2$s_NRT; i++) rt[i] = %1$s_rt_info[i].bound;\n"
    "  for (int i = 0; i < NIO; i++) {\n"
    "    const bcrt_io_info *f = &%1$s_io_info[i];\n"
    "    numel[i] = 1;\n"
    "    for (int r = 0; r < f->rank; r++) numel[i] *= f->dims[r];\n"
    "    io[i] = f->kind == BCRT_IO_LENGTHS ? NULL : fill(numel[i], &s, 1.0f);\n"
    "  }\n"
    "  if (%1$s_run_abi(&sl.w, io, %2$s_NRT ? rt : NULL, ws)) return 3;  /* warm-up */\n"
    "  counting = 1;\n"
    "  for (int r = 0; r < 3; r++)\n"
    "    if (%1$s_run_abi(&sl.w, io, %2$s_NRT ? rt : NULL, ws)) return 3;\n"
    "  counting = 0;\n"
    "  double sum = 0;\n"
    "  for (int i = %2$s_NINPUTS; i < NIO; i++)\n"
    "    for (long j = 0; j < numel[i]; j++) sum += fabs(((float *)io[i])[j]);\n"
    "  printf(\"%%ld %%ld %%.9g\\n\", calls, blas_calls, sum);\n"
    "  return 0;\n}\n";

// Runs argv (cc through /usr/bin/env, which searches PATH); 0 on success,
// else prints what it wrote.
static int run(char *const *argv, char *out, size_t n) {
  char err[8192];
  int rc = tu_spawn(argv, out, n, err, sizeof err);
  if (rc) print_error("%s: exit %d\n%s%s\n", argv[0], rc, out, err);
  return rc;
}

// Builds dir/<model>_{blas,noblas} from the pair and the runtime objects
// (rtdir/rt_{blas,noblas}.o, compiled on first use).
static void build(const char *dir, const char *rtdir, const char *model) {
  char src[400], c[400], main_c[400];
  snprintf(c, sizeof c, "%s/%s.c", dir, model);
  snprintf(main_c, sizeof main_c, "%s/main_%s.c", dir, model);
  char up[64];
  size_t k = 0;
  for (; model[k] && k + 1 < sizeof up; k++) up[k] = (char)(model[k] >= 'a' && model[k] <= 'z' ? model[k] - 32 : model[k]);
  up[k] = '\0';
  FILE *f = fopen(main_c, "w");
  assert_non_null(f);
  fprintf(f, prog, model, up);
  fclose(f);
  for (int nb = 0; nb <= 1; nb++) {
    char exe[400], rto[400], inc[400], out[4096];
    snprintf(exe, sizeof exe, "%s/%s_%s", dir, model, nb ? "noblas" : "blas");
    snprintf(rto, sizeof rto, "%s/rt_%s.o", rtdir, nb ? "noblas" : "blas");
    snprintf(inc, sizeof inc, "-I%s", dir);
    snprintf(src, sizeof src, "%s", nb ? "-DBLOCKC_NO_BLAS" : "-DBLOCKC_WITH_BLAS");
    if (access(rto, R_OK)) {
      char *cc_rt[] = {"/usr/bin/env", "cc", "-std=c99", "-O1", src, "-Iruntime", "-c", "runtime/blockc_rt.c",
                       "-o", rto, NULL};
      assert_int_equal(run(cc_rt, out, sizeof out), 0);
    }
    char *cc[] = {"/usr/bin/env", "cc", "-std=c99", "-O1", src, inc, "-Iruntime", c, main_c, rto,
                  nb ? "-lm" : "-lopenblas", "-lm", "-lpthread", "-ldl", NULL};
    char *argv[20];
    int n = 0;
    for (int i = 0; cc[i]; i++) argv[n++] = cc[i];
    argv[n++] = "-o";
    argv[n++] = exe;
    argv[n] = NULL;
    assert_int_equal(run(argv, out, sizeof out), 0);
  }
}

// Runs one build; returns our allocations, OpenBLAS's in *blas, the sum in *sum.
static long run_counted(const char *exe, bool packed, long *blas, double *sum) {
  char out[4096];
  char *argv[] = {(char *)exe, packed ? "packed" : NULL, NULL};
  long calls;
  assert_int_equal(run(argv, out, sizeof out), 0);
  assert_int_equal(sscanf(out, "%ld %ld %lf", &calls, blas, sum), 3);
  return calls;
}

// Runs both builds (packed copy or not) and checks: no allocation of ours,
// none of OpenBLAS's with its Haswell kernels, the same sums.
static void check(const char *dir, const char *model, bool packed) {
  double sum[2];
  for (int nb = 0; nb <= 1; nb++) {
    char exe[400];
    snprintf(exe, sizeof exe, "%s/%s_%s", dir, model, nb ? "noblas" : "blas");
    long blas, calls = run_counted(exe, packed, &blas, &sum[nb]);
    const char *how = nb ? "-DBLOCKC_NO_BLAS" : "OpenBLAS";
    if (calls)
      fail_msg("%s (%s, %s): %ld allocations by blockc's code in 3 calls of %s_run_abi", model,
               how, packed ? "packed" : "unpacked", calls, model);
    if (blas) {
      // OpenBLAS's own (its SkylakeX small-matrix kernel): say so, then
      // hold the same build to zero with the kernels AVX2 machines run.
      print_message("note: %s (%s, %s): OpenBLAS itself allocated %ld times in 3 calls "
                    "(its AVX-512 small-matrix kernel); rerun with OPENBLAS_CORETYPE=Haswell\n",
                    model, how, packed ? "packed" : "unpacked", blas);
      double s2;
      assert_int_equal(setenv("OPENBLAS_CORETYPE", "Haswell", 1), 0);
      calls = run_counted(exe, packed, &blas, &s2);
      unsetenv("OPENBLAS_CORETYPE");
      if (calls || blas)
        fail_msg("%s (%s, %s, OPENBLAS_CORETYPE=Haswell): %ld + %ld (OpenBLAS) allocations in 3 "
                 "calls of %s_run_abi", model, how, packed ? "packed" : "unpacked", calls, blas,
                 model);
    }
  }
  if (!(isfinite(sum[0]) && fabs(sum[0] - sum[1]) <= 1e-4 * fabs(sum[0])))
    fail_msg("%s: sum |y| %.9g with OpenBLAS, %.9g without", model, sum[0], sum[1]);
}

static void pair(const char *dir, const char *graph, const bc_define *defs, int ndefs) {
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_graph *g;
  char *c, *h;
  if (tu_aot_pair(ctx, graph, defs, ndefs, false, &g, &c, &h)) fail_msg("%s", errs.buf);
  if (bcA_write_pair(ctx, dir, g->model, c, h)) fail_msg("%s", errs.buf);
  bc_ctx_free(ctx);
}

static void test_forward_allocates_nothing(void **state) {
  (void)state;
  char dir[256];
  tu_mktmpdir(dir, sizeof dir, "alloc");
  // tiny at T = 5 and T = 40 (two directories: the same model name).
  for (int big = 0; big <= 1; big++) {
    char sub[300];
    snprintf(sub, sizeof sub, "%s/tiny%d", dir, big);
    const bc_define defs[] = {{"T", big ? 40 : 5}};
    pair(sub, "graphs/tiny.blk", defs, 1);
    build(sub, dir, "tiny");
    check(sub, "tiny", true);
    check(sub, "tiny", false);
  }
  const bc_define defs[] = {{"B", 2}, {"T", 40}, {"D", 16}, {"H", 2}, {"N", 2}, {"S", 6}};
  pair(dir, "graphs/decoder_pre_ln.blk", defs, 6);
  build(dir, dir, "decoder_pre_ln");
  check(dir, "decoder_pre_ln", true);
  check(dir, "decoder_pre_ln", false);
  assert_int_equal(tu_rm_rf(dir), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_forward_allocates_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
