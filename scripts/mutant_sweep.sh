#!/usr/bin/env bash
# The mutant sweep (docs/testing.md "Mutants"): runs the regular stat and property tests, built a
# second time against the mutant libraries (speclab_stat_mutant_tests, speclab_property_mutant_tests),
# once per mutant of core/base/mutants.hpp with SPECLAB_MUTANT naming it, and fails unless every
# mutant makes at least one regular test fail. Prints, for each mutant, the tests that caught it.
# A control run without a mutant must pass first, so a failure is the mutant's doing.
#
#   scripts/mutant_sweep.sh [--all] [BUILD_DIR]
#
# By default only the regular tests that can see a broken verifier or engine are run (the filters
# below: the one-step joint laws, the Markov streams, the properties of the verifiers, of the
# sampling pipeline and its scalar rules, and of every engine's batch, draft pipeline and rebuilt
# steps), which keeps the sweep to a few minutes on 2 cores; --all runs both layers whole for every
# mutant.
set -uo pipefail
cd "$(dirname "$0")/.."

all=0
if [ "${1:-}" = "--all" ]; then
  all=1
  shift
fi
build=${1:-build}
stat_bin=$build/tests/speclab_stat_mutant_tests
property_bin=$build/tests/speclab_property_mutant_tests
# Not part of the default build (tests/CMakeLists.txt): built here, a no-op when up to date.
if ! cmake --build "$build" -j"${SPECLAB_JOBS:-2}" --target speclab_stat_mutant_tests \
  speclab_property_mutant_tests >/dev/null; then
  echo "mutant_sweep: building the mutant test executables in $build failed; they exist only" \
    "in a build configured with -DSPECLAB_MUTANT_TESTS=ON (rerun cmake --build $build --target" \
    "speclab_stat_mutant_tests speclab_property_mutant_tests to see why)" >&2
  exit 2
fi

# Every test in these filters is a regular test of tests/stat or tests/property.
stat_filter='VerifyChainStat.TokenJointMatchesExact:VerifyChainStat.ReferenceJointMatchesExact'
stat_filter+=':VerifyChainStat.SixTokenStreamMatchesTargetChain:VerifyBlockStat.BlockJointMatchesExact'
stat_filter+=':VerifyBlockStat.BlockSixTokenStreamMatchesTargetChain:VerifyBlockStat.TypicalJointMatchesExact'
stat_filter+=':*VerifyTreeStat.ContextDependent*:DecodeStat.SpeculativeAtHalfTemperatureIsPlainDecodingsLaw'
stat_filter+=':DecodeStat.PlainDecodingIsTheTargetChainAtItsTemperature:DecodeVocabStat.IntersectionStreamIsTheTargetChain'
stat_filter+=':DecodeLsmStat.TokenLevelPairLawAtLowTemperatureWithTopK'
property_filter='VerifyChainProperty.*:VerifyBlockProperty.*:VerifyTreeProperty.*'
property_filter+=':SamplingPipeline*:Rules*:Engines/DecodeInvariance.*:Engines/DraftPipeline.*'
property_filter+=':Engines/EngineStep.*:MatchDecode.MarkovEngines*:MatchDecode.CoupledAccepts*'
property_filter+=':VerifyChainFallback.*:VerifyBlockFallback.*:VerifyTreeFallback.*'
property_filter+=':VocabMapProperty.*'
if [ "$all" = 1 ]; then
  stat_filter='*'
  property_filter='*'
fi

# The mutants, read from to_string in core/base/mutants.cpp (kNone is "none").
mapfile -t mutants < <(grep -oP 'return "\K[a-z-]+(?=";)' core/base/mutants.cpp | grep -vx -e none -e unknown)
if [ "${#mutants[@]}" -lt 25 ]; then
  echo "mutant_sweep: found ${#mutants[@]} mutants in core/base/mutants.cpp; expected at least 25" >&2
  exit 2
fi

log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

# run NAME: both executables under SPECLAB_MUTANT=NAME (concurrently); prints the failed tests,
# one per line, and "crashed in TEST" for an executable that died inside a test.
run() {
  local name=$1
  SPECLAB_MUTANT=$name RC_PARAMS="seed=20261129 max_success=100" timeout 900 \
    "$stat_bin" --gtest_filter="$stat_filter" >"$log/$name.stat" 2>&1 &
  local stat_pid=$!
  SPECLAB_MUTANT=$name RC_PARAMS="seed=20261129 max_success=100" timeout 900 \
    "$property_bin" --gtest_filter="$property_filter" >"$log/$name.property" 2>&1
  local property_status=$?
  wait "$stat_pid"
  local stat_status=$?
  local layer status
  for layer in stat property; do
    status=$stat_status
    [ "$layer" = property ] && status=$property_status
    grep -oP '^\[  FAILED  \] \K[^ ,]+(?=,| \()' "$log/$name.$layer" | sort -u
    if ! grep -q '^\[  PASSED  \]' "$log/$name.$layer" && [ "$status" -ne 0 ] &&
      ! grep -q '^\[  FAILED  \]' "$log/$name.$layer"; then
      echo "crashed(status $status) in $(grep -oP '^\[ RUN      \] \K.*' "$log/$name.$layer" | tail -1)"
    fi
  done
}

start=$SECONDS
control=$(run none)
if [ -n "$control" ]; then
  echo "mutant_sweep: without a mutant these tests fail, so the sweep proves nothing:" >&2
  echo "$control" >&2
  exit 1
fi
echo "control (no mutant): every selected test passes ($((SECONDS - start)) s)"

uncaught=()
for name in "${mutants[@]}"; do
  t=$SECONDS
  caught=$(run "$name")
  if [ -z "$caught" ]; then
    echo "$name: NOT CAUGHT ($((SECONDS - t)) s)"
    uncaught+=("$name")
  else
    echo "$name: caught by $(echo "$caught" | wc -l) test(s) ($((SECONDS - t)) s):"
    echo "$caught" | sed 's/^/    /'
  fi
done
echo "mutant sweep: ${#mutants[@]} mutants in $((SECONDS - start)) s"
if [ "${#uncaught[@]}" -gt 0 ]; then
  echo "mutant_sweep: no regular test fails on: ${uncaught[*]}" >&2
  exit 1
fi
