"""The engine interface: a whole speculative decoding loop, tested end to end.

The sampler is a loop `f(target, draft, prompt, max_new_tokens, seed, params) → tokens` that
someone else wrote. speclab hands it two models whose laws it knows exactly, MarkovModel tables
over a few tokens, and compares the law of the first L generated tokens with plain decoding's
law under the same sampling parameters. Whatever the loop does inside (how many drafts, how it
verifies, how it spends its random numbers), a lossless loop gives plain decoding's law; so the
reference law here is plain decoding's, and it is the lossless law as well.

Plain decoding's law of L tokens is enumerated over V^L sequences with the rows speclab's own
pipeline processes (temperature → top-k → top-p → min-p, ties by the lower id), through the
logits interface's _logits.process, the one statement of that pipeline in this package. The cases keep every cut-off of that pipeline at least 1e-4 away from a
tie (ties="forbid"), so that any implementation of the same parameters keeps the same tokens
whatever its tie rule or float rounding. The known defects get exact laws too: the loop's own
randomness (drafts, accept/reject, residual or bonus) is enumerated with a fixed number γ of
drafts per iteration, iteration after iteration until L tokens exist.
"""

import dataclasses

import numpy as np

from ._core import Case, Defect, Interface, Observed, SamplerError
from ._logits import process

# Cut-offs closer than this to a tie (in logits for argmax and top-k, in probability for top-p
# and min-p) make a case's law depend on rounding and tie rules; ties="forbid" refuses them.
TIE_MARGIN = 1e-4


class MarkovModel:
    """A language model with an exactly known law: the next token's logits depend on the last
    `order` tokens only (fewer at the start, padded with a start symbol of id V).

    Attributes:
        table: float32 [(V+1)^order, V], read-only, the logits of each context; context
            (c_1..c_order), oldest first, has index Σ c_j (V+1)^(order−j).
        order: int ≥ 1.
        vocab: V.
    """

    def __init__(self, table, order):
        table = np.array(table, np.float32)
        self.order = int(order)
        self.vocab = table.shape[1]
        if table.ndim != 2 or table.shape[0] != (self.vocab + 1) ** self.order:
            raise ValueError(f"table has shape {list(table.shape)}; expected "
                             f"[(V+1)^order, V] for order {order}")
        if not np.isfinite(table).all():
            raise ValueError("table has non-finite logits")
        table.setflags(write=False)  # loops under test share it across requests
        self.table = table

    @classmethod
    def random(cls, vocab, order=2, seed=0, scale=1.5):
        """Gaussian logits N(0, scale²) for every context, from seed."""
        rng = np.random.default_rng(seed)
        return cls(rng.normal(0, scale, ((vocab + 1) ** order, vocab)), order)

    def perturbed(self, noise=0.5, seed=0):
        """A draft for this model: the same table plus N(0, noise²) per logit, so that a
        speculative loop accepts often but not always."""
        rng = np.random.default_rng(seed)
        return MarkovModel(self.table + rng.normal(0, noise, self.table.shape), self.order)

    def _check(self, ids):
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab):
            bad = ids[(ids < 0) | (ids >= self.vocab)][0]
            raise ValueError(f"token id {bad} given to a model of V = {self.vocab}")

    def context(self, prefix):
        """The table index of the context after prefix (a sequence of token ids)."""
        ids = np.asarray(prefix, np.int64)[-self.order:]
        self._check(ids)
        ctx = 0
        for t in [self.vocab] * (self.order - len(ids)) + ids.tolist():
            ctx = ctx * (self.vocab + 1) + t
        return ctx

    def next_context(self, ctx, token):
        """The index of the context after appending token to context ctx."""
        return (ctx * (self.vocab + 1) + int(token)) % (self.vocab + 1) ** self.order

    def logits(self, prefixes):
        """float32 [B, V]: the next token's logits after each of B prefixes (sequences of token
        ids of any lengths: lists, tuples or int arrays)."""
        return self.table[[self.context(p) for p in prefixes]]

    def logits_all(self, ids):
        """float32 [..., T, V]: the logits after every prefix ids[..., :t+1], as a transformer's
        forward pass returns them, for int ids [..., T] (a batch of equal-length sequences)."""
        ids = np.asarray(ids, np.int64)
        self._check(ids)
        pad = np.concatenate([np.full(ids.shape[:-1] + (self.order,), self.vocab), ids], -1)
        n = ids.shape[-1]
        ctx = np.zeros(ids.shape, np.int64)
        for j in range(self.order):
            ctx = ctx * (self.vocab + 1) + pad[..., j + 1:j + 1 + n]
        return self.table[ctx]


