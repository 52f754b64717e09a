"""speclab.conformance's chain interfaces (probs, uniforms, seeds, draft): the planted-defect
catalog of tests/python/samplers.py is caught at α = 10⁻⁶ and diagnosed as its family, the
negative controls conform (sampled-match flagged below the optimum), the exact laws of the
defect families match Monte Carlo runs of the planted samplers, and the JSON, JUnit and command
line carry the same verdicts.

A failing instance stops at the first of the run's looks that fails, so the catalog is fast; the
controls run every instance to its full N, so they use a few instances here (docs/python.md gives
the full default runs' verdicts and times)."""

import json

import numpy as np
import pytest

import samplers
from test_conformance import _cli
import speclab.conformance as conformance
from speclab.conformance import _chain

# (interface, planted sampler, instances that show it, the diagnosis they must name, the
# verdict). The default run (all instances) catches each too, in docs/python.md's table; here
# the instances that show it keep the suite short.
CATALOG = [
    ("probs", "residual_from_p", "position-dependent,flashinfer-topk",
     "residual drawn from the target row", "does not conform"),
    ("probs", "bonus_from_wrong_row", "position-dependent,draft-equals-target",
     "bonus token drawn from the last draft position's", "does not conform"),
    ("probs", "shared_noise", "position-dependent,zero-tail",
     "one uniform for the accept test and the residual draw", "does not conform"),
    ("probs", "same_uniforms_across_requests", "position-dependent",
     "requests share random numbers", "does not conform"),
    ("uniforms", "uniforms_coin_zero_accepts", "zero-tail,one-hot", "accepted when the coin is 0",
     "broken"),
    ("seeds", "seeds_first_only", "seed-probes", "first request's seed", "broken"),
    ("seeds", "seeds_per_row_stream", "seed-probes", "follow the batch row", "broken"),
    ("draft", "draft_shared_noise", "position-dependent,narrow",
     "one noise for drafting, the accept test and the residual", "does not conform"),
]


@pytest.mark.parametrize("interface, bug, instances, diagnosis, verdict", CATALOG,
                         ids=[f"{c[0]}-{c[1]}" for c in CATALOG])
def test_each_planted_defect_is_caught_and_named(interface, bug, instances, diagnosis,
                                                  verdict):
    report = conformance.check(getattr(samplers, bug), interface=interface,
                               instances=instances)
    assert not report.passed
    for r in report.instances:
        assert r.verdict == verdict, report.text()
        assert r.diagnosis and diagnosis in r.diagnosis["name"], report.text()
        assert r.alpha <= 1e-6


CONTROLS = [
    ("probs", samplers.correct, ["position-dependent", "ragged"]),
    ("probs", conformance.verifier_sampler("block"), ["position-dependent", "ragged"]),
    ("uniforms", samplers.uniforms_correct, ["one-hot", "zero-tail"]),
    ("uniforms", samplers.uniforms_reversed_draws, ["position-dependent", "disjoint"]),
    ("seeds", samplers.seeds_correct, ["seed-probes", "ragged"]),
    ("draft", samplers.draft_correct, ["position-dependent", "ragged"]),
]


@pytest.mark.parametrize("interface, sampler, instances", CONTROLS,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CONTROLS)])
def test_correct_samplers_conform_at_the_optimum(interface, sampler, instances):
    report = conformance.check(sampler, interface=interface, instances=instances)
    assert report.passed and not report.below_optimum, report.text()


def test_sampled_match_conforms_flagged_below_the_optimum():
    """Lossless at lower acceptance (z-lab/dflash #74, mlx-swift-lm #459): conforms, and its
    measured acceptance is sampled-match's Σ p·q, not V1's Σ min(p, q)."""
    report = conformance.check(conformance.verifier_sampler("sampled-match"),
                               instances=["position-dependent", "narrow"])
    assert report.passed and report.below_optimum, report.text()
    for r in report.instances:
        assert r.below_optimum and r.verdict == "conforms"
        inst = [i for i in conformance.instances() if i.name == r.name][0]
        p, q = inst.probs_target[0], inst.probs_draft[0]
        # P(position i accepted | reached) = Σ p_i·q_i under sampled-match.
        expected = (p[:len(r.acceptance)] * q[:len(r.acceptance)]).sum(axis=1)
        assert np.allclose(r.acceptance, expected, atol=0.01), (r.acceptance, expected)
        assert all(a < o - 0.05 for a, o in zip(r.acceptance, r.optimum))
    assert "BELOW OPTIMUM" in report.text() and "below the optimum" in report.text()


