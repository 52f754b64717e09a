"""Small numpy speculative samplers for the conformance tests: one correct (token-level
speculative sampling written from docs/verifiers.md V1) and the classic bugs, each a flag."""

import numpy as np


def _sample(rows, u):
    """Inverse-CDF draws from unnormalised rows [B, V] with uniforms u [B]."""
    cdf = np.cumsum(rows, axis=1)
    total = cdf[:, -1:]
    idx = (cdf <= u[:, None] * total).sum(axis=1)
    return np.minimum(idx, rows.shape[1] - 1)


def make(residual_from_p=False, bonus_row_offset=0, shared_noise=False, skip_padding=True,
         same_uniforms_across_requests=False):
    def sampler(p, q, x, n_draft, seed):
        rng = np.random.default_rng(seed)
        b, g1, v = p.shape
        g = g1 - 1
        p = p.astype(np.float64)
        q = q.astype(np.float64)
        out = np.full((b, g1), -1, np.int64)
        n = n_draft if skip_padding else np.full(b, g)
        rows = np.arange(b)
        if same_uniforms_across_requests:
            u_acc = np.broadcast_to(rng.random((1, g)), (b, g))
        else:
            u_acc = rng.random((b, g))
        u_last = rng.random(b)  # the bonus uniform; shared_noise reuses the accept one
        accepted = np.zeros(b, np.int64)
        alive = np.ones(b, bool)
        for i in range(g):
            test = alive & (i < n)
            px = p[rows, i, x[:, i]]
            qx = q[rows, i, x[:, i]]
            ok = test & (qx > 0) & (u_acc[:, i] * qx <= px)
            rejected = test & ~ok
            if shared_noise:
                u_last = np.where(rejected, u_acc[:, i], u_last)
            accepted += ok
            alive &= ok
            out[ok, i] = x[ok, i]
            alive &= ~rejected
        k = accepted
        rejected_at = k < n
        pk = p[rows, k]
        qk = q[rows, np.minimum(k, g - 1)] if g > 0 else np.zeros_like(pk)
        residual = pk if residual_from_p else np.maximum(pk - qk, 0)
        bonus_k = np.clip(k + bonus_row_offset, 0, g)
        weights = np.where(rejected_at[:, None], residual, p[rows, bonus_k])
        empty = weights.sum(axis=1) <= 0
        weights[empty] = pk[empty]
        out[rows, k] = _sample(weights, u_last)
        return out

    return sampler


correct = make()
residual_from_p = make(residual_from_p=True)
bonus_from_wrong_row = make(bonus_row_offset=-1)
shared_noise = make(shared_noise=True)
reads_padding = make(skip_padding=False)
same_uniforms_across_requests = make(same_uniforms_across_requests=True)


# Samplers of the other chain interfaces, over one deterministic step: V1 with given uniforms.


def step_with_uniforms(p, q, x, n_draft, u_accept, u_draw, coin_le=False, reverse=False):
    """V1 with injected uniforms (the `uniforms` interface): draft i accepted iff
    u_accept[:, i]·q < p (coin_le: ≤, SGLang #35771's rule, which accepts a token of target
    probability 0 when the coin is 0); the residual or bonus at position k drawn by inverse CDF
    with u_draw[:, k] (reverse: in reverse token order, a correct way to spend the uniforms
    differently)."""
    b, g1, v = p.shape
    p = p.astype(np.float64)
    q = q.astype(np.float64)
    rows = np.arange(b)
    out = np.full((b, g1), -1, np.int64)
    k = np.zeros(b, np.int64)
    alive = np.ones(b, bool)
    for i in range(g1 - 1):
        test = alive & (i < n_draft)
        px, qx = p[rows, i, x[:, i]], q[rows, i, x[:, i]]
        lhs = u_accept[:, i].astype(np.float64) * qx
        ok = test & (qx > 0) & ((lhs <= px) if coin_le else (lhs < px))
        out[ok, i] = x[ok, i]
        k += ok
        alive &= ok
    pk = p[rows, k]
    qk = q[rows, np.minimum(k, g1 - 2)] if g1 > 1 else np.zeros_like(pk)
    weights = np.where((k < n_draft)[:, None], np.maximum(pk - qk, 0), pk)
    empty = weights.sum(axis=1) <= 0
    weights[empty] = pk[empty]
    u = u_draw[rows, k].astype(np.float64)
    if reverse:
        out[rows, k] = v - 1 - _sample(weights[:, ::-1], u)
    else:
        out[rows, k] = _sample(weights, u)
    return out


def uniforms_correct(p, q, x, n, u_accept, u_draw):
    return step_with_uniforms(p, q, x, n, u_accept, u_draw)


def uniforms_coin_zero_accepts(p, q, x, n, u_accept, u_draw):
    return step_with_uniforms(p, q, x, n, u_accept, u_draw, coin_le=True)


def uniforms_reversed_draws(p, q, x, n, u_accept, u_draw):
    return step_with_uniforms(p, q, x, n, u_accept, u_draw, reverse=True)


def _splitmix(z):
    """splitmix64 of uint64 values, vectorised: a stateless stream per (seed, index)."""
    with np.errstate(over="ignore"):
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def uniforms_from_seeds(seeds, count):
    """float64 [B, count] uniforms in [0, 1), request b's from its seed alone."""
    seeds = np.asarray(seeds, np.uint64)
    index = np.arange(count, dtype=np.uint64)[None, :]
    with np.errstate(over="ignore"):
        bits = _splitmix(_splitmix(seeds[:, None]) + index)
    return (bits >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


def _seeded(p, q, x, n, seeds):
    g = x.shape[1]
    u = uniforms_from_seeds(seeds, 2 * g + 1)
    return step_with_uniforms(p, q, x, n, u[:, :g], u[:, g:])


def seeds_correct(p, q, x, n, seeds):
    return _seeded(p, q, x, n, seeds)


def seeds_first_only(p, q, x, n, seeds):
    """Every request uses seeds[0] (FlashInfer PR #4861)."""
    return _seeded(p, q, x, n, np.full(len(seeds), np.asarray(seeds)[0], np.uint64))


def seeds_per_row_stream(p, q, x, n, seeds):
    """The stream follows the batch row, not the seed (TensorRT-LLM #19487)."""
    return _seeded(p, q, x, n, np.arange(len(seeds), dtype=np.uint64) + np.uint64(1234))


def _drafted(p, q, n, seed, shared):
    rng = np.random.default_rng(seed)
    b, g, v = q.shape
    u = rng.random((b, g))
    x = np.zeros((b, g), np.int32)
    for i in range(g):
        x[:, i] = _sample(q[:, i].astype(np.float64), u[:, i])
    u_accept = u if shared else rng.random((b, g))
    u_draw = rng.random((b, g + 1))
    if shared:
        u_draw[:, :g] = u
    return x, step_with_uniforms(p, q, x, n, u_accept, u_draw)


def draft_correct(p, q, n, seed):
    return _drafted(p, q, n, seed, shared=False)


def draft_shared_noise(p, q, n, seed):
    """One uniform per position draws the draft, decides its accept test and draws the
    residual (vLLM #54282)."""
    return _drafted(p, q, n, seed, shared=True)
