"""Conformance of a speculative sampler speclab did not write: is its output law that of
token-level speculative sampling (Leviathan et al. 2023 Alg. 1, docs/verifiers.md V1), i.e. is it
lossless?

speclab generates instances, draws the drafts itself from q, runs the sampler on large batches
and compares the law of the whole emitted step (accepted prefix plus one token) with its exact
law: for a request with n draft positions, the emitted sequence s_1..s_{k+1} has probability

    Π_{i≤k} min(p_i(s_i), q_i(s_i)) · (max(0, p_{k+1}(s_{k+1}) − q_{k+1}(s_{k+1}))   if k < n
                                       p_{n+1}(s_{n+1})                               if k = n)

(docs/python.md derives it; tests/python check it against core/exact's enumeration). Each
instance gets one Pearson χ² test (docs/testing.md "Statistical checks") at level α/m for m
instances, with N chosen so that any alternative at total-variation distance ε from the exact
law (over the test's bins) is detected with power 0.99, plus structural checks of every row.

    import speclab.conformance as c
    report = c.check(my_sampler)        # my_sampler(p, q, x, n_draft, seed) -> emitted [B, γ+1]
    print(report.text()); report.passed
    c.check(my_sampler, instances=["ragged", "narrow"])   # some instances (c.instance_names())

Command line: python3 -m speclab.conformance (--callable MODULE:FUNCTION | --command CMD) ...
(exit 0 conforms, 1 does not, 2 bad usage or a sampler that crashes or breaks the interface:
returns None, or no integer array [B, γ+1]; the message names the instance).
"""

import argparse
import dataclasses
import importlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
import warnings
from xml.sax.saxutils import quoteattr

import numpy as np

from .. import stats

DEFAULT_EPSILON = 0.02
DEFAULT_ALPHA = 1e-6
POWER = 0.99
# The sampler sees at most this many float32 probabilities per call (64 MB).
MAX_BATCH_FLOATS = 1 << 24
# What a sampler returns, as its errors say.
EMITTED = ("emitted_tokens, an integer array [B, γ+1] (a numpy array, a torch tensor or an "
           "object with an emitted_tokens attribute)")


class SamplerError(RuntimeError):
    """The sampler crashed (raised, exited non-zero, wrote no output) or broke the interface
    (returned None, or no integer array [B, γ+1]): no verdict, the command line exits 2. The
    message names the instance it happened on."""


@dataclasses.dataclass
class Instance:
    """One family member: C request classes, request b of a batch belongs to class b mod C.

    probs_target float64 [C, γ+1, V] and probs_draft float64 [C, γ, V] are the rows (rounded to
    float32 before anyone sees them), n_draft int [C] the draft positions each class uses; rows
    beyond n_draft are padding that a correct sampler never reads. epsilon_scale multiplies the
    run's ε for this instance (narrow vocabularies afford smaller ε, large ones need larger).
    """

    name: str
    description: str
    probs_target: np.ndarray
    probs_draft: np.ndarray
    n_draft: np.ndarray
    epsilon_scale: float = 1.0

    @property
    def vocab(self):
        return self.probs_target.shape[2]

    @property
    def gamma(self):
        return self.probs_draft.shape[1]

    @property
    def classes(self):
        return self.probs_target.shape[0]


def _normalise(w):
    w = np.asarray(w, np.float64)
    return w / w.sum(axis=-1, keepdims=True)


def _rows(rng, shape, concentration=1.0):
    return rng.dirichlet(np.full(shape[-1], concentration), shape[:-1])


def _one(rows_p, rows_q, n_draft=None):
    p, q = np.asarray(rows_p)[None], np.asarray(rows_q)[None]
    n = np.array([q.shape[1] if n_draft is None else n_draft])
    return p, q, n


