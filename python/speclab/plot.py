"""The standard speclab figures, each a measurement beside its closed form or prediction (docs/verifiers.md
V1: per-position acceptance α, accepted length P(n = k) = α^k (1 − α), E = (1 − α^{γ+1})/(1 − α)
with α = Σ min(p, q)). Shared by the notebooks (notebooks/) and `speclab plot RESULTS_DIR -o DIR`,
which runs `/usr/bin/python3 -m speclab.plot render RESULTS_DIR -o DIR`.

Reads only what speclab.io reads (HDF5 result files, summary.csv), the reports of
`speclab verify` (HDF5, schema "speclab.verify") and, for the planner's prediction, the JSON that
`speclab plan --validate --json` prints, saved as plan_validate.json in a run directory. Needs
h5py, numpy, pandas and matplotlib (scipy for the power curves), not the compiled extension.
"""

import glob
import json
import math
import os
import sys
from pathlib import Path

import h5py
import numpy as np

from . import io as speclab_io

Z95 = 1.959963984540054
VERIFY_SCHEMA = "speclab.verify"
# The subdirectories of the results root that the notebooks read (notebooks/README.md).
EXPERIMENTS = ("quickstart", "acceptance_vs_gamma", "acceptance_vs_temperature",
               "speedup_vs_batch", "method_comparison", "verify")


# ---------------------------------------------------------------------------------------------
# Finding results

def repo_root(start=None):
    """The source tree: the first of `start` (default: the working directory) and its parents
    that holds python/speclab/ (nbconvert runs a notebook in notebooks/); else the working
    directory."""
    here = Path(start or os.getcwd()).resolve()
    for p in [here, *here.parents]:
        if (p / "python" / "speclab" / "__init__.py").exists():
            return p
    return here


def results_root(repo=None):
    """$SPECLAB_RESULTS, or results/; a relative path is taken from the repository root."""
    root = Path(os.environ.get("SPECLAB_RESULTS", "results"))
    if not root.is_absolute():
        root = (repo or repo_root()) / root
    return root


def has_summary(directory):
    d = Path(directory)
    return (d / "summary.csv").exists() or bool(glob.glob(str(d / "summary.shard-*-of-*.csv")))


def run_dir(root, name):
    """The run directory of experiment `name` under the results root: ROOT/NAME when it holds a
    summary, else ROOT itself when it is that experiment's run directory, else None."""
    root = Path(root)
    if has_summary(root / name):
        return root / name
    if has_summary(root):
        df = load_summary(root)
        if len(df) and (df["name"] == name).all():
            return root
    return None


def run_dirs(root):
    """Every run directory at ROOT: ROOT itself if it holds a summary, and its subdirectories
    that do (sorted)."""
    root = Path(root)
    found = [root] if has_summary(root) else []
    if root.is_dir():
        found += sorted(p for p in root.iterdir() if p.is_dir() and has_summary(p))
    return found


def verify_reports(root, unreadable=None):
    """Paths of `speclab verify` reports at ROOT, ROOT/verify and ROOT's subdirectories. The .h5
    files there that HDF5 cannot open (cut short, not HDF5) are appended to `unreadable` when it
    is a list: any of them may be a report."""
    root = Path(root)
    candidates = sorted(set(glob.glob(str(root / "*.h5")) + glob.glob(str(root / "*" / "*.h5"))))
    out = []
    for path in candidates:
        try:
            with h5py.File(path, "r") as f:
                schema = f.attrs.get("schema")
        except OSError:
            if unreadable is not None:
                unreadable.append(Path(path))
            continue
        if isinstance(schema, bytes):
            schema = schema.decode()
        if schema == VERIFY_SCHEMA:
            out.append(Path(path))
    return out


# The attributes of a verify report that the figure and the report's table read.
VERIFY_ATTRIBUTES = ("pass", "p_value", "plain_p_value", "statistic", "bins", "samples", "length",
                     "tv_estimate", "tv_upper_99", "epsilon_detectable")


def load_verify(path):
    """A `speclab verify` report: observed and expected counts plus its attributes. Raises
    ValueError naming PATH when it is of another schema or lacks a dataset or attribute the
    figure reads."""
    with h5py.File(path, "r") as f:
        rep = {k: speclab_io._decode(v) for k, v in f.attrs.items()}
        if rep.get("schema") != VERIFY_SCHEMA:
            raise ValueError(f"{path}: schema is {rep.get('schema')!r}; expected {VERIFY_SCHEMA!r}")
        missing = [f"dataset {d}" for d in ("observed", "expected") if d not in f]
        missing += [f"attribute {a}" for a in VERIFY_ATTRIBUTES if a not in rep]
        if missing:
            raise ValueError(f"{path}: no {', '.join(missing)}; expected a `speclab verify` "
                             "report written whole (`speclab schema` lists its layout)")
        rep["observed"] = f["observed"][()].astype(np.int64)
        rep["expected"] = f["expected"][()].astype(np.float64)
    # `expected` holds the exact law (probabilities); the figures compare counts.
    if abs(rep["expected"].sum() - 1.0) < 1e-6:
        rep["expected"] = rep["expected"] * float(rep["samples"])
    rep["path"] = str(path)
    rep["config"] = speclab_io._parse_toml(rep.get("config_toml", "")) or {}
    rep["label"] = Path(path).stem
    return rep


def load_plan(directory):
    """plan_validate.json (the output of `speclab plan --validate --json`) in DIRECTORY, or None.
    Raises ResultError naming the file when it is not JSON."""
    path = Path(directory) / "plan_validate.json"
    if not path.exists() or path.stat().st_size == 0:
        return None
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise ResultError(f"{path}: cannot be read as the JSON of `speclab plan --validate "
                          f"--json` ({e}); write it again or delete it") from e


