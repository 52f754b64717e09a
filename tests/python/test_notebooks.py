"""The notebooks read any run directory, not only the shipped experiments' (notebooks/README.md):
acceptance_curves.ipynb executed on a sweep of another name in another place, given as
$SPECLAB_RUN_DIR, while the results root holds nothing; speedup_vs_batch.ipynb executed beside
the plan_validate.json this build's planner writes; and the lookup behind RUN_DIR."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import speclab.plot

SOURCE = Path(__file__).resolve().parents[2]
# The tests' tiny sweep (tests/data/tiny_sweep.toml) under another experiment's name.
TINY = (SOURCE / "tests" / "data" / "tiny_sweep.toml").read_text()
assert 'name = "tiny"' in TINY
SWEEP = TINY.replace('name = "tiny"', 'name = "my_gamma_sweep"')


@pytest.fixture
def sweep_dir(tmp_path, speclab_cli):
    config = tmp_path / "sweep.toml"
    config.write_text(SWEEP)
    out = tmp_path / "elsewhere" / "run"
    done = subprocess.run([speclab_cli, "run", str(config), "--out", str(out)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return out


def test_run_dir_lookup(tmp_path, sweep_dir, monkeypatch):
    empty = tmp_path / "empty_results"
    empty.mkdir()
    monkeypatch.setenv("SPECLAB_RESULTS", str(empty))
    monkeypatch.delenv("SPECLAB_RUN_DIR", raising=False)
    assert speclab.plot.notebook_run_dirs(["quickstart", "acceptance_vs_gamma"]) == {}
    assert speclab.plot.notebook_run_dir("quickstart") is None
    # Given as the parameter or the environment variable, whatever the experiment's name.
    assert speclab.plot.notebook_run_dirs(["quickstart"], sweep_dir) == {"run": sweep_dir}
    monkeypatch.setenv("SPECLAB_RUN_DIR", str(sweep_dir))
    assert speclab.plot.notebook_run_dir("method_comparison") == sweep_dir
    # The default layout still works: the experiment's directory under the results root.
    monkeypatch.delenv("SPECLAB_RUN_DIR")
    shutil.copytree(sweep_dir, empty / "quickstart")
    assert speclab.plot.notebook_run_dir("quickstart") == empty / "quickstart"
    with pytest.raises(speclab.plot.ResultError, match="RUN_DIR is .* holds no summary.csv"):
        speclab.plot.notebook_run_dirs(["quickstart"], tmp_path)


def test_every_notebook_has_a_parameters_cell():
    for path in sorted((SOURCE / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        tagged = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert len(tagged) == 1 and "RUN_DIR = None" in "".join(tagged[0]["source"]), path.name
        code = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        assert "sys.path" not in code, f"{path.name} edits sys.path"


def test_acceptance_notebook_runs_on_another_sweep(tmp_path, sweep_dir):
    nbconvert = shutil.which("jupyter-nbconvert")
    if nbconvert is None:
        pytest.skip("no jupyter-nbconvert (scripts/install-deps.sh installs it)")
    empty = tmp_path / "empty_results"
    empty.mkdir()
    # The kernel imports speclab as the test does (its working directory is notebooks/).
    path = os.pathsep.join(os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(
        os.pathsep) if p)
    env = dict(os.environ, SPECLAB_RESULTS=str(empty), SPECLAB_RUN_DIR=str(sweep_dir),
               PYTHONPATH=path, PYDEVD_DISABLE_FILE_VALIDATION="1")
    done = subprocess.run(
        [nbconvert, "--to", "notebook", "--execute", "--ExecutePreprocessor.timeout=300",
         "--output-dir", str(tmp_path / "executed"),
         str(SOURCE / "notebooks" / "acceptance_curves.ipynb")],
        env=env, capture_output=True, text=True, cwd=SOURCE / "notebooks")
    assert done.returncode == 0, done.stderr[-4000:]
    executed = json.loads((tmp_path / "executed" / "acceptance_curves.ipynb").read_text())
    text = "".join("".join(o.get("text", "")) for c in executed["cells"] if c["cell_type"] == "code"
                   for o in c["outputs"])
    assert f"run: {sweep_dir} (4 speculative points)" in text, text
    images = sum("image/png" in o.get("data", {}) for c in executed["cells"]
                 if c["cell_type"] == "code" for o in c["outputs"])
    assert images >= 4, f"{images} figures"


def test_speedup_notebook_reads_what_plan_validate_writes(tmp_path, speclab_cli):
    """speedup_vs_batch.ipynb executed on a small speedup sweep beside the plan_validate.json that
    this build's `speclab plan --validate --json` writes for the same batches and γ: every key the
    notebook reads is in the planner's JSON, and each (batch, γ) gets the planner's prediction."""
    nbconvert = shutil.which("jupyter-nbconvert")
    if nbconvert is None:
        pytest.skip("no jupyter-nbconvert (scripts/install-deps.sh installs it)")
    out = tmp_path / "speedup"
    tiny = ["--set", "target.model=lsm-tiny-target", "--set", "draft.model=lsm-tiny-draft"]
    done = subprocess.run(
        [speclab_cli, "run", str(SOURCE / "experiments" / "configs" / "speedup_vs_batch.toml"),
         *tiny, "--set", "decode.sequences=4", "--set", "decode.max_new_tokens=8",
         "--set", "decode.prompt_length=4", "--set", "sweep.decode.batch_size=[1,2]",
         "--out", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    plan = subprocess.run(
        [speclab_cli, "plan", "--validate", "--target", "lsm-tiny-target", "--draft",
         "lsm-tiny-draft", "--batch", "1,2", "--gamma", "4", "--tokens", "8",
         "--calibration-tokens", "4", "--rounds", "2", "--max-rounds", "2", "--json"], capture_output=True, text=True)
    assert plan.returncode == 0, plan.stderr
    (out / "plan_validate.json").write_text(plan.stdout)
    loaded = speclab.plot.load_plan(out)
    line = speclab.plot.plan_summary(loaded)
    assert "b1 γ4" in line and "b2 γ4" in line, line

    path = os.pathsep.join(os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(
        os.pathsep) if p)
    env = dict(os.environ, SPECLAB_RUN_DIR=str(out), PYTHONPATH=path,
               PYDEVD_DISABLE_FILE_VALIDATION="1")
    done = subprocess.run(
        [nbconvert, "--to", "notebook", "--execute", "--ExecutePreprocessor.timeout=300",
         "--output-dir", str(tmp_path / "executed"),
         str(SOURCE / "notebooks" / "speedup_vs_batch.ipynb")],
        env=env, capture_output=True, text=True, cwd=SOURCE / "notebooks")
    assert done.returncode == 0, done.stderr[-4000:]
    executed = json.loads((tmp_path / "executed" / "speedup_vs_batch.ipynb").read_text())
    text = "".join("".join(o.get("text", "")) for c in executed["cells"] if c["cell_type"] == "code"
                   for o in c["outputs"])
    assert line in text, text
    # The planner's prediction, not each point's own predicted_speedup, sits in the table.
    predicted = {(r["batch"], c["gamma"]): c["predicted"] for r in loaded["rows"]
                 for c in r["by_gamma"]}
    table = speclab.plot.speedup_table(*speclab.plot.load_runs(out), loaded)
    assert {(int(b), int(g)): p for b, g, p in zip(table["batch"], table["gamma"],
                                                    table["predicted"])} == predicted
