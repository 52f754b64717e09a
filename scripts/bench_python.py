#!/usr/bin/python3
"""The Python package's two goals, measured on this machine (docs/python.md):

1. speclab.verify_chain from Python beside the C++ fast path at B = 8, γ = 5, V = 32000: the
   C++ loop over the same borrowed arrays inside the extension (speclab.verify.time_fast_path),
   and, with --cli, `speclab bench verify`'s seconds per batch for the same shape (its own
   batches). Goal: within 1.2× of the C++ time, with no copies (a copy raises here).
2. speclab.conformance of a numpy sampler (tests/python/samplers.py's token-level speculative
   sampling) at ε = 0.01, α = 10⁻⁶ on the V = 8, γ = 3 instance family (`position-dependent`).
   Goal: under 60 s.

    PYTHONPATH=build/python /usr/bin/python3 scripts/bench_python.py [--cli build/bin/speclab]

Prints the figures and the ratio; the timings are minima over --rounds rounds, since a shared
machine only ever adds time. Exit 0 always (a benchmark, not a test)."""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np

import speclab
import speclab.conformance

SAMPLERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python",
                        "samplers.py")


def batch(b, g, v, seed=5):
    """p f32 [B, γ+1, V], q f32 [B, γ, V], drafts i32 [B, γ] drawn from q."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(v), (b, g + 1)).astype(np.float32)
    q = rng.dirichlet(np.ones(v), (b, g)).astype(np.float32)
    cdf = np.cumsum(q.astype(np.float64), axis=2)
    u = rng.random((b, g, 1)) * cdf[..., -1:]
    x = np.minimum((cdf <= u).sum(axis=2), v - 1).astype(np.int32)
    return p, q, x


def verify_goal(rounds, cli):
    p, q, x = batch(8, 5, 32000)
    once = speclab.verify.time_fast_path(p, q, x, repeats=3)
    repeats = int(max(10, min(2000, 0.3 / once)))

    def python_loop():
        start = time.perf_counter()
        for step in range(repeats):
            speclab.verify_chain(p, q, x, seed=0, step=step, validate=False)
        return (time.perf_counter() - start) / repeats

    cpp = py = float("inf")
    with warnings.catch_warnings():
        warnings.simplefilter("error", speclab.CopyWarning)  # no copies
        for _ in range(rounds):
            cpp = min(cpp, speclab.verify.time_fast_path(p, q, x, repeats=repeats))
            py = min(py, python_loop())
    print(f"verify_chain, B = 8, γ = 5, V = 32000, {repeats} calls × {rounds} rounds:")
    print(f"  C++ fast path (in the extension, same arrays)  {cpp * 1e6:8.1f} µs")
    print(f"  speclab.verify_chain(validate=False)            {py * 1e6:8.1f} µs   "
          f"ratio {py / cpp:.2f}× (goal ≤ 1.2×)")
    if cli:
        out = subprocess.run([cli, "bench", "verify", "--batch", "8", "--gamma", "5", "--vocab",
                              "32000", "--json"], capture_output=True, text=True, check=True)
        bench = json.loads(out.stdout)
        seconds = bench["seconds_per_batch"]
        print(f"  `speclab bench verify` ({bench['threads']} threads)          "
              f"{seconds * 1e6:8.1f} µs   ratio {py / seconds:.2f}×")


def conformance_goal():
    spec = importlib.util.spec_from_file_location("samplers", SAMPLERS)
    samplers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(samplers)
    name = "position-dependent"
    scale = next(i.epsilon_scale for i in speclab.conformance.instances() if i.name == name)
    start = time.perf_counter()
    # ε = 0.01 at this instance (check() scales its ε per instance); α = 1e-6 for it alone.
    report = speclab.conformance.check(samplers.correct, epsilon=0.01 / scale, alpha=1e-6,
                                       instances=[name])
    seconds = time.perf_counter() - start
    r = report.instances[0]
    print(f"conformance of a numpy sampler, ε = 0.01, α = 1e-6, V = 8, γ = 3 "
          f"(position-dependent): {'conforms' if report.passed else 'does NOT conform'}")
    print(f"  N = {r.samples}, {r.bins} bins, detects ε ≥ {r.detectable_epsilon:.4f}, "
          f"{seconds:.1f} s (goal < 60 s)")


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cli", help="the speclab executable, for `speclab bench verify`")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each timing (min)")
    args = parser.parse_args(argv)
    verify_goal(args.rounds, args.cli)
    conformance_goal()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
