"""The chain-shaped interfaces of speclab.conformance: probs (today's: the sampler's own random
numbers), uniforms (speclab injects them, with deterministic edge probes), seeds (one seed per
request, with determinism, permutation and independence probes) and draft (the sampler draws its
own drafts). All four compare the emitted step with token-level speculative sampling (V1): the
lossless per-prefix test against the target rows, and V1's exact law of the whole step
(docs/python.md derives it): for a request with n draft positions, the emitted sequence
s_1..s_{k+1} has probability

    Π_{i≤k} min(p_i(s_i), q_i(s_i)) · (max(0, p_{k+1}(s_{k+1}) − q_{k+1}(s_{k+1}))   if k < n
                                       p_{n+1}(s_{n+1})                               if k = n)
"""

import dataclasses

import numpy as np

from ._core import (Case, Defect, Interface, Observed, SamplerError, normalise,
                    padding_problems)

# What a chain sampler returns, as its errors say.
EMITTED = ("emitted_tokens, an integer array [B, γ+1] (a numpy array, a torch tensor or an "
           "object with an emitted_tokens attribute)")

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
                        *_one(normalise(p), normalise(q))))

    # Narrow vocabulary: few categories, so a small ε is cheap.
    p, q = _rows(rng, (4, 2)), _rows(rng, (3, 2))
    out.append(Instance("narrow", "V = 2, γ = 3 at ε/2", *_one(p, q), 0.5))

    # FlashInfer's test_speculative_sampling scenario: softmax of Gaussian logits, the draft
    # filtered to its top-k; vLLM's rejection-sampler scenario: a peaked target (low
    # temperature) against a flat draft. Both at V = 32, γ = 4.
    logits = rng.normal(size=(5, 32)) * 2
    p = normalise(np.exp(logits))
    ql = logits[:4] + rng.normal(size=(4, 32))
    keep = ql >= np.sort(ql, axis=1)[:, [-8]]
    q = normalise(np.where(keep, np.exp(ql), 0))
    out.append(Instance("flashinfer-topk", "V = 32, γ = 4, Gaussian logits, draft top-8",
                        *_one(p, q)))
    p = normalise(np.exp(rng.normal(size=(5, 32)) * 4))
    q = np.full((4, 32), 1 / 32)
    out.append(Instance("vllm-peaked", "V = 32, γ = 4, peaked target, uniform draft",
                        *_one(p, q)))

    # A larger vocabulary: Zipf-like rows, the draft a perturbed target, at 1.5ε.
    v = 4096
    base = 1 / np.arange(1, v + 1) ** 1.1
    p = np.stack([normalise(base[rng.permutation(v)]) for _ in range(g + 1)])
    q = normalise(p[:g] * rng.lognormal(0, 0.5, (g, v)))
    out.append(Instance("large-vocab", "V = 4096, γ = 3, Zipf(1.1) rows, q = p·lognormal noise",
                        *_one(p, q), 1.5))
    for inst in out:
        # The rows everyone sees are float32; the law is computed from exactly those values.
        inst.probs_target = normalise(inst.probs_target.astype(np.float32))
        inst.probs_draft = normalise(inst.probs_draft.astype(np.float32))
    return out


def instance_names():
    return [i.name for i in instances()]


def chain_law(accept, residual, bonus, n, emitted):
    """Probabilities of emitted rows under any rule of the form "position i accepts draft x with
    joint probability accept[i, x], else emits y with joint probability residual[i, y]; after n
    accepted drafts the bonus token has law bonus": V1 and the defect families alike.

    Args:
        accept, residual: float64 [≥ n, V]; bonus: float64 [V]; n: draft positions used.
        emitted: int [M, γ+1] rows, -1 padded, structurally valid (length ≤ n+1).

    Returns:
        float64 [M].
    """
    lengths = (emitted >= 0).sum(axis=1)
    prob = np.ones(len(emitted))
    for i in range(n + 1):
        tok = np.clip(emitted[:, i], 0, None) if i < emitted.shape[1] else np.zeros(
            len(emitted), np.int64)
        accepted = lengths > i + 1
        last = lengths == i + 1
        if i < n:
            prob = np.where(accepted, prob * accept[i, tok], prob)
            prob = np.where(last, prob * residual[i, tok], prob)
        else:
            prob = np.where(last, prob * bonus[tok], prob)
    return np.where(lengths > n + 1, 0.0, prob)


