#!/usr/bin/env bash
# scripts/check-layers on a copy of the tree: it passes as the tree is, and
# fails, naming the file, on each deliberate mistake: an include that points
# up the layers (src/), one to a layer the graph does not reach though it is
# lower (src/launch, which uses common only), one from tools/ and one from
# bindings/ to code they may not use, a folder of src/ in no layer, and an
# import cycle in python/hora (also one hidden in a function).
# Usage: check_layers_test.sh REPO_ROOT
set -u
root="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/python" "$dir/scripts"
cp -r "$root/src" "$root/tools" "$root/bindings" "$root/cmake" "$dir/"
cp -r "$root/python/hora" "$dir/python/"
cp "$root/scripts/check-layers" "$dir/scripts/"
pass=0; failed=0
check() { python3 "$dir/scripts/check-layers" "$dir" 2>&1; }
ok() { pass=$((pass + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }
out=$(check) && ok || fail "the tree as it is: $out"
# case FILE LINE WANT: LINE appended to FILE must fail, the output naming WANT.
case_() {
  local file="$dir/$1" line="$2" want="$3"
  cp "$file" "$file.orig"
  printf '%s\n' "$line" >>"$file"
  if out=$(check); then
    fail "$1 with '$line' passed"
  elif ! grep -qF -- "$want" <<<"$out"; then
    fail "$1 with '$line': the output does not name '$want': $out"
  else
    ok
  fi
  mv "$file.orig" "$file"
}
case_ src/common/status.cc '#include "api/session_impl.h"' \
  'common includes "api/session_impl.h": a header of the api layer, which common does not reach'
case_ src/launch/rank_layout.cc '#include "net/socket.h"' \
  'launch includes "net/socket.h": a header of the net layer, which launch does not reach'
case_ tools/horarun/main.cc '#include "api/session_impl.h"' \
  'tools/horarun includes "api/session_impl.h"'
case_ bindings/python/module.cc '#include "tools/horarun/job.h"' \
  "bindings/python includes \"tools/horarun/job.h\": 'tools' is no layer"
case_ python/hora/torch/collective_ops.py 'from hora.torch import reduce_ops' \
  'import cycle hora.torch.collective_ops -> hora.torch.reduce_ops -> hora.torch.collective_ops'
case_ python/hora/common/basics.py $'def f():\n    from hora.common import process_sets' \
  'import cycle hora.common.basics -> hora.common.process_sets -> hora.common.basics'
mkdir "$dir/src/extra" && echo '#pragma once' >"$dir/src/extra/x.h"
out=$(check) && fail "src/extra passed" || { grep -qF "folder src/extra is in no layer" <<<"$out" && ok || fail "src/extra: $out"; }
rm -r "$dir/src/extra"
out=$(check) && ok || fail "the tree restored: $out"
echo "$pass passed, $failed failed"
[ "$failed" -eq 0 ]
