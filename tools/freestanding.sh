#!/bin/sh
# freestanding.sh DIR — checks that the runtime's kernels build alone,
# freestanding (-DBLOCKC_NO_IO -DBLOCKC_NO_BLAS -ffreestanding): compiled for
# a Cortex-M4F (clang --target=thumbv7em-none-eabihf) when clang has that
# target, and always with the host compiler ($CC, -nostdlib).  Each object's
# undefined symbols must be among memcpy, memset and the libm functions the
# kernels call (and, on ARM, the compiler's own __aeabi_* helpers): no
# stdio, errno, malloc or threads.  Prints each object's size; run from the
# project root (`make freestanding`).
# Every runtime build here also passes the strict warnings firmware builds
# use (issue 25): -Wpedantic -Wconversion -Wdouble-promotion -Wcast-qual, as
# errors, and so does the hosted runtime (default and -DBLOCKC_NO_BLAS) with
# the host compiler and with clang; and so do the generated model files:
# tools/strict_emit.sh, run last, emits a representative set of AOT pairs
# with $BLOCKC (default build/blockc) and compiles them so, hosted and for
# the Cortex-M4F.
set -e
dir=${1:-build/freestanding}
BLOCKC=${BLOCKC:-build/blockc}
mkdir -p "$dir"
CC=${CC:-cc}
STRICT="-std=c11 -Wall -Wextra -Wpedantic -Wconversion -Wdouble-promotion -Wcast-qual -Wmissing-prototypes -Wshadow
        -Werror -O2 -Iruntime"
FLAGS="$STRICT -ffreestanding -DBLOCKC_NO_IO -DBLOCKC_NO_BLAS"
for cc in "$CC" clang; do
  command -v "$cc" >/dev/null 2>&1 || continue
  for d in "" -DBLOCKC_NO_BLAS; do
    # shellcheck disable=SC2086
    $cc $STRICT $d -c runtime/blockc_rt.c -o "$dir/blockc_rt-strict.o"
  done
  echo "freestanding: the hosted runtime (default, -DBLOCKC_NO_BLAS) passes the strict warnings with $cc"
done
ALLOWED="memcpy memmove memset sqrt sqrtf pow sin cos exp log"
check() { # OBJ: its undefined symbols, against the allowed ones
  bad=""
  for s in $(nm -u "$1" | awk '{print $NF}'); do
    case " $ALLOWED " in *" $s "*) continue ;; esac
    case "$s" in __aeabi_*) continue ;; esac
    bad="$bad $s"
  done
  if [ -n "$bad" ]; then
    echo "freestanding: $1 needs symbols a freestanding build cannot have:$bad" >&2
    exit 1
  fi
  size "$1" | tail -n 1 | awk -v o="$1" '{printf "freestanding: %s  text %s  data %s  bss %s\n", o, $1, $2, $3}'
}
# shellcheck disable=SC2086
$CC $FLAGS -nostdlib -c runtime/blockc_rt.c -o "$dir/blockc_rt-host.o"
check "$dir/blockc_rt-host.o"
if command -v clang >/dev/null 2>&1 &&
   echo 'int f(void);' | clang --target=thumbv7em-none-eabihf -ffreestanding -x c -c - -o "$dir/probe.o" 2>/dev/null; then
  # shellcheck disable=SC2086
  clang --target=thumbv7em-none-eabihf -mfloat-abi=hard $FLAGS -c runtime/blockc_rt.c \
    -o "$dir/blockc_rt-thumbv7em.o"
  check "$dir/blockc_rt-thumbv7em.o"
else
  echo "freestanding: clang without the thumbv7em-none-eabihf target: host compiler only"
fi
CC="$CC" sh tools/strict_emit.sh "$BLOCKC" "$dir/emit"
