"""The jitted GRPO update: `train_step(state, batch) -> (state, metrics)`.

One call is one optimiser update on one `RLBatch`: the batch is cut into micro-batches whose
gradients are summed by a `lax.scan` (token weights are computed over the whole batch first,
so the sum equals the full-batch gradient), the global gradient norm is clipped, AdamW
applies. A non-finite loss or gradient keeps params and optimiser state unchanged and counts
the step in `skipped_steps`. Per-layer rematerialisation is the model's (ModelConfig.remat);
the logits chunks are always rematerialised (rl/logprobs.py).

The policy enters as `forward(params, tokens, positions, attention_mask, allowed=None) ->
(hidden [B,L,D], unembed [D,V])`; `decoder_forward(graphdef)` makes one for a
`models.decoder.Decoder`.

Shared prompts (config.rl.share_prompts): the J rows of a GRPO group carry one prompt. With
`group_size` J the forward packs each group into one row, [prompt, response_1, ..,
response_J], where response j attends to the prompt and to itself only (positions as in
its own row), so the prompt is computed once per group instead of J times, in the policy's
forward and backward and in the reference's forward. Log-probs, loss and gradients are
those of the row layout up to float rounding (tested); only the order of sums differs.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from harnessrl_jax.errors import ConfigError, refuse
from harnessrl_jax.models import sharding as model_sharding
from harnessrl_jax.rl import advantages as adv_lib
from harnessrl_jax.rl import losses
from harnessrl_jax.rl.batch import RLBatch
from harnessrl_jax.rl.logprobs import token_logprobs
from harnessrl_jax.rl.train_state import TrainState, lr_schedule, make_optimizer

ForwardFn = Callable[[Any, jax.Array, jax.Array, jax.Array], tuple[jax.Array, jax.Array]]


def decoder_forward(graphdef: nnx.GraphDef) -> ForwardFn:
  """The ForwardFn of a Decoder split as `graphdef, params = nnx.split(model)`.

  The loss takes log-probs of hidden @ unembed, so a model whose logits are soft-capped
  (Gemma 2 style final_logit_softcapping) is refused rather than trained on other logits.
  """

  def forward(params, tokens, positions, attention_mask, allowed=None):
    model = nnx.merge(graphdef, params)
    if model.cfg.final_logit_softcapping is not None:
      raise ConfigError("the GRPO loss does not support final_logit_softcapping (a Gemma 2 "
                        "style policy); its log-probs would not be the sampler's")
    return (model.hidden_states(tokens, positions, attention_mask, allowed),
            model.unembed_matrix())

  return forward


@dataclasses.dataclass(frozen=True)
class StepConfig:
  """What `make_train_step` needs from config.rl (see rl/config.py)."""

  loss: losses.LossConfig = losses.LossConfig()
  micro_batch_size: int = 0
  logprob_chunk: int = 64
  temperature: float = 1.0
  group_size: int = 1   # rows per shared prompt packed into one forward row; 1: no packing

  @classmethod
  def from_config(cls, rl: ml_collections.ConfigDict, group_size: int = 1, *,
                  temperature: float) -> "StepConfig":
    """The view of config.rl's step and loss fields; one ConfigError lists every problem.
    `group_size`: see `prompt_group_size` (ignored unless config.rl.share_prompts).
    `temperature`: config.rollout.temperature (log-probs under the law that sampled)."""
    problems = []
    if float(temperature) <= 0:
      problems.append(f"config.rollout.temperature = {temperature}: the learner's log-probs "
                      "need > 0")
    if int(rl.logprob_chunk) < 1:
      problems.append(f"config.rl.logprob_chunk = {rl.logprob_chunk}: must be >= 1")
    if int(rl.micro_batch_size) < 0:
      problems.append(f"config.rl.micro_batch_size = {rl.micro_batch_size}: must be >= 0 "
                      "(0: the whole batch)")
    try:
      loss = losses.LossConfig.from_config(rl)
    except ConfigError as e:
      problems = str(e).splitlines() + problems
    refuse(problems)
    return cls(loss=loss, micro_batch_size=int(rl.micro_batch_size),
               logprob_chunk=int(rl.logprob_chunk), temperature=float(temperature),
               group_size=int(group_size) if rl.share_prompts else 1)


def prompt_group_size(rl: ml_collections.ConfigDict, num_samples: int, model,
                      mesh: Mesh | None = None) -> int:
  """The `group_size` a run's update packs: J when config.rl.share_prompts is on, the model
  can take a packed mask (`Decoder.attends_fully`: no sliding windows, no linear attention)
  and every device's share of a micro-batch is whole groups; otherwise 1 (rows as sampled).
  """
  j = int(num_samples)
  if not rl.share_prompts or j < 2 or not model.attends_fully():
    return 1
  b = int(rl.tasks_per_step) * j
  mb = int(rl.micro_batch_size) or b
  shards = 1 if mesh is None else mesh.shape.get("data", 1) * mesh.shape.get("fsdp", 1)
  return j if mb % (j * shards) == 0 else 1


def response_logprobs(forward: ForwardFn, params: Any, batch: RLBatch, *, chunk: int,
                      temperature: float, group_size: int = 1) -> tuple[jax.Array, jax.Array]:
  """(log-prob, entropy), each [B, N], of the batch's response tokens under `params`.

  group_size > 1: rows g*J .. g*J + J - 1 share one prompt and are computed as one packed
  row (`shared_prompt_rows`); the caller guarantees the prompts are equal.
  """
  p, n = batch.prompt_len, batch.loss_mask.shape[1]
  if p < 1:
    raise ConfigError("rl batch: the prompt part is empty; a response token needs a "
                      "preceding position to be predicted from")
  if group_size == 1:
    hidden, unembed = forward(params, batch.tokens, batch.positions, batch.attention_mask)
    hidden = hidden[:, p - 1:p - 1 + n]
  else:
    tokens, positions, mask, allowed, predictors = shared_prompt_rows(batch, group_size)
    hidden, unembed = forward(params, tokens, positions, mask, allowed)
    hidden = hidden[:, predictors].reshape(batch.num_rows, n, -1)
  return token_logprobs(hidden, unembed, batch.tokens[:, p:], chunk=chunk,
                        temperature=temperature)


def shared_prompt_rows(batch: RLBatch, group_size: int):
  """The batch with each group of `group_size` rows packed into one row.

  Returns tokens, positions, key mask [G, P + J*N], allowed [G, T, T] (the prompt causal;
  response j sees the prompt and its own earlier tokens) and predictors [J, N]: the packed
  slot whose hidden state predicts response token i of sample j (the prompt's last slot for
  i = 0). Positions are the rows' own, so RoPE sees what the row layout sees.
  """
  b, p, n, j = batch.num_rows, batch.prompt_len, batch.loss_mask.shape[1], group_size
  g = b // j

  def pack(x):
    return jnp.concatenate([x[::j, :p], x[:, p:].reshape(g, j * n)], axis=1)

  mask = pack(batch.attention_mask)
  segment = np.concatenate([np.zeros(p, np.int32), np.repeat(np.arange(1, j + 1), n)])
  slot = np.arange(p + j * n)
  visible = (slot[None, :] <= slot[:, None]) & (
      (segment[None, :] == 0) | (segment[None, :] == segment[:, None]))
  predictors = np.concatenate([np.full((j, 1), p - 1),
                               p + n * np.arange(j)[:, None] + np.arange(n - 1)[None, :]], 1)
  return (pack(batch.tokens), pack(batch.positions), mask,
          jnp.asarray(visible)[None] & mask[:, None, :], predictors)


def _batch_spec(mesh: Mesh | None, leading: int = 0):
  """Constrains dim `leading` of an array to the batch mesh axes (identity without a mesh)."""
  if mesh is None:
    return lambda x: x
  axes = model_sharding.batch_sharding(mesh, 1).spec[0]

  def constrain(x):
    spec = [None] * x.ndim
    spec[leading] = axes
    return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, PartitionSpec(*spec)))

  return constrain


def _split_micro(batch: Any, mb: int, mesh: Mesh | None, group: int = 1) -> Any:
  """[B, ...] -> [M, mb, ...] with unit u*M + m (rows of `group` consecutive rows) in
  micro-batch m, as its u-th unit; group 1: row u*M + m.

  This interleaving keeps each device's contiguous block of rows inside every micro-batch,
  so splitting needs no communication when rows are sharded over devices; a unit (a GRPO
  group, for shared prompts) stays whole and in order.
  """
  m = jax.tree.leaves(batch)[0].shape[0] // mb
  constrain = _batch_spec(mesh, leading=1)

  def split(x):
    units = x.reshape(mb // group, m, group, *x.shape[1:]).swapaxes(0, 1)
    return constrain(units.reshape(m, mb, *x.shape[1:]))

  return jax.tree.map(split, batch)


def _join_micro(x: jax.Array, group: int = 1) -> jax.Array:
  """Undoes `_split_micro`: [M, mb, ...] -> [B, ...]."""
  m, mb = x.shape[:2]
  units = x.reshape(m, mb // group, group, *x.shape[2:]).swapaxes(0, 1)
  return units.reshape(m * mb, *x.shape[2:])


def _check_shapes(batch: RLBatch, cfg: StepConfig, mesh: Mesh | None) -> int:
  b = batch.num_rows
  mb = cfg.micro_batch_size or b
  if b % mb:
    raise ConfigError(f"config.rl.micro_batch_size = {mb} does not divide the batch of {b} rows")
  if mb % cfg.group_size:
    raise ConfigError(f"config.rl.micro_batch_size = {mb} is not a multiple of the shared-"
                      f"prompt group of {cfg.group_size} rows")
  if mesh is not None:
    shards = mesh.shape.get("data", 1) * mesh.shape.get("fsdp", 1)
    if mb % shards:
      raise ConfigError(f"config.rl.micro_batch_size = {mb} is not a multiple of the "
                        f"data x fsdp mesh size {shards}: every device needs rows")
  return mb


# The per-micro-batch sums `losses.grpo_loss` returns, plus the entropy; summed over the batch.
_SUM_KEYS = ("pg_loss", "kl_loss", "kl", "ratio", "clipped_low", "clipped_high", "tokens",
             "entropy")


def _micro_loss_fn(forward: ForwardFn, cfg: StepConfig):
  """`micro_loss(params, ref_params, mb, weights) -> (loss, sums)` of one micro-batch."""
  loss_cfg, group = cfg.loss, cfg.group_size

  def micro_loss(params, ref_params, mb: RLBatch, weights):
    logp, entropy = response_logprobs(forward, params, mb, chunk=cfg.logprob_chunk,
                                      temperature=cfg.temperature, group_size=group)
    # No old log-probs: one on-policy update, ratio exactly 1 (gradient of the ratio only).
    old = jax.lax.stop_gradient(logp) if mb.old_logprobs is None else mb.old_logprobs
    ref = mb.ref_logprobs
    if ref is None and loss_cfg.beta > 0:
      if ref_params is None:
        raise ConfigError("config.rl.beta > 0 but neither the batch's ref_logprobs nor the "
                          "train state's ref_params are set")
      ref = jax.lax.stop_gradient(response_logprobs(
          forward, ref_params, mb, chunk=cfg.logprob_chunk, temperature=cfg.temperature,
          group_size=group)[0])
    loss, sums = losses.grpo_loss(logp, old, ref, mb.advantages, mb.task_weight, mb.loss_mask,
                                  loss_cfg, weights=weights)
    sums["entropy"] = jnp.sum(entropy * mb.loss_mask)
    return loss, sums

  return micro_loss


def _accumulate_gradients(grad_fn, state: TrainState, batch: RLBatch, cfg: StepConfig,
                          mesh: Mesh | None, state_sharding: Any):
  """(gradient, loss, sums) of the whole batch: token weights over the whole batch, then
  the micro-batches' gradients summed by a `lax.scan`."""
  mb = _check_shapes(batch, cfg, mesh)
  m = batch.num_rows // mb
  weights = losses.aggregation_weights(batch.loss_mask, cfg.loss.loss_aggregation,
                                       cfg.loss.max_response_len)
  micro = _split_micro(batch, mb, mesh, cfg.group_size)
  micro_w = _split_micro(weights, mb, mesh, cfg.group_size)
  # Accumulate in float32 whatever the parameter dtype: bf16 sums of micro-batch
  # gradients would drop the small ones.
  zeros = jax.tree.map(lambda p: jnp.zeros(p.shape, jnp.float32), state.params)
  if state_sharding is not None:
    zeros = jax.lax.with_sharding_constraint(zeros, state_sharding.params)

  def accumulate(carry, xs):
    g_acc, loss_acc, sums_acc = carry
    mbatch, w = xs
    (loss, sums), g = grad_fn(state.params, state.ref_params, mbatch, w)
    sums_acc = jax.tree.map(jnp.add, sums_acc, sums)
    g_acc = jax.tree.map(lambda a, x: a + x.astype(jnp.float32), g_acc, g)
    return (g_acc, loss_acc + loss, sums_acc), None

  sums0 = {k: jnp.zeros((), jnp.float32) for k in _SUM_KEYS}
  (grads, loss, sums), _ = jax.lax.scan(
      accumulate, (zeros, jnp.zeros((), jnp.float32), sums0), (micro, micro_w), length=m)
  return grads, loss, sums


