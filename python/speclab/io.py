"""speclab's result readers (python/speclab_io.py, docs/hdf5.md) under the package: load_summary
(a run directory's summary.csv as a pandas DataFrame) and load_run (one point's HDF5 file)."""

from speclab_io import *  # noqa: F401,F403