def _v1_rows(p, q, n):
    return np.minimum(p[:n], q[:n]), np.maximum(p[:n] - q[:n], 0), p[n]


def sequence_probabilities(p, q, n, emitted):
    """Exact probabilities (float64) of emitted rows under token-level speculative sampling.

    Args:
        p: float64 [γ+1, V], q: float64 [γ, V], n: draft positions used (≤ γ).
        emitted: int [M, γ+1] rows, -1 padded, already structurally valid (length ≤ n+1).

    Returns:
        float64 [M].
    """
    return chain_law(*_v1_rows(p, q, n), n, emitted)


def enumerate_law(p, q, n, threshold):
    """The sequences of probability ≥ threshold, as (list of tuples, float64 probabilities);
    subtrees whose prefix mass is below threshold are left to the remainder."""
    seqs, probs = [], []
    m, res, bonus = _v1_rows(p, q, n)

    def visit(prefix, mass, i):
        last = res[i] if i < n else bonus
        for y in np.nonzero((last > 0) & (last * mass >= threshold))[0]:
            seqs.append(prefix + (int(y),))
            probs.append(mass * last[y])
        if i < n:
            for x in np.nonzero((m[i] > 0) & (m[i] * mass >= threshold))[0]:
                visit(prefix + (int(x),), mass * m[i, x], i + 1)

    visit((), 1.0, 0)
    return seqs, np.array(probs)


def _residual_row(p, q):
    r = np.maximum(p - q, 0)
    return r / r.sum() if r.sum() > 0 else p


def shared_uniform_rows(p, q, draft_too):
    """(accept [V], residual [V]) at one position when one uniform u decides the accept test
    (accept x iff u·q(x) ≤ p(x)) and draws the residual by inverse CDF in token order; with
    draft_too, the same u also drew the draft by inverse CDF of q. Exact: everything is a step
    function of u, integrated over the intervals between its breakpoints."""
    v = len(p)
    ratio = np.where(q > 0, np.minimum(1.0, p / np.where(q > 0, q, 1)), 0.0)
    res_cdf = np.cumsum(_residual_row(p, q))
    q_cdf = np.cumsum(q)
    accept, residual = np.zeros(v), np.zeros(v)
    if draft_too:
        cuts = np.unique(np.concatenate([[0.0, 1.0], q_cdf, ratio, res_cdf]).clip(0, 1))
        mids = (cuts[:-1] + cuts[1:]) / 2
        lengths = np.diff(cuts)
        x = np.minimum(np.searchsorted(q_cdf, mids, side="right"), v - 1)
        ok = mids <= ratio[x]
        np.add.at(accept, x[ok], lengths[ok])
        y = np.minimum(np.searchsorted(res_cdf, mids[~ok], side="right"), v - 1)
        np.add.at(residual, y, lengths[~ok])
        return accept, residual
    for x in np.nonzero(q > 0)[0]:
        accept[x] = q[x] * ratio[x]
        cuts = np.unique(np.concatenate([[ratio[x], 1.0], res_cdf[res_cdf > ratio[x]]]).clip(
            0, 1))
        mids = (cuts[:-1] + cuts[1:]) / 2
        y = np.minimum(np.searchsorted(res_cdf, mids, side="right"), v - 1)
        np.add.at(residual, y, q[x] * np.diff(cuts))
    return accept, residual


