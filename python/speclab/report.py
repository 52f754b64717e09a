"""`speclab report RESULTS_DIR -o report.html`: one self-contained HTML page of a results
directory (a `speclab run` --out directory, or a root of such directories and `speclab verify`
reports): the standard figures inline as base64 PNG (drawn by speclab.plot.render, the same figures
`speclab plot` writes, and for each one the results cannot give, why), each shown at its natural
width (shrunk only to fit a narrower window) and a link that opens it at full size; each sweep's
summary table (the key metrics first), its resolved config, the machine and instruction sets it
ran on, and the verify verdicts. The page loads nothing from anywhere else.

    PYTHONPATH=python /usr/bin/python3 -m speclab.report RESULTS_DIR -o report.html [--json] [--quiet]

Exit status: 0 written; 1 a failure (no matplotlib); 2 bad input (no results, an unusable -o, a
summary or result file cut short or of another tool: the message names it and says what is
wrong).
"""

import base64
import html
import json
import os
import sys
import tempfile
from pathlib import Path

from speclab import plot as speclab_plot

# Root attributes of a run file that say where and how it was measured (`speclab schema`).
MACHINE_ATTRIBUTES = ("host", "cpu_model", "build_isa", "cpu_isa", "threads", "omp_wait_policy",
                      "speclab_version", "git_commit", "hdf5_version", "library_versions")
# The columns of summary.csv that are not config keys (dotted) or metrics.
SUMMARY_META = ("id", "index", "name", "file")
# The verdict columns of a `speclab verify` report (`speclab schema`: speclab.verify).
VERIFY_COLUMNS = ("pass", "p_value", "samples", "length", "support", "tv_estimate", "tv_upper_99",
                  "epsilon_detectable", "draft_exercised", "plain_p_value")

