"""speclab.verify_chain and the other verifiers from Python: results, zero copies, errors, the
same tokens as `speclab verify-batch`, and the cost of the Python call beside the C++ loop."""

import subprocess
import time
import warnings

import h5py
import numpy as np
import pytest

import speclab
from conftest import random_batch


def test_chain_result_is_accepted_prefix_plus_one_token():
    p, q, x, n = random_batch(64, 4, 16, seed=1, ragged=True)
    r = speclab.verify_chain(p, q, x, seed=7, n_draft=n)
    assert r.emitted_tokens.shape == (64, 5) and r.emitted_tokens.dtype == np.int32
    assert r.accept_mask.shape == (64, 4) and r.accept_mask.dtype == np.uint8
    assert not r.lossy and r.method == "token"
    for b in range(64):
        k = r.n_accepted[b]
        assert 0 <= k <= n[b]
        assert (r.emitted_tokens[b, :k] == x[b, :k]).all()
        assert 0 <= r.emitted_tokens[b, k] < 16 and (r.emitted_tokens[b, k + 1:] == -1).all()
        assert r.accept_mask[b].sum() == k


def test_fast_path_equals_reference_for_every_chain_method():
    p, q, x, n = random_batch(32, 3, 8, seed=2, ragged=True)
    for method, leniency in (("token", 1.0), ("greedy", 1.0), ("lenient", 0.6)):
        fast = speclab.verify_chain(p, q, x, seed=3, n_draft=n, method=method, leniency=leniency)
        ref = speclab.verify_chain(p, q, x, seed=3, n_draft=n, method=method, leniency=leniency,
                                   reference=True)
        assert (fast.emitted_tokens == ref.emitted_tokens).all()
        assert fast.lossy == (method == "lenient")


def test_block_typical_and_tree_verifiers():
    p, q, x, n = random_batch(16, 3, 8, seed=3)
    block = speclab.verify_block(p, q, x, seed=1)
    assert not block.lossy and block.emitted_tokens.shape == (16, 4)
    typical = speclab.verify_typical(p, x, seed=1)
    assert typical.lossy
    # A chain is a tree whose node i has parent i - 1; tree-iid then equals token-level V1.
    rows = np.concatenate([q, q[:, :1]], axis=1)
    parents = np.tile(np.arange(-1, 3, dtype=np.int32), (16, 1))
    tokens = np.concatenate([np.zeros((16, 1), np.int32), x], axis=1)
    for method in ("tree-iid", "kseq"):
        tree = speclab.verify_tree(p, rows, parents, tokens, seed=1, method=method)
        assert tree.emitted_tokens.shape == (16, 4) and not tree.lossy
        k = tree.n_accepted
        assert all((tree.emitted_tokens[b, :k[b]] == x[b, :k[b]]).all() for b in range(16))
    names = {v["name"]: v for v in speclab.verifiers()}
    assert names["typical"]["lossy"] and not names["kseq"]["lossy"]