def _apply_if_finite(tx: optax.GradientTransformation, state: TrainState, grads: Any,
                     loss: jax.Array) -> tuple[TrainState, jax.Array, jax.Array]:
  """(the next state, gradient norm, whether loss and gradient are finite). A non-finite
  step keeps params and optimiser state and counts in `skipped_steps`."""
  grad_norm = optax.tree.norm(grads)
  finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)

  def apply(_):
    updates, opt_state = tx.update(grads, state.opt_state, state.params)
    return optax.apply_updates(state.params, updates), opt_state

  def keep(_):
    return state.params, state.opt_state

  params, opt_state = jax.lax.cond(finite, apply, keep, None)
  skipped = state.skipped_steps + (~finite).astype(jnp.int32)
  new_state = state.replace(step=state.step + 1, params=params, opt_state=opt_state,
                            skipped_steps=skipped)
  return new_state, grad_norm, finite


def _step_metrics(batch: RLBatch, loss: jax.Array, sums: dict[str, jax.Array],
                  grad_norm: jax.Array, finite: jax.Array,
                  skipped_steps: jax.Array) -> dict[str, jax.Array]:
  """The step's metrics: sums as they are, per-token means over the batch's real tokens."""
  tokens = jnp.maximum(sums["tokens"], 1.0)
  return {
      "loss": loss,
      "pg_loss": sums["pg_loss"],
      "kl_loss": sums["kl_loss"],
      "kl": sums["kl"] / tokens,
      "entropy": sums["entropy"] / tokens,
      "ratio": sums["ratio"] / tokens,
      "clip_frac_low": sums["clipped_low"] / tokens,
      "clip_frac_high": sums["clipped_high"] / tokens,
      "clip_frac": (sums["clipped_low"] + sums["clipped_high"]) / tokens,
      "grad_norm": grad_norm,
      "zero_adv_group_frac": adv_lib.zero_signal_fraction(
          batch.advantages, batch.group_id, batch.num_rows),
      "tokens": sums["tokens"],
      "skipped": (~finite).astype(jnp.float32),
      "skipped_steps": skipped_steps,
  }


