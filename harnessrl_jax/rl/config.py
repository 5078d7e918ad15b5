"""The `rl` section of the config tree: every learner default, with the reason for it, and
its typed views, derived from the defaults (harnessrl_jax/config_view.py): `RLConfig` (what
the driver's loop and train_state's optimiser and schedule read) and `MeshConfig`
(config.rl.mesh). The loss and step fields are also read next to their code:
`losses.LossConfig`, `train_step.StepConfig`.

The paper (spec section 3) fixes lr 1e-6, beta 0.001 and J = 8; everything else here is a
design choice and says why. `harnessrl_jax.config.base_config()` mounts this as `c.rl`.
"""

from __future__ import annotations

import math

import ml_collections

from harnessrl_jax.config_view import section_view
from harnessrl_jax.models.sharding import MESH_AXES
from harnessrl_jax.rl.advantages import ADVANTAGE_FNS

LR_SCHEDULES = ("constant", "cosine")


# One long function on purpose: a list of defaults, each with its reason, reads best as one
# list (the typed view takes its fields from it).
def rl_defaults() -> ml_collections.ConfigDict:
  """Returns the default `rl` config section."""
  c = ml_collections.ConfigDict()
  c.tasks_per_step = 8            # tasks drawn per step (paper: 512); J comes from rollout

  # Advantages. "grpo": (r - mean) / (std + eps_A) within a group (the paper's formula);
  # "mean_only": r - mean (Dr.GRPO, no std scaling). std is the population std (ddof 0),
  # so |A| <= sqrt(J - 1) whatever the reward scale and eps_A only has to stop 0 / 0.
  # Groups whose rewards are all equal get A = 0 exactly (not "rounding error / eps").
  c.advantage = "grpo"
  c.eps_advantage = 1e-6

  # PPO clipping of the ratio pi / pi_old. eps_low 0.2 is the PPO / GRPO value; eps_high
  # 0.28 is DAPO's "clip-higher", which lets low-probability tokens grow and slows the
  # entropy collapse of long GRPO runs. With num_epochs 1 the ratio stays ~1 and neither
  # bound is reached; they matter once a batch is reused.
  c.clip_eps_low = 0.2
  c.clip_eps_high = 0.28

  # KL to the frozen reference policy. k3 = exp(d) - d - 1 with d = log ref - log pi:
  # unbiased for KL(pi || ref), never negative, low variance (the GRPO paper's choice).
  c.kl_estimator = "k3"
  c.beta = 0.001                  # paper

  # How token losses become one number. "seq_mean_token_mean" is the GRPO objective of
  # Eq. 2 (1/G sum_i 1/|o_i| sum_t) and keeps the importance weight u exactly unbiased:
  # its normaliser does not depend on which tasks were drawn. "token_mean" (DAPO) divides
  # by the batch's token count, a ratio estimator (u unbiased only asymptotically).
  # "constant" (Dr.GRPO) divides by num_seqs * max_response_len.
  c.loss_aggregation = "seq_mean_token_mean"
  c.max_response_len = 0          # "constant" normaliser length; 0: the batch's response length

  # Optimiser: AdamW with a linear warm-up (update i of the first warmup_steps uses
  # lr * (i + 1) / warmup_steps: no update at 0) then `lr_schedule`, after global-norm clipping.
  c.learning_rate = 1e-6          # paper
  c.warmup_steps = 10             # ~2% of the paper's ~500 steps: Adam's first moments are noisy
  c.lr_schedule = "constant"      # "constant" or "cosine" (to 0 at total_steps); paper: none
  c.total_steps = 500             # paper: ~500 steps; only "cosine" reads it
  c.adam_b1 = 0.9
  c.adam_b2 = 0.999
  c.adam_eps = 1e-8
  # 0: decay pulls weights toward zero, not toward the reference; the KL term is what keeps
  # the policy near its start.
  c.weight_decay = 0.0
  c.max_grad_norm = 1.0

  # Execution. One update per batch by default: the old log-probs are the rollout's (the
  # sampler's own, at no cost; the ratio is 1 and its gradient exact). More epochs
  # recompute them with the current params before the first (one forward more per batch).
  # The reference log-probs cost one forward of the frozen reference per micro-batch, only
  # when beta > 0 (the paper's 0.001: about a quarter of an update's compute on CPU).
  c.num_epochs = 1
  c.micro_batch_size = 8          # sequences per gradient-accumulation slice; 0: whole batch
  # The update's prompt width: the step's longest real prompt rounded up to this multiple
  # (rl/batch.trim_prompt_padding), not the rollout's bucket. The same loss and gradients
  # (float rounding aside) on fewer padding columns; each new width compiles the update
  # once. 0: the bucket's width.
  c.prompt_pad_multiple = 32
  # GRPO's J rows of a task share one prompt: pack each group into one row [prompt, r_1..r_J]
  # (response j sees the prompt and itself), so the update's forward, backward and
  # reference forward compute each prompt once, not J times: same loss and gradients up to
  # float rounding. Used when the model attends fully (no sliding windows, no linear
  # attention) and micro-batches hold whole groups on every device (rl/train_step.py).
  c.share_prompts = True
  c.logprob_chunk = 64            # sequence positions per chunk of logits (memory O(B*chunk*V))
  # No temperature here: the learner takes log-probs at rollout.temperature, the law that
  # sampled the responses (one number, one place).

  # Device mesh ('data', 'fsdp', 'tensor'); -1 takes the devices the other axes leave.
  c.mesh = ml_collections.ConfigDict()
  c.mesh.data = 1
  c.mesh.fsdp = -1
  c.mesh.tensor = 1
  return c


