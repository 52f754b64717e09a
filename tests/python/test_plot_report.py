"""speclab.plot and speclab.report on run directories written by results_fixture (h5py and
pandas, no speclab executable): damaged summaries and result files are named with what is wrong
(exit 2, no traceback), every figure considered and not drawn is listed with its reason, a γ
sweep with a baseline gets its speedup figure, and the report shows its figures at their natural
size, each a link to itself, with the key metrics first in the summary tables."""

import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser

import h5py
import pandas as pd
import pytest

import results_fixture
import speclab
import speclab.io
import speclab.plot
import speclab.report

pytest.importorskip("matplotlib")
speclab.plot.use_agg("test_plot_report")

# Every figure a sweep's plotter considers (speclab.plot.sweep_figures), by suffix.
SWEEP_FIGURES = ("method_comparison", "reproducibility", "position_acceptance", "accepted_length",
                 "emitted_vs_gamma", "alpha_vs_temperature", "speedup_vs_batch",
                 "speedup_vs_gamma")


def _module(name, *args):
    """`python3 -m NAME ARGS` with this test's speclab on the path."""
    env = dict(os.environ)
    package_parent = os.path.dirname(os.path.dirname(speclab.__file__))
    env["PYTHONPATH"] = os.pathsep.join(p for p in [package_parent, env.get("PYTHONPATH")] if p)
    return subprocess.run([sys.executable, "-m", name, *map(str, args)], env=env,
                          capture_output=True, text=True)


def _plot(results, figs):
    return _module("speclab.plot", "render", results, "-o", figs)


def _report(results, page, *flags):
    return _module("speclab.report", results, "-o", page, *flags)


def _render(results, figs):
    """(figure stems written, {figure: reason} not drawn) of speclab.plot.render."""
    lines = []
    written = speclab.plot.render(results, figs, log=lines.append)
    not_drawn = dict(line.strip()[len("not drawn: "):].split(": ", 1) for line in lines
                     if line.strip().startswith("not drawn: "))
    return [p.stem for p in written], not_drawn


@pytest.fixture
def gamma_sweep(tmp_path):
    results_fixture.write_sweep(tmp_path / "results", name="gammas",
                                sweep={"decode.gamma": [1, 2, 4]})
    return tmp_path / "results"


# --- damaged inputs -----------------------------------------------------------------------------

def _damage_summary(path, how):
    text = path.read_text()
    if how == "header-cut":
        path.write_text(text[:text.index("decode.gamma") + 5])
    elif how == "empty":
        path.write_text("")
    elif how == "foreign":
        path.write_text("run,score\nfirst,0.5\nsecond,0.7\n")
    elif how == "row-cut":
        path.write_text(text.rstrip("\n").rsplit(",", 10)[0] + "\n")
    elif how == "binary":
        path.write_bytes(b"\x89HDF\r\n\x1a\n\x00\xff\xfe" * 40)


@pytest.mark.parametrize("how, what", [
    ("header-cut", "no 'file' column"), ("empty", "empty (no header line)"),
    ("foreign", "no 'id', 'index', 'name', 'file' columns"),
    ("row-cut", "row 3 of 3 has no file"), ("binary", "")])
def test_damaged_summary_is_named_with_what_is_wrong(gamma_sweep, tmp_path, how, what):
    summary = gamma_sweep / "summary.csv"
    _damage_summary(summary, how)
    for done in (_plot(gamma_sweep, tmp_path / "figs"), _report(gamma_sweep, tmp_path / "r.html")):
        assert done.returncode == 2, done.stdout + done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        message = done.stderr.strip().splitlines()[-1]
        assert f"{summary}: " in message and what in message, message
        assert "expected a summary written by `speclab run`" in message, message
    assert not (tmp_path / "r.html").exists()


def test_summary_without_the_config_columns_the_figures_read(gamma_sweep, tmp_path):
    summary = gamma_sweep / "summary.csv"
    pd.read_csv(summary).drop(columns=["decode.gamma", "speedup"]).to_csv(summary, index=False)
    for done in (_plot(gamma_sweep, tmp_path / "figs"), _report(gamma_sweep, tmp_path / "r.html")):
        assert done.returncode == 2, done.stdout + done.stderr
        assert f"{summary}: no 'decode.gamma', 'speedup' columns" in done.stderr, done.stderr


