"""The logits interface of speclab.conformance (LogitsInterface) and its pieces: speclab's
sampling pipeline (temperature → top-k → top-p → min-p) under either tie rule, the named
parameter sets, the instances, and the defect families.

A logits sampler gets raw logits and per-request sampling parameters; speclab draws the drafts
from the *processed* draft rows and compares the emitted step with the exact law of token-level
speculative sampling (V1) over the processed target and draft rows. Which tokens survive a
cut-off when several share the boundary value is part of the declared pipeline, so it is an
option, not a guess:

  lowest-index  (speclab's own, core/sampling/sampling.hpp) the tokens are ranked by tempered
                probability, lower id first among equals, and each cut-off keeps a prefix of
                that ranking: exactly k tokens for top-k, the shortest prefix of mass ≥ top_p
                (of top-k's survivors) for top-p.
  keep-all      every token tied with the last one kept at a cut-off is kept too (top-k: every
                token whose tempered probability equals the k-th largest; top-p: the set closed
                under ties at the boundary), as pivot/threshold kernels behave (FlashInfer
                PR #3774).

min-p keeps p ≥ min_p · max under both rules, so tokens exactly at its cut-off stay. Greedy
(temperature 0) is one-hot at the lowest-id argmax for lowest-index; for keep-all it is uniform
over the tied maxima, the T → 0 limit of the tempered softmax (and of keep-all top-1).
"""

import collections
import dataclasses

import numpy as np

from ._chain import ChainInterface, PerRequestSeeds, chain_defects, sequence_probabilities
from ._core import Case, Defect

TIES = ("lowest-index", "keep-all")

# core's exp_nonpositive gives 0 below this argument; mirrored so that supports agree.
_EXP_FLOOR = -87.0


def _check_ties(ties):
    if ties not in TIES:
        raise ValueError(f"ties is {ties!r}; expected one of {', '.join(TIES)}")


