"""GGUF import on tiny files written here (llama-arch q/k rows permuted as llama.cpp does),
and the converted-weights cache: reuse, rebuild of a broken entry, new entry for a new file.
"""

import os

import gguf
import jax
import numpy as np
import pytest
from flax import nnx

from harnessrl_jax.models import gguf_io, hf_io, loading
from harnessrl_jax.models.architecture import ModelConfig
from harnessrl_jax.models.tokenizer import tiny_tokenizer
from tests.models.test_models_export import randomised

_BLOCK = {v: k for k, v in gguf_io._BLOCK_NAMES.items()}


def _llama_cpp_permute(w, n_heads):
  """llama.cpp's convert step for llama q/k rows: (2, half) -> (half, 2) within each head."""
  return w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:]).swapaxes(1, 2) \
      .reshape(w.shape)


def write_gguf(path, model, q8_embedding=False):
  cfg = model.cfg
  w = gguf.GGUFWriter(str(path), cfg.family)
  w.add_block_count(cfg.num_layers)
  w.add_context_length(cfg.max_position_embeddings)
  w.add_embedding_length(cfg.hidden_size)
  w.add_feed_forward_length(cfg.intermediate_size)
  w.add_head_count(cfg.num_heads)
  w.add_head_count_kv(cfg.num_kv_heads)
  w.add_key_length(cfg.head_dim)
  w.add_value_length(cfg.head_dim)
  w.add_rope_freq_base(cfg.rope_theta)
  w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
  w.add_vocab_size(cfg.vocab_size)
  w.add_eos_token_id(cfg.eos_token_ids[0])
  for name, t in hf_io.model_to_tensors(model).items():
    if name == "lm_head.weight":
      if cfg.tie_word_embeddings:
        continue
      gname = "output.weight"
    elif name == "model.embed_tokens.weight":
      gname = "token_embd.weight"
    elif name == "model.norm.weight":
      gname = "output_norm.weight"
    else:
      _, _, layer, rest = name.split(".", 3)
      gname = f"blk.{layer}.{_BLOCK[rest]}"
      if cfg.family == "llama" and rest == "self_attn.q_proj.weight":
        t = _llama_cpp_permute(t, cfg.num_heads)
      elif cfg.family == "llama" and rest == "self_attn.k_proj.weight":
        t = _llama_cpp_permute(t, cfg.num_kv_heads)
    if q8_embedding and gname == "token_embd.weight":
      q = gguf.quants.quantize(t, gguf.GGMLQuantizationType.Q8_0)
      w.add_tensor(gname, q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    else:
      w.add_tensor(gname, np.ascontiguousarray(t, np.float32))
  w.write_header_to_file()
  w.write_kv_data_to_file()
  w.write_tensors_to_file()
  w.close()


def _logits(model):
  tokens = np.arange(20, dtype=np.int32).reshape(2, 10) * 7
  return np.asarray(model(tokens, np.tile(np.arange(10), (2, 1)), np.ones((2, 10), bool))[0])


@pytest.mark.parametrize("family,tie", [("llama", True), ("qwen2", False), ("qwen3", True)])
def test_read_gguf_restores_the_model(tmp_path, family, tie):
  src = randomised(ModelConfig.tiny(family, tie_word_embeddings=tie), seed=6)
  path = tmp_path / "tiny.gguf"
  write_gguf(path, src)
  cfg, tensors = gguf_io.read_gguf(path)
  assert cfg == src.cfg.replace(bos_token_id=None, eos_token_ids=(258,))
  model = hf_io.model_from_tensors(cfg, tensors)
  np.testing.assert_allclose(_logits(model), _logits(src), atol=1e-5, rtol=0)


def test_quantised_embedding_is_dequantised(tmp_path):
  src = randomised(ModelConfig.tiny("llama"), seed=8)
  path = tmp_path / "q8.gguf"
  write_gguf(path, src, q8_embedding=True)
  _, tensors = gguf_io.read_gguf(path)
  emb = np.asarray(src.embed_tokens[...])
  got = tensors["model.embed_tokens.weight"]
  assert got.shape == emb.shape and got.dtype == np.float32
  # Q8_0: blocks of 32 sharing a scale d = max|x| / 127 stored in fp16: error <= d / 2 from
  # rounding plus 127 * d * 2^-11 from the fp16 scale.
  step = np.abs(emb.reshape(-1, 32)).max(1, keepdims=True) / 127
  assert (np.abs(got - emb).reshape(-1, 32) <= (0.5 + 127 * 2.0 ** -11) * step * 1.001).all()
  assert not np.array_equal(got, emb)


@pytest.fixture
def counted_conversions(monkeypatch):
  """Counts GGUF reads and stands the tiny tokenizer in for one stored in the file."""
  calls = []
  real = gguf_io.read_gguf
  monkeypatch.setattr(gguf_io, "read_gguf", lambda p: calls.append(p) or real(p))
  monkeypatch.setattr(gguf_io, "tokenizer_from_gguf", lambda p: tiny_tokenizer())
  return calls


def test_cache_is_reused_rebuilt_when_broken_and_keyed_by_content(tmp_path, counted_conversions):
  src = randomised(ModelConfig.tiny("llama"), seed=1)
  path, cache = tmp_path / "m.gguf", tmp_path / "cache"
  write_gguf(path, src)
  first = loading.load_model({"source": "hf", "path": str(path), "cache_dir": str(cache)})
  np.testing.assert_allclose(_logits(first.model), _logits(src), atol=1e-5, rtol=0)
  assert first.prompt_builder.vocab_size == 264
  second = loading.load_model({"source": "hf", "path": str(path), "cache_dir": str(cache)})
  assert len(counted_conversions) == 1  # served from the cache
  np.testing.assert_array_equal(_logits(second.model), _logits(first.model))
  (entry,) = os.listdir(cache)  # no temporary directories left behind

  with open(cache / entry / "model.safetensors", "wb") as f:
    f.write(b"garbage")
  third = loading.load_model({"source": "hf", "path": str(path), "cache_dir": str(cache)})
  assert len(counted_conversions) == 2  # rebuilt
  np.testing.assert_array_equal(_logits(third.model), _logits(first.model))

  write_gguf(path, randomised(ModelConfig.tiny("llama"), seed=2))  # same name, new content
  fourth = loading.load_model({"source": "hf", "path": str(path), "cache_dir": str(cache)})
  assert len(counted_conversions) == 3 and len(os.listdir(cache)) == 2
  assert not np.allclose(_logits(fourth.model), _logits(first.model))
  leaves = jax.tree.leaves(nnx.state(fourth.model, nnx.Param))
  assert all(np.isfinite(np.asarray(x)).all() for x in leaves)
