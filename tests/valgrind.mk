# valgrind.mk — blockc under Memcheck (included from the top-level Makefile).
#
#   make valgrind
#
# Builds a separate blockc in $(VG_BUILD) with the runtime at -O2 instead
# of -O3 -march=native: valgrind 3.19 cannot decode AVX-512, and the native
# build dies with SIGILL in the runtime's kernels.  Then runs check, dump,
# emit-c, run (interp and jit, with and without --weights/--input/--output)
# and error paths under Memcheck, failing on any memory error and on any
# definite or indirect leak.  Inputs come from committed files (tests/bad/:
# st_valid.safetensors and npy_valid.npy for tests/bad/ln.blk) and from an
# earlier run's --output (tiny.blk's output has its input's shape).
#
# Each command's exit status is checked: 0 for the success paths, 1 or 2
# for the error paths, and 99 (valgrind's --error-exitcode) never, so a
# valgrind error cannot be mistaken for blockc's own exit 1.
# OpenBLAS runs single-threaded (OPENBLAS_NUM_THREADS=1): its worker threads
# are started at load time and only ever "still reachable", but one thread
# keeps the run deterministic and fast.  The tokenizer's regexes run on
# PCRE2's interpreter here (-DBLOCKC_TOK_NO_JIT): valgrind cannot follow
# the JIT's generated code.  tests/valgrind.supp holds
# suppressions for third-party frames only, each explained there.

VG_BUILD := $(BUILD)-valgrind
VG_OUT   := $(VG_BUILD)/vg
VALGRIND := OPENBLAS_NUM_THREADS=1 valgrind -q --error-exitcode=99 --leak-check=full \
            --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect \
            --suppressions=tests/valgrind.supp
VG_BLOCKC := $(VG_BUILD)/blockc