def chain_defects(p, q, n, shared_draft_noise=False):
    """The known defect families of a chain sampler as Defects over outcome tuples, for one
    class's rows (p float64 [γ+1, V], q float64 [γ, V], n draft positions)."""
    m, res, bonus = _v1_rows(p, q, n)
    alpha = m.sum(axis=1, keepdims=True)

    def law(accept, residual, bonus_row):
        def prob(outcomes):
            rows = np.full((len(outcomes), p.shape[0]), -1)
            for j, o in enumerate(outcomes):
                rows[j, :len(o)] = o
            return chain_law(accept, residual, bonus_row, n, rows)
        return prob

    out = [
        Defect("residual drawn from the target row p instead of norm(max(0, p − q))",
               "Leviathan et al. 2023 Alg. 1; speclab mutant residual-from-target",
               law(m, (1 - alpha) * p[:n], bonus)),
        Defect("rejected draft token emitted as if accepted",
               "speclab mutant accepted-off-by-one", law(m, q[:n] - m, bonus)),
    ]
    if n >= 1:
        out.append(Defect("bonus token drawn from the last draft position's target row",
                          "TensorRT-LLM PR #15098 (wrong logits slice); speclab mutant "
                          "bonus-from-wrong-row", law(m, res, p[n - 1])))
        out.append(Defect("bonus token drawn from the draft row q",
                          "vLLM #40149 (draft rows standing in for target rows)",
                          law(m, res, q[n - 1])))
    def shared(draft_too):
        rows = [shared_uniform_rows(p[i], q[i], draft_too) for i in range(n)]
        return law(np.array([a for a, _ in rows]).reshape(n, p.shape[1]),
                   np.array([r for _, r in rows]).reshape(n, p.shape[1]), bonus)

    if n >= 1:
        out.append(Defect("one uniform for the accept test and the residual draw",
                          "vLLM #54282 (recovery noise from the acceptance uniform's offset)",
                          shared(False)))
    if n >= 1 and shared_draft_noise:
        out.append(Defect("one noise for drafting, the accept test and the residual draw",
                          "vLLM #54282 (draft noise from the same Philox offset)", shared(True)))
    return out


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


def _structure(emitted, x, n, vocab, p, classes):
    """Structural defects of emitted rows, as a list of messages (empty when well-formed).
    emitted: int [B, γ+1] (_check_interface passed), p: float64 [C, γ+1, V] target rows per
    class, classes: int [B] each request's class, n: int [B]."""
    b, width = x.shape[0], x.shape[1] + 1
    e = emitted.astype(np.int64)
    problems = []

    def report(bad, what):
        rows = np.nonzero(bad)[0]
        if len(rows):
            r = rows[0]
            problems.append(f"{what}: {len(rows)} of {b} requests, e.g. request {r} emitted "
                            f"{e[r].tolist()} (drafts {x[r, :n[r]].tolist()}, n_draft {n[r]})")

    valid, lengths = padding_problems(e, report)
    report(lengths > n + 1, "more than n_draft + 1 tokens emitted")
    report((valid & (e >= vocab)).any(axis=1), f"token id ≥ V = {vocab}")
    cols = np.arange(width - 1)[None, :]
    in_prefix = cols < (lengths - 1)[:, None]
    report((in_prefix & (e[:, :-1] != x)).any(axis=1), "accepted prefix differs from the drafts")
    if not problems:
        k = lengths - 1
        last = e[np.arange(b), k]
        report(p[classes, k, last] <= 0, "emitted a token of target probability 0")
    return problems




def _draw(rng, rows, classes, n):
    """Inverse-CDF draws x int32 [B, γ] from the class rows float64 [C, γ, V] of each request's
    class (int [B]) at positions < n [B] (padding positions get arbitrary ids)."""
    b = len(classes)
    _, g, v = rows.shape
    x = rng.integers(0, v, (b, g))
    cdf = np.cumsum(rows, axis=2)
    for i in range(g):
        live = np.nonzero(n > i)[0]
        row_cdf = cdf[classes[live], i]
        u = rng.random(len(live)) * row_cdf[:, -1]
        x[live, i] = np.minimum((row_cdf <= u[:, None]).sum(axis=1), v - 1)
    return x.astype(np.int32)


def _emitted(out, b, width):
    emitted = out[0]
    _check_interface(emitted, b, width)
    return emitted


