"""The prepared GPU check's Python side; `benchmarks/gpu_check.sh` runs it stage by stage.

  python3 benchmarks/gpu_check.py machine            # what the machine is
  python3 benchmarks/gpu_check.py train              # the GRPO train step at a ~0.5B shape
  python3 benchmarks/gpu_check.py rollout            # the rollout program at that shape
  python3 benchmarks/gpu_check.py loop --workdir D   # 3 steps of the whole driver, configs/tiny.py
  python3 benchmarks/gpu_check.py stage-end ...      # (the script) a stage's row from its exit
  python3 benchmarks/gpu_check.py summary --dir D    # the one table, from the stages' rows

Each stage writes its row (JSON) to $GPU_CHECK_RESULT when that is set, and prints it.

The benchmark shape is Qwen3-0.6B's, with random weights, built from `ModelConfig` fields:
hidden 1024, 28 layers, 16 query / 8 KV heads of 128, MLP 3072, vocabulary 151936, QK-norm,
tied embeddings; float32 parameters, bfloat16 activations (as configs/paper.py runs).
GPU_CHECK_SMALL=1 shrinks every shape (a CPU dry run that finishes in minutes).

FLOPs are the model's (harnessrl_jax/aot/flops.py: what the model needs, no remat
recompute, no credit for padding); MFU = FLOPs / (seconds x bf16 peak), against the H100/H200
datasheet's dense bf16 peak (989 TFLOP/s) and against the 8192^3 bf16 matmul rate measured
on random data on the lent H200 (~790 TFLOP/s). On a machine without a GPU both are shown
but mean nothing: the table says those figures are CPU figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DATASHEET_BF16 = 989e12   # H100 / H200 SXM dense bf16, vendor datasheet
MEASURED_BF16 = 790e12    # 8192^3 bf16 matmul on random data, lent H200 (KINDS.md, 2026-10/11)
STAGES = ("wheels", "machine", "tests", "train", "rollout", "loop")
SMALL = os.environ.get("GPU_CHECK_SMALL") == "1"


def _emit(row: dict) -> dict:
  path = os.environ.get("GPU_CHECK_RESULT")
  if path:
    with open(path, "w", encoding="utf-8") as f:
      json.dump(row, f, indent=1)
  print("RESULT " + json.dumps(row), flush=True)
  return row


def _cpu_model() -> str:
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      for line in f:
        if line.startswith("model name"):
          return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or platform.machine()


def bench_config():
  """(ModelConfig, description): Qwen3-0.6B's shape, or a small one under GPU_CHECK_SMALL."""
  from harnessrl_jax.models.architecture import ModelConfig  # pylint: disable=g-import-not-at-top
  common = dict(family="qwen3", qk_norm=True, tie_word_embeddings=True, rope_theta=1e6,
                rms_norm_eps=1e-6, max_position_embeddings=40960, eos_token_ids=(),
                dtype="bfloat16", param_dtype="float32", remat=True)
  if SMALL:
    cfg = ModelConfig(vocab_size=2048, hidden_size=128, intermediate_size=384, num_layers=2,
                      num_heads=4, num_kv_heads=2, head_dim=32, **common)
    return cfg, "small (GPU_CHECK_SMALL=1): hidden 128, 2 layers, 4/2 heads of 32, vocab 2048"
  cfg = ModelConfig(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_layers=28,
                    num_heads=16, num_kv_heads=8, head_dim=128, **common)
  return cfg, ("Qwen3-0.6B shape, random: hidden 1024, 28 layers, 16/8 heads of 128, MLP 3072, "
               "vocab 151936, tied")


def random_params(cfg, seed: int = 0):
  """(graphdef, params) of a random Decoder, initialised under one jit on the default
  device (no eager op-by-op init of a large model)."""
  import jax  # pylint: disable=g-import-not-at-top
  from flax import nnx  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.models.decoder import Decoder  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.models.hf_io import abstract_model  # pylint: disable=g-import-not-at-top
  graphdef, _ = nnx.split(abstract_model(cfg))
  params = jax.jit(lambda: nnx.split(Decoder(cfg, rngs=nnx.Rngs(seed)))[1])()
  return graphdef, params


