"""The tree interface of speclab.conformance: one drafted token tree per request, in the
flattened layout of speclab.verify_tree (and of EAGLE and SGLang): node 0 is the root (the
context), nodes 1..n have parents[i] < i and tokens[i]; the children of a node, in increasing
node index, are its sibling candidates in the order they were drawn; row i of probs_target is
p(· | path to node i) (at a leaf, the bonus row) and row i of probs_draft is q(· | path to node i),
the law node i's children were drawn from.

    sampler(probs_target f32 [B, N+1, V], probs_draft f32 [B, N+1, V], parents i32 [B, N+1],
            tokens i32 [B, N+1], n_nodes i32 [B], seed int) → emitted_tokens int [B, N+1]
            (or [B, D+1], D the depth of the instance's deepest tree): the accepted path's
            tokens, one more token, then -1.

speclab draws the trees: every node's children from that node's q row, i.i.d. (method None and
"tree-iid"; siblings may then hold the same token) or without replacement ("tree-swor",
"traversal"). An outcome is the emitted token tuple. Rows are a function of the token path, so
duplicate siblings have the same rows and the target row after an emitted prefix is well defined:
the method-agnostic lossless test (the runner's) compares the next token after every prefix with
the row of that path. In the method-agnostic instances the rows depend on the whole path, not
only on its depth, so that a verifier that reads another node's row — one of its depth, its
parent's — emits a different law (TensorRT-LLM PR #15098: Eagle3 dynamic-tree rejection sampling
verified against the wrong logits slice). A declared method adds two instances whose rows depend
on the depth only, where core/exact's speclab.exact.step gives that method's step law.

The exact laws of the instances with rows by path, and of the defects, are enumerated here:
every token assignment of a class's tree with its drafting probability, and for each, the
verifier's walk in closed form (recursive rejection sampling, docs/verifiers.md V6, or traversal
verification, V7), vectorised over the assignments. On rows by depth they agree with exact.step
(tests/python/test_conformance_tree.py).
"""

import dataclasses
from fractions import Fraction

import numpy as np

from ._core import (Case, Defect, Interface, Observed, SamplerError, normalise,
                    padding_problems)

METHODS = ("tree-iid", "tree-swor", "traversal")
SEED = 20261207
# The exact enumeration visits V^n token assignments of an n-node tree; above this it is refused
# (the defect family then has no law for that class).
MAX_ASSIGNMENTS = 1 << 18
WRONG_ROW = "TensorRT-LLM PR #15098"
# The rows a defective verifier reads at node n instead of n's own: the first node of n's depth
# in node order (a verifier that indexes the target's rows by depth, as along a chain), or n's
# parent's (the rows one position late). Both keep the root's own row.
WRONG_ROWS = {"depth": "wrong node's row (the first node of its depth)",
              "parent": "wrong node's row (its parent's)"}
EMITTED = ("emitted_tokens, an integer array [B, N+1] or [B, D+1] (a numpy array, a torch tensor "
           "or an object with an emitted_tokens attribute)")


@dataclasses.dataclass
class TreeCase:
    """Case.data of the tree interface.

    The contexts are the token paths of length 0..depth, numbered breadth first (0 is the root);
    child int64 [M, V] is the number of path + (t,) (-1 at the deepest level). probs_target and
    probs_draft float64 [M+1, V]: row m is the law after path m, row M the padding nodes' (valid,
    different, never read by a correct sampler); rounded to float32 and renormalised, so the laws
    are those of the rows the sampler sees. One table serves every class. parents int32 [C, N+1]
    (padding nodes: parent 0, token 0) and n_nodes int32 [C] give each class's tree. branches:
    the candidates per node when the one class is the complete tree of this depth (exact.step's
    shape), else 0; by_depth: the rows depend on the depth only.
    """

    vocab: int
    depth: int
    parents: np.ndarray
    n_nodes: np.ndarray
    child: np.ndarray
    probs_target: np.ndarray
    probs_draft: np.ndarray
    branches: int = 0
    by_depth: bool = False
    cache: dict = dataclasses.field(default_factory=dict, repr=False)

    @property
    def pad(self):
        return len(self.child)

    def context(self, path):
        """The number of a token path (a tuple), or -1 when it is not one."""
        m = 0
        for t in path:
            if m < 0 or not 0 <= t < self.vocab:
                return -1
            m = int(self.child[m, t])
        return m




def _as_float32(rows):
    return normalise(np.asarray(rows).astype(np.float32))


