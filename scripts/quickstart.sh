#!/usr/bin/env bash
# Installs what is missing, builds speclab and runs the built-in default experiment
# (`speclab demo`), which writes results/demo.h5 and prints a summary. Extra arguments go to demo.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"${SPECLAB_JOBS:-2}" --target speclab
./build/experiments/speclab demo --out "${SPECLAB_RESULTS:-results}" "$@"