def plan_summary(plan):
    """One line on what plan_validate.json calibrated: α teacher-forced on the plain runs' text,
    the α each batch's prediction used at the planner's γ* (from the rounds verified on that text,
    one per batch size), and the machine it ran on."""
    m = plan.get("machine", {})
    machine = (m if isinstance(m, str) else
               f"{m.get('cpu', '?')} (build {m.get('build_isa', '?')}, "
               f"CPU {m.get('cpu_isa', '?')}, {m.get('threads', '?')} threads)")
    per_batch = []
    for row in plan.get("rows", []):
        cells = [c for c in row.get("by_gamma", []) if c.get("gamma") == row.get("gamma")]
        if cells:
            alpha = float(cells[0]["alpha_predicted"])
            per_batch.append(f"b{row['batch']} γ{row['gamma']} {alpha:.3f}")
    return (f"planner: α = {float(plan['alpha_teacher_forced']):.3f} teacher-forced over "
            f"{plan['alpha_rows']} tokens; α per batch at γ*: {', '.join(per_batch) or 'none'}; "
            f"machine {machine}")


def _given_dir(directory, repo):
    given = directory if directory is not None else os.environ.get("SPECLAB_RUN_DIR") or None
    if given is None:
        return None
    d = Path(given)
    return d if d.is_absolute() else (repo or repo_root()) / d


def notebook_run_dirs(names, directory=None, repo=None):
    """The run directories a notebook reads, as {label: path}: {D.name: D} for the directory D
    given as `directory` or else as $SPECLAB_RUN_DIR (the --out directory of any sweep, whatever
    its experiment's name; a relative path is taken from the repository root); when neither is,
    each experiment of `names` that has a directory under the results root
    ({name: run_dir(results_root(repo), name)}). Raises ResultError when a given directory holds
    no summary."""
    d = _given_dir(directory, repo)
    if d is None:
        root = results_root(repo)
        found = {name: run_dir(root, name) for name in names}
        return {name: path for name, path in found.items() if path is not None}
    if not has_summary(d):
        source = "SPECLAB_RUN_DIR" if directory is None else "RUN_DIR"
        raise ResultError(f"{source} is {d}, which holds no summary.csv; expected the --out "
                          f"directory of `speclab run`")
    return {d.name: d}


def notebook_run_dir(name, directory=None, repo=None):
    """The one run directory of a notebook that reads experiment `name` (notebook_run_dirs):
    the given directory, else `name`'s directory under the results root, else None."""
    return next(iter(notebook_run_dirs([name], directory, repo).values()), None)


def notebook_verify_dir(directory=None, repo=None):
    """The folder of `speclab verify` reports a notebook reads: `directory` when given, else
    $SPECLAB_RUN_DIR when set, else verify/ under the results root (the root itself when it has
    no verify/). A relative path is taken from the repository root."""
    d = _given_dir(directory, repo)
    if d is None:
        root = results_root(repo)
        d = root / "verify" if (root / "verify").is_dir() else root
    return d


class ResultError(Exception):
    """A result file or summary that cannot be read (truncated, corrupt, of another schema):
    `speclab plot` prints the message, which names the file, and exits with status 2."""


# The summary columns the figures read besides speclab.io.SUMMARY_COLUMNS: config keys every
# resolved config has and the metric every speclab summary carries (empty without a baseline).
PLOT_COLUMNS = ("verifier.method", "decode.gamma", "decode.batch_size", "sampling.temperature",
                "target.model", "draft.model", "speedup")


def _summary_name(directory):
    merged = os.path.join(directory, "summary.csv")
    if os.path.exists(merged):
        return merged
    return os.path.join(directory, "summary.shard-*-of-*.csv")


def load_summary(directory):
    """The summary of a run directory (speclab.io.load_summary) checked for the columns the
    figures read (PLOT_COLUMNS). Raises ResultError naming the file and what is wrong with it."""
    try:
        df = speclab_io.load_summary(directory)
    except speclab_io.SummaryError as e:
        raise ResultError(str(e)) from e
    except (OSError, ValueError) as e:
        raise ResultError(f"{_summary_name(directory)}: cannot be read as a summary ({e})") from e
    missing = [c for c in PLOT_COLUMNS if c not in df.columns]
    if missing:
        what = ", ".join(repr(c) for c in missing)
        raise ResultError(f"{_summary_name(directory)}: no {what} column"
                          f"{'s' if len(missing) > 1 else ''}; expected "
                          f"{speclab_io.SUMMARY_LAYOUT}")
    return df


def load_result(path):
    """One point's result file (speclab.io.load_run); raises ResultError naming PATH when it is
    truncated, corrupt or of another schema."""
    try:
        return speclab_io.load_run(path)
    except (OSError, KeyError, ValueError) as e:
        raise ResultError(f"{path}: cannot be read as a speclab result ({e}); rerun its "
                          f"point (`speclab run ... --resume` after deleting it)") from e


def load_runs(directory, df=None):
    """Every point of a run directory: (summary DataFrame, list of load_run dicts in row order).
    Raises ResultError naming the file that cannot be read."""
    if df is None:
        df = load_summary(directory)
    return df, [load_result(os.path.join(directory, f)) for f in df["file"]]


# ---------------------------------------------------------------------------------------------
# Statistics and closed forms

def wilson(k, n, z=Z95):
    """Wilson score interval of k successes in n trials (arrays), NaN where n = 0."""
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / n
        denom = 1 + z * z / n
        centre = (p + z * z / (2 * n)) / denom
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return centre - half, centre + half


def yerr(centre, lo, hi):
    """Error-bar half-lengths [centre − lo, hi − centre], clipped at 0 (rounding at p = 0 or 1)."""
    centre = np.asarray(centre, dtype=float)
    return [np.maximum(centre - np.asarray(lo, dtype=float), 0),
            np.maximum(np.asarray(hi, dtype=float) - centre, 0)]


def mean_ci(x, z=Z95):
    """Mean of x with a normal-approximation 95% interval half-width (0 for fewer than 2)."""
    x = np.asarray(x, dtype=float)
    if x.size < 2:
        return float(np.mean(x)) if x.size else math.nan, 0.0
    return float(x.mean()), float(z * x.std(ddof=1) / math.sqrt(x.size))


