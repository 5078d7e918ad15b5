"""GGUF import: architecture, dequantised weights (HF names and layout) and tokenizer.

Weights are dequantised to float32 with the `gguf` package (K-quants included). llama.cpp
stores Llama-arch q/k projection rows permuted (interleaved RoPE pairs); `read_gguf` undoes
that so the result is in the split-halves layout of HF checkpoints, which is what the decoder
expects. Gemma 3: llama.cpp stores every norm weight as 1 + w (its RMSNorm multiplies by the
weight), so 1 is subtracted back; what the file does not say is llama.cpp's Gemma 3 convention
(every 6th layer global, local RoPE base 10000, query scale head_dim**-0.5; 27B excepted).
`gguf` and `transformers` are imported inside the functions (importing them takes seconds).
"""

from __future__ import annotations

import os
import re
from typing import Any

import numpy as np

from harnessrl_jax.errors import ConfigError
from harnessrl_jax.models.architecture import ModelConfig

_ARCHS = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "gemma3": "gemma3"}
_GLOBAL_NAMES = {"token_embd.weight": "model.embed_tokens.weight",
                 "output_norm.weight": "model.norm.weight",
                 "output.weight": "lm_head.weight"}
_BLOCK_NAMES = {"attn_norm.weight": "input_layernorm.weight",
                "ffn_norm.weight": "post_attention_layernorm.weight",
                "attn_q.weight": "self_attn.q_proj.weight",
                "attn_k.weight": "self_attn.k_proj.weight",
                "attn_v.weight": "self_attn.v_proj.weight",
                "attn_output.weight": "self_attn.o_proj.weight",
                "attn_q.bias": "self_attn.q_proj.bias",
                "attn_k.bias": "self_attn.k_proj.bias",
                "attn_v.bias": "self_attn.v_proj.bias",
                "attn_q_norm.weight": "self_attn.q_norm.weight",
                "attn_k_norm.weight": "self_attn.k_norm.weight",
                "ffn_gate.weight": "mlp.gate_proj.weight",
                "ffn_up.weight": "mlp.up_proj.weight",
                "ffn_down.weight": "mlp.down_proj.weight"}
# Gemma's sandwich norms: llama.cpp's ffn_norm is the norm before the MLP, which Llama's HF
# names post_attention_layernorm but Gemma's pre_feedforward_layernorm.
_GEMMA_BLOCK_NAMES = {**_BLOCK_NAMES,
                      "post_attention_norm.weight": "post_attention_layernorm.weight",
                      "ffn_norm.weight": "pre_feedforward_layernorm.weight",
                      "post_ffw_norm.weight": "post_feedforward_layernorm.weight"}
_GEMMA3_SLIDING_PATTERN = 6
_BLOCK_RE = re.compile(r"^blk\.(\d+)\.(.+)$")


def _reader(path: str):
  import gguf
  if not os.path.isfile(path):
    raise ConfigError(f"{path}: GGUF file not found")
  try:
    return gguf.GGUFReader(path)
  except Exception as e:  # gguf raises ValueError, struct.error, IndexError... on bad bytes
    raise ConfigError(f"{path}: not a readable GGUF file ({type(e).__name__}: {e}); the file "
                      "is corrupt or truncated: re-download or reinstall it") from e


def _field(reader, key: str, default: Any = None, where: str = "") -> Any:
  f = reader.fields.get(key)
  if f is None:
    if default is None:
      raise ConfigError(f"{where}: GGUF metadata {key!r} is missing")
    return default
  return f.contents()


def _f32(x) -> float:
  """A float32 metadata value as the decimal it was written from (1e-05, not 9.9999997e-06)."""
  return float(str(np.float32(x)))


