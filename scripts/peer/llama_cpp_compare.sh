#!/usr/bin/env bash
# Peer comparison of speclab against llama.cpp on the same GGUF (SmolLM2-135M-Instruct, Q4_1):
# plain greedy decoding tokens/s and the prompt-lookup speculative speedup, at the same thread
# count. Outside CI: it downloads and builds llama.cpp and its timings depend on the machine.
#
#   scripts/peer/llama_cpp_compare.sh [--threads N] [--tokens N] [--rounds N] [--gamma LIST]
#                                     [--model FILE.gguf] [--omp-wait-policy passive|active|default]
#                                     [--json FILE] [--speclab BUILD_DIR] [--portable]
#                                     [-- SPECLAB_ARGS...]
#
# llama.cpp comes from the llama-cpp-python sdist on the package index (it vendors llama.cpp); its own
# `llama-lookup` and `llama-bench` are built with CMake, CPU only, under build-peer/ (git-ignored)
# and reused on later runs. Arguments after `--` go to `speclab bench decode` unchanged.
# --portable builds llama.cpp for x86-64-v3 (AVX2, FMA, F16C; no AVX-512) instead of the host's
# ISA, to compare with a speclab built with -DSPECLAB_NATIVE=OFF on the same machine.
# Both run under the same OMP_WAIT_POLICY (passive unless told otherwise): with as many threads as
# cores on a machine that other work shares, spinning OpenMP barriers cost both 10-50x.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
threads=2
tokens=128
rounds=3
gamma=3,5,8
wait_policy=passive
model="$repo/data/models/SmolLM2-135M-Instruct.Q4_1.gguf"
speclab_build=""
version=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
peer_dir=${SPECLAB_PEER_DIR:-$repo/build-peer}
jobs=${SPECLAB_PEER_JOBS:-1}
speclab_args=()

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | grep '^#' | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --tokens) tokens=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --gamma) gamma=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --omp-wait-policy) wait_policy=$2; shift 2 ;;
    --json) json_out=$2; shift 2 ;;
    --speclab) speclab_build=$2; shift 2 ;;
    --build-only) build_only=1; shift ;;
    --portable) portable=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; speclab_args=("$@"); break ;;
    *) echo "llama_cpp_compare.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

[[ -f "$model" ]] || { echo "llama_cpp_compare.sh: model file '$model' not found" >&2; exit 2; }
if [[ -n "$speclab_build" && ! -x "$speclab_build/bin/speclab" &&
      ! -x "$speclab_build/speclab" ]]; then
  echo "llama_cpp_compare.sh: no speclab executable under '$speclab_build'" >&2; exit 2
fi

# 1. llama.cpp, from the llama-cpp-python sdist, built once.
src="$peer_dir/llama_cpp_python-$version/vendor/llama.cpp"
bld="$peer_dir/llama.cpp-$version"
isa_flags=(-DGGML_NATIVE=ON)
if [[ -n "${portable:-}" ]]; then
  bld="$bld-x86-64-v3"
  isa_flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
             -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF)
fi
if [[ ! -x "$bld/bin/llama-lookup" || ! -x "$bld/bin/llama-bench" ]]; then
  mkdir -p "$peer_dir/dl"
  sdist="$peer_dir/dl/llama_cpp_python-$version.tar.gz"
  if [[ ! -f "$sdist" ]]; then
    python3 -m pip download --no-binary :all: --no-deps --quiet \
      -d "$peer_dir/dl" "llama-cpp-python==$version"
  fi
  [[ -f "$src/CMakeLists.txt" ]] || tar -xzf "$sdist" -C "$peer_dir"
  cmake -S "$src" -B "$bld" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    "${isa_flags[@]}" -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_EXAMPLES=ON -DCMAKE_RUNTIME_OUTPUT_DIRECTORY="$bld/bin" \
    >"$bld.configure.log" 2>&1 || { tail -30 "$bld.configure.log" >&2; exit 1; }
  nice -n 10 cmake --build "$bld" -j "$jobs" --target llama-lookup llama-bench \
    >"$bld.build.log" 2>&1 || { tail -30 "$bld.build.log" >&2; exit 1; }
fi
[[ -n "${build_only:-}" ]] && { echo "llama.cpp tools in $bld/bin"; exit 0; }

# 2-4. Measurements, interleaved with speclab's, and the side-by-side table.
driver_args=(--llama-bin "$bld/bin" --model "$model" --threads "$threads" --tokens "$tokens"
             --rounds "$rounds" --gamma "$gamma")
[[ -n "$speclab_build" ]] && driver_args+=(--speclab "$speclab_build")
[[ -n "${json_out:-}" ]] && driver_args+=(--json "$json_out")
case "$wait_policy" in
  passive|active) export OMP_WAIT_POLICY=$wait_policy ;;
  default) unset OMP_WAIT_POLICY ;;
  *) echo "llama_cpp_compare.sh: --omp-wait-policy is passive, active or default" >&2; exit 2 ;;
esac
exec python3 "$repo/scripts/peer/llama_cpp_bench.py" "${driver_args[@]}" -- "${speclab_args[@]}"
