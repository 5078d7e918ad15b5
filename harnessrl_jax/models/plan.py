"""Memory and placement plan of an experiment config, from the configs alone (no weights,
no devices):

  python -m harnessrl_jax.models.plan --config=configs/paper.py [--json=PATH]
      [--policy_config=PATH] [--judge_config=PATH]

It prints the table; --json also writes the plan (`Plan.to_json`) to PATH.

The policy's architecture is, in this order: --policy_config (a HF config.json or its
directory), config.model.path's config.json (source "hf"), `ModelConfig.tiny` (source "tiny"),
the packaged GGUF's converted config.json (sources "smollm2", "gemma3-270m": converted once,
then cached), or the config file's POLICY_HF_CONFIG dict. The judge's: --judge_config or the
file's JUDGE_HF_CONFIG, served as its JUDGE_SERVING dict says; without one the judge is not planned.

Policy: bytes per device during the GRPO update (rl/train_step.py) on config.rl.mesh, whose
axes must all be sized. Shards are computed, not measured: each leaf's
`NamedSharding(jax.sharding.AbstractMesh, spec).shard_shape`, the specs being the trainer's own
(`rl.mesh.state_shardings`: logical axes -> `sharding.DEFAULT_RULES`; a dimension its mesh axes
do not divide stays replicated).
  parameters   `hf_io.abstract_model` (nnx.eval_shape), config.model.param_dtype.
  reference    the frozen reference copy train.py keeps when config.rl.beta > 0.
  gradients    train_step's float32 accumulator plus one micro-batch's gradient (param dtype),
               both placed like the parameters.
  optimiser    `jax.eval_shape` of `make_optimizer(config.rl).init` (AdamW's mu and nu and
               the step counters), placed like the parameters.
  activations  an ESTIMATE, for config.rl.micro_batch_size sequences of the largest prompt
               bucket + rollout.max_new_tokens tokens, rows split over data x fsdp (the tensor
               axis is not credited). S(cfg) is the bytes of the residuals `jax.vjp` keeps for
               the backward pass of the trainer's log-prob function (`response_logprobs`),
               traced by `jax.make_jaxpr` (abstract, nothing runs), the arguments themselves
               excluded. Traced at 1 and 2 rows, S = rows * S_row + S_weights: S_row is the
               activations, S_weights the weight copies autodiff keeps (casts, the tied
               embedding's transpose), counted at the parameters' sharded fraction.
               Residuals are split in two: the attention-score family (arrays [..., T, T]
               of 4+ dims: scores, masks, probabilities) and the rest.
                 no remat:  S(cfg, remat off) + C
                 remat:     S(cfg, remat on) + max(A_t, R_t, C) for the layer type t
                            with the largest
               A_t, R_t: S(t, remat off) - S(t, remat on) of a one-layer model of type t, its
               score family and the rest: the block whose intermediates the backward pass
               recomputes at a time. C = 3 * rows * chunk * V * 4 bytes: one chunk of float32
               logits (rl/logprobs.py rematerialises it always: logits, their exp, their
               cotangent). The three are not live together: the logits chunks' backward runs
               before the blocks', and XLA's schedule holds a block's recomputed attention
               scores apart from its MLP's intermediates (seen in the GPU buffer assignment of
               a 60M model: two float32 and one bfloat16 [T, T] buffers at the peak, nothing of
               the MLP). Not counted: all-gathered FSDP weights, the reference forward's
               transients, XLA's own fusion choices. Checked against XLA's compiled peak
               (`python -m harnessrl_jax.aot`, docs/models.md): the paper config on H100 16x8
               -6.4%, on v5p 4x4x8 +4.3%, a Qwen3-0.6B shape on one H200 -3.3% (whose compiled
               peak the device's own counter matched), a 60M model on H100 2x4 -4.0%
               (tests/aot/test_aot.py). XLA:CPU keeps the no-remat memory for `jax.checkpoint`ed
               blocks outside `lax.scan` (scan_layers=False; a tiny 8-layer Qwen3.5 at 8 x 768
               tokens: 1656 -> 1644 MiB unscanned, 2193 -> 770 MiB scanned as groups), so for
               those the remat column is what JAX is asked for, to be checked on the
               accelerator; the table says so. JAX on GPU preallocates 75% of the memory
               unless XLA_PYTHON_CLIENT_MEM_FRACTION says otherwise.

Rollout (`RolloutPlan`): the rollout program's per-device bytes, config.rl.tasks_per_step
prompts at the largest bucket split over data x fsdp, J samples each: the parameters, the
cache at full length (`kv_cache.init_cache` shapes: attention K/V, sliding rings, linear
states), plus the larger of K (or V) before the last decode phase (live while `grow` copies
it into the longer cache; each array is its own buffer, freed once copied) and the prefill
(the prompts' own cache and one attention layer's float32 scores and probabilities); one
step's float32 logits.

Judge: as an external tensor-parallel server holds it, counted from transformers' model of its
config.json built on the meta device (no memory), text decoder only, served by an external
endpoint (vLLM / SGLang behind config.judge), not this repo's engine (whose one-device
programs `python -m harnessrl_jax.aot --programs=engine_prefill,engine_generate` compiles).
Per device on its tensor-parallel group: bfloat16 weights (matrices split N ways; K/V
projections by ceil(heads / N) heads each, as vLLM replicates KV heads when N exceeds them; vectors
replicated) and a bfloat16 KV cache for judge.max_concurrency sequences of
JUDGE_SERVING["context_tokens"], sliding-window layers holding at most their window (vLLM's
hybrid KV cache manager and SGLang's SWA pool allocate so).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import runpy
from collections.abc import Mapping
from typing import Any

import jax
import jax.extend.core as jax_core
import jax.numpy as jnp
from absl import flags
from flax import nnx
from jax.sharding import AbstractMesh
from ml_collections import config_flags

from harnessrl_jax import cli
from harnessrl_jax.errors import ConfigError
from harnessrl_jax.models.architecture import ModelConfig
from harnessrl_jax.models.hf_io import abstract_model
from harnessrl_jax.models.kv_cache import init_cache
from harnessrl_jax.models.config import ModelSettings
from harnessrl_jax.models.sharding import MESH_AXES
from harnessrl_jax.rl import mesh as rl_mesh
from harnessrl_jax.rl.batch import RLBatch
from harnessrl_jax.rl.config import MeshConfig
from harnessrl_jax.rl.train_state import create_train_state, make_optimizer
from harnessrl_jax.rl.train_step import StepConfig, decoder_forward, response_logprobs
from harnessrl_jax.rollout.config import RolloutConfig

# An H100 SXM 80GB as nvidia-smi reports it (81559 MiB).
H100_BYTES = 81559 * 2**20
GIB = 2**30
# [rows, chunk, V] float32 arrays live while one logits chunk is recomputed (module docstring).
_LOGIT_CHUNK_COPIES = 3
_SERVING_BYTES = 2   # the judge's weights and KV cache in bfloat16


@dataclasses.dataclass(frozen=True)
class PolicyPlan:
  """Per-device bytes of the policy's update (module docstring), and what they assume."""

  name: str
  source: str                  # where the architecture came from
  family: str
  num_params: int
  mesh: dict[str, int]
  param_dtype: str
  dtype: str
  remat: bool                  # config.model.remat
  scan_layers: bool
  rows_per_device: int
  micro_batch_size: int
  seq_len: int
  response_len: int
  params: int
  reference: int
  gradients: int
  optimizer: int
  activations: Activations
  rollout: RolloutPlan

  @property
  def activations_remat(self) -> int:
    return self.activations.remat

  @property
  def activations_no_remat(self) -> int:
    return self.activations.no_remat

  def total(self, remat: bool) -> int:
    return (self.params + self.reference + self.gradients + self.optimizer
            + (self.activations_remat if remat else self.activations_no_remat))