def complete_tree(branches, depth):
    """parents int32 [N+1] of the complete tree with `branches` children per node, breadth first
    (every node of depth d before those of depth d+1, siblings adjacent)."""
    parents, level = [0], [0]
    for _ in range(depth):
        nxt = []
        for node in level:
            for _ in range(branches):
                parents.append(node)
                nxt.append(len(parents) - 1)
        level = nxt
    return np.array(parents, np.int32)


def _depths(parents, n):
    depth = np.zeros(n + 1, np.int64)
    for i in range(1, n + 1):
        depth[i] = depth[parents[i]] + 1
    return depth


def _make(rng, vocab, trees, *, branches=0, by_depth=False, holes=False, concentration=0.8):
    """TreeCase for the trees (a list of parents arrays, one per class, unpadded), rows by token
    path (Dirichlet per path) or by depth. holes: p is 0 at one token per depth (the same in every
    row of that depth, so that a verifier reading another row of the same depth stays within the
    support and is diagnosed, not only found broken) and q at one token in half its rows, so that
    p has mass where q has none and the other way round."""
    n_nodes = np.array([len(t) - 1 for t in trees], np.int32)
    width = int(n_nodes.max()) + 1
    parents = np.zeros((len(trees), width), np.int32)
    for c, t in enumerate(trees):
        parents[c, :len(t)] = t
    depth = max(int(_depths(t, len(t) - 1).max()) for t in trees)
    sizes = [vocab ** d for d in range(depth + 1)]
    offsets = np.cumsum([0] + sizes)
    child = np.full((offsets[-1], vocab), -1, np.int64)
    for d in range(depth):
        child[offsets[d]:offsets[d + 1]] = (offsets[d + 1] + np.arange(sizes[d])[:, None] * vocab
                                            + np.arange(vocab))
    level = np.append(np.repeat(np.arange(depth + 1), sizes), depth + 1)  # padding row last
    if by_depth:
        p, q = (rng.dirichlet(np.full(vocab, concentration), depth + 2)[level] for _ in "pq")
    else:
        p, q = (rng.dirichlet(np.full(vocab, concentration), len(level)) for _ in "pq")
    if holes:
        p[np.arange(len(level)), rng.integers(0, vocab, depth + 2)[level]] = 0
        hit = np.flatnonzero(rng.random(len(level)) < 0.5)
        q[hit, rng.integers(0, vocab, len(hit))] = 0
    return TreeCase(vocab, depth, parents, n_nodes, child, _as_float32(p), _as_float32(q),
                    branches, by_depth)


def _sample(rows, u):
    """Inverse-CDF draws from rows float64 [B, V] (any positive total) with uniforms u [B]; never
    a token of weight 0."""
    cdf = np.cumsum(rows, axis=1)
    idx = (cdf <= (u * cdf[:, -1])[:, None]).sum(axis=1)
    last = rows.shape[1] - 1 - np.argmax(rows[:, ::-1] > 0, axis=1)
    return np.minimum(idx, last)


def draw_trees(tree, parents, n_nodes, rng, without_replacement):
    """Draws the tokens of a batch of trees node by node, each node's from its parent's q row
    (i.i.d. among siblings, or without replacement in node order).

    Args:
        tree: TreeCase. parents: int [B, N+1]. n_nodes: int [B].

    Returns:
        (context int64 [B, N+1]: the path number of each node, tree.pad for padding nodes;
        tokens int32 [B, N+1]: 0 at the root and the padding nodes).
    """
    b, width = parents.shape
    ctx = np.full((b, width), tree.pad, np.int64)
    ctx[:, 0] = 0
    tok = np.zeros((b, width), np.int32)
    drawn = np.zeros((b, width, tree.vocab), bool) if without_replacement else None
    for i in range(1, width):
        live = np.flatnonzero(i <= n_nodes)
        if not len(live):
            continue
        parent = parents[live, i]
        q = tree.probs_draft[ctx[live, parent]]
        if without_replacement:
            q = np.where(drawn[live, parent], 0.0, q)
        x = _sample(q, rng.random(len(live)))
        tok[live, i] = x
        if without_replacement:
            drawn[live, parent, x] = True
        ctx[live, i] = tree.child[ctx[live, parent], x]
    return ctx, tok


