#!/usr/bin/env bash
# Installs what is missing, builds everything, fetches the real model the `model` tests read
# (SmolLM2-135M, ~98 MB, once; offline they skip with a message) and runs the test suite (all
# labels but `slow`; GPU tests skip where no device is present). Extra arguments go to ctest,
# e.g. `-L unit`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"${SPECLAB_JOBS:-2}"
./build/bin/speclab fetch-model smollm2-135m ||
  echo "speclab: the model download failed (offline?); the model tests will skip, saying so"
ctest --test-dir build -LE slow --output-on-failure -j"${SPECLAB_JOBS:-2}" "$@"
