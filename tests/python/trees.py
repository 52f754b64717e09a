"""Tree samplers for the conformance tests of the `tree` interface (speclab.verify_tree's
layout): speclab's own tree verifiers, a numpy recursive rejection sampler written from
docs/verifiers.md V6 (a correct sampler whose random numbers are spent differently from
speclab's: the negative control), and the planted defect "wrong node's row" (TensorRT-LLM PR
#15098), which verifies every node against the target row of the first node of its depth."""

import numpy as np

import speclab


def speclab_tree(method="tree-iid"):
    """speclab.verify_tree with `method` as a tree-interface sampler."""

    def sampler(probs_target, probs_draft, parents, tokens, n_nodes, seed):
        return speclab.verify_tree(probs_target, probs_draft, parents, tokens, seed=int(seed),
                                   method=method, n_nodes=n_nodes).emitted_tokens

    return sampler


def _sample(rows, u):
    """Inverse-CDF draws from rows float64 [B, V] (any positive total) with uniforms u [B]."""
    cdf = np.cumsum(rows, axis=1)
    idx = (cdf <= (u * cdf[:, -1])[:, None]).sum(axis=1)
    last = rows.shape[1] - 1 - np.argmax(rows[:, ::-1] > 0, axis=1)
    return np.minimum(idx, last)


def _normalised(w, fallback):
    s = w.sum(axis=1, keepdims=True)
    return np.where(s > 0, w / np.where(s > 0, s, 1.0), fallback)


def rejection(method="tree-iid", wrong_row=None):
    """Recursive rejection sampling over the batch at once.

    Nodes are visited in index order; node i is a candidate of request b when its parent is the
    node b's walk stands on (children come after their parent and in draw order, so this visits
    each node's candidates in order, and a walk that moves to node i meets i's children later).
    Candidate c_j is accepted with u·q⁽ʲ⁾(c_j) ≤ p⁽ʲ⁾(c_j) (q⁽ʲ⁾ = q, or q on the tokens not drawn
    yet renormalised for tree-swor), else p⁽ʲ⁺¹⁾ = norm((p⁽ʲ⁾ − q⁽ʲ⁾)⁺); the last token comes from
    the residual of the node the walk ends on (its p at a leaf).

    Args:
        method: "tree-iid" or "tree-swor", the law the siblings were drawn from.
        wrong_row: None (correct), "depth" (the planted defect: each node read through the row
            of the first node of its depth, in node order) or "parent" (its parent's row).
    """
    swor = method == "tree-swor"

    def sampler(probs_target, probs_draft, parents, tokens, n_nodes, seed):
        rng = np.random.default_rng(int(seed))
        p = probs_target.astype(np.float64)
        q = probs_draft.astype(np.float64)
        b, width, v = p.shape
        r = np.arange(b)
        rows = np.tile(np.arange(width), (b, 1))  # the row each node's target is read from
        if wrong_row == "parent":
            rows[:, 1:] = parents[:, 1:]
        elif wrong_row == "depth":
            depth = np.zeros((b, width), np.int64)
            first = np.full((b, width), width)  # first node of each depth
            first[:, 0] = 0
            for i in range(1, width):
                depth[:, i] = depth[r, parents[:, i]] + 1
                live = i <= n_nodes
                first[r, depth[:, i]] = np.where(live, np.minimum(first[r, depth[:, i]], i),
                                                 first[r, depth[:, i]])
                rows[:, i] = np.where(live, first[r, depth[:, i]], i)
        elif wrong_row is not None:
            raise ValueError(f"wrong_row is {wrong_row!r}")
        p = p / p.sum(axis=2, keepdims=True)
        q = q / q.sum(axis=2, keepdims=True)
        node = np.zeros(b, np.int64)
        res = p[r, rows[:, 0]]
        drawn = np.zeros((b, v), bool)
        out = np.full((b, width), -1, np.int64)
        k = np.zeros(b, np.int64)
        u = rng.random((b, width))
        for i in range(1, width):
            test = (i <= n_nodes) & (parents[:, i] == node)
            if not test.any():
                continue
            x = tokens[:, i]
            qn = q[r, node]
            law = _normalised(np.where(drawn, 0.0, qn), 0.0) if swor else qn
            lx = law[r, x]
            ok = test & (lx > 0) & (u[:, i] * lx <= res[r, x])
            no = test & ~ok
            res[no] = _normalised(np.maximum(res[no] - law[no], 0.0), res[no])
            drawn[no, x[no]] = True
            out[ok, k[ok]] = x[ok]
            k[ok] += 1
            node[ok] = i
            res[ok] = p[ok, rows[ok, i]]
            drawn[ok] = False
        out[r, k] = _sample(res, rng.random(b))
        return out

    return sampler


correct_iid = rejection("tree-iid")
correct_swor = rejection("tree-swor")
wrong_node_row = rejection("tree-iid", wrong_row="depth")
parent_row = rejection("tree-iid", wrong_row="parent")
