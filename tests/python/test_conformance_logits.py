"""The logits interface (speclab.conformance._logits): its pipeline equals speclab's
(lowest-index ties) and differs from keep-all exactly where the instances put ties at a cut-off;
the instances exercise every parameter set; Monte Carlo of the planted defects of
samplers_logits.py follows the V1 law of its family's rows and not the lossless one; and through
the runner the correct sampler and the control conform, each defect fails and is diagnosed as
its family, and a declared keep-all rule turns the verdicts around."""

import numpy as np
import pytest

import samplers_logits as sl
import speclab.conformance as conformance
from speclab import stats
from speclab.conformance import _core, enumerate_law
from speclab.conformance import _logits as L
from speclab.sampling import probs_from_logits

CASES = {c.name: c for c in L.logits_cases()}
FAMILIES = {name: rows for name, _, rows in L.defects()}


def _random_params(rng):
    t, k, p, m = (rng.choice([0, 0.3, 0.7, 1, 1.5, 3]), rng.choice([0, 1, 2, 3, 5, 20]),
                  rng.choice([1.0, rng.uniform(0.05, 1)]), rng.choice([0.0, rng.uniform(0, 1)]))
    return L.Params(float(np.float32(t)), int(k), float(np.float32(p)), float(np.float32(m)))


def test_lowest_index_is_speclabs_pipeline():
    # Quantised logits tie often, -inf masks some tokens: boundaries with ties everywhere.
    rng = np.random.default_rng(1)
    for _ in range(300):
        v = int(rng.integers(1, 13))
        x = (np.round(rng.normal(size=(16, v)) * rng.choice([2, 8])) / 2).astype(np.float32)
        x[rng.random(x.shape) < 0.15] = -np.inf
        x[np.arange(16), rng.integers(0, v, 16)] = 1.0
        params = _random_params(rng)
        ours = L.process(x, *params)
        theirs = probs_from_logits(x, **params._asdict())
        assert ((ours > 0) == (theirs > 0)).all(), params
        np.testing.assert_allclose(ours, theirs, atol=2e-7, err_msg=str(params))
    # Per-row parameters equal the same parameters given one at a time; V = 64 continuous rows.
    x = rng.normal(size=(50, 3, 64)).astype(np.float32) * 3
    params = [_random_params(rng) for _ in range(50)]
    per_row = L.process(x, *(np.array(col)[:, None] for col in zip(*params)))
    for i, prm in enumerate(params):
        np.testing.assert_allclose(per_row[i], probs_from_logits(x[i], **prm._asdict()),
                                   atol=2e-7)


def test_keep_all_equals_lowest_index_without_ties():
    rng = np.random.default_rng(2)
    for _ in range(100):
        x = rng.normal(size=(8, 7)).astype(np.float32) * 2
        params = _random_params(rng)
        np.testing.assert_array_equal(L.process(x, *params, ties="keep-all"),
                                      L.process(x, *params))


def _tie_dropped(row, params):
    """Whether lowest-index drops a token tied with one it keeps (a tie at a cut-off)."""
    if params.temperature == 0:
        return (row == row.max()).sum() > 1
    kept = L.process(row, *params)
    t = L.process(row, params.temperature)
    return ((kept == 0) & (t > 0) & (t == t[kept > 0].min())).any()