class MeshConfig(section_view(lambda: rl_defaults().mesh, "config.rl.mesh")):
  """`config.rl.mesh`: the size of each mesh axis; one may be -1 (the devices the others
  leave)."""

  @property
  def sizes(self) -> dict[str, int]:
    return {a: getattr(self, a) for a in MESH_AXES}

  @property
  def fixed(self) -> int:
    """The product of the sized axes (every axis but a -1 one)."""
    return math.prod(s for s in self.sizes.values() if s > 0)

  def resolve(self, device_count: int) -> dict[str, int]:
    """The axis sizes on `device_count` devices: a -1 axis takes what the others leave."""
    return {a: device_count // self.fixed if s == -1 else s for a, s in self.sizes.items()}

  def problems(self) -> list[str]:
    """What is wrong whatever the devices."""
    sizes = self.sizes
    if sum(s == -1 for s in sizes.values()) > 1 or any(s == 0 or s < -1
                                                        for s in sizes.values()):
      return [f"config.rl.mesh = {sizes}: sizes must be positive, at most one -1"]
    return []

  def device_problems(self, device_count: int, process_count: int = 1) -> list[str]:
    """What is wrong on `device_count` devices of `process_count` processes: the mesh must
    fit the devices, a -1 axis must divide them, and on several processes the mesh must
    span every device (each process feeds its own devices' rows)."""
    sizes, fixed, free = self.sizes, self.fixed, -1 in self.sizes.values()
    if fixed > device_count:
      return [f"config.rl.mesh = {sizes} needs {fixed} devices but this run sees "
              f"{device_count}: lower config.rl.mesh.data / fsdp / tensor (or set one of "
              "them to -1 to use what is there)"]
    if free and device_count % fixed:
      return [f"config.rl.mesh = {sizes}: {device_count} devices are not a multiple of "
              f"{fixed}"]
    if not free and process_count > 1 and fixed != device_count:
      return [f"config.rl.mesh = {sizes} uses {fixed} of the {device_count} devices of "
              f"{process_count} processes: a run on several processes needs a mesh over "
              "every device; set one axis to -1 (e.g. --config.rl.mesh.fsdp=-1)"]
    return []


class RLConfig(section_view(rl_defaults, "config.rl", nested={"mesh": MeshConfig})):
  """`config.rl`, typed (fields and their meanings: `rl_defaults`), with the mesh's view.
  The loss and step fields are checked with their code (`losses.LossConfig`,
  `train_step.StepConfig`); the optimiser reads its fields from here (rl/train_state.py)."""

  def problems(self) -> list[str]:
    out = []
    for name in ("tasks_per_step", "num_epochs"):
      if getattr(self, name) < 1:
        out.append(f"config.rl.{name} = {getattr(self, name)}: must be >= 1")
    if self.prompt_pad_multiple < 0:
      out.append(f"config.rl.prompt_pad_multiple = {self.prompt_pad_multiple}: must be >= 0 "
                 "(0: no trimming)")
    if self.advantage not in ADVANTAGE_FNS:
      out.append(f"config.rl.advantage = {self.advantage!r}: expected one of "
                 f"{sorted(ADVANTAGE_FNS)}")
    if not self.eps_advantage > 0:
      out.append(f"config.rl.eps_advantage = {self.eps_advantage}: must be > 0")
    return out + self.optimizer_problems() + self.mesh.problems()

  def optimizer_problems(self) -> list[str]:
    """What is wrong with the optimiser and schedule fields."""
    out = []
    if not (math.isfinite(self.learning_rate) and self.learning_rate >= 0):
      out.append(f"config.rl.learning_rate = {self.learning_rate}: must be a finite number "
                 ">= 0")
    if self.warmup_steps < 0:
      out.append(f"config.rl.warmup_steps = {self.warmup_steps}: must be >= 0")
    if self.lr_schedule not in LR_SCHEDULES:
      out.append(f"config.rl.lr_schedule = {self.lr_schedule!r}: expected 'constant' or "
                 "'cosine'")
    elif self.lr_schedule == "cosine" and self.total_steps <= self.warmup_steps:
      out.append(f"config.rl.total_steps = {self.total_steps} must exceed "
                 f"config.rl.warmup_steps = {self.warmup_steps} for the cosine schedule")
    for name in ("adam_b1", "adam_b2"):
      if not 0.0 <= getattr(self, name) < 1.0:
        out.append(f"config.rl.{name} = {getattr(self, name)}: must be in [0, 1)")
    if not self.adam_eps > 0:
      out.append(f"config.rl.adam_eps = {self.adam_eps}: must be > 0")
    if not self.weight_decay >= 0:
      out.append(f"config.rl.weight_decay = {self.weight_decay}: must be >= 0")
    if not self.max_grad_norm > 0:
      out.append(f"config.rl.max_grad_norm = {self.max_grad_norm}: must be > 0")
    return out