def expected_emitted(alpha, gamma):
    """E[tokens per step] = (1 − α^{γ+1}) / (1 − α) for i.i.d. acceptance α (γ+1 at α = 1)."""
    alpha = np.asarray(alpha, dtype=float)
    gamma = np.asarray(gamma, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        e = (1 - alpha ** (gamma + 1)) / (1 - alpha)
    return np.where(np.isclose(alpha, 1.0), gamma + 1, e)


def accepted_length_law(alpha, gamma):
    """P(n = k), k = 0..γ: α^k (1 − α) for k < γ and α^γ for k = γ."""
    k = np.arange(gamma + 1)
    law = alpha ** k * (1 - alpha)
    law[gamma] = alpha ** gamma
    return law


def ragged_length_law(alpha, drafted, gamma):
    """The accepted-length law averaged over the steps' own draft lengths (a request near its
    token budget drafts fewer than γ): the closed form for the histogram the run recorded."""
    drafted = np.asarray(drafted)
    law = np.zeros(gamma + 1)
    for d, count in zip(*np.unique(drafted, return_counts=True)):
        law[: d + 1] += count * accepted_length_law(alpha, int(d))
    return law / max(drafted.size, 1)


def run_alpha(run):
    """α from Σ min(p, q) over the point's tested positions (alpha_estimate)."""
    return float(run["attrs"]["alpha_estimate"])


def chi2_noncentrality(bins, alpha=1e-6, power=0.99):
    """λ with P(χ²_{bins−1}(λ) ≥ c_α) = power (core/stats/stats.hpp chi_square_noncentrality); needs
    scipy, returns None without it."""
    try:
        from scipy import optimize, stats
    except ImportError:
        return None
    df = max(int(bins) - 1, 1)
    crit = stats.chi2.isf(alpha, df)
    return optimize.brentq(lambda lam: stats.ncx2.sf(crit, df, lam) - power, 1e-9, 1e7)


# ---------------------------------------------------------------------------------------------
# Figures (each returns a matplotlib Figure)

def _plt():
    import matplotlib.pyplot as plt
    return plt


def _label(row, keys):
    return ", ".join(f"{k.split('.')[-1]} = {row[k]}" for k in keys)


def _colors(n):
    plt = _plt()
    cmap = plt.get_cmap("viridis" if n > 6 else "tab10")
    return [cmap(i / max(n - 1, 1)) if n > 6 else cmap(i) for i in range(n)]


def fig_position_acceptance(df, runs, by="sampling.temperature"):
    """Per-position acceptance (accepted / reached, pooled over γ within each value of `by`) with
    95% Wilson intervals, beside α = Σ min(p, q) / positions (dashed): the i.i.d. closed form
    says every position is accepted at rate α."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.0), constrained_layout=True)
    groups = sorted(df[by].unique())
    for color, value in zip(_colors(len(groups)), groups):
        idx = [i for i in range(len(df)) if df[by].iloc[i] == value
               and "position/reached" in runs[i]]
        if not idx:
            continue
        depth = max(runs[i]["position/reached"].size for i in idx)
        reached = np.zeros(depth)
        accepted = np.zeros(depth)
        sum_min = tested = 0.0
        for i in idx:
            r = runs[i]
            n = r["position/reached"].size
            reached[:n] += r["position/reached"]
            accepted[:n] += r["position/accepted"]
            sum_min += float(r["attrs"]["alpha_sum_min"])
            tested += float(r["attrs"]["tested_positions"])
        keep = reached > 0
        pos = np.arange(1, depth + 1)[keep]
        rate = accepted[keep] / reached[keep]
        lo, hi = wilson(accepted[keep], reached[keep])
        name = by.split(".")[-1]
        ax.errorbar(pos, rate, yerr=yerr(rate, lo, hi), fmt="o-", color=color, ms=4,
                    capsize=2, label=f"{name} = {value}: measured (95% Wilson)")
        ax.axhline(sum_min / tested, color=color, ls="--", lw=1.2,
                   label=f"{name} = {value}: α = Σ min(p, q) = {sum_min / tested:.3f}")
    ax.set_xlabel("draft position i")
    ax.set_ylabel("P(position i accepted | reached)")
    ax.set_ylim(0, 1.02)
    ax.set_title("Per-position acceptance, pooled over γ")
    ax.legend(fontsize=7, loc="lower left")
    ax.grid(alpha=0.3)
    return fig


def fig_accepted_length(df, runs, max_panels=4):
    """Accepted-length distribution P(n = k) of up to `max_panels` points (measured, 95% Wilson)
    beside the closed form α^k (1 − α) / α^γ at α = Σ min(p, q), averaged over the steps' own
    draft lengths."""
    plt = _plt()
    idx = [i for i in range(len(df)) if "steps/accepted" in runs[i]
           and "accepted_length_histogram" in runs[i]]
    if len(idx) > max_panels:
        idx = [idx[int(round(j))] for j in np.linspace(0, len(idx) - 1, max_panels)]
    fig, axes = plt.subplots(1, len(idx), figsize=(3.2 * len(idx), 3.2), squeeze=False,
                             constrained_layout=True, sharey=True)
    swept = [k for k in ("decode.gamma", "sampling.temperature", "verifier.method",
                         "draft.model", "decode.batch_size") if df[k].nunique() > 1] or ["decode.gamma"]
    for ax, i in zip(axes[0], idx):
        r = runs[i]
        gamma = int(r["accepted_length_histogram"].size - 1)
        counts = np.bincount(r["steps/accepted"], minlength=gamma + 1)[: gamma + 1]
        total = counts.sum()
        lo, hi = wilson(counts, total)
        k = np.arange(gamma + 1)
        p = counts / total
        alpha = run_alpha(r)
        law = ragged_length_law(alpha, r["steps/drafted"], gamma)
        ax.bar(k, p, color="C0", alpha=0.55, label="measured")
        ax.errorbar(k, p, yerr=yerr(p, lo, hi), fmt="none", ecolor="C0", capsize=2,
                    label="95% Wilson")
        ax.plot(k, law, "o--", color="C3", ms=4, label=f"closed form, α = {alpha:.3f}")
        ax.set_title(_label(df.iloc[i], swept) + f"\n{total} steps", fontsize=8)
        ax.set_xticks(k if gamma <= 10 else k[:: int(math.ceil(gamma / 10))])
        ax.set_xlabel("accepted draft tokens n per step")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("P(n = k)")
    axes[0][0].legend(fontsize=7, loc="upper left")
    return fig


def emitted_table(df, runs):
    """Per point: measured emitted tokens per step with a 95% interval, and the closed form
    (1 − α^{γ+1})/(1 − α) at α = Σ min(p, q), plain and averaged over the steps' draft lengths."""
    rows = []
    for i, r in enumerate(runs):
        if "steps/emitted" not in r:
            continue
        mean, half = mean_ci(r["steps/emitted"])
        alpha = run_alpha(r)
        gamma = int(df["decode.gamma"].iloc[i])
        drafted = r["steps/drafted"]
        d, c = np.unique(drafted, return_counts=True)
        ragged = float(np.sum(c * expected_emitted(alpha, d)) / max(drafted.size, 1))
        rows.append(dict(point=df["id"].iloc[i], gamma=gamma, alpha=alpha,
                         temperature=df["sampling.temperature"].iloc[i],
                         measured=mean, ci95=half, closed_form=float(expected_emitted(alpha, gamma)),
                         closed_form_ragged=ragged, steps=int(drafted.size)))
    import pandas as pd
    return pd.DataFrame(rows)


def fig_emitted_vs_gamma(df, runs):
    """Emitted tokens per step against γ, one series per temperature: measured mean with its 95%
    interval, the closed form at the points' own α (×, averaged over ragged draft lengths) and the
    curve (1 − α^{γ+1})/(1 − α) at the series' pooled α."""
    plt = _plt()
    table = emitted_table(df, runs)
    fig, ax = plt.subplots(figsize=(6.4, 4.0), constrained_layout=True)
    temps = sorted(table["temperature"].unique())
    for color, t in zip(_colors(len(temps)), temps):
        s = table[table["temperature"] == t].sort_values("gamma")
        ax.errorbar(s["gamma"], s["measured"], yerr=s["ci95"], fmt="o", color=color, ms=5,
                    capsize=3, label=f"T = {t}: measured (95% CI)")
        ax.plot(s["gamma"], s["closed_form_ragged"], "x", color=color, ms=7,
                label=f"T = {t}: closed form at each point's α")
        alpha = float(np.average(s["alpha"], weights=s["steps"]))
        g = np.linspace(1, s["gamma"].max(), 200)
        ax.plot(g, expected_emitted(alpha, g), "--", color=color, lw=1.2,
                label=f"T = {t}: (1 − α^(γ+1))/(1 − α), α = {alpha:.3f}")
    ax.set_xlabel("draft length γ (tokens per step)")
    ax.set_ylabel("emitted tokens per step")
    ax.set_title("Tokens per verification step against γ")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return fig


def fig_alpha_vs_temperature(df):
    """Measured acceptance rate (95% Wilson, summary columns) against temperature, beside
    α = Σ min(p, q) (the rate the closed form predicts)."""
    plt = _plt()
    s = df.dropna(subset=["acceptance_rate"]).sort_values("sampling.temperature")
    fig, ax = plt.subplots(figsize=(6.4, 4.0), constrained_layout=True)
    for color, (g, part) in zip(_colors(s["decode.gamma"].nunique()), s.groupby("decode.gamma")):
        t = part["sampling.temperature"]
        y = part["acceptance_rate"]
        ax.errorbar(t, y, yerr=yerr(y, part["acceptance_rate_lower95"],
                                   part["acceptance_rate_upper95"]),
                    fmt="o", color=color, capsize=3, label=f"γ = {g}: measured (95% Wilson)")
        ax.plot(t, part["alpha_estimate"], "--", color=color, label=f"γ = {g}: Σ min(p, q)")
    ax.set_xlabel("sampling temperature T")
    ax.set_ylabel("acceptance rate α")
    ax.set_ylim(0, 1.02)
    ax.set_title(f"Acceptance against temperature ({s['target.model'].iloc[0]} / "
                 f"{s['draft.model'].iloc[0]})")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return fig


MATCH_METHODS = ("coupled", "sampled-match")


def fig_price_of_reproducibility(df):
    """What a seed-reproducible verifier costs, against temperature, one row of panels per model
    pair: measured acceptance (95% Wilson) of each verifier in the sweep beside the closed forms
    per position (V1's Σ min(p, q), coupled's exact agreement and its bound (1 − TV)/(1 + TV),
    sampled-match's Σ p·q), emitted tokens per step and the measured speedup. Filled markers:
    every request's tokens equal plain decoding's (identical_to_plain = 1)."""
    plt = _plt()
    s = df.dropna(subset=["acceptance_rate"]).sort_values("sampling.temperature").copy()
    s["pair"] = s["target.model"].astype(str) + " / " + s["draft.model"].astype(str)
    pairs = list(dict.fromkeys(s["pair"]))
    # One colour per method in every row: the others first, then coupled, then sampled-match.
    methods = sorted(set(s["verifier.method"]),
                     key=lambda m: (m in MATCH_METHODS, MATCH_METHODS.index(m)
                                    if m in MATCH_METHODS else 0, m))
    has_speedup = bool(s["speedup"].notna().any())
    columns = 3 if has_speedup else 2
    fig, grid = plt.subplots(len(pairs), columns, figsize=(4.7 * columns, 3.8 * len(pairs)),
                             squeeze=False, constrained_layout=True)
    for axes, pair in zip(grid, pairs):
        rows = s[s["pair"] == pair]
        ax_a, ax_e = axes[0], axes[1]
        for color, method in zip(_colors(len(methods)), methods):
            part = rows[rows["verifier.method"] == method]
            if part.empty:
                continue
            t = part["sampling.temperature"]
            same = bool((part.get("identical_to_plain", np.nan) == 1).all())
            face = color if same else "white"
            label = method + (" (= plain decoding's tokens)" if same else "")
            y = part["acceptance_rate"]
            ax_a.errorbar(t, y, yerr=yerr(y, part["acceptance_rate_lower95"],
                                          part["acceptance_rate_upper95"]),
                          fmt="o", color=color, mfc=face, capsize=3, label=f"{label}: measured")
            ax_e.plot(t, part["emitted_per_step"], "o-", color=color, mfc=face, label=label)
            if has_speedup:
                axes[2].plot(t, part["speedup"], "o-", color=color, mfc=face, label=label)
        match = rows[rows["verifier.method"].isin(MATCH_METHODS)]
        if "alpha_coupled" not in rows:  # files written before the match verifiers
            match = match.iloc[0:0]
        closed = (match if len(match) else rows).groupby("sampling.temperature")
        closed = closed.mean(numeric_only=True).reset_index()
        t = closed["sampling.temperature"]
        ax_a.plot(t, closed["alpha_estimate"], "k-", lw=1, label="V1: Σ min(p, q)")
        if len(match):
            ax_a.plot(t, closed["alpha_coupled"], "k--", lw=1,
                      label="coupled: Σ_y 1/Σ_u max(p_u/p_y, q_u/q_y)")
            ax_a.plot(t, closed["alpha_coupled_bound"], "k:", lw=1,
                      label="bound (1 − TV)/(1 + TV)")
            ax_a.plot(t, closed["alpha_sampled_match"], "k-.", lw=1, label="sampled-match: Σ p·q")
        ax_a.set_ylabel("acceptance rate per position")
        ax_a.set_ylim(0, 1.02)
        ax_e.set_ylabel("emitted tokens per step")
        gammas = ", ".join(str(g) for g in sorted(rows["decode.gamma"].unique()))
        ax_a.set_title(f"{pair}, γ = {gammas}", fontsize=9)
        for ax in axes:
            ax.set_xlabel("sampling temperature T")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=6)
        if has_speedup:
            axes[2].axhline(1.0, color="k", lw=0.8)
            axes[2].set_ylabel("measured speedup (× plain tokens/s)")
    fig.suptitle("The price of reproducibility: acceptance, tokens per step and speedup",
                 fontsize=10)
    return fig


