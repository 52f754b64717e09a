"""Samplers speclab did not write, wrapped for `speclab conformance --callable`
(scripts/peer/conformance_peers.sh runs them; docs/python.md describes the interface):

  vllm_v0                  scripts/peer/torch_v0_sampler.py's rejection_sample, vLLM V0's
                           algorithm on [B, γ, V] tensors (requests grouped by their n_draft)
  hf_speculative_sampling  Hugging Face transformers' `_speculative_sampling`
                           (transformers.generation.utils), one request per call, as assisted
                           generation calls it, with logits = log p and log q. It calls
                           `Tensor.squeeze(0, 1)`, which torch ≥ 2.0 accepts; on Debian's torch
                           1.13 the wrapper lets squeeze take several dimensions for the call
  hf_speculative_sampling_uniforms
                           the same through the uniforms interface: its accept test reads
                           speclab's accept_uniforms (torch.rand_like patched)

Each is `sampler(probs_target, probs_draft, draft_tokens, n_draft, seed) -> emitted [B, γ+1]`
(−1 padded; the uniforms one takes accept_uniforms and draw_uniforms instead of seed), seeding
torch so that a run can be repeated.
"""

import numpy as np


def _torch():
    import torch
    return torch


def vllm_v0(probs_target, probs_draft, draft_tokens, n_draft, seed):
    torch = _torch()
    from torch_v0_sampler import rejection_sample
    batch, gamma = draft_tokens.shape
    out = np.full((batch, gamma + 1), -1, dtype=np.int32)
    generator = torch.Generator().manual_seed(int(seed) % (1 << 63))
    p_all = torch.from_numpy(np.ascontiguousarray(probs_target, dtype=np.float32))
    q_all = torch.from_numpy(np.ascontiguousarray(probs_draft, dtype=np.float32))
    x_all = torch.from_numpy(np.ascontiguousarray(draft_tokens)).long()
    n_all = np.asarray(n_draft)
    for n in np.unique(n_all):
        rows = torch.from_numpy(np.flatnonzero(n_all == n))
        n = int(n)
        if n == 0:
            # No drafts: vLLM samples the bonus token from p_1 with its sampler.
            race = torch.empty((rows.numel(), p_all.shape[2])).exponential_(1.0, generator=generator)
            out[rows.numpy(), 0] = (p_all[rows, 0] / race).argmax(dim=-1).numpy()
            continue
        emitted, _ = rejection_sample(p_all[rows, : n + 1], q_all[rows, :n], x_all[rows, :n],
                                      generator)
        out[rows.numpy(), : n + 1] = emitted.numpy()
    return out


def _squeeze_several_dims(torch):
    """torch 1.13's Tensor.squeeze takes one dimension; torch 2 takes several."""
    original = torch.Tensor.squeeze
    if getattr(original, "_speclab_several_dims", False):
        return

    def squeeze(self, *dims):
        if len(dims) <= 1:
            return original(self, *dims)
        ordered = sorted((d % self.dim() for d in dims), reverse=True)
        for d in ordered:
            self = original(self, d)
        return self

    squeeze._speclab_several_dims = True
    torch.Tensor.squeeze = squeeze


def hf_speculative_sampling(probs_target, probs_draft, draft_tokens, n_draft, seed):
    torch = _torch()
    from transformers.generation.utils import _speculative_sampling
    if int(torch.__version__.split(".")[0]) < 2:
        _squeeze_several_dims(torch)
    torch.manual_seed(int(seed) % (1 << 63))
    batch, gamma = draft_tokens.shape
    out = np.full((batch, gamma + 1), -1, dtype=np.int32)
    with np.errstate(divide="ignore"):
        log_p = torch.from_numpy(np.log(np.asarray(probs_target, dtype=np.float32)))
        log_q = torch.from_numpy(np.log(np.asarray(probs_draft, dtype=np.float32)))
    x_all = torch.from_numpy(np.ascontiguousarray(draft_tokens)).long()
    for b in range(batch):
        n = int(n_draft[b])
        if n == 0:
            # Assisted generation makes no candidates here: the target samples on its own.
            out[b, 0] = int(torch.multinomial(log_p[b, 0].softmax(dim=-1), 1))
            continue
        tokens, _ = _speculative_sampling(x_all[b : b + 1, :n], log_q[b : b + 1, :n], n,
                                          log_p[b : b + 1, : n + 1], False)
        tokens = tokens[0].numpy()
        out[b, : tokens.size] = tokens
    return out


def hf_speculative_sampling_uniforms(probs_target, probs_draft, draft_tokens, n_draft,
                                     accept_uniforms, draw_uniforms):
    """`_speculative_sampling` through the uniforms interface: its accept test's
    `torch.rand_like` returns speclab's accept_uniforms for the request (its residual and bonus
    draws stay torch.multinomial's, seeded from draw_uniforms), so that the edge probes reach
    it."""
    from unittest import mock

    torch = _torch()
    seed = int(np.asarray(draw_uniforms, np.float64).sum() * 2**20) % (1 << 63)
    current = {}

    def rand_like(t, *args, **kwargs):
        return torch.from_numpy(current["u"]).to(t.dtype).reshape(t.shape)

    out = np.full((len(draft_tokens), draft_tokens.shape[1] + 1), -1, dtype=np.int32)
    with mock.patch.object(torch, "rand_like", rand_like):
        for b in range(len(draft_tokens)):
            n = int(n_draft[b])
            current["u"] = np.ascontiguousarray(accept_uniforms[b, :n], dtype=np.float32)
            out[b] = hf_speculative_sampling(probs_target[b:b + 1], probs_draft[b:b + 1],
                                             draft_tokens[b:b + 1], n_draft[b:b + 1], seed + b)[0]
    return out
