#!/usr/bin/env bash
# One-shot check on a machine with a CUDA device (sm_90): configure, build, run the `gpu` tests
# against the CPU reference, and print a short table. Run from the repository root.
set -uo pipefail
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
scripts/install-deps.sh >/dev/null
cmake -S . -B build-device -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
cmake --build build-device -j"$(nproc)" 2>&1 | tail -3
ctest --test-dir build-device -L gpu --output-on-failure 2>&1 | tee /tmp/speclab-gpu-ctest.log
echo
echo "test                                   result"
grep -E "Test +#[0-9]+:" /tmp/speclab-gpu-ctest.log |
  sed -E 's/.*Test +#[0-9]+: ([^ ]+) \.+ *\*{0,3}([A-Za-z]+).*/\1 \2/' |
  awk '{ printf "%-38s %s\n", $1, $2 }'
echo
build-device/experiments/speclab bench verify --json
