"""speclab.conformance: its exact law agrees with core/exact's enumeration; it passes a correct
sampler (numpy, speclab's own V1 through the callable and through `speclab verify-batch` as a
command) and fails the lossy verifiers and each classic bug of tests/python/samplers.py."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import samplers
import speclab
import speclab.conformance as conformance


def test_closed_form_law_equals_exact_enumeration():
    from fractions import Fraction
    for inst in conformance.instances():
        if inst.vocab > 8 or inst.classes > 1:
            continue
        p, q = inst.probs_target[0], inst.probs_draft[0]
        def exact_rows(rows):
            rows = [[Fraction(v) for v in row] for row in rows]
            return [[v / sum(row) for v in row] for row in rows]

        exact = speclab.exact.step(exact_rows(p), exact_rows(q))
        seqs = list(exact["distribution"])
        rows = np.full((len(seqs), inst.gamma + 1), -1)
        for i, s in enumerate(seqs):
            rows[i, :len(s)] = s
        closed = conformance.sequence_probabilities(p, q, inst.gamma, rows)
        expected = np.array([float(exact["distribution"][s]) for s in seqs])
        np.testing.assert_allclose(closed, expected, rtol=1e-9, atol=1e-15, err_msg=inst.name)
        law_seqs, law_probs = conformance.enumerate_law(p, q, inst.gamma, 0.0)
        assert law_probs.sum() == pytest.approx(1, abs=1e-12)
        assert set(law_seqs) == set(seqs), inst.name


def test_correct_numpy_sampler_and_speclab_token_pass():
    for sampler in (samplers.correct, conformance.verifier_sampler("token")):
        report = conformance.check(sampler)
        assert report.passed, report.text()
    small = [r for r in report.instances if r.name == "position-dependent"][0]
    assert small.detectable_epsilon <= 0.0101  # the goal: ε = 0.01 at V = 8, γ = 3


BUGS = {
    "residual_from_p": ["position-dependent", "flashinfer-topk"],
    "bonus_from_wrong_row": ["position-dependent", "draft-equals-target"],
    "shared_noise": ["position-dependent", "zero-tail"],
    "same_uniforms_across_requests": ["position-dependent", "one-hot"],
    "reads_padding": ["ragged"],
}


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_each_classic_bug_fails(bug):
    report = conformance.check(getattr(samplers, bug), instances=BUGS[bug])
    assert not report.passed
    assert all(not r.passed for r in report.instances), report.text()


@pytest.mark.parametrize("method, options", [("lenient", {"leniency": 0.7}),
                                             ("typical", {})])
def test_lossy_verifiers_fail(method, options):
    report = conformance.check(conformance.verifier_sampler(method, **options),
                               instances=["position-dependent", "ragged", "zero-tail"])
    assert not report.passed and not any(r.passed for r in report.instances), report.text()


def test_structural_defects_are_named():
    def out_of_range(p, q, x, n, seed):
        out = samplers.correct(p, q, x, n, seed)
        out[0, 0] = p.shape[2]
        return out

    def forbidden(p, q, x, n, seed):
        out = np.full((len(x), x.shape[1] + 1), -1)
        out[:, 0] = 7  # the disjoint instance's target puts its mass on 0-3, q on 4-7
        return out

    r = conformance.check(out_of_range, instances=["one-hot"]).instances[0]
    assert not r.passed and "token id ≥ V" in r.structural[0]
    r = conformance.check(forbidden, instances=["disjoint"]).instances[0]
    assert not r.passed and "target probability 0" in r.structural[0]
    with pytest.raises(conformance.SamplerError, match="ZeroDivisionError"):
        conformance.check(lambda *a: 1 / 0, instances=["narrow"])
    with pytest.raises(ValueError, match="unknown instance"):
        conformance.check(samplers.correct, instances=["nope"])


def test_command_interface_passes_verify_batch(speclab_cli):
    report = conformance.check(command=f"{speclab_cli} verify-batch",
                               instances=["position-dependent", "ragged", "one-hot", "zero-tail"])
    assert report.passed, report.text()
    with pytest.raises(conformance.SamplerError, match="exited with status"):
        conformance.check(command=f"{speclab_cli} no-such-command", instances=["narrow"])


def _cli(*args):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(__file__), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "speclab.conformance", *args], env=env,
                          capture_output=True, text=True)


def test_cli_exit_statuses_json_and_junit(tmp_path):
    ok = _cli("--callable", "samplers:correct", "--instances", "narrow,one-hot", "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["passed"] is True
    junit = tmp_path / "junit.xml"
    bad = _cli("--callable", "samplers:residual_from_p", "--instances", "position-dependent",
               "--junit", str(junit))
    assert bad.returncode == 1 and "does NOT conform" in bad.stdout
    assert "<failure" in junit.read_text()
    assert _cli("--callable", "samplers:nope").returncode == 2
    assert _cli("--epsilon", "0.1").returncode == 2
    assert _cli("--callable", "samplers:correct", "--epsilon", "2").returncode == 2
    listed = _cli("--list")
    assert listed.returncode == 0 and "large-vocab" in listed.stdout


def test_speclab_conformance_command_finds_the_package_and_passes_the_status(speclab_cli):
    """`speclab conformance` runs this module with the build's package on the path (the
    environment below has only the samplers' folder) and exits with its status."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.path.dirname(__file__)

    def run(*args):
        return subprocess.run([speclab_cli, "conformance", *args], env=env, capture_output=True,
                              text=True)

    ok = run("--callable", "samplers:correct", "--instances", "narrow", "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["passed"] is True
    bad = run("--callable", "samplers:residual_from_p", "--instances", "position-dependent")
    assert bad.returncode == 1 and "does NOT conform" in bad.stdout
    assert run("--callable", "samplers:nope").returncode == 2
    helped = run("--help")
    assert helped.returncode == 0 and "--callable" in helped.stdout


def test_a_crash_names_the_instance_it_happened_on():
    with pytest.raises(conformance.SamplerError,
                       match=r"^instance ragged \(.*\), call 1 \(B = \d+\): the sampler raised "
                             r"ZeroDivisionError"):
        conformance.check(lambda *a: 1 / 0, instances=["ragged"], samples=400)
    failing = f"{sys.executable} -c 'import sys; sys.exit(3)'"
    with pytest.raises(conformance.SamplerError,
                       match=r"^instance narrow \(.*\): .* exited with status 3"):
        conformance.check(command=failing, instances=["narrow"], samples=400)


def _wrong_outputs():
    def none(p, q, x, n, seed):
        return None

    def short(p, q, x, n, seed):
        return samplers.correct(p, q, x, n, seed)[:, :-1]

    def floats(p, q, x, n, seed):
        return samplers.correct(p, q, x, n, seed).astype(np.float32)

    def ragged(p, q, x, n, seed):
        return [[0], [0, 1]]

    class Result:
        emitted_tokens = None

    return {"none": (none, "returned None"), "short": (short, r"shape \[\d+, 3\]; expected"),
            "floats": (floats, "dtype float32; expected"),
            "ragged": (ragged, "returned a list that is not an array"),
            "attribute": (lambda *a: Result(), "returned None")}


@pytest.mark.parametrize("kind", sorted(_wrong_outputs()))
def test_output_that_breaks_the_interface_is_a_sampler_error(kind):
    sampler, message = _wrong_outputs()[kind]
    with pytest.raises(conformance.SamplerError, match=f"^instance narrow .*{message}"):
        conformance.check(sampler, instances=["narrow"], samples=400)


def test_cli_exits_two_for_a_crash_or_an_output_that_breaks_the_interface(tmp_path):
    module = tmp_path / "bad_samplers.py"
    module.write_text("import numpy as np\n\n"
                      "def returns_none(p, q, x, n, seed):\n    return None\n\n"
                      "def returns_floats(p, q, x, n, seed):\n"
                      "    return np.zeros((len(x), x.shape[1] + 1))\n\n"
                      "def crashes(p, q, x, n, seed):\n    raise RuntimeError('out of memory')\n")
    for name, message in (("returns_none", "the sampler returned None"),
                          ("returns_floats", "dtype float64"),
                          ("crashes", "the sampler raised RuntimeError: out of memory")):
        done = _cli("--callable", f"{module}:{name}", "--instances", "narrow", "--samples", "400")
        assert done.returncode == 2, (name, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
        line = done.stderr.strip().splitlines()[-1]
        assert line.startswith("speclab conformance: instance narrow (") and message in line, line


def test_instances_keyword_and_the_deprecated_names():
    report = conformance.check(samplers.correct, instances="narrow, one-hot", samples=400)
    assert [r.name for r in report.instances] == ["one-hot", "narrow"]  # the family's order
    with pytest.warns(DeprecationWarning, match=r"names=.*deprecated; use instances="):
        report = conformance.check(samplers.correct, names=["narrow"], samples=400)
    assert [r.name for r in report.instances] == ["narrow"]
    with pytest.raises(ValueError, match="instances= alone"), pytest.warns(DeprecationWarning):
        conformance.check(samplers.correct, instances=["narrow"], names=["narrow"])
    with pytest.raises(ValueError, match="no instance named for interface probs; expected some"):
        conformance.check(samplers.correct, instances=[])
