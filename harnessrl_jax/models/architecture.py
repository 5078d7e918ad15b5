"""`ModelConfig`: the architecture of a decoder, read from a Hugging Face `config.json`.

One frozen, hashable dataclass describes every supported family (it is a static argument
under `jax.jit`). Families:
  llama  - Llama 2/3 (incl. llama3 RoPE scaling), SmolLM2: no biases.
  qwen2  - Qwen2 / Qwen2.5: bias on the q/k/v projections.
  qwen3  - Qwen3: RMSNorm on each query/key head before RoPE (QK-norm), no biases.
  gemma3 - Gemma 3 text: QK-norm, Gemma's RMSNorm (x * (1 + w), cast after the multiply), a
           norm after each sublayer as well as before it, embeddings scaled by sqrt(hidden),
           GeGLU (tanh gelu), scores scaled by query_pre_attn_scalar**-0.5, tied embeddings,
           optional soft-capping of the final logits,
           and interleaved "sliding_attention" layers (keys within `sliding_window` slots,
           RoPE base `rope_local_theta`, no RoPE scaling) with "full_attention" layers.
  qwen3_5 - Qwen3.5 text (dense): "linear_attention" layers (Gated DeltaNet,
           models/linear_attention.py) interleaved with "full_attention" layers whose query
           projection also yields a sigmoid output gate per head, QK-norm, RoPE on the first
           `partial_rotary_factor` of each head, and norms centred on 1 (x * (1 + w), cast after,
           as Gemma's). Text positions only: M-RoPE with equal t/h/w positions is plain RoPE.
  gemma4 - Gemma 4 text (models/gemma4_config.py reads its HF config): Gemma 3's
           layout (sandwich norms, scaled embeddings, GeGLU, QK-norm, sliding + full layers,
           soft-capped logits) with norm weights used as they are (x * w, not 1 + w),
           attention scores unscaled, a scale-less RMSNorm on values, full layers with their
           own head size and KV heads (`global_head_dim`, `num_global_kv_heads`), optionally
           keys reused as values there (`attention_k_eq_v`), "proportional" RoPE on them
           (rope_scaling), per-layer input embeddings (`per_layer_input_size`), a scalar per
           layer, and the last `num_kv_shared_layers` layers reading the keys/values of the
           last earlier layer of their type (their MLPs twice as wide with
           `double_wide_mlp`); MoE models (`num_experts` > 0) add a routed expert block
           beside each layer's MLP (models/moe.py). Its layers differ in shape, so it never
           scans them.
`layer_types` names each block's mixer. Sliding and full attention share one parameter
structure, so such stacks scan as one stacked block; stacks with linear attention scan over
repeats of their layer pattern (`scan_group`: one stacked block per position in it).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from typing import Any

from harnessrl_jax.data.frozen import FrozenMap, freeze, thaw
from harnessrl_jax.errors import ConfigError
from harnessrl_jax.models import gemma4_config

FAMILIES = ("llama", "qwen2", "qwen3", "gemma3", "qwen3_5", "gemma4")
GEMMA_FAMILIES = ("gemma3", "gemma4")
# Norm weights stored as an offset from 1.
ZERO_CENTRED_NORM_FAMILIES = ("gemma3", "qwen3_5")
# Attention layers: one parameter structure, different masks and RoPE tables.
ATTENTION_TYPES = ("full_attention", "sliding_attention")
LAYER_TYPES = ATTENTION_TYPES + ("linear_attention",)
DTYPES = ("float32", "bfloat16", "float16")
ACTIVATIONS = ("silu", "gelu_pytorch_tanh")
# HF `model_type` -> our family.
# Multimodal wrappers -> the model_type of the text model under their text_config.
_MULTIMODAL_TEXT_TYPES = {"qwen3_5": "qwen3_5_text", "gemma3": "gemma3_text",
                          "gemma4": "gemma4_text"}
_HF_MODEL_TYPES = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3",
                   "gemma3_text": "gemma3", "qwen3_5_text": "qwen3_5",
                   "gemma4_text": "gemma4"}
_ROPE_TYPES = ("default", "llama3", "linear", "proportional")
# Gemma 3's default interleaving when a config gives no layer_types: every 6th layer global.
_GEMMA3_SLIDING_PATTERN = 6


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
  # Gemma 3 fields (the defaults are the Llama/Qwen behaviour).
  sliding_window: int | None = None   # "sliding_attention" queries see keys < this many slots back
  rope_local_theta: float = 10000.0   # RoPE base of the sliding layers
  query_pre_attn_scalar: int | None = None  # scores * this**-0.5; None: head_dim
  final_logit_softcapping: float | None = None  # logits -> cap * tanh(logits / cap)
  hidden_act: str = "silu"            # the gated MLP's activation: SwiGLU or GeGLU
  # Qwen3.5 fields.
  partial_rotary_factor: float = 1.0  # RoPE rotates the first int(head_dim * this) dims
  attn_output_gate: bool = False      # q_proj also yields a sigmoid gate on attention's output
  linear_num_key_heads: int = 0       # Gated DeltaNet (linear_attention layers)
  linear_num_value_heads: int = 0
  linear_key_head_dim: int = 0
  linear_value_head_dim: int = 0
  linear_conv_kernel_dim: int = 4
  # Gemma 4 fields (models/gemma4_config.py; the module docstring).
  global_head_dim: int | None = None     # full_attention layers' head size; None: head_dim
  num_global_kv_heads: int | None = None  # their KV heads; None: num_kv_heads
  attention_k_eq_v: bool = False          # full layers: no v_proj, values are the keys' projection
  num_kv_shared_layers: int = 0           # the last this many layers reuse earlier K/V
  double_wide_mlp: bool = False           # ... and have 2 * intermediate_size MLPs
  per_layer_input_size: int = 0           # hidden_size_per_layer_input; 0: none
  per_layer_vocab_size: int = 0           # vocab_size_per_layer_input
  num_experts: int = 0                    # > 0: a MoE block beside each MLP (models/moe.py)
  top_k_experts: int = 0
  moe_intermediate_size: int = 0

  def __post_init__(self):
    if self.rope_scaling is not None:
      object.__setattr__(self, "rope_scaling", freeze(self.rope_scaling))
    object.__setattr__(self, "eos_token_ids", tuple(int(i) for i in self.eos_token_ids))
    if not self.layer_types:
      object.__setattr__(self, "layer_types", ("full_attention",) * self.num_layers)
    object.__setattr__(self, "layer_types", tuple(self.layer_types))
    if self.family == "gemma4":
      # Its blocks differ in parameter shapes (head sizes, KV sharing), so there is no one
      # stacked block to scan: Gemma 4 always runs a list of blocks.
      object.__setattr__(self, "scan_layers", False)
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
    if self.head_dim % 2 or self.rotary_dim % 2 or not 0 < self.rotary_dim <= self.head_dim:
      raise ConfigError(f"model config: head_dim={self.head_dim}, partial_rotary_factor="
                        f"{self.partial_rotary_factor}: the rotary dimension "
                        f"{self.rotary_dim} must be even and in (0, head_dim]")
    if len(self.layer_types) != self.num_layers:
      raise ConfigError(f"model config: layer_types has {len(self.layer_types)} entries, "
                        f"num_layers={self.num_layers}")
    for t in self.layer_types:
      if t not in LAYER_TYPES:
        raise ConfigError(f"model config: layer type {t!r} is not supported; have {LAYER_TYPES}")
    if "linear_attention" in self.layer_types:
      heads = (self.linear_num_key_heads, self.linear_num_value_heads,
               self.linear_key_head_dim, self.linear_value_head_dim,
               self.linear_conv_kernel_dim)
      if min(heads) < 1 or self.linear_num_value_heads % self.linear_num_key_heads:
        raise ConfigError(f"model config: linear_attention layers need positive linear_* "
                          f"sizes and value heads a multiple of key heads, got {heads}")
    if "sliding_attention" in self.layer_types and not (self.sliding_window or 0) > 0:
      raise ConfigError("model config: sliding_attention layers need sliding_window > 0, "
                        f"got {self.sliding_window}")
    if self.hidden_act not in ACTIVATIONS:
      raise ConfigError(f"model config: hidden_act={self.hidden_act!r}; expected one of "
                        f"{ACTIVATIONS}")
    for name in ("query_pre_attn_scalar", "final_logit_softcapping"):
      value = getattr(self, name)
      if value is not None and not value > 0:
        raise ConfigError(f"model config: {name}={value}; expected a positive number or None")
    if self.rope_scaling is not None:
      rtype = self.rope_scaling.get("rope_type", "default")
      if rtype not in _ROPE_TYPES:
        raise ConfigError(f"model config: rope_scaling type {rtype!r} is not supported; "
                          f"have {_ROPE_TYPES}")
    gemma4_only = ("global_head_dim", "num_global_kv_heads", "attention_k_eq_v",
                   "num_kv_shared_layers", "double_wide_mlp", "per_layer_input_size",
                   "num_experts")
    if self.family != "gemma4":
      for name in gemma4_only:
        if getattr(self, name):
          raise ConfigError(f"model config: {name}={getattr(self, name)!r} is a Gemma 4 "
                            f"field; family={self.family!r}")
    else:
      self._validate_gemma4()

  def _validate_gemma4(self) -> None:
    if self.num_heads % self.kv_heads_of("full_attention"):
      raise ConfigError(f"model config: num_heads={self.num_heads} is not a multiple of "
                        f"num_global_kv_heads={self.num_global_kv_heads}")
    if self.head_dim_of("full_attention") % 2:
      raise ConfigError(f"model config: global_head_dim={self.global_head_dim} must be even")
    if not 0 <= self.num_kv_shared_layers < self.num_layers:
      raise ConfigError(f"model config: num_kv_shared_layers={self.num_kv_shared_layers}; "
                        f"expected 0 <= it < num_layers={self.num_layers}")
    first = self.num_layers - self.num_kv_shared_layers
    missing = sorted(set(self.layer_types[first:]) - set(self.layer_types[:first]))
    if missing:
      raise ConfigError(f"model config: KV-shared layers of type {missing} have no earlier "
                        f"layer of that type to share keys/values with")
    if self.num_experts and not (0 < self.top_k_experts <= self.num_experts
                                 and self.moe_intermediate_size > 0):
      raise ConfigError(f"model config: num_experts={self.num_experts}, top_k_experts="
                        f"{self.top_k_experts}, moe_intermediate_size="
                        f"{self.moe_intermediate_size}: need 0 < top_k <= num_experts and a "
                        "positive size")
    if (self.per_layer_input_size < 0 or
        (self.per_layer_input_size and self.per_layer_vocab_size < 1)):
      raise ConfigError(f"model config: per_layer_input_size={self.per_layer_input_size}, "
                        f"per_layer_vocab_size={self.per_layer_vocab_size}")

  @property
  def hf_model_type(self) -> str:
    return {"gemma3": "gemma3_text", "qwen3_5": "qwen3_5_text",
            "gemma4": "gemma4_text"}.get(self.family, self.family)

  def head_dim_of(self, layer_type: str) -> int:
    """The head size of one attention layer type (Gemma 4's full layers have their own)."""
    if layer_type == "full_attention" and self.global_head_dim:
      return self.global_head_dim
    return self.head_dim

  def kv_heads_of(self, layer_type: str) -> int:
    if layer_type == "full_attention" and self.num_global_kv_heads:
      return self.num_global_kv_heads
    return self.num_kv_heads

  def kv_source(self, layer: int) -> int | None:
    """For a KV-shared layer (Gemma 4's last `num_kv_shared_layers`), the layer whose keys
    and values it reads: the last earlier non-shared layer of its type; else None."""
    first = self.num_layers - self.num_kv_shared_layers
    if layer < first:
      return None
    layer_type = self.layer_types[layer]
    return max(i for i in range(first) if self.layer_types[i] == layer_type)

  @property
  def kv_store_layers(self) -> tuple[int, ...]:
    """The layers whose keys/values KV-shared layers read."""
    return tuple(sorted({self.kv_source(i) for i in range(self.num_layers)} - {None}))

  @property
  def gemma_style(self) -> bool:
    """Gemma's sandwich norms and scaled embeddings (see the module docstring)."""
    return self.family in GEMMA_FAMILIES

  @property
  def norm_scale_in_float32(self) -> bool:
    """Norm weights multiply the float32 normalised value before the cast (Gemma, Qwen3.5;
    Llama/Qwen cast first)."""
    return self.zero_centred_norms or self.family == "gemma4"

  @property
  def zero_centred_norms(self) -> bool:
    """Norm weights are offsets from 1 (x * (1 + w), multiplied before the cast)."""
    return self.family in ZERO_CENTRED_NORM_FAMILIES

  @property
  def rotary_dim(self) -> int:
    return int(self.head_dim * self.partial_rotary_factor)

  @property
  def attention_layers(self) -> tuple[int, ...]:
    """Indices of the layers with a KV cache of their own (every layer but linear_attention
    and KV-shared ones)."""
    return tuple(i for i, t in enumerate(self.layer_types)
                 if t != "linear_attention" and self.kv_source(i) is None)

  @property
  def scan_group(self) -> tuple[str, ...]:
    """The layer types one step of the layer scan runs: () when every layer is an attention
    layer (one stacked block; mixed window types pick masks per layer), else the shortest
    pattern whose repeats make `layer_types` (Qwen3.5: 3 linear + 1 full; at worst the whole
    stack, one step)."""
    if set(self.layer_types) <= set(ATTENTION_TYPES):
      return ()
    n = len(self.layer_types)
    return next(self.layer_types[:p] for p in range(1, n + 1)
                if n % p == 0 and self.layer_types == self.layer_types[:p] * (n // p))

  @property
  def ring_layers(self) -> tuple[int, ...]:
    """Indices of the sliding_attention layers with a cache of their own (window-sized
    ring caches when asked for)."""
    return tuple(i for i, t in enumerate(self.layer_types)
                 if t == "sliding_attention" and self.kv_source(i) is None)

  @property
  def linear_layers(self) -> tuple[int, ...]:
    return tuple(i for i, t in enumerate(self.layer_types) if t == "linear_attention")

  @property
  def attention_scale(self) -> float:
    if self.family == "gemma4":
      return 1.0   # its q/k norms set the scale (HF: scaling = 1.0)
    return (self.query_pre_attn_scalar or self.head_dim) ** -0.5

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
    c, where = _read_hf_config(config)
    c, model_type = _hf_text_model(c, where)
    family = _HF_MODEL_TYPES[model_type]
    gemma = family in GEMMA_FAMILIES
    act = _check_hf_support(c, where, model_type, family)
    heads = int(c["num_attention_heads"])
    layers = int(c["num_hidden_layers"])
    rope_theta, rope_scaling = _rope_fields(c, "full_attention" if gemma else None)
    fields: dict[str, Any] = {}
    if family == "gemma4":
      fields = gemma4_config.from_hf(c, where)
      rope_theta, rope_scaling = fields.pop("rope_theta"), fields.pop("rope_scaling")
    elif gemma:
      fields = _gemma3_fields(c, where, layers, act)
    if family == "qwen3_5":
      fields = _qwen3_5_fields(c, layers)
    eos = c.get("eos_token_id")
    eos_ids = () if eos is None else (tuple(eos) if isinstance(eos, (list, tuple)) else (eos,))
    fields.update(
        vocab_size=int(c["vocab_size"]),
        hidden_size=int(c["hidden_size"]),
        intermediate_size=int(c["intermediate_size"]),
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=int(c.get("num_key_value_heads") or heads),
        head_dim=int(c.get("head_dim") or c["hidden_size"] // heads),
        rope_theta=rope_theta,
        rope_scaling=rope_scaling,
        rms_norm_eps=float(c.get("rms_norm_eps", 1e-6)),
        tie_word_embeddings=bool(c.get("tie_word_embeddings", gemma)),
        attention_bias=family == "qwen2",
        qk_norm=family in ("qwen3", "qwen3_5") + GEMMA_FAMILIES,
        max_position_embeddings=int(c.get("max_position_embeddings", 2048)),
        bos_token_id=c.get("bos_token_id"),
        eos_token_ids=eos_ids,
        family=family,
    )
    fields.update(overrides)
    return cls(**fields)

  def to_hf(self) -> dict[str, Any]:
    """The HF `config.json` fields for this architecture (numerics are not included)."""
    rope_parameters: dict[str, Any] = {"rope_type": "default", "rope_theta": self.rope_theta}
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
        hidden_act=self.hidden_act,
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
    if self.family == "qwen3_5":
      out.update(
          rope_parameters={**rope_parameters, "partial_rotary_factor": self.partial_rotary_factor},
          layer_types=list(self.layer_types),
          **{k: getattr(self, k) for k in ("linear_num_key_heads", "linear_num_value_heads",
                                           "linear_key_head_dim", "linear_value_head_dim",
                                           "linear_conv_kernel_dim")})
    if self.family == "gemma4":
      del out["hidden_act"]
      out.update(gemma4_config.to_hf(self))
    elif self.gemma_style:
      del out["hidden_act"]
      out.update(
          hidden_activation=self.hidden_act,
          rope_parameters={"full_attention": rope_parameters,
                           "sliding_attention": {"rope_type": "default",
                                                 "rope_theta": self.rope_local_theta}},
          layer_types=list(self.layer_types), sliding_window=self.sliding_window,
          query_pre_attn_scalar=self.query_pre_attn_scalar or self.head_dim,
          final_logit_softcapping=self.final_logit_softcapping)
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
        qk_norm=family in ("qwen3", "qwen3_5") + GEMMA_FAMILIES, max_position_embeddings=512,
        bos_token_id=None, eos_token_ids=(258, 256), family=family)
    if family in GEMMA_FAMILIES:
      # A window of 4 slots so short test sequences reach past it; both RoPE bases and the
      # query scale differ from their defaults so a mix-up shows in the logits.
      fields.update(num_layers=3, layer_types=("sliding_attention", "sliding_attention",
                                               "full_attention"),
                    sliding_window=4, rope_theta=1e6, rope_local_theta=1e4,
                    query_pre_attn_scalar=24, hidden_act="gelu_pytorch_tanh")
    if family == "gemma4":
      # Sliding, full, sliding, then two KV-shared layers (one of each type): every Gemma 4
      # feature at once, full layers with their own head size, one KV head and K = V.
      fields.update(num_layers=5, layer_types=("sliding_attention", "full_attention",
                                               "sliding_attention", "sliding_attention",
                                               "full_attention"),
                    query_pre_attn_scalar=None, global_head_dim=32, num_global_kv_heads=1,
                    attention_k_eq_v=True, num_kv_shared_layers=2, double_wide_mlp=True,
                    per_layer_input_size=8, per_layer_vocab_size=264,
                    rope_scaling={"rope_type": "proportional", "partial_rotary_factor": 0.25})
    if family == "qwen3_5":
      # Linear, linear, full: both mixers and a cache that holds both kinds of state.
      fields.update(num_layers=3, layer_types=("linear_attention", "linear_attention",
                                               "full_attention"),
                    partial_rotary_factor=0.25, attn_output_gate=True,
                    linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
                    linear_value_head_dim=12, linear_conv_kernel_dim=4)
    fields.update(overrides)
    return cls(**fields)


def _rope_fields(c: Mapping[str, Any], layer_type: str | None) -> tuple[float, dict | None]:
  """(rope_theta, rope_scaling or None) from a HF config dict, for one layer type of a
  Gemma-style `rope_parameters` keyed by layer type, or the whole model (layer_type None).

  transformers >= 5 writes `rope_parameters` (rope_theta inside); older files have top-level
  `rope_theta` / `rope_scaling` (Gemma 3: `rope_local_base_freq` for the sliding layers).
  """
  params = c.get("rope_parameters")
  if layer_type is not None and isinstance(params, Mapping) and layer_type in params:
    params = params[layer_type]
  elif layer_type is not None and isinstance(params, Mapping) and any(
      t in params for t in ATTENTION_TYPES):
    params = {}
  if layer_type == "sliding_attention" and not params:
    rope = {"rope_theta": c.get("rope_local_base_freq", 10000.0)}
  else:
    rope = dict(params or c.get("rope_scaling") or {})
  default_theta = 1e6 if layer_type is not None else 10000.0
  rope_theta = float(rope.pop("rope_theta", c.get("rope_theta", default_theta)))
  rope_type = rope.get("rope_type", rope.get("type", "default"))
  if rope_type in (None, "default"):
    return rope_theta, None
  rope.pop("type", None)
  rope["rope_type"] = rope_type
  return rope_theta, rope


def _read_hf_config(config: Mapping[str, Any] | str | os.PathLike) -> tuple[dict, str]:
  """(the config.json fields, where they came from for messages): a dict as given, or
  the file (or its directory's config.json) read."""
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
  return dict(config), where


def _hf_text_model(c: dict, where: str) -> tuple[dict, str]:
  """(the text model's fields, its model_type): a multimodal wrapper's text_config, else
  the fields as they are; refuses a model_type this package does not implement."""
  model_type = c.get("model_type")
  if model_type in _MULTIMODAL_TEXT_TYPES and isinstance(c.get("text_config"), Mapping):
    # The released Qwen3.5, Gemma 3 (4B and up) and Gemma 4 checkpoints are multimodal
    # wrappers: read the text model (hf_io reads its weights and leaves the vision and
    # audio towers). Tying is the wrapper's field, as transformers reads it.
    text = c["text_config"]
    c = {**text, "tie_word_embeddings": c.get("tie_word_embeddings",
                                               text.get("tie_word_embeddings", False))}
    model_type = c.setdefault("model_type", _MULTIMODAL_TEXT_TYPES[model_type])
  if model_type in _MULTIMODAL_TEXT_TYPES:
    raise ConfigError(f"{where}: model_type={model_type!r} is a multimodal wrapper without "
                      "a text_config; expected its text model's fields under text_config")
  if model_type not in _HF_MODEL_TYPES:
    raise ConfigError(f"{where}: model_type={model_type!r} is not supported; "
                      f"have {sorted(_HF_MODEL_TYPES)}")
  return c, model_type


def _check_hf_support(c: dict, where: str, model_type: str, family: str) -> str:
  """Refuses the HF flags this implementation would silently ignore; returns the MLP's
  activation name."""
  gemma = family in GEMMA_FAMILIES
  for flag in ("mlp_bias", "use_bidirectional_attention") + (() if gemma else
                                                             ("use_sliding_window",)):
    value = c.get(flag)
    # Gemma 4's "vision" makes only image tokens bidirectional: text stays causal.
    text_causal = (model_type == "gemma4_text" and flag == "use_bidirectional_attention"
                   and value == "vision")
    if value and not text_causal:
      raise ConfigError(f"{where}: {flag}={value!r} is not supported")
  act_field = "hidden_activation" if gemma else "hidden_act"
  act = c.get(act_field) or ("gelu_pytorch_tanh" if gemma else "silu")
  if act != ("gelu_pytorch_tanh" if gemma else "silu"):
    raise ConfigError(f"{where}: {act_field}={act!r} is not supported for {model_type}")
  # Qwen2 always has q/k/v bias; Llama/Qwen3/Gemma `attention_bias` would also bias o_proj.
  if family != "qwen2" and c.get("attention_bias"):
    raise ConfigError(f"{where}: attention_bias=true is not supported for {model_type}")
  return act


def _gemma3_fields(c: dict, where: str, layers: int, act: str) -> dict[str, Any]:
  """Gemma 2/3's own fields: the sliding/full layer pattern, local RoPE, query scale."""
  layer_types = c.get("layer_types") or [
      "full_attention" if (i + 1) % int(c.get("sliding_window_pattern") or
                                        _GEMMA3_SLIDING_PATTERN) == 0
      else "sliding_attention" for i in range(layers)]
  local_theta, local_scaling = _rope_fields(c, "sliding_attention")
  if local_scaling is not None:
    raise ConfigError(f"{where}: RoPE scaling on sliding_attention layers is not supported")
  return dict(
      layer_types=tuple(layer_types), sliding_window=c.get("sliding_window"),
      rope_local_theta=local_theta,
      query_pre_attn_scalar=int(c.get("query_pre_attn_scalar") or 256),
      # attn_logit_softcapping is not read: transformers' Gemma 3 never applies it (the
      # released configs set it null), and parity is with transformers.
      final_logit_softcapping=c.get("final_logit_softcapping"),
      hidden_act=act)


def _qwen3_5_fields(c: dict, layers: int) -> dict[str, Any]:
  """Qwen3.5's own fields: the linear/full layer pattern, partial RoPE, linear attention."""
  layer_types = tuple(c.get("layer_types") or [
      "full_attention" if (i + 1) % int(c.get("full_attention_interval") or 4) == 0
      else "linear_attention" for i in range(layers)])
  rope = c.get("rope_parameters") or {}
  return dict(
      layer_types=layer_types,
      partial_rotary_factor=float(rope.get("partial_rotary_factor",
                                           c.get("partial_rotary_factor", 0.25))),
      attn_output_gate=True,
      **{k: int(c[k]) for k in ("linear_num_key_heads", "linear_num_value_heads",
                                "linear_key_head_dim", "linear_value_head_dim",
                                "linear_conv_kernel_dim")})
