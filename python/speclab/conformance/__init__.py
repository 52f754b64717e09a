"""Conformance of a speculative sampler speclab did not write: is its output lossless — the law
plain decoding from the target gives — and does it accept as often as token-level speculative
sampling (Leviathan et al. 2023 Alg. 1, docs/verifiers.md V1), the optimum?

A sampler is tested through one of several interfaces (docs/python.md documents each, with a
worked example): probs (probabilities in, its own random numbers), uniforms (speclab's random
numbers in, with edge probes), seeds (one seed per request), draft (it draws its own drafts),
logits (logits and sampling parameters in), tree (a drafted token tree) and engine (a whole
decoding loop over models with exactly known laws). speclab generates instances, runs the
sampler on large batches and tests, per instance, that after every emitted prefix the next token
has the target's law there (a χ² per prefix, summed), at level α/m for m instances, with N chosen
so that an alternative at total-variation distance ε from the reference law is detected with
power 0.99; plus structural checks of every output and the interface's probes.

Verdicts per instance: "conforms" (flagged below-optimum when its acceptance or tokens per step
fall measurably short of V1's: a lossless sampled-match sampler conforms and is flagged),
"does not conform" (with a TV estimate, its interval and a diagnosis: the known defect family
whose exact law fits the counts decisively better than the lossless law, with its public
reference), or "broken" (a structural failure).

    import speclab.conformance as c
    report = c.check(my_sampler)        # my_sampler(p, q, x, n_draft, seed) -> emitted [B, γ+1]
    print(report.text()); report.passed
    c.check(my_sampler, interface="uniforms", instances=["ragged", "narrow"])

Command line: python3 -m speclab.conformance (--callable MODULE:FUNCTION | --command CMD)
[--interface NAME] ... (exit 0 conforms, 1 does not conform or is broken, 2 bad usage or a
sampler that crashes or breaks the interface: returns None, or no integer array of the
interface's shape; the message names the instance).
"""

import argparse
import importlib
import os
import sys
import warnings

from .. import stats  # noqa: F401  (speclab.conformance.stats, as before)
from ._chain import (INTERFACES as _CHAIN_INTERFACES, Instance, chain_law, enumerate_law,
                     instance_names as _probs_instance_names, instances,
                     sequence_probabilities)
from ._core import (POWER, InstanceReport, Report, SamplerError, callable_runner,
                    command_runner, run)

__all__ = ["DEFAULT_ALPHA", "DEFAULT_EPSILON", "POWER", "Instance", "InstanceReport", "Report",
           "SamplerError", "callable_runner", "chain_law", "check", "command_runner",
           "enumerate_law", "instance_names", "instances", "interface_names", "main",
           "sequence_probabilities", "verifier_sampler"]

DEFAULT_EPSILON = 0.02
DEFAULT_ALPHA = 1e-6


def _interfaces():
    """{name: Interface class}, in the order the documentation lists them."""
    from ._engine import EngineInterface
    from ._logits import LogitsInterface
    from ._tree import TreeInterface

    out = dict(_CHAIN_INTERFACES)
    for cls in (LogitsInterface, TreeInterface, EngineInterface):
        out[cls.name] = cls
    return out


def interface_names():
    """The interfaces check() takes, in order."""
    return list(_interfaces())


def _interface(name, **options):
    known = _interfaces()
    if name not in known:
        raise ValueError(f"interface is {name!r}; expected one of {', '.join(known)}")
    cls = known[name]
    options = {k: v for k, v in options.items() if v is not None}
    try:
        return cls(**options)
    except TypeError:
        raise ValueError(f"interface {name} takes no option {', '.join(options)}") from None


def instance_names(interface="probs", **options):
    """The instance names of an interface."""
    if interface == "probs" and not options:
        return _probs_instance_names()
    return [case.name for case in _interface(interface, **options).cases()]