def row_map(parents, n, which):
    """int [n+1]: the node whose target row a verifier reads at each node: its own (which None),
    the first node of its depth ("depth") or its parent ("parent"); the root keeps its own."""
    own = np.arange(n + 1)
    if which == "parent":
        return np.concatenate([[0], np.asarray(parents[1:n + 1], np.int64)])
    if which == "depth":
        first = {}
        depth = _depths(parents, n)
        return np.array([first.setdefault(int(depth[i]), i) for i in own])
    return own


def enumerate_law(tree, cls, method, rows=None):
    """The exact law of the emitted tokens of class cls, by enumeration.

    Every token assignment of the class's n nodes is weighed by its drafting probability (i.i.d.
    for "tree-iid", without replacement in node order for "tree-swor" and "traversal") and
    verified in closed form: recursive rejection sampling (tree-iid, tree-swor: candidate c_j
    accepted with min(1, p⁽ʲ⁾(c_j)/q⁽ʲ⁾(c_j)), p⁽ʲ⁺¹⁾ = norm((p⁽ʲ⁾ − q⁽ʲ⁾)⁺), the last token from
    the final residual or, at a leaf, from p) or traversal verification (docs/verifiers.md V7:
    the post-order walk is fixed, so the probability that every node before a given one failed
    is a running product). At node i the verifier reads the target row of node rows[i] (int
    [n+1], row_map's; None: its own row, the lossless law).

    Returns:
        dict {emitted tuple: float64 probability} (positive entries), or None when V^n exceeds
        MAX_ASSIGNMENTS.
    """
    v, n = tree.vocab, int(tree.n_nodes[cls])
    if v ** n > MAX_ASSIGNMENTS:
        return None
    par = tree.parents[cls]
    rows = np.arange(n + 1) if rows is None else np.asarray(rows)
    swor = method in ("tree-swor", "traversal")
    code = np.arange(v ** n)
    tok = np.zeros((len(code), n + 1), np.int64)
    for i in range(1, n + 1):
        tok[:, i] = code // v ** (i - 1) % v
    ctx = np.zeros_like(tok)
    weight = np.ones(len(code))
    kids = [[] for _ in range(n + 1)]
    r = np.arange(len(code))
    for i in range(1, n + 1):
        m = par[i]
        q = tree.probs_draft[ctx[:, m]]
        x = q[r, tok[:, i]]
        if swor:
            used = sum((q[r, tok[:, j]] for j in kids[m]), np.zeros(len(code)))
            repeat = np.zeros(len(code), bool)
            for j in kids[m]:
                repeat |= tok[:, j] == tok[:, i]
            left = 1.0 - used
            x = np.where(repeat | (left <= 0), 0.0, x / np.where(left > 0, left, 1.0))
        weight *= x
        ctx[:, i] = tree.child[ctx[:, m], tok[:, i]]
        kids[m].append(i)
    keep = weight > 0
    tok, ctx, weight = tok[keep], ctx[keep], weight[keep]
    r = np.arange(len(weight))
    depth = _depths(par, n)
    base = v + 1  # an outcome's code: Σ_j (t_j + 1)·base^j
    path = np.zeros_like(tok)
    for i in range(1, n + 1):
        path[:, i] = path[:, par[i]] + (tok[:, i] + 1) * base ** (depth[i] - 1)
    total = np.zeros(base ** (tree.depth + 1))

    def emit(node, w):  # w float64 [T, V]: the mass of emitting each token after node's path
        codes = path[:, node][:, None] + (np.arange(v) + 1) * base ** depth[node]
        total[:] += np.bincount(codes.ravel(), w.ravel(), minlength=len(total))

    def target(node):
        return tree.probs_target[ctx[:, rows[node]]]

    def safe_ratio(a, b):
        return np.where(b > 0, a / np.where(b > 0, b, 1.0), 0.0)

    def renormalised(w, fallback):
        s = w.sum(axis=1, keepdims=True)
        return np.where(s > 0, w / np.where(s > 0, s, 1.0), fallback)

    def rejection(node, mass):
        res = target(node)
        q = tree.probs_draft[ctx[:, node]]
        drawn = np.zeros(q.shape, bool)
        for c in kids[node]:
            law = renormalised(np.where(drawn, 0.0, q), 0.0) if swor else q
            t = tok[:, c]
            a = np.minimum(1.0, safe_ratio(res[r, t], law[r, t]))
            rejection(c, mass * a)
            mass = mass * (1 - a)
            res = renormalised(np.maximum(res - law, 0.0), res)  # p⁽ʲ⁾ kept at zero mass
            drawn[r, t] = True
        emit(node, mass[:, None] * res)

    reach = weight.copy()  # P(every node visited so far failed), traversal's post-order

    def traverse(node, w):
        big_p = target(node)
        q = tree.probs_draft[ctx[:, node]]
        big_q = q.copy()
        drawn = np.zeros(q.shape, bool)
        for c in kids[node]:
            t = tok[:, c]
            traverse(c, np.minimum(1.0, safe_ratio(w * big_p[r, t], big_q[r, t])))
            # c deleted: Z = Σ (w·P − Q)⁺, w ← Z/(Z + 1 − w) (1 on 0/0), P ← norm((w·P − Q)⁺),
            # Q ← q on the tokens not drawn yet, renormalised.
            res = np.maximum(w[:, None] * big_p - big_q, 0.0)
            z = res.sum(axis=1)
            den = z + 1 - w
            w = np.where(den > 0, np.minimum(1.0, safe_ratio(z, den)), 1.0)
            big_p = renormalised(res, big_p)
            drawn[r, t] = True
            big_q = renormalised(np.where(drawn, 0.0, q), 0.0)
        emit(node, (reach * w)[:, None] * big_p)
        reach[:] *= 1 - w

    if method == "traversal":
        traverse(0, np.ones(len(weight)))
    else:
        rejection(0, weight)
    law = {}
    for c in np.flatnonzero(total > 0):
        digits, k = [], int(c)
        while k:
            digits.append(k % base - 1)
            k //= base
        law[tuple(digits)] = float(total[c])
    return law