@dataclasses.dataclass(frozen=True)
class JudgePlan:
  """Per-device bytes of the judge on its serving group (module docstring)."""

  name: str
  source: str
  model_type: str
  num_params: int
  tensor_parallel: int
  concurrent: int
  context_tokens: int
  weights: int
  kv_cache: int

  @property
  def total(self) -> int:
    return self.weights + self.kv_cache


# ---- the policy


def abstract_mesh(mesh_section: Any) -> AbstractMesh:
  """config.rl.mesh as a device-free mesh; every axis must be sized (no -1)."""
  m = MeshConfig.from_config(mesh_section)
  if -1 in m.sizes.values():
    raise ConfigError(f"config.rl.mesh = {m.sizes}: the plan needs every axis sized (no -1), "
                      "e.g. --config.rl.mesh.fsdp=8")
  return AbstractMesh(tuple(m.sizes[a] for a in MESH_AXES), MESH_AXES)


def device_bytes(tree: Any, shardings: Any) -> int:
  """Bytes one device holds of an abstract pytree placed by a matching tree of shardings."""
  sizes = jax.tree.map(lambda x, s: math.prod(s.shard_shape(x.shape)) * x.dtype.itemsize,
                       tree, shardings)
  return sum(jax.tree.leaves(sizes))


def _residual_bytes(loss, params: Any, batch: RLBatch, seq_len: int) -> tuple[int, int]:
  """Bytes of the residuals jax.vjp keeps for d loss / d params, arguments excluded: (the
  attention-score family, arrays [..., T, T] of 4+ dims: scores, masks, probabilities; the
  rest)."""

  def vjp(p, b):
    return jax.vjp(lambda q: loss(q, b), p)

  closed, shapes = jax.make_jaxpr(vjp, return_shape=True)(params, batch)
  jaxpr = closed.jaxpr
  n = len(jax.tree.leaves(shapes[1]))
  args = set(jaxpr.invars)
  saved = {v for v in jaxpr.outvars[len(jaxpr.outvars) - n:]
           if isinstance(v, jax_core.Var) and v not in args}   # literals hold no buffer
  scores = rest = 0
  for v in saved:
    size = v.aval.size * v.aval.dtype.itemsize
    if len(v.aval.shape) >= 4 and tuple(v.aval.shape[-2:]) == (seq_len, seq_len):
      scores += size
    else:
      rest += size
  return scores, rest