class ChainInterface(Interface):
    """`probs`: f(probs_target f32 [B, γ+1, V], probs_draft f32 [B, γ, V], draft_tokens i32
    [B, γ], n_draft i32 [B], seed int) → emitted_tokens int [B, γ+1] (-1 padded); the sampler
    uses its own random numbers. speclab draws the drafts from q. Subclasses change what the
    sampler is given (rows(), inputs()) and what it returns (call())."""

    name = "probs"
    summary = "probabilities in, the sampler's own random numbers (one seed per call)"
    inputs = ("probs_target", "probs_draft", "draft_tokens", "n_draft", "seed")

    def cases(self):
        return [Case(i.name, i.description, i.classes, i, i.epsilon_scale) for i in instances()]

    def rows(self, case, cls):
        """(p float64 [γ+1, V], q float64 [γ, V], n): the rows of the law for class cls."""
        inst = case.data
        return inst.probs_target[cls], inst.probs_draft[cls], int(inst.n_draft[cls])

    def _class_rows(self, case):
        rows = [self.rows(case, k) for k in range(case.classes)]
        return (np.stack([r[0] for r in rows]), np.stack([r[1] for r in rows]),
                np.array([r[2] for r in rows]))

    def batch_floats(self, case):
        g, v = case.data.probs_draft.shape[1:]
        return (2 * g + 1) * v

    def make_inputs(self, case, classes, x, rng):
        """The named inputs of one batch whose drafts speclab drew (x int32 [B, γ])."""
        inst = case.data
        return {"probs_target": inst.probs_target[classes].astype(np.float32),
                "probs_draft": inst.probs_draft[classes].astype(np.float32),
                "draft_tokens": x, "n_draft": inst.n_draft[classes].astype(np.int32),
                "seed": int(rng.integers(0, 2**63))}

    def observe(self, emitted, x, n, p, classes):
        """Observed for emitted rows int [B, γ+1] given drafts x, n_draft n and the target
        rows p float64 [C, γ+1, V] of the requests' classes (int [B])."""
        problems = _structure(emitted, x, n, p.shape[2], p, classes)
        e = emitted.astype(np.int64)
        lengths = (e >= 0).sum(axis=1)
        outcomes = [tuple(row[:k]) for row, k in zip(e.tolist(), lengths.tolist())]
        return Observed(outcomes, problems, lengths - 1, np.asarray(n))

    def structure_rows(self, case):
        """float64 [C, γ+1, V]: per class, rows whose zeros are the tokens no sampler may emit
        (the target rows here)."""
        return self._class_rows(case)[0]

    def call(self, runner, case, classes, rng):
        _, q, n = self._class_rows(case)
        x = _draw(rng, q, classes, n[classes])
        inputs = self.make_inputs(case, classes, x, rng)
        emitted = _emitted(runner(inputs, self.outputs), len(classes), q.shape[1] + 1)
        return self.observe(emitted, x, n[classes], self.structure_rows(case), classes)

    def target_row(self, case, cls, prefix):
        p, _, n = self.rows(case, cls)
        return p[len(prefix)] if len(prefix) <= n else np.zeros(p.shape[1])

    def reference_law(self, case, cls, threshold):
        return enumerate_law(*self.rows(case, cls), threshold)

    def outcome_probabilities(self, case, cls, outcomes):
        p, q, n = self.rows(case, cls)
        rows = np.full((len(outcomes), p.shape[0]), -1)
        for j, o in enumerate(outcomes):
            rows[j, :len(o)] = o
        return sequence_probabilities(p, q, n, rows)

    def optimum(self, case, cls):
        p, q, n = self.rows(case, cls)
        return np.minimum(p[:n], q[:n]).sum(axis=1)

    def alternatives(self, case):
        rates = []
        for k in range(case.classes):
            p, q, n = self.rows(case, k)
            rates.extend((p[:n] * q[:n]).sum(axis=1))
        return {"sampled-match Σ p·q": float(np.mean(rates))} if rates else {}

    def defects(self, case, cls):
        return chain_defects(*self.rows(case, cls))


# The edge values of a float32 uniform in [0, 1).
SMALLEST_FLOAT = float(np.nextafter(np.float32(0), np.float32(1)))
BELOW_ONE = float(np.float32(1 - 2.0 ** -24))


