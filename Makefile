# blockc — build, test, install and demo.
#
#   make          build build/blockc, build/libblockc.a and build/libblockc.so
#                 (and docs/graphs/*.svg when Graphviz's `dot` is installed)
#   make demo     install missing Debian packages, build, JIT-run a shipped graph
#   make test     build and run the cmocka suites
#   make test SAN=1   the same under AddressSanitizer + UBSan (build-san/)
#   make check-deps   no circle between the files of compiler/ and cli/
#   make install PREFIX=/usr/local [DESTDIR=...]    make uninstall (same vars)
#   make install-test   install into a temporary prefix and use it from outside
#   make runtime  remake runtime/blockc_rt.c from its parts in runtime/src/
#   make freestanding   the runtime's kernels alone, -ffreestanding (no libc);
#                 the runtime and generated pairs pass the strict warnings
#   make alloc-test     a forward allocates nothing (OpenBLAS and -DBLOCKC_NO_BLAS)
#   make deps     check (and as root install) the Debian packages
#   make tok-conformance   the tokenizer against Hugging Face tokenizers (npm)
#   make docs     render graphs/*.svg with Graphviz (installs graphviz on Debian)
#
# The library is the library: compiler/ (LIB_SRCS) goes into
# build/libblockc.a and (PIC) build/libblockc.so, with the precompiled
# runtime kernels (runtime/blockc_rt.c, built with -O3).  cli/ (CLI_SRCS) is
# the command-line program: cli/main.c is linked into the binary only, the
# others go into build/libblockc_cli.a, which the binary and the tests link.
# No file of compiler/ includes one of cli/, and no files call each other in
# a circle: tools/check_deps.py (make check-deps) checks both.
#
# The build never asks dpkg: libraries come from pkg-config where they ship
# a .pc (openblas, libtcc, cmocka), else plain -l flags.  The
# Debian package check (tools/deps.sh) runs from `make deps`, which `make
# demo` and a missing header trigger.

CC      ?= cc
SAN     ?=
BUILD   ?= build
WARN    := -std=c11 -Wall -Wextra -Wmissing-prototypes -Wshadow -Werror
OPT     ?= -O2
RTOPT   ?= -O3 -march=native
ifeq ($(SAN),1)
BUILD   := build-san
SANF    := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
OPT     := -O1
RTOPT   := -O1
endif
CFLAGS  ?=
VERSION := $(shell sed -n 's/^\#define BC_VERSION "\(.*\)"$$/\1/p' compiler/bc.h)
SOVERSION := 0

# --- libraries: pkg-config where there is a .pc, else -l ---------------------
PKG_CONFIG ?= pkg-config
PC_MODS := $(shell for m in openblas libtcc cmocka libpcre2-8 libutf8proc; do \
             $(PKG_CONFIG) --exists $$m 2>/dev/null && echo $$m; done)
pc_or    = $(if $(filter $(1),$(PC_MODS)),$(shell $(PKG_CONFIG) $(2) $(1)),$(3))
BLAS_LIBS  := $(call pc_or,openblas,--libs,-lopenblas)
TCC_LIBS   := $(call pc_or,libtcc,--libs,-ltcc)
# The tokenizer (runtime/blockc_tok.c, in the library) needs PCRE2 and utf8proc.
TOK_LIBS   := $(call pc_or,libpcre2-8,--libs,-lpcre2-8) $(call pc_or,libutf8proc,--libs,-lutf8proc)
DEP_CFLAGS := $(call pc_or,openblas,--cflags,) $(call pc_or,libtcc,--cflags,)
TOK_CFLAGS := $(call pc_or,libpcre2-8,--cflags,) $(call pc_or,libutf8proc,--cflags,)
SYS_LIBS   := -lm -lpthread -ldl
LDLIBS  := $(TCC_LIBS) $(BLAS_LIBS) $(TOK_LIBS) $(SYS_LIBS)
TEST_LDLIBS := $(call pc_or,cmocka,--libs,-lcmocka)
# Debian ships libtcc as a static, non-PIC archive only: then libblockc.so
# leaves tcc_* to the program (blockc.pc's Libs carry -ltcc).
TCC_SHARED := $(if $(filter libtcc,$(PC_MODS))$(filter /%,$(shell $(CC) -print-file-name=libtcc.so)),yes)
SO_LDLIBS  := $(if $(TCC_SHARED),$(TCC_LIBS)) $(BLAS_LIBS) $(TOK_LIBS) $(SYS_LIBS)

CPPFLAGS += -Icompiler -Iruntime
CLI_CPPFLAGS := -Icli
ALL_CFLAGS = $(WARN) -g $(OPT) $(SANF) $(DEP_CFLAGS) $(CFLAGS)

