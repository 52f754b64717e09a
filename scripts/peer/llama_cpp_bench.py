#!/usr/bin/env python3
"""Measure llama.cpp (llama-lookup, llama-bench) and `speclab bench decode` side by side.

Run through scripts/peer/llama_cpp_compare.sh, which builds llama.cpp first. Standard library only.

llama.cpp measurements, all greedy (--temp 0), EOS ignored so every run generates the same count:
  * plain decoding: `llama-lookup --spec-draft-n-max 0` (prompt lookup switched off, the same
    decoding loop as the speculative runs), after a ChatML prompt; prompt processing is timed
    apart from decoding by llama-lookup itself ("encoded" vs "decoded").
  * prompt-lookup speculative decoding: `llama-lookup --spec-draft-n-max G` on a "rewrite the
    following passage" prompt, against the plain run of the same prompt: speedup = spec tokens/s
    / plain tokens/s.
  * `llama-bench` (pp N, tg M at depth N, random tokens) as a cross-check of the plain rate.
speclab: `speclab bench decode --target smollm2-135m --draft prompt-lookup-smollm2 --temperature 0
  --json` with OMP_NUM_THREADS, plus any arguments after `--`.
The runs are interleaved round by round (llama.cpp, then speclab) and medians are reported; the
speclab/llama.cpp ratio and the speedups are taken within a round, then their median. The fastest
round of each is printed too: on a shared machine other work only slows a run down.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

CHAT_QUESTION = (
    "Explain how a lighthouse works and why lighthouses were important for ships in the past. "
    "Describe the lamp, the lens and the keeper's daily work."
)

PASSAGE = (
    "The old lighthouse stood on a rocky point at the edge of the harbour. Every evening the "
    "keeper climbed the narrow spiral stairs, trimmed the wick, polished the great glass lens and "
    "lit the lamp. Its beam swept across the water once every ten seconds, warning ships away from "
    "the reef that lay hidden beneath the waves. In winter storms the keeper stayed awake all "
    "night, watching the light and listening to the wind. When the lighthouse was automated in "
    "1962, the keeper moved to a small cottage in the village, but he still walked to the point "
    "each evening to watch the beam come on."
)

REWRITE_QUESTION = (
    "Rewrite the following passage, keeping its meaning and most of its wording, but fixing any "
    "awkward phrasing:\n\n" + PASSAGE
)


def chatml(user: str) -> str:
    return f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"


def run(cmd: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        raise SystemExit(f"llama_cpp_bench.py: command failed ({proc.returncode}): {' '.join(cmd)}")
    return proc


LOOKUP_RE = {
    "enc": re.compile(r"encoded\s+(\d+) tokens in\s+([\d.]+) seconds"),
    "dec": re.compile(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds"),
    "drafted": re.compile(r"n_drafted\s*=\s*(\d+)"),
    "accept": re.compile(r"n_accept\s*=\s*(\d+)"),
}


def llama_lookup(args, prompt: str, draft_max: int) -> dict:
    cmd = [
        str(args.llama_bin / "llama-lookup"), "-m", str(args.model), "-t", str(args.threads),
        "-tb", str(args.threads), "-c", "2048", "-b", "2048", "-n", str(args.tokens - 1),
        "--temp", "0", "--ignore-eos", "--seed", "1", "--spec-draft-n-max", str(draft_max),
        "-p", prompt,
    ]
    proc = run(cmd)
    log = proc.stdout + proc.stderr
    out: dict = {}
    for key, rx in LOOKUP_RE.items():
        m = rx.search(log)
        if not m:
            sys.stderr.write(log[-3000:])
            raise SystemExit(f"llama_cpp_bench.py: no '{key}' line in llama-lookup's output")
        out[key] = tuple(float(g) for g in m.groups())
    n_prompt, t_prompt = out["enc"]
    n_dec, t_dec = out["dec"]
    return {
        "prompt_tokens": int(n_prompt),
        # llama-lookup's own "speed" for the prompt divides by the final context length; use the
        # prompt's token count instead.
        "prompt_tokens_per_s": n_prompt / t_prompt,
        "tokens": int(n_dec),
        "tokens_per_s": n_dec / t_dec,
        "drafted": int(out["drafted"][0]),
        "accepted": int(out["accept"][0]),
        "text": proc.stdout,
    }


def llama_bench(args, n_prompt: int, depth: int) -> dict:
    cmd = [
        str(args.llama_bin / "llama-bench"), "-m", str(args.model), "-t", str(args.threads),
        "-p", str(n_prompt), "-n", "0", "-r", "3", "-o", "json",
    ]
    pp = json.loads(run(cmd).stdout)
    cmd = [
        str(args.llama_bin / "llama-bench"), "-m", str(args.model), "-t", str(args.threads),
        "-p", "0", "-n", str(args.tokens), "-d", str(n_prompt), "-r", "3", "-o", "json",
    ]
    tg = json.loads(run(cmd).stdout)
    # Cost of one call over m = γ+1 positions relative to one position (r of speclab's table),
    # at the rewrite prompt's depth.
    sizes = [1] + [g + 1 for g in args.gamma]
    cmd = [
        str(args.llama_bin / "llama-bench"), "-m", str(args.model), "-t", str(args.threads),
        "-p", ",".join(str(m) for m in sizes), "-n", "0", "-d", str(depth), "-r", "5", "-o", "json",
    ]
    calls = {x["n_prompt"]: x["n_prompt"] / x["avg_ts"] for x in json.loads(run(cmd).stdout)}
    return {"pp_tokens_per_s": pp[0]["avg_ts"], "pp_stddev": pp[0]["stddev_ts"],
            "tg_tokens_per_s": tg[0]["avg_ts"], "tg_stddev": tg[0]["stddev_ts"],
            "call_ratio": {g: calls[g + 1] / calls[1] for g in args.gamma}}


def speclab_exe(build: Path) -> Path:
    for p in (build / "bin" / "speclab", build / "speclab"):
        if p.exists():
            return p
    raise SystemExit(f"llama_cpp_bench.py: no speclab executable under {build}")


def speclab_bench(args, extra: list[str]) -> dict:
    cmd = [str(speclab_exe(args.speclab)), "bench", "decode", "--target", "smollm2-135m",
           "--draft", "prompt-lookup-smollm2", "--tokens", str(args.tokens), "--temperature", "0",
           "--gamma", ",".join(str(g) for g in args.gamma), "--json", *extra]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads),
               SPECLAB_MODELS=str(args.model.resolve().parent))
    proc = run(cmd, env=env)
    # The JSON object is the last line that parses.
    for line in reversed(proc.stdout.strip().splitlines()):
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            continue
    raise SystemExit("llama_cpp_bench.py: speclab bench decode printed no JSON object")


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--llama-bin", type=Path, required=True, help="folder with llama-lookup, llama-bench")
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--gamma", type=lambda s: [int(x) for x in s.split(",") if x], default=[3, 5, 8])
    ap.add_argument("--speclab", type=Path, help="speclab build folder (bin/speclab)")
    ap.add_argument("--json", type=Path, help="also write every measurement to this file")
    argv = sys.argv[1:]
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    args = ap.parse_args(argv)

    chat, rewrite = chatml(CHAT_QUESTION), chatml(REWRITE_QUESTION)
    load = os.getloadavg()
    print(f"peer comparison: {args.model.name}, {args.threads} threads, {args.tokens} tokens, "
          f"T = 0, {args.rounds} rounds, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} "
          f"on {os.cpu_count()} CPUs, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')}",
          flush=True)
    if load[0] > (os.cpu_count() or 1):
        print("warning: the machine is busy; absolute tokens/s are low and noisy, the interleaved "
              "ratios less so", flush=True)

    rec: dict = {"chat_plain": [], "rewrite_plain": [], "rewrite_spec": {g: [] for g in args.gamma},
                 "speclab": []}
    for r in range(args.rounds):
        t0 = time.time()
        rec["chat_plain"].append(llama_lookup(args, chat, 0))
        rec["rewrite_plain"].append(llama_lookup(args, rewrite, 0))
        for g in args.gamma:
            rec["rewrite_spec"][g].append(llama_lookup(args, rewrite, g))
        msg = (f"  round {r + 1}: llama.cpp plain {rec['chat_plain'][-1]['tokens_per_s']:.1f} tok/s "
               f"(chat), {rec['rewrite_plain'][-1]['tokens_per_s']:.1f} (rewrite)")
        if args.speclab:
            rec["speclab"].append(speclab_bench(args, extra))
            msg += f"; speclab plain {rec['speclab'][-1]['plain_tokens_per_s']:.1f} tok/s"
        print(msg + f" [{time.time() - t0:.0f} s]", flush=True)
    bench = llama_bench(args, rec["chat_plain"][0]["prompt_tokens"],
                        rec["rewrite_plain"][0]["prompt_tokens"])

    # Greedy speculative decoding must reproduce the plain greedy text (it may run a few tokens
    # past the plain run: llama-lookup checks the limit after a whole accepted draft).
    def agrees(a: str, b: str) -> bool:
        a, b = a.strip(), b.strip()
        return a.startswith(b) or b.startswith(a)

    plain_text = rec["rewrite_plain"][0]["text"]
    same = {g: all(agrees(x["text"], plain_text) for x in rec["rewrite_spec"][g])
            for g in args.gamma}

    lc_plain = med([x["tokens_per_s"] for x in rec["chat_plain"]])
    lc_pp = med([x["prompt_tokens_per_s"] for x in rec["chat_plain"]])
    lc_rw_plain = med([x["tokens_per_s"] for x in rec["rewrite_plain"]])
    print()
    print(f"llama.cpp (llama-lookup; chat prompt {rec['chat_plain'][0]['prompt_tokens']} tokens, "
          f"rewrite prompt {rec['rewrite_plain'][0]['prompt_tokens']} tokens)")
    lc_plain_max = max(x["tokens_per_s"] for x in rec["chat_plain"])
    print(f"  plain decode        {lc_plain:8.1f} tok/s   (best round {lc_plain_max:.1f}; rewrite "
          f"prompt: {lc_rw_plain:.1f})")
    print(f"  prompt processing   {lc_pp:8.1f} tok/s   (not in the decode rate)")
    print(f"  llama-bench         tg{args.tokens}@d{rec['chat_plain'][0]['prompt_tokens']} "
          f"{bench['tg_tokens_per_s']:.1f} ± {bench['tg_stddev']:.1f} tok/s, "
          f"pp{rec['chat_plain'][0]['prompt_tokens']} {bench['pp_tokens_per_s']:.1f} ± "
          f"{bench['pp_stddev']:.1f} tok/s")
    print("  prompt lookup on the rewrite prompt (speedup = spec tok/s ÷ plain tok/s, same prompt;")
    print("  r = one call over γ+1 positions ÷ one over 1, llama-bench at the prompt's depth):")
    lc_best = lc_best_max = 0.0
    for g in args.gamma:
        xs = rec["rewrite_spec"][g]
        rate = med([x["tokens_per_s"] for x in xs])
        sp = med([x["tokens_per_s"] / p["tokens_per_s"] for x, p in zip(xs, rec["rewrite_plain"])])
        acc = sum(x["accepted"] for x in xs) / max(1, sum(x["drafted"] for x in xs))
        sp_max = (max(x["tokens_per_s"] for x in xs)
                  / max(p["tokens_per_s"] for p in rec["rewrite_plain"]))
        lc_best = max(lc_best, sp)
        lc_best_max = max(lc_best_max, sp_max)
        print(f"    γ ≤ {g}: {rate:7.1f} tok/s  speedup {sp:4.2f}x (best rounds {sp_max:4.2f}x)  "
              f"r {bench['call_ratio'][g]:.2f}  accepted {acc:.3f} of drafted "
              f"({xs[0]['drafted']} drafted)  output {'= plain' if same[g] else 'DIFFERS from plain'}")

    if args.speclab:
        sl = rec["speclab"]
        sl_plain = med([x["plain_tokens_per_s"] for x in sl])
        print()
        print("speclab bench decode (" + (" ".join(extra) if extra else "default prompts") + ")")
        sl_plain_max = max(x["plain_tokens_per_s"] for x in sl)
        print(f"  plain decode        {sl_plain:8.1f} tok/s   (best round {sl_plain_max:.1f})")
        sl_best = sl_best_max = 0.0
        for i, g in enumerate(args.gamma):
            rows = [next(r for r in x["rows"] if r["gamma"] == g) for x in sl]
            sp = med([r["speedup"] for r in rows])
            sp_max = max(r["tokens_per_s"] for r in rows) / sl_plain_max
            sl_best = max(sl_best, sp)
            sl_best_max = max(sl_best_max, sp_max)
            print(f"    γ = {g}: {med([r['tokens_per_s'] for r in rows]):7.1f} tok/s  speedup "
                  f"{sp:4.2f}x (best rounds {sp_max:4.2f}x)  r {med([r['target_call_ratio'] for r in rows]):.2f}"
                  f"  alpha {med([r['alpha'] for r in rows]):.3f}")
        print()
        # The ratio is taken per round (the two ran back to back), then the median.
        ratio = med([x["plain_tokens_per_s"] / c["tokens_per_s"]
                     for x, c in zip(sl, rec["chat_plain"])])
        print(f"{'':30s}{'llama.cpp':>12s}{'speclab':>12s}{'speclab/llama.cpp':>20s}")
        print(f"{'plain decode tok/s, median':30s}{lc_plain:12.1f}{sl_plain:12.1f}{ratio:20.3f}")
        print(f"{'plain decode tok/s, best round':30s}{lc_plain_max:12.1f}{sl_plain_max:12.1f}"
              f"{sl_plain_max / lc_plain_max:20.3f}")
        print(f"{'prompt-lookup speedup, median':30s}{lc_best:11.2f}x{sl_best:11.2f}x   (best γ)")
        print(f"{'prompt-lookup speedup, best':30s}{lc_best_max:11.2f}x{sl_best_max:11.2f}x   "
              "(best γ, fastest rounds)")
        if not extra:
            print("note: without extra arguments speclab decodes its own default prompts, not the "
                  "rewrite prompt above (see `speclab bench decode --help`)")

    if args.json:
        for k in ("chat_plain", "rewrite_plain"):
            for x in rec[k]:
                x.pop("text", None)
        for g in args.gamma:
            for x in rec["rewrite_spec"][g]:
                x.pop("text", None)
        rec["rewrite_spec"] = {str(g): v for g, v in rec["rewrite_spec"].items()}
        bench["call_ratio"] = {str(g): v for g, v in bench["call_ratio"].items()}
        rec["llama_bench"] = bench
        rec["speclab_args"] = extra
        args.json.write_text(json.dumps(rec, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
