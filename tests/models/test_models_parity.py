"""Logit parity with `transformers` (torch, fp32) on the same random weights, per family.

The reference models are built from transformers' own config classes and saved with
`save_pretrained`, so this also covers `ModelConfig.from_hf` and the safetensors import.
"""

import numpy as np
import pytest
import torch
import transformers
import jax.numpy as jnp

from harnessrl_jax.models import hf_io, kv_cache
from harnessrl_jax.models.kv_cache import init_cache
from tests.conftest import jitted_forward, skip_unless_slow

TOL = 1e-4
# Qwen3.5's logits here reach |35|, and its recurrence accumulates float32 rounding: against
# transformers run in float64 (no padding; its float64 path gives NaN with padding), ours is
# off by 1.2e-4 and transformers' own float32 by 2.5e-4, so two float32 runs may differ by
# their sum, ~3.7e-4: 1e-4 between them is below that noise. Measured: up to 2.5e-4 on one
# host, 4.3e-4 (8 of 7128 logits, per-layer decode) on another host of the same CPU type
# (2026-12-02). The bar is 6e-4; a wrong mask, position or state is off by O(1).
TOL_QWEN3_5 = 6e-4


def tol(cfg) -> float:
  return TOL_QWEN3_5 if cfg.family == "qwen3_5" else TOL


def _hf_config(family: str, tie: bool, rope_scaling=None, softcap=None, layer_types=None):
  common = dict(vocab_size=264, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                rms_norm_eps=1e-5, tie_word_embeddings=tie, bos_token_id=257, eos_token_id=258)
  if family == "gemma3":
    # 4 layers, global every 3rd as in Gemma 3's 5:1 pattern (shortened); a window of 5
    # slots so every test sequence reaches past it; a query scale unlike head_dim.
    common.update(num_hidden_layers=4, head_dim=24, sliding_window=5,
                  layer_types=["sliding_attention", "sliding_attention", "full_attention",
                               "sliding_attention"])
    full = {"rope_type": "default", "rope_theta": 1000000.0, **(rope_scaling or {})}
    return transformers.Gemma3TextConfig(
        query_pre_attn_scalar=20, hidden_activation="gelu_pytorch_tanh",
        rope_parameters={"full_attention": full,
                         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
        attn_logit_softcapping=softcap, final_logit_softcapping=softcap, **common)
  if family == "qwen3_5":
    # Linear, linear, full, linear (HF's default puts full attention every 4th layer);
    # 4 value heads over 2 key heads, dk != dv, a quarter of each head rotated.
    common.update(num_hidden_layers=4, head_dim=16,
                  layer_types=layer_types or ["linear_attention", "linear_attention",
                                              "full_attention", "linear_attention"])
    return transformers.Qwen3_5TextConfig(
        linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
        linear_value_head_dim=12, linear_conv_kernel_dim=4,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0,
                         "partial_rotary_factor": 0.25}, **common)
  if family == "llama":
    return transformers.LlamaConfig(rope_theta=500000.0, rope_scaling=rope_scaling, **common)
  if family == "qwen2":
    return transformers.Qwen2Config(rope_theta=1000000.0, **common)
  # Qwen3: head_dim decoupled from hidden/heads, as in the real checkpoints.
  return transformers.Qwen3Config(head_dim=24, rope_theta=1000000.0, **common)


def _randomise(model: torch.nn.Module, seed: int) -> None:
  """Weights large enough that logits are O(1): a 1e-4 tolerance then means something.

  Norms scale by about 1 in every family: Gemma's and Qwen3.5's weights are offsets from 1
  (all but the linear-attention layer's gated norm).
  """
  gen = torch.Generator().manual_seed(seed)
  centred = model.config.model_type in ("gemma3_text", "qwen3_5_text")
  with torch.no_grad():
    for name, p in model.named_parameters():
      noise = torch.randn(p.shape, generator=gen)
      if name.endswith("norm.weight"):
        offset = centred and not name.endswith("linear_attn.norm.weight")
        p.copy_((0.0 if offset else 1.0) + 0.3 * noise)
      elif name.endswith("bias"):
        p.copy_(0.5 * noise)
      elif "embed_tokens" in name or "lm_head" in name:
        p.copy_(1.0 * noise)
      else:
        p.copy_(noise / np.sqrt(p.shape[-1]))


LINEAR_ROPE = {"rope_type": "linear", "factor": 8.0}
LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 16}
# name: (family, tied embeddings, rope scaling, ModelConfig overrides[, soft-cap])
CASES = {
    "gemma3": ("gemma3", True, None, {}),
    "qwen3_5": ("qwen3_5", False, None, {}),
    "qwen3_5_unscanned": ("qwen3_5", False, None, {"scan_layers": False}),
    # A repeating pattern: the scan runs 2 repeats of (linear, full) with their states; tied.
    "qwen3_5_two_groups": ("qwen3_5", True, None, {}, None,
                           ["linear_attention", "full_attention"] * 2),
    # Gemma 3 4B+ scale global RoPE linearly; soft-capped final logits. (transformers' Gemma 3
    # ignores attn_logit_softcapping, set here too: so do we.)
    "gemma3_linear_rope_softcap": ("gemma3", True, LINEAR_ROPE, {}, 3.0),
    "llama_tied": ("llama", True, None, {}),
    "llama3_rope_untied": ("llama", False, LLAMA3_ROPE, {}),
    "llama_unscanned": ("llama", True, None, {"scan_layers": False}),
    "qwen2": ("qwen2", False, None, {}),
    "qwen2_tied": ("qwen2", True, None, {}),
    "qwen3": ("qwen3", False, None, {}),
    "qwen3_unscanned": ("qwen3", False, None, {"scan_layers": False}),
}


