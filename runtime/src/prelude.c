/* blockc_rt.c — the elementwise kernels that blockc's generated code calls.
 *
 * A Transformer block is mostly matrix products (OpenBLAS does those); what
 * is left is bias + activation, residual adds, LayerNorm and softmax.  They
 * are cheap in FLOPs but touch every activation, so done badly they cost as
 * much as the GEMMs.  The JIT compiles generated code with tcc, which emits
 * scalar code, so these loops live here instead, built with gcc -O3
 * -march=native, and the JIT binds them by address.
 *
 * Everything is plain C99 written so that gcc's auto-vectoriser turns each
 * inner loop into SIMD code without -ffast-math:
 *   - no libm calls in inner loops: exp, erf and GELU are our own branch-free
 *     polynomials (the ifs are selects, so both sides are computed);
 *   - reductions (sums, maxima) go through an array of LANES partial results,
 *     because the compiler may not reorder a single float accumulator;
 *   - no `restrict`: outputs may alias inputs element for element, and gcc's
 *     runtime alias check accepts exact aliasing (it only rejects overlaps
 *     that are off by a few elements, which our contracts never allow).
 * The slow, obviously correct oracle the tests compare against (double
 * accumulation, libm) lives with the tests, in tests/rt_ref.c.
 *
 * With -DBLOCKC_NO_BLAS this file also defines cblas_sgemm, a wrapper over
 * bcrt_sgemm (a BLIS-style packed, register-blocked GEMM at the end of the
 * file), so generated code runs without OpenBLAS.  bcrt_gemm_small, also
 * there, is the weight-streaming product for few rows.
 *
 * At the end, for vendored AOT programs only: a safetensors weights loader
 * and .npy read/write (ISO C stdio, a small JSON reader of our own), so
 * this file and its header are all a user copies next to <model>.{c,h}.
 *
 * Developed as parts in runtime/src/ (prelude, vector math, kernels,
 * backward kernels, the two GEMMs, then the file readers: I/O helpers,
 * JSON, safetensors, .npy), shipped as this one file, made by
 * tools/amalgamate.sh (`make runtime`); a test fails when it is stale.
 *
 * -DBLOCKC_NO_IO builds the kernels alone, freestanding: no stdio, errno,
 * malloc or threads (the file readers and the allocating helpers are left
 * out; bcrt_sgemm without a workspace falls back to its unpacked loop).
 * Only memcpy, memmove, memset and a few libm functions (sqrt, sqrtf, pow, sin, exp, log,
 * cos) are called; they are declared here, since a freestanding target
 * has no <math.h> or <string.h>. */
#include "blockc_rt.h"

#include <float.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#ifdef BLOCKC_NO_IO
#ifndef BLOCKC_NO_THREADS
#define BLOCKC_NO_THREADS
#endif
double sqrt(double x);
float sqrtf(float x);
double pow(double x, double y);
double sin(double x);
double cos(double x);
float powf(float x, float y);
float sinf(float x);
float cosf(float x);
double exp(double x);
double log(double x);
void *memcpy(void *dst, const void *src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);
#else
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#endif

/* The few statistics and angles the forward kernels take in double — a
 * LayerNorm's slow path for huge rows, RMSNorm's mean square, RoPE's and
 * the sinusoid's angles — are bcrt_real: double by default, float with
 * -DBLOCKC_FLOAT_ONLY for single-precision FPUs (Cortex-M4F), where double
 * is done in software.  The accuracy that costs is in docs/weight-types.md
 * ("Embedded"); the losses and the optimizer keep double either way. */
#ifdef BLOCKC_FLOAT_ONLY
typedef float bcrt_real;
#define R_SQRT sqrtf
#define R_POW powf
#define R_SIN sinf
#define R_COS cosf
#else
typedef double bcrt_real;
#define R_SQRT sqrt
#define R_POW pow
#define R_SIN sin
#define R_COS cos
#endif

/* Partial results per reduction: 16 floats = two 8-wide vectors, enough
 * independent add chains to hide the FP add latency at our row widths
 * (measured: 8, 32 and 64 were no better for LayerNorm at d = 512/2048,
 * and wider trees cost more per 128-wide softmax row). */
#define LANES 16

/* a*b + c.  Where the target has FMA (gcc and clang define __FMA__ under
 * -march=native), one fused instruction: half the latency of the Horner
 * chains below, which is what bounds exp/erf throughput, and a little more
 * accurate.  Elsewhere (tcc, plain x86-64) a multiply and an add; the
 * polynomials are accurate either way.  gcc never fuses by itself in ISO C
 * mode (-std=c11 implies -ffp-contract=off). */
#if defined(__FMA__) && (defined(__GNUC__) || defined(__clang__))
#define MADD(a, b, c) __builtin_fmaf((a), (b), (c))
#else
#define MADD(a, b, c) ((a) * (b) + (c))
#endif

/* ------------------------------------------------------------------------ */
