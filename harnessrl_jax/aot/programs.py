"""The functions a training run jits on its accelerators, built abstractly on a mesh of
compile-only devices: the same builders train.py uses (`rl.train_step.build_step`,
`make_logprob_fn`, the rollout program of `rollout.sampler`), the same shardings
(`rl.mesh.state_shardings`, `models.sharding.batch_sharding`), arguments as
`jax.ShapeDtypeStruct`s that carry those shardings. Nothing is allocated or run.

Shapes are the largest a step can see: every prompt at the largest prompt bucket, every
response at rollout.max_new_tokens (trim_prompt_padding can only make the update narrower).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding

from harnessrl_jax.aot import flops as flops_lib
from harnessrl_jax.models.architecture import ModelConfig
from harnessrl_jax.models.hf_io import abstract_model
from harnessrl_jax.models.config import ModelSettings
from harnessrl_jax.models import sharding as model_sharding
from harnessrl_jax.rl import mesh as rl_mesh
from harnessrl_jax.rl.batch import RLBatch
from harnessrl_jax.rl.config import RLConfig
from harnessrl_jax.rl.train_state import create_train_state, make_optimizer
from harnessrl_jax.rl.train_step import (StepConfig, build_step, decoder_forward,
                                         make_logprob_fn, prompt_group_size)
from harnessrl_jax.rollout import sampler as rollout_sampler
from harnessrl_jax.rollout.config import RolloutConfig
from harnessrl_jax.rollout.sampling import SamplingParams


@dataclasses.dataclass(frozen=True)
class Program:
  """One jitted function with abstract arguments, ready to `lower(...).compile()`."""

  name: str
  fn: Callable                 # the jitted function
  args: tuple
  kwargs: dict[str, Any]
  flops: float                 # per call, from the model (flops.py)
  in_run: bool                 # False: compiled for the record, not part of the verdict
  note: str = ""
  devices: int = 1             # devices it runs on (the learner's mesh, or one)

  def lower(self):
    return self.fn.lower(*self.args, **self.kwargs)


@dataclasses.dataclass(frozen=True)
class Policy:
  """The policy as the run places it on `mesh` (None: one device, as train.py runs it)."""

  cfg: ModelConfig
  graphdef: nnx.GraphDef
  params: Any                  # abstract, with shardings
  state: Any                   # abstract TrainState, with shardings
  state_shardings: Any         # TrainState of NamedShardings, or None
  mesh: Mesh | None
  device: Any                  # the first device (placement without a mesh)
  shape: flops_lib.ModelShape

  @property
  def devices(self) -> int:
    return 1 if self.mesh is None else self.mesh.size


def _abstract(tree: Any, shardings: Any) -> Any:
  return jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
                      tree, shardings)


def _placement(policy: Policy, ndim: int):
  """The sharding of a [batch, ...] input: rows over data x fsdp, or the one device."""
  if policy.mesh is None:
    return SingleDeviceSharding(policy.device)
  return model_sharding.batch_sharding(policy.mesh, ndim)


def _replicated(policy: Policy):
  if policy.mesh is None:
    return SingleDeviceSharding(policy.device)
  return NamedSharding(policy.mesh, PartitionSpec())


def build_policy(config: Any, arch: ModelConfig, devices: Sequence[Any]) -> Policy:
  """The policy of `config` on `devices`: architecture `arch` with config.model's dtypes and
  remat, the learner's mesh (train.py: `rl.mesh.mesh_for_devices`) and TrainState."""
  m = ModelSettings.from_config(config.model, check=False)
  cfg = arch.replace(dtype=m.dtype, param_dtype=m.param_dtype, remat=m.remat)
  graphdef, params = nnx.split(abstract_model(cfg))
  mesh = rl_mesh.mesh_for_devices(config.rl.mesh, devices)
  tx = make_optimizer(config.rl)
  with_ref = float(config.rl.beta) > 0
  state = jax.eval_shape(lambda p: create_train_state(p, tx, p if with_ref else None), params)
  if mesh is None:
    one = SingleDeviceSharding(devices[0])
    shardings = None
    state = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=one), state)
  else:
    shardings = rl_mesh.state_shardings(params, tx, mesh, with_ref=with_ref)
    state = _abstract(state, shardings)
  return Policy(cfg, graphdef, state.params, state, shardings, mesh, devices[0],
                flops_lib.ModelShape.of(cfg, params))