def test_conforming_arrays_are_borrowed_and_others_converted_with_a_warning():
    from speclab._arrays import as_array
    p, q, x, _ = random_batch(4, 2, 8)
    assert as_array(p, "p", np.float32, ("B", "γ+1", "V")) is p
    with pytest.warns(speclab.CopyWarning, match="float64 to float32"):
        r64 = speclab.verify_chain(p.astype(np.float64), q, x, seed=5)
    with pytest.warns(speclab.CopyWarning, match="C-contiguous"):
        speclab.verify_chain(np.asfortranarray(p), q, x, seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r32 = speclab.verify_chain(p, q, x, seed=5)
    assert (r64.emitted_tokens == r32.emitted_tokens).all()


def test_torch_cpu_tensors_are_borrowed():
    torch = pytest.importorskip("torch")
    from speclab._arrays import as_array
    p, q, x, _ = random_batch(4, 2, 8)
    tp = torch.from_numpy(p)
    view = as_array(tp, "p", np.float32, ("B", "γ+1", "V"))
    assert view.__array_interface__["data"][0] == tp.data_ptr()
    r = speclab.verify_chain(tp, torch.from_numpy(q), torch.from_numpy(x), seed=5)
    assert (r.emitted_tokens == speclab.verify_chain(p, q, x, seed=5).emitted_tokens).all()


@pytest.mark.parametrize("mutate, message", [
    (lambda a: a.update(probs_target=a["probs_target"] * 2), "probs_target row 0 .* sums to"),
    (lambda a: a.update(draft_tokens=a["draft_tokens"] + 100), "draft_tokens"),
    (lambda a: a.update(probs_draft=a["probs_draft"][:, :1]), r"probs_draft has shape \[4, 1, 8\]"),
    (lambda a: a.update(draft_tokens=a["draft_tokens"].astype(np.float32)),
     "draft_tokens has dtype float32; expected int32"),
    (lambda a: a.update(probs_target=a["probs_target"][0]), "expected 3 dimensions"),
    (lambda a: a.update(n_draft=np.full(4, 9, np.int32)), "n_draft"),
    (lambda a: a.update(seed=-1), r"seed is -1; expected an integer in \[0, 2\^64\)"),
    (lambda a: a.update(method="tokn"), "method is 'tokn'"),
    (lambda a: a.update(method="lenient", leniency=0.0), "leniency"),
    (lambda a: a.update(probs_target=np.where(np.arange(8) == 3, np.nan,
                                              a["probs_target"]).astype(np.float32)),
     "probs_target"),
])
def test_bad_input_raises_value_error_naming_the_argument(mutate, message):
    p, q, x, _ = random_batch(4, 2, 8)
    args = dict(probs_target=p, probs_draft=q, draft_tokens=x, seed=1)
    mutate(args)
    with pytest.raises(ValueError, match=message):
        speclab.verify_chain(**args)


def test_same_tokens_as_verify_batch(tmp_path, speclab_cli):
    p, q, x, n = random_batch(50, 5, 100, seed=4, ragged=True)
    for method, leniency in (("token", 1.0), ("lenient", 0.5), ("greedy", 1.0)):
        src, dst = tmp_path / f"{method}.h5", tmp_path / f"{method}.out.h5"
        with h5py.File(src, "w") as f:
            f["probs_target"], f["probs_draft"], f["draft_tokens"], f["n_draft"] = p, q, x, n
            f.attrs["seed"] = np.uint64(2**63 + 11)
            f.attrs["method"] = method
            f.attrs["leniency"] = leniency
            f.attrs["step"] = np.uint64(3)
        subprocess.run([speclab_cli, "verify-batch", "--in", src, "--out", dst], check=True,
                       capture_output=True)
        r = speclab.verify_chain(p, q, x, seed=2**63 + 11, n_draft=n, method=method,
                                 leniency=leniency, step=3)
        with h5py.File(dst, "r") as f:
            assert (f["emitted_tokens"][()] == r.emitted_tokens).all()
            assert (f["n_accepted"][()] == r.n_accepted).all()
            assert (f["accept_mask"][()] == r.accept_mask).all()
            assert (f["residual_fallback"][()] == r.residual_fallback).all()
            assert bool(f.attrs["lossy"]) == r.lossy


def test_exact_and_sampling_and_stats():
    from fractions import Fraction
    step = speclab.exact.step([["1/3", "2/3"]] * 3, [[Fraction(2, 3), Fraction(1, 3)]] * 2)
    assert step["expected_accepted"] == Fraction(10, 9)
    assert sum(step["distribution"].values()) == 1
    assert step["first_token_marginal"] == [Fraction(1, 3), Fraction(2, 3)]
    # β = Σ min(p, q) = 2/3 at each position: P(n ≥ i) = β^i, and β again given position i reached.
    assert step["position_acceptance_marginal"] == [Fraction(2, 3), Fraction(4, 9)]
    assert step["position_acceptance_conditional"] == [Fraction(2, 3), Fraction(2, 3)]
    with pytest.raises(ValueError, match="probs_target"):
        speclab.exact.step([["1/2", "1/3"]], [])
    probs = speclab.sampling.probs_from_logits(np.array([[0, 1, 2], [2, 1, 0]], np.float32),
                                               top_k=1)
    assert (probs == np.array([[0, 0, 1], [1, 0, 0]], np.float32)).all()
    with pytest.raises(ValueError, match="top_p"):
        speclab.sampling.probs_from_logits(np.zeros((1, 3), np.float32), top_p=0)
    assert speclab.stats.sample_size(16, 0.01, 1e-6) == 202039  # docs/testing.md's table
    assert speclab.stats.chi_square_test([50, 50], [0.5, 0.5])["p_value"] == pytest.approx(1)


def test_python_call_costs_little_beside_the_cpp_fast_path(capsys):
    """The goal of the Python package: within 1.2× of the C++ fast path at B = 8, γ = 5,
    V = 32000 (no copies). The figures are printed; the bound asserted is loose (2× plus 20 µs),
    because a shared machine's timing noise is of the order of the difference measured."""
    p, q, x, _ = random_batch(8, 5, 32000, seed=5)
    once = speclab.verify.time_fast_path(p, q, x, repeats=3)
    repeats = int(max(10, min(2000, 0.3 / once)))

    def python_loop(validate):
        start = time.perf_counter()
        for step in range(repeats):
            speclab.verify_chain(p, q, x, seed=0, step=step, validate=validate)
        return (time.perf_counter() - start) / repeats

    cpp, fast, full = (float("inf"),) * 3
    for _ in range(3):
        cpp = min(cpp, speclab.verify.time_fast_path(p, q, x, repeats=repeats))
        fast = min(fast, python_loop(False))
        full = min(full, python_loop(True))
    with capsys.disabled():
        print(f"\nverify_chain B = 8, γ = 5, V = 32000 ({repeats} calls): C++ fast path "
              f"{cpp * 1e6:.1f} µs; speclab.verify_chain(validate=False) {fast * 1e6:.1f} µs "
              f"({fast / cpp:.2f}×); with the whole batch validated {full * 1e6:.1f} µs")
    assert fast < 2 * cpp + 20e-6


def test_import_makes_openmp_wait_passively_unless_told():
    """Idle OpenMP threads must not spin on a shared machine: importing speclab sets
    OMP_WAIT_POLICY=passive before its extension loads the OpenMP runtime, and keeps a policy the
    user chose."""
    import os
    import sys
    probe = "import os, speclab; print(os.environ.get('OMP_WAIT_POLICY'))"
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    run = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "passive"
    env["OMP_WAIT_POLICY"] = "active"
    run = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert run.stdout.strip() == "active"
