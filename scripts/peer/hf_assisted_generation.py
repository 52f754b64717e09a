#!/usr/bin/python3
"""speclab conformance, engine interface, on Hugging Face transformers' assisted generation end
to end: `target.generate(prompt, assistant_model=draft, do_sample=True, temperature=, top_k=,
top_p=, min_p=)` (do_sample=False at T = 0) on the engine cases' Markov models, wrapped as
causal LMs by speclab.conformance.hf. One generate() call per request, on the CPU.

transformers is not a dependency of speclab: the first run installs the pinned versions below
from the package index into build-peer/hf-engine (about 15 MB to download, 120 MB installed, no
torch; SPECLAB_PEER_DIR moves build-peer). 4.49.0 is the newest transformers that runs on
Debian's torch 1.13: from 4.50 on, modeling_utils imports torch.distributed.tensor (torch ≥ 2),
and from 4.52 on transformers turns torch < 2.1 off. Not part of CI.

    /usr/bin/python3 scripts/peer/hf_assisted_generation.py [--build build] [--instances a,b]
        [--epsilon E] [--alpha A] [--seed S] [--schedule constant|heuristic]
        [--confidence-threshold C] [--json FILE]

Exit status: 0 conforms, 1 does not, 2 bad usage or a loop that crashes.
"""

import argparse
import importlib
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PINS = ["transformers==4.49.0", "huggingface_hub==0.26.5", "tokenizers==0.21.0",
        "safetensors==0.4.5", "regex==2024.11.6", "filelock==3.16.1", "tqdm==4.67.1"]


def _install(folder):
    """Makes `import transformers` work from folder, installing PINS there if needed."""
    sys.path.insert(0, folder)
    try:
        importlib.import_module("transformers.generation.utils")
        return
    except ImportError:
        pass
    os.makedirs(folder, exist_ok=True)
    print(f"installing {' '.join(PINS)} into {folder}", flush=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--target", folder,
                    "--no-deps", *PINS], check=True)
    importlib.invalidate_caches()
    importlib.import_module("transformers.generation.utils")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"),
                        help="speclab build folder holding python/speclab (default build)")
    parser.add_argument("--dir", default=os.path.join(
        os.environ.get("SPECLAB_PEER_DIR", os.path.join(ROOT, "build-peer")), "hf-engine"),
        help="where transformers is (or is installed)")
    parser.add_argument("--instances", help="comma-separated engine cases (default all)")
    parser.add_argument("--epsilon", type=float, default=0.02)
    parser.add_argument("--alpha", type=float, default=1e-6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--schedule", default="constant",
                        help="the assistant's num_assistant_tokens_schedule (default constant: "
                             "γ drafts per iteration, as the defect laws assume)")
    parser.add_argument("--confidence-threshold", type=float, default=0.0,
                        help="the assistant's assistant_confidence_threshold (default 0: no "
                             "early stop; transformers' own default is 0.4)")
    parser.add_argument("--json", metavar="FILE", help="also write the JSON report to FILE")
    args = parser.parse_args(argv)
    sys.path.insert(0, os.path.join(args.build, "python"))
    _install(args.dir)
    import torch
    import transformers

    import speclab.conformance as conformance
    from speclab.conformance import SamplerError, hf

    sampler = hf.assisted_generation_sampler(args.schedule, args.confidence_threshold)
    print(f"== Hugging Face transformers {transformers.__version__} assisted generation "
          f"(torch {torch.__version__}, {torch.get_num_threads()} threads; schedule "
          f"{args.schedule}, confidence threshold {args.confidence_threshold:g})", flush=True)
    start = time.monotonic()
    try:
        report = conformance.check(sampler, interface="engine", epsilon=args.epsilon,
                                   alpha=args.alpha, seed=args.seed, instances=args.instances)
    except (ValueError, SamplerError) as e:
        print(f"hf_assisted_generation: {e}", file=sys.stderr)
        return 2
    print(report.text())
    print(f"({time.monotonic() - start:.0f} s)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            f.write(report.to_json() + "\n")
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
