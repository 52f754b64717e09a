"""The sampling pipeline of docs/verifiers.md (core/sampling): logits → temperature → top-k →
top-p → min-p → probabilities, exactly as speclab's models and verifiers apply it."""

import numpy as np

from . import _speclab
from ._arrays import as_array


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
    x = np.asarray(logits) if not hasattr(logits, "__dlpack__") else logits
    shape = np.shape(x)
    if len(shape) < 1 or shape[-1] < 1:
        raise ValueError(f"logits has shape {list(shape)}; expected [..., V] with V ≥ 1")
    flat = as_array(np.reshape(x, (-1, shape[-1])) if isinstance(x, np.ndarray) else x,
                    "logits", np.float32, ("rows", "V"))
    out = _speclab.probs_from_logits(flat, shape[-1], float(temperature), int(top_k),
                                     float(top_p), float(min_p))
    return out.reshape(shape)
