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
import json
import math
import os
import shlex
import subprocess
import tempfile
import time
from xml.sax.saxutils import quoteattr

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
    any), per request the draft tokens accepted and the draft positions it had (int [B] each;
    None where acceptance does not apply), and for a sampler that drafts, its draft tuples."""

    outcomes: list
    problems: list
    accepted: np.ndarray = None
    drafted: np.ndarray = None
    drafts: list = None


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

    def outcome_probabilities(self, case, cls, outcomes):
        """float64 [len(outcomes)]: the reference law's probability of each outcome tuple (the
        lossless law the defect families are scored against); None without a reference."""
        return None

    def alternatives(self, case):
        """{name: acceptance}: the per-position acceptance of other lossless methods, printed
        beside the measured one (sampled-match's Σ p·q for chains)."""
        return {}

    def plan_bins(self, case, threshold):
        """Bins of the reference law at this threshold (sets N); interfaces without a reference
        law override it."""
        return sum(len(seqs) for seqs, _ in (
            self.reference_law(case, cls, threshold) for cls in range(case.classes))) + 1

    def drafts_law(self, case, cls, threshold):
        """For an interface whose sampler drafts: the exact law of the draft tuples, as
        reference_law; None otherwise."""
        return None

    def probes(self, runner, case):
        """Deterministic probes: (problems, diagnosis) — messages for every failed probe, and a
        dict (name, reference) naming the defect a failure shows, or None."""
        return [], None


def normalise(w):
    """float64 rows of w divided by their sums (along the last axis)."""
    w = np.asarray(w, np.float64)
    return w / w.sum(axis=-1, keepdims=True)


def padding_problems(e, report):
    """The structural rules every emitted row shares: the -1 padding is a suffix (no id below
    -1) and at least one token was emitted. e: int64 [B, W]; report(bad [B] bool, message)
    records a problem. Returns (valid bool [B, W], lengths int [B])."""
    valid = e >= 0
    lengths = valid.sum(axis=1)
    report((valid[:, 1:] & ~valid[:, :-1]).any(axis=1) | (e < -1).any(axis=1),
           "-1 padding is not a suffix (or an id below -1)")
    report(lengths == 0, "no token emitted")
    return valid, lengths


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
    as a dataset of its name and every scalar as an attribute, with the attribute interface =
    the interface's name and its declared options as attributes (ties, method, signature) —
    except for probs, whose IN is exactly `speclab verify-batch`'s input layout (attribute
    method = "token"); OUT must hold a dataset per output name."""
    attributes = {"interface": interface.name}
    for option in ("ties", "method", "signature"):
        if getattr(interface, option, None) is not None:
            attributes[option] = getattr(interface, option)
    if interface.name == "probs":  # exactly verify-batch's input layout, which refuses others
        attributes = {"method": "token"}
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
                for key, value in attributes.items():
                    f.attrs[key] = value
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


# The tests ------------------------------------------------------------------------------------


def _children(counts):
    """{prefix: {next token: count}} from {outcome tuple: count}."""
    nodes = {}
    for outcome, f in counts.items():
        for k in range(len(outcome)):
            child = nodes.setdefault(outcome[:k], {})
            child[outcome[k]] = child.get(outcome[k], 0) + f
    return nodes


def lossless_test(interface, case, counts, min_expected):
    """The per-prefix χ² of the module docstring over every class's counts.

    Returns:
        dict: statistic, dof, nodes (prefixes tested), p_value, impossible (a message, or ""),
        tv (Σ over tested prefixes of the share of next tokens emitted there × the TV distance
        between their empirical law and the target row) and tv_width (the same weights × the
        95% deviation bound of core/stats' tv_distance).
    """
    from .. import stats

    statistic, dof, nodes, tv, width, total = 0.0, 0, 0, 0.0, 0.0, 0
    for cls, class_counts in enumerate(counts):
        for prefix, nxt in _children(class_counts).items():
            row = np.asarray(interface.target_row(case, cls, prefix), np.float64)
            tokens = np.fromiter(nxt.keys(), np.int64, len(nxt))
            freq = np.fromiter(nxt.values(), np.float64, len(nxt))
            bad = tokens[row[tokens] <= 0]
            if len(bad):
                return {"statistic": float("nan"), "dof": 0, "nodes": nodes, "p_value": 0.0,
                        "impossible": f"class {cls} emitted token {int(bad[0])} after "
                                      f"{list(prefix)}, where the target's probability is 0",
                        "tv": float("nan"), "tv_width": float("nan")}
            n_node = freq.sum()
            total += n_node
            observed = np.zeros(len(row))
            observed[tokens] = freq
            tv += 0.5 * np.abs(observed - n_node * row).sum()
            k = max(int((row > 0).sum()), 2)
            width += n_node * (0.5 * np.sqrt((k - 1) / n_node)
                               + np.sqrt(np.log(1 / 0.05) / (2 * n_node)))
            if n_node < 2 * min_expected:
                continue
            try:  # core/stats' test, with its remainder binning
                result = stats.chi_square_test(observed.astype(np.int64), row, min_expected)
            except ValueError:  # fewer than two bins at this count: nothing to test here
                continue
            statistic += result["statistic"]
            dof += result["dof"]
            nodes += result["dof"] > 0
    p_value = stats.chi_square_p_value(statistic, dof) if dof else 1.0
    return {"statistic": statistic, "dof": dof, "nodes": nodes, "p_value": p_value,
            "impossible": "", "tv": tv / max(total, 1), "tv_width": width / max(total, 1)}


def law_test(laws, counts, classes, min_expected):
    """The χ² of the outcomes of every class against exact laws (one (outcomes, probabilities)
    per class, the rest of each class's mass in its remainder bin); classes weigh 1/classes.

    Returns:
        dict: statistic, dof, bins, p_value, impossible ("" or a message), observed, probs (the
        binned categories, for the TV estimate and diagnosis).
    """
    from .. import stats

    observed, probs = [], []
    for cls, (seqs, prob) in enumerate(laws):
        index = {s: i for i, s in enumerate(seqs)}
        obs = np.zeros(len(seqs), np.int64)
        rest = 0
        for outcome, f in counts[cls].items():
            if outcome in index:
                obs[index[outcome]] += f
            else:
                rest += f
        observed += obs.tolist() + [rest]
        probs += (np.asarray(prob) / classes).tolist() + [max(0.0, 1.0 - prob.sum()) / classes]
    probs = np.array(probs)
    probs = probs / probs.sum()
    result = stats.chi_square_test(observed, probs, min_expected)
    result["observed"], result["probs"] = np.array(observed), probs
    result["impossible"] = ("" if result["impossible_category"] < 0 else
                            "an outcome of probability 0 under the law")
    return result


def independence_test(pairs_within, agree_within, pairs_across, agree_across):
    """Two-sided two-proportion z-test: do two requests of one call agree as often as two
    requests of different calls? (Both pairs are of one class, so under independence both rates
    are Σ_s P(s)².) Returns the p-value (1 without pairs of both kinds)."""
    if pairs_within == 0 or pairs_across == 0:
        return 1.0
    a, b = agree_within / pairs_within, agree_across / pairs_across
    pooled = (agree_within + agree_across) / (pairs_within + pairs_across)
    var = pooled * (1 - pooled) * (1 / pairs_within + 1 / pairs_across)
    if var <= 0:
        return 1.0 if a == b else 0.0
    return float(math.erfc(abs(a - b) / math.sqrt(2 * var)))


def homogeneity_test(table, min_expected):
    """χ² test that the rows of a count table (one per sampler call: how often the requests of
    one class emitted each (length, last token), the last token being the one a step draws)
    share one law, as independent requests must; columns expected fewer than min_expected times
    per row are merged. Returns the p-value (1 with fewer than two rows or columns)."""
    from .. import stats

    if len(table) < 2:
        return 1.0
    table = np.asarray(table, np.float64)
    table = table[table.sum(axis=1) > 0]
    if len(table) < 2:
        return 1.0
    share = table.sum(axis=0) / table.sum()
    keep = share * table.sum(axis=1).min() >= min_expected
    merged = np.column_stack([table[:, keep], table[:, ~keep].sum(axis=1)])
    merged = merged[:, merged.sum(axis=0) > 0]
    if merged.shape[1] < 2:
        return 1.0
    expected = np.outer(merged.sum(axis=1), merged.sum(axis=0)) / merged.sum()
    statistic = float(((merged - expected) ** 2 / expected).sum())
    return stats.chi_square_p_value(statistic, (merged.shape[0] - 1) * (merged.shape[1] - 1))


def _z_below(observed, expected, variance):
    """One-sided p-value that observed falls short of expected (normal approximation)."""
    if variance <= 0:  # the reference is deterministic: any shortfall is certain
        return 0.0 if observed < expected - 1e-9 * max(1.0, abs(expected)) else 1.0
    return 0.5 * math.erfc((expected - observed) / math.sqrt(2 * variance))


def chain_length_law(alpha):
    """(mean, variance) of the tokens one step of V1 emits with conditional acceptances
    alpha[0..n-1]: k accepted with probability Π_{i<k} α_i (1 − α_k), n with Π α, then one
    token more."""
    probs, reach = [], 1.0
    for a in alpha:
        probs.append(reach * (1 - a))
        reach *= a
    probs.append(reach)
    lengths = np.arange(len(probs)) + 1
    probs = np.array(probs)
    mean = float((probs * lengths).sum())
    return mean, float((probs * lengths ** 2).sum() - mean ** 2)


def _fit_statistic(freq, law):
    """(χ², dof) of counts freq over some outcomes against a law's probabilities of those
    outcomes: outcomes expected at least MIN_EXPECTED_PER_BIN times alone, everything else (the
    rarer observed outcomes and every unobserved one) in one remainder bin."""
    from .. import stats

    n = freq.sum()
    expected = law * n
    keep = expected >= stats.MIN_EXPECTED_PER_BIN
    o = np.append(freq[keep], freq[~keep].sum())
    e = np.append(expected[keep], max(0.0, n - expected[keep].sum()))
    if e[-1] <= 0:
        o, e = o[:-1], e[:-1]
    if len(o) < 2:
        return 0.0, 0
    return float(((o - e) ** 2 / e).sum()), len(o) - 1


def diagnose(interface, case, counts, reference):
    """The defect family whose exact law explains a failing instance's counts: the one with the
    highest likelihood among those that beat the reference lossless law by DECISIVE nats and
    whose own χ² fit is not rejected at FIT_LEVEL (a family that fits worse than chance is not
    named however much better than the lossless law it does).

    Returns:
        dict (name, reference, log_likelihood_ratio, fit_p_value) or None.
    """
    from .. import stats

    merged = {}  # name -> [reference, log-likelihood ratio, χ², dof]
    for cls, class_counts in enumerate(counts):
        if not class_counts:
            continue
        outcomes = list(class_counts)
        freq = np.array([class_counts[o] for o in outcomes], np.float64)
        base = np.asarray(reference(cls, outcomes), np.float64)
        for defect in interface.defects(case, cls):
            law = np.asarray(defect.law(outcomes), np.float64)
            entry = merged.setdefault(defect.name, [defect.reference, 0.0, 0.0, 0])
            if ((law <= 0) & (freq > 0)).any():
                entry[1] = -math.inf
                continue
            with np.errstate(divide="ignore"):
                gain = freq * (np.log(law) - np.log(base))
            entry[1] += float(gain[freq > 0].sum())
            chi2, dof = _fit_statistic(freq, law)
            entry[2] += chi2
            entry[3] += dof
    for name, (ref, ll, chi2, dof) in sorted(merged.items(), key=lambda kv: -kv[1][1]):
        if not ll >= DECISIVE:
            break
        fit = stats.chi_square_p_value(chi2, dof) if dof else 1.0
        if fit >= FIT_LEVEL:
            return {"name": name, "reference": ref, "log_likelihood_ratio": ll,
                    "fit_p_value": fit}
    return None


# Nats by which a defect's law must beat the lossless law to be named (a likelihood ratio of
# e^20 ≈ 5·10^8).
DECISIVE = 20.0
# Looks at the counts during a run (fractions of N): a run that already fails at a look stops
# there. Each look is tested at level/len(LOOKS), so the run's false-failure rate stays ≤ level.
LOOKS = (0.125, 0.25, 0.5, 1.0)
# The χ² level below which a defect family's own law is rejected as an explanation.
FIT_LEVEL = 1e-4


# Reports --------------------------------------------------------------------------------------

POWER = 0.99
# The sampler sees at most this many floats per call (64 MB of float32).
MAX_BATCH_FLOATS = 1 << 24


@dataclasses.dataclass
class InstanceReport:
    """One instance's outcome. verdict: "conforms", "does not conform" or "broken";
    below_optimum: a conforming sampler whose acceptance (or tokens per step) falls measurably
    short of the reference method's. acceptance / optimum: per draft position, the measured rate
    and the reference's rate given the same positions reached (Σ min(p, q) for V1), pooled over
    classes; tokens_per_step beside optimum_tokens_per_step. tv / tv_interval: the distance of
    the outcome law from the reference law (or, without one, the visit-weighted distance of the
    next-token laws from the target rows) with a 95% interval."""

    interface: str
    name: str
    description: str
    classes: int
    samples: int
    epsilon: float
    detectable_epsilon: float
    alpha: float
    verdict: str
    below_optimum: bool
    statistic: float
    dof: int
    bins: int
    p_value: float
    reference_p_value: float
    independence_p_value: float
    drafts_p_value: float
    acceptance: list
    optimum: list
    alternatives: dict
    tokens_per_step: float
    optimum_tokens_per_step: float
    tv: float
    tv_interval: list
    diagnosis: dict
    structural: list
    impossible: str
    stopped_at: float
    seconds: float

    @property
    def passed(self):
        return self.verdict == "conforms"

    def line(self):
        verdict = {"conforms": "pass", "does not conform": "FAIL", "broken": "BROKEN"}[
            self.verdict]
        text = (f"  {verdict:<6} {self.name:<22} {self.description}: N = {self.samples}"
                + (f" (stopped at {self.stopped_at:g} of the run)" if self.stopped_at < 1 else "")
                + (f", lossless χ² = {self.statistic:.1f} on {self.dof} dof, p = "
                   f"{self.p_value:.3g} (level {self.alpha:.2g}), detects ε ≥ "
                   f"{self.detectable_epsilon:.4f}" if self.samples else "")
                + f", {self.seconds:.1f} s")
        lines = [text]
        if self.acceptance:
            acc = ", ".join(f"{a:.3f}/{o:.3f}" for a, o in zip(self.acceptance, self.optimum))
            alt = "".join(f"; {k} {v:.3f}" for k, v in self.alternatives.items())
            lines.append(f"         acceptance per position (measured/optimum): {acc}; tokens "
                         f"per step {self.tokens_per_step:.3f}/{self.optimum_tokens_per_step:.3f}"
                         + alt + (" — BELOW OPTIMUM" if self.below_optimum else ""))
        if self.verdict == "does not conform":
            lines.append(f"         TV distance {self.tv:.4f} (95% interval "
                         f"{self.tv_interval[0]:.4f}–{self.tv_interval[1]:.4f})"
                         + (f"; independence p = {self.independence_p_value:.3g}"
                            if self.independence_p_value < 1 else "")
                         + (f"; drafts' law p = {self.drafts_p_value:.3g}"
                            if self.drafts_p_value < 1 else ""))
        if self.diagnosis:
            d = self.diagnosis
            lines.append(f"         diagnosis: {d['name']} ({d['reference']})"
                         + (f", log-likelihood ratio {d['log_likelihood_ratio']:.0f} over the "
                            "lossless law" if "log_likelihood_ratio" in d else ""))
        for problem in self.structural:
            lines.append(f"         structure: {problem}")
        if self.impossible:
            lines.append(f"         impossible: {self.impossible}")
        return "\n".join(lines)


@dataclasses.dataclass
class Report:
    """The outcome of check(): passed (every instance conforms), and one InstanceReport per
    instance."""

    interface: str
    passed: bool
    alpha: float
    epsilon: float
    seed: int
    instances: list
    seconds: float

    @property
    def below_optimum(self):
        return any(r.below_optimum for r in self.instances)

    def text(self):
        lines = [f"speclab conformance, interface {self.interface}: lossless against the target's"
                 f" law, α = {self.alpha:g} over {len(self.instances)} instances (Bonferroni), "
                 f"power {POWER} at TV distance ε, seed {self.seed}"]
        lines += [r.line() for r in self.instances]
        failed = [r.name for r in self.instances if not r.passed]
        broken = any(r.verdict == "broken" for r in self.instances)
        verdict = ("is BROKEN" if broken else "does NOT conform") if failed else "conforms"
        if not failed and self.below_optimum:
            verdict += ", below the optimum (lossless, at lower acceptance than V1's)"
        lines.append(f"verdict: the sampler {verdict}"
                     + (f" (failed: {', '.join(failed)})" if failed else "")
                     + f"; {self.seconds:.1f} s")
        return "\n".join(lines)

    def to_dict(self):
        out = dataclasses.asdict(self)
        out["below_optimum"] = self.below_optimum
        for r, d in zip(self.instances, out["instances"]):
            d["passed"] = r.passed
        return out

    def to_json(self):
        return json.dumps(self.to_dict(), indent=2, allow_nan=True)

    def junit_xml(self):
        cases = []
        for r in self.instances:
            body = ""
            if not r.passed:
                message = "; ".join(r.structural + ([r.impossible] if r.impossible else [])) or (
                    f"{r.verdict}: lossless chi-square p = {r.p_value:.3g} < {r.alpha:.2g}, "
                    f"TV {r.tv:.4f}")
                if r.diagnosis:
                    message += f"; diagnosis: {r.diagnosis['name']} ({r.diagnosis['reference']})"
                kind = "error" if r.verdict == "broken" else "failure"
                body = f"<{kind} message={quoteattr(message)}/>"
            props = {"interface": r.interface, "verdict": r.verdict, "samples": r.samples,
                     "epsilon": r.epsilon, "alpha": r.alpha,
                     "below_optimum": r.below_optimum,
                     "acceptance": " ".join(f"{a:.4f}" for a in r.acceptance),
                     "optimum": " ".join(f"{a:.4f}" for a in r.optimum),
                     "diagnosis": r.diagnosis["name"] if r.diagnosis else ""}
            prop_xml = "".join(f"<property name={quoteattr(k)} value={quoteattr(str(v))}/>"
                               for k, v in props.items())
            cases.append(f'  <testcase classname="speclab.conformance.{r.interface}" '
                         f'name={quoteattr(r.name)} time="{r.seconds:.3f}"><properties>'
                         f'{prop_xml}</properties>{body}</testcase>')
        failures = sum(r.verdict == "does not conform" for r in self.instances)
        errors = sum(r.verdict == "broken" for r in self.instances)
        return (f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name="speclab.conformance" '
                f'tests="{len(self.instances)}" failures="{failures}" errors="{errors}" '
                f'time="{self.seconds:.3f}">\n' + "\n".join(cases) + "\n</testsuite>\n")


# The runner -----------------------------------------------------------------------------------


def _plan(interface, case, epsilon, level, samples):
    """(N, threshold): the sample size that detects TV distance epsilon with power POWER at the
    level, from the number of bins the reference law has at that N."""
    from .. import stats

    n_total = samples or stats.sample_size(16, epsilon, level, POWER)
    for _ in range(3 if samples is None else 1):
        threshold = stats.MIN_EXPECTED_PER_BIN / n_total * case.classes
        bins = interface.plan_bins(case, threshold)
        if samples is None:
            n_total = stats.sample_size(max(bins, 2), epsilon, level, POWER)
    threshold = stats.MIN_EXPECTED_PER_BIN / n_total * case.classes
    return -(-n_total // case.classes) * case.classes, threshold


def run_case(interface, runner, case, *, epsilon, level, samples, rng, max_batch):
    """Runs one instance to its verdict (InstanceReport)."""
    from .. import stats

    start = time.monotonic()
    eps = epsilon * case.epsilon_scale
    look_level = level / len(LOOKS)
    n_total, threshold = _plan(interface, case, eps, look_level, samples)
    c = case.classes
    cap = max_batch or MAX_BATCH_FLOATS // max(interface.batch_floats(case), 1)
    # At least 32 calls, four before the first look, so that the tests of independence between
    # requests (which compare calls) have calls to compare there.
    batch = max(c, min(n_total, cap, -(-n_total // 32)) // c * c)
    counts = [dict() for _ in range(c)]
    drafts = [dict() for _ in range(c)]
    problems, diagnosis = [], None
    try:
        problems, diagnosis = interface.probes(runner, case)
    except SamplerError as e:
        raise SamplerError(f"instance {case.name} ({case.description}), probes: {e}") from e
    optimum = [interface.optimum(case, k) for k in range(c)]
    has_acceptance = all(o is not None for o in optimum)
    width = max((len(o) for o in optimum if o is not None), default=0)
    reached, accepted = np.zeros(width), np.zeros(width)
    expected, variance = np.zeros(width), np.zeros(width)
    length_sum, length_exp, length_var = 0.0, 0.0, 0.0
    within = [0, 0]  # pairs, agreements of two requests of one call
    across = [0, 0]  # of one request index in consecutive calls
    previous = None
    per_call = []  # per call: counts of class 0's (length, last token) of its outcomes
    done, looks, stopped_at = 0, list(LOOKS), 1.0
    lossless = None
    while done < n_total and not problems:
        b = min(batch, n_total - done)
        classes = np.arange(b) % c
        try:
            obs = interface.call(runner, case, classes, rng)
        except SamplerError as e:
            raise SamplerError(f"instance {case.name} ({case.description}), call "
                               f"{done // batch + 1} (B = {b}): {e}") from e
        if obs.problems:
            problems = list(obs.problems)
            break
        keys = obs.outcomes
        for k, outcome in zip(classes.tolist(), keys):
            counts[k][outcome] = counts[k].get(outcome, 0) + 1
        if obs.drafts is not None:
            for k, d in zip(classes.tolist(), obs.drafts):
                drafts[k][d] = drafts[k].get(d, 0) + 1
        # Pairs (j, j + c) for even j // c: disjoint pairs of one class within the call.
        pair = [(j, j + c) for block in range(0, b, 2 * c) for j in range(block, block + c)
                if j + c < b]
        within[0] += len(pair)
        within[1] += sum(keys[i] == keys[j] for i, j in pair)
        if previous is not None:
            m = min(len(previous), b)
            across[0] += m
            across[1] += sum(previous[j] == keys[j] for j in range(m))
        previous = keys
        tally = {}
        for o, k in zip(keys, classes.tolist()):
            if k == 0 and o:
                tally[(len(o), o[-1])] = tally.get((len(o), o[-1]), 0) + 1
        per_call.append(tally)
        if has_acceptance and obs.accepted is not None:
            acc = np.asarray(obs.accepted)
            drafted = np.asarray(obs.drafted)
            for k in range(c):
                rows = classes == k
                a_k, d_k = acc[rows], drafted[rows]
                alpha = optimum[k]
                for i in range(len(alpha)):
                    r = int(((d_k > i) & (a_k >= i)).sum())
                    reached[i] += r
                    accepted[i] += int((a_k > i).sum())
                    expected[i] += r * alpha[i]
                    variance[i] += r * alpha[i] * (1 - alpha[i])
                mean, var = chain_length_law(alpha)
                length_sum += float(sum(len(keys[j]) for j in np.flatnonzero(rows)))
                length_exp += mean * rows.sum()
                length_var += var * rows.sum()
        done += b
        if looks and done >= looks[0] * n_total:
            while looks and done >= looks[0] * n_total:
                looks.pop(0)
            lossless = lossless_test(interface, case, counts, stats.MIN_EXPECTED_PER_BIN)
            if lossless["impossible"] or lossless["p_value"] < look_level:
                stopped_at = done / n_total
                break
    if lossless is None:  # the last look tested the final counts already
        lossless = lossless_test(interface, case, counts, stats.MIN_EXPECTED_PER_BIN)
    impossible = lossless["impossible"]
    columns = sorted({key for tally in per_call for key in tally})
    table = [[tally.get(key, 0) for key in columns] for tally in per_call]
    # Two tests of independence between requests, Bonferroni-combined.
    independence = min(1.0, 2 * min(
        independence_test(within[0], within[1], across[0], across[1]),
        homogeneity_test(table, stats.MIN_EXPECTED_PER_BIN)))
    reference_p, bins, tv, tv_interval = float("nan"), 0, lossless["tv"], [
        max(0.0, lossless["tv"] - lossless["tv_width"]), lossless["tv"] + lossless["tv_width"]]
    drafts_p = 1.0
    if not problems and not impossible and done:
        laws = [interface.reference_law(case, k, threshold) for k in range(c)]
        if all(law is not None for law in laws):
            ref = law_test(laws, counts, c, stats.MIN_EXPECTED_PER_BIN)
            reference_p, bins = float(ref["p_value"]), int(ref["bins"])
            est, upper = stats.tv_distance(ref["observed"], ref["probs"], 0.95)
            tv, tv_interval = est, [max(0.0, 2 * est - upper), upper]
        draft_laws = [interface.drafts_law(case, k, threshold) for k in range(c)]
        if all(law is not None for law in draft_laws):
            drafts_p = float(law_test(draft_laws, drafts, c, stats.MIN_EXPECTED_PER_BIN)[
                "p_value"])
    if not bins:
        bins = interface.plan_bins(case, threshold)
    if problems or impossible:
        verdict = "broken"
    elif (lossless["p_value"] < look_level or independence < look_level
          or drafts_p < look_level):
        verdict = "does not conform"
    else:
        verdict = "conforms"
    below = False
    acceptance, opt = [], []
    if has_acceptance and reached.any():
        seen = reached > 0
        acceptance = (accepted[seen] / reached[seen]).tolist()
        opt = (expected[seen] / reached[seen]).tolist()
        below = verdict == "conforms" and (
            _z_below(accepted.sum(), expected.sum(), variance.sum()) < look_level
            or _z_below(length_sum, length_exp, length_var) < look_level)
    # A failing instance is diagnosed, an impossible token included (a filter the sampler
    # dropped emits tokens the declared pipeline removes); structural failures are not.
    if (verdict == "does not conform" or impossible and not problems) and diagnosis is None:
        if independence < look_level:
            diagnosis = {"name": "requests share random numbers",
                         "reference": "FlashInfer PR #4861 (seed_arr[0]), TensorRT-LLM #19487 "
                                      "(one stream per batch row)"}
        else:
            diagnosis = diagnose(interface, case, counts,
                                 lambda k, outs: interface.outcome_probabilities(case, k, outs))
    alternatives = interface.alternatives(case) if has_acceptance else {}
    return InstanceReport(
        interface.name, case.name, case.description, c, done, eps,
        stats.detectable_tv(max(bins, 2), max(done, 1), look_level, POWER), level, verdict,
        below, float(lossless["statistic"]), int(lossless["dof"]), bins,
        float(lossless["p_value"]), reference_p, independence, drafts_p, acceptance, opt,
        alternatives, length_sum / done if done and has_acceptance else float("nan"),
        length_exp / done if done and has_acceptance else float("nan"), float(tv),
        [float(v) for v in tv_interval], diagnosis, problems, impossible, stopped_at,
        time.monotonic() - start)


def run(interface, runner, *, epsilon, alpha, samples, seed, names, max_batch):
    """Runs the chosen instances of an interface (Report)."""
    from .. import stats

    chosen = interface.cases()
    if names is not None:
        wanted = ([n.strip() for n in names.split(",") if n.strip()]
                  if isinstance(names, str) else list(names))
        known = {case.name for case in chosen}
        unknown = [n for n in wanted if n not in known]
        if unknown or not wanted:
            what = (f"unknown instance {', '.join(map(str, unknown))}" if unknown
                    else "no instance named")
            raise ValueError(f"{what} for interface {interface.name}; expected some of "
                             f"{', '.join(sorted(known))}")
        chosen = [case for case in chosen if case.name in wanted]
    level = stats.bonferroni_level(alpha, len(chosen))
    rng = np.random.default_rng(seed)
    start = time.monotonic()
    reports = [run_case(interface, runner, case, epsilon=epsilon, level=level, samples=samples,
                        rng=rng, max_batch=max_batch) for case in chosen]
    return Report(interface.name, all(r.passed for r in reports), alpha, epsilon, seed, reports,
                  time.monotonic() - start)