def test_every_case_agrees_with_speclab_and_tie_cases_tie_at_their_cut_off():
    assert set(L.PARAMETER_SETS) == {"temperature-0.7", "temperature-1.5", "top-k", "top-p",
                                     "min-p", "all", "greedy"}
    assert {c.ties_at for c in CASES.values()} == {"", "top-k", "top-p", "min-p", "greedy"}
    for c in CASES.values():
        assert 4 <= c.vocab <= 8 and 2 <= c.gamma <= 3, c.name
        assert c.logits_target.dtype == c.logits_draft.dtype == np.float32
        differ_any = False
        for cls in range(c.classes):
            prm = c.params(cls)
            p, q = L.rows(c, cls)
            pk, qk = L.rows(c, cls, "keep-all")
            for logits, ours in ((c.logits_target[cls], p), (c.logits_draft[cls], q)):
                theirs = probs_from_logits(logits, **prm._asdict())
                assert ((ours > 0) == (theirs > 0)).all(), (c.name, cls)
                np.testing.assert_allclose(ours, theirs, atol=2e-7)
            used = c.n_draft[cls] + 1
            differs = ~np.isclose(p, pk).all(axis=1)
            tied = np.array([_tie_dropped(r, prm) for r in c.logits_target[cls]])
            # The rules differ exactly on rows with a tie at a cut-off, never elsewhere.
            np.testing.assert_array_equal(differs, tied, err_msg=f"{c.name} class {cls}")
            if c.ties_at in ("top-k", "top-p", "greedy"):
                assert tied[:used].any(), (c.name, cls)
            elif c.ties_at == "min-p":
                # Tokens exactly at min_p · max, kept by both rules (and by speclab's pipeline).
                t = L.process(c.logits_target[cls], prm.temperature)
                at_cut = t == np.float64(prm.min_p) * t.max(axis=1, keepdims=True)
                assert (at_cut & (p > 0) & (pk > 0)).sum(axis=1)[:used].min() >= 2, (c.name, cls)
            else:
                assert not tied.any() and np.array_equal(q, qk), (c.name, cls)
            # Draft rows filtered differently: some used position keeps another set.
            differ_any |= ((p[:c.n_draft[cls]] > 0) != (q[:c.n_draft[cls]] > 0)).any()
        assert differ_any or c.name == "temperature", c.name


def test_effective_rows_reduce_to_the_rows_when_the_draft_law_is_theirs():
    c = CASES["all"]
    p, q = L.rows(c, 0)
    P, Q = L.effective_rows(p, q, q, c.gamma)
    np.testing.assert_array_equal(P, p)
    np.testing.assert_array_equal(Q, q)


# Monte Carlo of the planted samplers ---------------------------------------------------------


def _counts(sampler, c, n, seed):
    """{(class, emitted tuple): count} from n requests (class b mod C), drafts drawn from the
    declared processed draft rows."""
    rng = np.random.default_rng(seed)
    cls = np.arange(n) % c.classes
    x = rng.integers(0, c.vocab, (n, c.gamma))
    for k in range(c.classes):
        q = L.rows(c, k)[1]
        sel = np.nonzero(cls == k)[0]
        for i in range(c.n_draft[k]):
            cdf = np.cumsum(q[i])
            x[sel, i] = np.minimum(np.searchsorted(cdf, rng.random(len(sel)) * cdf[-1], "right"),
                                   c.vocab - 1)
    emitted = sampler(c.logits_target[cls], c.logits_draft[cls], x.astype(np.int32),
                      c.n_draft[cls], int(rng.integers(0, 2**63)), c.temperature[cls],
                      c.top_k[cls], c.top_p[cls], c.min_p[cls])
    out = {}
    for k, row in zip(cls, emitted.tolist()):
        key = (int(k), tuple(t for t in row if t >= 0))
        out[key] = out.get(key, 0) + 1
    return out


def _p_value(counts, c, rows_of):
    """χ² p-value of the counts against the V1 law of rows_of(case, cls) (class mixture)."""
    index, probs = {}, []
    for k in range(c.classes):
        seqs, pr = enumerate_law(*rows_of(c, k), int(c.n_draft[k]), 0.0)
        for s, v in zip(seqs, pr):
            index[(k, s)] = len(probs)
            probs.append(v / c.classes)
    observed = np.zeros(len(probs) + 1, np.int64)
    for key, f in counts.items():
        observed[index.get(key, len(probs))] += f  # the last bin: impossible under this law
    return stats.chi_square_test(observed, np.append(probs, 0.0))["p_value"]


def _declared(c, k):
    return L.rows(c, k)