def _param_count(params) -> int:
  import jax  # pylint: disable=g-import-not-at-top
  return int(sum(x.size for x in jax.tree.leaves(params)))


def _device_peak() -> int | None:
  import jax  # pylint: disable=g-import-not-at-top
  stats = jax.devices()[0].memory_stats() or {}
  return stats.get("peak_bytes_in_use")


def _platform_note(backend: str) -> str:
  return "" if backend == "gpu" else f"{backend.upper()} figures, not GPU figures"


def _timed(fn, repeats: int) -> list[float]:
  import jax  # pylint: disable=g-import-not-at-top
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(fn())
    times.append(time.perf_counter() - start)
  return times


def _mfu(flops: float, seconds: float) -> dict:
  return {"model_tflop": flops / 1e12, "tflops_per_s": flops / seconds / 1e12,
          "mfu_datasheet": flops / seconds / DATASHEET_BF16,
          "mfu_measured_peak": flops / seconds / MEASURED_BF16}


# ---------------------------------------------------------------------------------------------
# stages


def stage_machine(_args) -> dict:
  import jax  # pylint: disable=g-import-not-at-top
  import jaxlib  # pylint: disable=g-import-not-at-top
  try:
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                          "--format=csv"], capture_output=True, text=True, timeout=30,
                         check=False).stdout.strip()
  except (OSError, subprocess.TimeoutExpired) as e:
    smi = f"nvidia-smi: {e}"
  print(smi, flush=True)
  backend = jax.default_backend()
  devices = [f"{d.platform}:{d.id} {d.device_kind}" for d in jax.devices()]
  versions = {"python": platform.python_version(), "jax": jax.__version__,
              "jaxlib": getattr(jaxlib, "__version__", "?")}
  for name in ("flax", "optax", "orbax.checkpoint", "numpy", "ml_collections", "faiss"):
    try:
      module = __import__(name, fromlist=["__version__"])
      versions[name] = getattr(module, "__version__", "?")
    except ImportError:
      versions[name] = "absent"
  cpu = f"{_cpu_model()}, {os.cpu_count()} cores"
  print(f"jax {jax.__version__} backend {backend}; devices {devices}\ncpu {cpu}\n{versions}",
        flush=True)
  gpu = smi.splitlines()[1] if smi.count("\n") >= 1 and not smi.startswith("nvidia-smi:") else ""
  figures = (f"{gpu or 'no nvidia-smi'}; jax {jax.__version__} backend {backend}, "
             f"{len(devices)} device(s): {devices[0]}")
  return {"status": "PASS", "figures": figures, "backend": backend, "devices": devices,
          "nvidia_smi": smi, "gpu": gpu, "cpu": cpu, "versions": versions}


