"""Hugging Face safetensors directories <-> `Decoder` parameters.

Our parameter paths mirror HF names: `layers/3/self_attn/q_proj/kernel` is
`model.layers.3.self_attn.q_proj.weight` transposed (HF stores [out, in], we store [in, out]);
with scanned layers `layers/self_attn/q_proj/kernel` stacks those of every layer on axis 0.
`embed_tokens` is `model.embed_tokens.weight`; `lm_head` is `lm_head.weight` transposed.
Gemma 4's per-layer input parameters (`per_layer_inputs/...`, `layers/i/per_layer_gate/...`)
sit directly on `model.` and `model.layers.i.` in HF, whose KV-shared layers' k/v
projections and norms, which some checkpoints hold, are ignored as transformers ignores them.
A Gated DeltaNet conv kernel [K, C] is HF's depthwise Conv1d weight [C, 1, K] rearranged.
Multimodal wrappers (the released Qwen3.5, Gemma 3 4B+ and Gemma 4 checkpoints) keep the
text model under `model.language_model.` (or, in Gemma 3's stored layout,
`language_model.model.` and `language_model.lm_head.`); it is read as `model.` and
`lm_head.`, and the vision and audio towers, their projectors and Qwen3.5's multi-token
prediction head are left, as transformers' text model leaves them. Any other tensor is still
refused by name.
An exported directory (config.json, model.safetensors, generation_config.json and, when
given, the tokenizer files) loads with `transformers.AutoModelForCausalLM.from_pretrained`.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Iterator, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from safetensors import SafetensorError, safe_open
from safetensors.numpy import save_file

from harnessrl_jax.errors import ConfigError
from harnessrl_jax.models.architecture import ModelConfig
from harnessrl_jax.models.decoder import Decoder

_ARCHITECTURES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                  "qwen3": "Qwen3ForCausalLM", "gemma3": "Gemma3ForCausalLM",
                  "qwen3_5": "Qwen3_5ForCausalLM", "gemma4": "Gemma4ForCausalLM"}
# Buffers some checkpoints carry that are recomputed here.
_IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)
# Where multimodal checkpoints keep the text model, and its names in a text-only one.
_TEXT_PREFIXES = {"model.language_model.": "model.", "language_model.model.": "model.",
                  "language_model.lm_head.": "lm_head."}
# Parts of multimodal checkpoints that the text decoder does not use.
_IGNORED_PREFIXES = ("model.visual.", "mtp.", "model.vision_tower.", "vision_tower.",
                     "model.multi_modal_projector.", "multi_modal_projector.",
                     "model.embed_vision.", "model.audio_tower.", "model.embed_audio.")
# Our module names that HF's do not have (Gemma 4's per-layer inputs sit on the model and
# on each layer there, its router, experts and their norms on the layer), and our bare
# embedding tables, which HF names `<name>.weight`.
_UNNAMED_MODULES = ("per_layer_inputs", "per_layer_gate", "moe")
_TABLES = ("embed_tokens_per_layer",)
# Tensors of a Gemma 4 KV-shared layer that checkpoints may hold and transformers ignores.
_SHARED_LAYER_UNUSED = ("k_proj.weight", "v_proj.weight", "k_norm.weight", "v_norm.weight")

# How an HF tensor is stored relative to ours: as is, transposed ([out, in] vs [in, out]),
# or as a depthwise Conv1d weight [C, 1, K] of our [K, C] kernel.
_LAYOUTS = {
    "same": (lambda ours: ours, lambda hf: hf),
    "transpose": (lambda ours: ours.T, lambda hf: hf.T),
    "conv": (lambda ours: ours.T[:, None, :], lambda hf: hf[:, 0, :].T),
}


def _flatten(tree: Mapping[Any, Any], prefix: tuple = ()) -> Iterator[tuple[tuple, Any]]:
  for k, v in tree.items():
    if isinstance(v, Mapping):
      yield from _flatten(v, prefix + (k,))
    else:
      yield prefix + (k,), v


def hf_name(path: tuple) -> tuple[str, str]:
  """(HF tensor name, its layout: a key of _LAYOUTS) for one of our parameter paths."""
  parts = [str(p) for p in path]
  if parts == ["lm_head"]:
    return "lm_head.weight", "transpose"
  if parts == ["embed_tokens"]:
    return "model.embed_tokens.weight", "same"
  parts = [p for p in parts if p not in _UNNAMED_MODULES]
  layout = "same"
  if parts[-1] in _TABLES:
    parts.append("weight")
  if parts[-1] == "kernel":
    layout = "conv" if parts[-2] == "conv1d" else "transpose"
    parts[-1] = "weight"
  return "model." + ".".join(parts), layout


def text_tensors(tensors: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
  """A multimodal checkpoint's text-decoder tensors under the text model's names."""
  if not any(n.startswith(tuple(_TEXT_PREFIXES)) for n in tensors):
    return dict(tensors)
  out = {}
  for n, t in tensors.items():
    if n.startswith(_IGNORED_PREFIXES):
      continue
    prefix = next((p for p in _TEXT_PREFIXES if n.startswith(p)), "")
    out[_TEXT_PREFIXES[prefix] + n[len(prefix):] if prefix else n] = t
  return out


def _entries(path: tuple, cfg: ModelConfig) -> tuple[list[tuple[str, str]], bool]:
  """(HF (name, layout) of each slice of one parameter, whether it stacks layers)."""
  if cfg.scan_layers and path[0] == "layers" and cfg.scan_group:
    # layers/<position in the pattern>/...: one slice per repeat of the pattern.
    period, position = len(cfg.scan_group), int(path[1])
    return [hf_name(("layers", r * period + position) + path[2:])
            for r in range(cfg.num_layers // period)], True
  if cfg.scan_layers and path[0] == "layers":
    return [hf_name(("layers", i) + path[1:]) for i in range(cfg.num_layers)], True
  return [hf_name(path)], False


def abstract_model(cfg: ModelConfig) -> Decoder:
  """A Decoder whose parameters are shape/dtype placeholders (no memory, no init cost)."""
  return nnx.eval_shape(lambda: Decoder(cfg, rngs=nnx.Rngs(0)))


def model_from_tensors(cfg: ModelConfig, tensors: Mapping[str, np.ndarray],
                       where: str = "checkpoint") -> Decoder:
  """Builds a Decoder from HF-named tensors (cast to `cfg.param_dtype`).

  Raises ConfigError naming `where` and the tensor when one is missing or has the wrong shape.
  """
  tensors = text_tensors(tensors)
  graphdef, state = nnx.split(abstract_model(cfg))
  pure = nnx.to_pure_dict(state)
  used = set()
  values = {}
  for path, leaf in _flatten(pure):
    entries, stacked = _entries(path, cfg)
    slice_shape = tuple(leaf.shape[1:] if stacked else leaf.shape)
    slices = []
    for name, layout in entries:
      if name not in tensors:
        raise ConfigError(f"{where}: tensor {name!r} is missing (config says family="
                          f"{cfg.family}, {cfg.num_layers} layers)")
      to_hf, from_hf = _LAYOUTS[layout]
      arr = np.asarray(tensors[name])
      # The HF shape of our slice, from a zero-stride view (no allocation).
      want = to_hf(np.broadcast_to(np.int8(0), slice_shape)).shape
      if arr.shape != want:
        raise ConfigError(f"{where}: tensor {name!r} has shape {arr.shape}; the config "
                          f"implies {want}")
      slices.append(from_hf(arr))
      used.add(name)
    arr = np.stack(slices) if stacked else slices[0]
    values[path] = jnp.asarray(arr, dtype=leaf.dtype)
  unused = {f"model.layers.{i}.self_attn.{name}" for i in range(cfg.num_layers)
            if cfg.kv_source(i) is not None for name in _SHARED_LAYER_UNUSED}
  extra = sorted(n for n in tensors if n not in used and not n.endswith(_IGNORED_SUFFIXES)
                 and not (n == "lm_head.weight" and cfg.tie_word_embeddings)
                 and n not in unused)
  if extra:
    raise ConfigError(f"{where}: unexpected tensors {extra[:5]}{'...' if len(extra) > 5 else ''}"
                      f" for family={cfg.family}; is config.json for this checkpoint?")

  def fill(tree, prefix=()):
    return {k: fill(v, prefix + (k,)) if isinstance(v, Mapping) else values[prefix + (k,)]
            for k, v in tree.items()}

  nnx.replace_by_pure_dict(state, fill(pure))
  return nnx.merge(graphdef, state)


def model_to_tensors(model: Decoder, dtype=None) -> dict[str, np.ndarray]:
  """HF-named NumPy tensors of a model's parameters ([out, in] layout), optionally cast."""
  pure = nnx.to_pure_dict(nnx.state(model, nnx.Param))
  out = {}
  for path, value in _flatten(pure):
    arr = np.asarray(jax.device_get(value))
    if dtype is not None:
      arr = arr.astype(jnp.dtype(dtype))
    entries, stacked = _entries(path, model.cfg)
    for i, (name, layout) in enumerate(entries):
      part = arr[i] if stacked else arr
      out[name] = np.ascontiguousarray(_LAYOUTS[layout][0](part))
  return out