.PHONY: valgrind
valgrind:
	@$(MAKE) --no-print-directory BUILD=$(VG_BUILD) RTOPT=-O2 SAN= CFLAGS="$(CFLAGS) -DBLOCKC_TOK_NO_JIT" $(VG_BLOCKC)
	@rm -rf $(VG_OUT) && mkdir -p $(VG_OUT)
	@set -e; fails=0; \
	vg() { want=$$1; shift; \
	  $(VALGRIND) --log-file=$(VG_OUT)/log.txt ./$(VG_BLOCKC) "$$@" > /dev/null 2> $(VG_OUT)/stderr.txt && rc=0 || rc=$$?; \
	  if [ $$rc -eq $$want ] && [ ! -s $(VG_OUT)/log.txt ]; then echo "  ok   (exit $$rc) blockc $$*"; \
	  else echo "  FAIL (exit $$rc, want $$want) blockc $$*"; cat $(VG_OUT)/log.txt $(VG_OUT)/stderr.txt; fails=$$((fails + 1)); fi; }; \
	echo "valgrind: $(VG_BLOCKC)"; \
	vg 0 check graphs/tiny.blk; \
	vg 0 tokenize --tokenizer tests/data/tok/sp.json "hi é <s>x" --add-special; \
	vg 0 detokenize --tokenizer tests/data/tok/sp.json 1 7 3 8 9 10; \
	vg 0 tokenize --tokenizer tests/data/tok/bytelevel.json --file tests/data/tok/bytelevel.json; \
	vg 0 tokenize --tokenizer tests/data/tok/split.json a--b-a; \
	vg 1 tokenize --tokenizer tests/fuzz/corpus/tokenizer/regress-id-1e62.json x; \
	vg 1 detokenize --tokenizer tests/data/tok/sp.json 7 99; \
	vg 2 tokenize hi; \
	vg 0 check graphs/residual.blk -D N=2; \
	vg 0 dump graphs/tiny.blk --after plan; \
	vg 0 dump --passes; \
	vg 0 emit-c graphs/tiny.blk; \
	vg 0 run graphs/tiny.blk --backend interp --output $(VG_OUT)/y_interp.npy; \
	vg 0 run graphs/tiny.blk --backend jit --seed 3 --output $(VG_OUT)/y_jit.npy; \
	vg 0 run graphs/tiny.blk --backend jit --input $(VG_OUT)/y_jit.npy --output $(VG_OUT)/y2.npy; \
	vg 0 run tests/bad/ln.blk --weights tests/bad/st_valid.safetensors --input tests/bad/npy_valid.npy --output $(VG_OUT)/y_ln.npy; \
	vg 0 run tests/bad/ln.blk --backend interp --weights tests/bad/st_valid.safetensors --input tests/bad/npy_valid.npy; \
	vg 0 run graphs/post_ln.blk -D N=1 -D T=3 -D D=16 -D H=2 -D F=32; \
	vg 0 check tests/bad/cr_only.blk; \
	vg 0 run tests/bad/ln.blk --weights tests/bad/st_many_extra.safetensors --allow-extra --output $(VG_OUT)/y_extra.npy; \
	vg 1 run tests/bad/ln.blk --weights tests/bad/st_many_extra.safetensors; \
	vg 1 run tests/bad/ln.blk --weights tests/bad/st_gap.safetensors; \
	vg 1 run tests/bad/ln.blk --weights tests/bad/st_escape_name.safetensors; \
	vg 1 run tests/bad/ln.blk --input tests/bad/npy_shape_first.npy; \
	vg 1 check tests/bad/escape_in_comment.blk; \
	vg 1 run tests/bad/params_huge.blk; \
	vg 0 weights graphs/tiny.blk -o $(VG_OUT)/w_tiny.safetensors --seed 2; \
	vg 0 run graphs/tiny.blk --weights $(VG_OUT)/w_tiny.safetensors; \
	vg 0 dot graphs/tiny.blk --after inplace -o $(VG_OUT)/tiny.dot; \
	vg 0 dot graphs/pre_ln.blk -D N=2; \
	vg 0 grad graphs/tiny.blk -o $(VG_OUT)/g_tiny.safetensors --dx $(VG_OUT)/dx.npy; \
	vg 0 grad graphs/tiny.blk --backend jit -o $(VG_OUT)/g_tiny_jit.safetensors --dx $(VG_OUT)/dx_jit.npy; \
	vg 0 grad graphs/tiny.blk --backend interp -o $(VG_OUT)/g_tiny_interp.safetensors; \
	vg 0 grad graphs/residual.blk -D N=2 -D D=16 -D H=2 -D F=32 --backend jit -o $(VG_OUT)/g_res.safetensors; \
	vg 0 grad graphs/llama.blk -D N=1 -D D=16 -D H=2 -D KV=1 -D F=24 -D T=4 -o $(VG_OUT)/g_llama.safetensors; \
	vg 0 grad graphs/transformer.blk -D N=1 -D D=16 -D H=2 -D F=24 -D T=5 -D S=4 --backend jit -o $(VG_OUT)/g_tr.safetensors; \
	vg 0 analyze graphs/post_ln.blk graphs/residual.blk -D N=2 -D D=16 -D H=2 -D F=32 -D T=4 --json; \
	vg 0 run graphs/decoder_pre_ln.blk -D N=1 -D T=5 -D S=3 -D D=16 -D H=2 -D F=32; \
	vg 2 grad graphs/tiny.blk; \
	vg 2 weights graphs/tiny.blk; \
	vg 2 dot graphs/tiny.blk --after no-such-pass; \
	vg 1 check tests/bad/cycle.blk; \
	vg 1 check tests/bad/nest_calls.blk; \
	vg 1 check tests/bad/nul_byte.blk; \
	vg 1 run tests/bad/ln.blk --weights tests/bad/st_overlap.safetensors --output $(VG_OUT)/no.npy; \
	vg 1 run tests/bad/ln.blk --weights tests/bad/st_missing.safetensors; \
	vg 1 run tests/bad/ln.blk --weights tests/bad/st_bad_json.safetensors; \
	vg 1 run tests/bad/ln.blk --input tests/bad/npy_f8.npy; \
	vg 1 run tests/bad/ln.blk --input tests/bad/npy_wrong_shape.npy; \
	vg 1 run tests/bad/ln.blk --output $(VG_OUT)/no/such/dir/y.npy; \
	vg 1 run graphs/tiny.blk --input $(VG_OUT)/missing.npy; \
	vg 2 run graphs/tiny.blk --frobnicate; \
	vg 2 run graphs/tiny.blk -D X; \
	vg 2 dump graphs/tiny.blk --after no-such-pass; \
	if [ -e $(VG_OUT)/no.npy ]; then echo "  FAIL: an --output was written by a failing run"; fails=$$((fails + 1)); fi; \
	if [ $$fails -ne 0 ]; then echo "valgrind: $$fails failing command(s)"; exit 1; fi; \
	echo "valgrind: no errors, no leaks"