# Variants of a case above in one respect (embeddings tied, layers listed instead of scanned,
# RoPE scaling and soft-capping, which act in the forward that every cache test shares):
# CI checks their logits; their other tests are the slow tier's (HARNESSRL_SLOW_TESTS=1).
VARIANTS = frozenset({"gemma3_linear_rope_softcap", "llama_tied", "llama_unscanned",
                      "qwen2_tied", "qwen3_unscanned", "qwen3_5_unscanned"})


@pytest.fixture(scope="module", params=sorted(CASES))
def pair(request, tmp_path_factory):
  family, tie, rope_scaling, overrides, *extra = CASES[request.param]
  hf_cfg = _hf_config(family, tie, rope_scaling, *extra)
  hf_cfg._attn_implementation = "eager"
  torch.manual_seed(0)
  ref = transformers.AutoModelForCausalLM.from_config(hf_cfg, attn_implementation="eager")
  ref = ref.float().eval()
  _randomise(ref, seed=len(request.param))
  if tie:
    assert ref.lm_head.weight.data_ptr() == ref.model.embed_tokens.weight.data_ptr()
  path = tmp_path_factory.mktemp(request.param)
  ref.save_pretrained(path)
  ours, cfg = hf_io.load_hf_dir(path, **overrides)
  assert cfg.family == family and cfg.tie_word_embeddings == tie
  assert (cfg.rope_scaling is not None) == (rope_scaling is not None)
  if request.param == "qwen3_5_two_groups":
    assert cfg.scan_group == ("linear_attention", "full_attention") and len(ours.layers) == 2
  return ref, ours, cfg


@pytest.fixture(scope="module")
def forward(pair):
  """`pair`'s model under jit (see `jitted_forward`): the decode tests call it per token."""
  return jitted_forward(pair[1])


@pytest.fixture
def core_pair(request, pair):
  """`pair`, skipped for a VARIANTS case outside the slow tier."""
  if request.node.callspec.params["pair"] in VARIANTS:
    skip_unless_slow("this variant's logits, and this test on the case it varies")
  return pair


def _hf_logits(ref, tokens, mask, positions):
  with torch.no_grad():
    out = ref(input_ids=torch.tensor(tokens), attention_mask=torch.tensor(mask.astype(np.int64)),
              position_ids=torch.tensor(positions))
  return out.logits.numpy()


def _batch(seed: int, b: int, t: int, vocab: int):
  rng = np.random.default_rng(seed)
  return rng.integers(0, vocab, size=(b, t), dtype=np.int32)


def test_logits_match_without_padding(pair, forward):
  ref, _, cfg = pair
  tokens = _batch(1, 3, 40, cfg.vocab_size)
  mask = np.ones_like(tokens, dtype=bool)
  positions = np.broadcast_to(np.arange(40, dtype=np.int32), tokens.shape).copy()
  want = _hf_logits(ref, tokens, mask, positions)
  got, cache = forward(jnp.asarray(tokens), jnp.asarray(positions), jnp.asarray(mask))
  assert cache is None and got.dtype == jnp.float32
  assert np.abs(want).max() > 1.0  # logits are not trivially small
  np.testing.assert_allclose(np.asarray(got), want, atol=tol(cfg), rtol=0)


def test_logits_match_with_left_and_right_padding(core_pair, forward):
  ref, _, cfg = core_pair
  b, t = 3, 24
  tokens = _batch(2, b, t, cfg.vocab_size)
  mask = np.ones((b, t), bool)
  mask[0, :5] = False    # left padding
  mask[1, -7:] = False   # right padding
  mask[2, :2] = False
  mask[2, -3:] = False   # both
  positions = np.clip(np.cumsum(mask, axis=1) - 1, 0, None).astype(np.int32)
  want = _hf_logits(ref, tokens, mask, positions)
  got = np.asarray(forward(jnp.asarray(tokens), jnp.asarray(positions), jnp.asarray(mask))[0])
  # Only real-token queries are defined; padding queries are free to differ.
  np.testing.assert_allclose(got[mask], want[mask], atol=tol(cfg), rtol=0)
  # Padding must not leak: a padded row's real tokens equal the unpadded sequence alone.
  alone = _hf_logits(ref, tokens[:1, 5:], mask[:1, 5:], positions[:1, 5:])
  np.testing.assert_allclose(got[0, 5:], alone[0], atol=tol(cfg), rtol=0)


