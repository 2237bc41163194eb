# blockc — build, test and demo.
#
#   make          build build/blockc (installs missing Debian packages first)
#   make demo     build, then JIT-run a shipped graph
#   make test     build and run the cmocka suites
#   make test SAN=1   the same under AddressSanitizer + UBSan (build-san/)
#
# Every compiler source in compiler/ (except main.c) goes into one static
# library that the CLI and the tests link; runtime/blockc_rt.c holds the
# precompiled kernels the generated code calls, built with -O3.

CC      ?= cc
SAN     ?=
BUILD   ?= build
WARN    := -std=c11 -Wall -Wextra -Werror
OPT     ?= -O2
RTOPT   ?= -O3 -march=native
ifeq ($(SAN),1)
BUILD   := build-san
SANF    := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
OPT     := -O1
RTOPT   := -O1
endif
CFLAGS  ?=
CPPFLAGS += -Icompiler -Iruntime
ALL_CFLAGS = $(WARN) -g $(OPT) $(SANF) $(CFLAGS)
LDLIBS  := -ltcc -lopenblas -lcjson -lm -lpthread -ldl
TEST_LDLIBS := -lcmocka

# Debian packages the build and tests need; tools/deps.sh installs them.
DEPS    := tcc libtcc-dev libopenblas-dev libcmocka-dev libcjson-dev pkg-config
PYDEPS  := python3 python3-numpy python3-torch

LIB_SRCS  := $(filter-out compiler/main.c,$(wildcard compiler/*.c))
LIB_OBJS  := $(LIB_SRCS:%.c=$(BUILD)/%.o)
RT_OBJS   := $(BUILD)/runtime/blockc_rt.o
TEST_SRCS := $(wildcard tests/test_*.c)
TEST_BINS := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
TEST_COMMON := $(wildcard tests/testutil.c)
STAMP     := $(BUILD)/.deps-ok

.PHONY: all deps pydeps demo test clean generated
all: $(BUILD)/blockc

deps: $(STAMP)
$(STAMP):
	@mkdir -p $(BUILD)
	@sh tools/deps.sh $(DEPS)
	@touch $@

pydeps:
	@sh tools/deps.sh $(PYDEPS)

$(BUILD)/compiler/%.o: compiler/%.c compiler/*.h runtime/blockc_rt.h | $(STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -c $< -o $@

# The AOT backend compiles runtime/blockc_rt.c into each model; this is
# where it looks when the binary has been moved away from the checkout.
$(BUILD)/compiler/aot.o: CPPFLAGS += -DBC_RUNTIME_DIR='"$(CURDIR)/runtime"'

$(BUILD)/runtime/%.o: runtime/%.c runtime/*.h | $(STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(WARN) -g $(RTOPT) $(SANF) $(CFLAGS) -c $< -o $@

$(BUILD)/libblockc.a: $(LIB_OBJS) $(RT_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/blockc: $(BUILD)/compiler/main.o $(BUILD)/libblockc.a
	$(CC) $(ALL_CFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/tests/%: tests/%.c $(TEST_COMMON) tests/*.h $(BUILD)/libblockc.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests $(ALL_CFLAGS) $< $(TEST_COMMON) $(BUILD)/libblockc.a $(TEST_LDLIBS) $(LDLIBS) -o $@

test: $(BUILD)/blockc $(TEST_BINS)
	@BLOCKC=$(BUILD)/blockc sh tests/run.sh $(TEST_BINS)

demo: $(BUILD)/blockc
	./$(BUILD)/blockc run graphs/residual.blk --seed 1

clean:
	rm -rf build build-san

# Agreement with PyTorch on every wiring x activation x causal x dims, on
# every backend; needs Debian's python3-torch (installed by pydeps).
# Every case runs on every backend, named explicitly, so a backend that
# cannot run a case FAILS the sweep instead of being skipped by the probe.
# CONFORMANCE_FLAGS adds flags, e.g. `--new-backends interp` restricts the
# issue-9 cases (decoders, nn.Transformer, padded batches, pre_ln_nonorm)
# to the interpreter while a back end is being reworked (the sweep then
# prints which backends they do NOT cover).
CONFORMANCE_FLAGS ?=
.PHONY: conformance
conformance: $(BUILD)/blockc pydeps
	/usr/bin/python3 tools/torch_export.py --self-check
	/usr/bin/python3 tools/conformance.py --blockc $(BUILD)/blockc --backends interp,jit,aot $(CONFORMANCE_FLAGS)

# Elementwise kernels: gcc -O3 runtime vs the same loops compiled by tcc;
# then the small-M GEMM vs cblas_sgemm next to the weight-read floor, and the
# portable (-DBLOCKC_NO_BLAS) GEMM vs OpenBLAS.  GEMM part only:
# ./build/bench_kernels 31 gemm
.PHONY: bench-kernels
$(BUILD)/bench_kernels: tools/bench_kernels.c $(BUILD)/libblockc.a
	$(CC) $(CPPFLAGS) $(WARN) -O3 -march=native $< $(BUILD)/libblockc.a $(LDLIBS) -o $@
bench-kernels: $(BUILD)/bench_kernels
	./$(BUILD)/bench_kernels

# generated/: the AOT pair for every shipped graph at its default dims,
# committed so users can vendor without building blockc.  test_aot fails
# when it is stale; `make generated` refreshes it.
generated: $(BUILD)/blockc
	@for g in graphs/*.blk; do ./$(BUILD)/blockc emit $$g -o generated || exit 1; done

# Hardening: libFuzzer targets (fuzz, fuzz-smoke), valgrind over the CLI
# paths, ThreadSanitizer over the concurrency suite.
include tests/fuzz/fuzz.mk tests/valgrind.mk tests/tsan.mk

# Benchmark (not a test): every shipped wiring at D=512, T=128, F=2048,
# N=6 on one BLAS thread, then the small size D=256, T=8.
BENCH_GRAPHS := post_ln pre_ln residual deepnorm peri_ln
.PHONY: bench
bench: $(BUILD)/blockc
	@for g in $(BENCH_GRAPHS); do \
	  ./$(BUILD)/blockc bench graphs/$$g.blk -D D=512 -D T=128 -D F=2048 -D N=6 --threads 1 --iters 30 --json; done
	@for g in $(BENCH_GRAPHS); do \
	  ./$(BUILD)/blockc bench graphs/$$g.blk -D D=256 -D T=8 -D N=6 --threads 1 --iters 200 --json; done

# Parser time and memory at its limits (issue 12, item 3): numbers, not a test.
.PHONY: bench-parse
bench-parse: $(BUILD)/blockc
	@sh tools/bench_parse.sh $(BUILD)/blockc
