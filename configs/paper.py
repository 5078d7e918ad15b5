"""The paper's scale: a Qwen3 4B-class policy, 512 tasks x 8 rollouts per step, lr 1e-6,
beta 0.001, ~500 steps, on 16 hosts x 8 H100 (mesh data 16 x fsdp 8).

The judge and the evolver's LLM roles run on an OpenAI-compatible endpoint (vLLM, SGLang,
tpu-inference) serving the judge model; for JetStream set judge.backend = "jetstream" and
judge.jetstream.address. Set before launching (placeholders below):
  model.path            the policy's HF safetensors directory (or .gguf)
  judge.openai.base_url / judge.openai.model   the judge endpoint and served model
  data.train / data.heldout                    the full task files
"""

from harnessrl_jax.config import base_config


def get_config():
  c = base_config()
  c.model.source = "hf"
  c.model.path = "/models/Qwen3-4B-Instruct"
  c.model.dtype = "bfloat16"
  c.model.param_dtype = "float32"
  c.model.remat = True
  c.rollout.num_samples = 8
  c.rollout.max_new_tokens = 2048
  c.rollout.prompt_buckets = (512, 1024, 2048, 4096)
  c.rl.tasks_per_step = 512
  c.rl.learning_rate = 1e-6
  c.rl.beta = 0.001
  c.rl.warmup_steps = 10
  c.rl.micro_batch_size = 128
  c.rl.mesh.data = 16
  c.rl.mesh.fsdp = 8
  c.rl.mesh.tensor = 1
  c.judge.backend = "hybrid"
  c.judge.llm_backend = "openai"
  c.judge.openai.base_url = "http://judge.internal:8000/v1"
  c.judge.openai.model = "gemma-4-31B-it"
  c.judge.max_concurrency = 256
  c.evolver.attributor = "llm"
  c.evolver.proposer = "llm"
  c.evolver.calibration_path = ""   # set to the cold start's calibration.json
  c.train.steps = 500
  c.train.eval_every = 25
  c.train.checkpoint_every = 25
  c.train.keep_checkpoints = 3
  c.train.oracle_groups_every = 25   # one step's groups are ~10-20 MB at this scale
  return c
