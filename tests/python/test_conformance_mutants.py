"""speclab.conformance against the mutants of core/base/mutants.hpp: speclab's own token-level
verifier (V1), built a second time over the mutant library (the test-only extension
_speclab_mutants, python/CMakeLists.txt), is driven through the package's Python interface as a
decoding engine drives it (one seed, the step advancing with every call). Without a mutant it
conforms; with each mutant of the token-level chain verifier it must not, except those that only
slow it down (a missing bonus token), which must conform flagged below the optimum. The mutants
of other code (block, typical and tree verification, plain decoding, the engine's draft warping)
change nothing that this test's sampler runs: they are listed, with the reason, so that a new
mutant must be placed in one list or the other."""

import itertools

import pytest

import speclab
import speclab.conformance as conformance
import speclab.verify

mutants_ext = pytest.importorskip(
    "_speclab_mutants", reason="the test-only extension _speclab_mutants is not built "
    "(build/tests/python; configure with -DSPECLAB_MUTANT_TESTS=ON, as CI does, and pybind11)")

# Each mutant of the token-level chain verifier, with the instances that show it (a few, to keep
# the test short; every one of them must fail).
CHAIN_MUTANTS = {
    # the residual drawn from p instead of norm(max(0, p − q))
    "residual-from-target": ["position-dependent", "vllm-peaked"],
    # one accept-test uniform for every position of a step
    "reused-uniform": ["position-dependent", "narrow"],
    # the rejected draft token emitted as if accepted
    "accepted-off-by-one": ["position-dependent", "disjoint"],
    # the bonus uniform addressed without the step: the same for a request's every step, so the
    # bonus tokens of request r repeat from call to call
    "bonus-without-step": ["draft-equals-target", "narrow"],
}
# Mutants that keep the output lossless at a lower speed: conformance must pass them and flag
# them below the optimum, with the instances that show it.
SPEED_MUTANTS = {
    # no bonus token after a fully accepted chain: every token still has the target's law, but
    # a step emits one token fewer whenever all its drafts are accepted
    "missing-bonus": ["draft-equals-target", "position-dependent"],
}
# Mutants in code the token-level sampler does not run.
OTHER_MUTANTS = {
    "draft-warping-mismatch": "the engine's draft temperature; conformance draws the drafts itself",
    "block-first-failure": "block verification (V5), whose step law is not V1's by design",
    "topk-softmax-q": "tree-topk verification",
    "swor-unnormalised-residual": "tree-swor verification",
    "swor-last-sibling-only": "tree-swor verification",
    "typical-threshold-once": "typical acceptance (V4), lossy with or without it",
    "plain-uniform-without-index": "plain decoding",
    "traversal-stale-sibling-weight": "traversal verification (V7)",
    "min-p-untempered": "the sampling pipeline; conformance is given probabilities",
    "top-p-untempered": "the sampling pipeline; conformance is given probabilities",
    "top-p-strict": "the sampling pipeline; conformance is given probabilities",
    "min-p-token-zero": "the sampling pipeline; conformance is given probabilities",
    "float-accept-test": "a change of rounding only, which no distribution test can see (the "
    "rules' exact tests in tests/property/rules_test.cpp pin it)",
    "chain-slot-noise": "the chain engine's batching; conformance addresses requests itself",
    "tree-slot-noise": "the tree engine's batching",
    "tree-draft-sampling": "the tree engine's draft pipeline",
    "fallback-from-draft": "the zero-mass fallback, reached only by rounding: its rows differ from "
    "q by at most the row-sum tolerance (tests/property's *Fallback tests reach it)",
    "tree-draft-warping-mismatch": "the tree engine's q rows; conformance draws the drafts itself",
    "kseq-residual-unscaled": "K-SEQ tree verification",
    "block-weight-unclamped": "block verification (V5), whose step law is not V1's by design",
    "match-draft-position-noise": "the coupled and sampled-match verifiers (their noise)",
    "coupled-fresh-draft-noise": "the coupled engine's drafting",
    "tli-unnormalised": "the engine for a draft of another vocabulary (tli's proposal rows)",
    "vocab-symbol-slip": "the vocabulary maps, which conformance does not read",
}
# Requests per sampler call: many calls, as an engine makes, so that a uniform shared between
# steps shows.
MAX_BATCH = 512


@pytest.fixture
def mutant_library(monkeypatch):
    """speclab.verify_chain over the mutant library; yields set_mutant."""
    monkeypatch.setattr(speclab.verify, "_speclab", mutants_ext)
    yield mutants_ext.set_mutant
    mutants_ext.set_mutant("none")


def engine_sampler():
    """speclab's V1 as an engine calls it: a fixed seed and the step counting the calls (the
    seed conformance hands over is not used)."""
    steps = itertools.count()

    def sampler(p, q, x, n, seed):
        return speclab.verify_chain(p, q, x, seed=20261201, n_draft=n, step=next(steps))

    return sampler


def test_every_mutant_is_listed():
    assert set(mutants_ext.mutants()) == (set(CHAIN_MUTANTS) | set(SPEED_MUTANTS)
                                          | set(OTHER_MUTANTS))


def test_without_a_mutant_the_mutant_build_conforms(mutant_library):
    mutant_library("none")
    names = sorted(set(itertools.chain.from_iterable(CHAIN_MUTANTS.values())))
    report = conformance.check(engine_sampler(), instances=names, max_batch=MAX_BATCH)
    assert report.passed, report.text()


@pytest.mark.parametrize("mutant", sorted(CHAIN_MUTANTS))
def test_conformance_fails_each_chain_mutant(mutant_library, mutant):
    mutant_library(mutant)
    report = conformance.check(engine_sampler(), instances=CHAIN_MUTANTS[mutant],
                               max_batch=MAX_BATCH)
    failed = [r.name for r in report.instances if not r.passed]
    print(f"{mutant}: fails {failed} of {CHAIN_MUTANTS[mutant]}")
    assert not report.passed
    assert sorted(failed) == sorted(CHAIN_MUTANTS[mutant]), report.text()


@pytest.mark.parametrize("mutant", sorted(SPEED_MUTANTS))
def test_conformance_flags_each_speed_mutant_below_the_optimum(mutant_library, mutant):
    mutant_library(mutant)
    report = conformance.check(engine_sampler(), instances=SPEED_MUTANTS[mutant],
                               max_batch=MAX_BATCH)
    assert report.passed, report.text()
    assert all(r.below_optimum for r in report.instances), report.text()