def _abstract_batch(rows: int, seq_len: int, response_len: int) -> RLBatch:
  def s(shape, dtype):
    return jax.ShapeDtypeStruct(shape, dtype)

  return RLBatch(tokens=s((rows, seq_len), jnp.int32), positions=s((rows, seq_len), jnp.int32),
                 attention_mask=s((rows, seq_len), bool),
                 loss_mask=s((rows, response_len), jnp.float32), old_logprobs=None,
                 ref_logprobs=None, advantages=s((rows,), jnp.float32),
                 task_weight=s((rows,), jnp.float32), group_id=s((rows,), jnp.int32))


@functools.cache
def _split_abstract(cfg: ModelConfig) -> tuple[nnx.GraphDef, nnx.State]:
  # Each variant is traced at two batch sizes and the plan's own is the remat one: build once.
  return nnx.split(abstract_model(cfg))


def saved_parts(cfg: ModelConfig, seq_len: int, response_len: int,
                step: StepConfig) -> tuple[tuple[int, int], tuple[int, int]]:
  """((per-row, weight-copy) bytes of the attention-score family, the same of the rest) that
  autodiff saves for the trainer's log-prob function of `cfg` (module docstring: S_row,
  S_weights, each split in two)."""
  graphdef, params = _split_abstract(cfg)
  forward = decoder_forward(graphdef)

  def loss(p, batch):
    return response_logprobs(forward, p, batch, chunk=step.logprob_chunk,
                             temperature=step.temperature)[0].sum()

  one, two = (_residual_bytes(loss, params, _abstract_batch(r, seq_len, response_len), seq_len)
              for r in (1, 2))
  return tuple((b - a, 2 * a - b) for a, b in zip(one, two))


