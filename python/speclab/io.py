"""Readers for speclab results (docs/hdf5.md): the summary table of a run
directory as a pandas DataFrame, and one sweep point's HDF5 file as a dict of arrays and
attributes. Needs h5py and numpy (pandas only for load_summary), not the compiled extension;
run with Debian's /usr/bin/python3.

    import speclab.io
    df = speclab.io.load_summary("results/quickstart")        # one row per sweep point
    run = speclab.io.load_run("results/quickstart/" + df.file[0])
    run["steps/accepted"], run["attrs"]["acceptance_rate"], run["config"]["decode"]["gamma"]
    speclab.io.request_trajectories(run)[0]["accepted"]       # request 0's steps, in order

`speclab schema` prints every dataset and attribute with its units and description.
"""

import glob
import os

import h5py
import numpy as np

SCHEMA = "speclab.run"
# 2: steps/request; position/acceptance_conditional (version 1: position/acceptance_rate) and
# position/acceptance_marginal. 3: the prompt pass timed apart (prefill_seconds and
# decode_seconds per point, batch and request, prompt_tokens, end_to_end_speedup); speedup and
# tokens_per_second on decode time. Version 1 files are read with the version 2 names; versions 2
# and 3 as they are.
SCHEMA_VERSION = 3
STEP_COLUMNS = ("accepted", "emitted", "drafted")


def _decode(value):
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.generic):
        return value.item()
    return value


def _parse_toml(text):
    try:
        import tomllib  # Python ≥ 3.11
    except ImportError:  # pragma: no cover - older interpreters
        return None
    return tomllib.loads(text)


def load_run(path):
    """One result file as a dict: every dataset by its path ("steps/accepted") as a numpy array,
    "attrs" (root attributes, str/int/float), and "config" (the resolved config as a dict, when
    tomllib is available)."""
    with h5py.File(path, "r") as f:
        attrs = {name: _decode(value) for name, value in f.attrs.items()}
        if attrs.get("schema") != SCHEMA:
            raise ValueError(f"{path}: schema is {attrs.get('schema')!r}; expected {SCHEMA!r}")
        if int(attrs.get("schema_version", 0)) > SCHEMA_VERSION:
            raise ValueError(
                f"{path}: schema_version {attrs['schema_version']} is newer than this reader "
                f"({SCHEMA_VERSION})")
        run = {}

        def visit(name, node):
            if isinstance(node, h5py.Dataset):
                run[name] = node[()]

        f.visititems(visit)
    if int(attrs.get("schema_version", 0)) < 2:
        _upgrade_v1(run)
    run["attrs"] = attrs
    config = _parse_toml(attrs.get("config_toml", ""))
    if config is not None:
        run["config"] = config
    return run


def _upgrade_v1(run):
    """Version 1 names and datasets as version 2 has them (in place)."""
    for suffix in ("", "_lower95", "_upper95"):
        old = "position/acceptance_rate" + suffix
        if old in run:
            run["position/acceptance_conditional" + suffix] = run.pop(old)
    if "position/accepted" in run and "position/reached" in run and run["position/reached"].size:
        steps = float(run["position/reached"][0])
        run["position/acceptance_marginal"] = (
            run["position/accepted"] / steps if steps > 0
            else np.full(run["position/accepted"].shape, np.nan))
    if "steps/request" not in run and "steps/emitted" in run:
        run["steps/request"] = _step_requests(run)


def _step_requests(run):
    """The request of every request-step, rebuilt as the writer builds steps/request: within a
    batch the steps come in (step, request) order over the requests still running, and a request
    runs until it has emitted its tokens (sequences/length)."""
    emitted, batch = run["steps/emitted"], run["steps/batch"]
    lengths = run["sequences/length"]
    sizes = run["batches/requests"]
    out = np.empty(emitted.size, dtype=np.int32)
    row, first = 0, 0
    for b, size in enumerate(sizes):
        left = lengths[first:first + size].astype(np.int64).copy()
        end = row + int(np.count_nonzero(batch == b))
        while row < end:
            running = np.flatnonzero(left > 0)
            if running.size == 0:
                raise ValueError(f"batch {b}: the step log does not match the requests' lengths")
            for r in running:
                if row >= end:
                    break
                out[row] = first + r
                left[r] -= emitted[row]
                row += 1
        first += int(size)
    return out


def request_trajectories(run):
    """Per request (the rows of sequences/length, in order), its steps in order: a dict of
    arrays "accepted", "emitted", "drafted" (steps/...), whatever the batch size."""
    requests = run["steps/request"]
    n = run["sequences/length"].size
    order = np.argsort(requests, kind="stable")
    bounds = np.searchsorted(requests[order], np.arange(n + 1))
    return [{c: run["steps/" + c][order[bounds[r]:bounds[r + 1]]] for c in STEP_COLUMNS}
            for r in range(n)]


# The columns every summary speclab writes has and the readers index by (read_summary_row in
# experiments/results.hpp writes id, index, name, the config keys, the metrics, file).
SUMMARY_COLUMNS = ("id", "index", "name", "file")
SUMMARY_LAYOUT = ("a summary written by `speclab run` or `speclab merge` (columns id, index, name, "
                  "the config keys, the metrics, file)")


class SummaryError(ValueError):
    """A summary file that is not one speclab wrote whole (empty, its header or rows cut short,
    another tool's CSV): the message names the file and says what is wrong with it."""


def read_summary_csv(path, required=SUMMARY_COLUMNS):
    """One summary CSV file as a DataFrame, checked for the columns in `required` and for rows
    that name their result file. Raises SummaryError naming PATH."""
    import pandas as pd

    try:
        frame = pd.read_csv(path)
    except pd.errors.EmptyDataError as e:
        raise SummaryError(f"{path}: empty (no header line); expected {SUMMARY_LAYOUT}") from e
    except (pd.errors.ParserError, UnicodeDecodeError) as e:
        raise SummaryError(f"{path}: not a CSV table ({str(e).strip()}); expected "
                           f"{SUMMARY_LAYOUT}") from e
    missing = [c for c in required if c not in frame.columns]
    if missing:
        what = ", ".join(repr(c) for c in missing)
        raise SummaryError(f"{path}: no {what} column{'s' if len(missing) > 1 else ''}; expected "
                           f"{SUMMARY_LAYOUT}")
    if "file" in required:
        # A row cut short (a copy interrupted mid-line) leaves the last columns empty.
        unnamed = frame.index[frame["file"].isna()]
        if len(unnamed):
            raise SummaryError(f"{path}: row {int(unnamed[0]) + 1} of {len(frame)} has no file "
                               f"(cut short); expected {SUMMARY_LAYOUT}")
    return frame


def load_summary(directory):
    """The summary of a run directory as a DataFrame with one row per sweep point: summary.csv,
    or the shards' summary.shard-*-of-*.csv files concatenated when there is no merged one.
    Raises FileNotFoundError when there is none, SummaryError (a ValueError naming the file) when
    one lacks the columns id, index, name, file or a row has no file."""
    import pandas as pd

    merged = os.path.join(directory, "summary.csv")
    if os.path.exists(merged):
        return read_summary_csv(merged)
    shards = sorted(glob.glob(os.path.join(directory, "summary.shard-*-of-*.csv")))
    if not shards:
        raise FileNotFoundError(
            f"{directory}: no summary.csv (run `speclab run` or `speclab merge` first)")
    frame = pd.concat([read_summary_csv(s) for s in shards], ignore_index=True)
    return frame.drop_duplicates("id").sort_values(["name", "index"]).reset_index(drop=True)
