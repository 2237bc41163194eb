# tsan.mk — ThreadSanitizer builds of tests/test_threads.c and tests/test_pool.c
# (included from the top-level Makefile).
#
#   make tsan        build $(BUILD)/tsan/test_{threads,pool} with -fsanitize=thread and run them
#
# Every library and CLI source and the runtime are instrumented; libtcc, OpenBLAS
# and the JIT-generated code are not (TSan sees their memory accesses
# only through the instrumented callers), so OpenBLAS runs single-threaded.
# The runtime's thread pool (runtime/src/pool.c) is instrumented: its workers
# run the instrumented kernels.  A report fails the run (halt_on_error, exitcode 66).

TSAN_CC    ?= clang
TSAN_FLAGS := -g -O1 -fno-omit-frame-pointer -fsanitize=thread -std=c11 -Wall -Wextra
TSAN_SRCS  := $(LIB_SRCS) $(filter-out cli/main.c,$(CLI_SRCS)) runtime/blockc_rt.c runtime/blockc_tok.c
TSAN_TESTS := test_threads test_pool

.PHONY: tsan
tsan: $(TSAN_TESTS:%=$(BUILD)/tsan/%)
	for t in $(TSAN_TESTS); do \
	  OPENBLAS_NUM_THREADS=1 TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1" \
	    ./$(BUILD)/tsan/$$t || exit 1; \
	done

$(BUILD)/tsan/%: tests/%.c tests/testutil.c $(TSAN_SRCS) compiler/*.h cli/*.h runtime/blockc_rt.h tests/*.h | $(STAMP)
	@mkdir -p $(dir $@)
	$(TSAN_CC) $(CPPFLAGS) $(CLI_CPPFLAGS) -Itests $(TSAN_FLAGS) $< tests/testutil.c $(TSAN_SRCS) \
	  $(TEST_LDLIBS) $(LDLIBS) -o $@