def saved_bytes(cfg: ModelConfig, seq_len: int, response_len: int,
                step: StepConfig) -> tuple[int, int]:
  """(per-row activation bytes, weight-copy bytes) autodiff saves for the trainer's log-prob
  function of `cfg` (module docstring: S_row, S_weights)."""
  (s_row, s_weights), (r_row, r_weights) = saved_parts(cfg, seq_len, response_len, step)
  return s_row + r_row, s_weights + r_weights


def _one_layer(cfg: ModelConfig, layer_type: str) -> ModelConfig:
  # (Gemma 4's KV sharing needs earlier layers: one layer alone owns its keys.)
  return cfg.replace(num_layers=1, layer_types=(layer_type,), scan_layers=False,
                     num_kv_shared_layers=0)


@dataclasses.dataclass(frozen=True)
class Activations:
  """Per-device activation bytes of one micro-batch's update (module docstring)."""

  saved_remat: int      # kept across the forward with remat: each block's input, ...
  saved_no_remat: int   # ... without remat: every block's intermediates
  block_scores: int     # one block recomputed in its backward: attention scores [.., T, T]
  block_rest: int       # the same block's other intermediates
  logits: int           # one logits chunk recomputed (rl/logprobs.py)

  @property
  def remat(self) -> int:
    # The three transients are not live together: the logits chunks' backward runs before
    # the blocks', and XLA schedules a block's recomputed attention apart from its MLP.
    return self.saved_remat + max(self.block_scores, self.block_rest, self.logits)

  @property
  def no_remat(self) -> int:
    return self.saved_no_remat + self.logits


def activation_bytes(cfg: ModelConfig, *, rows: int, seq_len: int, response_len: int,
                     step: StepConfig, weight_fraction: float) -> Activations:
  """Activation bytes per device (module docstring)."""

  def on_device(cfg_) -> tuple[int, int]:
    return tuple(rows * per_row + round(weights * weight_fraction)
                 for per_row, weights in saved_parts(cfg_, seq_len, response_len, step))

  blocks = []
  for t in sorted(set(cfg.layer_types)):
    off = on_device(_one_layer(cfg, t).replace(remat=False))
    on = on_device(_one_layer(cfg, t).replace(remat=True))
    blocks.append((off[0] - on[0], off[1] - on[1]))
  scores, rest = max(blocks, key=max)
  chunk = (_LOGIT_CHUNK_COPIES * rows * min(step.logprob_chunk, response_len) * cfg.vocab_size
           * 4)
  return Activations(saved_remat=sum(on_device(cfg.replace(remat=True))),
                     saved_no_remat=sum(on_device(cfg.replace(remat=False))),
                     block_scores=scores, block_rest=rest, logits=chunk)


def policy_plan(arch: ModelConfig, config: Any, *, name: str = "policy",
                source: str = "") -> PolicyPlan:
  """The policy's per-device plan: `arch` trained as `config` (a whole config tree) says."""
  model = ModelSettings.from_config(config.model, check=False)
  cfg = arch.replace(dtype=model.dtype, param_dtype=model.param_dtype, remat=model.remat)
  mesh = abstract_mesh(config.rl.mesh)
  rollout = RolloutConfig.from_config(config.rollout, check=False)
  step = StepConfig.from_config(config.rl, temperature=rollout.temperature)
  response_len = rollout.max_new_tokens
  seq_len = max(rollout.prompt_buckets) + response_len
  batch_rows = int(config.rl.tasks_per_step) * rollout.num_samples
  micro = step.micro_batch_size or batch_rows
  shards = mesh.shape["data"] * mesh.shape["fsdp"]
  if micro % shards:
    raise ConfigError(f"config.rl.micro_batch_size = {micro} does not split over the mesh's "
                      f"data x fsdp = {shards} devices")
  _, params = _split_abstract(cfg)
  tx = make_optimizer(config.rl)
  with_ref = float(config.rl.beta) > 0
  state = jax.eval_shape(lambda p: create_train_state(p, tx, p if with_ref else None), params)
  placed = rl_mesh.state_shardings(params, tx, mesh, with_ref=with_ref)
  param_bytes = device_bytes(state.params, placed.params)
  total_bytes = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(state.params))
  elements = param_bytes // jnp.dtype(cfg.param_dtype).itemsize
  activations = activation_bytes(cfg, rows=micro // shards, seq_len=seq_len,
                                 response_len=response_len, step=step,
                                 weight_fraction=param_bytes / total_bytes)
  return PolicyPlan(
      name=name, source=source, family=cfg.family,
      num_params=sum(x.size for x in jax.tree.leaves(state.params)),
      mesh=dict(mesh.shape), param_dtype=cfg.param_dtype, dtype=cfg.dtype, remat=cfg.remat,
      scan_layers=cfg.scan_layers, rows_per_device=micro // shards, micro_batch_size=micro,
      seq_len=seq_len, response_len=response_len, params=param_bytes,
      reference=device_bytes(state.ref_params, placed.ref_params) if with_ref else 0,
      gradients=elements * 4 + param_bytes,   # the float32 sum + one micro-batch's gradient
      optimizer=device_bytes(state.opt_state, placed.opt_state),
      activations=activations, rollout=rollout_plan(cfg, config, param_bytes))