def sampling_params(params):
    """(temperature, top_k, top_p, min_p) of a params dict, speclab's defaults for missing keys
    (1, 0 = off, 1 = off, 0 = off)."""
    return (float(params.get("temperature", 1.0)), int(params.get("top_k", 0)),
            float(params.get("top_p", 1.0)), float(params.get("min_p", 0.0)))


def _check_margins(logits, params):
    """Raises ValueError when a cut-off of the pipeline (argmax, top-k, top-p, min-p) lies within
    TIE_MARGIN of a tie in some row of float32 logits [R, V]."""
    temperature, top_k, top_p, min_p = sampling_params(params)
    z = np.asarray(logits, np.float64)
    v = z.shape[1]
    for r, row in enumerate(z):
        order = np.argsort(-row, kind="stable")
        s = row[order] / (temperature or 1.0)
        keep = 1 if temperature == 0 else (top_k if 0 < top_k < v else v)
        if keep < v and s[keep - 1] - s[keep] <= TIE_MARGIN:
            raise ValueError(f"row {r}: the top-{keep} cut-off is a near-tie")
        if temperature == 0:
            continue
        p = np.exp(s[:keep] - s[0])
        p /= p.sum()
        if top_p < 1:
            c = np.cumsum(p)
            n = int(np.searchsorted(c, top_p)) + 1  # smallest prefix of mass ≥ top_p
            if np.abs(c[:-1] - top_p).min(initial=1) <= TIE_MARGIN or (
                    n < keep and p[n - 1] - p[n] <= TIE_MARGIN):
                raise ValueError(f"row {r}: the top-p cut-off is a near-tie")
            p = p[:n] / c[n - 1]
        if min_p > 0 and np.abs(p - min_p * p[0]).min() <= TIE_MARGIN:
            raise ValueError(f"row {r}: the min-p cut-off is a near-tie")


def processed_table(model, params, ties="lowest"):
    """float64 [(V+1)^order, V]: the processed next-token row of every context of model.

    The logits interface's pipeline (_logits.process with speclab's lowest-index ties): the
    tokens speclab's pipeline keeps, their probabilities in float64 so that the law does not
    carry float32 rounding (temperature 0: one-hot at the argmax).

    Args:
        model: MarkovModel.
        params: dict with temperature, top_k, top_p, min_p (missing keys: off).
        ties: "lowest" (speclab's rule, the lower id wins a tie at a cut-off) or "forbid"
            (ValueError when a cut-off lies within TIE_MARGIN of a tie).
    """
    if ties not in ("lowest", "forbid"):
        raise ValueError(f"ties is {ties!r}; expected 'lowest' or 'forbid'")
    if ties == "forbid":
        _check_margins(model.table, params)
    return process(model.table, *sampling_params(params))


def exact_law(model, prompt, length, params, ties="lowest", threshold=0.0):
    """Plain decoding's exact law of the first `length` generated tokens.

    Args:
        model: MarkovModel, the target.
        prompt: token ids.
        length: L ≥ 1.
        params: dict with temperature, top_k, top_p, min_p.
        ties: as processed_table.
        threshold: only sequences of probability ≥ threshold are listed (a prefix below it is
            not expanded); the rest is the caller's remainder.

    Returns:
        (list of L-tuples of ints, float64 [M] probabilities), summing to 1 at threshold 0.
    """
    rows = processed_table(model, params, ties)
    seqs, probs = [], []

    def visit(ctx, prefix, mass):
        row = rows[ctx]
        for y in np.flatnonzero((row > 0) & (row * mass >= threshold)):
            y = int(y)
            if len(prefix) + 1 == length:
                seqs.append(prefix + (y,))
                probs.append(mass * row[y])
            else:
                visit(model.next_context(ctx, y), prefix + (y,), mass * row[y])

    visit(model.context(prompt), (), 1.0)
    return seqs, np.array(probs)


# The laws of speculative loops, correct and defective. A loop iteration drafts γ tokens, the
# i-th from a law D_i over the draft's context, and verifies them with the target's processed
# rows p_i against a row v_i it takes for the draft's law: x_i is accepted with probability
# min(1, p_i(x_i)/v_i(x_i)); at the first rejection the token comes from max(0, p_i − v_i)
# normalised (from p_i where that is zero), after γ acceptances from p_{γ+1}. The correct loop
# has D_i = v_i = q_i, the processed draft row. -------------------------------------------------

