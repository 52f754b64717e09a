"""speclab.conformance's engine interface: the Markov models, plain decoding's exact law, the
exact laws of correct and defective speculative loops (each against a Monte Carlo run of the
loop of tests/python/engines.py), the structural checks of call(), and the Hugging Face
adapter where transformers is installed."""

import os
import subprocess
import sys

import numpy as np
import pytest

import engines
from speclab import stats
from speclab.conformance import _core
from speclab.conformance import _engine as E
from speclab.sampling import probs_from_logits

INTERFACE = E.EngineInterface()
CASES = {c.name: c for c in INTERFACE.cases()}


def _laws_equal(a, b, tol=1e-12):
    la, lb = dict(zip(*a)), dict(zip(*b))
    return max(abs(la.get(k, 0) - lb.get(k, 0)) for k in set(la) | set(lb)) <= tol


def _tv(a, b):
    la, lb = dict(zip(*a)), dict(zip(*b))
    return 0.5 * sum(abs(la.get(k, 0) - lb.get(k, 0)) for k in set(la) | set(lb))


def _sample(loop, case, n, seed):
    """{outcome: count} of n generations of loop through EngineInterface.call."""
    obs = INTERFACE.call(_core.callable_runner(loop), case, np.zeros(n, np.int64),
                         np.random.default_rng(seed))
    assert not obs.problems, obs.problems
    counts = {}
    for o in obs.outcomes:
        counts[o] = counts.get(o, 0) + 1
    return counts


def _p_value(counts, law):
    """χ² p-value of counts against a law (seqs, probs), the unlisted outcomes in a remainder
    bin (p = 0 when an outcome of probability 0 occurred)."""
    seqs, probs = law
    index = {s: i for i, s in enumerate(seqs)}
    observed = np.zeros(len(seqs) + 1, np.int64)
    for o, f in counts.items():
        observed[index.get(o, len(seqs))] += f
    probs = np.append(probs, max(0.0, 1 - probs.sum()))
    return stats.chi_square_test(observed, probs / probs.sum())["p_value"]


def test_markov_model_logits_agree_with_logits_all_and_pad_with_start():
    m = E.MarkovModel.random(5, order=2, seed=1)
    ids = [3, 0, 4, 4, 1]
    every = m.logits_all(ids)
    assert every.shape == (5, 5) and every.dtype == np.float32
    np.testing.assert_array_equal(every, m.logits([ids[:t + 1] for t in range(5)]))
    np.testing.assert_array_equal(m.logits_all(np.array([ids, ids[::-1]]))[1],
                                  m.logits_all(ids[::-1]))
    # One token of context: the start symbol (id V) fills the other slot.
    assert m.context([3]) == 5 * 6 + 3 and m.context([]) == 5 * 6 + 5
    np.testing.assert_array_equal(m.logits([[2, 3]]), m.logits([[0, 1, 2, 3]]))
    with pytest.raises(ValueError, match="token id 5"):
        m.logits([[1, 5]])
    with pytest.raises(ValueError):
        m.table[0, 0] = 1.0  # read-only: loops under test share it


def test_processed_rows_keep_what_speclab_keeps_in_float64():
    for case in CASES.values():
        d = case.data
        rows = E.processed_table(d.target, d.params)
        t, k, p, mp = E.sampling_params(d.params)
        ref = probs_from_logits(d.target.table, temperature=t, top_k=k, top_p=p, min_p=mp)
        np.testing.assert_array_equal(rows > 0, ref > 0, err_msg=case.name)
        np.testing.assert_allclose(rows, ref, atol=2e-6, err_msg=case.name)
        assert rows.dtype == np.float64
        np.testing.assert_allclose(rows.sum(axis=1), 1, atol=1e-12)


def test_cases_have_no_near_ties_and_forbid_refuses_one():
    for case in CASES.values():
        for model in (case.data.target, case.data.draft):
            E.processed_table(model, case.data.params, ties="forbid")

    def model(row):
        return E.MarkovModel(np.tile(np.asarray(row, np.float32), ((len(row) + 1) ** 2, 1)), 2)

    tied = model([1.0, 2.0, 2.0, 0.5])
    assert E.processed_table(tied, {"temperature": 0.0})[0].tolist() == [0, 1, 0, 0]  # lowest
    for row, params in [([1.0, 2.0, 2.0, 0.5], {"temperature": 0.0}),
                        ([1.0, 2.0, 2.0, 0.5], {"top_k": 1}),
                        ([1.0, 2.0, 3.0, 1.0], {"top_k": 3}),
                        (np.log([0.5, 0.3, 0.2]), {"top_p": 0.8}),
                        (np.log([0.5, 0.25, 0.25]), {"min_p": 0.5})]:
        with pytest.raises(ValueError, match="near-tie"):
            E.processed_table(model(row), params, ties="forbid")