# Debian packages the build and tests need; tools/deps.sh installs them.
DEPS    := tcc libtcc-dev libopenblas-dev libcmocka-dev pkg-config cmake libpcre2-dev libutf8proc-dev python3
PYDEPS  := python3 python3-numpy python3-torch
# Optional: Graphviz renders the graph pictures (make docs).
DOCDEPS := graphviz
# `make experiment`: the decoder-only LMs train on the fortunes files
EXPDEPS := python3 fortunes

# A missing header (or `make demo`) runs the package check before compiling.
have_hdrs = $(shell $(CC) $(DEP_CFLAGS) -DPCRE2_CODE_UNIT_WIDTH=8 $(foreach h,$(1),-include $(h)) -E -x c /dev/null \
              -o /dev/null 2>/dev/null && echo yes)
NEED_DEPS := $(sort $(if $(call have_hdrs,libtcc.h utf8proc.h pcre2.h),,deps) \
                    $(if $(filter demo,$(MAKECMDGOALS)),deps))
NEED_TEST_DEPS := $(sort $(NEED_DEPS) $(if $(call have_hdrs,stdarg.h stddef.h setjmp.h stdint.h cmocka.h),,deps))

LIB_SRCS  := compiler/aot.c compiler/aot_cache.c compiler/aot_weights.c compiler/api.c compiler/cnames.c compiler/ctx.c compiler/driver.c compiler/emit.c compiler/gguf.c \
             compiler/emit_grad.c compiler/emit_train.c compiler/generate.c compiler/grad.c compiler/interp.c compiler/ir.c compiler/jit.c \
             compiler/layers.c compiler/layout.c compiler/lex.c compiler/npy.c compiler/parse.c compiler/passes.c \
             compiler/plan.c compiler/safetensors.c compiler/status.c compiler/weights.c \
             $(wildcard compiler/ops/*.c)
CLI_SRCS  := cli/main.c cli/options.c cli/common.c cli/run.c cli/aot_cmds.c cli/stepwise.c cli/bench.c \
             cli/analyze.c cli/tools.c cli/tokenize.c cli/gguf_tok.c cli/generate.c cli/train.c \
             cli/train_data.c cli/train_init.c cli/train_io.c cli/train_pairs.c
# A source file in neither list is a mistake (it would silently not be built).
$(foreach f,$(filter-out $(LIB_SRCS) $(CLI_SRCS),$(wildcard compiler/*.c cli/*.c)),\
  $(error $(f) is in neither LIB_SRCS nor CLI_SRCS of the Makefile))
LIB_OBJS  := $(LIB_SRCS:%.c=$(BUILD)/%.o)
CLI_OBJS  := $(patsubst %.c,$(BUILD)/%.o,$(filter-out cli/main.c,$(CLI_SRCS)))
RT_OBJS   := $(BUILD)/runtime/blockc_rt.o $(BUILD)/runtime/blockc_tok.o
TEST_SRCS := $(wildcard tests/test_*.c)
TEST_BINS := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
TEST_COMMON := $(wildcard tests/testutil.c tests/rt_ref.c)
STAMP     := $(BUILD)/.deps-ok
LIBS      := $(BUILD)/libblockc.a $(BUILD)/libblockc.so
GRAPH_SVGS := $(patsubst %.blk,%.svg,$(wildcard graphs/*.blk))
HAVE_DOT  := $(shell command -v dot)

.PHONY: all deps pydeps docdeps demo test clean generated docs
all: $(BUILD)/blockc $(LIBS) $(if $(HAVE_DOT),$(GRAPH_SVGS))

deps:
	@mkdir -p $(BUILD)
	@sh tools/deps.sh $(DEPS)
	@touch $(STAMP)
# The hardening makefiles (fuzz, tsan) order their builds after this.
$(STAMP):
	@$(MAKE) --no-print-directory deps

pydeps:
	@sh tools/deps.sh $(PYDEPS)
docdeps:
	@sh tools/deps.sh $(DOCDEPS)

# Objects are rebuilt when the flags change (e.g. library objects became PIC).
FLAGS_SIG := $(CC) $(CPPFLAGS) $(WARN) $(OPT) $(RTOPT) $(SANF) $(DEP_CFLAGS) $(CFLAGS) pic-lib
$(shell mkdir -p $(BUILD) && { [ "$$(cat $(BUILD)/.flags 2>/dev/null)" = '$(FLAGS_SIG)' ] || \
          printf '%s\n' '$(FLAGS_SIG)' > $(BUILD)/.flags; })

$(BUILD)/compiler/%.o: compiler/%.c compiler/*.h runtime/blockc_rt.h $(BUILD)/.flags | $(NEED_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) $(PIC) -c $< -o $@
$(LIB_OBJS) $(RT_OBJS): PIC := -fPIC

# The program's objects see cli/ too; the library's do not.
$(BUILD)/cli/%.o: cli/%.c cli/*.h cli/*.inc compiler/*.h runtime/blockc_rt.h $(BUILD)/.flags | $(NEED_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CLI_CPPFLAGS) $(ALL_CFLAGS) -c $< -o $@

# `blockc emit --main generate` writes examples/generate/generate.c, kept in
# the program as a string (cli/generate_main.inc, committed; a test compares
# what emit writes with the example).
cli/generate_main.inc: examples/generate/generate.c tools/embed_text.sh
	sh tools/embed_text.sh examples/generate/generate.c $@ bc_generate_main

# The AOT backend compiles runtime/blockc_rt.c into each model; this is
# where it looks when the binary has been moved away from the checkout.
$(BUILD)/compiler/aot.o: CPPFLAGS += -DBC_RUNTIME_DIR='"$(CURDIR)/runtime"'

# The runtime is developed in parts (runtime/src/) and shipped as one file,
# runtime/blockc_rt.c (committed: what vendoring users copy), which
# tools/amalgamate.sh makes from them: `make runtime`, or any build after a
# part changed.  test_runtime fails when the committed file is stale.
runtime/blockc_rt.c: $(wildcard runtime/src/*.c) tools/amalgamate.sh
	sh tools/amalgamate.sh $@
.PHONY: runtime freestanding
runtime: runtime/blockc_rt.c

# The kernels alone (-DBLOCKC_NO_IO), freestanding: clang for a Cortex-M4F
# when it has the target, and the host compiler; nm proves the objects call
# only memcpy/memmove/memset and libm.  The runtime and a representative set
# of generated pairs (tools/strict_emit.sh) pass the strict warnings.
freestanding: runtime/blockc_rt.c $(BUILD)/blockc
	@CC="$(CC)" BLOCKC=$(BUILD)/blockc sh tools/freestanding.sh $(BUILD)/freestanding

# The kernels at other instruction sets than this machine's: test_gemm
# against the runtime built for x86-64 (plain C), AVX2 + FMA, and AVX-512
# without VNNI -- the integer paths of the Q8_0 / Q4_0 products and the
# F16 widening must give the same bits on each (elsewhere: plain C only).
ISA_SETS := x86-64:-march=x86-64 avx2:-mavx2,-mfma,-mf16c avx512:-mavx512f,-mavx512bw,-mavx512vl,-mfma,-mf16c
.PHONY: isa-check
isa-check: $(BUILD)/libblockc.a $(BUILD)/libblockc_cli.a $(TEST_COMMON_OBJS) | $(NEED_TEST_DEPS)
	@mkdir -p $(BUILD)/isa
	@sets="$(ISA_SETS)"; [ "$$(uname -m)" = x86_64 ] || sets="plain:"; \
	for s in $$sets; do n=$${s%%:*}; f=$$(echo "$${s#*:}" | tr , ' '); \
	  echo "isa-check: $$n ($$f)"; \
	  $(CC) $(CPPFLAGS) -std=c11 -O2 $$f -c runtime/blockc_rt.c -o $(BUILD)/isa/rt_$$n.o && \
	  $(CC) $(CPPFLAGS) $(CLI_CPPFLAGS) -Itests $(ALL_CFLAGS) tests/test_gemm.c $(BUILD)/isa/rt_$$n.o \
	    $(TEST_COMMON_OBJS) $(BUILD)/libblockc_cli.a $(BUILD)/libblockc.a $(TEST_LDLIBS) $(LDLIBS) \
	    -o $(BUILD)/isa/test_gemm_$$n && $(BUILD)/isa/test_gemm_$$n > $(BUILD)/isa/$$n.log 2>&1 || \
	  { tail -20 $(BUILD)/isa/$$n.log; echo "isa-check: $$n failed"; exit 1; }; \
	  grep PASSED $(BUILD)/isa/$$n.log; done

# A forward allocates nothing, with OpenBLAS and with -DBLOCKC_NO_BLAS
# (tests/test_rt_alloc.c, also part of make test).
.PHONY: alloc-test
alloc-test: $(BUILD)/tests/test_rt_alloc
	./$(BUILD)/tests/test_rt_alloc

$(BUILD)/runtime/%.o: runtime/%.c runtime/*.h $(BUILD)/.flags | $(NEED_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(WARN) -g $(RTOPT) $(SANF) $(PIC) $(CFLAGS) -c $< -o $@
# The tokenizer: -O2 like the library (no kernels in it), PCRE2's and utf8proc's flags.
$(BUILD)/runtime/blockc_tok.o: runtime/blockc_tok.c runtime/blockc_tok.h $(BUILD)/.flags | $(NEED_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(TOK_CFLAGS) $(WARN) -g $(OPT) $(SANF) $(PIC) $(CFLAGS) -c $< -o $@

$(BUILD)/libblockc.a: $(LIB_OBJS) $(RT_OBJS)
	@rm -f $@
	ar rcs $@ $^

# Exports blockc_* only (compiler/blockc.map).  A library object that needs
# a CLI object (or any bc symbol it does not define) fails the build here.
$(BUILD)/libblockc.so: $(LIB_OBJS) $(RT_OBJS) compiler/blockc.map
	$(CC) -shared $(SANF) -Wl,-soname,libblockc.so.$(SOVERSION) \
	  -Wl,--version-script=compiler/blockc.map $(LIB_OBJS) $(RT_OBJS) $(SO_LDLIBS) -o $@
	@if nm -D --undefined-only $@ | grep -E ' (cli_|bc[A-Z]?_)'; then \
	  echo "$@: the library references the symbols above, which it does not define" >&2; \
	  rm -f $@; exit 1; fi

$(BUILD)/libblockc_cli.a: $(CLI_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/blockc: $(BUILD)/cli/main.o $(BUILD)/libblockc_cli.a $(BUILD)/libblockc.a
	$(CC) $(ALL_CFLAGS) $^ $(LDLIBS) -o $@

# The shared helpers are compiled once, not into every suite.
TEST_COMMON_OBJS := $(TEST_COMMON:%.c=$(BUILD)/%.o)
.SECONDARY: $(TEST_COMMON_OBJS)
$(BUILD)/tests/%.o: tests/%.c tests/*.h compiler/*.h cli/*.h runtime/blockc_rt.h $(BUILD)/.flags | $(NEED_TEST_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CLI_CPPFLAGS) -Itests $(ALL_CFLAGS) -c $< -o $@
$(BUILD)/tests/%: tests/%.c $(TEST_COMMON_OBJS) tests/*.h cli/*.h $(BUILD)/libblockc_cli.a $(BUILD)/libblockc.a | $(NEED_TEST_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CLI_CPPFLAGS) -Itests $(ALL_CFLAGS) $< $(TEST_COMMON_OBJS) $(BUILD)/libblockc_cli.a \
	  $(BUILD)/libblockc.a $(TEST_LDLIBS) $(LDLIBS) -o $@

# Test tiers: `make test` is the quick tier (the README's command, CI's
# first step); `make check` runs the same suites with their long cases too
# (BLOCKC_TEST_TIER=check: the big sweeps, every shipped graph through three
# compilers; tu_run_tiers in tests/testutil.h).  Both build with -j (the
# processor count, unless make was given -j) and run the suites that many
# at a time (JOBS=N overrides); tests/run.sh prints them in a stable order.
NPROC    := $(shell nproc 2>/dev/null || echo 2)
TEST_J    = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(NPROC))
.PHONY: check test-bins
test-bins: $(BUILD)/blockc $(TEST_BINS)
test:
	@$(MAKE) --no-print-directory $(TEST_J) test-bins
	@BLOCKC=$(BUILD)/blockc JOBS=$${JOBS:-$(NPROC)} TEST_TIMES=$(BUILD)/.test-times \
	  sh tests/run.sh $(TEST_BINS)
check: check-deps
	@$(MAKE) --no-print-directory $(TEST_J) test-bins
	@BLOCKC=$(BUILD)/blockc JOBS=$${JOBS:-$(NPROC)} TEST_TIMES=$(BUILD)/.check-times \
	  BLOCKC_TEST_TIER=check sh tests/run.sh $(TEST_BINS)

# No circle between the files of compiler/ and cli/ (includes, and calls of
# the functions one file defines), and no include of cli/ from compiler/.
.PHONY: check-deps
check-deps:
	python3 tools/check_deps.py compiler cli

demo: $(BUILD)/blockc
	./$(BUILD)/blockc run graphs/residual.blk --seed 1

clean:
	rm -rf build build-san

# --- docs: graphs/*.svg with Graphviz (optional dependency) --------------------
# `blockc dot` writes each shipped graph after the passes; `make docs`
# installs graphviz through tools/deps.sh, `make` renders only when dot exists.
# The pictures are committed; they are redrawn when their graph changes.
# Two layers show the loop (a cluster per layer) at a readable size.
DOT_DEFS ?= -D N=2
docs: $(if $(HAVE_DOT),,docdeps)
	@$(MAKE) --no-print-directory $(GRAPH_SVGS)
graphs/%.svg: graphs/%.blk | $(BUILD)/blockc
	./$(BUILD)/blockc dot $< $(DOT_DEFS) --after inplace -o $@.dot
	dot -Tsvg $@.dot -o $@.tmp && mv $@.tmp $@ && rm -f $@.dot

# --- install -----------------------------------------------------------------
# Paths; DESTDIR is prepended to each when copying, never compiled in.
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
LIBDIR  ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
DATADIR ?= $(PREFIX)/share/blockc
MANDIR  ?= $(PREFIX)/share/man
PCDIR   ?= $(LIBDIR)/pkgconfig
INSTALL ?= install
# The installed binary is main.o + the library objects, but with aot.o
# rebuilt so its last-resort runtime path is $(DATADIR)/runtime (linked
# ahead of libblockc.a, so the archive's aot.o is not pulled in; it also
# finds <bindir>/../share/blockc/runtime when the tree is moved).  The
# paths are recorded in $(IBUILD)/paths so a new PREFIX rebuilds it.
IBUILD  := $(BUILD)/install
INST_PATHS := $(PREFIX)|$(DATADIR)|$(LIBDIR)|$(INCLUDEDIR)
$(shell mkdir -p $(IBUILD) && { [ "$$(cat $(IBUILD)/paths 2>/dev/null)" = '$(INST_PATHS)' ] || \
          printf '%s\n' '$(INST_PATHS)' > $(IBUILD)/paths; })
$(IBUILD)/aot.o: compiler/aot.c compiler/*.h runtime/blockc_rt.h $(IBUILD)/paths | $(NEED_DEPS)
	$(CC) $(CPPFLAGS) -DBC_RUNTIME_DIR='"$(DATADIR)/runtime"' $(ALL_CFLAGS) \
	  $(if $(filter compiler/aot.c,$(LIB_SRCS)),-fPIC) -c $< -o $@
$(IBUILD)/blockc: $(BUILD)/cli/main.o $(IBUILD)/aot.o $(BUILD)/libblockc_cli.a $(BUILD)/libblockc.a
	$(CC) $(ALL_CFLAGS) $^ $(LDLIBS) -o $@

# blockc.pc: Requires.private for the libraries that ship a .pc; -ltcc in
# Libs when libtcc is a static archive (the program links it), else private.
PC_REQ  := $(filter openblas libpcre2-8 libutf8proc,$(PC_MODS))
PC_PRIV := $(if $(filter openblas,$(PC_MODS)),,-lopenblas) \
           $(if $(filter libpcre2-8,$(PC_MODS)),,-lpcre2-8) $(if $(filter libutf8proc,$(PC_MODS)),,-lutf8proc) \
           $(if $(TCC_SHARED),$(TCC_LIBS)) $(SYS_LIBS)
pc_rel = $(patsubst $(PREFIX)/%,$${prefix}/%,$(1))
$(IBUILD)/blockc.pc: Makefile $(IBUILD)/paths
	@printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(call pc_rel,$(LIBDIR))' \
	  'includedir=$(call pc_rel,$(INCLUDEDIR))' '' \
	  'Name: blockc' 'Description: compiler for Transformer blocks: graph file -> JIT (libtcc)' \
	  'Version: $(VERSION)' \
	  'Requires.private: $(PC_REQ)' 'Cflags: -I$${includedir}' \
	  'Libs: -L$${libdir} -lblockc $(if $(TCC_SHARED),,-ltcc -ldl -lm)' \
	  'Libs.private: $(strip $(PC_PRIV))' > $@

INSTALLED := $(BINDIR)/blockc $(LIBDIR)/libblockc.a $(LIBDIR)/libblockc.so \
  $(LIBDIR)/libblockc.so.$(SOVERSION) $(LIBDIR)/libblockc.so.$(VERSION) \
  $(INCLUDEDIR)/blockc.h $(INCLUDEDIR)/blockc_tok.h $(PCDIR)/blockc.pc $(MANDIR)/man1/blockc.1 \
  $(DATADIR)/runtime/blockc_rt.c $(DATADIR)/runtime/blockc_rt.h \
  $(DATADIR)/runtime/blockc_tok.c $(DATADIR)/runtime/blockc_tok.h \
  $(patsubst %,$(DATADIR)/%,$(wildcard graphs/*.blk))
INSTALLED_DIRS := $(DATADIR)/graphs $(DATADIR)/runtime $(DATADIR)

.PHONY: install uninstall install-test
install: $(IBUILD)/blockc $(LIBS) $(IBUILD)/blockc.pc docs/blockc.1
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) \
	  $(DESTDIR)$(PCDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(DATADIR)/runtime $(DESTDIR)$(DATADIR)/graphs
	$(INSTALL) -m 755 $(IBUILD)/blockc $(DESTDIR)$(BINDIR)/blockc
	$(INSTALL) -m 644 $(BUILD)/libblockc.a $(DESTDIR)$(LIBDIR)/libblockc.a
	$(INSTALL) -m 755 $(BUILD)/libblockc.so $(DESTDIR)$(LIBDIR)/libblockc.so.$(VERSION)
	ln -sf libblockc.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libblockc.so.$(SOVERSION)
	ln -sf libblockc.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libblockc.so
	$(INSTALL) -m 644 compiler/blockc.h runtime/blockc_tok.h $(DESTDIR)$(INCLUDEDIR)/
	$(INSTALL) -m 644 $(IBUILD)/blockc.pc $(DESTDIR)$(PCDIR)/blockc.pc
	$(INSTALL) -m 644 docs/blockc.1 $(DESTDIR)$(MANDIR)/man1/blockc.1
	$(INSTALL) -m 644 runtime/blockc_rt.c runtime/blockc_rt.h runtime/blockc_tok.c runtime/blockc_tok.h \
	  $(DESTDIR)$(DATADIR)/runtime/
	$(INSTALL) -m 644 graphs/*.blk $(DESTDIR)$(DATADIR)/graphs/
	@case "$(DESTDIR)$(LIBDIR)" in /usr/lib*|/usr/local/lib*) \
	  [ "$$(id -u)" = 0 ] && command -v ldconfig >/dev/null && ldconfig || true;; esac

# Removes exactly the files install wrote, then the directories it created
# for blockc alone (share/blockc/...) if they are empty.
uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	-rmdir $(addprefix $(DESTDIR),$(INSTALLED_DIRS)) 2>/dev/null

# Installs into a temporary prefix, moves the tree elsewhere, then from
# /tmp (checkout unreachable): builds and runs an embedding program against
# the installed blockc.pc (shared and static), and runs --backend aot.
install-test:
	@BUILD=$(BUILD) MAKE="$(MAKE)" sh tests/install_test.sh

# Agreement with PyTorch on every wiring x activation x causal x dims, on
# every backend; needs Debian's python3-torch (installed by pydeps).
# Every case runs on every backend, named explicitly, so a backend that
# cannot run a case FAILS the sweep instead of being skipped by the probe.
# CONFORMANCE_FLAGS adds flags, e.g. `--new-backends interp` restricts the
# issue-9 cases (decoders, nn.Transformer, padded batches, pre_ln_nonorm)
# to the interpreter while a back end is being reworked (the sweep then
# prints which backends they do NOT cover).
CONFORMANCE_FLAGS ?=
# FAMILY_BACKENDS: the backends the BERT / GPT-2 / LLaMA cases (graphs/bert,
# gpt2, llama.blk vs tools/families.py) must pass on; not probed, so a
# backend that cannot run them fails the sweep.
FAMILY_BACKENDS ?= interp,jit,aot
# GRAD_BACKENDS: the backends tools/grad_check.py compares with PyTorch
# autograd (interp: the double reference; jit, aot: the emitted backward).
GRAD_BACKENDS ?= interp,jit,aot
# LM_BACKENDS: the backends the whole-model graphs (gpt2_lm, llama_lm: ids
# in, logits and generated ids out) must pass on (tools/lm_check.py), and
# the issue-23 families olmo2_lm, qwen3_lm, gemma2_lm (tools/families_lm_check.py:
# logits, gradients, Gemma 2's greedy generation).
LM_BACKENDS ?= interp,jit,aot
# TRAIN_BACKENDS: the backends `blockc train` must match 30 steps of PyTorch
# training on, with the resume identity (tools/train_check.py: gpt2_lm,
# llama_lm, an nn.Transformer encoder-decoder LM); jit and/or aot (the
# interpreter has no training step).
TRAIN_BACKENDS ?= jit,aot
# WIRING_BACKENDS: the backends the research wirings (rezero, layerscale,
# admin, sandwich, normformer, parallel, gated, hyper_connections) must pass
# on, forward and gradients, against PyTorch modules written from each
# paper's equations (tools/wirings_check.py).
WIRING_BACKENDS ?= interp,jit,aot
.PHONY: conformance
conformance: $(BUILD)/blockc pydeps
	/usr/bin/python3 tools/torch_export.py --self-check
	/usr/bin/python3 tools/families.py --self-check
	/usr/bin/python3 tools/lm_check.py --self-check
	/usr/bin/python3 tools/families_lm_check.py --self-check
	/usr/bin/python3 tools/train_check.py --self-check
	/usr/bin/python3 tools/optim_ref.py --check
	/usr/bin/python3 tools/wirings_check.py --self-check
	/usr/bin/python3 tools/conformance.py --blockc $(BUILD)/blockc --backends interp,jit,aot $(CONFORMANCE_FLAGS) --families-backends $(FAMILY_BACKENDS)
	/usr/bin/python3 tools/lm_check.py --blockc $(BUILD)/blockc --backends $(LM_BACKENDS)
	/usr/bin/python3 tools/families_lm_check.py --blockc $(BUILD)/blockc --backends $(LM_BACKENDS)
	/usr/bin/python3 tools/grad_check.py --blockc $(BUILD)/blockc --backends $(GRAD_BACKENDS)
	/usr/bin/python3 tools/train_check.py --blockc $(BUILD)/blockc --backends $(TRAIN_BACKENDS)
	/usr/bin/python3 tools/train_s2s_check.py --blockc $(BUILD)/blockc
	/usr/bin/python3 tools/wirings_check.py --blockc $(BUILD)/blockc --backends $(WIRING_BACKENDS)

# Elementwise kernels: gcc -O3 runtime vs the same loops compiled by tcc;
# then the small-M GEMM vs cblas_sgemm next to the weight-read floor, and the
# portable (-DBLOCKC_NO_BLAS) GEMM vs OpenBLAS.  GEMM part only:
# ./build/bench_kernels 31 gemm
.PHONY: bench-kernels
$(BUILD)/bench_kernels: tools/bench_kernels.c $(BUILD)/libblockc.a
	$(CC) $(CPPFLAGS) $(WARN) -Wno-missing-prototypes -O3 -march=native $< $(BUILD)/libblockc.a $(LDLIBS) -o $@
bench-kernels: $(BUILD)/bench_kernels
	./$(BUILD)/bench_kernels

# The tokenizer against the Hugging Face `tokenizers` library (Node binding,
# npm-installed into $(BUILD)/tok-conf by the script, pinned there) on >= 1 MB
# of generated text: GPT-2 (tokenizer.json and vocab.json + merges.txt), real
# Llama 2 / Llama 3 files and two variants; ids, decodes, round trips,
# streams, and throughput next to tokenizers' (no assertion on time).
.PHONY: tok-conformance
$(BUILD)/tok_conf: tools/tok_conf.c $(BUILD)/libblockc_cli.a $(BUILD)/libblockc.a | $(NEED_DEPS)
	$(CC) $(CPPFLAGS) $(CLI_CPPFLAGS) $(TOK_CFLAGS) $(WARN) -O2 tools/tok_conf.c $(BUILD)/libblockc_cli.a \
	  $(BUILD)/libblockc.a $(LDLIBS) -o $@
tok-conformance: $(BUILD)/tok_conf
	sh tools/tok_conformance.sh $(BUILD) $(BUILD)/tok_conf

# generated/: the AOT pair for every shipped graph at its default dims,
# committed so users can vendor without building blockc.  test_aot fails
# when it is stale; `make generated` refreshes it.
generated: $(BUILD)/blockc
	@for g in graphs/*.blk; do ./$(BUILD)/blockc emit $$g -o generated || exit 1; done

# Hardening: libFuzzer targets (fuzz, fuzz-smoke), valgrind over the CLI
# paths, ThreadSanitizer over the concurrency suite.
include tests/fuzz/fuzz.mk tests/valgrind.mk tests/tsan.mk

# Benchmark (not a test): every shipped wiring at D=512, T=128, F=2048,
# N=6 on one BLAS thread, then the small size D=256, T=8.  Each row has the
# forward and (--train) the training step (backward_ms next to
# backward_gemm_ms, its GEMM floor; docs/analysis.md).
BENCH_GRAPHS := post_ln pre_ln residual deepnorm peri_ln rezero layerscale admin
.PHONY: bench
bench: $(BUILD)/blockc $(BUILD)/bench_kernels $(BUILD)/bench_train
	@for g in $(BENCH_GRAPHS); do \
	  ./$(BUILD)/blockc bench graphs/$$g.blk -D D=512 -D T=128 -D F=2048 -D N=6 --threads 1 --iters 30 --json --train; done
	@for g in $(BENCH_GRAPHS); do \
	  ./$(BUILD)/blockc bench graphs/$$g.blk -D D=256 -D T=8 -D N=6 --threads 1 --iters 200 --json --train; done
	@# a bounded model (dim T <= 128) at half its bound: compare with the T=128 row above
	@./$(BUILD)/blockc bench graphs/post_ln.blk -D D=512 -D T=128 -D F=2048 -D N=6 --length T=64 \
	  --threads 1 --iters 30 --json
	@for g in bert gpt2 llama; do \
	  ./$(BUILD)/blockc bench graphs/$$g.blk --threads 1 --iters 10 --json; done
	@# issue 11: a T=1 forward next to the weight-read floor measured in the same run
	@./$(BUILD)/blockc bench graphs/post_ln.blk -D D=512 -D T=1 -D F=2048 -D N=6 --threads 1 \
	  --iters 50 --json
	@# decoding with the KV cache: ms per token next to the read floor of the
	@# weights (read_floor_ms) and of the weights plus the cache rows (read_floor_kv_ms)
	@./$(BUILD)/blockc bench graphs/gpt2.blk -D D=512 -D H=8 -D F=2048 -D N=6 -D T=1024 \
	  --decode --context 512 --threads 1 --iters 50 --json
	@# whole models (issue 21): decoding gpt2_lm at context 512 next to the floor that
	@# counts the LM head (and only the gathered position rows), and its 128-token prompt
	@./$(BUILD)/blockc bench graphs/gpt2_lm.blk --decode --context 512 --threads 1 --iters 20 --json
	@./$(BUILD)/blockc bench graphs/gpt2_lm.blk --length T=128 --threads 1 --iters 5 --json
	@# issue 26: the thread pool, 1 then 2 threads, side by side: the T=128 forward and
	@# decoding llama_lm at context 512 (docs/threads.md)
	@for t in 1 2; do ./$(BUILD)/blockc bench graphs/post_ln.blk -D D=512 -D T=128 -D F=2048 -D N=6 \
	  --threads $$t --iters 30 --json; done
	@for t in 1 2; do ./$(BUILD)/blockc bench graphs/llama_lm.blk --decode --context 512 \
	  --threads $$t --iters 30 --json; done
	@# small-M rows: bcrt_gemm_small vs cblas_sgemm (M = 1, 8, 16, 32) on the model's shapes
	@./$(BUILD)/bench_kernels 31 small
	@# issue 22: training tokens/s and peak memory vs PyTorch and llm.c (make bench-train)
	@$(MAKE) --no-print-directory bench-train

# Long sequences (issue 26): blockc's forward against PyTorch 1.13 at T = 512 .. 4096
# and blockc alone to 16384, one and two threads, time and peak RSS (docs/threads.md).
.PHONY: bench-long
bench-long: $(BUILD)/blockc pydeps
	/usr/bin/python3 tools/bench_long.py --blockc $(BUILD)/blockc

# Training speed (issue 22): blockc's training step vs PyTorch 1.13 and
# llm.c's train_gpt2 (when a snapshot of karpathy/llm.c is extracted to
# build/llmc/src, or LLMC_SRC=DIR; tools/llmc_driver.c is built against it
# in build/llmc at bench time, their code never in the tree) on the same
# GPT-2-style LM (D=512 N=6 H=8 V=8192, B=4 T=128), one and two threads,
# next to the GEMM floor measured in the same run (docs/training.md).
.PHONY: bench-train
$(BUILD)/bench_train: tools/bench_train.c $(BUILD)/libblockc.a
	$(CC) $(CPPFLAGS) $(WARN) -Wno-missing-prototypes -O3 -march=native $(DEP_CFLAGS) $< $(BUILD)/libblockc.a $(LDLIBS) -o $@
bench-train: $(BUILD)/blockc $(BUILD)/bench_train
	@/usr/bin/python3 tools/bench_train.py --blockc $(BUILD)/blockc --build $(BUILD) \
	  $(if $(LLMC_SRC),--llmc-src $(LLMC_SRC))

# The seeds' experiment (issue 24, docs/experiments.md): Post-LN vs Pre-LN vs
# ResiDual vs DeepNorm, encoder-decoders on a synthetic translation and
# byte-level LMs on the fortunes files, at 6 and 18 layers, with and without
# warm-up, two seeds (<= 30 min on 2 cores); FULL=1: the full sweep (more
# steps, data and seeds).  Prints the table; results, table.md and the SVG
# plots go to $(BUILD)/experiment.  Rerunning resumes a stopped sweep (each
# finished run is reused if its command and the blockc binary are unchanged);
# FRESH=1 reruns every run.  Not a test (tests/test_experiment.c runs the
# miniature).
.PHONY: experiment
experiment: $(BUILD)/blockc
	@sh tools/deps.sh $(EXPDEPS)
	/usr/bin/python3 experiments/residual/experiment.py --blockc $(BUILD)/blockc \
	  --size $(if $(FULL),full,short) --out $(BUILD)/experiment$(if $(FULL),-full,) $(if $(FRESH),--fresh,)

# GGUF against llama.cpp's own code (issue 25): blockc's block decoding vs
# ggml's dequantize_row_* on ggml's reference quantizers' output, bit for
# bit, and tools/gguf_check.py: GGUF files written by llama.cpp's gguf Python
# package (f32, f16, q8_0, q4_0) give the logits of the same weights as
# safetensors.  Needs a llama.cpp snapshot at build/llamacpp/src or
# LLAMACPP_SRC=DIR (docs/checkpoints.md; nothing of it is committed); without
# one it says NOT RUN.  Not part of `make test`.
LLAMACPP_SRC ?= $(BUILD)/llamacpp/src
.PHONY: gguf-check
gguf-check: $(BUILD)/blockc $(BUILD)/runtime/blockc_rt.o
	@if [ ! -f $(LLAMACPP_SRC)/ggml-quants.c ] || [ ! -d $(LLAMACPP_SRC)/gguf-py ]; then \
	  echo "gguf-check: NOT RUN: no llama.cpp snapshot at $(LLAMACPP_SRC) (docs/checkpoints.md)"; exit 0; fi; \
	$(CC) -O2 -march=native -std=gnu11 -Iruntime -Itests -I$(LLAMACPP_SRC) tools/gguf_ggml_check.c \
	  $(LLAMACPP_SRC)/ggml-quants.c $(BUILD)/runtime/blockc_rt.o $(BLAS_LIBS) -lm -lpthread -o $(BUILD)/gguf_ggml_check && \
	./$(BUILD)/gguf_ggml_check && \
	PYTHONPATH=$(LLAMACPP_SRC)/gguf-py /usr/bin/python3 tools/gguf_check.py --blockc $(BUILD)/blockc

# Planner scaling (issue 20, item 3): grad and run of graphs/residual.blk
# for N = 50 ... 800 layers, seconds and microseconds per node; not a test.
.PHONY: bench-plan
bench-plan: $(BUILD)/blockc
	@sh tools/bench_plan.sh $(BUILD)/blockc

# Parser time and memory at its limits (issue 12, item 3): numbers, not a test.
.PHONY: bench-parse
bench-parse: $(BUILD)/blockc
	@sh tools/bench_parse.sh $(BUILD)/blockc
