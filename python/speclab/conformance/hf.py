"""Hugging Face transformers and the engine interface: speclab's Markov models as causal LMs,
and transformers' assisted generation as an engine-interface loop, so that

    import speclab.conformance as c, speclab.conformance.hf as hf
    c.check(hf.assisted_generation_sampler(), interface="engine")

tests `generate(..., assistant_model=...)` end to end. transformers is imported when a function
here is called, never by `import speclab`: speclab does not depend on it. It runs with transformers
4.46.3 to 4.49.0 on Debian's torch 1.13; scripts/peer/hf_assisted_generation.py gives 4.49.0's
verdicts.
"""

import functools

import numpy as np

from ._engine import sampling_params


@functools.lru_cache(maxsize=None)
def _classes():
    """(MarkovConfig, MarkovForCausalLM), defined on first use so that transformers is imported
    only then."""
    import torch
    from transformers import GenerationMixin, PretrainedConfig, PreTrainedModel
    from transformers.modeling_outputs import CausalLMOutputWithPast

    _torch1_compat()  # so that their generate() runs on torch 1.13 as well

    class MarkovConfig(PretrainedConfig):
        model_type = "speclab-markov"

        def __init__(self, vocab_size=2, order=1, **kwargs):
            self.vocab_size = vocab_size
            self.order = order
            super().__init__(**kwargs)

    class MarkovForCausalLM(PreTrainedModel, GenerationMixin):
        """A causal LM whose logits at position t are table[context of ids[:t+1]]. It keeps no
        cache: every forward pass reads the whole sequence, and prepare_inputs_for_generation
        hands it the whole sequence, so that generate() and assisted generation (which require
        use_cache=True) run with past_key_values None throughout."""

        config_class = MarkovConfig
        main_input_name = "input_ids"

        def __init__(self, config, table=None):
            super().__init__(config)
            v, k = config.vocab_size, config.order
            t = torch.zeros(((v + 1) ** k, v)) if table is None else torch.tensor(table)
            # A parameter, so that .device and .dtype work; never trained.
            self.table = torch.nn.Parameter(t.float(), requires_grad=False)

        def _init_weights(self, module):
            pass  # the table is the model

        def forward(self, input_ids, attention_mask=None, past_key_values=None, use_cache=None,
                    return_dict=None, **kwargs):
            """logits float32 [B, T, V] for input_ids [B, T]; the other arguments are accepted
            and ignored (no padding within a sequence, no cache)."""
            v, k = self.config.vocab_size, self.config.order
            b, n = input_ids.shape
            ids = torch.cat([input_ids.new_full((b, k), v), input_ids], dim=1)
            ctx = torch.zeros_like(input_ids)
            for j in range(k):
                ctx = ctx * (v + 1) + ids[:, j + 1:j + 1 + n]
            return CausalLMOutputWithPast(logits=self.table[ctx])

        def prepare_inputs_for_generation(self, input_ids, **kwargs):
            return {"input_ids": input_ids}

    return MarkovConfig, MarkovForCausalLM


def _torch1_compat():
    """Lets transformers 4.46-4.49 run on Debian's torch 1.13 (Python 3.11), changing no result:

    - `_speculative_sampling` calls `Tensor.squeeze(0, 1)`, which torch ≥ 2.0 accepts; on
      torch 1.x squeeze takes several dimensions here, one after the other (the same tensor).
    - generate() asks whether the model is FSDP-managed by importing torch.distributed.fsdp,
      which this torch cannot import under Python 3.11 (a dataclass with a mutable default). A
      model is not FSDP-managed when FSDP cannot be imported, so there transformers' check
      answers from the module's own flag alone.
    """
    import torch
    original = torch.Tensor.squeeze
    if int(torch.__version__.split(".")[0]) < 2 and not getattr(original, "_several", False):
        def squeeze(self, *dims):
            if len(dims) <= 1:
                return original(self, *dims)
            for d in sorted((d % self.dim() for d in dims), reverse=True):
                self = original(self, d)
            return self

        squeeze._several = True
        torch.Tensor.squeeze = squeeze
    try:
        import torch.distributed.fsdp  # noqa: F401
    except (ImportError, ValueError):
        import transformers.generation.utils as utils
        utils.is_fsdp_managed_module = lambda module: getattr(
            module, "_is_fsdp_managed_module", False)


def causal_lm(model):
    """A transformers PreTrainedModel (with generate()) whose forward pass returns
    model.logits_all: logits float32 [B, T, V] for input_ids [B, T].

    Args:
        model: speclab.conformance MarkovModel.
    """
    config_cls, model_cls = _classes()
    config = config_cls(vocab_size=model.vocab, order=model.order, eos_token_id=None,
                        pad_token_id=None, bos_token_id=None)
    return model_cls(config, np.array(model.table)).eval()


def assisted_generation_sampler(schedule="constant", confidence_threshold=0.0):
    """transformers' assisted generation as an engine-interface loop:
    target.generate(prompt, assistant_model=draft, max_new_tokens=..., do_sample=T > 0,
    temperature, top_k, top_p, min_p) with torch's global generator seeded from seed; returns
    the generated tokens.

    Args:
        schedule: the assistant's num_assistant_tokens_schedule. "constant" drafts
            params["gamma"] tokens per iteration, as the defect laws assume; "heuristic"
            (transformers' default) adapts it to past acceptance, still lossless when correct.
        confidence_threshold: the assistant's assistant_confidence_threshold (transformers'
            default 0.4 stops drafting at a draft token of lower draft probability); 0 drafts
            every token.
    """
    import torch

    models = {}

    def hf(model):
        # One wrapper per MarkovModel object (the cases keep theirs for the whole run).
        if id(model) not in models:
            models[id(model)] = (model, causal_lm(model))
        return models[id(model)][1]

    def sampler(target, draft, prompt, max_new_tokens, seed, params):
        main, assistant = hf(target), hf(draft)
        config = assistant.generation_config
        config.num_assistant_tokens = int(params["gamma"])
        config.num_assistant_tokens_schedule = schedule
        config.assistant_confidence_threshold = confidence_threshold
        temperature, top_k, top_p, min_p = sampling_params(params)
        options = dict(do_sample=False, temperature=None, top_k=None, top_p=None)
        if temperature > 0:
            options = dict(do_sample=True, temperature=temperature, top_k=top_k, top_p=top_p,
                           min_p=min_p if min_p > 0 else None)
        ids = torch.as_tensor(np.asarray(prompt, np.int64))[None]
        torch.manual_seed(int(seed) % (1 << 63))
        with torch.no_grad():
            out = main.generate(ids, assistant_model=assistant, max_new_tokens=int(max_new_tokens),
                                **options)
        return out[0, ids.shape[1]:]

    return sampler