# name: (Defect.name, Defect.reference), the public report each is known from. vLLM #40149 (a
# model drafter's draft_probs left None, so that the verifier takes another q than the one the
# drafts came from) is of raw-q's family; beam-search drafts verified as samples of argmax's.
DEFECTS = {
    "raw-q": ("q from raw logits: drafts sampled from the processed draft row, verified "
              "against the softmax of the draft's unprocessed logits", "HF transformers #47932"),
    "argmax-drafts": ("argmax drafts treated as samples: drafts taken greedily from the "
                      "processed draft row, verified as if sampled from it",
                      "apple/ml-recurrent-drafter #6"),
}


def speculative_law(target, draft, prompt, length, params, defect=None, ties="lowest"):
    """The exact law of the first `length` tokens a speculative loop generates with
    params["gamma"] drafts per iteration (never fewer before `length` tokens exist).

    Args:
        target, draft: MarkovModel of the same V.
        prompt: token ids.
        length: L ≥ 1.
        params: dict with temperature, top_k, top_p, min_p and gamma ≥ 1.
        defect: None (the correct loop, whose law is exact_law's) or a key of DEFECTS.
        ties: as processed_table.

    Returns:
        (list of L-tuples, float64 [M] probabilities), every sequence of probability > 0.

    A defective loop's law depends on how it drafts: one that drafts other than γ tokens per
    iteration has another law, which the diagnosis then does not name; the lossless test
    judges it all the same.
    """
    gamma = int(params["gamma"])
    p_rows = processed_table(target, params, ties)
    q_rows = processed_table(draft, params, ties)
    if defect is None:
        d_rows = v_rows = q_rows
    elif defect == "raw-q":
        d_rows, v_rows = q_rows, process(draft.table)  # the raw softmax
    elif defect == "argmax-drafts":
        # The argmax of the processed row is the raw one's (T > 0); lowest id on ties.
        d_rows = np.eye(draft.vocab)[q_rows.argmax(axis=1)]
        v_rows = q_rows
    else:
        raise ValueError(f"defect is {defect!r}; expected None or one of {', '.join(DEFECTS)}")
    law = {}

    def verify(ct, cd):
        # (acceptance probability per token, rejection probability, residual row) of one
        # position with target context ct and draft context cd.
        p, v = p_rows[ct], v_rows[cd]
        with np.errstate(divide="ignore", invalid="ignore"):  # v = 0 is never drafted
            accept = np.where(v > 0, np.minimum(1.0, p / v), 1.0)
        residual = np.maximum(p - v, 0)
        residual = residual / residual.sum() if residual.sum() > 0 else p
        return accept, float(d_rows[cd] @ (1 - accept)), residual

    def position(i, ct, cd, generated, mass):
        # Draft position i of an iteration; generated includes the drafts accepted so far.
        if i == gamma:
            for y in np.flatnonzero(p_rows[ct] > 0):
                finish(ct, cd, generated + (int(y),), mass * p_rows[ct, y])
            return
        accept, reject, residual = verify(ct, cd)
        if reject > 0:
            for y in np.flatnonzero(residual > 0):
                finish(ct, cd, generated + (int(y),), mass * reject * residual[y])
        a = d_rows[cd] * accept
        for x in np.flatnonzero(a > 0):
            out = generated + (int(x),)
            if len(out) >= length:  # later positions cannot change the first L tokens
                law[out[:length]] = law.get(out[:length], 0.0) + mass * a[x]
            else:
                position(i + 1, target.next_context(ct, x), draft.next_context(cd, x), out,
                         mass * a[x])

    def finish(ct, cd, generated, mass):
        # The iteration ended with generated[-1] (drawn at contexts ct, cd): record the first L
        # tokens, or start the next iteration.
        if len(generated) >= length:
            law[generated[:length]] = law.get(generated[:length], 0.0) + mass
        else:
            y = generated[-1]
            position(0, target.next_context(ct, y), draft.next_context(cd, y), generated, mass)

    position(0, target.context(prompt), draft.context(prompt), (), 1.0)
    seqs = sorted(law)
    return seqs, np.array([law[s] for s in seqs])


# The interface --------------------------------------------------------------------------------


@dataclasses.dataclass
class EngineCase:
    """Case.data of the engine interface.

    target, draft: MarkovModel of the same V. prompts: one tuple of token ids per class.
    length: L, the generated tokens whose law is tested. params: the sampling parameters handed
    to the loop (temperature, top_k, top_p, min_p; gamma, the drafts per iteration the defect
    laws assume). max_new_tokens: what the loop is asked for, L + γ, so that a loop which
    shortens its last drafts to stay within it drafts γ tokens until L tokens exist.
    """

    target: MarkovModel
    draft: MarkovModel
    prompts: list
    length: int
    params: dict
    max_new_tokens: int
    cache: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)

    def rows(self):
        """float64 [(V+1)^order, V], the target's processed rows (cached)."""
        if "rows" not in self.cache:
            self.cache["rows"] = processed_table(self.target, self.params, "forbid")
        return self.cache["rows"]


