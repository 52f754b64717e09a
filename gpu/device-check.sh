#!/usr/bin/env bash
# One-shot check on a machine with a CUDA device (sm_90): configure, build, run the `gpu` tests
# against the CPU reference (kernels, cuBLAS, the device LinearSoftmax model and decoding loop),
# run the gpu test binary under compute-sanitizer (memcheck, racecheck, synccheck) where it is
# installed, run `speclab bench gpu --json` and print short tables. Run from the repository root;
# about 5 minutes on an H200 (the benchmark itself stays under ~90 s).
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
    # racecheck instruments every shared-memory access: leave out the 128k-vocabulary case and
    # the decoding loop (thousands of launches of kernels racechecked by their own tests; its own
    # kernels use no shared memory). memcheck and synccheck run everything.
    [ "$tool" = racecheck ] && filter='-*LargeVocab*:SpeculativeDecodeGpu.*'
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
bench_json=/tmp/speclab-bench-gpu.json
build-device/bin/speclab bench gpu --json | tee "$bench_json"
echo
/usr/bin/python3 - "$bench_json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
if r.get("device") is None:
    print("bench gpu:", r.get("message")); sys.exit(0)
print(f"device {r['device']}, device-to-device copy {r['copy_gbps']:.0f} GB/s (read + write)")
# A fused row (a verifier on logits) also shows its speed over the two kernels on the same inputs.
seconds = {(k["kernel"], k["input"], k["batch"], k["gamma"], k["vocab"]): k["seconds"]
           for k in r["kernels"]}
print(f"{'kernel':35} {'input':11} {'B':>3} {'γ':>2} {'V':>7} {'GB/s':>8} {'vs copy':>8} "
      f"{'vs 2 kernels':>12}")
for k in r["kernels"]:
    if k["batch"] == 64:
        mark = "" if k["ratio_to_copy"] >= 0.8 else "  < 80% goal"
        two = seconds.get(("probs_from_logits + " + k["kernel"], k["input"], k["batch"],
                           k["gamma"], k["vocab"]))
        versus = f"{two / k['seconds']:11.2f}x" if two and k["input"] != "probs_fp32" else ""
        print(f"{k['kernel']:35} {k['input']:11} {k['batch']:>3} {k['gamma']:>2} {k['vocab']:>7} "
              f"{k['gbps']:8.0f} {100 * k['ratio_to_copy']:7.0f}% {versus:>12}{mark}")
for d in r["decode"]:
    print(f"LSM decode B={d['batch']}: device {d['gpu_tokens_per_s']:.0f} tokens/s, "
          f"core {d['core_tokens_per_s']:.0f} tokens/s ({d['speedup_over_core']:.1f}x)")
PY
echo
build-device/bin/speclab bench verify --json
