"""Gemma 4 text (`gemma4_text`) HF config.json fields <-> `ModelConfig` fields.

What transformers' Gemma4TextConfig fills in when a field is absent is filled in the same way
here: every 6th layer full attention and the last one always, sliding layers' RoPE base 1e4,
full layers' "proportional" RoPE (base 1e6, a quarter of each head rotated), full layers'
head size 512 (`global_head_dim`), per-layer inputs of 256 over a 262144-token vocabulary.
Full layers' head size and KV heads come from `per_layer_config` (what transformers writes:
the same override on every full layer, none on sliding ones) or, in configs written before
it, `global_head_dim` and `num_global_key_value_heads` (the latter only with
`attention_k_eq_v`, as transformers reads it). MoE models (`enable_moe_block`) give
`num_experts`, `top_k_experts` and `moe_intermediate_size`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harnessrl_jax.errors import ConfigError

_SLIDING_PATTERN = 6
_DEFAULT_ROPE = {
    "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
    "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                       "rope_theta": 1000000.0},
}
_DEFAULT_GLOBAL_HEAD_DIM = 512
_DEFAULT_PER_LAYER_INPUT = 256
_DEFAULT_PER_LAYER_VOCAB = 262144


def from_hf(c: Mapping[str, Any], where: str) -> dict[str, Any]:
  """The Gemma-4-specific ModelConfig fields of a `gemma4_text` config dict (rope_theta and
  rope_scaling included: the full layers'); raises ConfigError on what we do not run."""
  moe = {}
  if c.get("enable_moe_block"):
    moe = {k: int(c.get(hf) or 0) for k, hf in (("num_experts", "num_experts"),
                                                 ("top_k_experts", "top_k_experts"),
                                                 ("moe_intermediate_size",
                                                  "moe_intermediate_size"))}
  layers = int(c["num_hidden_layers"])
  layer_types = list(c.get("layer_types") or [
      "full_attention" if (i + 1) % _SLIDING_PATTERN == 0 else "sliding_attention"
      for i in range(layers)])
  layer_types[-1] = "full_attention"   # transformers forces it (with a warning)
  rope = c.get("rope_parameters") or _DEFAULT_ROPE
  full = dict(rope.get("full_attention") or _DEFAULT_ROPE["full_attention"])
  sliding = dict(rope.get("sliding_attention") or _DEFAULT_ROPE["sliding_attention"])
  if sliding.get("rope_type", "default") != "default":
    raise ConfigError(f"{where}: RoPE type {sliding['rope_type']!r} on sliding_attention "
                      "layers is not supported")
  rope_theta = float(full.pop("rope_theta", 1000000.0))
  rope_type = full.get("rope_type", "default")
  rope_scaling = None if rope_type == "default" else full
  head_dim, kv_heads = _global_heads(c, layer_types, where)
  act = c.get("hidden_activation") or "gelu_pytorch_tanh"
  if act != "gelu_pytorch_tanh":
    raise ConfigError(f"{where}: hidden_activation={act!r} is not supported for gemma4_text")
  ple = int(c.get("hidden_size_per_layer_input", _DEFAULT_PER_LAYER_INPUT) or 0)
  return dict(
      layer_types=tuple(layer_types), sliding_window=c.get("sliding_window", 512),
      rope_theta=rope_theta, rope_scaling=rope_scaling,
      rope_local_theta=float(sliding.get("rope_theta", 10000.0)),
      final_logit_softcapping=c.get("final_logit_softcapping"), hidden_act=act,
      global_head_dim=head_dim, num_global_kv_heads=kv_heads,
      attention_k_eq_v=bool(c.get("attention_k_eq_v", False)),
      num_kv_shared_layers=int(c.get("num_kv_shared_layers") or 0),
      double_wide_mlp=bool(c.get("use_double_wide_mlp", False)),
      per_layer_input_size=ple,
      per_layer_vocab_size=int(c.get("vocab_size_per_layer_input",
                                     _DEFAULT_PER_LAYER_VOCAB)) if ple else 0, **moe)


def _global_heads(c: Mapping[str, Any], layer_types: list[str],
                  where: str) -> tuple[int, int | None]:
  """(full layers' head size, their KV heads or None for num_key_value_heads)."""
  overrides = c.get("per_layer_config")
  if overrides is None:
    kv = c.get("num_global_key_value_heads") if c.get("attention_k_eq_v", True) else None
    return int(c.get("global_head_dim") or _DEFAULT_GLOBAL_HEAD_DIM), kv and int(kv)
  by_layer = {int(k): dict(v) for k, v in overrides.items()}
  full = [i for i, t in enumerate(layer_types) if t == "full_attention"]
  distinct = {tuple(sorted(by_layer.get(i, {}).items())) for i in full}
  odd = sorted(set(by_layer) - set(full))
  if len(distinct) != 1 or odd:
    raise ConfigError(f"{where}: per_layer_config must give every full_attention layer the "
                      f"same overrides and no other layer any (got {overrides!r})")
  one = dict(distinct.pop())
  unknown = sorted(set(one) - {"head_dim", "num_key_value_heads"})
  if unknown:
    raise ConfigError(f"{where}: per_layer_config overrides {unknown} are not supported")
  kv = one.get("num_key_value_heads")
  return int(one.get("head_dim") or c.get("head_dim") or 256), kv and int(kv)


def to_hf(cfg) -> dict[str, Any]:
  """The Gemma-4-specific config.json fields of a gemma4 ModelConfig (written as
  transformers writes them, `per_layer_config` included)."""
  full_rope = {"rope_type": "default", "rope_theta": cfg.rope_theta}
  if cfg.rope_scaling is not None:
    full_rope = {**dict(cfg.rope_scaling), "rope_theta": cfg.rope_theta}
  override = {"head_dim": cfg.head_dim_of("full_attention")}
  if cfg.num_global_kv_heads:
    override["num_key_value_heads"] = cfg.num_global_kv_heads
  return dict(
      hidden_activation=cfg.hidden_act,
      rope_parameters={"full_attention": full_rope,
                       "sliding_attention": {"rope_type": "default",
                                             "rope_theta": cfg.rope_local_theta}},
      layer_types=list(cfg.layer_types), sliding_window=cfg.sliding_window,
      final_logit_softcapping=cfg.final_logit_softcapping,
      attention_k_eq_v=cfg.attention_k_eq_v, num_kv_shared_layers=cfg.num_kv_shared_layers,
      use_double_wide_mlp=cfg.double_wide_mlp,
      hidden_size_per_layer_input=cfg.per_layer_input_size,
      vocab_size_per_layer_input=cfg.per_layer_vocab_size or cfg.vocab_size,
      enable_moe_block=bool(cfg.num_experts),
      num_experts=cfg.num_experts or None, top_k_experts=cfg.top_k_experts or None,
      moe_intermediate_size=cfg.moe_intermediate_size or None,
      per_layer_config={str(i): override for i, t in enumerate(cfg.layer_types)
                        if t == "full_attention"})
