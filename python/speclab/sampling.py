"""The sampling pipeline of docs/verifiers.md (core/sampling): logits → temperature → top-k →
top-p → min-p → probabilities, exactly as speclab's models and verifiers apply it; and plain
decoding's token at an output position (inverse CDF or Gumbel-max), which the match verifiers
reproduce."""

import numpy as np

from . import _speclab
from ._arrays import as_array, check_uint


def _rows(array, name):
    """(float32 [rows, V] view or copy, original shape) of an [..., V] array named NAME."""
    x = np.asarray(array) if not hasattr(array, "__dlpack__") else array
    shape = np.shape(x)
    if len(shape) < 1 or shape[-1] < 1:
        raise ValueError(f"{name} has shape {list(shape)}; expected [..., V] with V ≥ 1")
    flat = as_array(np.reshape(x, (-1, shape[-1])) if isinstance(x, np.ndarray) else x,
                    name, np.float32, ("rows", "V"))
    return flat, shape


def probs_from_logits(logits, *, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0):
    """Probabilities from logits, row by row along the last axis.

    Args:
        logits: float32 [..., V], finite or -inf (masked), at least one finite entry per row.
        temperature: float ≥ 0; 0 is greedy (one-hot at the argmax, lowest id on ties).
        top_k: int ≥ 0, keep the k most probable tokens; 0 is off.
        top_p: float in (0, 1], keep the smallest most-probable set of mass ≥ top_p.
        min_p: float in [0, 1], keep tokens with probability ≥ min_p · the maximum.

    Returns:
        float32 [..., V], each row summing to 1 (a new array).
    """
    flat, shape = _rows(logits, "logits")
    out = _speclab.probs_from_logits(flat, shape[-1], float(temperature), int(top_k),
                                     float(top_p), float(min_p))
    return out.reshape(shape)


def sample_output_token(probs, *, seed, request=0, position=0, sampling="inverse-cdf"):
    """Plain decoding's token at an output position, row by row along the last axis: the token
    the match verifiers (docs/verifiers.md V8, speclab.verify_chain with method "coupled" or
    "sampled-match") emit there, and for sampling "gumbel" the token a coupled draft draws from
    its own row q with the same noise.

    Args:
        probs: float32 [..., V], probability rows (each non-negative, summing to 1).
        seed: int in [0, 2^64), the Philox seed.
        request: int or integer array broadcastable to probs.shape[:-1], the request id in
            [0, 2^32) (verify_chain's request_ids; 0..B-1 by default there).
        position: int or integer array broadcastable to probs.shape[:-1], the output position
            in [0, 2^32): the number of tokens the request generated before this one.
        sampling: "inverse-cdf" (one uniform at (seed; request, position)) or "gumbel"
            (Gumbel-max with the noise of (seed; request, position), one value per token).

    Returns:
        int32 [...] (a new array), the token of each row.
    """
    flat, shape = _rows(probs, "probs")
    lead = tuple(shape[:-1])
    arrays = {}
    for name, value in (("request", request), ("position", position)):
        v = np.asarray(value)
        if v.dtype.kind not in "iu" or (v.size and (v.min() < 0 or v.max() >= 2**32)):
            raise ValueError(f"{name} is {value!r}; expected integers in [0, 2^32)")
        try:
            v = np.broadcast_to(v, lead)
        except ValueError:
            raise ValueError(f"{name} has shape {list(v.shape)}; expected one that broadcasts "
                             f"to probs' rows {list(lead)}") from None
        arrays[name] = v
    out = _speclab.sample_output_tokens(
        flat, shape[-1], np.ascontiguousarray(arrays["request"].reshape(-1), dtype=np.uint32),
        np.ascontiguousarray(arrays["position"].reshape(-1), dtype=np.int64), str(sampling),
        check_uint(seed, "seed", 64))
    return out.reshape(lead)