def test_io_load_summary_names_the_file(gamma_sweep):
    _damage_summary(gamma_sweep / "summary.csv", "header-cut")
    with pytest.raises(speclab.io.SummaryError, match=r"summary\.csv: no 'file' column"):
        speclab.io.load_summary(gamma_sweep)
    with pytest.raises(ValueError):  # SummaryError is a ValueError, as callers catch it
        speclab.io.load_summary(gamma_sweep)


def test_damaged_summary_shard_is_named(gamma_sweep):
    (gamma_sweep / "summary.csv").rename(gamma_sweep / "summary.shard-0-of-2.csv")
    (gamma_sweep / "summary.shard-1-of-2.csv").write_text("id,index\n")
    with pytest.raises(speclab.plot.ResultError,
                       match=r"summary\.shard-1-of-2\.csv: no 'name', 'file' columns"):
        speclab.plot.load_runs(gamma_sweep)


@pytest.mark.parametrize("how", ["truncated", "foreign", "not-hdf5"])
def test_damaged_result_file_is_named(gamma_sweep, tmp_path, how):
    victim = sorted(gamma_sweep.glob("*.h5"))[1]
    if how == "truncated":
        os.truncate(victim, 2000)  # as a copy cut short leaves it
    elif how == "foreign":
        victim.unlink()
        with h5py.File(victim, "w") as f:
            f["data"] = [1, 2, 3]
            f.attrs["schema"] = "another.tool"
    else:
        victim.write_text("id,index\n")
    for done in (_plot(gamma_sweep, tmp_path / "figs"), _report(gamma_sweep, tmp_path / "r.html")):
        assert done.returncode == 2, done.stdout + done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        assert f"{victim}: cannot be read as a speclab result" in done.stderr, done.stderr


def test_result_file_without_an_attribute_a_figure_reads(gamma_sweep, tmp_path):
    victim = sorted(gamma_sweep.glob("*.h5"))[0]
    with h5py.File(victim, "a") as f:
        del f.attrs["alpha_estimate"]
    for done in (_plot(gamma_sweep, tmp_path / "figs"), _report(gamma_sweep, tmp_path / "r.html")):
        assert done.returncode == 2, done.stdout + done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        assert "needs 'alpha_estimate'" in done.stderr and str(gamma_sweep) in done.stderr


def test_stray_unreadable_hdf5_is_named_where_a_report_was_looked_for(gamma_sweep, tmp_path):
    stray = gamma_sweep / "copied.h5"
    stray.write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 100)  # an HDF5 file cut short
    written, not_drawn = _render(gamma_sweep, tmp_path / "figs")
    assert "gammas_speedup_vs_gamma" in written
    assert str(stray) in not_drawn["verification"]


def test_verify_report_without_its_attributes_is_named(gamma_sweep, tmp_path):
    report = gamma_sweep / "verify.h5"
    with h5py.File(report, "w") as f:
        f.attrs["schema"] = "speclab.verify"
        f["observed"] = [1, 2]
    done = _plot(gamma_sweep, tmp_path / "figs")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"{report}: no dataset expected, attribute pass," in done.stderr, done.stderr
    assert "expected a `speclab verify` report written whole" in done.stderr


def test_damaged_plan_prediction_is_named(gamma_sweep, tmp_path):
    (gamma_sweep / "plan_validate.json").write_text('{"rows": [')
    with pytest.raises(speclab.plot.ResultError, match=r"plan_validate\.json: cannot be read"):
        speclab.plot.render(gamma_sweep, tmp_path / "figs", log=lambda line: None)


# --- which figures -----------------------------------------------------------------------------

def test_gamma_sweep_with_a_baseline_draws_speedup_against_gamma(tmp_path):
    results_fixture.write_sweep(tmp_path / "results", name="g",
                                sweep={"decode.gamma": [1, 2, 4],
                                       "sampling.temperature": [0.5, 1.0]})
    written, not_drawn = _render(tmp_path / "results", tmp_path / "figs")
    assert "g_speedup_vs_gamma" in written, not_drawn
    assert (tmp_path / "figs" / "g_speedup_vs_gamma.png").stat().st_size > 10000
    assert not_drawn["g_speedup_vs_batch"] == (
        "one batch size in the sweep (sweep decode.batch_size)")


