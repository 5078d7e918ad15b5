"""The paper's scale: a Qwen3.5-4B policy, 512 tasks x 8 rollouts per step, lr 1e-6,
beta 0.001, ~500 steps, on 16 hosts x 8 H100 (mesh data 16 x fsdp 8).

The judge and the evolver's LLM roles run on an OpenAI-compatible endpoint (vLLM, SGLang,
tpu-inference) serving gemma-4-31B-it; for JetStream set judge.backend = "jetstream" and
judge.jetstream.address (our engine loads the released multimodal checkpoint's text model:
`python -m harnessrl_jax.serve --model=PATH`; untried at 31B). Set before launching (placeholders
below):
  model.path            the policy's HF safetensors directory (Qwen3.5-4B: the multimodal
                        checkpoint; its text decoder is read)
  judge.openai.base_url / judge.openai.model   the judge endpoint and served model
                        (judge.endpoints: several servers of that model, as one pool)
  data.train / data.heldout                    the full task files

Compiled for the accelerators with no device (`python -m harnessrl_jax.aot
--config=configs/paper.py --topology=h100:16x8`, or `v5p:4x4x8`; 2026-12-04, docs/models.md),
this config fits as set: per device, the train step peaks at 20.7 GiB of an H100 (v5p: 18.6),
the rollout of 512 x 8 with its KV cache at 13.3 (v5p: 13.6); with model.remat off the step
needs 192 GiB per H100 and the check exits 2. Estimated from shapes alone, in seconds:
`python -m harnessrl_jax.models.plan --config=configs/paper.py`. Both read model.path's
config.json when there is one, else the architectures below. They are transcriptions, not the downloaded config.json files (no network
here), from the public code cited next to them; fields none of the sources gave are left out
(the readers' defaults apply). Replace them with the real files' values when at hand.
"""

from harnessrl_jax.config import base_config

# Qwen3.5-4B's text decoder, HF qwen3_5_text fields. Every field: ModelConfig.qwen3_5_4b in
# tunix/models/qwen3_5/model.py (the ridcl/tunix fork of google/tunix). The widths, heads,
# layers, vocabulary, norm eps and RoPE also: radixark/miles scripts/models/qwen3.5-4B.sh
# (Megatron arguments; no untie flag, where its 27B script has one).
POLICY_HF_CONFIG = {
    "model_type": "qwen3_5_text",
    "vocab_size": 248320,
    "hidden_size": 2560,
    "intermediate_size": 9216,
    "num_hidden_layers": 32,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "full_attention_interval": 4,     # layers 4, 8, ... full attention, the rest linear
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,      # tunix's use_tied_embedding; miles passes no untie flag
    "rope_parameters": {"rope_type": "default", "rope_theta": 10_000_000,
                        "partial_rotary_factor": 0.25},
}

# gemma-4-31B-it's text decoder, HF gemma4_text fields. Every field: ModelConfig.gemma4_31b in
# google/tunix tunix/models/gemma4/model.py. Layers, widths, heads and vocabulary also:
# THUDM/slime scripts/models/gemma4-31B.sh; the global layers' 4 KV heads of 512 with
# k_eq_v, the softcap and the tied embedding also: the model card of
# huggingface.co/mlboydaisuke/Gemma-4-31B-CoreAI. transformers builds 30.70 B parameters
# from these, the published "30.7B".
JUDGE_HF_CONFIG = {
    "model_type": "gemma4_text",
    "vocab_size": 262144,
    "hidden_size": 5376,
    "intermediate_size": 21504,
    "num_hidden_layers": 60,
    "num_attention_heads": 32,
    "num_key_value_heads": 16,
    "head_dim": 256,
    "num_global_key_value_heads": 4,
    "global_head_dim": 512,
    "attention_k_eq_v": True,
    "sliding_window": 1024,
    "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 10,
    "final_logit_softcapping": 30.0,
    "tie_word_embeddings": True,
    "hidden_size_per_layer_input": 0,  # no per-layer embeddings (the E2B/E4B models have them)
}

# The judge's serving group, an assumption of this plan (not measured): one 8 x H100 host,
# tensor-parallel, each sequence up to the largest prompt bucket + the response + the rubric
# and the judge's instructions (judge.max_concurrency of them at once).
JUDGE_SERVING = {"tensor_parallel": 8, "context_tokens": 8192}


def get_config():
  c = base_config()
  c.model.source = "hf"
  c.model.path = "/models/Qwen3.5-4B"
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
