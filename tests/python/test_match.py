"""The match verifiers (docs/verifiers.md V8: coupled, sampled-match) from Python: by registry
name through speclab.verify_chain, with per-request output positions; the emitted tokens are plain
decoding's (speclab.sampling.sample_output_token) step after step; their acceptance is the closed
form of speclab.exact.acceptance; bad positions and options raise ValueError naming them."""

from fractions import Fraction

import numpy as np
import pytest

import speclab
from conftest import random_batch

SEED = 20261205


def match_methods():
    """(method, sampling) for every match verifier of the registry and each rule it takes."""
    names = [v["name"] for v in speclab.verifiers()
             if v["family"] == "match" and v["vocab_rule"] == "shared"]
    assert sorted(names) == ["coupled", "sampled-match"]
    return [(name, rule) for name in names
            for rule in (("gumbel",) if name == "coupled" else ("inverse-cdf", "gumbel"))]


def target_tokens(p, positions, request_ids, sampling):
    """[B, γ+1] plain decoding's token at each row: output position positions[b] + i."""
    rows = p.shape[1]
    return speclab.sampling.sample_output_token(
        p, seed=SEED, request=request_ids[:, None],
        position=positions[:, None] + np.arange(rows), sampling=sampling)


def expected_step(y, x, n):
    """One match step written from docs/verifiers.md V8 over the target's tokens y: accept x_i
    while it equals y_i; emit y_i at the first mismatch, or the bonus y_{γ_b+1}."""
    out = np.full(y.shape, -1, np.int32)
    accepted = np.zeros(len(y), np.int32)
    for b in range(len(y)):
        k = 0
        while k < n[b] and x[b, k] == y[b, k]:
            k += 1
        out[b, :k + 1] = y[b, :k + 1]
        accepted[b] = k
    return out, accepted


@pytest.mark.parametrize("method, sampling", match_methods())
def test_one_step_emits_plain_decodings_tokens(method, sampling):
    p, q, x, n = random_batch(40, 4, 6, seed=11, ragged=True)
    rng = np.random.default_rng(3)
    positions = rng.integers(0, 10**6, 40)
    request_ids = rng.integers(0, 2**32, 40).astype(np.uint32)
    y = target_tokens(p, positions, request_ids, sampling)
    # A third of the requests draft the target's own tokens, a third all but the second, so that
    # every branch is taken; the rest keep their drafts from q.
    kind = np.arange(40)[:, None] % 3
    x = np.where(kind == 0, y[:, :4], np.where(kind == 1, y[:, :4], x)).astype(np.int32)
    x[1::3, 1] = (x[1::3, 1] + 1) % 6
    r = speclab.verify_chain(p, q, x, seed=SEED, n_draft=n, method=method, positions=positions,
                             request_ids=request_ids, sampling=sampling)
    expected, accepted = expected_step(y, x, n)
    assert (r.emitted_tokens == expected).all()
    assert (r.n_accepted == accepted).all()
    assert (r.accept_mask.sum(axis=1) == accepted).all()
    assert not r.lossy and r.residual_fallbacks == 0 and r.method == method
    assert (accepted[0::3] == n[0::3]).all() and (accepted < n).any() and (accepted >= 2).any()
    # probs_draft is never read: None gives the same tokens.
    none = speclab.verify_chain(p, None, x, seed=SEED, n_draft=n, method=method,
                                positions=positions, request_ids=request_ids, sampling=sampling)
    assert (none.emitted_tokens == r.emitted_tokens).all()
    # The noise is the output position's: the same rows one position later give other tokens.
    later = speclab.verify_chain(p, q, x, seed=SEED, n_draft=n, method=method,
                                 positions=positions + 1, request_ids=request_ids,
                                 sampling=sampling)
    assert (later.emitted_tokens != r.emitted_tokens).any()


def test_coupled_accepts_every_draft_of_the_target_itself():
    """q = p: the draft's Gumbel-max token at each output position is the target's, so every
    draft is accepted and the bonus is the target's token after them."""
    p, _, _, _ = random_batch(16, 3, 9, seed=5)
    rows = [np.ascontiguousarray(p[:, i]) for i in range(4)]
    positions = np.arange(16, dtype=np.int64) * 7
    x = np.stack([speclab.sampling.sample_output_token(
        rows[i], seed=SEED, request=np.arange(16), position=positions + i, sampling="gumbel")
        for i in range(3)], axis=1).astype(np.int32)
    r = speclab.verify_chain(p, np.ascontiguousarray(p[:, :3]), x, seed=SEED, method="coupled",
                             positions=positions)
    assert (r.n_accepted == 3).all()
    bonus = speclab.sampling.sample_output_token(rows[3], seed=SEED, request=np.arange(16),
                                                 position=positions + 3, sampling="gumbel")
    assert (r.emitted_tokens[:, :3] == x).all() and (r.emitted_tokens[:, 3] == bonus).all()