def _config(reader, path: str, tensor_names: set[str]) -> ModelConfig:
  arch = _field(reader, "general.architecture", where=path)
  if arch not in _ARCHS:
    raise ConfigError(f"{path}: GGUF architecture {arch!r} is not supported; have {sorted(_ARCHS)}")
  if "rope_freqs.weight" in tensor_names or _field(reader, f"{arch}.rope.scaling.type", "none") \
      not in ("none", ""):
    raise ConfigError(f"{path}: GGUF RoPE scaling is not supported; load the HF safetensors "
                      "checkpoint of this model instead")
  hidden = int(_field(reader, f"{arch}.embedding_length", where=path))
  heads = int(_field(reader, f"{arch}.attention.head_count", where=path))
  tokens = reader.fields.get("tokenizer.ggml.tokens")
  vocab = _field(reader, f"{arch}.vocab_size", len(tokens.data) if tokens is not None else None,
                 path)
  eos = reader.fields.get("tokenizer.ggml.eos_token_id")
  bos = reader.fields.get("tokenizer.ggml.bos_token_id")
  layers = int(_field(reader, f"{arch}.block_count", where=path))
  gemma: dict[str, Any] = {}
  if arch == "gemma3":
    head_dim = int(_field(reader, f"{arch}.attention.key_length", hidden // heads, path))
    gemma = dict(
        layer_types=tuple("full_attention" if (i + 1) % _GEMMA3_SLIDING_PATTERN == 0
                          else "sliding_attention" for i in range(layers)),
        sliding_window=int(_field(reader, f"{arch}.attention.sliding_window", where=path)),
        rope_local_theta=10000.0, query_pre_attn_scalar=head_dim,
        hidden_act="gelu_pytorch_tanh")
  return ModelConfig(
      vocab_size=int(vocab),
      hidden_size=hidden,
      intermediate_size=int(_field(reader, f"{arch}.feed_forward_length", where=path)),
      num_layers=layers,
      num_heads=heads,
      num_kv_heads=int(_field(reader, f"{arch}.attention.head_count_kv", heads, path)),
      head_dim=int(_field(reader, f"{arch}.attention.key_length", hidden // heads, path)),
      rope_theta=_f32(_field(reader, f"{arch}.rope.freq_base", 10000.0, path)),
      rms_norm_eps=_f32(_field(reader, f"{arch}.attention.layer_norm_rms_epsilon", 1e-6, path)),
      tie_word_embeddings="output.weight" not in tensor_names,
      attention_bias=_ARCHS[arch] == "qwen2",
      qk_norm=_ARCHS[arch] in ("qwen3", "gemma3"),
      max_position_embeddings=int(_field(reader, f"{arch}.context_length", 2048, path)),
      bos_token_id=None if bos is None else int(bos.contents()),
      eos_token_ids=() if eos is None else (int(eos.contents()),),
      family=_ARCHS[arch], **gemma)


def _unpermute_rows(w: np.ndarray, n_heads: int) -> np.ndarray:
  """Inverse of llama.cpp's q/k permutation: per head, rows (pair, 2) -> (2, half)."""
  out_dim = w.shape[0]
  return (w.reshape(n_heads, out_dim // n_heads // 2, 2, *w.shape[1:]).swapaxes(1, 2)
          .reshape(w.shape))


def read_gguf(path: str | os.PathLike) -> tuple[ModelConfig, dict[str, np.ndarray]]:
  """(config, HF-named float32 tensors in HF [out, in] layout) of a GGUF file."""
  from gguf.quants import dequantize
  path = os.fspath(path)
  reader = _reader(path)
  names = {t.name for t in reader.tensors}
  cfg = _config(reader, path, names)
  block_names = _GEMMA_BLOCK_NAMES if cfg.gemma_style else _BLOCK_NAMES
  tensors = {}
  for t in reader.tensors:
    m = _BLOCK_RE.match(t.name)
    rest = None
    if m:
      layer, rest = m.groups()
      if rest not in block_names:
        raise ConfigError(f"{path}: unexpected GGUF tensor {t.name!r}")
      name = f"model.layers.{layer}.{block_names[rest]}"
    elif t.name in _GLOBAL_NAMES:
      name = _GLOBAL_NAMES[t.name]
    else:
      raise ConfigError(f"{path}: unexpected GGUF tensor {t.name!r}")
    try:
      w = np.asarray(dequantize(t.data, t.tensor_type), np.float32)
    except Exception as e:  # bad block data or an unknown quantisation type
      raise ConfigError(f"{path}: cannot dequantise tensor {t.name!r} "
                        f"({t.tensor_type.name}): {e}") from e
    # GGUF lists dimensions innermost first; NumPy data is [out, in] already.
    expected = tuple(int(d) for d in reversed(t.shape))
    if w.shape != expected:
      w = w.reshape(expected)
    if not np.all(np.isfinite(w)):
      raise ConfigError(f"{path}: tensor {t.name!r} holds non-finite values; the file is corrupt")
    if cfg.family == "llama" and rest == "attn_q.weight":
      w = _unpermute_rows(w, cfg.num_heads)
    elif cfg.family == "llama" and rest == "attn_k.weight":
      w = _unpermute_rows(w, cfg.num_kv_heads)
    elif cfg.gemma_style and name.endswith("norm.weight"):
      w = w - np.float32(1.0)
    tensors[name] = w
  return cfg, tensors


def tokenizer_from_gguf(path: str | os.PathLike):
  """The transformers tokenizer (with chat template) stored in a GGUF file (a few seconds)."""
  from transformers import AutoTokenizer
  path = os.fspath(path)
  try:
    return AutoTokenizer.from_pretrained(os.path.dirname(os.path.abspath(path)),
                                         gguf_file=os.path.basename(path))
  except Exception as e:  # transformers' GGUF parser raises many types on bad input
    raise ConfigError(f"{path}: cannot read the tokenizer from this GGUF file "
                      f"({type(e).__name__}: {e})") from e