def test_every_figure_considered_and_not_drawn_is_listed_with_its_reason(gamma_sweep, tmp_path):
    written, not_drawn = _render(gamma_sweep, tmp_path / "figs")
    considered = [f"gammas_{f}" for f in SWEEP_FIGURES] + ["verification"]
    assert sorted(written + list(not_drawn)) == sorted(considered)
    assert not set(written) & set(not_drawn)
    assert not_drawn == {
        "gammas_method_comparison": "one verifier method in the sweep (sweep verifier.method)",
        "gammas_reproducibility": "no coupled or sampled-match point in the sweep",
        "gammas_alpha_vs_temperature": "one temperature in the sweep (sweep "
                                       "sampling.temperature)",
        "gammas_speedup_vs_batch": "one batch size in the sweep (sweep decode.batch_size)",
        "verification": f"no `speclab verify` report in {gamma_sweep} or its subdirectories",
    }


@pytest.mark.parametrize("sweep, config, reasons", [
    ({"decode.batch_size": [1, 4]}, {},
     {"speedup_vs_gamma": "the sweep does not vary decode.gamma",
      "emitted_vs_gamma": "one γ in the sweep (sweep decode.gamma)"}),
    ({"decode.gamma": [1, 3], "decode.batch_size": [1, 2]}, {"decode.baseline": False},
     {"speedup_vs_gamma": "no speedup: set decode.baseline = true",
      "speedup_vs_batch": "no speedup: set decode.baseline = true"}),
    ({"verifier.method": ["token", "block"], "decode.gamma": [2, 3]}, {},
     {"speedup_vs_gamma": "several verifier methods (compared in s_method_comparison)",
      "position_acceptance": "several verifier methods (compared in s_method_comparison)"}),
    ({"decode.gamma": [2, 3]}, {"verifier.method": "tree-iid"},
     {"speedup_vs_gamma": "tree verifiers only (per-depth curves are in the files)"}),
    ({"verifier.method": ["token", "coupled"]}, {},
     {"reproducibility": "one temperature in the sweep (sweep sampling.temperature)"}),
])
def test_not_drawn_reasons(tmp_path, sweep, config, reasons):
    results_fixture.write_sweep(tmp_path / "results", name="s", sweep=sweep, **config)
    written, not_drawn = _render(tmp_path / "results", tmp_path / "figs")
    assert sorted(written + list(not_drawn)) == sorted(
        [f"s_{f}" for f in SWEEP_FIGURES] + ["verification"])
    for figure, reason in reasons.items():
        assert not_drawn.get(f"s_{figure}") == reason, not_drawn


def test_reproducibility_figure_compares_verifiers_across_temperatures(tmp_path):
    results_fixture.write_sweep(tmp_path / "results", name="r",
                                sweep={"verifier.method": ["token", "coupled", "sampled-match"],
                                       "sampling.temperature": [0.5, 1.0, 1.5]})
    written, not_drawn = _render(tmp_path / "results", tmp_path / "figs")
    assert "r_reproducibility" in written, not_drawn
    assert (tmp_path / "figs" / "r_reproducibility.png").stat().st_size > 10000


