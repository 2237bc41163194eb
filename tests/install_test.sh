#!/bin/sh
# install_test.sh — `make install-test`: blockc as a user gets it.
#
# Installs into a temporary prefix (DESTDIR-free, PREFIX=$T/prefix), checks
# the file list, then moves the installed tree to $T/moved so neither the
# compiled-in prefix nor the checkout is reachable, and from /tmp with
# BLOCKC_RUNTIME_DIR unset:
#   1. builds an embedding program with `cc app.c $(pkg-config --cflags
#      --libs blockc)` (shared library) and with the static archive
#      (`pkg-config --static`), runs both on the installed residual graph;
#   2. runs `blockc run --backend aot` from the installed binary (which must
#      find share/blockc/runtime next to itself) and compares its output
#      with the JIT's;
#   3. builds a tokenizer program against the library and vendored (the
#      installed blockc_tok.c with -lpcre2-8 -lutf8proc);
#   4. `make uninstall` leaves nothing of blockc behind.
# Prints one line per step; on failure the step's output and exit 1.
set -u
here=$(pwd)
BUILD=${BUILD:-build}
MAKE=${MAKE:-make}
T=$(mktemp -d "${TMPDIR:-/tmp}/blockc-install.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
log=$T/log
fail() { echo "install-test: FAIL: $1"; cat "$log"; exit 1; }
ok() { echo "install-test: ok   $1"; }

$MAKE --no-print-directory -s install PREFIX="$T/prefix" >"$log" 2>&1 || fail "make install"
want="bin/blockc include/blockc.h include/blockc_tok.h lib/libblockc.a lib/libblockc.so lib/libblockc.so.0
lib/pkgconfig/blockc.pc share/blockc/runtime/blockc_rt.c share/blockc/runtime/blockc_rt.h
share/blockc/runtime/blockc_tok.c share/blockc/runtime/blockc_tok.h
share/blockc/graphs/residual.blk share/man/man1/blockc.1"
for f in $want; do [ -e "$T/prefix/$f" ] || { echo "missing $f" >"$log"; fail "installed files"; }; done
ok "make install PREFIX=$T/prefix ($(cd "$T/prefix" && find . -type f -o -type l | wc -l) files)"
# The installed binary's last-resort runtime path is the prefix, not the checkout.
if grep -q -a -F "$here/runtime" "$T/prefix/bin/blockc"; then
  echo "bin/blockc contains $here/runtime" >"$log"; fail "installed binary refers to the checkout"
fi

# The library is the library: no CLI object, and the .so exports the API only.
cli_objs=$(ar t "$T/prefix/lib/libblockc.a" | grep -E '^(main|common|run|aot_cmds|stepwise|bench|analyze|tools)\.o$')
exports=$(nm -D --defined-only "$T/prefix/lib/libblockc.so" | awk '$2 ~ /^[TDB]$/ {print $3}' |
          grep -v '^blockc_')
[ -z "$cli_objs" ] && [ -z "$exports" ] ||
  { echo "CLI objects: $cli_objs; exports besides blockc_*: $exports" >"$log"; fail "library contents"; }
ok "libblockc.a has no CLI object; libblockc.so exports $(nm -D --defined-only "$T/prefix/lib/libblockc.so" | grep -c ' T blockc_') blockc_* functions only"

# DESTDIR staging puts the same tree under DESTDIR, and uninstall empties it.
$MAKE --no-print-directory -s install DESTDIR="$T/stage" PREFIX=/opt/blockc >"$log" 2>&1 &&
  [ -x "$T/stage/opt/blockc/bin/blockc" ] &&
  grep -q '^prefix=/opt/blockc$' "$T/stage/opt/blockc/lib/pkgconfig/blockc.pc" &&
  $MAKE --no-print-directory -s uninstall DESTDIR="$T/stage" PREFIX=/opt/blockc >>"$log" 2>&1 &&
  [ -z "$(find "$T/stage" -type f -o -type l)" ] || fail "DESTDIR install/uninstall"
ok "DESTDIR=$T/stage install + uninstall (nothing left)"

# Move the tree: the binary's compiled-in paths now point nowhere.
mv "$T/prefix" "$T/moved"
P=$T/moved
sed -i "s|^prefix=.*|prefix=$P|" "$P/lib/pkgconfig/blockc.pc"
cp "$here/tests/install_app.c" "$T/app.c"
cd /tmp || exit 1
unset BLOCKC_RUNTIME_DIR
export PKG_CONFIG_PATH="$P/lib/pkgconfig" BLOCKC_CACHE_DIR="$T/cache" OPENBLAS_NUM_THREADS=1

cc -std=c11 -Wall -Wextra -Werror "$T/app.c" $(pkg-config --cflags --libs blockc) -lm -o "$T/app" >"$log" 2>&1 ||
  fail "cc app.c \$(pkg-config --cflags --libs blockc)"
LD_LIBRARY_PATH="$P/lib" "$T/app" "$P/share/blockc/graphs/tiny.blk" >"$T/app.out" 2>>"$log" ||
  { cat "$T/app.out" >>"$log"; fail "embedding program (shared)"; }
LD_LIBRARY_PATH="$P/lib" ldd "$T/app" | grep -q "$P/lib/libblockc.so" || { ldd "$T/app" >>"$log"; fail "app uses the installed libblockc.so"; }
ok "cc app.c \$(pkg-config --cflags --libs blockc): $(cat "$T/app.out")"

static_libs=$(pkg-config --static --libs blockc | sed 's/-lblockc/-l:libblockc.a/')
cc -std=c11 "$T/app.c" $(pkg-config --cflags blockc) $static_libs -lm -o "$T/app_static" >"$log" 2>&1 ||
  fail "cc app.c with pkg-config --static (libblockc.a)"
"$T/app_static" "$P/share/blockc/graphs/tiny.blk" >"$T/app_static.out" 2>>"$log" ||
  fail "embedding program (static)"
cmp -s "$T/app.out" "$T/app_static.out" || fail "static and shared programs disagree"
ok "the same against libblockc.a (pkg-config --static): same output"

# The tokenizer: through the library (pkg-config), and vendored (the file
# pair from share/blockc/runtime with PCRE2 and utf8proc, nothing of blockc).
cp "$here/tests/data/tok/sp.json" "$T/sp.json"
cat > "$T/tok.c" <<'TOKEOF'
#include <stdio.h>
#include <stdlib.h>
#include <blockc_tok.h>
int main(int argc, char **argv) {
  char err[512];
  blockc_tokenizer *t = argc == 3 ? blockc_tokenizer_load(argv[1], err, sizeof err) : NULL;
  int32_t *ids;
  size_t n;
  if (!t || blockc_tokenizer_encode(t, argv[2], 2, 1, &ids, &n, err, sizeof err)) return 1;
  for (size_t i = 0; i < n; i++) printf("%s%d", i ? " " : "", ids[i]);
  printf("\n");
  free(ids);
  blockc_tokenizer_free(t);
  return 0;
}
TOKEOF
cc -std=c11 -Wall -Wextra -Werror "$T/tok.c" $(pkg-config --cflags --libs blockc) -o "$T/tok" >"$log" 2>&1 ||
  fail "cc tok.c \$(pkg-config --cflags --libs blockc) (the tokenizer through libblockc)"
[ "$(LD_LIBRARY_PATH="$P/lib" "$T/tok" "$T/sp.json" hi 2>>"$log")" = "1 7" ] || fail "tokenizer program (libblockc)"
cc -std=c11 -Wall -Wextra -Werror -I"$P/share/blockc/runtime" "$T/tok.c" "$P/share/blockc/runtime/blockc_tok.c" \
  -lpcre2-8 -lutf8proc -o "$T/tok_vendored" >"$log" 2>&1 || fail "cc tok.c blockc_tok.c -lpcre2-8 -lutf8proc (vendored)"
[ "$("$T/tok_vendored" "$T/sp.json" hi 2>>"$log")" = "1 7" ] || fail "tokenizer program (vendored)"
ok "tokenizer: through libblockc (pkg-config) and vendored (cc tok.c blockc_tok.c -lpcre2-8 -lutf8proc): 1 7"

"$P/bin/blockc" run "$P/share/blockc/graphs/tiny.blk" --backend aot --seed 3 --output "$T/y.npy" \
  >"$log" 2>&1 || fail "installed blockc run --backend aot (checkout unreachable)"
grep -q "(built)" "$log" && grep -q "^output \[2, 5, 8\]" "$log" && [ -s "$T/y.npy" ] ||
  fail "installed blockc run --backend aot: no module built or no output"
ok "$P/bin/blockc run --backend aot from /tmp, BLOCKC_RUNTIME_DIR unset"
if command -v man >/dev/null; then
  MANPATH="$P/share/man" man -w blockc 2>"$log" | grep -q "$P/share/man/man1/blockc.1" || fail "man -w blockc"
  ok "man blockc finds the installed page"
fi

cd "$here" || exit 1
mv "$P" "$T/prefix"
$MAKE --no-print-directory -s uninstall PREFIX="$T/prefix" >"$log" 2>&1 || fail "make uninstall"
left=$(find "$T/prefix" -type f -o -type l)
[ -z "$left" ] || { echo "$left" >"$log"; fail "make uninstall left files"; }
ok "make uninstall: no file left"
