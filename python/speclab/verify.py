"""speclab's verifiers (docs/verifiers.md) on arrays: token-level speculative sampling (V1),
greedy (V2), lenient (V3, lossy), typical acceptance (V4, lossy), block verification (V5), tree
verification (V6, K-SEQ) and the match verifiers (V8: coupled, sampled-match). The same tokens
as `speclab verify-batch` and the C++ library for the same input, seed and step: every uniform
is addressed by (seed; request, step, position), except the match verifiers', which is
addressed by (seed; request, output position) and ignores the step."""

from dataclasses import dataclass

import numpy as np

from . import _speclab
from ._arrays import as_array, check_shape, check_uint


@dataclass
class VerifyResult:
    """One verification step of a batch of draft chains.

    Attributes:
        emitted_tokens: int32 [B, γ+1], the accepted prefix, then one residual or bonus token,
            then -1.
        n_accepted: int32 [B], accepted draft tokens of each request (bonus not counted).
        accept_mask: uint8 [B, γ], 1 where the draft token was accepted.
        residual_fallback: uint8 [B], 1 where the residual had zero mass after rounding and the
            token was drawn from p instead.
        residual_fallbacks: number of requests with residual_fallback set.
        lossy: True when the verifier's output law is not the target's (lenient, typical).
        method: the verifier's registry name.
    """

    emitted_tokens: np.ndarray
    n_accepted: np.ndarray
    accept_mask: np.ndarray
    residual_fallback: np.ndarray
    residual_fallbacks: int
    lossy: bool
    method: str


@dataclass
class TreeResult:
    """One verification step of a batch of token trees.

    Attributes:
        emitted_tokens: int32 [B, N+1], the accepted path's tokens, then one token, then -1.
        accepted_nodes: int32 [B, N+1], node ids of the accepted path, then -1.
        n_accepted: int32 [B], depth of the last accepted node.
        residual_fallback: uint8 [B], 1 where the residual had zero mass after rounding.
        residual_fallbacks: number of requests with residual_fallback set.
        lossy: True when any request used a lossy method (tree-topk-softmax-q).
        method: the verifier's registry name.
    """

    emitted_tokens: np.ndarray
    accepted_nodes: np.ndarray
    n_accepted: np.ndarray
    residual_fallback: np.ndarray
    residual_fallbacks: int
    lossy: bool
    method: str


def verifiers():
    """The verifier registry (core/verify/verifier.hpp) as a list of dicts with keys name, label,
    family ("chain", "block", "typical", "tree", "match"), lossy, needs_draft_probs, uses_branches,
    vocab_rule ("shared"; tli, slem and slrs, which also reach a draft of another vocabulary:
    "intersection", "string-match", "string-rejection"; with one shared vocabulary they verify as
    token and sampled-match do), parameters and summary."""
    return _speclab.registry()


def _chain_arrays(probs_target, probs_draft, draft_tokens, n_draft, request_ids, draft_optional,
                  positions=None):
    p = as_array(probs_target, "probs_target", np.float32, ("B", "γ+1", "V"))
    batch, rows, vocab = p.shape
    if rows < 1:
        raise ValueError(f"probs_target has shape {list(p.shape)}; expected [B, γ+1, V] with "
                         "γ+1 ≥ 1")
    gamma = rows - 1
    q = as_array(probs_draft, "probs_draft", np.float32, ("B", "γ", "V"),
                 allow_none=draft_optional)
    x = as_array(draft_tokens, "draft_tokens", np.int32, ("B", "γ"))
    n = as_array(n_draft, "n_draft", np.int32, ("B",), allow_none=True)
    r = as_array(request_ids, "request_ids", np.uint32, ("B",), allow_none=True)
    t = as_array(positions, "positions", np.int64, ("B",), allow_none=True)
    check_shape(q, "probs_draft", (batch, gamma, vocab), ("B", "γ", "V"), "probs_target", p.shape)
    check_shape(x, "draft_tokens", (batch, gamma), ("B", "γ"), "probs_target", p.shape)
    check_shape(n, "n_draft", (batch,), ("B",), "probs_target", p.shape)
    check_shape(r, "request_ids", (batch,), ("B",), "probs_target", p.shape)
    check_shape(t, "positions", (batch,), ("B",), "probs_target", p.shape)
    return batch, gamma, vocab, p, q, x, n, r, t


def _chain_family(method, probs_target, probs_draft, draft_tokens, seed, n_draft, request_ids,
                  leniency=1.0, epsilon=0.09, delta=0.3, step=0, reference=False,
                  draft_optional=False, validate=True, positions=None, sampling=""):
    batch, gamma, vocab, p, q, x, n, r, t = _chain_arrays(
        probs_target, probs_draft, draft_tokens, n_draft, request_ids, draft_optional, positions)
    out = _speclab.verify_chain_family(
        method, batch, gamma, vocab, p, q, x, n, r, t, check_uint(seed, "seed", 64),
        float(leniency), float(epsilon), float(delta), sampling, check_uint(step, "step", 32),
        bool(reference), bool(validate))
    return VerifyResult(method=method, **out)


