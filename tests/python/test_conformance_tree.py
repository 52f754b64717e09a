"""speclab.conformance's tree interface: its exact laws (the enumeration agrees with core/exact's
exact.step on rows by depth, and its lossless laws have the target rows as conditionals), the
planted defect "wrong node's row" of tests/python/trees.py (Monte Carlo matches its law, not the
lossless one), correct samplers pass the per-prefix test, structural checks; and end to end
through check(interface="tree")."""

from fractions import Fraction

import numpy as np
import pytest

import speclab
import speclab.conformance as conformance
import trees
from speclab import stats
from speclab.conformance._core import SamplerError, callable_runner
from speclab.conformance._tree import (METHODS, WRONG_ROWS, TreeInterface, enumerate_law,
                                       exact_step_law, row_map)

DEFECT = WRONG_ROWS["depth"]


def _cases(method):
    return {case.name: case for case in TreeInterface(method).cases()}


def _conditionals(law):
    """{prefix: float64 [V] next-token mass} of an outcome law (dict)."""
    out = {}
    for outcome, p in law.items():
        for k in range(len(outcome)):
            out.setdefault(outcome[:k], {}).setdefault(outcome[k], 0.0)
            out[outcome[:k]][outcome[k]] += p
    return out


def _exact_row(row):
    row = [Fraction(float(x)) for x in row]
    return [x / sum(row) for x in row]


def _tv(a, b):
    return 0.5 * sum(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in set(a) | set(b))


def _counts(interface, case, sampler, n, seed=1):
    """{outcome: count} per class from n requests in calls of at most 40000."""
    rng = np.random.default_rng(seed)
    run = callable_runner(sampler)
    counts = [dict() for _ in range(case.classes)]
    done = 0
    while done < n:
        b = min(40000, n - done) // case.classes * case.classes
        classes = np.arange(b) % case.classes
        obs = interface.call(run, case, classes, rng)
        assert not obs.problems, obs.problems
        for k, o in zip(classes.tolist(), obs.outcomes):
            counts[k][o] = counts[k].get(o, 0) + 1
        done += b
    return counts


def _law_p(law, counts):
    """χ² p-value of counts against a whole law (dict), the remainder in one bin."""
    keys = list(law)
    observed = [counts.get(k, 0) for k in keys] + [sum(f for k, f in counts.items()
                                                      if k not in law)]
    probs = np.array([law[k] for k in keys] + [max(0.0, 1 - sum(law.values()))])
    return stats.chi_square_test(observed, probs / probs.sum())["p_value"]


def _smallest_prefix_p(interface, case, counts):
    """The smallest p-value of the per-prefix χ² of the next token against target_row, over the
    prefixes reached ≥ 200 times, times their number (Bonferroni)."""
    ps = []
    for cls, class_counts in enumerate(counts):
        for prefix, nxt in _conditionals(class_counts).items():
            row = interface.target_row(case, cls, prefix)
            observed = np.zeros(len(row))
            for t, f in nxt.items():
                observed[t] = f
            assert (row[observed > 0] > 0).all(), (case.name, prefix)
            if observed.sum() >= 200:
                ps.append(stats.chi_square_test(observed, row)["p_value"])
    return min(ps) * len(ps)


@pytest.mark.parametrize("method", METHODS)
def test_enumeration_equals_exact_step_on_rows_by_depth(method):
    interface = TreeInterface(method)
    for name in ("binary-2-by-depth", "ternary-1-by-depth"):
        case = _cases(method)[name]
        exact = exact_step_law(case.data, method)
        mine = enumerate_law(case.data, 0, method)
        assert sum(exact.values()) == pytest.approx(1, abs=1e-12)
        assert sum(mine.values()) == pytest.approx(1, abs=1e-12)
        assert _tv(exact, mine) < 1e-12, name
        # The optimum is exact.step's per-depth conditional acceptance.
        first = [0, 1, 1 + case.data.vocab][:case.data.depth + 1]  # the all-zeros paths
        step = speclab.exact.step([_exact_row(case.data.probs_target[m]) for m in first],
                                  [_exact_row(case.data.probs_draft[m]) for m in first[:-1]],
                                  method=method, branches=case.data.branches)
        np.testing.assert_allclose(interface.optimum(case, 0),
                                   [float(a) for a in step["position_acceptance_conditional"]],
                                   rtol=1e-9)


@pytest.mark.parametrize("method", METHODS)
def test_lossless_laws_have_the_target_rows_as_conditionals(method):
    """core/exact's conditionals_hold on rows by token path: after every prefix the step can
    emit, the next token's law is the target row of that path, for every class."""
    interface = TreeInterface(method)
    for case in interface.cases():
        for cls in range(case.classes):
            law = interface.law(case, cls)
            assert sum(law.values()) == pytest.approx(1, abs=1e-12)
            for prefix, nxt in _conditionals(law).items():
                mass = np.zeros(case.data.vocab)
                mass[list(nxt)] = list(nxt.values())
                np.testing.assert_allclose(mass / mass.sum(),
                                           interface.target_row(case, cls, prefix), atol=1e-12,
                                           err_msg=f"{case.name} class {cls} after {prefix}")


