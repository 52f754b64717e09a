"""Whole speculative decoding loops in numpy for the engine interface's tests: one correct
(token-level speculative sampling, docs/verifiers.md V1, with the processed rows of both models),
a correct one that spends its random numbers differently (the negative control), and the two
defects the interface knows exact laws for.

Each is loop(target, draft, prompt, max_new_tokens, seed, params) -> int64 [n], the generated
tokens, with params["gamma"] drafts per iteration (fewer only where max_new_tokens ends)."""

import numpy as np

from speclab.conformance._engine import sampling_params
from speclab.sampling import probs_from_logits


def _rows(logits, params):
    """float64 [B, V]: speclab's processed rows of float32 logits [B, V]."""
    t, k, p, m = sampling_params(params)
    return probs_from_logits(logits, temperature=t, top_k=k, top_p=p, min_p=m).astype(
        np.float64)


def _draw(row, u):
    """Inverse-CDF draw from an unnormalised float64 row with a uniform u."""
    cdf = np.cumsum(row)
    return min(int(np.searchsorted(cdf, u * cdf[-1], side="right")), len(row) - 1)


def _gumbel(row, rng):
    """Gumbel-max draw from a float64 row (zeros never drawn)."""
    with np.errstate(divide="ignore"):
        return int(np.argmax(np.log(row) + rng.gumbel(size=len(row))))


def make(defect=None, gumbel=False):
    """A loop; defect None, "raw-q" (drafts from the processed q, verified against the softmax
    of the draft's raw logits) or "argmax-drafts" (drafts the argmax of q, verified as samples
    of q); gumbel=True draws every token by Gumbel-max and accepts by comparing logarithms, with
    the random numbers in another order (correct all the same)."""

    def loop(target, draft, prompt, max_new_tokens, seed, params):
        rng = np.random.default_rng(seed)
        seq = [int(t) for t in prompt]
        out = []
        while len(out) < max_new_tokens:
            n = min(int(params["gamma"]), max_new_tokens - len(out) - 1)
            drafts, q_rows, v_rows = [], [], []
            for _ in range(n):
                raw = draft.logits([seq + drafts])
                q = _rows(raw, params)[0]
                if defect == "argmax-drafts":
                    x = int(np.argmax(q))
                elif gumbel:
                    x = _gumbel(q, rng)
                else:
                    x = _draw(q, rng.random())
                v = q
                if defect == "raw-q":
                    v = np.exp(raw[0].astype(np.float64) - raw[0].max())
                    v /= v.sum()
                drafts.append(x)
                q_rows.append(q)
                v_rows.append(v)
            # One target pass over the drafts: rows after seq + drafts[:i], i = 0..n.
            p_rows = _rows(target.logits_all(seq + drafts)[len(seq) - 1:], params)
            if gumbel:
                u = rng.random(n + 1)[::-1]  # drawn at once, used in reverse order
            k = 0
            while k < n:
                x = drafts[k]
                if gumbel:
                    with np.errstate(divide="ignore"):  # log 0 = -inf rejects
                        ok = np.log(u[k]) + np.log(v_rows[k][x]) < np.log(p_rows[k][x])
                else:
                    ok = rng.random() * v_rows[k][x] < p_rows[k][x]
                if not ok:
                    break
                k += 1
            if k < n:
                row = np.maximum(p_rows[k] - v_rows[k], 0)
                if row.sum() <= 0:
                    row = p_rows[k]
            else:
                row = p_rows[n]
            y = _gumbel(row, rng) if gumbel else _draw(row, rng.random())
            emitted = drafts[:k] + [y]
            seq += emitted
            out += emitted
        return np.array(out[:max_new_tokens], np.int64)

    return loop


correct_loop = make()
reordered_randomness_loop = make(gumbel=True)  # the negative control: correct
raw_q_loop = make(defect="raw-q")
argmax_drafts_loop = make(defect="argmax-drafts")


def plain_loop(target, draft, prompt, max_new_tokens, seed, params):
    """Plain decoding (the draft unused): the law every lossless loop must give."""
    rng = np.random.default_rng(seed)
    seq = [int(t) for t in prompt]
    for _ in range(max_new_tokens):
        seq.append(_draw(_rows(target.logits([seq]), params)[0], rng.random()))
    return np.array(seq[len(prompt):], np.int64)
