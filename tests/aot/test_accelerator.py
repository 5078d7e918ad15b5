"""On a GPU: the GPU computes what the CPU computes, and XLA's compiled memory plan holds on
the device. benchmarks/gpu_check.sh runs this file on the lent H200.

  (a) one GRPO train step of tiny random models (float32) on the GPU and on the host CPU:
      loss, its parts, entropy, KL and gradient norm within rtol 1e-4 at "highest" matmul
      precision, the gradient (AdamW's first moment) within 1e-4 of its largest entry; and
      at XLA's default precision (TF32 matmuls on the GPU) within 2e-2;
  (b) a greedy rollout of tiny random models gives the same tokens on the GPU as on the CPU
      (a row may part only at a near-tie: the CPU's top two logits within 1e-4), and the
      same tokens with model.remat on as off;
  (c) the train step of a ~0.17B random Qwen3-style policy compiled for the GPU: the peak
      the compiler plans (`compiled.memory_analysis().peak_memory_in_bytes`) against the
      device's own counter (`memory_stats()["peak_bytes_in_use"]`) over one call; the real
      peak must be at most 1.25 x the planned peak + the arguments' bytes;
  (d) the same step compiled with no device for the same GPU kind (harnessrl_jax.aot's
      compile-only topology, `h200:1` on an H200): its planned peak within 10% + 64 MiB of
      the compile for the real device.

(c) and (d) come first in the file: no call resets the device's peak counter, so (c) wants a
process that has done little else yet.

Without a GPU backend every test here skips, saying why: tests/conftest.py sets
JAX_PLATFORMS=cpu unless it is set, so on a GPU machine run it as the script does,
`JAX_PLATFORMS=cuda,cpu XLA_FLAGS= python3 -m pytest -q tests/aot/test_accelerator.py`. A GPU
compared with itself proves nothing, so there is no CPU variant of (a)-(d); only the
script's summary table (below) is checked on the CPU. HARNESSRL_ACCEL_DRY_RUN=1 runs (a)-(c)
with the second fake CPU device standing in for the GPU: a check of this file's code, not
of any accelerator.
"""

import importlib.util
import json
import os
import time
import types

import jax
import numpy as np
import pytest
from flax import nnx

from harnessrl_jax.models.architecture import ModelConfig
from harnessrl_jax.models.decoder import Decoder
from harnessrl_jax.rl import mesh as rl_mesh
from harnessrl_jax.rl import train_step as ts
from harnessrl_jax.rl.batch import RLBatch
from harnessrl_jax.rl.config import rl_defaults
from harnessrl_jax.rollout import sampler
from harnessrl_jax.rollout.sampling import SamplingParams
from repo_paths import REPO

DRY_RUN = os.environ.get("HARNESSRL_ACCEL_DRY_RUN") == "1"
SMALL = DRY_RUN or os.environ.get("GPU_CHECK_SMALL") == "1"
FAMILIES = ("llama", "qwen3", "gemma3", "qwen3_5", "gemma4")
GIB = 2**30
MIB = 2**20


def _devices():
  """(accelerator, host CPU) devices, or a skip that says why there is no pair."""
  backend = jax.default_backend()
  try:
    cpus = jax.devices("cpu")
  except RuntimeError:
    pytest.skip("the CPU backend is not initialised: JAX_PLATFORMS must include cpu "
                "(e.g. JAX_PLATFORMS=cuda,cpu)")
  if backend == "gpu":
    return jax.devices()[0], cpus[0]
  if DRY_RUN and len(cpus) > 1:
    return cpus[1], cpus[0]
  pytest.skip(f"no GPU: jax.default_backend() is {backend!r} (tests/conftest.py sets "
              "JAX_PLATFORMS=cpu unless it is set; on a GPU machine run with "
              "JAX_PLATFORMS=cuda,cpu, as benchmarks/gpu_check.sh does)")


def _record(name: str, text: str) -> None:
  """Prints a test's figures and adds them to $GPU_CHECK_FIGURES (the script's table)."""
  print(f"\n[figures] {name}: {text}", flush=True)
  path = os.environ.get("GPU_CHECK_FIGURES")
  if not path:
    return
  figures = {}
  if os.path.isfile(path):
    with open(path, encoding="utf-8") as f:
      figures = json.load(f)
  figures[name] = text
  with open(path, "w", encoding="utf-8") as f:
    json.dump(figures, f, indent=1)


# ---------------------------------------------------------------------------------------------
# (c), (d) the compiled memory plan against the device