def instances(seed=20261129):
    """The instance family, generated from a fixed seed (the same instances every run)."""
    rng = np.random.default_rng(seed)
    out = []
    g, v = 3, 8

    # Rows that differ by position, overlapping supports: a bonus or residual from the wrong
    # row, a residual from p instead of max(0, p − q), or shared noise all show here.
    p, q = _rows(rng, (g + 1, v), 0.7), _rows(rng, (g, v), 0.7)
    out.append(Instance("position-dependent", "V = 8, γ = 3, Dirichlet(0.7) rows per position",
                        *_one(p, q), 0.5))

    # Ragged n_draft: classes with 0..γ draft positions; padding rows are valid but different.
    p, q = _rows(rng, (g + 1, g + 1, v)), _rows(rng, (g + 1, g, v))
    out.append(Instance("ragged", "V = 8, γ = 3, n_draft = 0, 1, 2, 3 in one batch", p, q,
                        np.arange(g + 1)))

    # One-hot rows: a one-hot target after a spread draft, a one-hot draft under a spread target.
    eye = np.eye(v)
    p = np.stack([eye[2], _rows(rng, (v,)), eye[5], _rows(rng, (v,))])
    q = np.stack([_rows(rng, (v,)), eye[1], eye[5]])
    out.append(Instance("one-hot", "V = 8, γ = 3, one-hot target and draft rows", *_one(p, q)))

    # Disjoint supports: nothing is accepted and the residual is p.
    p = np.zeros((g + 1, v))
    p[:, :4] = _rows(rng, (g + 1, 4))
    q = np.zeros((g, v))
    q[:, 4:] = _rows(rng, (g, 4))
    out.append(Instance("disjoint", "V = 8, γ = 3, p on tokens 0-3, q on tokens 4-7", *_one(p, q)))

    # Draft equal to target: everything accepted, then the bonus from p_{γ+1}.
    p = _rows(rng, (g + 1, v))
    out.append(Instance("draft-equals-target", "V = 8, γ = 3, q_i = p_i", *_one(p, p[:g])))

    # Zero-mass tails: p and q live on the first 12 of 64 tokens, p has mass where q has none and
    # q where p has none.
    p = np.zeros((g + 1, 64))
    q = np.zeros((g, 64))
    p[:, :12] = _rows(rng, (g + 1, 12), 0.5)
    q[:, :12] = _rows(rng, (g, 12), 0.5)
    p[:, 3] = 0
    q[:, 7] = 0
    out.append(Instance("zero-tail", "V = 64, γ = 3, mass on 12 tokens, holes in p and in q",
                        *_one(_normalise(p), _normalise(q))))

    # Narrow vocabulary: few categories, so a small ε is cheap.
    p, q = _rows(rng, (4, 2)), _rows(rng, (3, 2))
    out.append(Instance("narrow", "V = 2, γ = 3 at ε/2", *_one(p, q), 0.5))

    # FlashInfer's test_speculative_sampling scenario: softmax of Gaussian logits, the draft
    # filtered to its top-k; vLLM's rejection-sampler scenario: a peaked target (low
    # temperature) against a flat draft. Both at V = 32, γ = 4.
    logits = rng.normal(size=(5, 32)) * 2
    p = _normalise(np.exp(logits))
    ql = logits[:4] + rng.normal(size=(4, 32))
    keep = ql >= np.sort(ql, axis=1)[:, [-8]]
    q = _normalise(np.where(keep, np.exp(ql), 0))
    out.append(Instance("flashinfer-topk", "V = 32, γ = 4, Gaussian logits, draft top-8",
                        *_one(p, q)))
    p = _normalise(np.exp(rng.normal(size=(5, 32)) * 4))
    q = np.full((4, 32), 1 / 32)
    out.append(Instance("vllm-peaked", "V = 32, γ = 4, peaked target, uniform draft",
                        *_one(p, q)))

    # A larger vocabulary: Zipf-like rows, the draft a perturbed target, at 1.5ε.
    v = 4096
    base = 1 / np.arange(1, v + 1) ** 1.1
    p = np.stack([_normalise(base[rng.permutation(v)]) for _ in range(g + 1)])
    q = _normalise(p[:g] * rng.lognormal(0, 0.5, (g, v)))
    out.append(Instance("large-vocab", "V = 4096, γ = 3, Zipf(1.1) rows, q = p·lognormal noise",
                        *_one(p, q), 1.5))
    for inst in out:
        # The rows everyone sees are float32; the law is computed from exactly those values.
        inst.probs_target = _normalise(inst.probs_target.astype(np.float32))
        inst.probs_draft = _normalise(inst.probs_draft.astype(np.float32))
    return out


def instance_names():
    return [i.name for i in instances()]


# check() takes the instance names as its keyword `instances`, which hides the function there.
_instance_family = instances


# The exact law --------------------------------------------------------------------------------


