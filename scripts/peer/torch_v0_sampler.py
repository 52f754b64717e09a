#!/usr/bin/python3
"""The peer of `speclab bench verify --peer`: a torch rejection sampler in the style of vLLM V0's
(vllm/model_executor/layers/rejection_sampler.py), timed on the batches speclab wrote.

The algorithm, as vLLM V0 runs it on [B, γ, V] tensors:
  accept   u < min(1, p(x)/q(x)) for every draft position at once (uniforms from torch.rand);
  residual max(p − q, tiny) over every row of the batch, normalised by its sum, whether or not
           the row is needed (a full-tensor pass);
  sample   argmax(residual / E) with E ~ Exp(1) (the exponential race), again for every row;
  bonus    the same race on the bonus row p_{γ+1};
  output   the accepted prefix, the residual token at the first rejection, the bonus token when
           all γ drafts are accepted, −1 after.

Input: an HDF5 file with, for each batch k, datasets `k/probs_target` [B, γ+1, V] (float32),
`k/probs_draft` [B, γ, V] and `k/draft_tokens` [B, γ] (int32). Output: one JSON object on stdout
with the median seconds per batch, the mean accepted drafts per request, torch's version and its
threads.

  /usr/bin/python3 scripts/peer/torch_v0_sampler.py BATCHES.h5 --threads 2 --repeats 7
"""

import argparse
import json
import statistics
import sys
import time


def rejection_sample(target_with_bonus, draft, draft_tokens, generator):
    """vLLM V0's algorithm: returns the [B, γ+1] output (−1 padded) and the accepted counts."""
    import torch

    batch, gamma, vocab = draft.shape
    target = target_with_bonus[:, :-1]
    rows = torch.arange(batch)[:, None]
    cols = torch.arange(gamma)[None, :]
    p_x = target[rows, cols, draft_tokens]
    q_x = draft[rows, cols, draft_tokens]
    u = torch.rand(p_x.shape, generator=generator)
    accepted = u < torch.minimum(p_x / q_x, torch.ones(1))

    smallest = torch.finfo(torch.float32).tiny
    residual = torch.clamp(target - draft, min=smallest)
    residual = residual / residual.sum(dim=-1, keepdim=True)
    race = torch.empty_like(residual).exponential_(1.0, generator=generator)
    recovered = residual.div_(race).argmax(dim=-1)
    bonus_race = torch.empty_like(target_with_bonus[:, -1]).exponential_(1.0, generator=generator)
    bonus = (target_with_bonus[:, -1] / bonus_race).argmax(dim=-1)

    rejected = accepted == 0
    limits = rejected.max(dim=1).indices
    limits[~rejected.any(dim=1)] = gamma
    index = torch.arange(gamma)[None, :]
    keep = index < limits[:, None]
    first_rejection = index == limits[:, None]
    output = -torch.ones((batch, gamma + 1), dtype=torch.int64)
    head = torch.where(keep, draft_tokens.long(), -torch.ones_like(draft_tokens.long()))
    head = head * ~first_rejection + recovered * first_rejection
    output[:, :gamma] = head
    output[:, gamma] = torch.where(limits == gamma, bonus, -torch.ones_like(bonus))
    return output, limits


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("batches", help="HDF5 file written by `speclab bench verify --peer`")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--repeats", type=int, default=7, help="passes over the batches")
    args = parser.parse_args()
    try:
        import h5py
        import torch
    except ImportError as e:
        print(f"torch_v0_sampler.py: {e.name} is not importable by {sys.executable}; "
              "install Debian's python3-torch and python3-h5py", file=sys.stderr)
        return 3
    torch.set_num_threads(max(1, args.threads))
    with h5py.File(args.batches, "r") as f:
        names = sorted(f.keys(), key=int)
        batches = [(torch.from_numpy(f[k]["probs_target"][()]),
                    torch.from_numpy(f[k]["probs_draft"][()]),
                    torch.from_numpy(f[k]["draft_tokens"][()]).long()) for k in names]
    generator = torch.Generator().manual_seed(7)
    times, accepted, requests = [], 0, 0
    rejection_sample(*batches[0], generator)  # warm-up: first-call allocations
    for _ in range(args.repeats):
        for target, draft, tokens in batches:
            start = time.perf_counter()
            _, limits = rejection_sample(target, draft, tokens, generator)
            times.append(time.perf_counter() - start)
            accepted += int(limits.sum())
            requests += limits.numel()
    print(json.dumps({"seconds_per_batch": statistics.median(times),
                      "mean_accepted": accepted / requests, "torch": torch.__version__,
                      "threads": torch.get_num_threads(), "batches": len(batches),
                      "repeats": args.repeats}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
