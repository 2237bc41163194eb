# fuzz.mk — libFuzzer targets (included from the top-level Makefile).
#
#   make fuzz                 build and run every target for FUZZ_SECONDS (60) each
#   make fuzz FUZZ_SECONDS=600
#   make fuzz-smoke           20 s per target (CI)
#   make fuzz-long            10^7 executions per target (hours of CPU; the
#                             closing-note run): logs and a summary of execs
#                             and execs/s in $(BUILD)/fuzz/long/
#   make fuzz-build           only build $(BUILD)/fuzz/fuzz_{parse,safetensors,npy,tokenizer,gguf}
#
# One target per format, over the one reader of that format
# (runtime/blockc_rt.c, which blockc and vendored programs share; the
# tokenizer's files: runtime/blockc_tok.c, fuzz_tokenizer.c):
# safetensors and npy read each input from memory, through blockc's layer
# (bcS_open, bcN_read*: same verdict, same message with "path: error: "
# in front) and through the vendored path functions (bcrt_st_load,
# bcrt_npy_read*), and round-trip accepted files through the writers.
#
# Each target is built with clang over the library sources (LIB_SRCS) and
# runtime/blockc_rt.c, instrumented for libFuzzer, ASan and UBSan (libclang-rt-14-dev / libfuzzer-14-dev on Debian 12).  The
# committed seeds in tests/fuzz/corpus/<target>/ are only read; inputs the
# fuzzer discovers go to $(BUILD)/fuzz/corpus-<target>/ and crash inputs to
# $(BUILD)/fuzz/<target>-crash-*.  A crash fails the make; add the minimised
# input (-minimize_crash=1) to tests/fuzz/corpus/<target>/ as a regression.

FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_FLAGS   := -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
                -fno-sanitize-recover=undefined -std=c11 -Wall -Wextra
FUZZ_TARGETS := parse safetensors npy tokenizer gguf
FUZZ_SRCS    := $(LIB_SRCS) runtime/blockc_rt.c
FUZZ_BINS    := $(FUZZ_TARGETS:%=$(BUILD)/fuzz/fuzz_%)
# Per-target options: a dictionary of the graph language's tokens for parse.
FUZZ_OPTS_parse       := -dict=tests/fuzz/blk.dict -max_len=4096
FUZZ_OPTS_safetensors := -max_len=4096
FUZZ_OPTS_npy         := -max_len=1024
FUZZ_OPTS_tokenizer   := -dict=tests/fuzz/tok.dict -max_len=4096
FUZZ_OPTS_gguf        := -max_len=4096

.PHONY: fuzz fuzz-smoke fuzz-long fuzz-build fuzz-deps
fuzz-build: $(FUZZ_BINS)

# clang and its libFuzzer/sanitizer runtimes, installed like the other deps.
FUZZ_STAMP := $(BUILD)/.fuzz-deps-ok
$(FUZZ_STAMP): | $(STAMP)
	@sh tools/deps.sh clang libclang-rt-14-dev
	@touch $@