def read_safetensors_dir(path: str) -> dict[str, np.ndarray]:
  """All tensors of every `*.safetensors` file in a directory (sharded checkpoints too)."""
  files = sorted(glob.glob(os.path.join(path, "*.safetensors")))
  if not files:
    raise ConfigError(f"{path}: no *.safetensors files; expected a Hugging Face checkpoint "
                      "directory (config.json + model*.safetensors)")
  tensors = {}
  for f in files:
    try:
      with safe_open(f, framework="numpy") as st:
        for name in st.keys():
          tensors[name] = st.get_tensor(name)
    except (SafetensorError, OSError) as e:
      raise ConfigError(f"{f}: cannot read safetensors file ({e})") from e
  return tensors


def load_hf_dir(path: str | os.PathLike, **config_overrides: Any) -> tuple[Decoder, ModelConfig]:
  """Loads config.json + safetensors from a HF checkpoint directory.

  `config_overrides` set ModelConfig fields the checkpoint does not fix (dtype, param_dtype,
  remat).
  """
  path = os.fspath(path)
  if not os.path.isdir(path):
    raise ConfigError(f"{path}: not a directory; expected a Hugging Face checkpoint directory")
  cfg = ModelConfig.from_hf(path, **config_overrides)
  return model_from_tensors(cfg, read_safetensors_dir(path), where=path), cfg


