#!/usr/bin/env bash
# Checks that the main theorems are closed: no Admitted/admit/Axiom in the sources, and
# `Print Assumptions` of every theorem below lists no axiom outside ALLOWED (empty: the proofs
# use no axiom at all). Run after `make` (or `make check`, which builds first).
set -euo pipefail
cd "$(dirname "$0")"

# Axioms a theorem may depend on, one name a line. Keep empty unless a proof truly needs one.
ALLOWED=""

THEOREMS="
V1Token.v1_token_law V1Token.v1_fallback_unreachable V1Token.v1_step_lossless
V1Token.v1_stream_state_lossless V1Token.v1_stream_lossless
V5Block.block_survival V5Block.stop_prob_zmass V5Block.block_next_law
V5Block.block_reach_weight V5Block.block_step_lossless
V5Block.block_stream_state_lossless V5Block.block_stream_lossless
FixedPoint.fixed_target_code FixedPoint.scan_spec FixedPoint.scan_lt_size
FixedPoint.fixed_target_lt FixedPoint.scan_never_zero FixedPoint.picks_exact
FixedPoint.picks_bound FixedPoint.picks_zero FixedPoint.speclab_sampler
Coupled.coupled_step Coupled.coupled_stream Coupled.coupled_stream_gumbel_draft
Coupled.greedy_stream
"

status=0
sources=$(sed -n 's/^\([A-Za-z0-9_]*\.v\)$/\1/p' _CoqProject)
if grep -nwE 'Admitted|admit|Axiom|Axioms|Parameter|Parameters|Conjecture' $sources; then
  echo "check-assumptions: the sources above admit or postulate something" >&2
  status=1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
{
  for f in $sources; do echo "From Speclab Require ${f%.v}."; done
  for t in $THEOREMS; do echo "Print Assumptions Speclab.$t."; done
} > "$tmp/Assumptions.v"
coqc -Q . Speclab -w -all "$tmp/Assumptions.v" > "$tmp/out" 2>&1 || { cat "$tmp/out"; exit 1; }

# coqc prints one answer per theorem: "Closed under the global context", or "Axioms:" followed
# by one "name : type" entry per axiom starting in column 0 (long types continue indented).
closed=$(grep -c '^Closed under the global context' "$tmp/out" || true)
axioms=$(awk '/^Closed under the global context/ {a = 0; next}
              /^Axioms:/ {a = 1; next}
              a && /^[^ ]/ {print $1}' "$tmp/out" | sort -u)
count=$(echo $THEOREMS | wc -w)
bad=""
for ax in $axioms; do
  if ! grep -qxF "$ax" <<< "$ALLOWED"; then bad="$bad $ax"; fi
done
if [ -n "$bad" ]; then
  echo "check-assumptions: axioms outside the allow-list:$bad" >&2
  cat "$tmp/out" >&2
  status=1
fi
# One answer a line, in the order of THEOREMS.
awk '/^Closed under the global context/ {if (ax != "") print ax; ax = ""; print "closed"; next}
     /^Axioms:/ {if (ax != "") print ax; ax = "axioms:"; next}
     ax != "" && /^[^ ]/ {ax = ax " " $1}
     END {if (ax != "") print ax}' "$tmp/out" > "$tmp/answers"
paste -d ' ' <(echo $THEOREMS | tr ' ' '\n') "$tmp/answers" | sed 's/ /: /'
blocks=$(wc -l < "$tmp/answers")
if [ "$blocks" -ne "$count" ]; then
  echo "check-assumptions: expected $count Print Assumptions answers, got $blocks" >&2
  cat "$tmp/out" >&2
  status=1
fi
if [ "$status" -eq 0 ]; then
  echo "check-assumptions: $closed of $count theorems closed under the global context (no axioms)"
fi
exit "$status"