def update_shape(config: Any) -> tuple[int, int, int]:
  """(rows, prompt slots, response slots) of one update's batch."""
  rollout = RolloutConfig.from_config(config.rollout, check=False)
  rows = int(config.rl.tasks_per_step) * rollout.num_samples
  return rows, max(rollout.prompt_buckets), rollout.max_new_tokens


def _batch(policy: Policy, rows: int, prompt: int, response: int) -> RLBatch:
  width = prompt + response

  def arg(shape, dtype):
    return jax.ShapeDtypeStruct(shape, dtype, sharding=_placement(policy, len(shape)))

  return RLBatch(tokens=arg((rows, width), jnp.int32), positions=arg((rows, width), jnp.int32),
                 attention_mask=arg((rows, width), bool),
                 loss_mask=arg((rows, response), jnp.float32),
                 old_logprobs=arg((rows, response), jnp.float32), ref_logprobs=None,
                 advantages=arg((rows,), jnp.float32), task_weight=arg((rows,), jnp.float32),
                 group_id=arg((rows,), jnp.int32))


def _packed(rows: int, prompt: int, response: int, group: int) -> tuple[int, int]:
  """(rows, width) the update's forward computes: J responses on one prompt per packed row
  when the run shares prompts (rl/train_step.py)."""
  return rows // group, prompt + group * response


def train_programs(config: Any, policy: Policy) -> list[Program]:
  """The GRPO train step and the log-prob forward (old / reference log-probs)."""
  rows, prompt, response = update_shape(config)
  j = RolloutConfig.from_config(config.rollout, check=False).num_samples
  model = nnx.merge(policy.graphdef, jax.tree.map(
      lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), policy.params))
  group = prompt_group_size(config.rl, j, model, policy.mesh)
  forward = decoder_forward(policy.graphdef)
  _, step = build_step(forward, config.rl, temperature=config.rollout.temperature,
                       mesh=policy.mesh,
                       state_sharding=policy.state_shardings, group_size=group)
  batch = _batch(policy, rows, prompt, response)
  packed_rows, width = _packed(rows, prompt, response, group)
  with_ref = float(config.rl.beta) > 0
  step_flops = flops_lib.train_step(policy.shape, rows=packed_rows, width=width,
                                    response=rows * response // packed_rows,
                                    with_reference=with_ref)
  logprob_fn = make_logprob_fn(forward, StepConfig.from_config(
                                   config.rl, group, temperature=config.rollout.temperature),
                               mesh=policy.mesh)
  epochs = RLConfig.from_config(config.rl, check=False).num_epochs
  shared = f"; {group} responses per packed prompt row" if group > 1 else ""
  return [
      Program("train_step", step, (policy.state, batch), {}, step_flops, True,
              f"{rows} rows x {prompt + response} slots, micro-batch "
              f"{int(config.rl.micro_batch_size) or rows}"
              f"{', reference forward inside' if with_ref else ''}{shared}", policy.devices),
      Program("logprobs", logprob_fn, (policy.params, batch), {},
              flops_lib.logprobs(policy.shape, rows=packed_rows, width=width,
                                 response=rows * response // packed_rows),
              epochs > 1,
              "old log-probs; the run calls it only when rl.num_epochs > 1", policy.devices),
  ]


def rollout_program(config: Any, policy: Policy, *, eos_token_ids: Sequence[int] = ()
                    ) -> Program:
  """The rollout program (prefill once per prompt, J samples in one decode loop), on the
  learner's params where they live, prompts split over the batch axes."""
  r = RolloutConfig.from_config(config.rollout, check=False)
  sampling = SamplingParams.from_config(config.rollout)
  prompts = int(config.rl.tasks_per_step)
  divisor = (1 if policy.mesh is None else
             math.prod(policy.mesh.shape[a] for a in rollout_sampler.BATCH_AXES
                       if a in policy.mesh.shape))
  prompts = -(-prompts // divisor) * divisor
  width = max(r.prompt_buckets)
  key = jax.eval_shape(lambda: jax.random.key(0))
  args = (policy.graphdef, policy.params,
          jax.ShapeDtypeStruct((prompts, width), jnp.int32, sharding=_placement(policy, 2)),
          jax.ShapeDtypeStruct((prompts, width), bool, sharding=_placement(policy, 2)),
          jax.ShapeDtypeStruct(key.shape, key.dtype, sharding=_replicated(policy)),
          None, None)
  kwargs = dict(sampling=sampling, num_samples=r.num_samples, pad_id=0,
                eos_token_ids=tuple(eos_token_ids) or None, mesh=policy.mesh,
                phase_tokens=r.decode_phase_tokens,
                slice_layers=rollout_sampler.on_cpu(policy.params))
  return Program("rollout", rollout_sampler.rollout_jit, args, kwargs,
                 flops_lib.rollout(policy.shape, prompts=prompts, samples=r.num_samples,
                                   prompt_width=width, new_tokens=r.max_new_tokens),
                 True, f"{prompts} prompts x {r.num_samples} samples, {width}-slot prompts, "
                 f"{r.max_new_tokens} new tokens", policy.devices)


def _on(device, tree: Any) -> Any:
  """`tree`'s shapes and dtypes, placed on one device."""
  one = SingleDeviceSharding(device)
  return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=one), tree)


