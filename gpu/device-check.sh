#!/usr/bin/env bash
# The device check (docs/device-check.md), in three modes:
#   gpu/device-check.sh --prepare           here, without a device: build for sm_90 (portable host
#                                           code), gather the binaries and the non-CUDA shared
#                                           libraries they load into device-carry/, record ptxas
#                                           register/spill/stack/shared-memory use per kernel.
#   gpu/device-check.sh [--out DIR]         on the device machine: run the carried binaries (no
#                                           install, no build), every step under its own timeout,
#                                           everything under DIR; exit status 1 if any check fails.
#   gpu/device-check.sh --dry-run [--out DIR] [--stub-fail]
#                                           the device half with the device parts stubbed (no
#                                           device, no carry needed): timeouts, DIR, summary and
#                                           exit status; --stub-fail makes the stubbed tests fail.
# The device half's limits add up to 418 s (plus 2 s grace per step): 7.5 minutes at most. Its
# outputs are at most 6 files, even when it is killed: summary.txt (also printed),
# device-check.log (every step's output, appended as it runs), gpu-tests.json (gtest), bench-gpu.json,
# ncu.csv and ptxas.txt.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
root=$PWD

mode=device
out=${OUT:-$root/device-check-out}
carry=$root/device-carry
stub_fail=0
while [ $# -gt 0 ]; do
  case $1 in
    --prepare) mode=prepare ;;
    --dry-run) mode=dry-run ;;
    --stub-fail) stub_fail=1 ;;
    --out)
      [ $# -ge 2 ] || { echo "device-check.sh: --out needs a directory" >&2; exit 2; }
      out=$2
      shift
      ;;
    --carry)
      [ $# -ge 2 ] || { echo "device-check.sh: --carry needs a directory" >&2; exit 2; }
      carry=$2
      shift
      ;;
    -h | --help)
      sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "device-check.sh: unknown argument '$1' (see --help)" >&2
      exit 2
      ;;
  esac
  shift
done

# Shared libraries never carried: the CUDA libraries (the device's own CUDA 13 ones are found at
# run time) and glibc's, which belong to the system's loader.
never_carried='^(libcuda|libcudart|libcublas|libcublasLt|libnvrtc|libnvJitLink|libcupti|libnvidia-|libc\.so|libm\.so|libmvec|libdl\.so|libpthread|librt\.so|libresolv|libutil\.so|ld-linux|linux-vdso)'
carry_limit_mib=58