def test_exact_law_sums_to_one_and_is_the_product_of_the_rows():
    for case in CASES.values():
        d = case.data
        seqs, probs = INTERFACE.reference_law(case, 0, 0.0)
        assert probs.sum() == pytest.approx(1, abs=1e-12), case.name
        assert all(len(s) == d.length for s in seqs) and len(set(seqs)) == len(seqs)
        np.testing.assert_allclose(INTERFACE.outcome_probabilities(case, 0, seqs), probs,
                                   rtol=1e-12)
        for s, p in zip(seqs[:5], probs):
            prod = np.prod([INTERFACE.target_row(case, 0, s[:i])[s[i]] for i in range(len(s))])
            assert prod == pytest.approx(p, rel=1e-12)
        cut = INTERFACE.reference_law(case, 0, 0.01)
        assert set(cut[0]) == {s for s, p in zip(seqs, probs) if p >= 0.01}
    assert len(INTERFACE.reference_law(CASES["greedy"], 0, 0.0)[0]) == 1


def test_exact_law_matches_a_monte_carlo_of_plain_decoding():
    case = CASES["combined"]
    law = INTERFACE.reference_law(case, 0, 0.0)
    assert _p_value(_sample(engines.plain_loop, case, 4000, 1), law) > 1e-4


def test_correct_speculative_law_is_plain_decoding_law():
    for case in CASES.values():
        d = case.data
        plain = E.exact_law(d.target, d.prompts[0], d.length, d.params)
        spec = E.speculative_law(d.target, d.draft, d.prompts[0], d.length, d.params)
        assert _laws_equal(plain, spec), case.name


@pytest.mark.parametrize("loop", ["correct_loop", "reordered_randomness_loop"])
def test_correct_loops_give_the_exact_law(loop):
    # The negative control spends its random numbers otherwise (Gumbel-max, uniforms drawn at
    # once and used in reverse) and must pass all the same.
    for name in ("top-p", "combined"):
        case = CASES[name]
        law = INTERFACE.reference_law(case, 0, 0.0)
        assert _p_value(_sample(getattr(engines, loop), case, 3000, 2), law) > 1e-4, name


@pytest.mark.parametrize("defect,loop,name", [
    ("raw-q", "raw_q_loop", "combined"), ("raw-q", "raw_q_loop", "temperature"),
    ("argmax-drafts", "argmax_drafts_loop", "top-p"),
    ("argmax-drafts", "argmax_drafts_loop", "plain")])
def test_defect_law_matches_its_planted_loop_and_differs_from_plain(defect, loop, name):
    case = CASES[name]
    d = case.data
    plain = INTERFACE.reference_law(case, 0, 0.0)
    law = E.speculative_law(d.target, d.draft, d.prompts[0], d.length, d.params, defect)
    assert law[1].sum() == pytest.approx(1, abs=1e-12)
    assert _tv(law, plain) > 0.09
    counts = _sample(getattr(engines, loop), case, 3000, 3)
    assert _p_value(counts, law) > 1e-4
    assert _p_value(counts, plain) < 1e-6
    # defects() hands the same law to the runner's diagnosis.
    (found,) = [f for f in INTERFACE.defects(case, 0) if f.name == E.DEFECTS[defect][0]]
    np.testing.assert_allclose(found.law(law[0]), law[1])
    assert found.reference == E.DEFECTS[defect][1]


def test_defects_are_listed_only_where_they_change_the_law():
    names = {n: {f.reference for f in INTERFACE.defects(c, 0)} for n, c in CASES.items()}
    raw, argmax = E.DEFECTS["raw-q"][1], E.DEFECTS["argmax-drafts"][1]
    assert names["plain"] == {argmax}  # T = 1, no filter: the raw softmax is q
    assert names["greedy"] == set()  # one-hot rows: every loop is greedy matching
    for n in ("temperature", "top-k", "top-p", "min-p", "combined"):
        assert names[n] == {raw, argmax}, n
    assert raw == "HF transformers #47932" and argmax == "apple/ml-recurrent-drafter #6"