def exact_step_law(tree, method):
    """speclab.exact.step's law (core/exact, rational) for a by-depth TreeCase of one complete
    tree: {emitted tuple: float64}. The float64 rows are read exactly and renormalised exactly."""
    from .. import exact

    def exact_row(row):
        fr = [Fraction(float(x)) for x in row]
        s = sum(fr)
        return [x / s for x in fr]

    first = [0]  # the all-zeros path of each depth: its rows are that depth's
    for _ in range(tree.depth):
        first.append(int(tree.child[first[-1], 0]))
    p = [exact_row(tree.probs_target[m]) for m in first]
    q = [exact_row(tree.probs_draft[m]) for m in first[:-1]]
    out = exact.step(p, q, method=method, branches=tree.branches)["distribution"]
    return {k: float(v) for k, v in out.items() if v > 0}


def _check_emitted(out, b, widths):
    """The emitted array, once it is an integer array [b, w] with w in widths; anything else is a
    misuse of the interface (SamplerError), not a law to test."""
    if not isinstance(out, np.ndarray):
        raise SamplerError(f"the sampler returned {type(out).__name__}; expected {EMITTED}")
    if out.ndim != 2 or out.shape[0] != b or out.shape[1] not in widths:
        raise SamplerError(f"the sampler returned an array of shape {list(out.shape)}; expected "
                           f"emitted_tokens [B, N+1] = {[b, widths[0]]} or [B, D+1] = "
                           f"{[b, widths[-1]]}")
    if out.dtype.kind not in "iu":
        raise SamplerError(f"the sampler returned an array of dtype {out.dtype}; expected "
                           "emitted_tokens of an integer type (-1 after the last token)")
    return out