def process(logits, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, ties="lowest-index"):
    """Probabilities from logits through the sampling pipeline, row by row.

    The tempered argument (l − max) · float32(1/T) is formed in float32 as core does, so that
    exactly tied logits stay exactly tied and the supports match speclab's pipeline; the rest is
    float64.

    Args:
        logits: float [..., V] (float32 values; -inf is masked), ≥ 1 finite entry per row.
        temperature: float ≥ 0, or an array broadcastable to logits.shape[:-1]; 0 is greedy.
        top_k: int ≥ 0 (0 or ≥ V is off), likewise scalar or per row.
        top_p: float in (0, 1] (1 is off), likewise.
        min_p: float in [0, 1] (0 is off), likewise.
        ties: "lowest-index" or "keep-all" (see the module docstring).

    Returns:
        float64 [..., V], each row summing to 1.

    Raises:
        ValueError: a parameter out of range, an unknown tie rule, or a row without a finite
            logit.
    """
    _check_ties(ties)
    x = np.asarray(logits, np.float32)
    shape = x.shape
    if x.ndim < 1 or shape[-1] < 1:
        raise ValueError(f"logits has shape {list(shape)}; expected [..., V] with V ≥ 1")
    v = shape[-1]
    x = x.reshape(-1, v)
    lead = shape[:-1]
    # float64 parameters, as the C++ pipeline reads them (a float32 top_p 0.8 stays 0.80000001).
    temp, k, tp, mp = (np.broadcast_to(np.asarray(a, dt), lead).reshape(-1)
                       for a, dt in ((temperature, np.float64), (top_k, np.int64),
                                     (top_p, np.float64), (min_p, np.float64)))
    if np.isnan(x).any() or (x == np.inf).any():
        raise ValueError("logits contain NaN or +inf; expected finite values or -inf")
    if not np.isfinite(x).any(axis=1).all():
        raise ValueError("a logits row is all -inf; at least one token must be possible")
    if (temp < 0).any() or (k < 0).any() or ((tp <= 0) | (tp > 1)).any() or \
            ((mp < 0) | (mp > 1)).any():
        raise ValueError("sampling parameters out of range: expected temperature ≥ 0, "
                         "top_k ≥ 0, top_p in (0, 1], min_p in [0, 1]")
    rows = np.arange(len(x))
    out = np.zeros(x.shape)
    greedy = temp == 0
    top = x.max(axis=1, keepdims=True)

    # Greedy: the argmax (np.argmax takes the lowest id), or every tied maximum.
    if ties == "lowest-index":
        out[rows[greedy], np.argmax(x[greedy], axis=1)] = 1
    else:
        hit = x[greedy] == top[greedy]
        out[greedy] = hit / hit.sum(axis=1, keepdims=True)

    s = ~greedy
    x, k, tp, mp, top = x[s], k[s], tp[s], mp[s], top[s]
    scale = (1.0 / temp[s]).astype(np.float32)[:, None]
    arg = ((x - top) * scale).astype(np.float64)  # a float32 product, as core computes it
    e = np.where(arg < _EXP_FLOOR, 0.0, np.exp(arg))
    t = e / e.sum(axis=1, keepdims=True)

    # Rank order: most probable first, the lower id first among equals (a stable sort).
    order = np.argsort(-t, axis=1, kind="stable")
    ts = np.take_along_axis(t, order, axis=1)
    r_idx = np.arange(v)[None, :]
    keep = t > 0
    # Top-k: lowest-index keeps ranks < k; keep-all also every token tied with rank k − 1.
    kk = np.where((k > 0) & (k < v), k, v)
    if ties == "keep-all":
        kk = (ts >= ts[np.arange(len(ts)), kk - 1][:, None]).sum(axis=1)
    # Top-p over the top-k survivors (ranks < kk): the first rank whose cumulative mass reaches
    # top_p of theirs; when rounding lets none reach it, all survivors stay (as core does).
    in_k = r_idx < kk[:, None]
    mass = np.where(in_k, ts, 0)
    cum = np.cumsum(mass, axis=1)
    reach = in_k & (cum >= (tp * cum[:, -1])[:, None])
    last = np.where((tp < 1) & reach.any(axis=1), np.argmax(reach, axis=1), kk - 1)
    if ties == "lowest-index":
        ranked = r_idx <= last[:, None]
        keep &= np.take_along_axis(ranked, np.argsort(order, axis=1), axis=1)
    else:
        keep &= t >= ts[np.arange(len(ts)), last][:, None]
    # Min-p against the maximum; tokens exactly at min_p · max are kept under both rules.
    keep &= ~((mp > 0)[:, None] & (t < (mp * ts[:, 0])[:, None]))
    kept = np.where(keep, t, 0)
    out[s] = kept / kept.sum(axis=1, keepdims=True)
    return out.reshape(shape)


# Parameter sets ------------------------------------------------------------------------------

Params = collections.namedtuple("Params", "temperature top_k top_p min_p")

# Each parameter alone, all together, greedy; the values are what a request carries (float32).
PARAMETER_SETS = {
    "temperature-0.7": Params(0.7, 0, 1.0, 0.0),
    "temperature-1.5": Params(1.5, 0, 1.0, 0.0),
    "top-k": Params(1.0, 3, 1.0, 0.0),
    "top-p": Params(1.0, 0, 0.8, 0.0),
    "min-p": Params(1.0, 0, 1.0, 0.2),
    "all": Params(0.8, 4, 0.9, 0.1),
    "greedy": Params(0.0, 0, 1.0, 0.0),
}


# Instances -----------------------------------------------------------------------------------


@dataclasses.dataclass
class LogitsCase:
    """One instance of the logits interface: C request classes (request b is class b mod C).

    Attributes:
        logits_target: float32 [C, γ+1, V]; logits_draft: float32 [C, γ, V] (-inf masked).
        n_draft: int32 [C], the draft positions each class uses (rows beyond are padding).
        temperature, top_p, min_p: float32 [C]; top_k: int32 [C]: each class's parameters,
            applied to its target and its draft rows alike.
        ties_at: the cut-off whose boundary the target rows' ties sit on ("top-k", "top-p",
            "min-p", "greedy"), "" for instances without deliberate ties (whose cut-offs are
            kept ≥ 1e-3 away from any near-tie so float32 and float64 pipelines agree).
    """

    name: str
    description: str
    logits_target: np.ndarray
    logits_draft: np.ndarray
    n_draft: np.ndarray
    temperature: np.ndarray
    top_k: np.ndarray
    top_p: np.ndarray
    min_p: np.ndarray
    ties_at: str = ""
    epsilon_scale: float = 1.0

    @property
    def classes(self):
        return self.logits_target.shape[0]

    @property
    def gamma(self):
        return self.logits_draft.shape[1]

    @property
    def vocab(self):
        return self.logits_target.shape[2]

    def params(self, cls):
        """Params of class cls (Python scalars of the float32 values)."""
        return Params(float(self.temperature[cls]), int(self.top_k[cls]), float(self.top_p[cls]),
                      float(self.min_p[cls]))