_CHAIN_METHODS = ("token", "greedy", "lenient")
# The match verifiers (docs/verifiers.md V8), whose noise is addressed by output position.
_MATCH_METHODS = ("coupled", "sampled-match")
_SAMPLINGS = ("inverse-cdf", "gumbel")


def verify_chain(probs_target, probs_draft, draft_tokens, *, seed, n_draft=None, method="token",
                 leniency=1.0, step=0, request_ids=None, reference=False, validate=True,
                 positions=None, sampling=None):
    """Verifies one step of B draft chains (docs/verifiers.md V1-V3 and V8).

    Args:
        probs_target: float32 [B, γ+1, V], the target's rows p_1..p_{γ+1} after the sampling
            pipeline (temperature, top-k, top-p, min-p).
        probs_draft: float32 [B, γ, V], the rows q_1..q_γ the drafts were drawn from; may be
            None for "greedy", "coupled" and "sampled-match", which never read it.
        draft_tokens: int32 [B, γ], drafted ids in [0, V).
        seed: int in [0, 2^64), the Philox seed.
        n_draft: optional int32 [B], per-request γ_b ≤ γ (ragged batches); positions beyond
            it are padding and never read. None means γ for every request.
        method: "token" (V1, lossless), "greedy" (V2), "lenient" (V3, lossy), or a match
            verifier (V8): "coupled" (the drafts were drawn by Gumbel-max with the noise of
            their output positions, as sampling.sample_output_token(q, sampling="gumbel")
            draws them) or "sampled-match" (the drafts were drawn with the draft's own noise).
            Both emit exactly plain decoding's tokens: the target's token at each output
            position, whatever the drafts.
        leniency: float l in (0, 1], read by "lenient" only.
        step: int in [0, 2^32), the decoding step, part of every uniform's address. The match
            verifiers do not read it (it must stay 0 with them): give positions instead.
        request_ids: optional uint32 [B], Philox request ids; None means 0..B-1.
        reference: run the obviously-correct reference instead of the fast path (same tokens;
            the match verifiers have one implementation, which it leaves unchanged).
        validate: check every probability row the batch uses before verifying, as
            `speclab verify-batch` does. False leaves only the fast path's own checks of the
            values it reads (a NaN there still raises; one in a row it never reads does not),
            which is what the C++ fast path costs. The match verifiers always check the
            target rows they read.
        positions: optional int64 [B], match verifiers only: the output position of each
            request's first draft token (the tokens it has generated before this step), each
            ≥ 0 with position + γ_b < 2^32; None means 0 for every request. Their noise is
            addressed by (seed, request, output position), not by step: a caller verifying
            step after step must advance positions by the tokens each step emitted, or every
            step reuses the same noise.
        sampling: match verifiers only: the rule plain decoding draws the target's token
            with, "inverse-cdf" (sampled-match's default) or "gumbel"; "coupled" is always
            "gumbel". None means the default.

    Returns:
        VerifyResult: emitted_tokens int32 [B, γ+1] (-1 padded), n_accepted int32 [B],
        accept_mask uint8 [B, γ], residual_fallback uint8 [B], residual_fallbacks, lossy.

    Arrays already C-contiguous float32/int32 (numpy, or torch CPU tensors) are borrowed
    without a copy; other real dtypes are converted with a CopyWarning. Bad input raises
    ValueError naming the argument, request, position and value.
    """
    if method not in _CHAIN_METHODS + _MATCH_METHODS:
        raise ValueError(f"method is {method!r}; expected one of "
                         f"{', '.join(_CHAIN_METHODS + _MATCH_METHODS)} (verify_block, "
                         "verify_typical and verify_tree take the others)")
    if method != "lenient" and leniency != 1.0:
        raise ValueError(f"leniency is {leniency} with method {method!r}; leniency applies to "
                         "method 'lenient' only")
    match = method in _MATCH_METHODS
    if not match:
        for name, value in (("positions", positions), ("sampling", sampling)):
            if value is not None:
                raise ValueError(f"{name} given with method {method!r}; {name} applies to the "
                                 f"match verifiers only ({', '.join(_MATCH_METHODS)})")
    else:
        if step != 0:
            raise ValueError(
                f"step is {step!r} with method {method!r}, whose noise is addressed by output "
                "position, not by step: pass positions (the output position of each request's "
                "first draft) instead")
        if sampling is None:
            sampling = "gumbel" if method == "coupled" else "inverse-cdf"
        if sampling not in _SAMPLINGS:
            raise ValueError(f"sampling is {sampling!r}; expected one of {', '.join(_SAMPLINGS)}")
        if method == "coupled" and sampling != "gumbel":
            raise ValueError(f"sampling is {sampling!r} with method 'coupled', which draws every "
                             "token with Gumbel noise; it takes sampling='gumbel' only")
    return _chain_family(method, probs_target, probs_draft, draft_tokens, seed, n_draft,
                         request_ids, leniency=leniency, step=step, reference=reference,
                         draft_optional=method == "greedy" or match, validate=validate,
                         positions=positions, sampling=sampling if match else "")