def observe(tree, emitted, parents, tokens, n_nodes):
    """Observed for the emitted rows of one batch of trees.

    The accepted tokens must be a root-to-node path: each one the token of a child of a node the
    path before it may have reached (with i.i.d. siblings several nodes can hold the token; any
    one will do, since their rows are the same). Every emitted token, the last included, must
    have positive target probability after the path before it. accepted = the path's length;
    drafted = accepted + 1 where a reached node has children (the walk had candidates there), so
    that, as for chains, position i is reached iff drafted > i and accepted ≥ i, and accepted iff
    accepted > i.

    Args:
        tree: TreeCase. emitted: int [B, W] (_check_emitted passed). parents, tokens: int
            [B, N+1] as handed to the sampler. n_nodes: int [B].
    """
    b, width = emitted.shape
    nodes = parents.shape[1]
    e = emitted.astype(np.int64)
    r = np.arange(b)
    problems = []

    def report(bad, what):
        rows = np.flatnonzero(bad)
        if len(rows):
            k, n = rows[0], int(n_nodes[rows[0]])
            problems.append(f"{what}: {len(rows)} of {b} requests, e.g. request {k} emitted "
                            f"{e[k].tolist()} (tree: parents {parents[k, 1:n + 1].tolist()}, "
                            f"tokens {tokens[k, 1:n + 1].tolist()})")

    valid, lengths = padding_problems(e, report)
    report((e >= tree.vocab).any(axis=1), f"token id ≥ V = {tree.vocab}")
    if problems:
        return Observed([], problems)
    ids = np.arange(nodes)[None, :]
    in_tree = (ids >= 1) & (ids <= n_nodes[:, None])
    at = np.zeros((b, nodes), bool)  # the nodes the accepted prefix may have reached
    at[:, 0] = True
    ctx = np.zeros(b, np.int64)  # the path number of the accepted prefix
    off_path = np.zeros(b, bool)
    impossible = np.zeros(b, bool)
    for t in range(width):
        live = (t < lengths) & ~off_path
        x = np.where(live, e[:, t], 0)
        impossible |= live & (tree.probs_target[ctx, x] <= 0)
        step = live & (t < lengths - 1)
        nxt = at[r[:, None], parents] & (tokens == x[:, None]) & in_tree
        off_path |= step & ~nxt.any(axis=1)
        step &= ~off_path
        at = np.where(step[:, None], nxt, at)
        ctx = np.where(step, tree.child[ctx, x], ctx)
    report(off_path, "the accepted tokens are not a root-to-node path of the tree")
    report(impossible & ~off_path, "emitted a token of target probability 0 after its path")
    if problems:
        return Observed([], problems)
    has_kids = np.zeros((b, nodes), bool)
    for i in range(1, nodes):
        live = np.flatnonzero(i <= n_nodes)
        has_kids[live, parents[live, i]] = True
    accepted = lengths - 1
    outcomes = [tuple(row[:k]) for row, k in zip(e.tolist(), lengths.tolist())]
    return Observed(outcomes, [], accepted, accepted + (at & has_kids).any(axis=1))


