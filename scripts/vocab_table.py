#!/usr/bin/env python3
"""The measured table of docs/vocabularies.md from a run of
experiments/configs/heterogeneous_vocab_smollm2.toml:

    /usr/bin/python3 scripts/vocab_table.py results/heterogeneous_vocab_smollm2/summary.csv

prints one markdown row per point (temperature, draft, verifier): acceptance per tested
position, accepted target tokens and accepted bytes per step, target tokens per step, decode
tokens/s and the speedup over the point's own plain-decoding baseline.
"""
import sys

import pandas as pd


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        d = pd.read_csv(argv[1])
    except (OSError, pd.errors.ParserError) as e:
        print(f"vocab_table: cannot read {argv[1]}: {e}", file=sys.stderr)
        return 2
    needed = ["sampling.temperature", "draft.model", "verifier.method", "acceptance_rate",
              "accepted", "steps", "accepted_bytes_per_step", "emitted_per_step",
              "tokens_per_second", "baseline_tokens_per_second", "speedup"]
    missing = [c for c in needed if c not in d.columns]
    if missing:
        print(f"vocab_table: {argv[1]} lacks the columns {', '.join(missing)}; expected the "
              "summary.csv of a run with decode.baseline = true", file=sys.stderr)
        return 2
    print("| T | draft | verifier | acceptance | accepted target tokens / step | accepted bytes "
          "/ step | target tokens / step | tokens/s | plain tokens/s | speedup |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for _, r in d.iterrows():
        token_level = r["verifier.method"] not in ("tli", "slem", "slrs")
        bytes_cell = "—" if token_level else f"{r['accepted_bytes_per_step']:.2f}"
        print(f"| {r['sampling.temperature']:g} | `{r['draft.model']}` | `{r['verifier.method']}` "
              f"| {r['acceptance_rate']:.3f} | {r['accepted'] / r['steps']:.3f} | {bytes_cell} "
              f"| {r['emitted_per_step']:.2f} | {r['tokens_per_second']:.1f} "
              f"| {r['baseline_tokens_per_second']:.1f} | {r['speedup']:.2f}× |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