def test_lossy_verifiers_are_not_lossless_even_when_their_acceptance_is_high():
    report = conformance.check(conformance.verifier_sampler("lenient", leniency=0.7),
                               instances=["position-dependent"])
    r = report.instances[0]
    assert r.verdict == "does not conform" and r.tv_interval[0] > 0, report.text()
    assert r.tv_interval[0] <= r.tv <= r.tv_interval[1]


def _monte_carlo(sampler_fn, p, q, n, batch, seed):
    """Counts of the emitted tuples of `batch` requests of one class."""
    rng = np.random.default_rng(seed)
    classes = np.zeros(batch, np.int64)
    x = _chain._draw(rng, q[None], classes, np.full(batch, n))
    out = sampler_fn(x)
    counts = {}
    for row in out.tolist():
        key = tuple(t for t in row if t >= 0)
        counts[key] = counts.get(key, 0) + 1
    return counts


@pytest.mark.parametrize("family, bug", [
    ("residual drawn from the target row", samplers.residual_from_p),
    ("bonus token drawn from the last draft position's", samplers.bonus_from_wrong_row),
    ("one uniform for the accept test and the residual draw", samplers.shared_noise)])
def test_defect_laws_match_their_planted_samplers_and_not_the_lossless_law(family, bug):
    inst = [i for i in conformance.instances() if i.name == "position-dependent"][0]
    p, q, n = inst.probs_target[0], inst.probs_draft[0], int(inst.n_draft[0])
    batch = 200_000
    counts = _monte_carlo(lambda x: bug(np.repeat(p[None], batch, 0).astype(np.float32),
                                        np.repeat(q[None], batch, 0).astype(np.float32), x,
                                        np.full(batch, n, np.int32), 3), p, q, n, batch, 9)
    outcomes = list(counts)
    freq = np.array([counts[o] for o in outcomes], np.float64)
    defect = [d for d in _chain.chain_defects(p, q, n) if family in d.name][0]
    from speclab import stats
    from speclab.conformance import _core
    chi2, dof = _core._fit_statistic(freq, np.asarray(defect.law(outcomes)))
    assert stats.chi_square_p_value(chi2, dof) > 1e-4
    lossless = _chain.sequence_probabilities(p, q, n, np.array(
        [list(o) + [-1] * (p.shape[0] - len(o)) for o in outcomes]))
    chi2, dof = _core._fit_statistic(freq, lossless)
    assert stats.chi_square_p_value(chi2, dof) < 1e-9


def test_shared_draft_noise_law_matches_its_sampler():
    """vLLM #54282's family: the draft, its accept test and the residual from one uniform."""
    inst = [i for i in conformance.instances() if i.name == "position-dependent"][0]
    p, q, n = inst.probs_target[0], inst.probs_draft[0], int(inst.n_draft[0])
    batch = 200_000
    _, out = samplers.draft_shared_noise(np.repeat(p[None], batch, 0).astype(np.float32),
                                         np.repeat(q[None], batch, 0).astype(np.float32),
                                         np.full(batch, n, np.int32), 4)
    counts = {}
    for row in out.tolist():
        key = tuple(t for t in row if t >= 0)
        counts[key] = counts.get(key, 0) + 1
    outcomes = list(counts)
    freq = np.array([counts[o] for o in outcomes], np.float64)
    defect = [d for d in _chain.chain_defects(p, q, n, shared_draft_noise=True)
              if d.name.startswith("one noise for drafting")][0]
    from speclab import stats
    from speclab.conformance import _core
    chi2, dof = _core._fit_statistic(freq, np.asarray(defect.law(outcomes)))
    assert stats.chi_square_p_value(chi2, dof) > 1e-4


