"""Numpy samplers of the logits interface for the conformance tests: a correct one (speclab's own
sampling pipeline, then token-level speculative sampling, docs/verifiers.md V1), a negative
control that is correct but spends its randomness differently, and planted defects, each the
published bug its name says (speclab.conformance._logits.defects lists their references).

Every sampler: (logits_target f32 [B, γ+1, V], logits_draft f32 [B, γ, V], draft_tokens i32
[B, γ], n_draft i32 [B], seed int, temperature f32 [B], top_k i32 [B], top_p f32 [B], min_p f32
[B]) → emitted int64 [B, γ+1] (accepted drafts, one token, then -1).
"""

import numpy as np

from speclab.conformance._logits import process
from speclab.sampling import probs_from_logits


def _speclab_rows(logits, *params):
    """float64 rows [R, V] of speclab's C++ pipeline from logits [R, V] and the parameters
    (temperature, top_k, top_p, min_p; [R] each), one call per distinct parameter set."""
    code = np.zeros(len(logits), np.int64)
    for column in params:  # a dense integer code per distinct tuple, for a fast 1-D unique
        values, index = np.unique(column, return_inverse=True)
        code = code * len(values) + index
    out = np.empty(logits.shape)
    for c in np.unique(code):
        sel = code == c
        t, k, p, m = (column[sel][0] for column in params)
        out[sel] = probs_from_logits(logits[sel], temperature=float(t), top_k=int(k),
                                     top_p=float(p), min_p=float(m))
    return out


def _v1(p, q, x, n, accept, pick_last):
    """Token-level speculative sampling over processed rows p [B, γ+1, V], q [B, γ, V]: accept
    x_i while accept(i, p(x_i) [B], q(x_i) [B]) (probability min(1, p/q)), then draw the last
    token with pick_last(weights [B, V])."""
    b, g1, _ = p.shape
    rows = np.arange(b)
    out = np.full((b, g1), -1, np.int64)
    k = np.zeros(b, np.int64)
    alive = np.ones(b, bool)
    for i in range(g1 - 1):
        px, qx = p[rows, i, x[:, i]], q[rows, i, x[:, i]]
        alive &= (i < n) & accept(i, px, qx)
        out[alive, i] = x[alive, i]
        k += alive
    pk = p[rows, k]
    residual = np.maximum(pk - q[rows, np.minimum(k, g1 - 2)], 0) if g1 > 1 else pk
    weights = np.where((k < n)[:, None], residual, pk)
    empty = weights.sum(axis=1) <= 0  # p ≤ q everywhere: only reached through rounding
    weights[empty] = pk[empty]
    out[rows, k] = pick_last(weights)
    return out


def _inverse_cdf(u):
    def pick(w):
        cdf = np.cumsum(w, axis=1)
        return np.minimum((cdf <= u[:, None] * cdf[:, -1:]).sum(axis=1), w.shape[1] - 1)
    return pick


def make(pipeline="speclab", ties="lowest-index", target=None, draft=None):
    """A sampler that processes its rows with speclab's C++ pipeline (pipeline "speclab",
    lowest-index ties) or with _logits.process (pipeline "numpy", the tie rule `ties`), the
    parameters of `target` / `draft` (dicts such as {"min_p": 0.0}) replacing the request's on
    that side: the planted defects."""

    def sampler(lt, ld, x, n, seed, temperature, top_k, top_p, min_p):
        given = dict(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p)

        def rows(logits, override):
            a = {key: np.broadcast_to(np.asarray((override or {}).get(key, value)), len(logits))
                 for key, value in given.items()}
            if pipeline == "speclab":
                flat = logits.reshape(-1, logits.shape[-1])
                rep = lambda v: np.repeat(v, logits.shape[1])  # noqa: E731
                return _speclab_rows(flat, *(rep(a[key]) for key in given)).reshape(logits.shape)
            return process(logits, *(a[key][:, None] for key in given), ties=ties)

        p, q = rows(lt, target), rows(ld, draft)
        rng = np.random.default_rng(seed)
        u = rng.random(x.shape)
        return _v1(p, q, x, n, lambda i, px, qx: u[:, i] * qx < px,
                   _inverse_cdf(rng.random(len(x))))

    return sampler


def control(lt, ld, x, n, seed, temperature, top_k, top_p, min_p):
    """Correct, with other random numbers: Philox, position-major uniforms in (0, 1], acceptance
    as u ≤ p/q, the last token by Gumbel-max."""
    rng = np.random.Generator(np.random.Philox(seed))
    params = [a[:, None] for a in (temperature, top_k, top_p, min_p)]
    p, q = process(lt, *params), process(ld, *params)
    u = 1 - rng.random((x.shape[1], len(x)))  # position-major, in (0, 1]

    def gumbel_max(w):
        with np.errstate(divide="ignore"):
            return np.argmax(np.log(w) - np.log(-np.log(1 - rng.random(w.shape))), axis=1)

    with np.errstate(divide="ignore", invalid="ignore"):
        return _v1(p, q, x, n, lambda i, px, qx: u[i] <= px / qx, gumbel_max)


correct = make()
tie_over_acceptance = make("numpy", ties="keep-all")  # FlashInfer PR #3774
min_p_dropped = make("numpy", target={"min_p": 0.0})  # SGLang #10617, vLLM
top_k_top_p_dropped = make("numpy", target={"top_k": 0, "top_p": 1.0},
                           draft={"top_k": 0, "top_p": 1.0})  # TensorRT-LLM #17955
temperature_dropped = make("numpy", target={"temperature": 1.0},
                           draft={"temperature": 1.0})  # TensorRT-LLM #17955


def seeded(lt, ld, x, n, seeds, temperature, top_k, top_p, min_p):
    """The correct sampler with one seed per request (the seeds interface's logits signature):
    each request's random numbers come from its own seed alone."""
    out = np.empty((len(x), x.shape[1] + 1), np.int64)
    for s in np.unique(seeds):  # requests sharing a seed share its stream
        rows = np.nonzero(seeds == s)[0]
        for r in rows:
            out[r] = correct(lt[r:r + 1], ld[r:r + 1], x[r:r + 1], n[r:r + 1], int(s),
                             temperature[r:r + 1], top_k[r:r + 1], top_p[r:r + 1],
                             min_p[r:r + 1])[0]
    return out


def seeded_first_only(lt, ld, x, n, seeds, temperature, top_k, top_p, min_p):
    """Every request draws from seeds[0]'s stream (FlashInfer PR #4861) — with one sampler call
    per batch, so that equal rows give equal tokens."""
    return correct(lt, ld, x, n, int(seeds[0]), temperature, top_k, top_p, min_p)