def _memory_case():
  """(config, architecture) of the memory checks: a ~0.17B Qwen3-style policy, 4 tasks x 4
  samples of 256 + 256 slots, micro-batch 8, remat, bf16 activations, f32 parameters."""
  from harnessrl_jax.config import base_config  # pylint: disable=g-import-not-at-top
  c = base_config()
  c.model.dtype, c.model.param_dtype, c.model.remat = "bfloat16", "float32", True
  c.rl.tasks_per_step, c.rl.micro_batch_size = 4, 8
  c.rollout.num_samples = 4
  c.rollout.prompt_buckets = (32,) if SMALL else (256,)
  c.rollout.max_new_tokens = 32 if SMALL else 256
  common = dict(family="qwen3", qk_norm=True, tie_word_embeddings=True, rope_theta=1e6,
                max_position_embeddings=4096)
  if SMALL:
    arch = ModelConfig(vocab_size=1024, hidden_size=64, intermediate_size=128, num_layers=2,
                       num_heads=4, num_kv_heads=2, head_dim=16, **common)
  else:
    arch = ModelConfig(vocab_size=65536, hidden_size=1024, intermediate_size=3072,
                       num_layers=8, num_heads=8, num_kv_heads=4, head_dim=128, **common)
  return c, arch


@pytest.fixture(scope="module")
def device_compile():
  """The train step as train.py builds it (harnessrl_jax.aot.programs), compiled for the
  accelerator: (config, policy, program, compiled, seconds)."""
  accel, _ = _devices()
  from harnessrl_jax.aot import programs  # pylint: disable=g-import-not-at-top
  config, arch = _memory_case()
  policy = programs.build_policy(config, arch, [accel])
  program = next(p for p in programs.train_programs(config, policy) if p.name == "train_step")
  start = time.perf_counter()
  compiled = program.lower().compile()
  return config, policy, program, compiled, time.perf_counter() - start


def _planned_peak(stats) -> int:
  peak = int(getattr(stats, "peak_memory_in_bytes", 0) or 0)
  return peak or int(stats.argument_size_in_bytes + stats.output_size_in_bytes
                     - stats.alias_size_in_bytes + stats.temp_size_in_bytes)


