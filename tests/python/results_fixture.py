"""Run directories written with h5py and pandas in the layout `speclab run` writes (docs/hdf5.md):
one speclab.run file per point and summary.csv, with synthetic but self-consistent step logs,
so that the plotter and the report are tested without the speclab executable. Schema version 3
(the prompt pass timed apart) by default, version 2 on request."""

import os

import h5py
import numpy as np
import pandas as pd

# The config keys that the readers index (a real summary has every key of the config schema).
CONFIG_DEFAULTS = {
    "target.model": "lsm-tiny-target",
    "draft.model": "lsm-tiny-draft",
    "verifier.method": "token",
    "sampling.temperature": 1.0,
    "decode.batch_size": 1,
    "decode.gamma": 2,
    "decode.branches": "[2, 2]",
    "decode.sequences": 4,
    "decode.max_new_tokens": 12,
    "decode.baseline": True,
}
# summary.csv's metric columns, in the writer's order (experiments/results.cpp kMetrics), and
# those version 2 files lack.
METRICS = ("sequences", "tokens", "prompt_tokens", "steps", "accepted", "mean_accepted",
           "emitted_per_step", "acceptance_rate", "acceptance_rate_lower95",
           "acceptance_rate_upper95", "alpha_estimate", "alpha_sum_min", "alpha_coupled",
           "alpha_coupled_bound", "alpha_sampled_match", "identical_to_plain", "tested_positions",
           "accepted_positions", "residual_fallbacks", "accepted_bytes", "accepted_bytes_per_step",
           "target_calls", "target_positions",
           "draft_calls", "draft_positions", "prefill_seconds", "decode_seconds", "seconds",
           "target_seconds", "draft_seconds", "verify_seconds", "tokens_per_second",
           "baseline_prefill_seconds", "baseline_decode_seconds", "baseline_seconds",
           "baseline_tokens_per_second", "speedup", "end_to_end_speedup", "predicted_speedup",
           "started", "finished")
VERSION_3_METRICS = ("prompt_tokens", "prefill_seconds", "decode_seconds",
                     "baseline_prefill_seconds", "baseline_decode_seconds", "end_to_end_speedup",
                     "alpha_coupled", "alpha_coupled_bound", "alpha_sampled_match",
                     "identical_to_plain")
# The verifiers whose files carry the match acceptances (experiments/results.cpp).
MATCH_METHODS = ("coupled", "sampled-match")
# The prompt pass of every batch, in seconds, for version 3 files.
PREFILL_SECONDS = 0.01


def _toml_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value.startswith("[") else f'"{value}"'
    return repr(value)


def _config_toml(config):
    tables = {}
    for key, value in config.items():
        table, _, name = key.partition(".")
        tables.setdefault(table, []).append(f"{name} = {_toml_value(value)}")
    return "".join(f"[{t}]\n" + "\n".join(lines) + "\n" for t, lines in tables.items())