def make_train_step(forward: ForwardFn, tx: optax.GradientTransformation, cfg: StepConfig, *,
                    schedule: optax.Schedule | None = None, mesh: Mesh | None = None,
                    state_sharding: Any = None, donate: bool = True):
  """Builds the jitted `train_step(state, batch) -> (state, metrics)`.

  Args:
    forward: the policy (see module docstring).
    tx: the optimiser (`train_state.make_optimizer`).
    cfg: loss and execution settings.
    schedule: the learning-rate schedule, only to report `learning_rate`.
    mesh: device mesh; with it, micro-batches are constrained to the batch axes.
    state_sharding: shardings of the TrainState (`mesh.state_shardings`), kept on output.
    donate: donate the input state's buffers (params are updated in place).
  """
  grad_fn = jax.value_and_grad(_micro_loss_fn(forward, cfg), has_aux=True)

  def update(state: TrainState, batch: RLBatch):
    grads, loss, sums = _accumulate_gradients(grad_fn, state, batch, cfg, mesh, state_sharding)
    new_state, grad_norm, finite = _apply_if_finite(tx, state, grads, loss)
    metrics = _step_metrics(batch, loss, sums, grad_norm, finite, new_state.skipped_steps)
    if schedule is not None:
      metrics["learning_rate"] = schedule(state.step - state.skipped_steps)
    return new_state, metrics

  def step(state: TrainState, batch: RLBatch):
    with model_sharding.rows_on(mesh):   # the decoder keeps rows split (constrain_rows)
      return update(state, batch)

  kwargs = {}
  if state_sharding is not None:
    kwargs["out_shardings"] = (state_sharding, NamedSharding(mesh, PartitionSpec()))
  return jax.jit(step, donate_argnums=(0,) if donate else (), **kwargs)


