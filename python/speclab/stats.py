"""The statistics of docs/testing.md "Statistical checks" (core/stats): Pearson χ² goodness of fit
against an exactly known law with remainder binning, its power and the sample size that detects
any alternative at total-variation distance ε, Bonferroni levels and Wilson intervals."""

import numpy as np

from . import _speclab

MIN_EXPECTED_PER_BIN = _speclab.MIN_EXPECTED_PER_BIN


def chi_square_test(observed, probs, min_expected=MIN_EXPECTED_PER_BIN):
    """One-sample Pearson χ² of counts against known probabilities.

    Args:
        observed: int [K] counts ≥ 0 with N = Σ observed > 0.
        probs: float [K], ≥ 0, summing to 1 within 1e-6.
        min_expected: categories with N·p below this are merged into one remainder bin.

    Returns:
        dict with statistic, dof, bins, p_value, n and impossible_category (the first category
        of probability 0 with observations, an immediate failure; -1 if none).
    """
    return _speclab.chi_square_test(np.asarray(observed, np.int64).tolist(),
                                    np.asarray(probs, np.float64).tolist(), float(min_expected))


def noncentrality(bins, alpha, power=0.99):
    """λ at which a χ² test with `bins` bins at level `alpha` has power `power`."""
    return _speclab.chi_square_noncentrality(int(bins), float(alpha), float(power))


def sample_size(bins, epsilon, alpha, power=0.99):
    """N = ⌈λ / 4ε²⌉: the samples at which the χ² test detects every alternative at TV distance
    ≥ epsilon with the given power."""
    return _speclab.chi_square_sample_size(int(bins), float(epsilon), float(alpha), float(power))


def detectable_tv(bins, n, alpha, power=0.99):
    """The smallest TV distance detected with the given power from n samples: sqrt(λ / 4n)."""
    return _speclab.chi_square_detectable_tv(int(bins), int(n), float(alpha), float(power))


def bonferroni_level(suite_rate, n_tests):
    """Per-test level so that n_tests tests fail falsely with probability ≤ suite_rate."""
    return _speclab.bonferroni_level(float(suite_rate), int(n_tests))


def wilson_interval(successes, trials, confidence=0.95):
    """(lower, upper), the Wilson score interval of a binomial proportion."""
    return _speclab.wilson_interval(int(successes), int(trials), float(confidence))


def chi_square_p_value(statistic, dof):
    """P(χ²_dof ≥ statistic): the p-value of a Pearson statistic, or of a sum of independent
    ones (their degrees of freedom add)."""
    return _speclab.chi_square_p_value(float(statistic), int(dof))


def tv_distance(observed, probs, confidence=0.95):
    """(TV(p̂, p), an upper bound on the sampled law's TV distance from probs at the given
    confidence): core/stats' estimate and its bound (the empirical distance plus
    ½ sqrt((K − 1)/N) plus sqrt(ln(1/(1 − confidence)) / 2N))."""
    return _speclab.tv_distance(np.asarray(observed, np.int64).tolist(),
                                np.asarray(probs, np.float64).tolist(), float(confidence))