def _train_batch(rows: int, prompt: int, response: int, vocab: int, seed: int = 0):
  import numpy as np  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.rl.batch import RLBatch  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(seed)
  width = prompt + response
  return RLBatch(
      tokens=rng.integers(0, vocab, (rows, width)).astype(np.int32),
      positions=np.broadcast_to(np.arange(width, dtype=np.int32), (rows, width)).copy(),
      attention_mask=np.ones((rows, width), bool),
      loss_mask=np.ones((rows, response), np.float32),
      old_logprobs=(-np.log(vocab) + rng.normal(0, 0.3, (rows, response))).astype(np.float32),
      ref_logprobs=None,
      advantages=rng.normal(size=rows).astype(np.float32),
      task_weight=np.ones(rows, np.float32),
      group_id=(np.arange(rows) // 4).astype(np.int32))


def stage_train(args) -> dict:
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.aot import flops as flops_lib  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.rl import mesh as rl_mesh  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.rl import train_step as ts  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.rl.config import rl_defaults  # pylint: disable=g-import-not-at-top

  cfg, shape_note = bench_config()
  rows, prompt, response, micro = ((8, 64, 64, 4) if SMALL else
                                   (args.rows, args.prompt, args.response, args.micro_batch))
  rl = rl_defaults()
  rl.micro_batch_size = micro
  rl.warmup_steps = 0
  rl.share_prompts = False   # rows as sampled: every row its own prompt (random data)
  graphdef, params = random_params(cfg)
  shape = flops_lib.ModelShape.of(cfg, params)
  n_params = _param_count(params)
  tx, step = ts.build_step(ts.decoder_forward(graphdef), rl, temperature=1.0)
  with_ref = float(rl.beta) > 0
  state, _ = rl_mesh.init_state(params, tx, None, ref_params=params if with_ref else None)
  del params
  batch = jax.device_put(_train_batch(rows, prompt, response, cfg.vocab_size))
  start = time.perf_counter()
  compiled = step.lower(state, batch).compile()
  compile_s = time.perf_counter() - start
  mem = compiled.memory_analysis()
  state, metrics = compiled(state, batch)          # warm-up
  first = {k: float(v) for k, v in jax.device_get(metrics).items()}
  holder = {"state": state}

  def call():
    holder["state"], m = compiled(holder["state"], batch)
    return holder["state"], m

  times = _timed(call, args.repeats)
  seconds = statistics.median(times)
  flops = flops_lib.train_step(shape, rows=rows, width=prompt + response, response=response,
                               with_reference=with_ref)
  tokens = rows * (prompt + response)
  peak = _device_peak()
  row = {"status": "PASS" if np.isfinite(first["loss"]) and np.isfinite(first["grad_norm"])
         else "FAIL", "shape": shape_note, "parameters": n_params,
         "batch": f"{rows} rows x {prompt + response} slots ({prompt} prompt + {response} "
                  f"response), micro-batch {micro}, remat {cfg.remat}, {cfg.dtype} activations, "
                  f"{cfg.param_dtype} params, reference forward {'in' if with_ref else 'out'}",
         "compile_s": compile_s, "step_s": times, "median_step_s": seconds,
         "tokens_per_s": tokens / seconds, **_mfu(flops, seconds),
         "loss": first["loss"], "grad_norm": first["grad_norm"],
         "compiled_peak_bytes": int(getattr(mem, "peak_memory_in_bytes", 0) or 0),
         "device_peak_bytes": peak, "backend": jax.default_backend()}
  if row["status"] != "PASS":
    row["error"] = f"non-finite first step: loss {first['loss']}, grad norm {first['grad_norm']}"
  note = _platform_note(row["backend"])
  row["figures"] = (f"{row['tokens_per_s']:,.0f} tok/s, {row['tflops_per_s']:.1f} TFLOP/s, MFU "
                    f"{row['mfu_datasheet']:.1%} of 989T / {row['mfu_measured_peak']:.1%} of "
                    f"790T, step {seconds:.3f}s, compile {compile_s:.0f}s"
                    + (f" [{note}]" if note else ""))
  return row


def stage_rollout(args) -> dict:
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.aot import flops as flops_lib  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.rollout import sampler  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.rollout.sampling import SamplingParams  # pylint: disable=g-import-not-at-top

  cfg, shape_note = bench_config()
  prompts, samples, width, new = ((4, 2, 32, 32) if SMALL else
                                  (args.prompts, args.samples, args.prompt_width,
                                   args.new_tokens))
  graphdef, params = random_params(cfg)
  shape = flops_lib.ModelShape.of(cfg, params)
  rng = np.random.default_rng(0)
  tokens = rng.integers(0, cfg.vocab_size, (prompts, width)).astype(np.int32)
  mask = np.ones((prompts, width), bool)
  sampling = SamplingParams(temperature=1.0, max_new_tokens=new)
  key = jax.random.key(0)

  def call():
    # No stop ids: every row runs to max_new_tokens, the count the FLOPs assume.
    return sampler.generate_padded(graphdef, params, tokens, mask, sampling, key,
                                  num_samples=samples, pad_id=0, eos_token_ids=(),
                                  phase_tokens=args.phase_tokens)

  start = time.perf_counter()
  out = jax.block_until_ready(call())
  first_s = time.perf_counter() - start
  lengths = np.asarray(out.lengths)
  times = _timed(call, args.repeats)
  seconds = statistics.median(times)
  generated = prompts * samples * new
  flops = flops_lib.rollout(shape, prompts=prompts, samples=samples, prompt_width=width,
                            new_tokens=new)
  full = bool((lengths == new).all())
  row = {"status": "PASS" if full else "FAIL", "shape": shape_note,
         "workload": f"{prompts} prompts x {samples} samples, {width}-token prompts, {new} new "
                     f"tokens, temperature 1, decode phases of {args.phase_tokens}",
         "compile_and_first_s": first_s, "call_s": times, "median_call_s": seconds,
         "generated_tokens_per_s": generated / seconds, **_mfu(flops, seconds),
         "device_peak_bytes": _device_peak(), "backend": jax.default_backend()}
  if not full:
    row["error"] = f"rows stopped early: lengths {sorted(set(lengths.tolist()))[:5]}"
  note = _platform_note(row["backend"])
  row["figures"] = (f"{row['generated_tokens_per_s']:,.0f} gen tok/s, "
                    f"{row['tflops_per_s']:.1f} TFLOP/s, MFU {row['mfu_datasheet']:.1%} of 989T"
                    f" / {row['mfu_measured_peak']:.1%} of 790T, call {seconds:.3f}s, compile+"
                    f"first {first_s:.0f}s" + (f" [{note}]" if note else ""))
  return row


def stage_loop(args) -> dict:
  workdir = args.workdir
  cmd = [sys.executable, "-m", "harnessrl_jax.train", "--config=configs/tiny.py",
         f"--workdir={workdir}", f"--config.train.steps={args.steps}"] + args.override
  print(" ".join(cmd), flush=True)
  start = time.perf_counter()
  proc = subprocess.run(cmd, cwd=REPO, check=False)
  wall = time.perf_counter() - start
  summary_path = os.path.join(workdir, "summary.json")
  row = {"command": " ".join(cmd[1:]), "wall_s": wall, "returncode": proc.returncode,
         "summary_json": os.path.isfile(summary_path)}
  if proc.returncode or not row["summary_json"]:
    row["status"] = "FAIL"
    row["error"] = (f"driver exited {proc.returncode}" if proc.returncode else
                    "driver exited 0 but wrote no summary.json")
    row["figures"] = f"wall {wall:.0f}s"
    return row
  with open(summary_path, encoding="utf-8") as f:
    summary = json.load(f)
  cost = summary.get("cost", {})
  row["summary"] = {  # the parts that say the loop ran: the whole file is in the work dir
      "steps": summary.get("steps"), "skipped_updates": summary.get("skipped_updates"),
      "heldout_start": summary.get("heldout_start", {}).get("score"),
      "heldout_end": summary.get("heldout_end", {}).get("score"),
      "updates": summary.get("updates"), "rl_s": cost.get("rl_s"),
      "evolver_s": cost.get("evolver_s")}
  row["status"] = "PASS" if summary.get("steps") == args.steps else "FAIL"
  row["figures"] = (f"{summary.get('steps')} steps in {wall:.0f}s wall (RL "
                    f"{cost.get('rl_s', 0):.0f}s, evolver {cost.get('evolver_s', 0):.0f}s), "
                    f"summary.json written")
  if row["status"] != "PASS":
    row["error"] = f"summary.json says {summary.get('steps')} steps, asked for {args.steps}"
  return row


# ---------------------------------------------------------------------------------------------
# the script's bookkeeping


def _last_line(path: str) -> str:
  try:
    with open(path, encoding="utf-8", errors="replace") as f:
      lines = [l.strip() for l in f if l.strip()]
  except OSError:
    return ""
  keys = ("Error", "error:", "Exception", "FAILED", "Traceback", "Killed")
  for line in reversed(lines[-60:]):
    if any(k in line for k in keys) and not line.startswith("Traceback"):
      return line[:300]
  return lines[-1][:300] if lines else ""


def _tests_row(junit: str) -> dict:
  """Counts, skip reasons and failures from pytest's JUnit XML."""
  root = ET.parse(junit).getroot()
  cases = list(root.iter("testcase"))
  failed, skipped, reasons = [], 0, set()
  for c in cases:
    name = c.get("name", "?")
    bad = c.find("failure")
    if bad is None:
      bad = c.find("error")
    if bad is not None:
      msg = (bad.get("message") or bad.text or "").strip().splitlines()
      failed.append(f"{name}: {msg[0][:200] if msg else ''}")
    elif c.find("skipped") is not None:
      skipped += 1
      reasons.add((c.find("skipped").get("message") or "").strip()[:200])
  passed = len(cases) - len(failed) - skipped
  row = {"passed": passed, "failed": len(failed), "skipped": skipped,
         "failures": failed, "skip_reasons": sorted(reasons)}
  row["figures"] = f"{passed} passed, {len(failed)} failed, {skipped} skipped"
  if skipped:
    row["figures"] += " (" + "; ".join(sorted({r.split(" (")[0] for r in reasons}))[:110] + ")"
  if failed:
    row["status"], row["error"] = "FAIL", failed[0]
  elif not cases:
    row["status"], row["error"] = "FAIL", "no test ran"
  else:
    row["status"] = "PASS"
  return row


def stage_end(args) -> None:
  """Completes a stage's row from how its command ended (the script calls this)."""
  path = os.path.join(args.dir, f"{args.name}.json")
  row = {}
  if os.path.isfile(path):
    with open(path, encoding="utf-8") as f:
      row = json.load(f)
  if args.name == "tests":
    if os.path.isfile(os.path.join(args.dir, "tests.xml")):
      row.update(_tests_row(os.path.join(args.dir, "tests.xml")))
    figures = os.path.join(args.dir, "test_figures.json")
    if os.path.isfile(figures):   # what the tests that finished measured, even on a timeout
      with open(figures, encoding="utf-8") as f:
        row["test_figures"] = json.load(f)
  if args.rc in (124, 137):
    row["status"] = "TIMEOUT"
    row["error"] = f"stopped by its {args.limit}s timeout"
  elif args.rc and row.get("status") in (None, "PASS", "SKIP"):
    row["status"] = "FAIL"
    row["error"] = row.get("error") or (f"exit {args.rc}: "
                                        f"{_last_line(args.output) or 'no output'}")
  elif not row:
    row = {"status": "FAIL", "error": f"exit {args.rc} and no result: {_last_line(args.output)}"}
  if args.skipped:
    row = {"status": "NOT RUN", "error": args.skipped}
  row["seconds"] = args.seconds
  row["returncode"] = args.rc
  with open(path, "w", encoding="utf-8") as f:
    json.dump(row, f, indent=1)


def summarize(rows: dict, elapsed: float | None = None) -> tuple[str, dict]:
  """The table (text) and the JSON document from the stages' rows."""
  machine = rows.get("machine", {})
  backend = machine.get("backend", "?")
  head = [f"GPU check summary: {machine.get('gpu') or 'no GPU'}; jax "
          f"{machine.get('versions', {}).get('jax', '?')}, backend {backend}; "
          f"cpu {machine.get('cpu', '?')}"]
  if backend != "gpu":
    head.append(f"NOTE: no GPU backend: every figure below is a {backend.upper()} figure, not "
                "a GPU one; the accelerator tests skip (HARNESSRL_ACCEL_DRY_RUN=1: they compare "
                "two CPU devices)")
  if SMALL:
    head.append("NOTE: GPU_CHECK_SMALL=1: small shapes (a dry run), not the 0.5B benchmark")
  width = 10
  lines = head + ["", f"{'stage':<{width}}{'status':<9}{'seconds':>8}  key figures / failure",
                  "-" * 100]
  ok = True
  for name in STAGES:
    row = rows.get(name)
    if row is None:
      lines.append(f"{name:<{width}}{'MISSING':<9}{'':>8}  stage did not run")
      ok = False
      continue
    status = row.get("status", "?")
    ok &= status in ("PASS", "SKIP")
    text = row.get("figures", "")
    if row.get("error") and status != "PASS":
      text = (text + " | " if text else "") + row["error"]
    secs = row.get("seconds")
    lines.append(f"{name:<{width}}{status:<9}{(f'{secs:.0f}' if secs is not None else ''):>8}"
                 f"  {text}")
  tests = rows.get("tests", {}).get("test_figures")
  if tests:
    lines.append("")
    for name, fig in tests.items():
      lines.append(f"  test {name}: {fig}")
  lines.append("")
  verdict = ("every stage passed or skipped" if ok else
             "some stage failed, timed out or did not run (see its row)")
  lines.append(f"gpu_check: {verdict}" + (f"; {elapsed:.0f}s in all" if elapsed else ""))
  doc = {"ok": ok, "backend": backend, "small": SMALL, "elapsed_s": elapsed, "stages": rows}
  return "\n".join(lines), doc


def stage_summary(args) -> int:
  rows = {}
  for name in STAGES:
    path = os.path.join(args.dir, f"{name}.json")
    if os.path.isfile(path):
      with open(path, encoding="utf-8") as f:
        rows[name] = json.load(f)
  text, doc = summarize(rows, args.elapsed)
  print(text, flush=True)
  if args.out:
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "gpu_check.json"), "w", encoding="utf-8") as f:
      json.dump(doc, f, indent=1)
  with open(os.path.join(args.dir, "summary.txt"), "w", encoding="utf-8") as f:
    f.write(text + "\n")
  return 0 if doc["ok"] else 1


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  sub = ap.add_subparsers(dest="stage", required=True)
  sub.add_parser("machine")
  tr = sub.add_parser("train")
  tr.add_argument("--rows", type=int, default=64)
  tr.add_argument("--prompt", type=int, default=512)
  tr.add_argument("--response", type=int, default=512)
  tr.add_argument("--micro_batch", type=int, default=16)
  tr.add_argument("--repeats", type=int, default=3)
  ro = sub.add_parser("rollout")
  ro.add_argument("--prompts", type=int, default=64)
  ro.add_argument("--samples", type=int, default=4)
  ro.add_argument("--prompt_width", type=int, default=256)
  ro.add_argument("--new_tokens", type=int, default=256)
  ro.add_argument("--phase_tokens", type=int, default=32,
                  help="decode steps per phase (the runs' default, rollout.decode_phase_tokens)")
  ro.add_argument("--repeats", type=int, default=3)
  lo = sub.add_parser("loop")
  lo.add_argument("--workdir", required=True)
  lo.add_argument("--steps", type=int, default=3)
  lo.add_argument("--override", action="append", default=[],
                  help="a --config.* flag for the driver, as --override=--config.a.b=V")
  se = sub.add_parser("stage-end")
  se.add_argument("--dir", required=True)
  se.add_argument("--name", required=True)
  se.add_argument("--rc", type=int, required=True)
  se.add_argument("--seconds", type=float, required=True)
  se.add_argument("--limit", type=int, default=0)
  se.add_argument("--output", default="")
  se.add_argument("--skipped", default="")
  su = sub.add_parser("summary")
  su.add_argument("--dir", required=True)
  su.add_argument("--out", default="")
  su.add_argument("--elapsed", type=float, default=None)
  args = ap.parse_args()
  if args.stage == "stage-end":
    stage_end(args)
    return 0
  if args.stage == "summary":
    return stage_summary(args)
  fn = {"machine": stage_machine, "train": stage_train, "rollout": stage_rollout,
        "loop": stage_loop}[args.stage]
  row = _emit(fn(args))
  return 0 if row.get("status") in ("PASS", "SKIP") else 1


if __name__ == "__main__":
  sys.exit(main())