def engine_programs(config: Any, cfg: ModelConfig, device, *, in_run: bool,
                    source: str) -> list[Program]:
  """Our JetStream engine's prefill and generate (serving/engine.py) for the judge model
  `cfg`, on ONE device, as `python -m harnessrl_jax.serve` runs it (it has no tensor
  parallelism): judge.max_concurrency slots, prompts up to judge.jetstream.max_prompt_tokens
  (rounded up to JetStream's bucket), answers of judge.max_new_tokens; generate reading the
  whole cache (the largest window)."""
  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.models.kv_cache import init_cache
  from harnessrl_jax.serving import engine as serving, slot_grammar
  # pylint: enable=g-import-not-at-top
  j = config.judge
  slots, answer = int(j.max_concurrency), int(j.max_new_tokens)
  prefill = next((b for b in serving.PREFILL_BUCKETS if b >= int(j.jetstream.max_prompt_tokens)),
                 serving.PREFILL_BUCKETS[-1])
  cache_len = prefill + max(answer, 2)
  ring = bool(cfg.ring_layers)
  graphdef, params = nnx.split(abstract_model(cfg))
  params = _on(device, params)
  row = jax.ShapeDtypeStruct((1, prefill), jnp.int32, sharding=SingleDeviceSharding(device))
  mask = jax.ShapeDtypeStruct((1, prefill), bool, sharding=SingleDeviceSharding(device))
  state = jax.eval_shape(lambda: (
      init_cache(cfg, slots, cache_len, ring=ring).replace(
          index=jnp.asarray(prefill, jnp.int32)),
      jnp.zeros((slots,), jnp.int32), jnp.zeros((slots,), jnp.int32),
      jnp.zeros((slots,), jnp.int32), jnp.zeros((slots,), bool)))
  grammar = jax.eval_shape(lambda: slot_grammar.empty(slots, cfg.vocab_size))
  stop = jax.ShapeDtypeStruct((max(1, len(cfg.eos_token_ids)),), jnp.int32)
  shape = flops_lib.ModelShape.of(cfg, params)
  backend = j.llm_backend if j.backend == "hybrid" else j.backend
  where = (f"judge model ({source}) on one {device.device_kind}, "
           + ("in the run" if in_run else f"not this run: its judge is {backend}"))
  return [
      Program("engine_prefill", serving._prefill,  # pylint: disable=protected-access
              (graphdef, params, row, mask, ring), {},
              flops_lib.prefill(shape, rows=1, width=prefill), in_run,
              f"one {prefill}-token prompt; {where}"),
      Program("engine_generate", serving._generate,  # pylint: disable=protected-access
              (graphdef, params, _on(device, state), _on(device, grammar), _on(device, stop),
               0, None), {},
              flops_lib.decode_step(shape, rows=slots, keys=cache_len), in_run,
              f"one token for {slots} slots over a {cache_len}-slot cache; {where}"),
  ]
