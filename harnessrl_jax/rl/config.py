"""The `rl` section of the config tree: every learner default, with the reason for it.

The paper (spec section 3) fixes lr 1e-6, beta 0.001 and J = 8; everything else here is a
design choice and says why. `harnessrl_jax.config.base_config()` mounts this as `c.rl`.
"""

from __future__ import annotations

import ml_collections


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

  # Optimiser: AdamW with linear warmup then `lr_schedule`, after global-norm clipping.
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

  # Execution. One update per batch by default (old log-probs = the rollout's); more epochs
  # recompute old log-probs with the current params before the first.
  c.num_epochs = 1
  c.micro_batch_size = 8          # sequences per gradient-accumulation slice; 0: whole batch
  c.logprob_chunk = 64            # sequence positions per chunk of logits (memory O(B*chunk*V))
  c.temperature = 1.0             # must equal rollout.temperature: log-probs of the sampler's law

  # Device mesh ('data', 'fsdp', 'tensor'); -1 takes the devices the other axes leave.
  c.mesh = ml_collections.ConfigDict()
  c.mesh.data = 1
  c.mesh.fsdp = -1
  c.mesh.tensor = 1
  return c