def test_report_json_lists_what_is_not_drawn(gamma_sweep, tmp_path):
    done = _report(gamma_sweep, tmp_path / "r.html", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert "gammas_speedup_vs_gamma" in summary["figures"]
    assert ("gammas_speedup_vs_batch: one batch size in the sweep (sweep decode.batch_size)"
            in summary["not_drawn"])


def test_speclab_plot_json_lists_what_is_not_drawn(gamma_sweep, tmp_path, speclab_cli):
    done = subprocess.run([speclab_cli, "plot", str(gamma_sweep), "-o", str(tmp_path / "figs"),
                           "--json"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert str(tmp_path / "figs" / "gammas_speedup_vs_gamma.png") in out["figures"]
    assert ("gammas_speedup_vs_batch: one batch size in the sweep (sweep decode.batch_size)"
            in out["not_drawn"])


@pytest.mark.parametrize("schema_version", [2, 3])
def test_both_schema_versions_plot_the_decode_speedup(tmp_path, schema_version):
    """Version 3 files time the prompt pass apart (speedup on decode time, end_to_end_speedup
    beside it); version 2 files lack those columns and datasets. The figures plot `speedup`, and
    its per-batch interval is on the same time as the point's speedup."""
    df = results_fixture.write_sweep(tmp_path / "results", name="v",
                                     sweep={"decode.gamma": [1, 2, 4]},
                                     schema_version=schema_version, **{"decode.batch_size": 4})
    assert ("end_to_end_speedup" in df.columns) == (schema_version == 3)
    written, _ = _render(tmp_path / "results", tmp_path / "figs")
    assert "v_speedup_vs_gamma" in written
    df, runs = speclab.plot.load_runs(tmp_path / "results")
    table = speclab.plot.speedup_table(df, runs)
    assert list(table["speedup"]) == pytest.approx(list(df.sort_values("decode.gamma")["speedup"]))
    for run in runs:
        per_batch = speclab.plot.batch_speedups(run)
        # One batch of 4 requests: the batch's speedup is the point's.
        assert per_batch == pytest.approx([run["attrs"]["speedup"]])


# --- the HTML page -----------------------------------------------------------------------------

class _Page(HTMLParser):
    """The <img> of the page with the href of the link around each, and the summary tables'
    header rows."""

    def __init__(self):
        super().__init__()
        self.images, self.headers = [], []
        self._links, self._row, self._in_th = [], None, False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "a":
            self._links.append(attrs)
        elif tag == "img":
            self.images.append((attrs, self._links[-1] if self._links else None))
        elif tag == "tr":
            self._row = []
        elif tag == "th":
            self._in_th = True

    def handle_endtag(self, tag):
        if tag == "a" and self._links:
            self._links.pop()
        elif tag == "th":
            self._in_th = False
        elif tag == "tr" and self._row:
            self.headers.append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._in_th and self._row is not None:
            self._row.append(data)


def _page(results):
    page, summary = speclab.report.build_report(results, log=lambda line: None)
    parsed = _Page()
    parsed.feed(page)
    return page, parsed, summary


def test_report_figures_at_natural_width_each_a_link_to_itself(gamma_sweep):
    page, parsed, summary = _page(gamma_sweep)
    assert len(parsed.images) == len(summary["figures"]) == 4
    for img, link in parsed.images:
        assert img["src"].startswith("data:image/png;base64,")
        assert link is not None and link["href"] == img["src"], img["alt"]
        assert link.get("target") == "_blank"
    style = re.search(r"<style>(.*?)</style>", page, re.S).group(1)
    rules = dict((sel.strip(), body) for sel, body in re.findall(r"([^{}]+)\{([^}]*)\}", style))
    # Shrunk only to the window: no cap below the figure's own width, on it or around it.
    assert "max-width: 100%" in rules["figure img"] and "display: block" in rules["figure img"]
    assert "max-width" not in rules["body"]
    assert not re.search(r"max-width:\s*\d+(\.\d+)?(em|px)", rules["figure img"])
    assert "38em" not in page


def _metric_columns(header, swept):
    assert header[: 1 + len(swept)] == ["id", *swept]
    return header[1 + len(swept):]


def test_report_summary_table_has_the_key_metrics_first(gamma_sweep):
    _, parsed, _ = _page(gamma_sweep)
    written = [c for c in pd.read_csv(gamma_sweep / "summary.csv").columns
               if "." not in c and c not in ("id", "index", "name", "file")]
    key = ["speedup", "predicted_speedup", "end_to_end_speedup", "tokens_per_second",
           "acceptance_rate", "alpha_estimate", "emitted_per_step"]
    metrics = _metric_columns(parsed.headers[0], ["decode.gamma"])
    assert metrics == key + [c for c in written if c not in key]


def test_report_summary_table_of_version_2_files_lacks_only_end_to_end_speedup(tmp_path):
    results_fixture.write_sweep(tmp_path / "results", name="old", sweep={"decode.gamma": [1, 2]},
                                schema_version=2)
    _, parsed, _ = _page(tmp_path / "results")
    metrics = _metric_columns(parsed.headers[0], ["decode.gamma"])
    assert metrics[:6] == ["speedup", "predicted_speedup", "tokens_per_second",
                           "acceptance_rate", "alpha_estimate", "emitted_per_step"]
    assert "end_to_end_speedup" not in metrics and "prefill_seconds" not in metrics