# The instances each planted defect fails (it conforms on the others: nothing to see there).
DEFECTS = {
    "tie over-acceptance": (sl.tie_over_acceptance,
                            ["tie-top-k", "tie-top-p", "tie-min-p", "tie-greedy"]),
    "min-p dropped on the verify path": (sl.min_p_dropped, ["min-p", "all", "mixed",
                                                            "tie-min-p"]),
    "top-k/top-p dropped": (sl.top_k_top_p_dropped, ["top-k", "top-p", "all", "mixed",
                                                     "tie-top-k", "tie-top-p", "tie-min-p"]),
    "temperature dropped": (sl.temperature_dropped, ["temperature", "all", "greedy", "mixed",
                                                     "tie-top-k", "tie-greedy"]),
}
N = 20000


@pytest.mark.parametrize("family", sorted(DEFECTS))
def test_each_defect_follows_its_familys_law_and_not_the_lossless_one(family):
    sampler, caught = DEFECTS[family]
    for i, c in enumerate(CASES.values()):
        counts = _counts(sampler, c, N, 100 + i)
        assert _p_value(counts, c, FAMILIES[family]) > 1e-4, (family, c.name)
        lossless = _p_value(counts, c, _declared)
        assert lossless < 1e-6 if c.name in caught else lossless > 1e-4, (family, c.name)


# Through the runner ----------------------------------------------------------------------------


def _check(sampler, **options):
    return conformance.check(sampler, interface="logits", **options)


@pytest.mark.parametrize("sampler", [sl.correct, sl.control], ids=["correct", "control"])
def test_correct_and_control_conform(sampler):
    report = _check(sampler)
    assert report.passed, report.text()
    assert [r.name for r in report.instances] == list(CASES)


def _same_law(c, family, other):
    """Whether two families' rows give the same V1 law in every class of c."""
    for k in range(c.classes):
        a, b = (dict(zip(*enumerate_law(*FAMILIES[f](c, k), int(c.n_draft[k]), 0.0)))
                for f in (family, other))
        if a.keys() != b.keys() or not np.allclose([a[s] for s in a], [b[s] for s in a]):
            return False
    return True


def _diagnosable_as(c, family):
    """The family and those indistinguishable from it on c (tie-min-p's class 1 keeps the same
    tokens whether top-p is dropped or keeps ties)."""
    return {f for f in FAMILIES if f == family or _same_law(c, family, f)}


@pytest.mark.parametrize("family", sorted(DEFECTS))
def test_each_defect_fails_and_is_diagnosed_as_its_family(family):
    sampler, caught = DEFECTS[family]
    report = _check(sampler, instances=caught)
    assert not report.passed
    for r in report.instances:
        assert r.verdict in ("does not conform", "broken") and not r.structural, r.line()
        # A filtered-out token is impossible under the declared pipeline (broken), and is
        # diagnosed all the same.
        assert r.diagnosis["name"] in _diagnosable_as(CASES[r.name], family), r.line()
    # The diagnosis itself, on counts gathered through the interface as the runner does.
    interface = L.LogitsInterface()
    runner = _core.callable_runner(sampler)
    for i, case in enumerate(c for c in interface.cases() if c.name in caught):
        classes = np.arange(N) % case.classes
        obs = interface.call(runner, case, classes, np.random.default_rng(i))
        assert not obs.problems, obs.problems
        counts = [{} for _ in range(case.classes)]
        for k, outcome in zip(classes.tolist(), obs.outcomes):
            counts[k][outcome] = counts[k].get(outcome, 0) + 1
        found = _core.diagnose(interface, case, counts,
                               lambda k, outs: interface.outcome_probabilities(case, k, outs))
        assert found and found["name"] in _diagnosable_as(CASES[case.name], family), (
            case.name, found)


def test_declared_keep_all_passes_keep_all_and_fails_lowest_index():
    ties = [c.name for c in CASES.values() if c.ties_at in ("top-k", "top-p", "greedy")]
    assert _check(sl.tie_over_acceptance, ties="keep-all", instances=ties).passed
    report = _check(sl.correct, ties="keep-all", instances=ties)
    for r in report.instances:
        assert r.verdict == "does not conform", r.line()
        assert r.diagnosis["name"] == "tie under-acceptance", r.line()
