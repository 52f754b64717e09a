"""The one runner of speclab.conformance: every interface (probs, uniforms, seeds, draft, logits,
tree, engine) describes its instances, how one batch is drawn and handed to the sampler, and the
exact laws its outcomes are compared with; this module runs the batches, counts the outcomes and
decides the verdict with one χ² path.

An outcome is a tuple of token ids (a chain step's emitted tokens without the -1 padding, a
tree step's, or an engine's first L tokens). Two tests read the same counts:

  lossless   for every emitted prefix s_1..s_k reached by enough requests, the law of the next
             emitted token must be the target's row after that prefix (plain decoding's law of
             that token). A Pearson χ² per prefix, summed (the statistics are independent given
             the counts reaching each prefix), with remainder binning as core/stats does it. This
             test does not depend on how many tokens a step keeps, so a lossless sampler of any
             method passes it.
  reference  the χ² of the whole outcome against the exact law of the interface's reference
             method (token-level speculative sampling, V1, for chains; the declared method for
             trees; plain decoding for engines), remainder-binned.

Verdicts: "broken" (structural failure: an impossible token, a prefix that is not the drafts,
a probe that fails), "does not conform" (the lossless test rejects at its level), "conforms"
(it does not), flagged "below-optimum" when the measured acceptance falls measurably short of the
reference's (a one-sided z-test at the same level).
"""

import dataclasses
import os
import shlex
import subprocess
import tempfile

import numpy as np


class SamplerError(RuntimeError):
    """The sampler crashed (raised, exited non-zero, wrote no output) or broke the interface
    (returned None, or no integer array of the interface's shape): no verdict, the command line
    exits 2. The message names the instance it happened on."""


@dataclasses.dataclass
class Case:
    """One instance of an interface. Request b of a batch belongs to class b mod classes;
    epsilon_scale multiplies the run's ε for this instance; data is the interface's own."""

    name: str
    description: str
    classes: int
    data: object = None
    epsilon_scale: float = 1.0


@dataclasses.dataclass
class Observed:
    """What one sampler call gave: one outcome tuple per request, the structural problems
    (messages naming a request and what it emitted; outcomes are not counted when there are
    any), and per request the draft tokens accepted and the draft positions it had (int [B]
    each; None where acceptance does not apply)."""

    outcomes: list
    problems: list
    accepted: np.ndarray = None
    drafted: np.ndarray = None


@dataclasses.dataclass
class Defect:
    """A known defect family for diagnosis: name, the public report it is known from, and law,
    a function from a list of outcome tuples to their float64 probabilities under the defect
    (0 where impossible)."""

    name: str
    reference: str
    law: object


class Interface:
    """What an interface supplies to the runner. Subclasses set name, summary (one line),
    inputs and outputs (the argument and result names, in the callable's order: the HDF5
    dataset names of a --command sampler) and implement the methods below."""

    name = ""
    summary = ""
    inputs = ()
    outputs = ("emitted_tokens",)

    def cases(self):
        """The instances, generated from a fixed seed (the same every run)."""
        raise NotImplementedError

    def batch_floats(self, case):
        """Floats handed to the sampler per request (sets the batch size)."""
        raise NotImplementedError

    def call(self, runner, case, classes, rng):
        """Draws the inputs of one batch (request b of class classes[b]), runs
        runner(dict of named inputs) → tuple of named outputs, and returns Observed."""
        raise NotImplementedError

    def target_row(self, case, cls, prefix):
        """float64 [V]: the law of the token after the emitted prefix (a tuple) under plain
        decoding, for class cls; the lossless test compares with it."""
        raise NotImplementedError

    def reference_law(self, case, cls, threshold):
        """(outcome tuples, float64 probabilities): the reference method's exact law of the
        outcome for class cls, every outcome of probability ≥ threshold (the rest is the
        remainder bin); None when the interface has no reference law."""
        return None

    def optimum(self, case, cls):
        """float64 [γ]: the reference method's probability that draft position i is accepted
        given it is reached (Σ min(p_i, q_i) for V1); None where acceptance does not apply."""
        return None

    def defects(self, case, cls):
        """The defect families (Defect) scored against the counts of a failing instance."""
        return []

    def probes(self, runner, case):
        """Deterministic probes: structural problems found (messages), empty when all pass."""
        return []


# Running a sampler: a runner takes the named inputs (a dict, in the interface's order) and the
# output names, and returns one numpy array per output name. ------------------------------------


def _as_array(out, what):
    if out is None:
        raise SamplerError(f"the sampler returned None; expected {what}")
    if hasattr(out, "detach"):
        out = out.detach().cpu().numpy()
    try:
        return np.asarray(out)
    except (TypeError, ValueError) as e:  # ragged nested lists, say
        raise SamplerError(f"the sampler returned a {type(out).__name__} that is not an array "
                           f"({e}); expected {what}") from e


def callable_runner(sampler):
    """A runner over a Python callable, called with the inputs positionally. One output may be
    returned bare, as a torch tensor, or as an object with an attribute of the output's name
    (emitted_tokens); several as a tuple in the interface's order."""

    def run(inputs, outputs):
        try:
            out = sampler(*inputs.values())
        except Exception as e:  # the sampler's own failure, reported as such
            raise SamplerError(f"the sampler raised {type(e).__name__}: {e}") from e
        if len(outputs) == 1:
            if hasattr(out, outputs[0]):
                out = getattr(out, outputs[0])
            return (_as_array(out, outputs[0]),)
        if not isinstance(out, (tuple, list)) or len(out) != len(outputs):
            raise SamplerError(f"the sampler returned {type(out).__name__}; expected a tuple "
                               f"({', '.join(outputs)})")
        return tuple(_as_array(o, n) for o, n in zip(out, outputs))

    return run


def command_runner(command, interface):
    """A runner over a command run as `CMD --in IN.h5 --out OUT.h5`: IN holds every array input
    as a dataset of its name and every scalar as an attribute (with attribute interface = the
    interface's name, and method = "token" for probs so that `speclab verify-batch` reads it);
    OUT must hold a dataset per output name."""
    import h5py

    argv = shlex.split(command) if isinstance(command, str) else list(command)

    def run(inputs, outputs):
        with tempfile.TemporaryDirectory(prefix="speclab-conformance-") as tmp:
            src, dst = os.path.join(tmp, "in.h5"), os.path.join(tmp, "out.h5")
            with h5py.File(src, "w") as f:
                for key, value in inputs.items():
                    if np.ndim(value) == 0:
                        f.attrs[key] = value
                    else:
                        f[key] = value
                f.attrs["interface"] = interface
                if interface == "probs":
                    f.attrs["method"] = "token"
            try:
                done = subprocess.run(argv + ["--in", src, "--out", dst], capture_output=True,
                                      text=True)
            except OSError as e:
                raise SamplerError(f"cannot run {argv[0]}: {e}") from e
            if done.returncode != 0:
                raise SamplerError(f"{shlex.join(argv)} exited with status {done.returncode}: "
                                   f"{(done.stderr or done.stdout).strip()[-2000:]}")
            try:
                with h5py.File(dst, "r") as f:
                    return tuple(f[name][()] for name in outputs)
            except (OSError, KeyError) as e:
                raise SamplerError(f"{shlex.join(argv)} wrote no readable "
                                   f"{', '.join(outputs)} in OUT.h5: {e}") from e

    return run
