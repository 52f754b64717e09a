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
        u_last = u_acc[:, 0].copy() if shared_noise else rng.random(b)
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
