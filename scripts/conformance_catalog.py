#!/usr/bin/python3
"""The default run of every speclab.conformance interface on the numpy samplers of the test
suite (tests/python: the correct samplers, the negative controls and the planted-defect catalog),
printed as the Markdown table docs/python.md shows: verdict, below-optimum flag, diagnosis, N
and time per run. Not part of CI (the suite runs the instances that show each defect); about ten
minutes on 2 cores.

    PYTHONPATH=build/python /usr/bin/python3 scripts/conformance_catalog.py [--only IFACE,...]
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "python"))

import engines  # noqa: E402
import samplers  # noqa: E402
import samplers_logits  # noqa: E402
import trees  # noqa: E402

import speclab.conformance as conformance  # noqa: E402

# (interface, options, sampler name, sampler, role)
RUNS = [
    ("probs", {}, "correct", samplers.correct, "control"),
    ("probs", {}, "speclab sampled-match", conformance.verifier_sampler("sampled-match"),
     "control"),
    ("probs", {}, "speclab block (V5)", conformance.verifier_sampler("block"), "control"),
    ("probs", {}, "residual_from_p", samplers.residual_from_p, "defect"),
    ("probs", {}, "bonus_from_wrong_row", samplers.bonus_from_wrong_row, "defect"),
    ("probs", {}, "shared_noise", samplers.shared_noise, "defect"),
    ("probs", {}, "same_uniforms_across_requests", samplers.same_uniforms_across_requests,
     "defect"),
    ("uniforms", {}, "uniforms_correct", samplers.uniforms_correct, "control"),
    ("uniforms", {}, "uniforms_reversed_draws", samplers.uniforms_reversed_draws, "control"),
    ("uniforms", {}, "uniforms_coin_zero_accepts", samplers.uniforms_coin_zero_accepts,
     "defect"),
    ("seeds", {}, "seeds_correct", samplers.seeds_correct, "control"),
    ("seeds", {}, "seeds_first_only", samplers.seeds_first_only, "defect"),
    ("seeds", {}, "seeds_per_row_stream", samplers.seeds_per_row_stream, "defect"),
    ("draft", {}, "draft_correct", samplers.draft_correct, "control"),
    ("draft", {}, "draft_shared_noise", samplers.draft_shared_noise, "defect"),
    ("logits", {}, "correct", samplers_logits.correct, "control"),
    ("logits", {}, "control", samplers_logits.control, "control"),
    ("logits", {}, "tie_over_acceptance", samplers_logits.tie_over_acceptance, "defect"),
    ("logits", {}, "min_p_dropped", samplers_logits.min_p_dropped, "defect"),
    ("tree", {}, "correct_iid", trees.correct_iid, "control"),
    ("tree", {"method": "tree-swor"}, "correct_swor", trees.correct_swor, "control"),
    ("tree", {}, "wrong_node_row", trees.wrong_node_row, "defect"),
    ("engine", {}, "correct_loop", engines.correct_loop, "control"),
    ("engine", {}, "raw_q_loop", engines.raw_q_loop, "defect"),
    ("engine", {}, "argmax_drafts_loop", engines.argmax_drafts_loop, "defect"),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated interfaces")
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else None
    print("| interface | sampler | role | verdict | flagged | diagnosis (instances) | N | time |")
    print("|---|---|---|---|---|---|---|---|")
    for interface, options, name, sampler, role in RUNS:
        if only and interface not in only:
            continue
        start = time.monotonic()
        report = conformance.check(sampler, interface=interface, **options)
        seconds = time.monotonic() - start
        verdicts = sorted({r.verdict for r in report.instances})
        named = {}
        for r in report.instances:
            if r.diagnosis:
                named.setdefault(r.diagnosis["name"], []).append(r.name)
        failed = sum(not r.passed for r in report.instances)
        diagnosis = "; ".join(f"{k} ({len(v)})" for k, v in named.items()) or "—"
        ns = [r.samples for r in report.instances]
        label = name + (f" ({options['method']})" if "method" in options else "")
        print(f"| {interface} | {label} | {role} | {', '.join(verdicts)}"
              f"{f' ({failed} of {len(ns)})' if failed else ''} | "
              f"{'below optimum' if report.below_optimum else '—'} | {diagnosis} | "
              f"{min(ns):,}–{max(ns):,} | {seconds:.1f} s |", flush=True)


if __name__ == "__main__":
    main()
