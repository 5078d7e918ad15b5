"""The accelerator compile check (harnessrl_jax.aot): topology names, the HLO collective
count, and the command run the way a user runs it, compiling the tiny config's train step,
log-prob forward and rollout for an H100 and for a TPU slice with no device present; its
exit status; and the memory plan (models/plan.py) against the compiled peak.

The compiles need the compile-only plugins (requirements-aot.txt: jax-cuda12-plugin and
-pjrt, libtpu; CI's tier installs them, `AOT=1 bash launch/setup_venv.sh`); without them
those tests skip and say so."""

import json
import os
import subprocess
import sys

import pytest

from harnessrl_jax.aot import check, topology
from harnessrl_jax.config import base_config
from harnessrl_jax.errors import ConfigError
from harnessrl_jax.models import plan
from harnessrl_jax.models.architecture import ModelConfig
from repo_paths import REPO

GIB = 2**30

needs_cuda_plugin = pytest.mark.skipif(
    not topology.has_compiler("cuda"),
    reason="no jax-cuda12-plugin: AOT=1 bash launch/setup_venv.sh (requirements-aot.txt)")
needs_libtpu = pytest.mark.skipif(
    not topology.has_compiler("tpu"),
    reason="no libtpu: AOT=1 bash launch/setup_venv.sh (requirements-aot.txt)")


def test_topology_names():
  t = topology.parse_topology("h100:16x8")
  assert (t.kind.name, t.shape, t.num_devices) == ("h100", (16, 8), 128)
  assert topology.parse_topology("h200:8").shape == (1, 8)   # one host
  assert topology.parse_topology("v5p:4x4x8").num_devices == 128
  assert topology.parse_topology("v5e:4x4").kind.platform == "tpu"
  for bad in ("h100", "h100:16x8x2", "mi300:8", "v5p:4", "h100:0x8", ""):
    with pytest.raises(ConfigError, match="--topology"):
      topology.parse_topology(bad)


def test_memory_budget_is_the_allocator_share_of_hbm():
  h100 = topology.DEVICE_KINDS["h100"]
  assert topology.usable_bytes(h100) == int(81559 * 2**20 * topology.GPU_MEMORY_FRACTION)
  assert topology.usable_bytes(topology.DEVICE_KINDS["v5p"]) == 95 * GIB
  assert "device_memory_size: 85520809984" in topology.gpu_target_config(h100)


def test_collectives_are_counted_by_kind_async_pairs_once():
  hlo = """
  %a = f32[8]{0} all-reduce(f32[8]{0} %x), replica_groups={}, to_apply=%add
  %b = (f32[8]{0}, f32[64]{0}) all-gather-start(f32[8]{0} %y), dimensions={0}
  %c = f32[64]{0} all-gather-done((f32[8]{0}, f32[64]{0}) %b)
  %d = f32[2]{0} reduce-scatter(f32[16]{0} %z), dimensions={0}, to_apply=%add
  %e = f32[8]{0} add(f32[8]{0} %a, f32[8]{0} %a), metadata={op_name="all-reduce"}
  """
  assert check.collectives_of(hlo) == {"all-reduce": 1, "all-gather": 1, "reduce-scatter": 1}


def _aot(tmp_path, *args, name="aot.json"):
  """`python -m harnessrl_jax.aot ARGS --json=...` as a user runs it: (status, stdout,
  stderr, the JSON or None). The suite's fast-compile XLA flags stay out of it: they change
  what XLA plans."""
  out = tmp_path / name
  env = {k: v for k, v in os.environ.items()
         if k not in ("XLA_FLAGS", "JAX_COMPILATION_CACHE_DIR")}
  env["PYTHONPATH"] = REPO
  done = subprocess.run([sys.executable, "-m", "harnessrl_jax.aot", *args, f"--json={out}"],
                        cwd=REPO, env=env, capture_output=True, text=True, timeout=900,
                        check=False)
  return (done.returncode, done.stdout, done.stderr,
          json.loads(out.read_text()) if out.exists() else None)


def _rows(report):
  return {r["name"]: r for r in report["results"]}


@needs_cuda_plugin
def test_tiny_config_compiles_for_h100_fsdp_and_fits(tmp_path):
  status, stdout, stderr, report = _aot(
      tmp_path, "--config=configs/tiny.py", "--topology=h100:1x2", "--config.rl.mesh.fsdp=2")
  assert status == 0, stderr
  rows = _rows(report)
  assert set(rows) == {"train_step", "logprobs", "rollout"}
  assert report["devices"] == 2 and report["policy"]["mesh"]["fsdp"] == 2
  for r in rows.values():
    assert r["fits"] and 0 < r["peak"] < report["budget_bytes"] and r["flops"] > 0
  # FSDP over 2 devices: the step gathers weight shards and reduces gradients across them.
  assert rows["train_step"]["collectives"].get("all-gather", 0) > 0
  assert "fits: every program" in stdout and "train_step" in stdout


@needs_libtpu
def test_tiny_config_compiles_for_a_tpu_slice(tmp_path):
  status, _, stderr, report = _aot(
      tmp_path, "--config=configs/tiny.py", "--topology=v5e:2x2", "--config.rl.mesh.fsdp=4",
      "--programs=train_step,rollout")
  assert status == 0, stderr
  assert report["device_kind"].startswith("TPU v5") and report["devices"] == 4
  assert {r["name"] for r in report["results"]} == {"train_step", "rollout"}
  assert all(r["fits"] for r in report["results"])