def _fixed(tokens):
    return lambda target, draft, prompt, max_new_tokens, seed, params: tokens


def test_call_reports_structural_problems_and_interface_misuse():
    case = CASES["top-k"]
    d = case.data
    row = INTERFACE.target_row(case, 0, ())
    good = int(np.argmax(row))
    impossible = int(np.flatnonzero(row == 0)[0])  # top-k 3 of 5 leaves two tokens out
    rng = np.random.default_rng(0)
    for tokens, message in [([good], "1 tokens; expected at least L = 3"),
                            ([good] * (d.max_new_tokens + 1), "at most max_new_tokens"),
                            ([good, 7, good], "outside [0, V = 5)"),
                            ([impossible, good, good], "target probability 0"),
                            ([], "0 tokens")]:
        obs = INTERFACE.call(_core.callable_runner(_fixed(tokens)), case,
                             np.zeros(2, np.int64), rng)
        assert len(obs.problems) == 1 and message in obs.problems[0], (tokens, obs.problems)
    for out in (None, np.zeros(4, np.float32), np.zeros((2, 4), np.int64)):
        with pytest.raises(_core.SamplerError, match="request 0"):
            INTERFACE.call(_core.callable_runner(_fixed(out)), case, np.zeros(1, np.int64),
                           rng)


def test_call_accepts_lists_torch_tensors_and_a_batch_of_one():
    torch = pytest.importorskip("torch")
    case = CASES["greedy"]
    ((path,),) = [INTERFACE.reference_law(case, 0, 0.0)[0]]
    rng = np.random.default_rng(0)
    for out in (list(path), torch.tensor([list(path) + [0]])[:, :3], np.array([path])):
        obs = INTERFACE.call(_core.callable_runner(_fixed(out)), case, np.zeros(2, np.int64),
                             rng)
        assert obs.outcomes == [path, path] and not obs.problems


def test_call_hands_each_request_its_own_seed_and_fresh_inputs():
    seen = []

    def loop(target, draft, prompt, max_new_tokens, seed, params):
        seen.append((seed, params["temperature"], tuple(prompt)))
        tokens = engines.correct_loop(target, draft, prompt, max_new_tokens, seed, params)
        params["temperature"] = 5.0  # must not reach the next request
        prompt[:] = 0
        return tokens

    case = CASES["top-p"]
    obs = INTERFACE.call(_core.callable_runner(loop), case, np.zeros(3, np.int64),
                         np.random.default_rng(0))
    assert not obs.problems and len(obs.outcomes) == 3
    assert len({s for s, _, _ in seen}) == 3
    assert {(t, p) for _, t, p in seen} == {(1.0, case.data.prompts[0])}
    assert case.data.params["temperature"] == 1.0 and case.data.prompts[0] != (0, 0, 0)


def test_hf_module_imports_neither_transformers_nor_torch():
    code = ("import sys, speclab.conformance.hf; "
            "assert not {'transformers', 'torch'} & set(sys.modules), 'imported'")
    subprocess.run([sys.executable, "-c", code], check=True, env=dict(
        os.environ, PYTHONPATH=os.pathsep.join(sys.path)))


def test_hugging_face_adapter_runs_assisted_generation():
    pytest.importorskip("transformers")
    import torch
    from speclab.conformance import hf

    case = CASES["combined"]
    d = case.data
    ids = np.array([[1, 2, 3, 4, 0, 5]])
    lm = hf.causal_lm(d.target)
    np.testing.assert_array_equal(lm(torch.as_tensor(ids)).logits.detach().numpy(),
                                  d.target.logits_all(ids))
    sampler = hf.assisted_generation_sampler()
    for case in CASES.values():
        obs = INTERFACE.call(_core.callable_runner(sampler), case, np.zeros(5, np.int64),
                             np.random.default_rng(0))
        assert not obs.problems, obs.problems
    greedy = CASES["greedy"]
    obs = INTERFACE.call(_core.callable_runner(sampler), greedy, np.zeros(3, np.int64),
                         np.random.default_rng(0))
    assert set(obs.outcomes) == set(INTERFACE.reference_law(greedy, 0, 0.0)[0])
