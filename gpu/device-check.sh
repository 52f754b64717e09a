#!/usr/bin/env bash
# One-shot check on a machine with a CUDA device (sm_90): configure, build, run the `gpu` tests
# against the CPU reference, run the gpu test binary under compute-sanitizer (memcheck, racecheck,
# synccheck) where it is installed, and print a short table. Run from the repository root.
set -uo pipefail
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
scripts/install-deps.sh >/dev/null
cmake -S . -B build-device -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
cmake --build build-device -j"$(nproc)" --target speclab_gpu_tests speclab 2>&1 | tail -3
ctest --test-dir build-device -L '^gpu$' --output-on-failure 2>&1 | tee /tmp/speclab-gpu-ctest.log
echo
echo "test                                               result"
grep -E "Test +#[0-9]+:" /tmp/speclab-gpu-ctest.log |
  sed -E 's/.*Test +#[0-9]+: ([^ ]+) \.+ *\*{0,3}([A-Za-z]+).*/\1 \2/' |
  awk '{ printf "%-50s %s\n", $1, $2 }'

binary=build-device/tests/speclab_gpu_tests
echo
if command -v compute-sanitizer >/dev/null 2>&1 && [ -x "$binary" ]; then
  echo "compute-sanitizer tool   result   log"
  for tool in memcheck racecheck synccheck; do
    filter='*'
    # racecheck instruments every shared-memory access: leave out the 128k-vocabulary case.
    [ "$tool" = racecheck ] && filter='-*LargeVocab*'
    log=/tmp/speclab-gpu-$tool.log
    if compute-sanitizer --tool "$tool" --error-exitcode 3 "$binary" --gtest_filter="$filter" \
      >"$log" 2>&1; then
      result=clean
    else
      result="FAIL($?)"
    fi
    summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1)
    printf "%-24s %-8s %s  %s\n" "$tool" "$result" "$log" "$summary"
  done
else
  echo "compute-sanitizer not found (or $binary missing): memcheck/racecheck/synccheck skipped"
fi
echo
build-device/experiments/speclab bench verify --json
