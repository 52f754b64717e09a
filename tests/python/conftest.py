"""Shared fixtures of the Python tests: the build's speclab executable and random batches."""

import os
import shutil
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def speclab_cli():
    path = os.environ.get("SPECLAB_CLI") or shutil.which("speclab")
    if not path or not os.path.exists(path):
        pytest.skip("no speclab executable (set SPECLAB_CLI)")
    return path


def random_batch(batch, gamma, vocab, seed=0, ragged=False):
    """(probs_target f32 [B, γ+1, V], probs_draft f32 [B, γ, V], draft_tokens i32 [B, γ],
    n_draft i32 [B] or None), the drafts drawn from q."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(vocab), (batch, gamma + 1)).astype(np.float32)
    q = rng.dirichlet(np.ones(vocab), (batch, gamma)).astype(np.float32)
    cdf = np.cumsum(q.astype(np.float64), axis=2)
    u = rng.random((batch, gamma, 1)) * cdf[..., -1:]
    x = np.minimum((cdf <= u).sum(axis=2), vocab - 1).astype(np.int32)
    n = rng.integers(0, gamma + 1, batch).astype(np.int32) if ragged else None
    return p, q, x, n