class TreeInterface(Interface):
    """`tree`: f(probs_target f32 [B, N+1, V], probs_draft f32 [B, N+1, V], parents i32 [B, N+1],
    tokens i32 [B, N+1], n_nodes i32 [B], seed int) → emitted_tokens int [B, N+1] or [B, D+1]
    (speclab.verify_tree's layout; the module docstring states it).

    Args:
        method: None (method-agnostic: i.i.d. siblings, the lossless test only), or the method the
            sampler declares, "tree-iid", "tree-swor" or "traversal": the trees are drafted as
            that method needs (i.i.d., or without replacement for tree-swor and traversal), and
            its exact step law is the reference (exact.step on the instances with rows by depth,
            this module's enumeration on those with rows by path), with its per-depth acceptance
            as the optimum on complete trees.
    """

    name = "tree"
    summary = "a drafted token tree per request (verify_tree's layout) → the accepted path + 1"
    inputs = ("probs_target", "probs_draft", "parents", "tokens", "n_nodes", "seed")
    outputs = ("emitted_tokens",)

    def __init__(self, method=None):
        if method is not None and method not in METHODS:
            raise ValueError(f"method is {method!r}; expected None (method-agnostic) or one of "
                             f"{', '.join(METHODS)}")
        self.method = method

    def _drafting(self):
        return self.method or "tree-iid"

    def cases(self):
        """Rows by token path: binary-2 (V = 6, the complete binary tree of depth 2, N = 6),
        ternary-1 (V = 8, three candidates at the root, N = 3) and ragged (V = 5, four classes:
        the root alone, a chain of 3, a depth-2 tree in depth-first order, a depth-2 tree in
        breadth-first order; p is 0 at one token per depth, q at one token in half its rows).
        With a declared method, binary-2 and ternary-1 again with rows by depth (exact.step's
        instances)."""
        rng = np.random.default_rng(SEED)
        ragged = [np.array([0]), np.array([0, 0, 1, 2]), np.array([0, 0, 1, 1, 0, 4]),
                  np.array([0, 0, 0, 0, 1])]
        out = [
            Case("binary-2", "V = 6, 2 candidates per node, depth 2 (N = 6), rows by token path",
                 1, _make(rng, 6, [complete_tree(2, 2)], branches=2)),
            Case("ternary-1", "V = 8, 3 candidates at the root (N = 3), rows by token path", 1,
                 _make(rng, 8, [complete_tree(3, 1)], branches=3)),
            Case("ragged", "V = 5, n_nodes = 0, 3, 5, 4 by class (root alone, chain, depth- and "
                 "breadth-first orders), rows by token path, zeros in p and q", 4,
                 _make(rng, 5, ragged, holes=True)),
        ]
        by_depth = [
            Case("binary-2-by-depth", "V = 6, 2 candidates per node, depth 2, rows by depth "
                 "(exact.step)", 1, _make(rng, 6, [complete_tree(2, 2)], branches=2,
                                          by_depth=True)),
            Case("ternary-1-by-depth", "V = 8, 3 candidates at the root, rows by depth "
                 "(exact.step)", 1, _make(rng, 8, [complete_tree(3, 1)], branches=3,
                                          by_depth=True)),
        ]
        return out + (by_depth if self.method else [])

    def batch_floats(self, case):
        return 2 * case.data.parents.shape[1] * case.data.vocab

    def call(self, runner, case, classes, rng):
        tree = case.data
        parents, n_nodes = tree.parents[classes], tree.n_nodes[classes]
        ctx, tokens = draw_trees(tree, parents, n_nodes, rng,
                                 self._drafting() in ("tree-swor", "traversal"))
        inputs = {"probs_target": tree.probs_target[ctx].astype(np.float32),
                  "probs_draft": tree.probs_draft[ctx].astype(np.float32),
                  "parents": parents.copy(), "tokens": tokens.copy(), "n_nodes": n_nodes.copy(),
                  "seed": int(rng.integers(0, 2**63))}
        out = runner(inputs, self.outputs)[0]
        widths = (parents.shape[1], tree.depth + 1)
        emitted = _check_emitted(out, len(classes), widths)
        return observe(tree, emitted, parents, tokens, n_nodes)

    def target_row(self, case, cls, prefix):
        """The row of the path `prefix` (one table serves every class); zeros for a tuple that is
        no path of length ≤ D (the runner asks only for emitted prefixes, which are)."""
        m = case.data.context(prefix)
        return case.data.probs_target[m].copy() if m >= 0 else np.zeros(case.data.vocab)

    def law(self, case, cls, rows=None):
        """{emitted tuple: float64}: the exact law of class cls under the declared method (method
        None: tree-iid, the law the defects are scored against), its verifier reading the rows
        of row_map(..., rows) (None: the lossless law; "depth" or "parent": a defect). Cached;
        None where the enumeration is refused (MAX_ASSIGNMENTS)."""
        tree = case.data
        key = (self._drafting(), cls, rows)
        if key not in tree.cache:
            if rows is None and tree.by_depth and tree.branches:
                tree.cache[key] = exact_step_law(tree, self._drafting())
            else:
                mapping = row_map(tree.parents[cls], int(tree.n_nodes[cls]), rows)
                tree.cache[key] = enumerate_law(tree, cls, self._drafting(), mapping)
        return tree.cache[key]

    def reference_law(self, case, cls, threshold):
        if self.method is None:
            return None
        law = self.law(case, cls)
        if law is None:
            return None
        seqs = [s for s, p in law.items() if p >= threshold]
        return seqs, np.array([law[s] for s in seqs], np.float64)

    def plan_bins(self, case, threshold):
        """The bins of the lossless law (tree-iid's for method None) at this threshold."""
        return 1 + sum(sum(p >= threshold for p in (self.law(case, k) or {}).values())
                       for k in range(case.classes))

    def outcome_probabilities(self, case, cls, outcomes):
        law = self.law(case, cls)
        return None if law is None else np.array([law.get(tuple(o), 0.0) for o in outcomes])

    def optimum(self, case, cls):
        """The declared method's P(the path goes deeper than depth i | it reached depth i),
        i < D, on complete trees (where every node above depth D has candidates); else None."""
        tree = case.data
        if self.method is None or not tree.branches:
            return None
        law = self.law(case, cls)
        accepted = np.zeros(tree.depth + 1)
        for s, p in law.items():
            accepted[len(s) - 1] += p
        reach = accepted[::-1].cumsum()[::-1]  # P(accepted ≥ i)
        return np.divide(reach[1:], reach[:-1], out=np.zeros(tree.depth), where=reach[:-1] > 0)

    def defects(self, case, cls):
        """The family "wrong node's row": the verifier reads, at every node, the target row of
        the first node of its depth, or of its parent (WRONG_ROWS), everything else right. Its
        exact law by enumeration; a class whose enumeration is refused gets no law (omitted)."""
        out = []
        for rows, name in WRONG_ROWS.items():
            law = self.law(case, cls, rows)
            if law is not None:
                out.append(Defect(name, WRONG_ROW,
                                  lambda outcomes, law=law: np.array(
                                      [law.get(tuple(o), 0.0) for o in outcomes])))
        return out
