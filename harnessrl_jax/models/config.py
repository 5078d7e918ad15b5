"""`ModelConfig`: the architecture of a decoder, read from a Hugging Face `config.json`.

One frozen, hashable dataclass describes every supported family (it is a static argument
under `jax.jit`). Families:
  llama  - Llama 2/3 (incl. llama3 RoPE scaling), SmolLM2: no biases.
  qwen2  - Qwen2 / Qwen2.5: bias on the q/k/v projections.
  qwen3  - Qwen3: RMSNorm on each query/key head before RoPE (QK-norm), no biases.
`layer_types` names each block's mixer; only "full_attention" exists today, the field keeps
room for hybrid stacks (e.g. linear-attention layers): those run as a list of blocks
(`scan_layers=False`) or, later, as a scan over a repeating group of blocks.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from typing import Any

from harnessrl_jax.data.frozen import FrozenMap, freeze, thaw
from harnessrl_jax.errors import ConfigError

FAMILIES = ("llama", "qwen2", "qwen3")
LAYER_TYPES = ("full_attention",)
DTYPES = ("float32", "bfloat16", "float16")
# HF `model_type` -> our family.
_HF_MODEL_TYPES = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3"}
_ROPE_TYPES = ("default", "llama3")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  """Architecture and numerics of one decoder; see the module docstring for families."""

  vocab_size: int
  hidden_size: int
  intermediate_size: int
  num_layers: int
  num_heads: int
  num_kv_heads: int
  head_dim: int
  rope_theta: float = 10000.0
  # None, or a FrozenMap as in HF: {"rope_type": "llama3", "factor", "low_freq_factor",
  # "high_freq_factor", "original_max_position_embeddings"}.
  rope_scaling: FrozenMap | None = None
  rms_norm_eps: float = 1e-6
  tie_word_embeddings: bool = False
  attention_bias: bool = False
  qk_norm: bool = False
  max_position_embeddings: int = 2048
  bos_token_id: int | None = None
  eos_token_ids: tuple[int, ...] = ()
  dtype: str = "float32"        # activations
  param_dtype: str = "float32"
  remat: bool = False
  # Stack the (identical) blocks' parameters on a leading 'layers' axis and run them with
  # lax.scan: compile time stops growing with depth. False: a Python list of blocks.
  scan_layers: bool = True
  family: str = "llama"
  layer_types: tuple[str, ...] = ()  # () means every layer is "full_attention"

  def __post_init__(self):
    if self.rope_scaling is not None:
      object.__setattr__(self, "rope_scaling", freeze(self.rope_scaling))
    object.__setattr__(self, "eos_token_ids", tuple(int(i) for i in self.eos_token_ids))
    if not self.layer_types:
      object.__setattr__(self, "layer_types", ("full_attention",) * self.num_layers)
    object.__setattr__(self, "layer_types", tuple(self.layer_types))
    self.validate()

  def validate(self) -> None:
    """Raises ConfigError naming the first field that cannot run."""
    if self.family not in FAMILIES:
      raise ConfigError(f"model config: family={self.family!r}; expected one of {FAMILIES}")
    for name in ("dtype", "param_dtype"):
      if getattr(self, name) not in DTYPES:
        raise ConfigError(f"model config: {name}={getattr(self, name)!r}; expected one of {DTYPES}")
    if self.num_heads % self.num_kv_heads:
      raise ConfigError(f"model config: num_heads={self.num_heads} is not a multiple of "
                        f"num_kv_heads={self.num_kv_heads}")
    if self.head_dim % 2:
      raise ConfigError(f"model config: head_dim={self.head_dim} must be even for RoPE")
    if len(self.layer_types) != self.num_layers:
      raise ConfigError(f"model config: layer_types has {len(self.layer_types)} entries, "
                        f"num_layers={self.num_layers}")
    for t in self.layer_types:
      if t not in LAYER_TYPES:
        raise ConfigError(f"model config: layer type {t!r} is not supported; have {LAYER_TYPES}")
    if self.scan_layers and len(set(self.layer_types)) > 1:
      raise ConfigError("model config: scan_layers=True needs one layer type; set "
                        "scan_layers=False for mixed stacks")
    if self.rope_scaling is not None:
      rtype = self.rope_scaling.get("rope_type", "default")
      if rtype not in _ROPE_TYPES:
        raise ConfigError(f"model config: rope_scaling type {rtype!r} is not supported; "
                          f"have {_ROPE_TYPES}")

  @property
  def hf_model_type(self) -> str:
    return self.family

  def replace(self, **changes: Any) -> ModelConfig:
    return dataclasses.replace(self, **changes)

  def to_json(self) -> dict[str, Any]:
    out = dataclasses.asdict(self)
    out["rope_scaling"] = None if self.rope_scaling is None else thaw(self.rope_scaling)
    out["eos_token_ids"] = list(self.eos_token_ids)
    out["layer_types"] = list(self.layer_types)
    return out

  @classmethod
  def from_json(cls, d: Mapping[str, Any]) -> ModelConfig:
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - known)
    if unknown:
      raise ConfigError(f"model config JSON: unknown fields {unknown}")
    d = dict(d)
    d["eos_token_ids"] = tuple(d.get("eos_token_ids", ()))
    d["layer_types"] = tuple(d.get("layer_types", ()))
    return cls(**d)

  @classmethod
  def from_hf(cls, config: Mapping[str, Any] | str | os.PathLike, **overrides: Any) -> ModelConfig:
    """Reads a HF `config.json` (a dict, the file, or its directory); `overrides` win."""
    where = "HF config"
    if not isinstance(config, Mapping):
      path = os.fspath(config)
      if os.path.isdir(path):
        path = os.path.join(path, "config.json")
      where = path
      try:
        with open(path, encoding="utf-8") as f:
          config = json.load(f)
      except (OSError, json.JSONDecodeError) as e:
        raise ConfigError(f"{path}: cannot read a HF config.json ({e})") from e
    c = dict(config)
    model_type = c.get("model_type")
    if model_type not in _HF_MODEL_TYPES:
      raise ConfigError(f"{where}: model_type={model_type!r} is not supported; "
                        f"have {sorted(_HF_MODEL_TYPES)}")
    family = _HF_MODEL_TYPES[model_type]
    for flag in ("mlp_bias", "use_sliding_window"):
      if c.get(flag):
        raise ConfigError(f"{where}: {flag}=true is not supported")
    if c.get("hidden_act", "silu") != "silu":
      raise ConfigError(f"{where}: hidden_act={c.get('hidden_act')!r}; only 'silu' is supported")
    # Qwen2 always has q/k/v bias; Llama/Qwen3 `attention_bias` would also bias o_proj.
    if family != "qwen2" and c.get("attention_bias"):
      raise ConfigError(f"{where}: attention_bias=true is not supported for {model_type}")
    # transformers >= 5 writes `rope_parameters` (with rope_theta inside); older files have
    # top-level `rope_theta` and `rope_scaling`.
    rope = dict(c.get("rope_parameters") or c.get("rope_scaling") or {})
    rope_theta = float(rope.pop("rope_theta", c.get("rope_theta", 10000.0)))
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    rope_scaling = None
    if rope_type not in (None, "default"):
      rope.pop("type", None)
      rope["rope_type"] = rope_type
      rope_scaling = rope
    heads = int(c["num_attention_heads"])
    eos = c.get("eos_token_id")
    eos_ids = () if eos is None else (tuple(eos) if isinstance(eos, (list, tuple)) else (eos,))
    fields = dict(
        vocab_size=int(c["vocab_size"]),
        hidden_size=int(c["hidden_size"]),
        intermediate_size=int(c["intermediate_size"]),
        num_layers=int(c["num_hidden_layers"]),
        num_heads=heads,
        num_kv_heads=int(c.get("num_key_value_heads") or heads),
        head_dim=int(c.get("head_dim") or c["hidden_size"] // heads),
        rope_theta=rope_theta,
        rope_scaling=rope_scaling,
        rms_norm_eps=float(c.get("rms_norm_eps", 1e-6)),
        tie_word_embeddings=bool(c.get("tie_word_embeddings", False)),
        attention_bias=family == "qwen2",
        qk_norm=family == "qwen3",
        max_position_embeddings=int(c.get("max_position_embeddings", 2048)),
        bos_token_id=c.get("bos_token_id"),
        eos_token_ids=eos_ids,
        family=family,
    )
    fields.update(overrides)
    return cls(**fields)

  def to_hf(self) -> dict[str, Any]:
    """The HF `config.json` fields for this architecture (numerics are not included)."""
    rope_parameters = {"rope_type": "default", "rope_theta": self.rope_theta}
    if self.rope_scaling is not None:
      rope_parameters = {**thaw(self.rope_scaling), "rope_theta": self.rope_theta}
    eos: Any = list(self.eos_token_ids)
    if len(eos) == 1:
      eos = eos[0]
    out = dict(
        model_type=self.hf_model_type,
        vocab_size=self.vocab_size,
        hidden_size=self.hidden_size,
        intermediate_size=self.intermediate_size,
        num_hidden_layers=self.num_layers,
        num_attention_heads=self.num_heads,
        num_key_value_heads=self.num_kv_heads,
        head_dim=self.head_dim,
        hidden_act="silu",
        rope_parameters=rope_parameters,
        rms_norm_eps=self.rms_norm_eps,
        tie_word_embeddings=self.tie_word_embeddings,
        max_position_embeddings=self.max_position_embeddings,
        bos_token_id=self.bos_token_id,
        eos_token_id=eos or None,
    )
    if self.family != "qwen2":
      out["attention_bias"] = False
    if self.family == "llama":
      out["mlp_bias"] = False
    return out

  @classmethod
  def tiny(cls, family: str = "llama", **overrides: Any) -> ModelConfig:
    """A small random-weight config for tests: 2 layers, d=64, 4 query / 2 KV heads.

    The vocabulary (264) matches `tokenizer.tiny_tokenizer()`: 256 bytes + 8 specials.
    """
    fields = dict(
        vocab_size=264, hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4,
        num_kv_heads=2, head_dim=16, rope_theta=10000.0, rms_norm_eps=1e-6,
        tie_word_embeddings=family != "qwen3", attention_bias=family == "qwen2",
        qk_norm=family == "qwen3", max_position_embeddings=512, bos_token_id=None,
        eos_token_ids=(258, 256), family=family)
    fields.update(overrides)
    return cls(**fields)