# ---------------------------------------------------------------------------------------------
# --prepare
# ---------------------------------------------------------------------------------------------
if [ "$mode" = prepare ]; then
  build=${SPECLAB_CARRY_BUILD:-$root/build-carry}
  jobs=${SPECLAB_JOBS:-2}
  launcher=()
  if command -v ccache >/dev/null 2>&1; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache
      -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  fi
  command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ] || {
    echo "device-check.sh --prepare: nvcc not found (needs the CUDA toolkit to build for sm_90)" >&2
    exit 2
  }
  # Ninja (Debian's ninja-build, installed by scripts/install-deps.sh): it prints each command's
  # output in one piece, so ptxas's report of one kernel is never interleaved with another's
  # (make -j interleaves them line by line).
  command -v ninja >/dev/null 2>&1 || {
    echo "device-check.sh --prepare: ninja not found (apt-get install ninja-build; the ptxas" \
      "report needs each kernel's lines in one piece)" >&2
    exit 2
  }
  generator=(-G Ninja)
  if [ -f "$build/CMakeCache.txt" ] &&
    ! grep -q "CMAKE_GENERATOR:INTERNAL=${generator[1]:-Unix Makefiles}" "$build/CMakeCache.txt"; then
    rm -rf "$build"  # configured with another generator
  fi
  mkdir -p "$build"
  # -Xptxas -v: ptxas reports every kernel's registers, stack, spills and shared memory.
  # $ORIGIN/../lib as DT_RPATH (not RUNPATH: it then also serves the libraries' own dependencies),
  # so that the carried binaries find the carried libraries with no LD_LIBRARY_PATH, which would
  # also reach compute-sanitizer, ncu and python3 on the device.
  cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DSPECLAB_NATIVE=OFF -DCMAKE_CUDA_FLAGS="-Xptxas -v" '-DCMAKE_BUILD_RPATH=$ORIGIN/../lib' \
    -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags "${launcher[@]}" >"$build/prepare-configure.log" 2>&1 ||
    { tail -20 "$build/prepare-configure.log"; echo "device-check.sh --prepare: configure failed" >&2; exit 1; }
  grep -q "speclab: CUDA enabled" "$build/prepare-configure.log" || {
    echo "device-check.sh --prepare: CMake did not enable CUDA ($build/prepare-configure.log)" >&2
    exit 1
  }
  # The ptxas report of a cached object is replayed by ccache; touch nothing, but make sure every
  # CUDA object is compiled (or replayed) in this build's log: remove them first.
  find "$build" -name '*.cu.o' -delete 2>/dev/null
  echo "device-check.sh --prepare: building speclab and speclab_gpu_tests in $build (-j$jobs)"
  cmake --build "$build" -j"$jobs" --target speclab speclab_gpu_tests >"$build/prepare-build.log" 2>&1 ||
    { grep -E "error|Error" "$build/prepare-build.log" | head -20; echo "device-check.sh --prepare: build failed ($build/prepare-build.log)" >&2; exit 1; }

  rm -rf "$carry"
  mkdir -p "$carry/bin" "$carry/lib"
  cp "$build/bin/speclab" "$build/tests/speclab_gpu_tests" "$carry/bin/"
  strip --strip-unneeded "$carry/bin/speclab" "$carry/bin/speclab_gpu_tests" 2>/dev/null || true
  for binary in "$build/bin/speclab" "$build/tests/speclab_gpu_tests"; do
    ldd "$binary" | awk '/=> \// { print $1, $3 }'
  done | sort -u | while read -r name path; do
    if [[ $name =~ $never_carried ]]; then continue; fi
    cp -L "$path" "$carry/lib/$name"
  done
  strip --strip-unneeded "$carry"/lib/*.so* 2>/dev/null || true
  for binary in speclab speclab_gpu_tests; do
    readelf -d "$carry/bin/$binary" | grep -q 'RPATH.*\$ORIGIN/../lib' || {
      echo "device-check.sh --prepare: $binary has no \$ORIGIN/../lib RPATH" >&2
      exit 1
    }
  done
  git rev-parse HEAD >"$carry/commit" 2>/dev/null || echo unknown >"$carry/commit"

  # ptxas -v report, one line per kernel (entry functions only; device functions are inlined).
  # The kernels declared __launch_bounds__(1024) (the verifiers, the softmax, the samplers): at
  # 1024 threads each has 64 registers, so a spill there costs every thread.
  big_kernels=$(grep -rhoz -E '__launch_bounds__\(1024\)[[:space:]]*[a-z_]+' gpu --include='*.cu' --include='*.cuh' |
    tr '\0' '\n' | awk '{ print $NF }' | grep '_kernel$' | sort -u | paste -sd'|')
  /usr/bin/env python3 - "$build/prepare-build.log" "$carry/ptxas.txt" "$big_kernels" <<'PY'
import re, subprocess, sys
log, dest, big_kernels = sys.argv[1], sys.argv[2], sys.argv[3]
entry = None
kernels = {}
for line in open(log, errors="replace"):
    m = re.search(r"Compiling entry function '([^']+)' for '(sm_\d+)'", line)
    if m:
        entry = m.group(1)
        kernels.setdefault(entry, {})
        continue
    m = re.search(r"Function properties for (\S+)", line)
    if m:
        entry = m.group(1) if m.group(1) in kernels else None
        continue
    if entry is None:
        continue
    k = kernels[entry]
    m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
    if m:
        k["stack"], k["spill_st"], k["spill_ld"] = map(int, m.groups())
    m = re.search(r"Used (\d+) registers", line)
    if m:
        k["regs"] = int(m.group(1))
        s = re.search(r"(\d+) bytes smem", line)
        k["smem"] = int(s.group(1)) if s else 0
names = list(kernels)
demangled = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True,
                           text=True).stdout.split("\n") if names else []
rows, flagged = [], 0
for mangled, pretty in zip(names, demangled):
    k = kernels[mangled]
    short = re.sub(r"^void ", "", pretty.replace("(anonymous namespace)::", ""))
    if short.endswith(")"):  # drop the parameter list: the parenthesis matching the last one
        depth = 0
        for i in range(len(short) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(short[i], 0)
            if depth == 0:
                short = short[:i]
                break
    short = short.replace("speclab::gpu::", "")
    # __launch_bounds__(1024) kernels, as the sources declare them (big_kernels).
    big = re.search(rf"(^|::)({big_kernels})\b", short)
    note = []
    if big and k.get("spill_st", 0) + k.get("spill_ld", 0) > 0:
        note.append("SPILLS at 1024 threads")
        flagged += 1
    if big and k.get("regs", 0) > 64:
        note.append("> 64 registers: cannot launch 1024 threads")
        flagged += 1
    rows.append((short, k.get("regs", -1), k.get("spill_st", -1), k.get("spill_ld", -1),
                 k.get("stack", -1), k.get("smem", -1), "1024" if big else "", "; ".join(note)))
with open(dest, "w") as f:
    f.write(f"ptxas -v (sm_90), {len(rows)} kernels; {flagged} flagged\n")
    f.write(f"{'kernel':70} {'regs':>4} {'spill st':>8} {'spill ld':>8} {'stack':>5} {'smem':>6} {'max thr':>7}  note\n")
    for r in sorted(rows):
        f.write(f"{r[0][:70]:70} {r[1]:4} {r[2]:8} {r[3]:8} {r[4]:5} {r[5]:6} {r[6]:>7}  {r[7]}\n")
print(open(dest).read(), end="")
sys.exit(0 if rows else 1)
PY
  [ $? -eq 0 ] || { echo "device-check.sh --prepare: no ptxas report in $build/prepare-build.log" >&2; exit 1; }

  size_kib=$(du -sk "$carry" | awk '{ print $1 }')
  echo "device-check.sh --prepare: $carry: $((size_kib / 1024)) MiB ($(ls "$carry/lib" | wc -l) libraries: $(ls "$carry/lib" | tr '\n' ' '))"
  if [ "$size_kib" -gt $((carry_limit_mib * 1024)) ]; then
    echo "device-check.sh --prepare: the carry exceeds $carry_limit_mib MiB" >&2
    exit 1
  fi
  echo "next: the device tool's run with carry [\"device-carry\"] and command"
  echo "      gpu/device-check.sh --out \"\$OUT\"   (docs/device-check.md)"
  exit 0
fi

# ---------------------------------------------------------------------------------------------
# The device half (and --dry-run)
# ---------------------------------------------------------------------------------------------
mkdir -p "$out" || { echo "device-check.sh: cannot create $out" >&2; exit 2; }
out=$(cd "$out" && pwd)
# Everything under $out is one of at most six files at every moment, even if the run is killed:
# step outputs go to a private directory and are appended to device-check.log as each step ends.
work=$(mktemp -d "${TMPDIR:-/tmp}/device-check.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
rm -f "$out/summary.txt" "$out/device-check.log" "$out/gpu-tests.json" "$out/bench-gpu.json" \
  "$out/ncu.csv" "$out/ptxas.txt"
summary=$out/summary.txt
log_file=$out/device-check.log
: >"$summary"
: >"$log_file"
: >"$work/steps.txt"
start=$SECONDS
failures=0

note() { echo "$*" | tee -a "$summary"; }
fail() {
  failures=$((failures + 1))
  note "FAIL: $*"
}

# step NAME SECONDS COMMAND...: COMMAND under `timeout`; its output goes to $work/step.log and is
# then appended to device-check.log under a header. Prints and returns its status (124 = timed
# out).
step() {
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS status=0
  timeout -k 2 "$limit" "$@" >"$work/step.log" 2>&1 || status=$?
  local tag="exit $status"
  [ "$status" -eq 124 ] || [ "$status" -eq 137 ] && tag="TIMEOUT after ${limit} s"
  printf '%-42s %4d s  %s\n' "$name" "$((SECONDS - t0))" "$tag" >>"$work/steps.txt"
  { echo "==== $name: $tag ($((SECONDS - t0)) s)"; cat "$work/step.log"; } >>"$log_file"
  return "$status"
}

# The directories a CUDA 13 library may live in here: the toolkit's, and the nvidia-* pip wheels'
# (site-packages/nvidia/<component>/lib), which images without a toolkit install use.
cuda_lib_dirs() {
  local d
  for d in ${extra_lib_dirs:-} /usr/local/cuda/lib64 /usr/local/cuda/targets/*/lib \
    /usr/local/cuda-*/lib64 /usr/lib/x86_64-linux-gnu; do
    [ -d "$d" ] && echo "$d"
  done
  python3 - <<'PY' 2>/dev/null