def markov(vocab, rng, concentration):
    rows = rng.dirichlet(np.full(vocab, concentration), vocab)
    return (rows / rows.sum(axis=1, keepdims=True)).astype(np.float32)


def plain_stream(target, start, request, length, sampling):
    """Plain decoding of a Markov target: token t is sample_output_token at output position t."""
    out, prev = [], start
    for t in range(length):
        prev = int(speclab.sampling.sample_output_token(target[prev], seed=SEED, request=request,
                                                        position=t, sampling=sampling))
        out.append(prev)
    return out


def speculative_streams(method, sampling, target, draft, starts, request_ids, length, gamma,
                        advance_positions=True):
    """Speculative decoding of the Markov target, the batch verified step after step through
    speclab.verify_chain. A coupled draft draws x_i by Gumbel-max of its row with the noise of
    x_i's output position; a sampled-match draft with its own noise (numpy)."""
    rng = np.random.default_rng(17)
    batch, vocab = len(starts), target.shape[0]
    streams = [[] for _ in range(batch)]
    while min(len(s) for s in streams) < length:
        positions = np.array([len(s) if advance_positions else 0 for s in streams], np.int64)
        n = rng.integers(0, gamma + 1, batch).astype(np.int32)
        x = np.zeros((batch, gamma), np.int32)
        p = np.zeros((batch, gamma + 1, vocab), np.float32)
        q = np.zeros((batch, gamma, vocab), np.float32)
        for b in range(batch):
            prev = streams[b][-1] if streams[b] else starts[b]
            for i in range(gamma):
                q[b, i], p[b, i] = draft[prev], target[prev]
                if method == "coupled":
                    prev = int(speclab.sampling.sample_output_token(
                        draft[prev], seed=SEED, request=int(request_ids[b]),
                        position=int(positions[b]) + i, sampling="gumbel"))
                else:
                    prev = int(rng.choice(vocab, p=draft[prev].astype(np.float64) /
                                          draft[prev].sum(dtype=np.float64)))
                x[b, i] = prev
            p[b, gamma] = target[prev]  # rows past the first mismatch are never read
        r = speclab.verify_chain(p, q, x, seed=SEED, n_draft=n, method=method,
                                 positions=positions, request_ids=request_ids, sampling=sampling)
        for b in range(batch):
            emitted = r.emitted_tokens[b]
            streams[b].extend(int(t) for t in emitted[emitted >= 0])
    return [s[:length] for s in streams]


@pytest.mark.parametrize("method, sampling", match_methods())
def test_step_after_step_equals_plain_decoding(method, sampling):
    """The headline property through Python, every match verifier of the registry: with one
    seed, the verified stream of each request is plain decoding's, token for token, whatever
    the draft and n_draft. The same loop with positions left at 0 reuses the first positions'
    noise every step and departs from plain decoding, which this test sees."""
    rng = np.random.default_rng(29)
    target = markov(6, rng, 0.7)
    draft = (0.5 * target + 0.5 * markov(6, rng, 0.7)).astype(np.float32)
    draft /= draft.sum(axis=1, keepdims=True, dtype=np.float32)
    starts, request_ids = [0, 3, 5, 1], np.array([0, 7, 8, 2**31], np.uint32)
    length = 30
    plain = [plain_stream(target, s, int(r), length, sampling)
             for s, r in zip(starts, request_ids)]
    streams = speculative_streams(method, sampling, target, draft, starts, request_ids, length, 3)
    assert streams == plain
    stale = speculative_streams(method, sampling, target, draft, starts, request_ids, length, 3,
                                advance_positions=False)
    assert stale != plain


@pytest.mark.parametrize("method, key", [("coupled", "coupled"),
                                         ("sampled-match", "sampled-match")])