def batch_speedups(run):
    """Per-batch measured speedup (speculative tokens/s ÷ plain tokens/s on the same prompts): on
    decode time where the file times the prompt pass apart (schema version 3), as its `speedup`
    is, else on the batches' whole wall time."""
    if "baseline/batches/seconds" not in run:
        return np.array([])
    timed = ("batches/decode_seconds" if "batches/decode_seconds" in run
             and "baseline/batches/decode_seconds" in run else "batches/seconds")
    spec = run["batches/tokens"] / run[timed]
    plain = run["baseline/batches/tokens"] / run["baseline/" + timed]
    return spec / plain


def speedup_table(df, runs, plan=None):
    """Per point: measured speedup (whole point, and the per-batch 95% interval), the verification
    pass's cost r = T(b, γ+1)/T(b, 1) and the draft's c = T_draft(b, 1)/T(b, 1) measured in the
    same run, and the planner's prediction: plan_validate.json's where it has the (batch, γ), else
    the run's own `predicted_speedup` (the planner at the point's measured α on the machine it ran
    on)."""
    predicted = {}
    if plan:
        for row in plan.get("rows", []):
            for cell in row.get("by_gamma", []):
                predicted[(int(row["batch"]), int(cell["gamma"]))] = float(cell["predicted"])
    rows = []
    for i, r in enumerate(runs):
        if "baseline/batches/seconds" not in r:
            continue
        a = r["attrs"]
        b = int(df["decode.batch_size"].iloc[i])
        g = int(df["decode.gamma"].iloc[i])
        per_batch = batch_speedups(r)
        _, half = mean_ci(per_batch)
        # Plain decoding makes one target call per token of its longest request in each batch.
        lengths = r["baseline/sequences/length"]
        plain_calls = sum(int(lengths[j:j + b].max()) for j in range(0, lengths.size, b))
        # Plain decoding's time per call, the prompt pass left out where it is timed apart.
        t1 = float(a.get("baseline_decode_seconds", a["baseline_seconds"])) / max(plain_calls, 1)
        rows.append(dict(batch=b, gamma=g, temperature=float(df["sampling.temperature"].iloc[i]),
                         speedup=float(a["speedup"]), ci95=half,
                         batches=int(per_batch.size),
                         r=float(a["target_seconds"]) / float(a["target_calls"]) / t1,
                         c=float(a["draft_seconds"]) / max(float(a["draft_calls"]), 1) / t1,
                         alpha=run_alpha(r), emitted_per_step=float(a["emitted_per_step"]),
                         predicted=predicted.get((b, g), float(a.get("predicted_speedup", math.nan)))))
    import pandas as pd
    return pd.DataFrame(rows).sort_values(["gamma", "batch"]).reset_index(drop=True)


