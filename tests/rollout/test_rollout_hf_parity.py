"""Greedy rollouts equal `transformers.generate` on the same weights (tiny random configs).

Our random model is exported with `hf_io.save_hf_dir` and loaded by transformers; both decode
the same left-padded batch of different prompt lengths greedily.
"""

import jax
import numpy as np
import pytest
import torch
import transformers
from flax import nnx

from harnessrl_jax.models import hf_io
from harnessrl_jax.models.architecture import ModelConfig
from harnessrl_jax.models.decoder import Decoder
from harnessrl_jax.rollout import sampler
from harnessrl_jax.rollout.sampling import SamplingParams

PROMPTS = [[5, 17, 200, 33, 8], [90], [7, 7, 150, 260, 12, 99, 3, 41, 250], [64, 65]]
NEW_TOKENS = 24
PAD = 0


def hf_greedy(hf_model, prompts, new_tokens, pad_id):
  """transformers.generate on a left-padded batch; returns [B, new_tokens] (pad after EOS)."""
  width = max(map(len, prompts))
  ids = torch.tensor([[pad_id] * (width - len(p)) + list(p) for p in prompts])
  mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
  with torch.no_grad():
    out = hf_model.generate(input_ids=ids, attention_mask=mask, do_sample=False,
                            max_new_tokens=new_tokens, pad_token_id=pad_id)
  new = out[:, width:].numpy()
  return np.pad(new, ((0, 0), (0, new_tokens - new.shape[1])), constant_values=pad_id)


def assert_same_greedy(ours, theirs, eos_ids, new_tokens):
  """Row by row: our response equals HF's up to and including its EOS, pads after it."""
  for row in range(theirs.shape[0]):
    hf_row = theirs[row]
    ends = np.flatnonzero(np.isin(hf_row, eos_ids))
    length = ends[0] + 1 if ends.size else new_tokens
    assert ours.lengths[row] == length, (row, ours.response_tokens[row], hf_row)
    np.testing.assert_array_equal(ours.response_tokens[row, :length], hf_row[:length])
    assert ours.finish_reason[row] == (0 if ends.size else 1)


LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 16}


@pytest.mark.parametrize("family,overrides", [
    ("llama", {}), ("qwen2", {}), ("qwen3", {}), ("gemma3", {}), ("qwen3_5", {}),
    ("llama", {"rope_scaling": LLAMA3_ROPE, "tie_word_embeddings": False}),
])
def test_greedy_matches_transformers_generate(tmp_path, family, overrides):
  model = Decoder(ModelConfig.tiny(family, **overrides), rngs=nnx.Rngs(0))
  # Weights with std 0.1 instead of 0.02, so greedy paths are not just repeats of one token.
  params = nnx.state(model, nnx.Param)
  nnx.update(model, jax.tree.map(lambda x: x * 5 if x.ndim == 2 else x, params))
  hf_io.save_hf_dir(model, tmp_path)
  hf_model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32)

  graphdef, params = nnx.split(model)
  ours = jax.tree.map(np.asarray, sampler.generate(
      graphdef, params, PROMPTS, SamplingParams(temperature=0.0, max_new_tokens=NEW_TOKENS),
      jax.random.key(0), prompt_buckets=(16,), pad_id=PAD))
  theirs = hf_greedy(hf_model, PROMPTS, NEW_TOKENS, PAD)
  assert len({tuple(r) for r in theirs}) == len(PROMPTS)  # distinct rows: a real comparison
  assert_same_greedy(ours, theirs, model.cfg.eos_token_ids, NEW_TOKENS)