def _case(name, description, vocab, params, seed, *, length=3, scale=1.0, noise=0.6,
          prompts=1, epsilon_scale=1.0):
    """A Case with Gaussian target logits (order 2) and a perturbed draft, redrawn from the next
    seed until no cut-off of params is a near-tie in either model's rows."""
    for attempt in range(100):
        target = MarkovModel.random(vocab, 2, seed + attempt, scale)
        draft = target.perturbed(noise, seed + attempt + 7919)
        try:
            processed_table(target, params, "forbid")
            processed_table(draft, params, "forbid")
        except ValueError:
            continue
        rng = np.random.default_rng(seed + attempt)
        heads = [tuple(int(t) for t in rng.integers(0, vocab, 3)) for _ in range(prompts)]
        data = EngineCase(target, draft, heads, length, dict(params),
                          length + int(params["gamma"]))
        return Case(name, description, prompts, data, epsilon_scale)
    raise RuntimeError(f"case {name}: no tables without near-ties in 100 seeds")


class EngineInterface(Interface):
    """A whole speculative decoding loop:

        sampler(target, draft, prompt, max_new_tokens, seed, params) -> tokens

    target, draft: MarkovModel (logits(prefixes) → float32 [B, V], logits_all(ids) → float32
    [..., T, V]); prompt: int64 [P]; max_new_tokens: int (L + γ); seed: int in [0, 2^63);
    params: dict of temperature (0 = greedy), top_k (0 = off), top_p (1 = off), min_p (0 = off),
    applied in that order to both models' logits, and gamma, the drafts per iteration (a loop
    may draft fewer or more, but the defect laws assume γ). tokens: the generated tokens only,
    without the prompt: an integer array [n] (or [1, n], or a list or a torch tensor) with
    L ≤ n ≤ max_new_tokens. One call is one generation; a batch is a loop over requests, each
    with its own seed. The outcome is the first L tokens; acceptance is not visible end to end.
    """

    name = "engine"
    summary = "a whole speculative decoding loop over two Markov models, end to end"
    inputs = ("target", "draft", "prompt", "max_new_tokens", "seed", "params")
    outputs = ("tokens",)

    def cases(self, seed=20261204):
        # V = 5 or 6, L = 3: at most 216 sequences. Each filter keeps 2-4 tokens of 5 so that
        # the raw-q defect moves the law (by TV 0.09-0.2); a temperature ≠ 1 moves it without a
        # filter; plain T = 1 is where only argmax drafts show. ε is scaled by 2 (0.04 at the
        # default 0.02): a run is then 10k-22k generations per case, and both defect laws lie
        # ≥ 0.09 away from plain decoding's wherever they differ from it at all.
        g = {"gamma": 2}
        off = dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, **g)
        return [
            _case("plain", "V = 5, T = 1, no filter, γ = 2", 5, off, seed, scale=1.5,
                  epsilon_scale=2.0),
            _case("temperature", "V = 5, T = 0.5, γ = 2", 5, {**off, "temperature": 0.5},
                  seed + 1, epsilon_scale=2.0),
            _case("top-k", "V = 5, T = 1, top-k 3, γ = 2", 5, {**off, "top_k": 3}, seed + 3,
                  epsilon_scale=2.0),
            _case("top-p", "V = 5, T = 1, top-p 0.7, γ = 2", 5, {**off, "top_p": 0.7},
                  seed + 4, epsilon_scale=2.0),
            _case("min-p", "V = 5, T = 1, min-p 0.3, γ = 2", 5, {**off, "min_p": 0.3},
                  seed + 6, epsilon_scale=2.0),
            _case("combined", "V = 6, T = 0.7, top-k 4, top-p 0.85, min-p 0.1, γ = 2", 6,
                  dict(temperature=0.7, top_k=4, top_p=0.85, min_p=0.1, **g), seed + 8,
                  epsilon_scale=2.0),
            # One sequence has probability 1: any other is an impossible token, so a few
            # thousand generations suffice.
            _case("greedy", "V = 5, T = 0 (greedy), γ = 2", 5, {**off, "temperature": 0.0},
                  seed + 9, scale=1.5, epsilon_scale=5.0),
        ]

    def batch_floats(self, case):
        # The logits of both models at every position of one generation.
        d = case.data
        return 2 * (len(d.prompts[0]) + d.max_new_tokens) * d.target.vocab

    def call(self, runner, case, classes, rng):
        d = case.data
        outcomes, problems = [], []
        for b, cls in enumerate(np.asarray(classes, np.int64).tolist()):
            seed = int(rng.integers(0, 2**63))
            inputs = {"target": d.target, "draft": d.draft,
                      "prompt": np.array(d.prompts[cls], np.int64),
                      "max_new_tokens": d.max_new_tokens, "seed": seed,
                      "params": dict(d.params)}  # fresh: a loop may write into it
            try:
                (tokens,) = runner(inputs, self.outputs)
                tokens = _tokens(tokens)
            except SamplerError as e:
                raise SamplerError(f"request {b} (class {cls}, seed {seed}): {e}") from e
            problem = self._structure(d, cls, tokens)
            if problem:
                problems.append(f"request {b} (class {cls}, seed {seed}) generated "
                                f"{tokens.tolist()} after prompt {list(d.prompts[cls])}: "
                                f"{problem}")
                break  # not counted anyway
            outcomes.append(tuple(tokens[:d.length].tolist()))
        return Observed(outcomes, problems)

    @staticmethod
    def _structure(d, cls, tokens):
        """The first structural problem of one generation's tokens (a message), or ""."""
        v = d.target.vocab
        if len(tokens) < d.length:
            return f"{len(tokens)} tokens; expected at least L = {d.length}"
        if len(tokens) > d.max_new_tokens:
            return f"{len(tokens)} tokens; expected at most max_new_tokens = {d.max_new_tokens}"
        if tokens.min() < 0 or tokens.max() >= v:
            return f"token id outside [0, V = {v})"
        rows, ctx = d.rows(), d.target.context(d.prompts[cls])
        for i, t in enumerate(tokens.tolist()):
            if rows[ctx, t] <= 0:
                return f"token {t} at position {i} has target probability 0 there"
            ctx = d.target.next_context(ctx, t)
        return ""

    def target_row(self, case, cls, prefix):
        d = case.data
        return d.rows()[d.target.context(tuple(d.prompts[cls]) + tuple(prefix))]

    def reference_law(self, case, cls, threshold):
        d = case.data
        return exact_law(d.target, d.prompts[cls], d.length, d.params, "forbid", threshold)

    def outcome_probabilities(self, case, cls, outcomes):
        d = case.data
        rows, start = d.rows(), d.target.context(d.prompts[cls])
        out = np.ones(len(outcomes))
        for j, outcome in enumerate(outcomes):
            ctx = start
            for t in outcome:
                out[j] *= rows[ctx, t]
                ctx = d.target.next_context(ctx, t)
        return out

    def defects(self, case, cls):
        """The defects of DEFECTS whose law differs from plain decoding's in this case (the
        raw-q defect is invisible without a filter or temperature, and both are at greedy)."""
        d = case.data
        key = ("defects", cls)
        if key not in d.cache:
            seqs, probs = exact_law(d.target, d.prompts[cls], d.length, d.params, "forbid")
            plain = dict(zip(seqs, probs))
            found = []
            for name, (title, reference) in DEFECTS.items():
                s, p = speculative_law(d.target, d.draft, d.prompts[cls], d.length, d.params,
                                       name, "forbid")
                law = dict(zip(s, p))
                tv = 0.5 * sum(abs(law.get(k, 0) - plain.get(k, 0)) for k in set(law) | set(plain))
                if tv > 1e-9:
                    found.append(Defect(title, reference, _lookup(law)))
            d.cache[key] = found
        return d.cache[key]


def _lookup(law):
    """Defect.law over a dict {outcome tuple: probability}."""
    return lambda outcomes: np.array([law.get(tuple(o), 0.0) for o in outcomes])


def _tokens(out):
    """int64 [n] of a loop's output; SamplerError when it is no integer array [n] or [1, n]."""
    out = np.asarray(out)
    if out.size == 0:
        return np.zeros(0, np.int64)  # too short: a structural problem, not a misuse
    if out.ndim == 2 and out.shape[0] == 1:
        out = out[0]  # a batch of one, as Hugging Face's generate returns it
    if out.ndim != 1 or out.dtype.kind not in "iu":
        raise SamplerError(f"the loop returned an array of shape {list(out.shape)} and dtype "
                           f"{out.dtype}; expected tokens, an integer array [n] of the "
                           "generated tokens")
    return out.astype(np.int64)