# Figures at their natural size (matplotlib's pixels, wide for multi-panel figures), shrunk only
# to fit a narrower window, where the link around each opens it whole; the text keeps a readable
# measure.
STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; }
h1, h2, h3, p, ul { max-width: 80em; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.85em; }
th, td { border: 1px solid #bbb; padding: 0.2em 0.5em; text-align: right; }
th { background: #eee; } td.text { text-align: left; }
div.wide { overflow-x: auto; }
pre { background: #f6f6f6; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
figure { display: block; margin: 1em 0 1.5em; }
figure a.full { display: inline-block; max-width: 100%; }
figure img { display: block; max-width: 100%; height: auto; }
figcaption { font-size: 0.85em; color: #555; }
.pass { color: #060; font-weight: bold; } .fail { color: #a00; font-weight: bold; }
"""
# Browsers refuse to open a link to a data: URL as a page (Chromium since 60, for any type), so a
# click on a figure opens a blob: URL of the same bytes; without script the link is followed as
# written (Firefox opens data: images).
SCRIPT = """
document.addEventListener("click", event => {
  const link = event.target.closest && event.target.closest("a.full");
  if (!link || event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey) return;
  const href = link.getAttribute("href");
  const comma = href.indexOf(",");
  const type = href.slice(5, href.indexOf(";"));
  const bytes = Uint8Array.from(atob(href.slice(comma + 1)), c => c.charCodeAt(0));
  const url = URL.createObjectURL(new Blob([bytes], {type: type}));
  if (window.open(url, "_blank")) event.preventDefault();
});
"""
# The summary columns shown first, after the point's id and swept keys: what a reader compares
# across points. end_to_end_speedup is absent from older summaries.
KEY_METRICS = ("speedup", "predicted_speedup", "end_to_end_speedup", "tokens_per_second",
               "acceptance_rate", "alpha_estimate", "emitted_per_step")


class ReportError(Exception):
    """Bad input: the message names what was wrong; exit status 2."""


def _cell(value):
    if isinstance(value, float):
        return "" if value != value else f"{value:.6g}"
    return str(value)


def _table(columns, rows, classes=None):
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = []
    for row in rows:
        cells = []
        for c, v in zip(columns, row):
            text = _cell(v)
            numeric = isinstance(v, (int, float)) and not isinstance(v, bool)
            cls = "" if numeric else ' class="text"'
            if classes and c in classes:
                cls = f' class="{classes[c](v)}"'
            cells.append(f"<td{cls}>{html.escape(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<div class=\"wide\"><table><tr>{head}</tr>{''.join(body)}</table></div>"


def _figures(results, log):
    """(list of (name, base64 PNG), list of "NAME: reason" not drawn) from speclab.plot.render."""
    not_drawn = []

    def collect(line):
        text = line.strip()
        if text.startswith("not drawn: "):
            not_drawn.append(text[len("not drawn: "):])

    with tempfile.TemporaryDirectory(prefix="speclab-report-") as tmp:
        written = speclab_plot.render(results, tmp, log=collect)
        figures = [(Path(p).stem, base64.b64encode(Path(p).read_bytes()).decode("ascii"))
                   for p in written]
    for name, _ in figures:
        log(f"  figure {name}")
    return figures, not_drawn


def _sweep_section(directory):
    """(sweep name, HTML section): the summary table (id, swept keys, KEY_METRICS, then the
    other metrics in summary.csv's order), the machine, the resolved config of the first point."""
    df = speclab_plot.load_summary(directory)
    first = speclab_plot.load_result(os.path.join(directory, df["file"].iloc[0]))
    attrs = first["attrs"]
    name = str(df["name"].iloc[0]) if len(df) else directory.name
    swept = [k for k in str(attrs.get("swept_keys", "")).split(",") if k]
    metrics = [c for c in df.columns if "." not in c and c not in SUMMARY_META]
    metrics = ([c for c in KEY_METRICS if c in metrics]
               + [c for c in metrics if c not in KEY_METRICS])
    columns = ["id"] + [k for k in swept if k in df.columns] + metrics
    rows = [[row[c] for c in columns] for _, row in df.iterrows()]
    machine = [(k, attrs[k]) for k in MACHINE_ATTRIBUTES if k in attrs]
    parts = [f"<h2>Sweep {html.escape(name)}</h2>",
             f"<p>{len(df)} point(s) in <code>{html.escape(str(directory))}</code>; swept: "
             f"{html.escape(', '.join(swept) or 'nothing')}.</p>",
             "<h3>Summary</h3>", _table(columns, rows),
             "<h3>Machine and instruction sets</h3>",
             _table(["attribute", "value"], machine),
             f"<h3>Resolved config</h3><p>Point <code>{html.escape(str(attrs.get('id')))}"
             f"</code>; the other points differ in the swept keys only.</p>",
             f"<pre>{html.escape(str(attrs.get('config_toml', '')))}</pre>"]
    return name, "\n".join(parts)


def _verify_section(reports):
    columns = ["report"] + list(VERIFY_COLUMNS)
    rows = []
    for rep in reports:
        rows.append([rep["label"]] + [rep.get(c, "") for c in VERIFY_COLUMNS])

    def verdict(value):
        return "pass" if value == 1 else "fail"

    return ("<h2>Distribution checks (speclab verify)</h2>"
            "<p>pass = 1: no difference from the target's exact law found.</p>"
            + _table(columns, rows, {"pass": verdict}))


def build_report(results, log=print):
    """The HTML text of the report of RESULTS and a summary dict (figures, not_drawn, sweeps,
    verify_reports)."""
    results = Path(results)
    dirs = speclab_plot.run_dirs(results)
    report_paths = speclab_plot.verify_reports(results)
    if not dirs and not report_paths:
        raise ReportError(f"{results} holds no runs (no summary.csv in it or its "
                          f"subdirectories, no `speclab verify` report); expected the --out "
                          f"directory of `speclab run` or a root of such directories")
    try:
        figures, not_drawn = _figures(results, log)
        sweeps = [_sweep_section(d) for d in dirs]
        reports = [speclab_plot.load_verify(p) for p in report_paths]
    except KeyError as e:
        raise ReportError(f"{results}: a summary or result file lacks {e.args[0]!r}; expected "
                          "the output of `speclab run` (`speclab schema` lists its layout)") from e
    except (speclab_plot.ResultError, OSError, ValueError) as e:
        raise ReportError(str(e)) from e
    body = [f"<h1>speclab report: {html.escape(str(results))}</h1>"]
    body.append("<h2>Figures</h2>")
    body += [f'<figure><a class="full" href="data:image/png;base64,'
             f'{data}" target="_blank" title="{html.escape(name)} at full size">'
             f'<img alt="{html.escape(name)}" src="data:image/png;base64,{data}"></a>'
             f"<figcaption>{html.escape(name)} (click to open at full size)</figcaption>"
             f"</figure>" for name, data in figures]
    if not figures:
        body.append("<p>No figure fits these results.</p>")
    if not_drawn:
        body.append("<p>Not drawn:</p><ul>" + "".join(f"<li>{html.escape(n)}</li>"
                                                     for n in not_drawn) + "</ul>")
    body += [section for _, section in sweeps]
    if reports:
        body.append(_verify_section(reports))
    page = ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
            f"<title>speclab report: {html.escape(results.name)}</title>"
            f"<style>{STYLE}</style></head><body>\n" + "\n".join(body)
            + f"\n<script>{SCRIPT}</script>\n</body></html>\n")
    summary = {"figures": [name for name, _ in figures], "not_drawn": not_drawn,
               "sweeps": [name for name, _ in sweeps], "verify_reports": len(reports)}
    return page, summary


def write_atomically(path, text):
    partial = Path(str(path) + ".partial")
    with open(partial, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(partial, path)


def main(argv):
    import argparse

    parser = argparse.ArgumentParser(prog="speclab report",
                                     description="Write one self-contained HTML page of a "
                                                 "results directory.")
    parser.add_argument("results_dir")
    parser.add_argument("-o", "--out", required=True)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("-q", "--quiet", action="store_true")
    args = parser.parse_args(argv)
    log = (lambda line: None) if args.quiet or args.json else print
    results, out = Path(args.results_dir), Path(args.out)
    if not results.is_dir():
        print(f"speclab report: results directory {results} does not exist; run e.g. "
              f"`speclab run experiments/configs/quickstart.toml` first", file=sys.stderr)
        return 2
    if out.is_dir():
        print(f"speclab report: -o {out} is a directory; expected the HTML file to write",
              file=sys.stderr)
        return 2
    if not out.parent.is_dir() and str(out.parent) != "":
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            print(f"speclab report: -o {out}: cannot create its directory ({e.strerror}); "
                  f"choose another -o", file=sys.stderr)
            return 2
    if not speclab_plot.use_agg("speclab report"):
        return 1
    log(f"speclab report: {results} -> {out}")
    try:
        page, summary = build_report(results, log)
    except ReportError as e:
        print(f"speclab report: {e}", file=sys.stderr)
        return 2
    try:
        write_atomically(out, page)
    except OSError as e:
        print(f"speclab report: -o {out}: cannot write ({e.strerror}); choose another -o",
              file=sys.stderr)
        return 2
    summary = {"report": str(out), **summary}
    if args.json:
        print(json.dumps(summary))
    log(f"speclab report: wrote {out} ({len(summary['figures'])} figures, "
        f"{len(summary['sweeps'])} sweep(s), {summary['verify_reports']} verify report(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