class UniformsInterface(ChainInterface):
    """`uniforms`: f(probs_target, probs_draft, draft_tokens, n_draft, accept_uniforms f32
    [B, γ], draw_uniforms f32 [B, γ+1]) → emitted_tokens: the accept test of draft i uses
    accept_uniforms[:, i], the residual or bonus token drawn at position k uses
    draw_uniforms[:, k] by inverse CDF. speclab draws the uniforms i.i.d. in [0, 1) for the
    statistical test, and probes the edges deterministically: u = 0, the smallest positive
    float, 1 − 2⁻²⁴ and u = p/q where that ratio is a float, on drafts that include tokens of
    target probability 0."""

    name = "uniforms"
    summary = "probabilities and injected uniforms (accept tests and draws); edge probes"
    inputs = ("probs_target", "probs_draft", "draft_tokens", "n_draft", "accept_uniforms",
              "draw_uniforms")

    PROBE_TOKENS = 6

    def batch_floats(self, case):
        g, v = case.data.probs_draft.shape[1:]
        return (2 * g + 1) * v + 2 * g + 1

    def make_inputs(self, case, classes, x, rng):
        inputs = super().make_inputs(case, classes, x, rng)
        del inputs["seed"]
        g = x.shape[1]
        inputs["accept_uniforms"] = rng.random((len(classes), g), dtype=np.float32)
        inputs["draw_uniforms"] = rng.random((len(classes), g + 1), dtype=np.float32)
        return inputs

    def probes(self, runner, case):
        """Every draft position's every token of positive draft probability (those of target
        probability 0 first), against every edge uniform for the accept test and the draws."""
        p, q, n = self._class_rows(case)
        g = q.shape[1]
        requests = []  # (class, drafts, accept u, draw u, what)
        for k in range(case.classes):
            for i in range(int(n[k])):
                # Up to PROBE_TOKENS drafts per position: those of target probability 0
                # first, then the most probable under q.
                live = np.nonzero(q[k, i] > 0)[0]
                live = live[np.lexsort((-q[k, i, live], p[k, i, live] > 0))]
                for t in live[:self.PROBE_TOKENS]:
                    x = np.array([int(np.argmax(q[k, j])) for j in range(g)], np.int32)
                    x[i] = t
                    ratio = np.float32(p[k, i, t]) / np.float32(q[k, i, t])
                    edges = [0.0, SMALLEST_FLOAT, BELOW_ONE]
                    if 0 < ratio < 1:
                        edges.append(float(ratio))
                    for u in edges:
                        acc = np.full(g, BELOW_ONE, np.float32)
                        acc[:i] = 0.0  # accept the earlier positions where q ≤ p allows
                        acc[i] = u
                        requests.append((k, x, acc, np.full(g + 1, u, np.float32),
                                         f"draft {t} at position {i} (p = {p[k, i, t]:.3g}, "
                                         f"q = {q[k, i, t]:.3g}), u = {u!r}"))
        if not requests:
            return [], None
        classes = np.array([r[0] for r in requests])
        x = np.stack([r[1] for r in requests])
        inputs = {"probs_target": case.data.probs_target[classes].astype(np.float32),
                  "probs_draft": case.data.probs_draft[classes].astype(np.float32),
                  "draft_tokens": x, "n_draft": n[classes].astype(np.int32),
                  "accept_uniforms": np.stack([r[2] for r in requests]),
                  "draw_uniforms": np.stack([r[3] for r in requests])}
        emitted = _emitted(runner(inputs, self.outputs), len(requests), g + 1)
        obs = self.observe(emitted, x, n[classes], p, classes)
        problems = [f"edge probe: {m}" for m in obs.problems]
        e = emitted.astype(np.int64)
        for j, (k, drafts, _, _, what) in enumerate(requests):
            row = [t for t in e[j].tolist() if t >= 0]
            for pos, t in enumerate(row[:-1]):  # accepted drafts of target probability 0
                if p[k, pos, t] <= 0:
                    problems.append(f"edge probe {what}: accepted draft {t} at position {pos}, "
                                    f"of target probability 0 (emitted {row})")
                    break
        diagnosis = None
        if any("accepted draft" in m for m in problems):
            diagnosis = {"name": "a draft of target probability 0 accepted when the coin is 0",
                         "reference": "SGLang #35771 (coin <= p/q with a uniform that includes "
                                      "0)"}
        return problems[:5], diagnosis


