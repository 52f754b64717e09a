#!/usr/bin/env bash
# Installs what is missing, builds everything and runs the test suite (all labels but `slow`;
# GPU tests skip where no device is present). Extra arguments go to ctest, e.g. `-L unit`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"${SPECLAB_JOBS:-2}"
ctest --test-dir build -LE slow --output-on-failure -j"${SPECLAB_JOBS:-2}" "$@"
