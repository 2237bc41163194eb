// fuzz_parse.c — libFuzzer target for the whole front and middle end.
//
// Arbitrary bytes are parsed as a graph file (bcP_parse_string); when they
// parse, the full pass pipeline runs (fusion, DCE, in-place, planning), the
// plan is checked with bcM_check and C is emitted.  Nothing is compiled or
// run: a fuzzed graph may legally have D = 2^24, which the planner and the
// emitter handle symbolically but which would take gigabytes to execute.
//
// Graphs over FUZZ_MAX_NODES_MIDDLE nodes are parsed but not pushed through
// the middle end, and the context caps a graph at FUZZ_MAX_NODES nodes (the
// same check as the 200,000-node limit, at a lower number: bc_ctx.max_nodes),
// so one input costs at most milliseconds and the fuzzer keeps its speed.
// Large unrolls exercise no code that small ones do not, but under ASan they
// took most of the time: with caps of 200,000 / 2,000 nodes a run slowed to
// ~1,000 execs/s and a 20,205-trip loop hit the 10 s timeout on a loaded
// machine; replaying the corpus took 3.75 ms per input at 5,000 / 2,000 and
// 1.75 ms at 600 / 300.  The full-size limits are tested by test_parse and
// measured by `make bench-parse`.
//
//   make fuzz            (tests/fuzz/fuzz.mk)
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bc.h"

#define FUZZ_MAX_NODES_MIDDLE 300
#define FUZZ_MAX_NODES 600

static void quiet(void *opaque, const char *msg) {
  (void)opaque;
  // Every message must be a complete, non-empty, NUL-terminated string.
  if (!msg || !msg[0]) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (1u << 16)) return 0;
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  bc_ctx *ctx = bc_ctx_new();
  if (!ctx) {
    free(text);
    return 0;
  }
  bc_set_error_fn(ctx, NULL, quiet);
  ctx->max_nodes = FUZZ_MAX_NODES;
  bc_graph *g = bcP_parse_string(ctx, "fuzz.blk", text, NULL, 0);
  if (g) {
    // A parsed graph is well-formed by construction.
    if (bcI_verify(g) != BC_OK) abort();
    if (g->nnodes <= FUZZ_MAX_NODES_MIDDLE) {
      bc_graph *c = bcI_clone(g);
      if (c && bcO_run_until(c, NULL) == BC_OK) {
        if (bcM_check(c) != BC_OK) abort();       // planner produced overlapping live values
        if (bcI_verify(c) != BC_OK) abort();      // a pass broke an invariant
        bc_emit_opts o = {0};
        char *src = bcE_emit_c(ctx, c, &o);
        // Emission of a planned graph must succeed.
        if (!src) abort();
      }
    }
  } else if (ctx->nerrors == 0) {
    abort();  // failing without a message
  }
  bc_ctx_free(ctx);
  free(text);
  return 0;
}