def _concrete_batch(abstract: RLBatch, vocab: int, group: int, device) -> RLBatch:
  """Values for the program's abstract batch: J rows per prompt, full rows."""
  rows, width = abstract.tokens.shape
  response = abstract.loss_mask.shape[1]
  rng = np.random.default_rng(0)
  tokens = rng.integers(0, vocab, (rows, width)).astype(np.int32)
  prompt = width - response
  tokens[:, :prompt] = np.repeat(tokens[::group, :prompt], group, 0)  # shared prompts
  values = dict(
      tokens=tokens, positions=np.broadcast_to(np.arange(width, dtype=np.int32), tokens.shape),
      attention_mask=np.ones((rows, width), bool), loss_mask=np.ones((rows, response), np.float32),
      old_logprobs=np.full((rows, response), -np.log(vocab), np.float32),
      advantages=rng.normal(size=rows).astype(np.float32), task_weight=np.ones(rows, np.float32),
      group_id=(np.arange(rows) // group).astype(np.int32))
  batch = abstract.replace(**{k: jax.device_put(v, device) for k, v in values.items()})
  for got, want in zip(jax.tree.leaves(batch), jax.tree.leaves(abstract)):
    assert got.shape == want.shape and got.dtype == want.dtype
  return batch


def test_compiled_peak_memory_holds_on_the_device(device_compile):
  accel, _ = _devices()
  from harnessrl_jax.rl.train_state import make_optimizer  # pylint: disable=g-import-not-at-top
  config, policy, program, compiled, compile_s = device_compile
  planned = compiled.memory_analysis()
  peak_plan, args = _planned_peak(planned), int(planned.argument_size_in_bytes)
  with jax.default_device(accel):
    params = jax.jit(lambda: nnx.split(Decoder(policy.cfg, rngs=nnx.Rngs(0)))[1])()
    with_ref = float(config.rl.beta) > 0
    state, _ = rl_mesh.init_state(params, make_optimizer(config.rl), None,
                                  ref_params=params if with_ref else None)
    del params
    batch = _concrete_batch(program.args[1], policy.cfg.vocab_size,
                            config.rollout.num_samples, accel)
  jax.block_until_ready((state, batch))
  before = accel.memory_stats()
  if before is None:
    pytest.skip(f"{accel} keeps no memory_stats() (the dry run's CPU): nothing to compare")
  state, metrics = compiled(state, batch)
  jax.block_until_ready((state, metrics))
  after = accel.memory_stats()
  assert np.isfinite(float(metrics["loss"]))
  # Arrays alive besides the step's arguments (other tests' leftovers) are not its to count.
  other = max(0, before["bytes_in_use"] - args)
  real = after["peak_bytes_in_use"] - other
  bound = 1.25 * peak_plan + args
  raised = after["peak_bytes_in_use"] > before["peak_bytes_in_use"]
  _record("compiled_peak_vs_device",
          f"{policy.shape.block_weights / 1e9:.2f}B block weights, {program.note}; planned "
          f"peak {peak_plan / GIB:.2f} GiB (args {args / GIB:.2f}, temp "
          f"{planned.temp_size_in_bytes / GIB:.2f}, out {planned.output_size_in_bytes / GIB:.2f},"
          f" alias {planned.alias_size_in_bytes / GIB:.2f}); device peak {real / GIB:.2f} GiB "
          f"(counter {after['peak_bytes_in_use'] / GIB:.2f}, in use before "
          f"{before['bytes_in_use'] / GIB:.2f}, other {other / GIB:.2f}; the call "
          f"{'raised' if raised else 'did NOT raise'} the peak) = {real / peak_plan:.2f}x "
          f"planned; bar 1.25 x planned + args = {bound / GIB:.2f} GiB; compile "
          f"{compile_s:.0f}s")
  assert real <= bound, (f"the device's peak {real / GIB:.2f} GiB exceeds 1.25 x the planned "
                         f"{peak_plan / GIB:.2f} GiB + arguments {args / GIB:.2f} GiB")


_AOT_KINDS = {"H100": "h100", "H200": "h200", "A100": "a100"}


def test_deviceless_compile_plans_what_the_device_compile_plans(device_compile):
  accel, _ = _devices()
  kind = next((v for k, v in _AOT_KINDS.items() if k in accel.device_kind.upper()), None)
  if accel.platform != "gpu" or kind is None:
    pytest.skip(f"{accel.device_kind!r} has no compile-only topology in harnessrl_jax.aot "
                f"(have {sorted(_AOT_KINDS.values())})")
  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.aot import programs, topology
  # pylint: enable=g-import-not-at-top
  config, _, _, compiled, _ = device_compile
  _, arch = _memory_case()
  devices = topology.compile_only_devices(topology.parse_topology(f"{kind}:1"))
  policy = programs.build_policy(config, arch, devices)
  program = next(p for p in programs.train_programs(config, policy) if p.name == "train_step")
  start = time.perf_counter()
  deviceless = program.lower().compile().memory_analysis()
  seconds = time.perf_counter() - start
  real = compiled.memory_analysis()
  rows = {k: (getattr(deviceless, k), getattr(real, k)) for k in
          ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes")}
  rows["peak"] = (_planned_peak(deviceless), _planned_peak(real))
  _record("deviceless_vs_device_compile",
          f"{kind}:1 compile-only vs {accel.device_kind}: " + ", ".join(
              f"{k.split('_')[0]} {a / GIB:.3f} vs {b / GIB:.3f} GiB" for k, (a, b) in
              rows.items()) + f"; deviceless compile {seconds:.0f}s")
  a, b = rows["peak"]
  assert abs(a - b) <= 0.10 * b + 64 * MIB, (
      f"the compile-only {kind} plans a peak of {a / GIB:.3f} GiB, the device compile "
      f"{b / GIB:.3f} GiB")


# ---------------------------------------------------------------------------------------------
# (a) the train step


def _rl():
  rl = rl_defaults()
  rl.learning_rate = 1e-3
  rl.warmup_steps = 0
  rl.beta = 0.1            # a reference forward and a KL term that is not 0
  rl.micro_batch_size = 4  # two micro-batches: the accumulation scan runs
  rl.logprob_chunk = 4
  rl.share_prompts = False
  return rl


def _train_batch(vocab: int, rows: int = 8, prompt: int = 7, response: int = 6, seed: int = 0):
  rng = np.random.default_rng(seed)
  pm = np.ones((rows, prompt), bool)
  pm[: rows // 2, :3] = False                 # left padding in half the rows
  rm = np.ones((rows, response), bool)
  rm[2:, 4:] = False                          # responses that end early
  mask = np.concatenate([pm, rm], 1)
  return RLBatch(
      tokens=np.where(mask, rng.integers(0, vocab, mask.shape), 0).astype(np.int32),
      positions=np.maximum(np.cumsum(mask, 1) - 1, 0).astype(np.int32),
      attention_mask=mask, loss_mask=rm.astype(np.float32),
      old_logprobs=(-np.log(vocab) + rng.normal(0, 0.3, rm.shape)).astype(np.float32),
      ref_logprobs=None, advantages=rng.normal(0.5, 1.0, rows).astype(np.float32),
      task_weight=rng.uniform(0.5, 2.0, rows).astype(np.float32),
      group_id=(np.arange(rows) // 4).astype(np.int32))


def _first_moment(state):
  # AdamW's first moment after one step is (1 - b1) x the clipped gradient.
  return state.opt_state[1][0].mu


def _train_once(graphdef, params, ref, batch, device, precision):
  tx, step = ts.build_step(ts.decoder_forward(graphdef), _rl(), temperature=1.0,
                           donate=False)
  with jax.default_device(device):
    state, _ = rl_mesh.init_state(params, tx, None, ref)
    state = jax.device_put(state, device)
    on_device = jax.device_put(batch, device)
    with jax.default_matmul_precision(precision):
      new, metrics = step(state, on_device)
  assert metrics["loss"].devices() == {device}
  return ({k: float(v) for k, v in jax.device_get(metrics).items()},
          jax.tree.map(np.asarray, jax.device_get(_first_moment(new))))


# Gemma 4's tiny config holds Gemma 3's features (sliding and full layers, QK-norm, GeGLU).
TRAIN_CASES = ([(f, "highest", 1e-4) for f in ("llama", "qwen3", "qwen3_5", "gemma4")]
               + [("qwen3", "default", 2e-2)])


@pytest.mark.parametrize("family,precision,rtol", TRAIN_CASES)
def test_train_step_on_the_gpu_equals_the_cpu(family, precision, rtol):
  accel, cpu = _devices()
  cfg = ModelConfig.tiny(family)
  with jax.default_device(cpu):
    graphdef, params = nnx.split(Decoder(cfg, rngs=nnx.Rngs(0)))
    _, ref = nnx.split(Decoder(cfg, rngs=nnx.Rngs(1)))
  batch = _train_batch(cfg.vocab_size)
  m_acc, g_acc = _train_once(graphdef, params, ref, batch, accel, precision)
  m_cpu, g_cpu = _train_once(graphdef, params, ref, batch, cpu, precision)
  assert m_cpu["grad_norm"] > 0 and m_cpu["kl"] > 0 and m_cpu["skipped"] == 0
  worst = {}
  for k in ("loss", "pg_loss", "kl_loss", "kl", "entropy", "grad_norm", "ratio"):
    worst[k] = abs(m_acc[k] - m_cpu[k]) / max(abs(m_cpu[k]), 1e-12)
    np.testing.assert_allclose(m_acc[k], m_cpu[k], rtol=rtol, atol=1e-7, err_msg=k)
  scale = max(float(np.max(np.abs(x))) for x in jax.tree.leaves(g_cpu))
  gdiff = max(float(np.max(np.abs(a - b))) for a, b in zip(jax.tree.leaves(g_acc),
                                                           jax.tree.leaves(g_cpu)))
  _record(f"train_step[{family},{precision}]",
          f"loss {m_acc['loss']:.6f} vs {m_cpu['loss']:.6f}, grad norm {m_acc['grad_norm']:.6f} "
          f"vs {m_cpu['grad_norm']:.6f}; worst metric rel. diff "
          f"{max(worst.values()):.1e} ({max(worst, key=worst.get)}), gradient max diff / max "
          f"{gdiff / scale:.1e} (bar {rtol:g})")
  assert gdiff <= rtol * scale, f"gradient differs by {gdiff:.3g}, largest entry {scale:.3g}"


# ---------------------------------------------------------------------------------------------
# (b) greedy rollouts

PROMPT_LENGTHS = (5, 1, 9, 16)
WIDTH, NEW = 16, 12


def _prompts(vocab: int, seed: int = 0):
  rng = np.random.default_rng(seed)
  tokens = np.zeros((len(PROMPT_LENGTHS), WIDTH), np.int32)
  mask = np.zeros(tokens.shape, bool)
  for i, n in enumerate(PROMPT_LENGTHS):
    tokens[i, WIDTH - n:] = rng.integers(3, vocab, n)
    mask[i, WIDTH - n:] = True
  return tokens, mask


def _greedy(graphdef, params, tokens, mask, device):
  sampling = SamplingParams(temperature=0.0, max_new_tokens=NEW)
  with jax.default_device(device), jax.default_matmul_precision("highest"):
    out = sampler.generate_padded(graphdef, jax.device_put(params, device), tokens, mask,
                                 sampling, jax.random.key(0), num_samples=2, pad_id=0,
                                 eos_token_ids=())
  assert out.response_tokens.devices() == {device}
  return jax.tree.map(np.asarray, out)


def _top2_gap(graphdef, params, out, row: int, t: int) -> float:
  """The CPU model's gap between its two largest logits where row's response token t was
  picked (teacher-forced on the CPU's own sequence)."""
  tokens, mask, positions = (np.asarray(x) for x in out.full_sequences())
  with jax.default_matmul_precision("highest"):
    logits, _ = nnx.merge(graphdef, params)(tokens[row:row + 1], positions[row:row + 1],
                                             mask[row:row + 1])
  top = np.sort(np.asarray(logits[0, WIDTH - 1 + t], np.float64))[-2:]
  return float(top[1] - top[0])


@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_rollout_on_the_gpu_equals_the_cpu(family):
  accel, cpu = _devices()
  with jax.default_device(cpu):
    graphdef, params = nnx.split(Decoder(ModelConfig.tiny(family), rngs=nnx.Rngs(0)))
    remat_graphdef, _ = nnx.split(Decoder(ModelConfig.tiny(family, remat=True),
                                          rngs=nnx.Rngs(0)))
  tokens, mask = _prompts(ModelConfig.tiny(family).vocab_size)
  on_cpu = _greedy(graphdef, params, tokens, mask, cpu)
  on_acc = _greedy(graphdef, params, tokens, mask, accel)
  remat = _greedy(remat_graphdef, params, tokens, mask, accel)
  np.testing.assert_array_equal(remat.response_tokens, on_acc.response_tokens)
  np.testing.assert_allclose(remat.logprobs, on_acc.logprobs, atol=1e-6)
  same_rows, ties = 0, []
  for row in range(on_cpu.response_tokens.shape[0]):
    differ = np.flatnonzero(on_acc.response_tokens[row] != on_cpu.response_tokens[row])
    if not differ.size:
      same_rows += 1
      np.testing.assert_allclose(on_acc.logprobs[row], on_cpu.logprobs[row], atol=1e-4)
      continue
    t = int(differ[0])
    with jax.default_device(cpu):
      gap = _top2_gap(graphdef, params, on_cpu, row, t)
    got, want = on_acc.response_tokens[row, t], on_cpu.response_tokens[row, t]
    assert gap < 1e-4, (f"row {row} parts at response token {t} (GPU {got}, CPU {want}) where "
                        f"the CPU's top two logits are {gap:.2e} apart: not a near-tie")
    ties.append((row, t, gap))
  rows = on_cpu.response_tokens.shape[0]
  _record(f"greedy_rollout[{family}]",
          f"{same_rows}/{rows} rows x {NEW} tokens identical GPU vs CPU; near-tie partings "
          f"{ties or 'none'}; remat on = off")


# ---------------------------------------------------------------------------------------------
# the script's table (CPU)


def test_gpu_check_summary_table(tmp_path):
  """benchmarks/gpu_check.py's bookkeeping: a stage's row from its exit, the one table and
  its JSON; a CPU run says its figures are CPU figures."""
  spec = importlib.util.spec_from_file_location(
      "gpu_check", os.path.join(REPO, "benchmarks", "gpu_check.py"))
  gpu_check = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(gpu_check)
  rows = {"machine": {"status": "PASS", "backend": "cpu", "figures": "backend cpu",
                      "versions": {"jax": jax.__version__}, "cpu": "x86", "seconds": 3.0},
          "tests": {"status": "SKIP", "figures": "0 passed, 0 failed, 9 skipped"},
          "train": {"status": "FAIL", "figures": "1 tok/s", "error": "boom", "seconds": 9.5}}
  text, doc = gpu_check.summarize(rows, 12.0)
  assert "CPU figure, not a GPU one" in text
  assert "train     FAIL" in text and "boom" in text and "rollout   MISSING" in text
  assert doc["ok"] is False and doc["stages"]["train"]["error"] == "boom"
  out = tmp_path / "stage.out"
  out.write_text("step 1\nValueError: shapes differ\nexiting\n")

  args = types.SimpleNamespace(dir=str(tmp_path), name="rollout", rc=124, seconds=150.0,
                               limit=150, output=str(out), skipped="")
  gpu_check.stage_end(args)
  row = json.loads((tmp_path / "rollout.json").read_text())
  assert row["status"] == "TIMEOUT" and "150s timeout" in row["error"]
  args.name, args.rc = "loop", 1
  gpu_check.stage_end(args)
  row = json.loads((tmp_path / "loop.json").read_text())
  assert row["status"] == "FAIL" and "ValueError: shapes differ" in row["error"]