def fig_speedup_vs_batch(df, runs, plan=None):
    """Left: measured speedup against batch size per γ (95% interval over the point's batches
    where it has several) beside the planner's prediction (`speclab plan --validate`, dashed).
    Right: what drives it, the measured cost of the γ+1-position verification call relative to a
    one-token call, r = T(b, γ+1)/T(b, 1)."""
    plt = _plt()
    table = speedup_table(df, runs, plan)
    fig, (ax, ax_r) = plt.subplots(1, 2, figsize=(10, 4.0), constrained_layout=True)
    gammas = sorted(table["gamma"].unique())
    for color, g in zip(_colors(len(gammas)), gammas):
        s = table[table["gamma"] == g]
        ax.errorbar(s["batch"], s["speedup"], yerr=s["ci95"], fmt="o-", color=color, capsize=3,
                    ms=5, label=f"γ = {g}: measured")
        if s["predicted"].notna().any():
            ax.plot(s["batch"], s["predicted"], "s--", color=color, ms=4, mfc="none",
                    label=f"γ = {g}: planner (this-machine)")
        ax_r.plot(s["batch"], s["r"], "o-", color=color, ms=5, label=f"γ = {g}")
    ax.axhline(1.0, color="k", lw=0.8)
    for a in (ax, ax_r):
        a.set_xscale("log", base=2)
        a.set_xlabel("batch size b (requests per model call)")
        a.grid(alpha=0.3, which="both")
    ax.set_ylabel("speedup over plain decoding (× tokens/s)")
    ax.set_title(_speedup_title("batch size", df, table, plan), fontsize=9)
    ax.legend(fontsize=7)
    ax_r.set_ylabel("r = T(b, γ+1) / T(b, 1)  (verification call ÷ plain call)")
    ax_r.set_title("Measured cost of scoring γ+1 positions", fontsize=9)
    ax_r.legend(fontsize=7)
    return fig


