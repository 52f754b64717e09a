#!/usr/bin/env bash
# Installs what is missing, builds speclab and runs the main job on its built-in default: the
# quickstart sweep (experiments/configs/quickstart.toml: the headline LinearSoftmax pair at batch
# sizes 1, 4, 16 × draft lengths 1, 2, 4, each beside plain decoding and the planner's predicted
# speedup). It writes results/quickstart/<point>.h5 and summary.csv and prints the summary table. Run again, it reuses the finished points (--resume).
# Extra arguments go to `speclab run`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"${SPECLAB_JOBS:-2}" --target speclab
./build/bin/speclab run experiments/configs/quickstart.toml --resume "$@"