import glob, site, sys
roots = site.getsitepackages() + [site.getusersitepackages()] + sys.path
for root in dict.fromkeys(roots):
    for d in sorted(glob.glob(f"{root}/nvidia/*/lib")):
        print(d)
PY
}

if [ "$mode" = dry-run ]; then
  # Stubs with the real tools' output formats, so that every parser below runs.
  stub=$work/stubs
  mkdir -p "$stub/bin" "$stub/pip/nvidia/cublas/lib" "$stub/pip/nvidia/cuda_runtime/lib"
  : >"$stub/pip/nvidia/cublas/lib/libcublas.so.13"
  : >"$stub/pip/nvidia/cuda_runtime/lib/libcudart.so.13"
  extra_lib_dirs="$stub/pip/nvidia/cublas/lib $stub/pip/nvidia/cuda_runtime/lib"
  cat >"$stub/bin/speclab_gpu_tests" <<EOF
#!/usr/bin/env bash
# stub of the gpu test binary: gtest's console output and --gtest_output=json
json=
for a in "\$@"; do case \$a in --gtest_output=json:*) json=\${a#--gtest_output=json:} ;; esac; done
echo "[ RUN      ] VerifyChain.GpuMatchesReference"
echo "[       OK ] VerifyChain.GpuMatchesReference (1 ms)"
echo "[ RUN      ] VerifyLogits.GraphReplayMatchesReference"
echo "[  SKIPPED ] VerifyLogits.GraphReplayMatchesReference (0 ms)"
failed=$stub_fail
if [ -n "\$json" ]; then
  status_fail=\$([ \$failed = 1 ] && echo '[{"failure": "stub failure"}]' || echo '[]')
  cat >"\$json" <<JSON
{"tests": 3, "failures": \$failed, "testsuites": [{"name": "VerifyChain", "testsuite": [
 {"name": "GpuMatchesReference", "result": "COMPLETED", "status": "RUN"},
 {"name": "GpuMatchesReferenceRaggedGamma", "result": "COMPLETED", "status": "RUN", "failures": \$status_fail}]},
 {"name": "VerifyLogits", "testsuite": [
 {"name": "GraphReplayMatchesReference", "result": "SKIPPED", "status": "RUN"}]}]}
JSON
fi
exit \$failed
EOF
  cat >"$stub/bin/compute-sanitizer" <<'EOF'
#!/usr/bin/env bash
# stub: prints compute-sanitizer's version or summary line
[ "${1:-}" = --version ] && { echo "NVIDIA (R) Compute Sanitizer"; echo "Version 2025.3.0 (stub)"; exit 0; }
tool=memcheck
while [ $# -gt 0 ]; do case $1 in --tool) tool=$2; shift ;; esac; shift; done
echo "========= COMPUTE-SANITIZER"
[ "$tool" = racecheck ] && echo "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"
echo "========= ERROR SUMMARY: 0 errors"
EOF
  cat >"$stub/bin/ncu" <<'EOF'
#!/usr/bin/env bash
# stub: `ncu --version`, or `ncu --csv --page raw` output for the kernel named by -k regex:NAME
[ "${1:-}" = --version ] && { echo "NVIDIA (R) Nsight Compute Command Line Profiler"; echo "Version 2025.3.0.0 (stub)"; exit 0; }
kernel=unknown clock=
while [ $# -gt 0 ]; do
  case $1 in -k) kernel=${2#regex:}; shift ;; --clock-control) clock=$2; shift ;; esac
  shift
done
[ "$clock" = none ] || { echo "stub ncu: expected --clock-control none" >&2; exit 1; }
echo '==PROF== Connected to process 1 (stub)'
echo '"ID","Kernel Name","gpu__time_duration.sum","sm__throughput.avg.pct_of_peak_sustained_elapsed","gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed","sm__warps_active.avg.pct_of_peak_sustained_active","sm__maximum_warps_per_active_cycle_pct","smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio","smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"'
echo '"","","usecond","%","%","%","%","ratio","ratio"'
echo "\"0\",\"$kernel(Args)\",\"12.5\",\"20.1\",\"75.3\",\"45.0\",\"50\",\"6.2\",\"1.1\""
EOF
  cat >"$stub/bin/nvidia-smi" <<'EOF'
#!/usr/bin/env bash
# stub: the query line of nvidia-smi
echo "NVIDIA H200 (stub), 580.00, 143771 MiB, 1980 MHz"
EOF
  cat >"$stub/bin/speclab" <<'EOF'
#!/usr/bin/env bash
# stub of `speclab bench gpu --json [--vocab V] [--batch B] [--gamma G] [--only NAME]`
cat <<'JSON'
{"machine": "stub", "device": "stub device", "copy_gbps": 4000, "repeats": 15, "kernels": [
{"kernel": "verify_chain V1", "input": "probs_fp32", "batch": 1, "gamma": 5, "vocab": 32000, "seconds": 1.2e-05, "gbps": 100, "ratio_to_copy": 0.025},
{"kernel": "verify_chain V1", "input": "probs_fp32", "batch": 8, "gamma": 5, "vocab": 32000, "seconds": 1.4e-05, "gbps": 700, "ratio_to_copy": 0.175},
{"kernel": "verify_chain V1", "input": "probs_fp32", "batch": 64, "gamma": 5, "vocab": 32000, "seconds": 2.0e-05, "gbps": 3400, "ratio_to_copy": 0.85},
{"kernel": "verify_chain V1", "input": "probs_fp32", "batch": 256, "gamma": 5, "vocab": 32000, "seconds": 6.0e-05, "gbps": 3500, "ratio_to_copy": 0.875},
{"kernel": "verify_chain V1", "input": "probs_fp32", "batch": 64, "gamma": 1, "vocab": 32000, "seconds": 1.0e-05, "gbps": 3000, "ratio_to_copy": 0.75}],
"decode": [{"batch": 1, "gpu_tokens_per_s": 1000, "core_tokens_per_s": 100, "speedup_over_core": 10}]}
JSON
EOF
  chmod +x "$stub/bin"/*
  printf 'ptxas -v (sm_90): stub\n' >"$stub/ptxas.txt"
  tests_bin=$stub/bin/speclab_gpu_tests
  speclab_bin=$stub/bin/speclab
  sanitizer=$stub/bin/compute-sanitizer
  ncu_bin=$stub/bin/ncu
  smi_bin=$stub/bin/nvidia-smi
  ptxas_report=$stub/ptxas.txt
  note "device-check (DRY RUN: device parts stubbed), $(date -u +%FT%TZ)"
  # The timeout plumbing itself: a stub that outlives its limit must be reported as such.
  if step "timeout self-check" 1 sleep 10; then
    fail "timeout self-check: a 10 s sleep under a 1 s limit was not stopped"
  elif ! grep -q "TIMEOUT" "$work/steps.txt"; then
    fail "timeout self-check: the timed-out step was not recorded as TIMEOUT"
  fi
else
  note "device-check, $(date -u +%FT%TZ), carry $(cat "$carry/commit" 2>/dev/null || echo missing)"
  tests_bin=$carry/bin/speclab_gpu_tests
  speclab_bin=$carry/bin/speclab
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  ncu_bin=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  smi_bin=$(command -v nvidia-smi || echo nvidia-smi)
  ptxas_report=$carry/ptxas.txt
fi

# 0. Preflight: the driver and the tools, and every CUDA library the carried binaries need found
# (in the toolkit or in a pip wheel's directory); a missing one stops the check here, naming it —
# the machine has no package index and no build is attempted.
note ""
step "preflight: driver" 5 "$smi_bin" \
  --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
note "device: $(tail -1 "$work/step.log")"
step "preflight: compute-sanitizer" 5 "$sanitizer" --version
note "compute-sanitizer: $(grep -m1 -i version "$work/step.log" || echo 'not found')"
step "preflight: ncu" 5 "$ncu_bin" --version
note "ncu: $(grep -m1 -i version "$work/step.log" || echo 'not found')"
lib_path=""
missing=""
search_dirs=$(cuda_lib_dirs)
for lib in libcublas.so.13 libcublasLt.so.13 libcudart.so.13; do
  found=""
  while read -r dir; do
    if [ -e "$dir/$lib" ]; then
      found=$dir
      break
    fi
  done <<<"$search_dirs"
  if [ -n "$found" ]; then
    case $found in */nvidia/*) kind="pip wheel" ;; *) kind="CUDA directory" ;; esac
    note "$lib: $found ($kind)"
    case ":$lib_path:" in *":$found:"*) ;; *) lib_path+="${lib_path:+:}$found" ;; esac
  elif [ "$mode" = device ] || [ "$lib" = libcublas.so.13 ]; then
    missing+=" $lib"
  fi
done
export LD_LIBRARY_PATH="$lib_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [ "$mode" = device ]; then
  for binary in "$tests_bin" "$speclab_bin"; do
    if [ ! -x "$binary" ]; then
      missing+=" $(basename "$binary")(not carried)"
      continue
    fi
    missing+=$(ldd "$binary" 2>&1 | awk '/not found/ { printf " %s", $1 }')
  done
fi
if [ -n "$missing" ]; then
  fail "preflight: missing here:$missing (searched: $(tr '\n' ' ' <<<"$search_dirs")); nothing run"
  cat "$work/steps.txt" >>"$summary"
  exit 1
fi

# What a gtest JSON report says, merged into gpu-tests.json.
tests_json=$out/gpu-tests.json
summarise_tests() {
  python3 - "$tests_json" "$@" <<'PY' | tee -a "$summary"
import json, os, sys
merged = {"testsuites": []}
for path in sys.argv[2:]:
    if os.path.exists(path) and os.path.getsize(path) > 0:
        merged["testsuites"] += json.load(open(path)).get("testsuites", [])
json.dump(merged, open(sys.argv[1], "w"))
passed, failed, skipped = [], [], []
for suite in merged["testsuites"]:
    for t in suite.get("testsuite", []):
        name = f"{suite['name']}.{t['name']}"
        if t.get("failures"):
            failed.append(name)
        elif t.get("result") == "SKIPPED" or t.get("status") == "NOTRUN":
            skipped.append(name)
        else:
            passed.append(name)
print(f"gpu tests: {len(passed)} passed, {len(failed)} failed, {len(skipped)} skipped")
for n in failed:
    print(f"  FAILED  {n}")
for n in skipped:
    print(f"  skipped {n}")
# On a device only the device-free checks may skip: mostly skips means no device was seen.
sys.exit(3 if len(skipped) > len(passed) else 0)
PY
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail "gpu tests: more skipped than passed (was the device seen?)"
}

# 1. The bit-equality sweeps (nvcc's arithmetic on every input class), then every other gpu test
# in one process, then the split, rows-parallel and persistent tests again in shuffled orders.
note ""
step "gpu tests: bit equality" 30 "$tests_bin" --gtest_filter='BitEquality.*' \
  --gtest_output=json:"$work/bits.json"
bits_status=$?
step "gpu tests: all others" 80 "$tests_bin" --gtest_filter='-BitEquality.*' \
  --gtest_output=json:"$work/tests.json"
tests_status=$?
summarise_tests "$work/bits.json" "$work/tests.json"
[ "$bits_status" -eq 0 ] || fail "bit-equality sweeps exited $bits_status (device-check.log)"
[ "$tests_status" -eq 0 ] || fail "gpu tests exited $tests_status (device-check.log)"
workspace_tests='*Split*:*Rows*:*Persistent*'
step "gpu tests: workspace kernels shuffled x3" 25 "$tests_bin" --gtest_filter="$workspace_tests" \
  --gtest_shuffle --gtest_repeat=3
status=$?
note "workspace kernels ($workspace_tests), 3 shuffled repeats: exit $status"
[ "$status" -eq 0 ] || fail "shuffled workspace-kernel tests exited $status (device-check.log)"

# 2. compute-sanitizer: every verifier kernel, the softmax and sampling at moderate V, and the
# kernels that take a workspace (split, rows in parallel, persistent grid), whose tests launch
# them with one.
note ""
subset='VerifyChain.GpuMatchesReference:VerifyChain.GpuMatchesReferenceRaggedGamma:VerifyChainGreedy.*'
subset+=':VerifyChainLenient.*:VerifyBlock.GpuMatchesReference:VerifyBlock.SerialZPathMatchesReference'
subset+=':VerifyChainLogits.GpuMatchesReference:VerifyBlockLogits.GpuMatchesReference'
subset+=':Logits.GpuMatchesReference:Sampling.GpuMatchesReference:VerifyLogits.GpuFlagsBadLogitsInRowsItReads'
subset+=':VerifyChainSplit.GpuMatchesReference:VerifyBlockSplit.GpuMatchesReference'
subset+=':VerifyLogitsRows.GpuMatchesReference:VerifyLogitsSplit.GpuMatchesReference'
subset+=':VerifyChainPersistent.GpuMatchesReference'
note "compute-sanitizer on: $subset"
for tool in memcheck initcheck racecheck synccheck; do
  step "compute-sanitizer $tool" 35 "$sanitizer" --tool "$tool" --error-exitcode 3 \
    "$tests_bin" --gtest_filter="$subset"
  status=$?
  line=$(grep -E "ERROR SUMMARY" "$work/step.log" | tail -1 | sed 's/^=* *//')
  race=$(grep -E "RACECHECK SUMMARY" "$work/step.log" | tail -1 | sed 's/^=* *//')
  note "  $tool: exit $status; ${line:-no ERROR SUMMARY line}${race:+; $race}"
  [ "$status" -eq 0 ] || fail "compute-sanitizer $tool exited $status (device-check.log)"
done

# 3. speclab bench gpu: the whole matrix (B = 256 fills the device: the persistent grid's rows);
# the γ = 5 table, µs and % of copy bandwidth per B.
note ""
bench_json=$out/bench-gpu.json
step "speclab bench gpu" 80 "$speclab_bin" bench gpu --json
bench_status=$?
# The JSON object starts at the first line that opens one (anything printed before stays in the log).
python3 - "$work/step.log" "$bench_json" <<'PY' || rm -f "$bench_json"
import json, sys
text = open(sys.argv[1], errors="replace").read()
start = text.find("\n{") + 1 if not text.startswith("{") else 0
obj, _ = json.JSONDecoder().raw_decode(text[start:])
json.dump(obj, open(sys.argv[2], "w"))
PY
if [ "$bench_status" -eq 0 ] && [ -s "$bench_json" ]; then
  python3 - "$bench_json" <<'PY' | tee -a "$summary" || fail "bench gpu: no device, or unreadable JSON (device-check.log)"
import json, sys
r = json.load(open(sys.argv[1]))
if r.get("device") is None:
    print("bench gpu:", r.get("message"))
    sys.exit(1)
print(f"bench gpu on {r['device']}: copy {r['copy_gbps']:.0f} GB/s; γ = 5, µs (% of copy bandwidth)")
cells = {}
batches = sorted({k["batch"] for k in r["kernels"]})
for k in r["kernels"]:
    if k["gamma"] == 5:
        cells.setdefault((k["kernel"], k["input"], k["vocab"]), {})[k["batch"]] = k
print(f"{'kernel':34} {'input':11} {'V':>6} " + " ".join(f"{'B=' + str(b):>13}" for b in batches))
for (kernel, inp, vocab), by_b in cells.items():
    cols = []
    for b in batches:
        k = by_b.get(b)
        cols.append(f"{1e6 * k['seconds']:7.1f} ({100 * k['ratio_to_copy']:3.0f}%)" if k else f"{'-':>13}")
    print(f"{kernel[:34]:34} {inp:11} {vocab:6} " + " ".join(cols))
for d in r.get("decode", []):
    print(f"LSM decode B={d['batch']}: device {d['gpu_tokens_per_s']:.0f} tokens/s, "
          f"core {d['core_tokens_per_s']:.0f} ({d['speedup_over_core']:.1f}x)")
PY
else
  fail "speclab bench gpu exited $bench_status (device-check.log)"
fi

# 4. ncu at the shapes that matter, V = 128256, B = 1 (latency) and 64, on the bench's own inputs
# (not the tests' toy rows), at the device's own clocks (--clock-control none: ncu otherwise locks
# them to base); the warm-up launch skipped.
note ""
ncu_csv=$out/ncu.csv
: >"$ncu_csv"
for target in "verify_chain V1:verify_chain" "verify_block V5:verify_block"; do
  only=${target%%:*}
  kernel=${target#*:}
  for batch in 1 64; do
    step "ncu $kernel B=$batch" 12 "$ncu_bin" --csv --page raw --clock-control none \
      --section SpeedOfLight --section Occupancy --section WarpStateStats \
      --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
      -k "regex:$kernel" --launch-skip 1 --launch-count 1 \
      "$speclab_bin" bench gpu --vocab 128256 --batch "$batch" --gamma 5 --only "$only" \
      --repeats 3 --json ||
      fail "ncu $kernel B=$batch exited $? (device-check.log; counters may need permission)"
    grep '^"' "$work/step.log" >>"$ncu_csv"
  done
done
python3 - "$ncu_csv" <<'PY' | tee -a "$summary"
import csv, re, sys
rows = list(csv.reader(l for l in open(sys.argv[1], errors="replace") if l.startswith('"')))
col, data, skip = {}, [], False
for row in rows:
    if "Kernel Name" in row:  # a header (one per ncu run), then its units row
        col, skip = {name: i for i, name in enumerate(row)}, True
    elif skip:
        skip = False
    else:
        data.append((col, row))
if not data:
    print("ncu: no kernel rows (see ncu.csv and device-check.log)"); sys.exit(0)
def get(col, row, name):
    i = col.get(name)
    return row[i] if i is not None and i < len(row) else "n/a"
def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0
print("ncu (V = 128256, B = 1 then 64 per kernel): µs | SM % | memory % of peak | occupancy achieved/theoretical % | top stalls (cycles per issue)")
for col, row in data:
    stalls = sorted(((number(get(col, row, n)),
                      re.sub(r"smsp__average_warps_issue_stalled_(.*)_per_issue_active\.ratio", r"\1", n))
                     for n in col if n.startswith("smsp__average_warps_issue_stalled_")), reverse=True)
    top = ", ".join(f"{s} {v:.1f}" for v, s in stalls[:3])
    name = re.sub(r"\(.*", "", get(col, row, "Kernel Name"))
    print(f"  {name[:30]:30} {get(col, row, 'gpu__time_duration.sum'):>8} "
          f"{get(col, row, 'sm__throughput.avg.pct_of_peak_sustained_elapsed'):>6} "
          f"{get(col, row, 'gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed'):>6} "
          f"{get(col, row, 'sm__warps_active.avg.pct_of_peak_sustained_active'):>6}/"
          f"{get(col, row, 'sm__maximum_warps_per_active_cycle_pct'):<4} {top}")
PY

# The carried ptxas report, flagged kernels in the summary.
cp "$ptxas_report" "$out/ptxas.txt" 2>/dev/null && head -1 "$out/ptxas.txt" | tee -a "$summary"
grep -E "SPILLS|cannot launch" "$out/ptxas.txt" 2>/dev/null | tee -a "$summary"

# What this run was to answer (docs/device-status.md), so the summary says what its results settle.
note ""
note "what only this run can confirm (docs/device-status.md):"
awk '/^## What the first device run must look at/ { on = 1; next }
     on && /^## / { on = 0 }
     on && /^[0-9]+\. / { print "  " $0 " …" }' "$root/docs/device-status.md" | tee -a "$summary"

note ""
note "steps (seconds, status):"
tee -a "$summary" <"$work/steps.txt"
note "total $((SECONDS - start)) s; $failures failing check(s)"
[ "$failures" -eq 0 ] || exit 1
exit 0
