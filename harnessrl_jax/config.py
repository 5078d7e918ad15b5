"""The one config tree: a sub-config per subpackage, each documented default in one place.

Experiment files in configs/ call `base_config()` and override fields; a field that does not
exist here cannot be set (ConfigDict refuses unknown keys and wrong types at start-up).
"""

from __future__ import annotations

import ml_collections


def base_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.seed = 0

  c.data = ml_collections.ConfigDict()
  c.data.train = "data/train.jsonl"      # relative paths resolve against the repo root
  c.data.heldout = "data/heldout.jsonl"
  c.data.domains = ()                     # empty: every domain in the files

  c.model = ml_collections.ConfigDict()
  c.model.source = "smollm2"             # "smollm2" (embedded GGUF), "hf" (a directory), "tiny"
  c.model.path = ""                       # HF safetensors directory or GGUF file for "hf"
  c.model.cache_dir = ""                  # converted-weights cache; "" -> ~/.cache/harnessrl_jax
  c.model.dtype = "float32"              # activations; bf16 is slower than fp32 on CPUs
  c.model.param_dtype = "float32"
  c.model.remat = False

  c.rollout = ml_collections.ConfigDict()
  c.rollout.num_samples = 8              # J, rollouts per task (paper: 8)
  c.rollout.max_new_tokens = 128
  c.rollout.temperature = 1.0
  c.rollout.top_p = 1.0
  c.rollout.top_k = 0                    # 0: no top-k cut
  c.rollout.prompt_buckets = (64, 128, 256, 512)

  c.rl = ml_collections.ConfigDict()
  c.rl.tasks_per_step = 8                # paper: 512
  c.rl.learning_rate = 1e-6              # paper: 1e-6
  c.rl.beta = 0.001                      # KL coefficient (paper: 0.001)

  c.train = ml_collections.ConfigDict()
  c.train.steps = 10
  c.train.log_every = 1
  c.lock()  # configs may change fields, never add them: typos fail at start-up
  return c