def sequence_probabilities(p, q, n, emitted):
    """Exact probabilities (float64) of emitted rows under token-level speculative sampling.

    Args:
        p: float64 [γ+1, V], q: float64 [γ, V], n: draft positions used (≤ γ).
        emitted: int [M, γ+1] rows, -1 padded, already structurally valid (length ≤ n+1).

    Returns:
        float64 [M].
    """
    lengths = (emitted >= 0).sum(axis=1)
    prob = np.ones(len(emitted))
    m = np.minimum(p[:n], q[:n])
    res = np.maximum(p[:n] - q[:n], 0)
    for i in range(n + 1):
        tok = np.clip(emitted[:, i], 0, None)
        accepted = lengths > i + 1
        last = lengths == i + 1
        if i < n:
            prob = np.where(accepted, prob * m[i, tok], prob)
            prob = np.where(last, prob * res[i, tok], prob)
        else:
            prob = np.where(last, prob * p[n, tok], prob)
    return prob


def enumerate_law(p, q, n, threshold):
    """The sequences of probability ≥ threshold, as (list of tuples, float64 probabilities);
    subtrees whose prefix mass is below threshold are left to the remainder."""
    seqs, probs = [], []
    m = np.minimum(p[:n], q[:n])
    res = np.maximum(p[:n] - q[:n], 0)

    def visit(prefix, mass, i):
        last = res[i] if i < n else p[n]
        for y in np.nonzero((last > 0) & (last * mass >= threshold))[0]:
            seqs.append(prefix + (int(y),))
            probs.append(mass * last[y])
        if i < n:
            for x in np.nonzero((m[i] > 0) & (m[i] * mass >= threshold))[0]:
                visit(prefix + (int(x),), mass * m[i, x], i + 1)

    visit((), 1.0, 0)
    return seqs, np.array(probs)


# Running a sampler ----------------------------------------------------------------------------


def callable_runner(sampler):
    """A runner over a Python callable (probs_target, probs_draft, draft_tokens, n_draft, seed)
    → emitted_tokens."""

    def run(p, q, x, n, seed):
        try:
            out = sampler(p, q, x, n, seed)
        except Exception as e:  # the sampler's own failure, reported as such
            raise SamplerError(f"the sampler raised {type(e).__name__}: {e}") from e
        if hasattr(out, "emitted_tokens"):
            out = out.emitted_tokens
        if out is None:
            raise SamplerError(f"the sampler returned None; expected {EMITTED}")
        if hasattr(out, "detach"):
            out = out.detach().cpu().numpy()
        try:
            return np.asarray(out)
        except (TypeError, ValueError) as e:  # ragged nested lists, say
            raise SamplerError(f"the sampler returned a {type(out).__name__} that is not an "
                               f"array ({e}); expected {EMITTED}") from e

    return run


def command_runner(command):
    """A runner over a command `CMD --in IN.h5 --out OUT.h5`: IN in verify-batch's input layout
    (attribute method = "token"), OUT in its output layout (emitted_tokens required)."""
    import h5py

    argv = shlex.split(command) if isinstance(command, str) else list(command)

    def run(p, q, x, n, seed):
        with tempfile.TemporaryDirectory(prefix="speclab-conformance-") as tmp:
            src, dst = os.path.join(tmp, "in.h5"), os.path.join(tmp, "out.h5")
            with h5py.File(src, "w") as f:
                f["probs_target"] = p
                f["probs_draft"] = q
                f["draft_tokens"] = x
                f["n_draft"] = n
                f.attrs["seed"] = np.uint64(seed)
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
                    return f["emitted_tokens"][()]
            except (OSError, KeyError) as e:
                raise SamplerError(f"{shlex.join(argv)} wrote no readable emitted_tokens in "
                                   f"OUT.h5: {e}") from e

    return run


def verifier_sampler(method="token", **options):
    """One of speclab's own verifiers as a sampler for check(): "token", "block", "lenient"
    (with leniency=l) or "typical" (with epsilon=, delta=); the lossy ones must fail."""
    from .. import verify

    def sampler(p, q, x, n, seed):
        seed = int(seed)
        if method in ("token", "lenient"):
            return verify.verify_chain(p, q, x, seed=seed, n_draft=n, method=method, **options)
        if method == "block":
            return verify.verify_block(p, q, x, seed=seed, n_draft=n, **options)
        if method == "typical":
            return verify.verify_typical(p, x, seed=seed, n_draft=n, **options)
        raise ValueError(f"method is {method!r}; expected token, block, lenient or typical")

    return sampler