def _data(case):
    """The LogitsCase of a LogitsCase or of a _core.Case carrying one as its data."""
    return case if isinstance(case, LogitsCase) else case.data


def rows(case, cls, ties="lowest-index", **override):
    """(p float64 [γ+1, V], q float64 [γ, V]): class cls's processed target and draft rows,
    with parameters of `override` (temperature=, top_k=, ...) replacing the class's."""
    c = _data(case)
    params = c.params(cls)._replace(**override)
    return (process(c.logits_target[cls], *params, ties=ties),
            process(c.logits_draft[cls], *params, ties=ties))


def _near_tie(logits, params, margin=1e-3):
    """bool [R]: rows of logits [R, V] where a cut-off decision of params sits within a
    relative `margin` of flipping (near-equal probabilities, a top-p cumulative near its
    target, a probability near min_p · max): float32 rounding could decide them."""
    if params.temperature == 0:
        s = np.sort(logits, axis=1)
        return s[:, -1] - s[:, -2] < margin
    t = process(logits, params.temperature)
    ts = -np.sort(-t, axis=1)
    pos = ts[:, 1:] > 0
    bad = (pos & (ts[:, :-1] - ts[:, 1:] < margin * ts[:, :-1])).any(axis=1)
    k = params.top_k if 0 < params.top_k < t.shape[1] else t.shape[1]
    cum = np.cumsum(ts[:, :k], axis=1)
    bad |= (np.abs(cum - params.top_p * cum[:, -1:]) < margin).any(axis=1) & (params.top_p < 1)
    bad |= (np.abs(t - params.min_p * ts[:, :1]) < margin * ts[:, :1]).any(axis=1) & (
        params.min_p > 0)
    return bad


def _draw_logits(rng, shape, params, scale):
    """float32 Gaussian logits [*shape] (times scale) without near-ties at params' cut-offs."""
    x = (rng.normal(size=shape) * scale).astype(np.float32).reshape(-1, shape[-1])
    while (bad := _near_tie(x, params)).any():
        x[bad] = rng.normal(size=(bad.sum(), shape[-1])) * scale
    return x.reshape(shape)


def _log(probs):
    """float32 logits of probability rows (0 → -inf); equal probabilities give equal logits."""
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(probs, np.float64)).astype(np.float32)


def _case(name, description, target, draft, n_draft, params, ties_at="", scale=1.0):
    params = [Params(*p) for p in params]
    arr = lambda f, dt: np.array([getattr(p, f) for p in params], dt)  # noqa: E731
    return LogitsCase(name, description, np.asarray(target, np.float32),
                      np.asarray(draft, np.float32), np.asarray(n_draft, np.int32),
                      arr("temperature", np.float32), arr("top_k", np.int32),
                      arr("top_p", np.float32), arr("min_p", np.float32), ties_at, scale)