def verifier_sampler(method="token", **options):
    """One of speclab's own verifiers as a probs-interface sampler for check(): "token",
    "block", "lenient" (with leniency=l), "typical" (with epsilon=, delta=) or
    "sampled-match"; lenient and typical are lossy and must fail, block and sampled-match are
    lossless (sampled-match below the optimum)."""
    from .. import verify

    def sampler(p, q, x, n, seed):
        seed = int(seed)
        if method in ("token", "lenient", "sampled-match", "coupled"):
            return verify.verify_chain(p, q, x, seed=seed, n_draft=n, method=method, **options)
        if method == "block":
            return verify.verify_block(p, q, x, seed=seed, n_draft=n, **options)
        if method == "typical":
            return verify.verify_typical(p, x, seed=seed, n_draft=n, **options)
        raise ValueError(f"method is {method!r}; expected token, block, lenient, typical or "
                         "sampled-match")

    return sampler


def check(sampler=None, *, interface="probs", command=None, epsilon=DEFAULT_EPSILON,
          alpha=DEFAULT_ALPHA, samples=None, seed=0, instances=None, max_batch=None,
          names=None, **options):
    """Tests a sampler for losslessness through one interface.

    Args:
        sampler: a callable with the interface's signature (docs/python.md; for "probs":
            (probs_target float32 [B, γ+1, V], probs_draft float32 [B, γ, V], draft_tokens
            int32 [B, γ], n_draft int32 [B], seed int) → emitted_tokens int [B, γ+1]: the
            accepted prefix, one token, then -1; a numpy array, a torch tensor or an object with
            an emitted_tokens attribute).
        interface: "probs" (default), "uniforms", "seeds", "draft", "logits", "tree" or
            "engine" (interface_names()).
        command: instead of sampler, a command line run as `CMD --in IN.h5 --out OUT.h5`: IN
            holds the interface's inputs as datasets of their names (scalars as attributes; for
            probs this is `speclab verify-batch`'s input layout), OUT must hold its outputs.
        epsilon: the TV distance each instance detects with power 0.99 (scaled per instance).
        alpha: the false-failure rate of the whole run, split over the instances.
        samples: requests per instance instead of the size ε calls for.
        seed: seeds everything speclab draws (drafts, uniforms, seeds handed to the sampler).
        instances: the instances to run, as names (a list, or a comma-separated string as the
            command line's --instances takes; default all, instance_names(interface)).
        max_batch: requests per sampler call (default: as many as 64 MB of inputs allow, and
            at most an eighth of the instance's N).
        names: the former name of `instances`, deprecated (DeprecationWarning).
        **options: the interface's options (logits: ties; tree: method; seeds: signature
            "probs" or "logits", and ties with "logits").

    Returns:
        Report (interface, passed, below_optimum, instances, text(), to_json(), junit_xml()).

    Raises:
        SamplerError: the sampler crashed or broke the interface; the message names the
            instance.
        ValueError: bad arguments.
    """
    if names is not None:
        warnings.warn("speclab.conformance.check(names=...) is deprecated; use instances=... "
                      "(the command line's --instances)", DeprecationWarning, stacklevel=2)
        if instances is not None:
            raise ValueError("pass instances= alone (names= is its deprecated former name)")
        instances = names
    if (sampler is None) == (command is None):
        raise ValueError("pass exactly one of sampler (a callable) and command")
    if not 0 < epsilon < 1:
        raise ValueError(f"epsilon is {epsilon}; expected a value in (0, 1)")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha is {alpha}; expected a value in (0, 1)")
    if samples is not None and samples < 1:
        raise ValueError(f"samples is {samples}; expected a positive count")
    if max_batch is not None and max_batch < 1:
        raise ValueError(f"max_batch is {max_batch}; expected a positive count")
    chosen = _interface(interface, **options)
    if command is not None and chosen.name == "engine":
        raise ValueError("the engine interface takes a Python callable only: its models are "
                         "Python objects (pass sampler=, or --callable)")
    runner = (callable_runner(sampler) if sampler is not None
              else command_runner(command, chosen))
    return run(chosen, runner, epsilon=epsilon, alpha=alpha, samples=samples, seed=seed,
               names=instances, max_batch=max_batch)