def _check_interface(emitted, b, width):
    """Raises SamplerError unless the sampler's output is an integer array [b, width]: another
    shape or type is a misuse of the interface, not a law to test."""
    if not isinstance(emitted, np.ndarray):
        raise SamplerError(f"the sampler returned {type(emitted).__name__}; expected {EMITTED}")
    if emitted.shape != (b, width):
        raise SamplerError(f"the sampler returned an array of shape {list(emitted.shape)}; "
                           f"expected emitted_tokens [B, γ+1] = {[b, width]}")
    if emitted.dtype.kind not in "iu":
        raise SamplerError(f"the sampler returned an array of dtype {emitted.dtype}; expected "
                           "emitted_tokens of an integer type (-1 after the last token)")


def _structure(emitted, x, n, vocab, p_rows):
    """Structural defects of emitted rows, as a list of messages (empty when well-formed).
    emitted: int [B, γ+1] (_check_interface passed), p_rows: float64 [B, γ+1, V] target rows per
    request, n: int [B]."""
    b, width = x.shape[0], x.shape[1] + 1
    e = emitted.astype(np.int64)
    problems = []

    def report(bad, what):
        rows = np.nonzero(bad)[0]
        if len(rows):
            r = rows[0]
            problems.append(f"{what}: {len(rows)} of {b} requests, e.g. request {r} emitted "
                            f"{e[r].tolist()} (drafts {x[r, :n[r]].tolist()}, n_draft {n[r]})")

    valid = e >= 0
    lengths = valid.sum(axis=1)
    report((valid[:, 1:] & ~valid[:, :-1]).any(axis=1) | (e < -1).any(axis=1),
           "-1 padding is not a suffix (or an id below -1)")
    report(lengths == 0, "no token emitted")
    report(lengths > n + 1, "more than n_draft + 1 tokens emitted")
    report((valid & (e >= vocab)).any(axis=1), f"token id ≥ V = {vocab}")
    cols = np.arange(width - 1)[None, :]
    in_prefix = cols < (lengths - 1)[:, None]
    report((in_prefix & (e[:, :-1] != x)).any(axis=1), "accepted prefix differs from the drafts")
    if not problems:
        k = lengths - 1
        last = e[np.arange(b), k]
        report(p_rows[np.arange(b), k, last] <= 0, "emitted a token of target probability 0")
    return problems


@dataclasses.dataclass
class InstanceReport:
    name: str
    description: str
    vocab: int
    gamma: int
    classes: int
    samples: int
    bins: int
    statistic: float
    p_value: float
    alpha: float
    epsilon: float
    detectable_epsilon: float
    structural: list
    impossible: str
    seconds: float
    passed: bool


@dataclasses.dataclass
class Report:
    """The outcome of check(): passed, and one InstanceReport per instance."""

    passed: bool
    alpha: float
    epsilon: float
    seed: int
    instances: list
    seconds: float

    def text(self):
        lines = [f"speclab conformance: token-level speculative sampling, α = {self.alpha:g} "
                 f"over {len(self.instances)} instances (Bonferroni), power {POWER} at TV "
                 f"distance ε, seed {self.seed}"]
        for r in self.instances:
            verdict = "pass" if r.passed else "FAIL"
            lines.append(
                f"  {verdict}  {r.name:<20} {r.description}: N = {r.samples}, {r.bins} bins, "
                f"χ² = {r.statistic:.1f}, p = {r.p_value:.3g} (level {r.alpha:.2g}), detects "
                f"ε ≥ {r.detectable_epsilon:.4f}, {r.seconds:.1f} s")
            for problem in r.structural:
                lines.append(f"        structure: {problem}")
            if r.impossible:
                lines.append(f"        impossible: {r.impossible}")
        verdict = "conforms" if self.passed else "does NOT conform"
        failed = [r.name for r in self.instances if not r.passed]
        lines.append(f"verdict: the sampler {verdict}"
                     + (f" (failed: {', '.join(failed)})" if failed else "")
                     + f"; {self.seconds:.1f} s")
        return "\n".join(lines)

    def to_dict(self):
        return dataclasses.asdict(self)

    def to_json(self):
        return json.dumps(self.to_dict(), indent=2, allow_nan=True)

    def junit_xml(self):
        cases = []
        for r in self.instances:
            body = ""
            if not r.passed:
                message = "; ".join(r.structural + ([r.impossible] if r.impossible else [])) or (
                    f"chi-square p = {r.p_value:.3g} < {r.alpha:.2g}")
                body = f"<failure message={quoteattr(message)}/>"
            cases.append(f'  <testcase classname="speclab.conformance" name={quoteattr(r.name)}'
                         f' time="{r.seconds:.3f}">{body}</testcase>')
        failures = sum(not r.passed for r in self.instances)
        return (f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name="speclab.conformance" '
                f'tests="{len(self.instances)}" failures="{failures}" '
                f'time="{self.seconds:.3f}">\n' + "\n".join(cases) + "\n</testsuite>\n")