def logits_cases(seed=20261205):
    """The instances, generated from a fixed seed (the same instances every run).

    Small V (4–8) and γ (2–3) keep the V1 law's χ² powerful. Random rows are Gaussian logits;
    each draft row is its target row plus noise, so the filters keep different sets on the two
    sides. The tie-* instances put exact ties at a cut-off of the target rows (and some draft
    rows), where the two tie rules keep different sets.
    """
    rng = np.random.default_rng(seed)
    P = PARAMETER_SETS
    out = []

    def random_case(name, description, sets, v, g, n_draft=None, scale=1.5, noise=1.0):
        target = np.stack([_draw_logits(rng, (g + 1, v), p, scale) for p in sets])
        draft = np.stack([_draw_near(target[c, :g], p, noise) for c, p in enumerate(sets)])
        n = [g] * len(sets) if n_draft is None else n_draft
        out.append(_case(name, description, target, draft, n, sets))

    def _draw_near(base, p, noise):
        x = (base + rng.normal(size=base.shape) * noise).astype(np.float32)
        while (bad := _near_tie(x, p)).any():
            x[bad] = base[bad] + rng.normal(size=(bad.sum(), base.shape[1])) * noise
        return x

    random_case("temperature", "V = 5, γ = 2, T = 0.7 and T = 1.5 classes",
                [P["temperature-0.7"], P["temperature-1.5"]], 5, 2)
    random_case("top-k", "V = 8, γ = 3, top-k 3 alone; n_draft 3 and 1",
                [P["top-k"]] * 2, 8, 3, [3, 1])
    random_case("top-p", "V = 8, γ = 3, top-p 0.8 alone", [P["top-p"]] * 2, 8, 3)
    random_case("min-p", "V = 8, γ = 3, min-p 0.2 alone", [P["min-p"]] * 2, 8, 3, scale=2.0)
    random_case("all", "V = 8, γ = 3, T 0.8, top-k 4, top-p 0.9, min-p 0.1 together",
                [P["all"]] * 2, 8, 3, [3, 2])
    random_case("greedy", "V = 6, γ = 3, temperature 0", [P["greedy"]] * 3, 6, 3, noise=1.5)
    random_case("mixed", "V = 5, γ = 2, every parameter set in one batch (per-request "
                "parameters)", list(P.values()), 5, 2)

    # FlashInfer PR #3774: [0.4, 0.3, 0.3, 0] with top-k 2 keeps two tokens, not three.
    out.append(_case(
        "tie-top-k", "V = 4, γ = 2, ties at the top-k cut-off ([0.4, 0.3, 0.3, 0], k = 2)",
        [_log([[0.4, 0.3, 0.3, 0], [0.3, 0.1, 0.3, 0.3], [0.2, 0.4, 0.2, 0.2]]),
         _log([[0.3, 0.3, 0.2, 0.2], [0.2, 0.4, 0.2, 0.2], [0.4, 0.2, 0.2, 0.2]])],
        [_log([[0.15, 0.45, 0.3, 0.1], [0.5, 0.1, 0.1, 0.3]]),
         _log([[0.25, 0.25, 0.25, 0.25], [0.1, 0.2, 0.3, 0.4]])],
        [2, 2], [(1.0, 2, 1.0, 0.0), (0.5, 3, 1.0, 0.0)], "top-k"))
    # Ties straddling the top-p boundary; in class 1 also at top-k's, so that keep-all's top-p
    # measures a larger survivor mass.
    out.append(_case(
        "tie-top-p", "V = 5, γ = 2, ties at the top-p cut-off (top-p 0.6; top-k 2 + top-p 0.7)",
        [_log([[0.4, 0.3, 0.3, 0, 0], [0.35, 0.3, 0.3, 0.05, 0], [0.5, 0.2, 0.2, 0.1, 0]]),
         _log([[0.3, 0.2, 0.2, 0.2, 0.1], [0.1, 0.3, 0.2, 0.2, 0.2], [0.2, 0.2, 0.3, 0.1, 0.2]])],
        [_log([[0.2, 0.5, 0.3, 0, 0], [0.65, 0.1, 0.1, 0.15, 0]]),
         _log([[0.25, 0.25, 0.25, 0.15, 0.1], [0.3, 0.4, 0.1, 0.1, 0.1]])],
        [2, 2], [(1.0, 0, 0.6, 0.0), (1.0, 2, 0.7, 0.0)], "top-p"))
    # min-p 1 keeps exactly the tied maxima (the cut-off is the maximum itself); in class 1 a
    # top-p boundary inside the tied maxima decides which of them min-p sees.
    out.append(_case(
        "tie-min-p", "V = 5, γ = 2, ties at the min-p cut-off (min-p 1; T 2 + top-p 0.5)",
        [_log([[0.3, 0.3, 0.2, 0.1, 0.1], [0.1, 0.35, 0.1, 0.35, 0.1],
               [0.25, 0.25, 0.25, 0.2, 0.05]]),
         _log([[0.3, 0.3, 0.3, 0.1, 0], [0.1, 0.3, 0.3, 0.3, 0], [0.3, 0.1, 0.3, 0.3, 0]])],
        [_log([[0.4, 0.2, 0.2, 0.1, 0.1], [0.2, 0.3, 0.3, 0.1, 0.1]]),
         _log([[0.4, 0.2, 0.2, 0.1, 0.1], [0.3, 0.3, 0.3, 0.1, 0]])],
        [2, 2], [(1.0, 0, 1.0, 1.0), (2.0, 0, 0.5, 1.0)], "min-p"))
    # Tied maximum logits under greedy; class 1 also sets filters, which greedy ignores.
    out.append(_case(
        "tie-greedy", "V = 5, γ = 2, tied maxima at temperature 0",
        [[[1, 2, 2, 0, 0], [3, 1, 3, 3, 0], [0, 0, 1, 1, 1]],
         [[0, 1, 0, 1, -1], [2, 2, 2, 0, 1], [1, 1, 0, 0, 0]]],
        [[[2, 2, 1, 0, 0], [0, 1, 3, 2, 0]], [[0, 1, 0, 1, -1], [0, 0, 0, 3, 3]]],
        [2, 2], [(0.0, 0, 1.0, 0.0), (0.0, 2, 0.4, 0.3)], "greedy"))
    return out


