"""Exact output laws of one verification step (core/exact): every draft, accept/reject,
residual and bonus branch enumerated in rational arithmetic, as `speclab exact` prints them; and
the closed-form per-position acceptance of V1 and of the match verifiers. Probabilities are
fractions.Fraction; limits V ≤ 8, γ ≤ 4."""

from fractions import Fraction

from . import _speclab


def _text(value):
    return str(Fraction(value))


def step(probs_target, probs_draft, *, method="token", leniency=1, epsilon=0.09, delta=0.3,
         branches=1):
    """The exact law of one step with context-free rows.

    Args:
        probs_target: [γ+1][V] rows p_1..p_{γ+1} of Fraction, int, str ("1/3") or float (read
            exactly); each summing exactly to 1.
        probs_draft: [γ][V] rows q_1..q_γ, likewise.
        method: a registry name (speclab.verifiers()): "token", "lenient", "block", "typical",
            "tree-iid", "kseq", "coupled", "sampled-match", ... (the match verifiers' law does
            not depend on how plain decoding samples, so it takes no sampling option).
        leniency: l in (0, 1] for "lenient" (exact).
        epsilon, delta: typical acceptance's ε and δ (floats).
        branches: candidates per tree node for the tree methods ("tree-*", "kseq", "traversal").

    Returns:
        dict: distribution {tuple of emitted ids: Fraction}, expected_accepted,
        expected_emitted, first_token_marginal [V], position_acceptance_marginal [γ]
        (P(position i accepted) = P(n ≥ i)), position_acceptance_conditional [γ]
        (P(position i accepted | reached), None where never reached), accepted_length [γ+1]
        (Fractions), lossy. The run files name the measured rates the same way
        (position/acceptance_marginal, position/acceptance_conditional).
    """
    target = [[_text(v) for v in row] for row in probs_target]
    draft = [[_text(v) for v in row] for row in probs_draft]
    out = _speclab.exact_step(target, draft, method, _text(leniency), float(epsilon),
                              float(delta), int(branches))
    result = {k: Fraction(v) for k, v in out.items() if isinstance(v, str)}
    for key in ("first_token_marginal", "position_acceptance_marginal", "accepted_length"):
        result[key] = [Fraction(v) for v in out[key]]
    result["position_acceptance_conditional"] = [
        None if v is None else Fraction(v) for v in out["position_acceptance_conditional"]]
    result["distribution"] = {tuple(k): Fraction(v) for k, v in out["distribution"].items()}
    result["lossy"] = out["lossy"]
    return result


def acceptance(probs_target, probs_draft):
    """The probability that one draft position is accepted, for a target row p and a draft row
    q, by V1 and by the match verifiers (docs/verifiers.md V8): what reproducible output costs
    in acceptance (`speclab exact` prints the same as `acceptance`).

    Args:
        probs_target: [V] the row p (Fraction, int, str "1/3" or float read exactly), summing
            exactly to 1, V ≤ 8.
        probs_draft: [V] the row q, likewise.

    Returns:
        dict of Fractions: "token" Σ min(p, q) (V1), "coupled" the probability that the
        Gumbel-max races of p and q under one noise pick the same token, Σ_v 1/Σ_u
        max(p_u/p_v, q_u/q_v), "coupled_bound" its lower bound (1 − TV)/(1 + TV) with TV =
        1 − Σ min(p, q), and "sampled-match" Σ p·q.
    """
    out = _speclab.exact_acceptance([_text(v) for v in probs_target],
                                    [_text(v) for v in probs_draft])
    return {k: Fraction(v) for k, v in out.items()}