def _plan(inst, epsilon, alpha, samples):
    """(N, law per class) with N the sample size for this instance's ε, bins read at that N."""
    eps = epsilon * inst.epsilon_scale
    n_total = samples or stats.sample_size(16, eps, alpha, POWER)
    for _ in range(3 if samples is None else 1):
        threshold = stats.MIN_EXPECTED_PER_BIN / n_total
        laws = [enumerate_law(inst.probs_target[c], inst.probs_draft[c], inst.n_draft[c],
                              threshold * inst.classes) for c in range(inst.classes)]
        bins = sum(len(s) for s, _ in laws) + 1
        if samples is None:
            n_total = stats.sample_size(max(bins, 2), eps, alpha, POWER)
    n_total = -(-n_total // inst.classes) * inst.classes
    return n_total, laws, eps


def _drafts(rng, inst, classes):
    """Drafts x [B, γ] drawn from q by speclab (padding positions get arbitrary ids)."""
    b, g, v = len(classes), inst.gamma, inst.vocab
    x = rng.integers(0, v, (b, g))
    for c in range(inst.classes):
        idx = np.nonzero(classes == c)[0]
        for i in range(inst.n_draft[c]):
            cdf = np.cumsum(inst.probs_draft[c, i])
            x[idx, i] = np.minimum(np.searchsorted(cdf, rng.random(len(idx)) * cdf[-1],
                                                   side="right"), v - 1)
    return x.astype(np.int32)


def _run_instance(runner, inst, epsilon, alpha, samples, rng, max_batch):
    start = time.monotonic()
    n_total, laws, eps = _plan(inst, epsilon, alpha, samples)
    g, v, c = inst.gamma, inst.vocab, inst.classes
    batch = max(c, min(n_total, max_batch or MAX_BATCH_FLOATS // ((2 * g + 1) * v)) // c * c)
    p32 = inst.probs_target.astype(np.float32)
    q32 = inst.probs_draft.astype(np.float32)
    counts = [dict() for _ in range(c)]
    problems, impossible, done = [], "", 0
    while done < n_total and not problems and not impossible:
        b = min(batch, n_total - done)
        classes = np.arange(b) % c
        x = _drafts(rng, inst, classes)
        n = inst.n_draft[classes].astype(np.int32)
        p, q = p32[classes], q32[classes]  # fresh copies: a sampler may write into them
        try:
            emitted = runner(p, q, x, n, int(rng.integers(0, 2**63)))
            _check_interface(emitted, b, g + 1)
        except SamplerError as e:
            raise SamplerError(f"instance {inst.name} ({inst.description}), call "
                               f"{done // batch + 1} (B = {b}): {e}") from e
        problems = _structure(emitted, x, n, v, inst.probs_target[classes])
        if problems:
            break
        e = emitted.astype(np.int64)
        for k in range(c):
            rows, freq = np.unique(e[classes == k], axis=0, return_counts=True)
            prob = sequence_probabilities(inst.probs_target[k], inst.probs_draft[k],
                                          int(inst.n_draft[k]), rows)
            if (prob <= 0).any():
                bad = rows[np.argmax(prob <= 0)]
                impossible = (f"emitted {bad.tolist()} (class {k}, n_draft {inst.n_draft[k]}), "
                              "a sequence of probability 0 under speculative sampling")
                break
            for row, f in zip(map(tuple, rows.tolist()), freq.tolist()):
                counts[k][row] = counts[k].get(row, 0) + f
        done += b
    observed, probs = [], []
    for k, (seqs, prob) in enumerate(laws):
        index = {s: i for i, s in enumerate(seqs)}
        obs = np.zeros(len(seqs), np.int64)
        rest = 0
        for row, f in counts[k].items():
            key = tuple(t for t in row if t >= 0)
            if key in index:
                obs[index[key]] += f
            else:
                rest += f
        observed += obs.tolist() + [rest]
        probs += (prob / c).tolist() + [max(0.0, 1.0 - prob.sum()) / c]
    probs = np.array(probs)
    result = {"statistic": float("nan"), "p_value": 0.0, "bins": 0}
    if not problems and not impossible:
        result = stats.chi_square_test(observed, probs / probs.sum())
    passed = not problems and not impossible and result["p_value"] >= alpha
    return InstanceReport(
        inst.name, inst.description, v, g, c, done, int(result["bins"]),
        float(result["statistic"]), float(result["p_value"]), alpha, eps,
        stats.detectable_tv(max(int(result["bins"]), 2), max(done, 1), alpha, POWER)
        if result["bins"] else float("nan"), problems, impossible, time.monotonic() - start,
        passed)


def check(sampler=None, *, command=None, epsilon=DEFAULT_EPSILON, alpha=DEFAULT_ALPHA,
          samples=None, seed=0, instances=None, max_batch=None, names=None):
    """Tests a sampler against the exact law of token-level speculative sampling.

    Args:
        sampler: a callable (probs_target float32 [B, γ+1, V], probs_draft float32 [B, γ, V],
            draft_tokens int32 [B, γ], n_draft int32 [B], seed int) → emitted_tokens int
            [B, γ+1] (accepted prefix, one token, then -1; a numpy array, a torch tensor or an
            object with an emitted_tokens attribute). It may use its own random numbers.
        command: instead of sampler, a command line run as `CMD --in IN.h5 --out OUT.h5` (IN in
            `speclab verify-batch`'s input layout with method "token", OUT in its output
            layout).
        epsilon: the TV distance each instance detects with power 0.99 (scaled per instance,
            see instances()).
        alpha: the false-failure rate of the whole run, split over the instances.
        samples: requests per instance instead of the size ε calls for.
        seed: seeds the drafts and the seeds handed to the sampler.
        instances: the instances to run, as names (a list, or a comma-separated string as the
            command line's --instances takes; default all, instance_names()).
        max_batch: requests per sampler call (default: as many as 64 MB of rows allow).
        names: the former name of `instances`, deprecated (DeprecationWarning).

    Returns:
        Report (passed, instances, text(), to_json(), junit_xml()).

    Raises:
        SamplerError: the sampler crashed or returned no integer array [B, γ+1]; the message
            names the instance.
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
    chosen = _instance_family()
    if instances is not None:
        wanted = ([n.strip() for n in instances.split(",") if n.strip()]
                  if isinstance(instances, str) else list(instances))
        known = {i.name for i in chosen}
        unknown = [n for n in wanted if n not in known]
        if unknown or not wanted:
            what = (f"unknown instance {', '.join(map(str, unknown))}" if unknown
                    else "no instance named")
            raise ValueError(f"{what}; expected some of {', '.join(sorted(known))}")
        chosen = [i for i in chosen if i.name in wanted]
    runner = callable_runner(sampler) if sampler is not None else command_runner(command)
    level = stats.bonferroni_level(alpha, len(chosen))
    rng = np.random.default_rng(seed)
    start = time.monotonic()
    reports = [_run_instance(runner, inst, epsilon, level, samples, rng, max_batch)
               for inst in chosen]
    return Report(all(r.passed for r in reports), alpha, epsilon, seed, reports,
                  time.monotonic() - start)


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
    """`python3 -m speclab.conformance`: exit 0 conforms, 1 does not, 2 bad usage or a sampler
    that crashes or breaks the interface (SamplerError)."""
    parser = argparse.ArgumentParser(
        prog="speclab conformance",
        description="Test a speculative sampler for losslessness against the exact law of "
                    "token-level speculative sampling.",
        epilog="Exit status: 0 conforms; 1 does not; 2 bad input or usage, or a sampler that "
               "crashes or breaks the interface (returns None, or no integer array [B, γ+1]; "
               "the message says which, on which instance).")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--callable", metavar="MODULE:FUNCTION",
                       help="a Python callable (probs_target, probs_draft, draft_tokens, "
                            "n_draft, seed) -> emitted_tokens; MODULE may be a .py path")
    which.add_argument("--command", metavar="CMD",
                       help="a command run as CMD --in IN.h5 --out OUT.h5 (verify-batch layouts)")
    which.add_argument("--list", action="store_true", help="list the instances and exit")
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
    if args.list:
        for inst in instances():
            print(f"{inst.name:<20} {inst.description}")
        return 0
    try:
        sampler = _load_callable(args.callable) if args.callable else None
        report = check(sampler, command=args.command, epsilon=args.epsilon, alpha=args.alpha,
                       samples=args.samples, seed=args.seed, max_batch=args.max_batch,
                       instances=args.instances or None)
    except (ValueError, ImportError, AttributeError, SamplerError) as e:
        print(f"speclab conformance: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(report.to_json())
    elif not args.quiet:
        print(report.text())
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(report.to_json() + "\n")
    if args.junit:
        with open(args.junit, "w", encoding="utf-8") as f:
            f.write(report.junit_xml())
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