def case_names():
    return [c.name for c in logits_cases()]


# Defect families -----------------------------------------------------------------------------


def effective_rows(p_used, q_used, q_drawn, n):
    """Rows (P, Q) whose V1 law is the law of a sampler that verifies with rows p_used [γ+1, V]
    and q_used [γ, V] n drafts drawn from q_drawn [γ, V] (float64 each).

    Position i accepts x ~ q_drawn with probability min(1, p_used(x)/q_used(x)) (p/0 accepts
    when p > 0), so the accepted mass is m = q_drawn · that; a rejection (probability 1 − Σ m)
    emits from norm(max(0, p_used − q_used)), or from p_used where that is empty. Then P = m +
    (1 − Σ m) · residual and Q = m give exactly that law through V1's min/max formula (Q need
    not sum to 1). Rows where q_used equals q_drawn are returned as they are, and so are the
    rows from n on: row n of P is the bonus row, which must stay p_used[n].
    """
    p, q = np.array(p_used, np.float64), np.array(q_used, np.float64)
    for i in range(n):
        if np.array_equal(q[i], q_drawn[i]):
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            a = np.where(q[i] > 0, np.minimum(1, p[i] / q[i]), (p[i] > 0).astype(float))
        m = q_drawn[i] * a
        res = np.maximum(p[i] - q[i], 0)
        res = res / res.sum() if res.sum() > 0 else p[i]
        p[i], q[i] = m + max(0.0, 1 - m.sum()) * res, m
    return p, q


def defects(ties="lowest-index"):
    """The defect families scored against a failing instance, for the declared tie rule.

    Returns:
        list of (name, reference, rows) with rows(case, cls) → (p float64 [γ+1, V], q float64
        [γ, V]): rows whose V1 law (conformance.sequence_probabilities) is the defective
        sampler's law, the drafts still drawn from the declared processed draft rows. With a
        dropped filter p can be positive where the declared p is 0.
    """
    _check_ties(ties)
    other = TIES[1 - TIES.index(ties)]

    def uses(target=None, draft=None):
        """The sampler processes target/draft rows with these overrides (None: as declared);
        a tie rule of its own is the key "ties"."""
        def f(case, cls):
            declared_q = rows(case, cls, ties)[1]
            t, d = dict(target or {}), dict(draft or {})
            p_used = rows(case, cls, t.pop("ties", ties), **t)[0]
            q_used = rows(case, cls, d.pop("ties", ties), **d)[1]
            return effective_rows(p_used, q_used, declared_q, int(_data(case).n_draft[cls]))
        return f

    tie_name = "tie over-acceptance" if ties == "lowest-index" else "tie under-acceptance"
    return [
        (tie_name, f"FlashInfer PR #3774: {other} at the cut-offs where {ties} was declared",
         uses({"ties": other}, {"ties": other})),
        ("min-p dropped on the verify path", "SGLang #10617; vLLM drops min-p for verified "
         "tokens: the target rows are processed without min-p", uses({"min_p": 0.0})),
        ("top-k/top-p dropped", "TensorRT-LLM #17955: sampling parameters silently ignored on "
         "the speculative path", uses({"top_k": 0, "top_p": 1.0}, {"top_k": 0, "top_p": 1.0})),
        ("temperature dropped", "TensorRT-LLM #17955: sampling parameters silently ignored on "
         "the speculative path (T = 1, greedy included)",
         uses({"temperature": 1.0}, {"temperature": 1.0})),
    ]