# ---- the rollout


@dataclasses.dataclass(frozen=True)
class RolloutPlan:
  """Per-device bytes of the rollout program (rollout/sampler.py): prefill of each prompt,
  its cache repeated J times, decode phases that grow the cache (module docstring)."""

  prompts_per_device: int
  rows_per_device: int          # prompts x J
  prompt_slots: int             # the largest prompt bucket
  cache_slots: int              # prompt slots - 1 + max_new_tokens
  params: int                   # the learner's, where they live
  kv_cache: int                 # K/V of the attention layers, rings, linear states, at full length
  grown_from: int               # K (or V) before the last phase, live while grow copies it
  prefill: int                  # the prompts' cache and one attention layer's scores (float32)
                                # and probabilities, before the cache is repeated
  logits: int                   # one decode step's float32 logits

  @property
  def total(self) -> int:
    return self.params + self.logits + max(self.kv_cache + self.grown_from, self.prefill)


def _cache_bytes(cfg: ModelConfig, rows: int, slots: int, *, grown_only: bool = False) -> int:
  """Bytes of a ring cache of `rows` x `slots`; grown_only: the largest array `kv_cache.grow`
  copies into a longer one (K or V; rings and linear states keep their size), which is live
  beside its copy: each array is its own buffer, freed once copied."""
  cache = jax.eval_shape(lambda: init_cache(cfg, rows, slots, ring=True))
  if grown_only:
    return max(x.size * x.dtype.itemsize for x in (cache.k, cache.v, cache.mask))
  return sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(cache))