def make_logprob_fn(forward: ForwardFn, cfg: StepConfig, *, mesh: Mesh | None = None):
  """Jitted `logprobs(params, batch) -> [B, N]` in micro-batches (old / ref log-probs)."""

  def fn(params, batch: RLBatch):
    mb = _check_shapes(batch, cfg, mesh)
    micro = _split_micro(batch, mb, mesh, cfg.group_size)
    with model_sharding.rows_on(mesh):
      out = jax.lax.map(lambda x: response_logprobs(
          forward, params, x, chunk=cfg.logprob_chunk, temperature=cfg.temperature,
          group_size=cfg.group_size)[0], micro)
    return _join_micro(out, cfg.group_size)

  return jax.jit(fn)


def update_on_batch(train_step, logprob_fn, state: TrainState, batch: RLBatch,
                    num_epochs: int = 1) -> tuple[TrainState, list[dict[str, float]]]:
  """Host loop: `num_epochs` updates on one batch, with tokens/s per update.

  One epoch uses the batch's old log-probs (the rollout's). Several epochs first recompute
  them with the current params, so the ratio measures drift from the policy that started
  this batch.
  """
  if num_epochs < 1:
    raise ConfigError(f"config.rl.num_epochs = {num_epochs}: must be >= 1")
  if num_epochs > 1 or batch.old_logprobs is None:
    batch = batch.replace(old_logprobs=logprob_fn(state.params, batch))
  history = []
  for _ in range(num_epochs):
    start = time.perf_counter()
    state, metrics = train_step(state, batch)
    metrics = jax.device_get(metrics)
    seconds = time.perf_counter() - start
    row = {k: float(v) for k, v in metrics.items()}
    row["seconds"] = seconds
    # Real (unpadded) prompt + response tokens the forward and backward passes processed.
    row["tokens_per_s"] = float(jnp.sum(batch.attention_mask)) / seconds
    history.append(row)
  return state, history


def build_step(forward: ForwardFn, rl: ml_collections.ConfigDict, *, temperature: float,
               tx=None, group_size: int = 1, **kwargs):
  """(optimiser, `make_train_step`) from config.rl: optimiser, schedule and step settings
  in one place. `temperature`: config.rollout.temperature. Pass `tx` when the state was
  already built with the run's optimiser, and `group_size` from `prompt_group_size` to
  pack shared prompts."""
  tx = make_optimizer(rl) if tx is None else tx
  step = make_train_step(forward, tx, StepConfig.from_config(rl, group_size,
                                                           temperature=temperature),
                         schedule=lr_schedule(rl), **kwargs)
  return tx, step