def _speedup_title(axis, df, table, plan):
    """The title of a speedup figure: the pair, and where its prediction comes from."""
    model = f"{df['target.model'].iloc[0]} / {df['draft.model'].iloc[0]}"
    source = ("planner: plan_validate.json" if plan else
              "planner: each point's predicted_speedup at its measured α"
              if table["predicted"].notna().any() else "no planner prediction: measurement only")
    return f"Speedup against {axis} ({model})\n{source}"


def fig_speedup_vs_gamma(df, runs, plan=None):
    """Measured speedup against γ, one series per batch size and temperature: the whole point's
    speedup with the 95% interval over its batches where it has several, beside the planner's
    prediction (plan_validate.json's, else each point's predicted_speedup; dashed) where there
    is one."""
    plt = _plt()
    table = speedup_table(df, runs, plan)
    fig, ax = plt.subplots(figsize=(6.4, 4.0), constrained_layout=True)
    series = sorted(set(zip(table["batch"], table["temperature"])))
    several_b = table["batch"].nunique() > 1
    several_t = table["temperature"].nunique() > 1
    for color, (b, t) in zip(_colors(len(series)), series):
        s = table[(table["batch"] == b) & (table["temperature"] == t)].sort_values("gamma")
        name = ", ".join(([f"b = {b}"] if several_b else []) + ([f"T = {t:g}"] if several_t
                                                                 else []))
        prefix = f"{name}: " if name else ""
        ax.errorbar(s["gamma"], s["speedup"], yerr=s["ci95"], fmt="o-", color=color, capsize=3,
                    ms=5, label=f"{prefix}measured (95% CI over batches)")
        if s["predicted"].notna().any():
            ax.plot(s["gamma"], s["predicted"], "s--", color=color, ms=4, mfc="none",
                    label=f"{prefix}planner (this machine)")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(sorted(table["gamma"].unique()))
    ax.set_xlabel("draft length γ (tokens per step)")
    ax.set_ylabel("speedup over plain decoding (× tokens/s)")
    ax.set_title(_speedup_title("γ", df, table, plan), fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return fig


def is_tree_method(method):
    """Whether a verifier drafts a tree shaped by decode.branches (the registry's tree methods:
    tree-*, kseq, traversal) rather than a chain of γ tokens."""
    method = str(method)
    return method.startswith("tree") or method in ("kseq", "traversal")


def nominal_positions(method, gamma, branches):
    """Positions the target scores per request per call: γ + 1 for chain verifiers, the root plus
    every node, 1 + Σ_d Π_{j≤d} k_j, for tree verifiers with branches [k_1, k_2, ...]."""
    if is_tree_method(method):
        ks = json.loads(branches) if isinstance(branches, str) else list(branches)
        return 1 + int(sum(np.cumprod(ks)))
    return int(gamma) + 1


def method_table(df, runs):
    """Per point: method, pair, target positions scored per request per call (the equal-cost
    axis), emitted tokens per call with its 95% interval, the chain closed form at the point's α
    (token verification, γ = depth) and the measured speedup."""
    rows = []
    for i, r in enumerate(runs):
        if "steps/emitted" not in r:
            continue
        a = r["attrs"]
        mean, half = mean_ci(r["steps/emitted"])
        depth = int(r["position/reached"].size) if "position/reached" in r else int(
            df["decode.gamma"].iloc[i])
        alpha = run_alpha(r)
        rows.append(dict(pair=f"{df['target.model'].iloc[i]} / {df['draft.model'].iloc[i]}",
                         method=df["verifier.method"].iloc[i],
                         gamma=int(df["decode.gamma"].iloc[i]),
                         branches=df["decode.branches"].iloc[i], depth=depth,
                         positions_per_call=nominal_positions(df["verifier.method"].iloc[i],
                                                              df["decode.gamma"].iloc[i],
                                                              df["decode.branches"].iloc[i]),
                         measured_positions_per_step=float(a["target_positions"]) / float(
                             a["steps"]),
                         emitted_per_call=mean, ci95=half, alpha=alpha,
                         token_closed_form=float(expected_emitted(alpha, depth)),
                         speedup=float(a.get("speedup", math.nan))))
    import pandas as pd
    return pd.DataFrame(rows)


def _method_label(row):
    if is_tree_method(row["method"]):
        return f"{row['method']} {row['branches']}"
    return f"{row['method']} γ={row['gamma']}"


def fig_method_comparison(df, runs):
    """Verifiers at equal target cost, one row of panels per model pair: emitted tokens per
    target call (95% CI) with the token-level closed form (1 − α^{d+1})/(1 − α) at depth d
    marked, and the measured speedup; methods grouped by positions scored per call."""
    plt = _plt()
    table = method_table(df, runs)
    pairs = list(dict.fromkeys(table["pair"]))
    fig, axes = plt.subplots(len(pairs), 2, figsize=(11, 3.6 * len(pairs)), squeeze=False,
                             constrained_layout=True)
    for row_axes, pair in zip(axes, pairs):
        s = table[table["pair"] == pair].copy()
        s["cost"] = s["positions_per_call"]
        s = s.sort_values(["cost", "method", "gamma"]).reset_index(drop=True)
        x = np.arange(len(s))
        colors = ["C0" if m in ("token", "block", "greedy", "coupled", "sampled-match")
                  else "C1" if is_tree_method(m)
                  else "C2" for m in s["method"]]
        ax, ax_s = row_axes
        ax.bar(x, s["emitted_per_call"], color=colors, alpha=0.7)
        ax.errorbar(x, s["emitted_per_call"], yerr=s["ci95"], fmt="none", ecolor="k", capsize=2)
        ax.plot(x, s["token_closed_form"], "_", color="C3", ms=18, mew=2,
                label="token closed form (1 − α^(d+1))/(1 − α), d = depth")
        ax.set_ylabel("emitted tokens per target call")
        ax_s.bar(x, s["speedup"], color=colors, alpha=0.7)
        ax_s.axhline(1.0, color="k", lw=0.8)
        ax_s.set_ylabel("measured speedup (× plain tokens/s)")
        for a in (ax, ax_s):
            a.set_xticks(x, [_method_label(r) for _, r in s.iterrows()], rotation=60,
                         ha="right", fontsize=7)
            a.grid(alpha=0.3, axis="y")
            for cost in s["cost"].unique()[1:]:
                a.axvline(s.index[s["cost"] == cost][0] - 0.5, color="grey", ls=":")
        costs = ", ".join(f"{c:g}" for c in s["cost"].unique())
        ax.set_title(f"{pair}: positions scored per call = {costs} (dotted separators)",
                     fontsize=9)
        ax_s.set_title(f"{pair}: blue chain, orange tree, green lossy", fontsize=9)
        ax.legend(fontsize=7, loc="lower right")
    return fig


def power_curve(bins, alpha=1e-6, power=0.99, samples=None):
    """(N, detectable TV ε) with ε = sqrt(λ / (4N)); λ from scipy's ncx2 when present."""
    lam = chi2_noncentrality(bins, alpha, power)
    n = np.logspace(3, 8, 200)
    return n, (np.sqrt(lam / (4 * n)) if lam is not None else None), lam


def fig_verification(reports):
    """For each `speclab verify` report: observed against expected counts per outcome (sorted by
    expected, with the ±1.96√E band), the χ² p-values of speculative and plain sampling against
    the level α = 1e-6, and the power curve ε(N) = sqrt(λ/(4N)) for the bins used."""
    plt = _plt()
    fig, axes = plt.subplots(len(reports), 3, figsize=(13, 3.6 * len(reports)), squeeze=False,
                             constrained_layout=True)
    for (ax_c, ax_p, ax_w), rep in zip(axes, reports):
        obs, exp = rep["observed"], rep["expected"]
        order = np.argsort(exp)[::-1]
        k = np.arange(1, obs.size + 1)
        ax_c.fill_between(k, np.maximum(exp[order] - Z95 * np.sqrt(exp[order]), 0.5),
                          exp[order] + Z95 * np.sqrt(exp[order]), color="C3", alpha=0.2,
                          label="expected ± 1.96√E")
        ax_c.plot(k, exp[order], "-", color="C3", lw=1, label="expected N·P (exact law)")
        ax_c.plot(k, np.maximum(obs[order], 0.5), ".", color="C0", ms=3, label="observed")
        ax_c.set_yscale("log")
        ax_c.set_xlabel(f"outcome (all {obs.size} sequences of {rep['length']} tokens), "
                        "by expected count")
        ax_c.set_ylabel("count")
        method = rep["config"].get("verifier", {}).get("method", "?")
        verdict = "pass" if rep["pass"] else "FAIL"
        ax_c.set_title(f"{rep['label']}: {method}, N = {rep['samples']:,}, {verdict}", fontsize=9)
        ax_c.legend(fontsize=7)
        floor = 1e-20  # p-values below are drawn at the floor and labelled
        raw = [rep["p_value"], rep["plain_p_value"]]
        p = [max(v, floor) for v in raw]
        ax_p.bar([0, 1], p, color=["C1" if rep["pass"] else "C3", "C7"])
        for x, v in enumerate(raw):
            ax_p.annotate(f"p = {v:.3g}" if v >= floor else f"p < {floor:g}", (x, max(v, floor)),
                          ha="center", va="bottom", fontsize=8)
        ax_p.axhline(1e-6, color="k", ls="--", label="level α = 1e-6")
        ax_p.set_yscale("log")
        ax_p.set_ylim(floor / 10, 10)
        ax_p.set_xticks([0, 1], [f"speculative ({method})", "plain sampling"])
        ax_p.set_ylabel("χ² p-value")
        ax_p.set_title(f"χ² = {rep['statistic']:.1f} over {rep['bins']} bins; "
                       f"TV̂ = {rep['tv_estimate']:.4f} (99% ≤ {rep['tv_upper_99']:.4f})",
                       fontsize=9)
        ax_p.legend(fontsize=7)
        n, eps, lam = power_curve(rep["bins"])
        implied = 4 * rep["epsilon_detectable"] ** 2 * rep["samples"]
        if eps is None:  # no scipy: the report's own λ = 4ε²N
            eps, lam = np.sqrt(implied / (4 * n)), implied
        ax_w.loglog(n, eps, "-", color="C0",
                    label=f"ε = √(λ/4N), λ = {lam:.1f} ({rep['bins']} bins, power 0.99, α = 1e-6)")
        ax_w.plot(rep["samples"], rep["epsilon_detectable"], "o", color="C3",
                  label=f"this run: ε = {rep['epsilon_detectable']:.4f} at N = {rep['samples']:,}")
        ax_w.plot(rep["samples"], rep["tv_upper_99"], "v", color="C2",
                  label=f"TV upper bound (99%) = {rep['tv_upper_99']:.4f}")
        ax_w.set_xlabel("samples N")
        ax_w.set_ylabel("detectable total-variation distance ε")
        ax_w.set_title("Power: the smallest TV the test detects", fontsize=9)
        ax_w.legend(fontsize=7)
        ax_w.grid(alpha=0.3, which="both")
    return fig


# ---------------------------------------------------------------------------------------------
# `speclab plot`: every standard figure of a results directory

def sweep_figures(name, df, runs, plan=None):
    """The figures `speclab plot` considers for one sweep, in the order it draws them: a list of
    (figure name, make, reason) with make a callable returning the Figure, or None and the reason
    the sweep's axes cannot give it."""
    spec = [i for i, r in enumerate(runs) if "position/reached" in r]
    if not spec:
        return [(f"{name}_*", None, "no speculative points (plain decoding only: acceptance "
                 "figures need a [draft] model)")]
    sdf = df.iloc[spec].reset_index(drop=True)
    sruns = [runs[i] for i in spec]
    chain = [i for i in range(len(sdf)) if not is_tree_method(sdf["verifier.method"].iloc[i])]
    several_methods = sdf["verifier.method"].nunique() > 1
    has_speedup = bool(sdf["speedup"].notna().any())
    no_speedup = "no speedup: set decode.baseline = true"
    out = []

    def add(figure, make, reason=None):
        out.append((f"{name}_{figure}", make, None if make else reason))

    if several_methods:
        add("method_comparison", (lambda: fig_method_comparison(sdf, sruns)) if has_speedup
            else None, no_speedup)
    else:
        add("method_comparison", None, "one verifier method in the sweep (sweep verifier.method)")
    match_methods = sdf["verifier.method"].isin(MATCH_METHODS).any()
    if not match_methods:
        add("reproducibility", None, "no coupled or sampled-match point in the sweep")
    elif sdf["sampling.temperature"].nunique() <= 1:
        add("reproducibility", None,
            "one temperature in the sweep (sweep sampling.temperature)")
    else:
        add("reproducibility", lambda: fig_price_of_reproducibility(sdf))
    # The acceptance figures pool a sweep's points, which only means something for one chain
    # verifier; a method sweep gets the comparison instead.
    per_method = (f"several verifier methods (compared in {name}_method_comparison)"
                  if several_methods else None if chain
                  else "tree verifiers only (per-depth curves are in the files)")
    varies_gamma = sdf["decode.gamma"].nunique() > 1
    if per_method:
        for figure in ("position_acceptance", "accepted_length", "emitted_vs_gamma",
                       "alpha_vs_temperature"):
            add(figure, None, per_method)
    else:
        add("position_acceptance", lambda: fig_position_acceptance(sdf, sruns))
        add("accepted_length", lambda: fig_accepted_length(sdf, sruns))
        add("emitted_vs_gamma", (lambda: fig_emitted_vs_gamma(sdf, sruns)) if varies_gamma
            else None, "one γ in the sweep (sweep decode.gamma)")
        add("alpha_vs_temperature", (lambda: fig_alpha_vs_temperature(sdf))
            if sdf["sampling.temperature"].nunique() > 1 else None,
            "one temperature in the sweep (sweep sampling.temperature)")
    if sdf["decode.batch_size"].nunique() <= 1:
        add("speedup_vs_batch", None, "one batch size in the sweep (sweep decode.batch_size)")
    else:
        add("speedup_vs_batch", (lambda: fig_speedup_vs_batch(sdf, sruns, plan)) if has_speedup
            else None, no_speedup)
    if per_method:
        add("speedup_vs_gamma", None, per_method)
    elif not varies_gamma:
        add("speedup_vs_gamma", None, "the sweep does not vary decode.gamma")
    else:
        add("speedup_vs_gamma", (lambda: fig_speedup_vs_gamma(sdf, sruns, plan)) if has_speedup
            else None, no_speedup)
    return out


def render(results_dir, figdir, log=print):
    """Writes the standard figures of RESULTS_DIR (a run directory or a root of run directories,
    plus any `speclab verify` reports) as PNG into FIGDIR; returns the paths written. Every figure
    considered and not drawn is logged as `not drawn: NAME: reason`. Raises ResultError naming
    the file when a summary, result file or report cannot be read."""
    plt = _plt()
    figdir = Path(figdir)
    figdir.mkdir(parents=True, exist_ok=True)
    written = []

    def save(fig, name):
        path = figdir / f"{name}.png"
        fig.savefig(path, dpi=150)
        plt.close(fig)
        written.append(path)
        log(f"  {path}")

    def skip(name, reason):
        log(f"  not drawn: {name}: {reason}")

    for d in run_dirs(results_dir):
        df, runs = load_runs(d)
        name = str(df["name"].iloc[0]) if len(df) else d.name
        for figure, make, reason in sweep_figures(name, df, runs, load_plan(d)):
            if make is None:
                skip(figure, reason)
                continue
            try:
                fig = make()
            except KeyError as e:
                # A summary column or result attribute that speclab always writes is missing.
                plt.close("all")
                raise ResultError(f"{d}: {figure} needs {e.args[0]!r}, which its summary or a "
                                  f"result file lacks; expected the output of `speclab run`") from e
            save(fig, figure)
    unreadable = []
    reports = []
    for p in verify_reports(results_dir, unreadable):
        try:
            reports.append(load_verify(p))
        except ValueError as e:  # its message names the file
            raise ResultError(str(e)) from e
        except (OSError, KeyError) as e:
            raise ResultError(f"{p}: cannot be read as a `speclab verify` report ({e})") from e
    if reports:
        save(fig_verification(reports), "verification")
    else:
        reason = f"no `speclab verify` report in {results_dir} or its subdirectories"
        if unreadable:
            reason += (f" ({', '.join(str(u) for u in unreadable)}: not readable as HDF5, cut "
                       f"short or another format)")
        skip("verification", reason)
    return written


def use_agg(program):
    """Selects matplotlib's file backend; False (having said why on stderr, as `program`) when
    this Python has no matplotlib."""
    try:
        import matplotlib
    except ImportError:
        print(f"{program}: this Python has no matplotlib; install python3-matplotlib "
              "(scripts/install-deps.sh) or set SPECLAB_PYTHON", file=sys.stderr)
        return False
    matplotlib.use("Agg")
    return True


def main(argv):
    import argparse

    parser = argparse.ArgumentParser(prog="speclab plot",
                                     description="Render the standard figures of a results "
                                                 "directory as PNG.")
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("render")
    r.add_argument("results_dir")
    r.add_argument("-o", "--out", required=True)
    args = parser.parse_args(argv)
    results = Path(args.results_dir)
    if not results.is_dir():
        print(f"speclab plot: results directory {results} does not exist; run e.g. "
              f"`speclab run experiments/configs/quickstart.toml` first", file=sys.stderr)
        return 2
    if not run_dirs(results) and not verify_reports(results):
        print(f"speclab plot: {results} holds no runs (no summary.csv in it or its "
              f"subdirectories, no `speclab verify` report); expected the --out directory of "
              f"`speclab run` or a root of such directories", file=sys.stderr)
        return 2
    if not use_agg("speclab plot"):
        return 1
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        print(f"speclab plot: -o {out} is a file; expected a figure directory (created when "
              f"missing)", file=sys.stderr)
        return 2
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        print(f"speclab plot: -o {out}: cannot create the figure directory ({e.strerror}); "
              f"choose another -o", file=sys.stderr)
        return 2
    print(f"speclab plot: figures of {results} -> {out}")
    try:
        written = render(results, out)
    except ResultError as e:
        print(f"speclab plot: {e}", file=sys.stderr)
        return 2
    print(f"speclab plot: {len(written)} figures")
    if not written:
        print("speclab plot: no figure fits these results (the reasons are above)",
              file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
