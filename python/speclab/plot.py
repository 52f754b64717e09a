"""speclab's standard figures (python/speclab_plot.py, used by `speclab plot` and the notebooks)
under the package."""

from speclab_plot import *  # noqa: F401,F403
