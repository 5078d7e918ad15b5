"""Rollouts: batched KV-cache sampling of a Decoder, with the log-probs the learner needs.

`generate` / `Sampler` (sampler.py) take prompts as token-id lists and return a
`RolloutBatch`; `SamplingParams` (sampling.py) holds temperature / top-p / top-k /
max_new_tokens / stop ids; batching.py buckets prompt lengths; decode_loop.py is the
compiled loop itself; config.py holds the `rollout` config section and its view
`RolloutConfig`.
"""

from harnessrl_jax.rollout.config import RolloutConfig, rollout_defaults
from harnessrl_jax.rollout.sampler import RolloutBatch, Sampler, generate, generate_padded
from harnessrl_jax.rollout.sampling import SamplingParams

__all__ = ["RolloutBatch", "RolloutConfig", "Sampler", "SamplingParams", "generate",
           "generate_padded", "rollout_defaults"]