def test_acceptance_is_the_exact_closed_form(method, key):
    """p = (1/3, 2/3), q = (2/3, 1/3) at one draft position over 20,000 requests: the accepted
    fraction is coupled's 2/3 or sampled-match's 4/9 (speclab.exact.acceptance), within 5
    standard errors."""
    exact = speclab.exact.acceptance(["1/3", "2/3"], ["2/3", "1/3"])[key]
    batch = 20000
    p = np.tile(np.array([1 / 3, 2 / 3], np.float32), (batch, 2, 1))
    q = np.tile(np.array([2 / 3, 1 / 3], np.float32), (batch, 1, 1))
    positions = np.full(batch, 41, np.int64)
    if method == "coupled":
        x = speclab.sampling.sample_output_token(q[:, 0], seed=SEED, request=np.arange(batch),
                                                 position=positions, sampling="gumbel")
    else:
        x = (np.random.default_rng(1).random(batch) >= 2 / 3).astype(np.int32)
    r = speclab.verify_chain(p, q, x[:, None].astype(np.int32), seed=SEED, method=method,
                             positions=positions)
    rate, e = r.n_accepted.mean(), float(exact)
    assert abs(rate - e) < 5 * np.sqrt(e * (1 - e) / batch), (rate, exact)


def test_exact_acceptances_on_the_test_vector():
    """Hand-derived for q = (2/3, 1/3), p = (1/3, 2/3): V1 accepts Σ min = 2/3; TV = 1/3, so the
    bound is (2/3)/(4/3) = 1/2; coupled: for v = 0, Σ_u max(p_u/p_0, q_u/q_0) = 1 + max(2, 1/2) =
    3, for v = 1 likewise 3, so 1/3 + 1/3 = 2/3; sampled-match Σ p·q = 2/9 + 2/9 = 4/9."""
    a = speclab.exact.acceptance([Fraction(1, 3), Fraction(2, 3)], ["2/3", "1/3"])
    assert a == {"token": Fraction(2, 3), "coupled": Fraction(2, 3),
                 "coupled_bound": Fraction(1, 2), "sampled-match": Fraction(4, 9)}
    assert all(isinstance(v, Fraction) for v in a.values())
    # q = p: everything is accepted; disjoint supports: nothing is.
    same = speclab.exact.acceptance(["1/4", "3/4"], ["1/4", "3/4"])
    assert same["token"] == same["coupled"] == same["coupled_bound"] == 1
    assert same["sampled-match"] == Fraction(5, 8)
    disjoint = speclab.exact.acceptance([1, 0], [0, 1])
    assert set(disjoint.values()) == {0}
    with pytest.raises(ValueError, match="probs_draft"):
        speclab.exact.acceptance(["1/3", "2/3"], ["1/2", "1/3"])
    with pytest.raises(ValueError, match="probs_draft"):
        speclab.exact.acceptance(["1/3", "2/3"], ["1/3", "1/3", "1/3"])


@pytest.mark.parametrize("method, accepted", [("coupled", Fraction(10, 9)),
                                              ("sampled-match", Fraction(52, 81))])
def test_exact_step_reaches_the_match_family(method, accepted):
    """γ = 2 on the test vector: independent noise per position, so E[accepted] = a + a²
    (coupled a = 2/3: 10/9; sampled-match a = 4/9: 52/81), and the first token follows p."""
    step = speclab.exact.step([["1/3", "2/3"]] * 3, [["2/3", "1/3"]] * 2, method=method)
    assert step["expected_accepted"] == accepted
    assert step["first_token_marginal"] == [Fraction(1, 3), Fraction(2, 3)]
    assert not step["lossy"] and sum(step["distribution"].values()) == 1


@pytest.mark.parametrize("change, message", [
    (dict(positions=np.array([0, -1, 0, 0])), r"positions\[1\] \(request 1\) is -1"),
    (dict(positions=np.array([0, 2**32 - 2, 0, 0])), r"positions\[1\]"),
    (dict(positions=np.zeros(3, np.int64)), r"positions has shape \[3\]"),
    (dict(positions=np.zeros((4, 1), np.int64)), r"positions has shape \[4, 1\]"),
    (dict(positions=np.zeros(4, np.float32)), "positions has dtype float32; expected int64"),
    (dict(step=3), "step is 3 with method 'coupled'.*pass positions"),
    (dict(sampling="inverse-cdf"), "sampling is 'inverse-cdf' with method 'coupled'"),
    (dict(method="sampled-match", sampling="gumbel-max"), "sampling is 'gumbel-max'"),
    (dict(method="token", positions=np.zeros(4, np.int64)), "positions given with method 'token'"),
    (dict(method="greedy", positions=None, sampling="gumbel"),
     "sampling given with method 'greedy'"),
    (dict(method="coupled-match"), "method is 'coupled-match'; expected one of .*coupled"),
])
def test_bad_match_input_raises_value_error_naming_it(change, message):
    p, q, x, _ = random_batch(4, 2, 8)
    args = dict(probs_target=p, probs_draft=q, draft_tokens=x, seed=1, method="coupled",
                positions=np.zeros(4, np.int64))
    args.update(change)
    with pytest.raises(ValueError, match=message):
        speclab.verify_chain(**args)


