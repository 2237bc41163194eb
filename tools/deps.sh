#!/bin/sh
# deps.sh PKG... — make sure the Debian packages blockc needs are installed.
# As root it installs what is missing with apt-get; otherwise it prints the
# exact command to run and fails, so a build never half-works.  Only `make
# deps` (and `make demo`, a missing header, pydeps, docs) run it: a plain
# `make` never asks dpkg.
if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "deps: not a Debian system (no dpkg-query); install the equivalents of:" >&2
  echo "  $*" >&2
  echo "deps: then run make again (make finds the libraries with pkg-config or -l)" >&2
  exit 1
fi
missing=""
for p in "$@"; do
  st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)
  case "$st" in
    *"install ok installed"*) ;;
    *) missing="$missing $p" ;;
  esac
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
  echo "deps: installing$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends $missing >/dev/null || {
    echo "deps: apt-get install failed for:$missing" >&2; exit 1; }
else
  echo "deps: missing Debian packages:$missing" >&2
  echo "deps: run this, then make again:" >&2
  echo "  sudo apt-get install -y$missing" >&2
  exit 1
fi