def _simulate(rng, config, alpha):
    """The step log of one point: every request decodes max_new_tokens tokens, γ_b drafts per
    step (fewer near the end), each accepted with probability alpha."""
    gamma = int(config["decode.gamma"])
    sequences = int(config["decode.sequences"])
    length = int(config["decode.max_new_tokens"])
    batch = int(config["decode.batch_size"])
    accepted, emitted, drafted, batch_of, request_of = [], [], [], [], []
    for first in range(0, sequences, batch):
        left = {r: length for r in range(first, min(first + batch, sequences))}
        while any(left.values()):
            for r in sorted(left):
                if left[r] <= 0:
                    continue
                d = min(gamma, left[r] - 1)
                a = 0
                while a < d and rng.random() < alpha:
                    a += 1
                e = min(a + 1, left[r])
                left[r] -= e
                accepted.append(a)
                emitted.append(e)
                drafted.append(d)
                batch_of.append(first // batch)
                request_of.append(r)
    return {name: np.asarray(values, np.int32) for name, values in
            (("accepted", accepted), ("emitted", emitted), ("drafted", drafted),
             ("batch", batch_of), ("request", request_of))}


def write_point(path, config, index, name, swept, seed=0, alpha=0.7, schema_version=3):
    """Writes one speclab.run file at PATH; returns its summary row (dict, METRICS' order)."""
    rng = np.random.default_rng(seed)
    gamma = int(config["decode.gamma"])
    steps = _simulate(rng, config, alpha)
    sequences = int(config["decode.sequences"])
    length = int(config["decode.max_new_tokens"])
    batch = int(config["decode.batch_size"])
    batches = -(-sequences // batch)
    reached = np.array([int(np.sum(steps["drafted"] > i)) for i in range(gamma)], np.int64)
    position_accepted = np.array([int(np.sum(steps["accepted"] > i)) for i in range(gamma)],
                                 np.int64)
    histogram = np.bincount(steps["accepted"], minlength=gamma + 1).astype(np.int64)
    tested = int(reached.sum())
    sum_min = alpha * tested
    requests = np.array([min(batch, sequences - b * batch) for b in range(batches)], np.int64)
    batch_tokens = requests * length
    # Speculative decoding pays off less as γ grows past the sweet spot, so the figure has shape.
    seconds_per_token = 1e-3 * (0.4 + 0.08 * gamma) * (1 + 0.02 * rng.random(batches))
    decode = batch_tokens * seconds_per_token
    baseline_decode = batch_tokens * 1e-3 * (1 + 0.02 * rng.random(batches))
    # Version 3 times the prompt pass apart; version 2's seconds include it.
    prefill = np.full(batches, PREFILL_SECONDS)
    batch_seconds = prefill + decode
    baseline_seconds = prefill + baseline_decode
    total_seconds = float(batch_seconds.sum())
    decode_seconds = float(decode.sum()) if schema_version >= 3 else total_seconds
    baseline_decode_seconds = (float(baseline_decode.sum()) if schema_version >= 3
                               else float(baseline_seconds.sum()))
    baseline = bool(config["decode.baseline"])
    tokens = int(batch_tokens.sum())
    target_calls = int(steps["batch"].size)
    match = config["verifier.method"] in MATCH_METHODS
    metrics = {
        "sequences": sequences, "tokens": tokens, "prompt_tokens": 4 * sequences,
        "steps": int(steps["accepted"].size),
        "accepted": int(steps["accepted"].sum()),
        "mean_accepted": float(steps["accepted"].mean()),
        "emitted_per_step": float(steps["emitted"].mean()),
        "acceptance_rate": float(position_accepted.sum() / max(tested, 1)),
        "acceptance_rate_lower95": float(position_accepted.sum() / max(tested, 1)) - 0.05,
        "acceptance_rate_upper95": float(position_accepted.sum() / max(tested, 1)) + 0.05,
        "alpha_estimate": alpha, "alpha_sum_min": sum_min,
        "alpha_coupled": 0.95 * alpha if match else np.nan,
        "alpha_coupled_bound": alpha / (2 - alpha) if match else np.nan,
        "alpha_sampled_match": 0.6 * alpha if match else np.nan,
        "identical_to_plain": (1.0 if match else 0.0) if baseline else np.nan,
        "tested_positions": tested,
        "accepted_positions": int(position_accepted.sum()), "residual_fallbacks": 0,
        "accepted_bytes": 0, "accepted_bytes_per_step": 0.0,
        "target_calls": target_calls, "target_positions": target_calls * (gamma + 1),
        "draft_calls": target_calls * gamma, "draft_positions": target_calls * gamma,
        "prefill_seconds": float(prefill.sum()), "decode_seconds": decode_seconds,
        "seconds": total_seconds, "target_seconds": 0.6 * decode_seconds,
        "draft_seconds": 0.3 * decode_seconds, "verify_seconds": 0.05 * decode_seconds,
        "tokens_per_second": tokens / decode_seconds,
        "baseline_prefill_seconds": float(prefill.sum()) if baseline else np.nan,
        "baseline_decode_seconds": baseline_decode_seconds if baseline else np.nan,
        "baseline_seconds": float(baseline_seconds.sum()) if baseline else np.nan,
        "baseline_tokens_per_second": tokens / baseline_decode_seconds if baseline else np.nan,
        "speedup": baseline_decode_seconds / decode_seconds if baseline else np.nan,
        "end_to_end_speedup": float(baseline_seconds.sum()) / total_seconds if baseline
        else np.nan,
        "predicted_speedup": np.nan, "started": "2026-01-01T00:00:00Z",
        "finished": "2026-01-01T00:00:01Z",
    }
    if schema_version < 3:
        metrics = {k: v for k, v in metrics.items() if k not in VERSION_3_METRICS}
    assert list(metrics) == [m for m in METRICS if m in metrics]
    point_id = os.path.splitext(os.path.basename(path))[0]
    with h5py.File(path, "w") as f:
        f.attrs["schema"] = "speclab.run"
        f.attrs["schema_version"] = np.int64(schema_version)
        f.attrs["id"] = point_id
        f.attrs["index"] = np.int64(index)
        f.attrs["name"] = name
        f.attrs["config_toml"] = _config_toml(config)
        f.attrs["swept_keys"] = ",".join(swept)
        for key, value in (("host", "fixture"), ("cpu_model", "a CPU"), ("build_isa", "avx2"),
                           ("cpu_isa", "avx2"), ("threads", np.int64(1)),
                           ("speclab_version", "0.1.0")):
            f.attrs[key] = value
        for key, value in metrics.items():
            if not (isinstance(value, float) and np.isnan(value)) or key == "predicted_speedup":
                f.attrs[key] = value
        for column, values in steps.items():
            f[f"steps/{column}"] = values
        f["sequences/length"] = np.full(sequences, length, np.int32)
        f["batches/requests"] = requests
        f["batches/tokens"] = batch_tokens
        f["batches/seconds"] = batch_seconds
        if schema_version >= 3:
            f["batches/prefill_seconds"] = prefill
            f["batches/decode_seconds"] = decode
        f["position/reached"] = reached
        f["position/accepted"] = position_accepted
        f["accepted_length_histogram"] = histogram
        if baseline:
            f["baseline/sequences/length"] = np.full(sequences, length, np.int32)
            f["baseline/batches/tokens"] = batch_tokens
            f["baseline/batches/seconds"] = baseline_seconds
            if schema_version >= 3:
                f["baseline/batches/prefill_seconds"] = prefill
                f["baseline/batches/decode_seconds"] = baseline_decode
    return {"id": point_id, "index": index, "name": name, **config, **metrics,
            "file": os.path.basename(path)}


def write_sweep(directory, name="sweep", sweep=None, schema_version=3, **config):
    """A run directory of the sweep over the cross product of SWEEP ({dotted key: values}), the
    other keys from CONFIG over CONFIG_DEFAULTS, in run files of SCHEMA_VERSION (2 or 3); returns
    the summary DataFrame it wrote."""
    os.makedirs(directory, exist_ok=True)
    sweep = sweep or {"decode.gamma": [1, 2, 3]}
    base = {**CONFIG_DEFAULTS, **config}
    points = [{}]
    for key, values in sweep.items():
        points = [{**p, key: v} for p in points for v in values]
    rows = []
    for index, values in enumerate(points):
        point = {**base, **values}
        path = os.path.join(directory, f"{name}-{index:03d}.h5")
        rows.append(write_point(path, point, index, name, list(sweep), seed=index,
                                alpha=0.8 - 0.1 * index / max(len(points), 1),
                                schema_version=schema_version))
    df = pd.DataFrame(rows)
    df.to_csv(os.path.join(directory, "summary.csv"), index=False)
    return df