class PerRequestSeeds:
    """Mixed into a chain interface: seed becomes uint64 [B], one per request. Besides the
    statistical test (distinct random seeds), probes on the instance PROBE_CASE: the same inputs
    and seeds give the same tokens; rows permuted with their seeds give each request the same
    tokens; equal rows with distinct seeds agree no more often than independent draws do (the
    agreement of two requests of one call against that of two calls with other seeds, a
    two-proportion z-test); all-equal seeds and distinct seeds give different outputs."""

    PROBE_REQUESTS = 512
    PROBE_CASE = ""

    def make_inputs(self, case, classes, x, rng):
        inputs = super().make_inputs(case, classes, x, rng)
        inputs["seed"] = rng.integers(0, 2**63, len(classes), dtype=np.uint64)
        return inputs

    def probes(self, runner, case):
        if case.name != self.PROBE_CASE:
            return [], None
        _, q, n = self._class_rows(case)
        p = self.structure_rows(case)
        b, g = self.PROBE_REQUESTS, q.shape[1]
        rng = np.random.default_rng(7)
        classes = np.zeros(b, np.int64)  # one class: equal rows
        x = np.repeat(_draw(rng, q, np.zeros(1, np.int64), n[:1]), b, axis=0)

        def emit(seeds, order=None):
            cls = classes if order is None else classes[order]
            inputs = self.make_inputs(case, cls, x if order is None else x[order], rng)
            inputs["seed"] = seeds
            e = _emitted(runner(inputs, self.outputs), b, g + 1).astype(np.int64)
            obs = self.observe(e, x, n[cls], p, cls)
            if obs.problems:
                raise _Broken(obs.problems)
            return e

        seeds = rng.choice(2**62, b, replace=False).astype(np.uint64)
        try:
            first = emit(seeds)
            again = emit(seeds)
            order = rng.permutation(b)
            permuted = emit(seeds[order], order)
            same = emit(np.full(b, seeds[0], np.uint64))
            other = emit(rng.choice(2**62, b, replace=False).astype(np.uint64))
        except _Broken as e:
            return [f"seed probe: {m}" for m in e.problems], None
        problems, diagnosis = [], None
        if not (first == again).all():
            problems.append("the same inputs and seeds gave different tokens "
                            f"({int((first != again).any(axis=1).sum())} of {b} requests)")
        moved = (permuted != first[order]).any(axis=1)
        if moved.any():
            problems.append(f"rows permuted with their seeds changed the tokens of "
                            f"{int(moved.sum())} of {b} requests")
            if (permuted == first).all(axis=1).mean() > 0.5:
                diagnosis = {"name": "random numbers follow the batch row, not the seed",
                             "reference": "TensorRT-LLM #19487 (one Philox stream per batch "
                                          "row)"}
        agree_within = int((first[0::2] == first[1::2]).all(axis=1).sum())
        agree_across = int((first[0::2] == other[1::2]).all(axis=1).sum())
        from ._core import independence_test
        if independence_test(b // 2, agree_within, b // 2, agree_across) < 1e-9:
            problems.append(f"requests with distinct seeds agree {agree_within} times in "
                            f"{b // 2} pairs, against {agree_across} for seeds of another call")
        if (same == first).all():
            problems.append("all-equal seeds and distinct seeds gave the same tokens")
        if diagnosis is None and (same == first).all():
            diagnosis = {"name": "every request uses the first request's seed",
                         "reference": "FlashInfer PR #4861 (kernels read only seed_arr[0])"}
        return problems, diagnosis


class SeedsInterface(PerRequestSeeds, ChainInterface):
    """`seeds`: the probs signature with seed uint64 [B], one per request (PerRequestSeeds's
    probes); with signature="logits", the logits signature likewise (LogitsSeedsInterface)."""

    name = "seeds"
    summary = ("one seed per request (probs signature, or logits with signature=logits); "
               "determinism, permutation, independence")
    PROBE_CASE = "seed-probes"
    signature = "probs"

    def __new__(cls, signature="probs", ties=None):
        if signature == "logits":
            from ._logits import LogitsSeedsInterface
            return LogitsSeedsInterface(ties or "lowest-index")
        if signature != "probs" or ties is not None:
            raise ValueError(f"seeds takes signature probs or logits (is {signature!r}); ties "
                             "only with signature logits")
        return super().__new__(cls)

    def __init__(self, signature="probs", ties=None):
        pass

    def cases(self):
        """The probs instances after one of high entropy on which the probes run: p = q
        uniform over 8 tokens, so every draft is accepted and the bonus token alone varies
        (two independent requests agree with probability 1/8)."""
        rows = np.full((1, 3, 8), 1 / 8)
        inst = Instance(self.PROBE_CASE, "V = 8, γ = 2, p = q uniform; the seed probes run here",
                        rows, rows[:, :2], np.array([2]))
        return [Case(inst.name, inst.description, 1, inst)] + super().cases()


class _Broken(Exception):
    def __init__(self, problems):
        super().__init__("; ".join(problems))
        self.problems = problems


class DraftInterface(ChainInterface):
    """`draft`: f(probs_target, probs_draft, n_draft, seed) → (draft_tokens int [B, γ],
    emitted_tokens int [B, γ+1]): the sampler draws its own drafts from q. speclab tests the
    drafts' law against q (the product of the rows) and the emitted law against V1's, the
    marginal over the drafts, so noise shared between drafting, accept tests and the residual
    shows."""

    name = "draft"
    summary = "probabilities in; the sampler draws its own drafts (drafts' law tested too)"
    inputs = ("probs_target", "probs_draft", "n_draft", "seed")
    outputs = ("draft_tokens", "emitted_tokens")

    def call(self, runner, case, classes, rng):
        p, q, n = self._class_rows(case)
        b, g = len(classes), q.shape[1]
        inputs = {"probs_target": case.data.probs_target[classes].astype(np.float32),
                  "probs_draft": case.data.probs_draft[classes].astype(np.float32),
                  "n_draft": n[classes].astype(np.int32), "seed": int(rng.integers(0, 2**63))}
        out = runner(inputs, self.outputs)
        x, emitted = out
        _check_interface(emitted, b, g + 1)
        if (not isinstance(x, np.ndarray) or x.shape != (b, g) or x.dtype.kind not in "iu"):
            raise SamplerError(f"the sampler returned draft_tokens of shape "
                               f"{list(np.shape(x))}; expected an integer array [B, γ] = "
                               f"{[b, g]}")
        nn = n[classes]
        obs = self.observe(emitted, x.astype(np.int32), nn, p, classes)
        bad = (np.arange(g)[None, :] < nn[:, None]) & ((x < 0) | (x >= q.shape[2]))
        if bad.any():
            r = int(np.nonzero(bad.any(axis=1))[0][0])
            obs.problems.append(f"draft token out of [0, V) in {int(bad.any(axis=1).sum())} "
                                f"requests, e.g. request {r} drafted {x[r].tolist()}")
        obs.drafts = [tuple(row[:k]) for row, k in zip(x.astype(np.int64).tolist(),
                                                       nn.tolist())]
        return obs

    def drafts_law(self, case, cls, threshold):
        _, q, n = self.rows(case, cls)
        seqs, probs = [()], [1.0]
        for i in range(n):
            nxt, nxt_p = [], []
            for s, pr in zip(seqs, probs):
                for t in np.nonzero(q[i] * pr >= threshold)[0]:
                    nxt.append(s + (int(t),))
                    nxt_p.append(pr * q[i, t])
            seqs, probs = nxt, nxt_p
        return seqs, np.array(probs)

    def defects(self, case, cls):
        return chain_defects(*self.rows(case, cls), shared_draft_noise=True)


INTERFACES = {cls.name: cls for cls in (ChainInterface, UniformsInterface, SeedsInterface,
                                        DraftInterface)}