def rollout_plan(cfg: ModelConfig, config: Any, param_bytes: int) -> RolloutPlan:
  """The rollout's per-device plan: config.rl.tasks_per_step prompts at the largest bucket,
  rollout.num_samples each, rollout.max_new_tokens, rows split over data x fsdp."""
  mesh = abstract_mesh(config.rl.mesh)
  rollout = RolloutConfig.from_config(config.rollout, check=False)
  shards = mesh.shape["data"] * mesh.shape["fsdp"]
  prompts = -(-int(config.rl.tasks_per_step) // shards)
  rows = prompts * rollout.num_samples
  width = max(rollout.prompt_buckets)
  slots = width - 1 + rollout.max_new_tokens
  last_phase = min(rollout.decode_phase_tokens, rollout.max_new_tokens)
  dtype = jnp.dtype(cfg.dtype).itemsize
  attends = any(t != "linear_attention" for t in cfg.layer_types)
  scores = cfg.num_heads * (width - 1) ** 2 * (4 + dtype) if attends else 0
  return RolloutPlan(
      prompts_per_device=prompts, rows_per_device=rows, prompt_slots=width, cache_slots=slots,
      params=param_bytes, kv_cache=_cache_bytes(cfg, rows, slots),
      grown_from=_cache_bytes(cfg, rows, slots - last_phase, grown_only=True),
      prefill=_cache_bytes(cfg, prompts, width - 1) + prompts * scores,
      logits=rows * cfg.vocab_size * 4)


# ---- the judge


def judge_plan(hf_config: Mapping[str, Any], *, tensor_parallel: int, concurrent: int,
               context_tokens: int, name: str = "judge", source: str = "") -> JudgePlan:
  """The judge's per-device plan on `tensor_parallel` devices (module docstring)."""
  # pylint: disable=g-import-not-at-top
  import torch
  import transformers
  # pylint: enable=g-import-not-at-top
  hf = dict(hf_config.get("text_config") or hf_config)
  hf_cfg = transformers.AutoConfig.for_model(hf.pop("model_type"), **hf)
  with torch.device("meta"):
    model = transformers.AutoModelForCausalLM.from_config(hf_cfg)
  decoder = model.get_decoder()
  heads = {}   # layer index -> (KV heads, head dim)
  for i, layer in enumerate(decoder.layers):
    attn = layer.self_attn
    heads[i] = (attn.k_proj.out_features // attn.head_dim, attn.head_dim)
  per_device = {i: -(-k // tensor_parallel) for i, (k, _) in heads.items()}
  weights = 0
  for pname, p in model.named_parameters():
    parts = pname.split(".")
    split = tensor_parallel
    if p.ndim < 2:
      split = 1
    elif parts[-2] in ("k_proj", "v_proj"):
      i = int(parts[parts.index("layers") + 1])
      split = heads[i][0] // per_device[i]
    weights += p.numel() * _SERVING_BYTES // split
  window = getattr(hf_cfg, "sliding_window", None) or context_tokens
  types = getattr(hf_cfg, "layer_types", None) or ["full_attention"] * len(heads)
  tokens = {i: min(context_tokens, window) if types[i] == "sliding_attention" else context_tokens
            for i in heads}
  # K and V per layer (Gemma 4's attention_k_eq_v layers still cache both: K is normed and
  # rotated, V is not).
  kv_cache = concurrent * sum(tokens[i] * 2 * per_device[i] * heads[i][1] * _SERVING_BYTES
                              for i in heads)
  return JudgePlan(name=name, source=source, model_type=hf_cfg.model_type,
                   num_params=sum(p.numel() for p in model.parameters()),
                   tensor_parallel=tensor_parallel, concurrent=concurrent,
                   context_tokens=context_tokens, weights=weights, kv_cache=kv_cache)


# ---- from a config file


@dataclasses.dataclass(frozen=True)
class Plan:
  """The policy's plan and the judge's (None, with the reason in `judge_note`)."""

  policy: PolicyPlan
  judge: JudgePlan | None
  judge_note: str = ""

  def to_json(self) -> dict[str, Any]:
    out = {"device_bytes": H100_BYTES, "judge_note": self.judge_note,
           "policy": {**dataclasses.asdict(self.policy),
                      "activations_remat": self.policy.activations_remat,
                      "activations_no_remat": self.policy.activations_no_remat,
                      "total_remat": self.policy.total(True),
                      "total_no_remat": self.policy.total(False),
                      "rollout_total": self.policy.rollout.total},
           "judge": None}
    if self.judge is not None:
      out["judge"] = {**dataclasses.asdict(self.judge), "total": self.judge.total}
    return out


def read_hf_config(path: str) -> dict[str, Any]:
  """A HF config.json (the file or its directory) as a dict."""
  path = os.path.join(path, "config.json") if os.path.isdir(path) else path
  try:
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  except (OSError, json.JSONDecodeError) as e:
    raise ConfigError(f"{path}: cannot read a HF config.json ({e})") from e


def policy_architecture(config: Any, constants: Mapping[str, Any],
                        policy_config: str = "") -> tuple[ModelConfig, str]:
  """(architecture, where it came from), in the module docstring's order."""
  m = ModelSettings.from_config(config.model, check=False)
  hf_json = os.path.join(os.path.expanduser(m.path), "config.json")
  if policy_config:
    return ModelConfig.from_hf(read_hf_config(policy_config)), policy_config
  if m.source == "hf" and os.path.isfile(hf_json):
    return ModelConfig.from_hf(hf_json), hf_json
  if m.source == "tiny":
    return ModelConfig.tiny(m.family), f"ModelConfig.tiny({m.family!r})"
  if m.source in ("smollm2", "gemma3-270m"):
    # The packaged GGUF's converted HF directory (made once, then cached): its config.json.
    # pylint: disable-next=g-import-not-at-top
    from harnessrl_jax.models import loading
    gguf = (loading.smollm2_gguf_path() if m.source == "smollm2"
            else loading.gemma3_gguf_path(m.cache_dir))
    hf_json = os.path.join(loading.convert_gguf_cached(gguf, m.cache_dir), "config.json")
    return ModelConfig.from_hf(hf_json), f"{m.source} ({hf_json})"
  if "POLICY_HF_CONFIG" in constants:
    return (ModelConfig.from_hf(constants["POLICY_HF_CONFIG"]),
            "the config file's POLICY_HF_CONFIG")
  raise ConfigError(f"config.model (source {m.source!r}, path {m.path!r}): no architecture "
                    "to plan; pass --policy_config=CONFIG_JSON")


def plan_from_config(config: Any, constants: Mapping[str, Any], *, policy_config: str = "",
                     judge_config: str = "") -> Plan:
  """The plan of a config tree; `constants` are its file's module-level names."""
  arch, source = policy_architecture(config, constants, policy_config)
  name = os.path.basename(os.path.normpath(config.model.path)) if (
      config.model.source == "hf" and config.model.path) else config.model.source
  policy = policy_plan(arch, config, name=name, source=source)
  judge_hf = read_hf_config(judge_config) if judge_config else constants.get("JUDGE_HF_CONFIG")
  if judge_hf is None:
    return Plan(policy, None, "not planned: no judge architecture (JUDGE_HF_CONFIG in the "
                              "config file, or --judge_config)")
  serving = constants.get("JUDGE_SERVING")
  if serving is None:
    raise ConfigError("the judge's serving group is unknown: set JUDGE_SERVING = "
                      "{'tensor_parallel': N, 'context_tokens': T} in the config file")
  j = config.judge
  note = (f"served by an external endpoint (config.judge.llm_backend = {j.llm_backend!r}: "
          "vLLM / SGLang / JetStream), not this repo's engine")
  judge = judge_plan(judge_hf, tensor_parallel=int(serving["tensor_parallel"]),
                     concurrent=int(j.max_concurrency),
                     context_tokens=int(serving["context_tokens"]),
                     name=j.openai.model or "judge",
                     source=judge_config or "the config file's JUDGE_HF_CONFIG")
  return Plan(policy, judge, note)


def _row(label: str, *values: int) -> str:
  return f"  {label:<34}" + " ".join(f"{v / GIB:10.2f}" for v in values)


def _share_row(*values: int) -> str:
  label = f"of an H100 ({H100_BYTES / GIB:.1f} GiB)"
  return f"  {label:<34}" + " ".join(f"{100 * v / H100_BYTES:9.0f}%" for v in values)


def format_plan(plan: Plan) -> str:
  """The plan as the table `python -m harnessrl_jax.models.plan` prints."""
  lines = _policy_lines(plan.policy) + _rollout_lines(plan.policy.rollout) + [""]
  return "\n".join(lines + _judge_lines(plan))


def _policy_lines(p: PolicyPlan) -> list[str]:
  """The policy's header and its per-device training memory, remat and no remat."""
  a = p.activations
  mesh = " x ".join(f"{ax} {s}" for ax, s in p.mesh.items())
  lines = [
      f"Policy  {p.name} ({p.family}, {p.num_params / 1e9:.2f} B parameters; architecture: "
      f"{p.source})",
      f"  mesh {mesh} = {math.prod(p.mesh.values())} devices; parameters {p.param_dtype}, "
      f"activations {p.dtype}",
      f"  micro-batch {p.micro_batch_size} sequences x {p.seq_len} tokens (largest prompt "
      f"bucket + {p.response_len} response) = {p.rows_per_device} per device",
      "",
      f"  {'per device (GiB)':<34}{'remat':>10} {'no remat':>10}",
      _row("parameters", p.params, p.params),
      _row("reference parameters (beta > 0)", p.reference, p.reference),
      _row("gradients (f32 sum + micro-batch)", p.gradients, p.gradients),
      _row("optimiser state (AdamW)", p.optimizer, p.optimizer),
      _row("activations kept (block inputs)", a.saved_remat, a.saved_no_remat),
      _row("+ the largest transient, of", a.remat - a.saved_remat,
           a.no_remat - a.saved_no_remat),
      _row("  one block's attention scores", a.block_scores, 0),
      _row("  one block's other intermediates", a.block_rest, 0),
      _row("  one logits chunk (float32)", a.logits, a.logits),
      _row("total", p.total(True), p.total(False)),
      _share_row(p.total(True), p.total(False)),
      f"  config.model.remat = {p.remat}: the run is the "
      f"{'remat' if p.remat else 'no remat'} column",
  ]
  if not p.scan_layers:
    lines += ["  unscanned layers: XLA:CPU compiles this step to the no-remat memory whether or",
              "  not remat is on; check the remat column on the accelerator"]
  return lines


def _rollout_lines(r: RolloutPlan) -> list[str]:
  """The rollout's per-device memory."""
  return [
      "",
      f"  rollout: {r.prompts_per_device} prompts x {r.rows_per_device // r.prompts_per_device} "
      f"samples per device, {r.prompt_slots}-slot prompts, cache of {r.cache_slots} slots",
      _row("parameters", r.params),
      _row("KV cache (full length)", r.kv_cache),
      _row("+ K before the last phase", r.grown_from),
      _row("or prefill (cache + scores)", r.prefill),
      _row("logits (one step, float32)", r.logits),
      _row("total", r.total),
      _share_row(r.total),
  ]


def _judge_lines(plan: Plan) -> list[str]:
  """The judge's serving memory, or the note saying why it is not planned."""
  j = plan.judge
  if j is None:
    return [f"Judge  {plan.judge_note}"]
  return [
      f"Judge  {j.name} ({j.model_type}, {j.num_params / 1e9:.2f} B parameters, text decoder; "
      f"architecture: {j.source})",
      f"  {plan.judge_note}",
      f"  tensor-parallel over {j.tensor_parallel} devices; KV cache for {j.concurrent} "
      f"sequences x {j.context_tokens} tokens",
      "",
      "  per device (GiB)",
      _row("weights (bfloat16)", j.weights),
      _row("KV cache (bfloat16)", j.kv_cache),
      _row("total", j.total),
      _share_row(j.total),
  ]


# ---- the command


def define_flags():
  """Flags exist only when this module runs as the program (train.py defines --config too)."""
  return (config_flags.DEFINE_config_file(
              "config", None, "The experiment's config file, e.g. configs/paper.py."),
          flags.DEFINE_string("policy_config", "", "A HF config.json (or its directory) "
                              "for the policy's architecture."),
          flags.DEFINE_string("judge_config", "", "A HF config.json (or its directory) for "
                              "the judge's architecture."),
          flags.DEFINE_string("json", "", "Also write the plan as JSON to this path."))


def main(argv, defined) -> None:
  """Prints the plan of --config; cli.run makes a ConfigError one line."""
  del argv
  config, policy_config, judge_config, json_path = defined
  path = config_flags.get_config_filename(flags.FLAGS["config"]).split(":", 1)[0]
  plan = plan_from_config(config.value, runpy.run_path(path),
                          policy_config=policy_config.value, judge_config=judge_config.value)
  print(format_plan(plan))
  if json_path.value:
    with open(json_path.value, "w", encoding="utf-8") as f:
      json.dump(plan.to_json(), f, indent=1)


if __name__ == "__main__":
  _DEFINED = define_flags()
  flags.mark_flags_as_required(["config"])
  cli.run(lambda argv: main(argv, _DEFINED))