# The interface -------------------------------------------------------------------------------


class LogitsInterface(ChainInterface):
    """`logits`: f(logits_target f32 [B, γ+1, V], logits_draft f32 [B, γ, V], draft_tokens i32
    [B, γ], n_draft i32 [B], seed int, temperature f32 [B], top_k i32 [B], top_p f32 [B], min_p
    f32 [B]) → emitted_tokens int [B, γ+1] (-1 padded). top_k 0, top_p 1 and min_p 0 are off,
    temperature 0 is greedy; each request's parameters apply to its target and draft rows.
    speclab draws the drafts from the processed draft rows; the law is V1's over the processed
    rows (process() with the declared tie rule).

    Only masked tokens (-inf logits) are structurally impossible: a token the declared pipeline
    filters out is left to the law's tests, so that a sampler with another pipeline is scored
    against the defect families (it has a law, just not the declared one).
    """

    name = "logits"
    summary = ("logits and per-request temperature, top-k, top-p, min-p; speclab processes the "
               "rows (declared tie rule)")
    inputs = ("logits_target", "logits_draft", "draft_tokens", "n_draft", "seed", "temperature",
              "top_k", "top_p", "min_p")

    def __init__(self, ties="lowest-index"):
        _check_ties(ties)
        self.ties = ties
        # id of a LogitsCase → (that case, {class: (p, q, n)}): the runner asks for rows often;
        # holding the case keeps its id from being reused by another.
        self._rows = {}

    def cases(self):
        return [Case(c.name, c.description, c.classes, c, c.epsilon_scale)
                for c in logits_cases()]

    def rows(self, case, cls):
        c = _data(case)
        cache = self._rows.setdefault(id(c), (c, {}))[1]
        if cls not in cache:
            cache[cls] = (*rows(c, cls, self.ties), int(c.n_draft[cls]))
        return cache[cls]

    def batch_floats(self, case):
        c = _data(case)
        return (2 * c.gamma + 1) * c.vocab + 4

    def make_inputs(self, case, classes, x, rng):
        c = _data(case)
        return {"logits_target": c.logits_target[classes], "logits_draft": c.logits_draft[classes],
                "draft_tokens": x, "n_draft": c.n_draft[classes],
                "seed": int(rng.integers(0, 2**63)), "temperature": c.temperature[classes],
                "top_k": c.top_k[classes], "top_p": c.top_p[classes], "min_p": c.min_p[classes]}

    def structure_rows(self, case):
        """Only masked tokens are structurally impossible (the class docstring says why)."""
        return np.isfinite(_data(case).logits_target).astype(np.float64)

    def defects(self, case, cls):
        """chain_defects over the processed rows, then the logits families of defects()."""
        n = int(_data(case).n_draft[cls])

        def law(p, q):
            def prob(outcomes):
                emitted = np.full((len(outcomes), p.shape[0]), -1)
                for j, o in enumerate(outcomes):
                    emitted[j, :len(o)] = o
                return sequence_probabilities(p, q, n, emitted)
            return prob

        return chain_defects(*self.rows(case, cls)) + [
            Defect(name, reference, law(*f(case, cls))) for name, reference, f in
            defects(self.ties)]


class LogitsSeedsInterface(PerRequestSeeds, LogitsInterface):
    """`seeds` with signature="logits": the logits signature with seed uint64 [B], one per
    request, and the seed probes on the instance "temperature" (T = 0.7, V = 5)."""

    name = "seeds"
    summary = "the logits signature with one seed per request"
    PROBE_CASE = "temperature"
    signature = "logits"
