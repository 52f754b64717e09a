#!/usr/bin/env bash
# Two builds of speclab (e.g. -march=native and -DSPECLAB_NATIVE=OFF, x86-64-v3) must decode the
# same tokens: every kernel is written to round identically at every vector width, so a
# difference means a path that computes other bits on one ISA (a fused multiply-add the compiler
# introduced, a reduction in another order). Runs tests/data/same_bits_sweep.toml at T = 1, where
# a changed probability bit moves sampled tokens, for the LinearSoftmax pair and, when
# data/models holds it, SmolLM2-135M with prompt lookup; compares the speculative and the plain
# tokens of every request.
#
#   tests/isa/same_tokens.sh BUILD_A BUILD_B
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[[ $# -eq 2 ]] || { echo "usage: same_tokens.sh BUILD_A BUILD_B" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
config="$repo/tests/data/same_bits_sweep.toml"
pairs=("lsm-target lsm-draft")
if [[ -f "$repo/data/models/SmolLM2-135M-Instruct.Q4_1.gguf" ]]; then
  pairs+=("smollm2-135m prompt-lookup-smollm2")
else
  echo "same_tokens.sh: no SmolLM2-135M file in data/models; checking the LinearSoftmax pair only"
fi
for build in "$@"; do
  exe="$build/bin/speclab"
  [[ -x "$exe" ]] || { echo "same_tokens.sh: no speclab executable at $exe" >&2; exit 2; }
  for pair in "${pairs[@]}"; do
    read -r target draft <<<"$pair"
    "$exe" run -q "$config" --set "target.model=\"$target\"" --set "draft.model=\"$draft\"" \
      -o "$work/$(basename "$build")-$target" >/dev/null
  done
done
/usr/bin/python3 - "$work" "$(basename "$1")" "$(basename "$2")" "${pairs[@]}" <<'PY'
import glob, sys
import h5py, numpy as np
work, a, b, pairs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
bad = 0
for pair in pairs:
    target = pair.split()[0]
    for name in ("sequences/tokens", "baseline/sequences/tokens"):
        got = []
        for build in (a, b):
            (path,) = glob.glob(f"{work}/{build}-{target}/*.h5")
            with h5py.File(path) as f:
                got.append(np.asarray(f[name]))
        same = got[0].shape == got[1].shape and bool((got[0] == got[1]).all())
        print(f"{target} {name}: {len(got[0])} tokens, {'the same' if same else 'DIFFERENT'} in {a} and {b}")
        bad += not same
sys.exit(1 if bad else 0)
PY