def test_sample_output_token_checks_its_arguments():
    p = np.array([[0.25, 0.75], [1.0, 0.0]], np.float32)
    tokens = speclab.sampling.sample_output_token(p, seed=1, position=[0, 5])
    assert tokens.shape == (2,) and tokens.dtype == np.int32 and tokens[1] == 0
    assert speclab.sampling.sample_output_token(p[0], seed=1).shape == ()
    with pytest.raises(ValueError, match="position"):
        speclab.sampling.sample_output_token(p, seed=1, position=-1)
    with pytest.raises(ValueError, match="position"):
        speclab.sampling.sample_output_token(p, seed=1, position=[0, 1, 2])
    with pytest.raises(ValueError, match="sampling"):
        speclab.sampling.sample_output_token(p, seed=1, sampling="argmax")
    with pytest.raises(ValueError, match="weights row 0"):
        speclab.sampling.sample_output_token(np.array([0.5, 0.6], np.float32), seed=1)


@pytest.mark.parametrize("method, sampling", match_methods())
def test_same_tokens_as_verify_batch(tmp_path, speclab_cli, method, sampling):
    """`speclab verify-batch` with the dataset positions and the attribute sampling gives
    verify_chain's tokens."""
    import subprocess

    import h5py
    p, _, x, n = random_batch(30, 4, 50, seed=8, ragged=True)
    positions = np.random.default_rng(2).integers(0, 2**31, 30)
    src, dst = tmp_path / "in.h5", tmp_path / "out.h5"
    with h5py.File(src, "w") as f:
        f["probs_target"], f["draft_tokens"], f["n_draft"], f["positions"] = p, x, n, positions
        f.attrs["seed"] = np.uint64(SEED)
        f.attrs["method"] = method
        f.attrs["sampling"] = sampling
    subprocess.run([speclab_cli, "verify-batch", "--in", src, "--out", dst], check=True,
                   capture_output=True)
    r = speclab.verify_chain(p, None, x, seed=SEED, n_draft=n, method=method,
                             positions=positions, sampling=sampling)
    with h5py.File(dst, "r") as f:
        assert (f["emitted_tokens"][()] == r.emitted_tokens).all()
        assert (f["n_accepted"][()] == r.n_accepted).all()
        assert f.attrs["method"] == method and f.attrs["sampling"] == sampling


def test_the_noise_position_mutant_is_caught_through_python(monkeypatch):
    """Mutant match-draft-position-noise (core/base/mutants.hpp) addresses the verifier's noise by
    the draft's index within the step instead of its output position: the stream decoded step
    after step through the package then departs from plain decoding. Runs on the test-only
    extension over the mutant library (SPECLAB_MUTANT_TESTS=ON, as CI builds)."""
    mutants_ext = pytest.importorskip(
        "_speclab_mutants", reason="the test-only extension _speclab_mutants is not built "
        "(configure with -DSPECLAB_MUTANT_TESTS=ON)")
    import speclab.verify
    monkeypatch.setattr(speclab.verify, "_speclab", mutants_ext)
    rng = np.random.default_rng(29)
    target = markov(6, rng, 0.7)
    draft = (0.5 * target + 0.5 * markov(6, rng, 0.7)).astype(np.float32)
    draft /= draft.sum(axis=1, keepdims=True, dtype=np.float32)
    starts, request_ids = [0, 3, 5, 1], np.array([0, 7, 8, 2**31], np.uint32)
    plain = [plain_stream(target, s, int(r), 30, "gumbel") for s, r in zip(starts, request_ids)]
    try:
        mutants_ext.set_mutant("none")
        assert speculative_streams("coupled", "gumbel", target, draft, starts, request_ids, 30,
                                   3) == plain
        mutants_ext.set_mutant("match-draft-position-noise")
        for method, sampling in match_methods():
            plain_rule = [plain_stream(target, s, int(r), 30, sampling)
                          for s, r in zip(starts, request_ids)]
            assert speculative_streams(method, sampling, target, draft, starts, request_ids, 30,
                                       3) != plain_rule, method
    finally:
        mutants_ext.set_mutant("none")