def _load_callable(spec):
    module, _, name = spec.partition(":")
    if not name:
        raise ValueError(f"--callable is {spec!r}; expected MODULE:FUNCTION")
    if module.endswith(".py") and os.path.exists(module):
        sys.path.insert(0, os.path.dirname(os.path.abspath(module)))
        module = os.path.splitext(os.path.basename(module))[0]
    obj = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def main(argv=None):
    """`python3 -m speclab.conformance`: exit 0 conforms, 1 does not conform or is broken, 2 bad
    usage or a sampler that crashes or breaks the interface (SamplerError)."""
    parser = argparse.ArgumentParser(
        prog="speclab conformance",
        description="Test a speculative sampler for losslessness (the target's law after every "
                    "emitted prefix) and its acceptance against token-level speculative "
                    "sampling's, through one of several interfaces.",
        epilog="Exit status: 0 conforms (below-optimum included); 1 does not conform, or is "
               "broken (a structural failure or a failed probe); 2 bad input or usage, or a "
               "sampler that crashes or breaks the interface (returns None, or no integer "
               "array of the interface's shape; the message says which, on which instance).")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--callable", metavar="MODULE:FUNCTION",
                       help="a Python callable with the interface's signature (probs: "
                            "probs_target, probs_draft, draft_tokens, n_draft, seed -> "
                            "emitted_tokens); MODULE may be a .py path")
    which.add_argument("--command", metavar="CMD",
                       help="a command run as CMD --in IN.h5 --out OUT.h5 (the interface's "
                            "inputs and outputs as datasets; probs: verify-batch layouts)")
    which.add_argument("--list", action="store_true",
                       help="list the interface's instances and exit")
    parser.add_argument("--interface", default="probs",
                        help="probs (default), uniforms, seeds, draft, logits, tree or engine")
    parser.add_argument("--ties", choices=("keep-all", "lowest-index"),
                        help="logits: the tie rule at a top-k / top-p / min-p cut-off that the "
                             "sampler declares (default lowest-index, speclab's own)")
    parser.add_argument("--signature", choices=("probs", "logits"),
                        help="seeds: the signature the per-request seeds come with (default "
                             "probs)")
    parser.add_argument("--method",
                        help="tree: the method the sampler declares (tree-iid, tree-swor, "
                             "traversal) for the exact step law besides losslessness")
    parser.add_argument("--epsilon", type=float, default=DEFAULT_EPSILON,
                        help=f"TV distance detected with power {POWER} (default %(default)s)")
    parser.add_argument("--alpha", type=float, default=DEFAULT_ALPHA,
                        help="false-failure rate of the whole run (default %(default)s)")
    parser.add_argument("--samples", type=int, help="requests per instance instead")
    parser.add_argument("--seed", type=int, default=0, help="seed of the drafts (default 0)")
    parser.add_argument("--instances", help="comma-separated instance names (default all)")
    parser.add_argument("--max-batch", type=int, help="requests per sampler call")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="print no report (the exit status tells; --json, -o and --junit "
                             "still write theirs)")
    parser.add_argument("-o", "--out", metavar="FILE", help="also write the JSON report to FILE")
    parser.add_argument("--junit", metavar="FILE", help="also write JUnit XML to FILE")
    args = parser.parse_args(argv)
    options = {"ties": args.ties, "method": args.method, "signature": args.signature}
    try:
        if args.list:
            for case in _interface(args.interface, **options).cases():
                print(f"{case.name:<22} {case.description}")
            return 0
        sampler = _load_callable(args.callable) if args.callable else None
        report = check(sampler, interface=args.interface, command=args.command,
                       epsilon=args.epsilon, alpha=args.alpha, samples=args.samples,
                       seed=args.seed, max_batch=args.max_batch,
                       instances=args.instances or None, **options)
    except (ValueError, ImportError, AttributeError, SamplerError) as e:
        print(f"speclab conformance: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(report.to_json())
    elif not args.quiet:
        print(report.text())
    for path, text in ((args.out, report.to_json() + "\n"), (args.junit, report.junit_xml())):
        if path:
            try:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
            except OSError as e:
                print(f"speclab conformance: cannot write {path}: {e}", file=sys.stderr)
                return 2
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