def save_hf_dir(model: Decoder, path: str | os.PathLike, tokenizer=None, dtype=None) -> None:
  """Writes a directory that `transformers` (and HF-compatible servers) load.

  dtype: the stored tensor dtype (default: the parameter dtype). `tokenizer`: a transformers
  tokenizer (or PromptBuilder) whose files are saved alongside.
  """
  path = os.fspath(path)
  os.makedirs(path, exist_ok=True)
  cfg: ModelConfig = model.cfg
  tensors = model_to_tensors(model, dtype)
  if cfg.tie_word_embeddings:
    tensors.pop("lm_head.weight", None)
  stored = str(next(iter(tensors.values())).dtype)
  weights = os.path.join(path, "model.safetensors")
  save_file(tensors, weights, metadata={"format": "pt"})
  os.chmod(weights, 0o644)  # safetensors writes 0600; a server may run as another user
  hf = cfg.to_hf()
  hf["architectures"] = [_ARCHITECTURES[cfg.family]]
  hf["dtype"] = stored
  with open(os.path.join(path, "config.json"), "w", encoding="utf-8") as f:
    json.dump(hf, f, indent=2)
  gen = {"bos_token_id": cfg.bos_token_id,
         "eos_token_id": list(cfg.eos_token_ids) or None}
  with open(os.path.join(path, "generation_config.json"), "w", encoding="utf-8") as f:
    json.dump(gen, f, indent=2)
  if tokenizer is not None:
    getattr(tokenizer, "tokenizer", tokenizer).save_pretrained(path)