def verify_block(probs_target, probs_draft, draft_tokens, *, seed, n_draft=None, step=0,
                 request_ids=None):
    """Block verification (docs/verifiers.md V5, Sun et al. 2024): lossless, never worse than
    token-level verification in expectation. Arguments and result as verify_chain's
    (probs_target float32 [B, γ+1, V], probs_draft float32 [B, γ, V], draft_tokens int32
    [B, γ], n_draft optional int32 [B]); n_accepted is τ, the last passing position."""
    return _chain_family("block", probs_target, probs_draft, draft_tokens, seed, n_draft,
                         request_ids, step=step)


def verify_typical(probs_target, draft_tokens, *, seed, probs_draft=None, n_draft=None,
                   epsilon=0.09, delta=0.3, step=0, request_ids=None):
    """Typical acceptance (docs/verifiers.md V4, Medusa), LOSSY: accepts draft x iff
    p(x) > min(ε, δ·exp(−H(p))); the token after the accepted run is drawn from p.

    Args:
        probs_target: float32 [B, γ+1, V].
        draft_tokens: int32 [B, γ].
        seed: int in [0, 2^64).
        probs_draft: optional float32 [B, γ, V] (never read).
        n_draft: optional int32 [B].
        epsilon: float ε > 0, the hard threshold (Medusa's posterior_threshold).
        delta: float δ > 0, the entropy-adaptive factor (Medusa's posterior_alpha).
        step: int in [0, 2^32).
        request_ids: optional uint32 [B].

    Returns:
        VerifyResult with lossy True.
    """
    return _chain_family("typical", probs_target, probs_draft, draft_tokens, seed, n_draft,
                         request_ids, epsilon=epsilon, delta=delta, step=step,
                         draft_optional=True)


def verify_tree(probs_target, probs_draft, parents, tokens, *, seed, method="tree-iid",
                n_nodes=None, step=0, request_ids=None):
    """Tree verification (docs/verifiers.md V6) by recursive rejection sampling, SpecTr's
    K-SEQ (method "kseq") or traversal verification (V7, method "traversal": candidates drawn
    without replacement), over one flattened token tree per request: node 0 is the root (the
    context), nodes 1..n have parents[i] < i; the children of a node, in node order, are its
    sibling candidates in the order drawn.

    Args:
        probs_target: float32 [B, N+1, V], row i = p(· | path to node i).
        probs_draft: float32 [B, N+1, V], row i = q(· | path to node i), the law node i's
            children were drawn from; may be None for "tree-topk".
        parents: int32 [B, N+1]; entry 0 is not read.
        tokens: int32 [B, N+1] in [0, V); entry 0 is not read.
        seed: int in [0, 2^64).
        method: "tree-iid", "tree-swor", "tree-topk", "tree-topk-softmax-q" (lossy), "kseq" or
            "traversal".
        n_nodes: optional int32 [B], nodes used per request (≤ N); None means N.
        step: int in [0, 2^32).
        request_ids: optional uint32 [B].

    Returns:
        TreeResult: emitted_tokens int32 [B, N+1], accepted_nodes int32 [B, N+1], n_accepted
        int32 [B], residual_fallback uint8 [B], residual_fallbacks, lossy.
    """
    p = as_array(probs_target, "probs_target", np.float32, ("B", "N+1", "V"))
    batch, rows, vocab = p.shape
    q = as_array(probs_draft, "probs_draft", np.float32, ("B", "N+1", "V"),
                 allow_none=method == "tree-topk")
    par = as_array(parents, "parents", np.int32, ("B", "N+1"))
    tok = as_array(tokens, "tokens", np.int32, ("B", "N+1"))
    n = as_array(n_nodes, "n_nodes", np.int32, ("B",), allow_none=True)
    r = as_array(request_ids, "request_ids", np.uint32, ("B",), allow_none=True)
    check_shape(q, "probs_draft", p.shape, ("B", "N+1", "V"), "probs_target", p.shape)
    for arr, name in ((par, "parents"), (tok, "tokens")):
        check_shape(arr, name, (batch, rows), ("B", "N+1"), "probs_target", p.shape)
    check_shape(n, "n_nodes", (batch,), ("B",), "probs_target", p.shape)
    check_shape(r, "request_ids", (batch,), ("B",), "probs_target", p.shape)
    out = _speclab.verify_tree_family(method, batch, rows - 1, vocab, p, q, par, tok, n, r,
                                      check_uint(seed, "seed", 64), check_uint(step, "step", 32))
    return TreeResult(method=method, **out)


def time_fast_path(probs_target, probs_draft, draft_tokens, *, seed=0, repeats=1000):
    """Seconds per call of the C++ fast path of V1 (verify_chain) timed in a C++ loop over the
    same borrowed arrays: the figure a C++ caller gets, to set beside speclab.verify_chain's."""
    batch, gamma, vocab, p, q, x, _, _, _ = _chain_arrays(probs_target, probs_draft,
                                                          draft_tokens, None, None, False)
    return _speclab.time_verify_chain(batch, gamma, vocab, p, q, x, check_uint(seed, "seed", 64),
                                      int(repeats))