$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/*.h $(FUZZ_SRCS) compiler/*.h runtime/blockc_rt.h | $(STAMP) $(FUZZ_STAMP)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CPPFLAGS) $(FUZZ_FLAGS) $< $(FUZZ_SRCS) $(LDLIBS) -o $@
# The tokenizer is its own file pair: its target needs nothing else.
$(BUILD)/fuzz/fuzz_tokenizer: tests/fuzz/fuzz_tokenizer.c runtime/blockc_tok.c runtime/blockc_tok.h | $(STAMP) $(FUZZ_STAMP)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CPPFLAGS) $(TOK_CFLAGS) $(FUZZ_FLAGS) $< runtime/blockc_tok.c $(TOK_LIBS) -o $@

# The GGUF target also reads the file's tokenizer (cli/gguf_tok.c, the tokenizer pair).
$(BUILD)/fuzz/fuzz_gguf: tests/fuzz/fuzz_gguf.c tests/fuzz/*.h $(FUZZ_SRCS) cli/gguf_tok.c runtime/blockc_tok.c \
  compiler/*.h runtime/blockc_rt.h runtime/blockc_tok.h cli/*.h | $(STAMP) $(FUZZ_STAMP)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CPPFLAGS) $(CLI_CPPFLAGS) $(TOK_CFLAGS) $(FUZZ_FLAGS) $< $(FUZZ_SRCS) cli/gguf_tok.c \
	  runtime/blockc_tok.c $(LDLIBS) -o $@

# Runs every target even when one crashes, then fails if any did.
fuzz: $(FUZZ_BINS)
	@fail=""; for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(BUILD)/fuzz/corpus-$$t; \
	  case $$t in parse) o="$(FUZZ_OPTS_parse)";; safetensors) o="$(FUZZ_OPTS_safetensors)";; npy) o="$(FUZZ_OPTS_npy)";; \
	    tokenizer) o="$(FUZZ_OPTS_tokenizer)";; gguf) o="$(FUZZ_OPTS_gguf)";; esac; \
	  echo "fuzz_$$t: $(FUZZ_SECONDS) s"; \
	  OPENBLAS_NUM_THREADS=1 ASAN_OPTIONS=detect_leaks=1 ./$(BUILD)/fuzz/fuzz_$$t $$o \
	    -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2560 -print_final_stats=1 \
	    -artifact_prefix=$(BUILD)/fuzz/$$t- \
	    $(BUILD)/fuzz/corpus-$$t tests/fuzz/corpus/$$t > $(BUILD)/fuzz/$$t.log 2>&1 \
	    || fail="$$fail $$t"; \
	  sed -n 's/^stat::number_of_executed_units: */  execs:      /p; s/^stat::average_exec_per_sec: */  execs\/s:    /p; s/^stat::peak_rss_mb: */  peak rss:   /p; s/^#[0-9]*.*DONE *cov: \([0-9]*\).*corp: \([0-9]*\).*/  coverage:   \1 edges, corpus \2 inputs/p' $(BUILD)/fuzz/$$t.log; \
	  grep -E 'ERROR|SUMMARY|Test unit written' $(BUILD)/fuzz/$$t.log | head -5; \
	done; \
	if [ -n "$$fail" ]; then echo "fuzz: crashes in:$$fail (logs: $(BUILD)/fuzz/*.log)"; exit 1; fi; \
	echo "fuzz: no crashes"

fuzz-smoke:
	@$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=20

# The long run: each target until FUZZ_RUNS executions (or FUZZ_LONG_SECONDS,
# a day by default, whichever comes first), one after the other on one core.
# Per-target logs in $(BUILD)/fuzz/long/<target>.log; the summary (target,
# total execs, execs/s, seconds, status) in $(BUILD)/fuzz/long/summary.txt.
FUZZ_RUNS         ?= 10000000
FUZZ_LONG_SECONDS ?= 86400
FUZZ_LONG_DIR     := $(BUILD)/fuzz/long
fuzz-long: $(FUZZ_BINS)
	@mkdir -p $(FUZZ_LONG_DIR); fail=""; \
	printf '%-12s %12s %10s %8s  %s\n' target execs execs/s seconds status > $(FUZZ_LONG_DIR)/summary.txt; \
	for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(BUILD)/fuzz/corpus-$$t; \
	  case $$t in parse) o="$(FUZZ_OPTS_parse)";; safetensors) o="$(FUZZ_OPTS_safetensors)";; npy) o="$(FUZZ_OPTS_npy)";; \
	    tokenizer) o="$(FUZZ_OPTS_tokenizer)";; gguf) o="$(FUZZ_OPTS_gguf)";; esac; \
	  echo "fuzz_$$t: $(FUZZ_RUNS) runs (log: $(FUZZ_LONG_DIR)/$$t.log)"; \
	  s0=$$(date +%s); st=ok; \
	  OPENBLAS_NUM_THREADS=1 ASAN_OPTIONS=detect_leaks=1 ./$(BUILD)/fuzz/fuzz_$$t $$o \
	    -runs=$(FUZZ_RUNS) -max_total_time=$(FUZZ_LONG_SECONDS) -timeout=10 -rss_limit_mb=2560 \
	    -print_final_stats=1 -artifact_prefix=$(FUZZ_LONG_DIR)/$$t- \
	    $(BUILD)/fuzz/corpus-$$t tests/fuzz/corpus/$$t > $(FUZZ_LONG_DIR)/$$t.log 2>&1 || { st=CRASH; fail="$$fail $$t"; }; \
	  execs=$$(sed -n 's/^stat::number_of_executed_units: *//p' $(FUZZ_LONG_DIR)/$$t.log); \
	  rate=$$(sed -n 's/^stat::average_exec_per_sec: *//p' $(FUZZ_LONG_DIR)/$$t.log); \
	  printf '%-12s %12s %10s %8s  %s\n' $$t "$${execs:-?}" "$${rate:-?}" $$(( $$(date +%s) - s0 )) $$st \
	    >> $(FUZZ_LONG_DIR)/summary.txt; \
	done; \
	cat $(FUZZ_LONG_DIR)/summary.txt; \
	if [ -n "$$fail" ]; then echo "fuzz-long: crashes in:$$fail (logs: $(FUZZ_LONG_DIR)/*.log)"; exit 1; fi
