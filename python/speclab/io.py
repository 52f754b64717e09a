"""Readers for speclab results (docs/hdf5.md): the summary table of a run
directory as a pandas DataFrame, and one sweep point's HDF5 file as a dict of arrays and
attributes. Needs h5py and numpy (pandas only for load_summary), not the compiled extension;
run with Debian's /usr/bin/python3.

    import speclab.io
    df = speclab.io.load_summary("results/quickstart")        # one row per sweep point
    run = speclab.io.load_run("results/quickstart/" + df.file[0])
    run["steps/accepted"], run["attrs"]["acceptance_rate"], run["config"]["decode"]["gamma"]
"""

import glob
import os

import h5py
import numpy as np

SCHEMA = "speclab.run"
SCHEMA_VERSION = 1


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
    run["attrs"] = attrs
    config = _parse_toml(attrs.get("config_toml", ""))
    if config is not None:
        run["config"] = config
    return run


def load_summary(directory):
    """The summary of a run directory as a DataFrame with one row per sweep point: summary.csv,
    or the shards' summary.shard-*-of-*.csv files concatenated when there is no merged one."""
    import pandas as pd

    merged = os.path.join(directory, "summary.csv")
    if os.path.exists(merged):
        return pd.read_csv(merged)
    shards = sorted(glob.glob(os.path.join(directory, "summary.shard-*-of-*.csv")))
    if not shards:
        raise FileNotFoundError(
            f"{directory}: no summary.csv (run `speclab run` or `speclab merge` first)")
    frame = pd.concat([pd.read_csv(s) for s in shards], ignore_index=True)
    return frame.drop_duplicates("id").sort_values(["name", "index"]).reset_index(drop=True)