def test_uniform_edge_probes_reach_the_edges():
    """The probes hand the sampler u = 0, the smallest positive float, 1 − 2⁻²⁴ and u = p/q,
    on a draft of target probability 0: a sampler that records them sees each."""
    seen = []

    def recorder(p, q, x, n, u_accept, u_draw):
        if len(seen) == 0:
            seen.append((p.copy(), x.copy(), u_accept.copy(), u_draw.copy()))
        return samplers.uniforms_correct(p, q, x, n, u_accept, u_draw)

    conformance.check(recorder, interface="uniforms", instances=["zero-tail"], samples=64)
    p, x, u_accept, u_draw = seen[0]
    values = set(u_accept.ravel().tolist()) | set(u_draw.ravel().tolist())
    assert {0.0, _chain.SMALLEST_FLOAT, _chain.BELOW_ONE} <= values
    zero_p = p[np.arange(len(x)), 0, x[:, 0]] == 0
    assert zero_p.any()
    assert any(0 < u < 1 and u not in (_chain.SMALLEST_FLOAT, _chain.BELOW_ONE)
               for u in u_accept[:, 0].tolist())  # the p/q probes


def test_the_coin_zero_bug_is_invisible_to_its_own_random_numbers_but_not_to_the_probes():
    """SGLang #35771 accepts a zero-probability draft only when the coin is exactly 0: its
    statistical run with i.i.d. uniforms conforms; the probes break it."""
    report = conformance.check(samplers.uniforms_coin_zero_accepts, interface="uniforms",
                               instances=["zero-tail"])
    assert report.instances[0].verdict == "broken"
    assert "of target probability 0" in report.instances[0].structural[0]


def test_json_junit_and_the_command_line_carry_the_same_verdicts(tmp_path):
    junit = tmp_path / "junit.xml"
    done = _cli("--interface", "seeds", "--callable", "samplers:seeds_first_only",
                "--instances", "seed-probes,narrow", "--json", "--junit", str(junit))
    assert done.returncode == 1, done.stderr
    out = json.loads(done.stdout)
    api = conformance.check(samplers.seeds_first_only, interface="seeds",
                            instances="seed-probes,narrow")
    assert out["interface"] == "seeds" and out["passed"] is False
    for mine, theirs in zip(out["instances"], api.instances):
        assert mine["verdict"] == theirs.verdict and mine["name"] == theirs.name
        assert (mine["diagnosis"] or {}).get("name") == (theirs.diagnosis or {}).get("name")
        for key in ("interface", "samples", "epsilon", "alpha", "acceptance", "optimum",
                    "below_optimum", "tv", "tv_interval"):
            assert key in mine
    xml = junit.read_text()
    assert 'classname="speclab.conformance.seeds"' in xml and "<error" in xml
    assert 'name="diagnosis" value="every request uses the first request&apos;s seed"' in xml \
        or "first request" in xml
    assert _cli("--interface", "nope", "--callable", "samplers:correct").returncode == 2
    listed = _cli("--interface", "uniforms", "--list")
    assert listed.returncode == 0 and "zero-tail" in listed.stdout


def test_per_request_seeds_with_the_logits_signature():
    """seeds with signature="logits": the logits sampler with one seed per request conforms;
    one that reads only the first seed is broken by the probes and named (FlashInfer PR
    #4861)."""
    import samplers_logits
    ok = conformance.check(samplers_logits.seeded, interface="seeds", signature="logits",
                           instances="temperature,tie-top-k", samples=3000)
    assert ok.passed, ok.text()
    bad = conformance.check(samplers_logits.seeded_first_only, interface="seeds",
                            signature="logits", instances="temperature", samples=3000)
    r = bad.instances[0]
    assert r.verdict == "broken" and "first request's seed" in r.diagnosis["name"], bad.text()
    with pytest.raises(ValueError, match="signature"):
        conformance.check(samplers.correct, interface="seeds", signature="tokens")


def test_engine_interface_catches_and_names_its_defects_through_check():
    """The engine interface through check(): a correct loop conforms; q taken from the draft's
    raw logits (HF transformers #47932) and argmax drafts verified as samples
    (apple/ml-recurrent-drafter #6) fail and are named."""
    import engines
    ok = conformance.check(engines.correct_loop, interface="engine", instances="top-k,greedy")
    assert ok.passed, ok.text()
    for loop, family in ((engines.raw_q_loop, "#47932"), (engines.argmax_drafts_loop, "#6")):
        bad = conformance.check(loop, interface="engine", instances="top-p")
        r = bad.instances[0]
        assert r.verdict == "does not conform" and family in r.diagnosis["reference"], bad.text()
    with pytest.raises(ValueError, match="Python callable only"):
        conformance.check(command="true", interface="engine")