def test_hidden_states_times_unembed_is_logits(core_pair):
  _, ours, cfg = core_pair
  tokens = _batch(3, 2, 9, cfg.vocab_size)
  mask = np.ones_like(tokens, dtype=bool)
  positions = np.broadcast_to(np.arange(9, dtype=np.int32), tokens.shape)
  h = ours.hidden_states(tokens, positions, mask)
  w = ours.unembed_matrix()
  assert h.shape == (2, 9, cfg.hidden_size) and w.shape == (cfg.hidden_size, cfg.vocab_size)
  logits = ours(tokens, positions, mask)[0]
  want = np.asarray(h, np.float64) @ np.asarray(w, np.float64)
  if cfg.final_logit_softcapping is not None:
    want = cfg.final_logit_softcapping * np.tanh(want / cfg.final_logit_softcapping)
  np.testing.assert_allclose(want, np.asarray(logits), atol=1e-4, rtol=0)


def _rings(cfg) -> list[bool]:
  """Cache kinds to test: sliding-window layers also with window-sized rings."""
  return [False, True] if cfg.ring_layers else [False]


@pytest.mark.parametrize("ring", [False, True])
def test_cached_prefill_and_decode_match_full_forward(core_pair, forward, ring):
  """Left-padded prefill, then T=1 decode steps, equals one uncached pass over everything
  (ring: Gemma's sliding layers keep a window-sized ring, which this sequence wraps)."""
  ref, ours, cfg = core_pair
  if ring not in _rings(cfg):
    pytest.skip("no sliding-window layers")
  b, prompt_len, steps = 2, 10, 6
  tokens = _batch(4, b, prompt_len + steps, cfg.vocab_size)
  mask = np.ones(tokens.shape, bool)
  mask[1, :4] = False  # row 1 has a shorter, left-padded prompt
  positions = np.clip(np.cumsum(mask, axis=1) - 1, 0, None).astype(np.int32)
  full = _hf_logits(ref, tokens, mask, positions)

  cache = init_cache(cfg, b, max_len=prompt_len + steps + 3, ring=ring)
  if ring:
    assert cache.ring_k.shape[2] == cfg.sliding_window < prompt_len
    assert cache.k.shape[0] == len(cfg.layer_types) - len(cfg.ring_layers)
  logits, cache = forward(tokens[:, :prompt_len], positions[:, :prompt_len],
                          mask[:, :prompt_len], cache)
  assert int(cache.index) == prompt_len
  got = [np.asarray(logits)]
  for i in range(prompt_len, prompt_len + steps):
    logits, cache = forward(tokens[:, i:i + 1], positions[:, i:i + 1], mask[:, i:i + 1],
                            cache)
    got.append(np.asarray(logits))
  got = np.concatenate(got, axis=1)
  assert int(cache.index) == prompt_len + steps
  np.testing.assert_array_equal(np.asarray(cache.mask[:, :prompt_len + steps]), mask)
  assert not np.asarray(cache.mask[:, prompt_len + steps:]).any()
  np.testing.assert_allclose(got[mask], full[mask], atol=tol(cfg), rtol=0)


@pytest.mark.parametrize("ring", [False, True])
def test_decode_cache_with_per_layer_weights_matches(core_pair, forward, ring):
  """What the sampler decodes with: a prompt-sized prefill, the cache converted to the
  decode layouts (DecodeCache) and grown in two phases, per-layer weights: HF's logits."""
  ref, ours, cfg = core_pair
  if ring not in _rings(cfg):
    pytest.skip("no sliding-window layers")
  b, prompt_len, steps = 2, 10, 5
  tokens = _batch(5, b, prompt_len + steps, cfg.vocab_size)
  mask = np.ones(tokens.shape, bool)
  mask[0, :3] = False
  positions = np.clip(np.cumsum(mask, axis=1) - 1, 0, None).astype(np.int32)
  full = _hf_logits(ref, tokens, mask, positions)
  layer_params = ours.layer_states()
  assert (layer_params is None) == (not cfg.scan_layers)

  logits, cache = forward(tokens[:, :prompt_len], positions[:, :prompt_len],
                          mask[:, :prompt_len], init_cache(cfg, b, max_len=prompt_len, ring=ring))
  cache = kv_cache.to_decode_cache(cache)
  got = [np.asarray(logits)]
  for i in range(prompt_len, prompt_len + steps):
    if i in (prompt_len, prompt_len + 2):   # phases of 2 and 3 steps, the last one roomy
      cache = kv_cache.grow(cache, i + (2 if i == prompt_len else 4))
    logits, cache = forward(tokens[:, i:i + 1], positions[:, i:i + 1], mask[:, i:i + 1],
                            cache, layer_params=layer_params)
    got.append(np.asarray(logits))
  assert int(cache.index) == prompt_len + steps and cache.max_len == prompt_len + steps + 1
  np.testing.assert_allclose(np.concatenate(got, axis=1)[mask], full[mask], atol=tol(cfg),
                             rtol=0)
  with pytest.raises(ValueError, match="grow"):
    kv_cache.grow(cache, prompt_len)