def test_defect_laws_differ_from_lossless_only_where_rows_follow_the_path():
    """The wrong-row laws are laws; with rows by path they are measurably lossy, with rows by
    depth the depth-indexed defect is invisible: why the instances key rows by the token path."""
    for method in (None,) + METHODS:
        interface = TreeInterface(method)
        for case in interface.cases():
            for cls in range(case.classes):
                lossless = interface.law(case, cls)
                defects = {d.name: d for d in interface.defects(case, cls)}
                assert set(defects) == set(WRONG_ROWS.values())
                for rows, name in WRONG_ROWS.items():
                    law = interface.law(case, cls, rows)
                    assert sum(law.values()) == pytest.approx(1, abs=1e-12)
                    outcomes = list(law)
                    np.testing.assert_allclose(defects[name].law(outcomes),
                                               [law[o] for o in outcomes])
                shifted = _tv(lossless, interface.law(case, cls, "depth"))
                if case.data.by_depth:
                    assert shifted < 1e-12
                elif (row_map(case.data.parents[cls], int(case.data.n_nodes[cls]), "depth")
                      != np.arange(case.data.n_nodes[cls] + 1)).any():  # not a chain
                    assert shifted > 0.015, (method, case.name, cls)


def test_planted_defect_matches_its_law_and_not_the_lossless_one():
    interface = TreeInterface()
    case = _cases(None)["binary-2"]
    counts = _counts(interface, case, trees.wrong_node_row, 40000)[0]
    assert _law_p(interface.law(case, 0, "depth"), counts) > 1e-4
    assert _law_p(interface.law(case, 0), counts) < 1e-30
    assert _smallest_prefix_p(interface, case, [counts]) < 1e-30


@pytest.mark.parametrize("method, sampler", [
    (None, trees.speclab_tree("tree-iid")), (None, trees.correct_iid),
    ("tree-swor", trees.correct_swor), ("traversal", trees.speclab_tree("traversal"))])
def test_correct_samplers_pass_the_per_prefix_test_and_their_law(method, sampler):
    interface = TreeInterface(method)
    for case in interface.cases():
        if case.name.endswith("by-depth"):
            continue
        counts = _counts(interface, case, sampler, 40000)
        assert _smallest_prefix_p(interface, case, counts) > 1e-4, case.name
        for cls in range(case.classes):
            assert _law_p(interface.law(case, cls), counts[cls]) > 1e-5, (case.name, cls)


def test_structure_and_interface_misuse():
    interface = TreeInterface()
    cases = _cases(None)
    run = callable_runner
    speclab_iid = trees.speclab_tree("tree-iid")
    rng = np.random.default_rng(0)

    def off_path(p, q, parents, tokens, n_nodes, seed):  # a token no child of the root holds
        out = np.full(parents.shape, -1)
        out[:, 0] = (tokens[:, 1] + 1) % p.shape[2]
        out[:, 1] = 0
        return out

    obs = interface.call(run(off_path), cases["ternary-1"], np.zeros(64, int), rng)
    assert any("not a root-to-node path" in m for m in obs.problems), obs.problems
    # -1 before a token.
    obs = interface.call(run(lambda *a: speclab_iid(*a)[:, ::-1]), cases["binary-2"],
                         np.zeros(64, int), rng)
    assert any("padding is not a suffix" in m for m in obs.problems), obs.problems
    with pytest.raises(SamplerError, match="shape"):
        interface.call(run(lambda *a: speclab_iid(*a)[:, :2]), cases["binary-2"],
                       np.zeros(8, int), rng)
    with pytest.raises(SamplerError, match="dtype"):
        interface.call(run(lambda *a: speclab_iid(*a).astype(float)), cases["binary-2"],
                       np.zeros(8, int), rng)
    # [B, D+1] is accepted as well as [B, N+1].
    case = cases["ragged"]
    obs = interface.call(run(lambda *a: speclab_iid(*a)[:, :case.data.depth + 1]), case,
                         np.arange(400) % 4, rng)
    assert not obs.problems and len(obs.outcomes) == 400
    assert (obs.drafted >= obs.accepted).all()
    with pytest.raises(ValueError, match="method"):
        TreeInterface("kseq")


# End to end through check() (the runner). ------------------------------------------------------


def _check(sampler, **kwargs):
    return conformance.check(sampler, interface="tree", **kwargs)


@pytest.mark.parametrize("method, sampler", [
    (None, trees.correct_iid), (None, trees.speclab_tree("tree-iid")),
    ("tree-iid", trees.speclab_tree("tree-iid")), ("tree-swor", trees.speclab_tree("tree-swor")),
    ("traversal", trees.speclab_tree("traversal"))])
def test_check_passes_correct_samplers(method, sampler):
    report = _check(sampler, method=method)
    assert report.passed, report.text()
    if method:
        assert not report.below_optimum, report.text()


def test_check_fails_and_diagnoses_the_planted_defect():
    report = _check(trees.wrong_node_row, alpha=1e-6)
    assert not report.passed, report.text()
    for r in report.instances:
        assert r.verdict == "does not conform", report.text()
        assert r.diagnosis and r.diagnosis["name"] == DEFECT, report.text()
        assert "15098" in r.diagnosis["reference"]


def test_check_fails_a_verifier_of_the_wrong_drafting():
    """tree-iid's verifier on trees drawn without replacement is lossy: the declared tree-swor
    instances catch it."""
    report = _check(trees.speclab_tree("tree-iid"), method="tree-swor")
    assert not report.passed, report.text()