@needs_cuda_plugin
def test_a_program_over_budget_exits_2_naming_it(tmp_path):
  status, _, stderr, report = _aot(
      tmp_path, "--config=configs/tiny.py", "--topology=h100:1", "--programs=train_step",
      "--memory_fraction=0.000001")
  assert status == 2
  last = stderr.strip().splitlines()[-1]
  assert last.startswith("does not fit: train_step on h100:1x1: peak ") and "GiB" in last
  assert report["fits"] is False and not report["results"][0]["fits"]


def test_bad_topology_and_program_names_are_one_line(tmp_path):
  status, _, stderr, _ = _aot(tmp_path, "--config=configs/tiny.py", "--topology=h100")
  assert status == 2 and stderr.strip().splitlines()[-1].startswith("error: --topology='h100'")
  status, _, stderr, _ = _aot(tmp_path, "--config=configs/tiny.py", "--topology=h100:1",
                              "--programs=decode")
  assert status == 2 and "--programs: unknown ['decode']" in stderr


def _small_qwen3(tmp_path):
  """A qwen3-style policy large enough that weights and activations, not fixed overheads,
  make the peak: 12 layers, d 512, vocab 32k (~60M parameters); its config.json path."""
  arch = ModelConfig.tiny("qwen3", vocab_size=32000, hidden_size=512, intermediate_size=1536,
                          num_layers=12, num_heads=8, num_kv_heads=4, head_dim=64,
                          max_position_embeddings=4096)
  path = tmp_path / "config.json"
  path.write_text(json.dumps(arch.to_hf()))
  return arch, str(path)


@needs_cuda_plugin
def test_plan_agrees_with_the_compiled_peak(tmp_path):
  """The plan's remat total and its rollout total within 15% of XLA's compiled peaks for
  the train step and the rollout on a small H100 topology (the paper-scale comparisons are in
  docs/models.md)."""
  arch, path = _small_qwen3(tmp_path)
  overrides = ["--config.model.source=hf", "--config.model.path=/nonexistent",
               "--config.model.remat=True", "--config.model.dtype=bfloat16",
               "--config.rl.tasks_per_step=16", "--config.rollout.num_samples=4",
               "--config.rollout.prompt_buckets=(512,)", "--config.rollout.max_new_tokens=512",
               "--config.rl.micro_batch_size=32", "--config.rl.mesh.data=2",
               "--config.rl.mesh.fsdp=4", "--config.rl.share_prompts=False"]
  status, _, stderr, report = _aot(tmp_path, "--config=configs/tiny.py", "--topology=h100:2x4",
                                   "--programs=train_step,rollout", f"--policy_config={path}",
                                   *overrides)
  assert status == 0, stderr
  compiled = {r["name"]: r["peak"] for r in report["results"]}
  c = base_config()
  c.model.source, c.model.path, c.model.remat, c.model.dtype = "hf", "/x", True, "bfloat16"
  c.rl.tasks_per_step, c.rollout.num_samples = 16, 4
  c.rollout.prompt_buckets, c.rollout.max_new_tokens = (512,), 512
  c.rl.micro_batch_size, c.rl.mesh.data, c.rl.mesh.fsdp = 32, 2, 4
  c.rl.share_prompts = False
  p = plan.policy_plan(arch, c)
  for name, planned in (("train_step", p.total(True)), ("rollout", p.rollout.total)):
    assert abs(planned - compiled[name]) <= 0.15 * compiled[name], (
        name, planned / GIB, compiled[name] / GIB)


@needs_cuda_plugin
def test_the_judge_engine_compiles_on_request(tmp_path):
  """Our JetStream engine's prefill and generate, on one device as `serve` runs them,
  compiled on request when the run's judge is elsewhere (then outside the verdict)."""
  status, stdout, stderr, report = _aot(
      tmp_path, "--config=configs/tiny.py", "--topology=h100:1",
      "--programs=engine_prefill,engine_generate", "--config.judge.max_concurrency=4",
      name="asked.json")
  assert status == 0, stderr
  rows = _rows(report)
  assert set(rows) == {"engine_prefill", "engine_generate"}
  assert not rows["engine_generate"]["in_run"]   # the tiny config's judge is "program"
  assert "4 slots over a 1152-slot cache" in rows["engine_generate"]["note"]
  assert "yes*" in stdout


@needs_cuda_plugin
def test_a_jetstream_judged_run_counts_its_engine(tmp_path):
  status, _, stderr, report = _aot(
      tmp_path, "--config=configs/tiny.py", "--topology=h100:1",
      "--config.judge.backend=jetstream", "--config.judge.max_concurrency=4")
  assert status == 0, stderr
  rows = _rows(report)
  assert set(rows) == {"train_step", "logprobs", "rollout", "engine_prefill",
                       "engine_generate"}
  assert rows["engine_prefill"]["in_run"] and rows["engine_generate"]["in_run"]


def test_a_missing_plugin_is_reported_not_raised(tmp_path, monkeypatch):
  # A venv without the plugins has no `jax_plugins` package at all: find_spec of a module
  # under it raises, which once broke collecting this file on a fresh clone.
  monkeypatch.setattr(topology, "PLUGINS_DIR", str(tmp_path))
  monkeypatch.setitem(topology._PLUGIN_MODULES, "cuda", ("no_such_package_x", "xla_cuda"))
  assert not topology.has_compiler("cuda")
  (tmp_path / "no_such_package_x" / "xla_cuda").mkdir(parents=True)
  assert topology.has_compiler("cuda")   # the compile-only plugins' folder counts
