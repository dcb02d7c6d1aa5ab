#!/usr/bin/env bash
# cmake/compiler_cache.cmake's choices, each by configuring the project (the
# library alone) into a temporary tree: a wrong HORA_CCACHE value is refused
# naming it; off compiles without ccache; a cache directory that cannot be
# written is passed over under auto and refused under on; and, where ccache
# is on PATH, auto compiles through it into HORA_CCACHE_DIR.
#
#   ccache_choice_test.sh SOURCE_DIR
set -u
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }

configure() {  # tree name, then VAR=value settings for the environment
  local tree=$tmp/$1
  shift
  rm -rf "$tree"
  env "$@" cmake -S "$src" -B "$tree" -G Ninja -DHORA_BUILD_TESTS=OFF -DHORA_BUILD_BENCH=OFF \
    -DHORA_BUILD_PYTHON=OFF -DHORA_WITH_CUDA=off > "$tree.out" 2>&1
}
# (The compile rules, with their launcher, are in CMakeFiles/rules.ninja.)
launches_ccache() { grep -q 'ccache' "$tmp/$1/CMakeFiles/rules.ninja"; }
# CMake wraps its messages: the output with every run of spaces and line
# ends made one space.
said() { tr -s ' \n' '  ' < "$tmp/$1.out" | grep -qF "$2"; }

configure bad HORA_CCACHE=yes && fail "HORA_CCACHE=yes was taken"
said bad "HORA_CCACHE is 'yes': it takes auto, on or off" ||
  fail "HORA_CCACHE=yes: no message naming the value: $(cat "$tmp/bad.out")"

if configure off HORA_CCACHE=off; then
  launches_ccache off && fail "HORA_CCACHE=off still compiles through ccache"
else
  fail "HORA_CCACHE=off: configure failed: $(cat "$tmp/off.out")"
fi

if command -v ccache > /dev/null; then
  # /proc cannot hold a directory: the cache cannot be written.
  if configure unwritable HORA_CCACHE=auto HORA_CCACHE_DIR=/proc/hora-none/ccache; then
    said unwritable "Not compiling through ccache: /proc/hora-none/ccache cannot be written" ||
      fail "auto, unwritable cache: no message: $(cat "$tmp/unwritable.out")"
    launches_ccache unwritable && fail "auto, unwritable cache: still compiles through ccache"
  else
    fail "auto, unwritable cache: configure failed: $(cat "$tmp/unwritable.out")"
  fi
  configure on_unwritable HORA_CCACHE=on HORA_CCACHE_DIR=/proc/hora-none/ccache &&
    fail "HORA_CCACHE=on with an unwritable cache was taken"
  said on_unwritable "HORA_CCACHE=on but ccache's directory /proc/hora-none/ccache cannot be written" ||
    fail "on, unwritable cache: no message: $(cat "$tmp/on_unwritable.out")"

  if configure auto HORA_CCACHE=auto "HORA_CCACHE_DIR=$tmp/cache"; then
    said auto "Compiling through ccache ($tmp/cache)" ||
      fail "auto: no message naming the cache: $(cat "$tmp/auto.out")"
    launches_ccache auto || fail "auto: the compile rules do not launch ccache"
    # One object of the library, compiled: it lands in that cache.
    object=$(ninja -C "$tmp/auto" -t targets all | grep -m1 -o '^[^:]*/status\.cc\.o')
    if [ -z "$object" ] || ! ninja -C "$tmp/auto" "$object" > "$tmp/auto.build" 2>&1; then
      fail "auto: compiling ${object:-status.cc.o} failed: $(cat "$tmp/auto.build")"
    elif [ -z "$(find "$tmp/cache" -type f -not -name '.hora-writable' -not -name '*.conf' | head -1)" ]; then
      fail "auto: $object compiled, but nothing is in $tmp/cache"
    fi
    # The environment's value wins over the tree's cached one: the same
    # tree configured again with HORA_CCACHE=off goes without ccache.
    if env HORA_CCACHE=off cmake "$tmp/auto" > "$tmp/auto_off.out" 2>&1; then
      launches_ccache auto && fail "HORA_CCACHE=off over a configured tree: still compiles through ccache"
    else
      fail "HORA_CCACHE=off over a configured tree: configure failed: $(cat "$tmp/auto_off.out")"
    fi
  else
    fail "auto: configure failed: $(cat "$tmp/auto.out")"
  fi
else
  echo "ccache is not on PATH: the cases that compile through it are not run"
fi

[ "$failed" -eq 0 ] && echo "PASS: ccache choices" || exit 1
