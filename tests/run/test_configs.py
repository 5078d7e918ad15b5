"""Every experiment config loads with only existing fields and passes `validate`; validate
lists every problem of a bad tree at once; the sections' typed views round-trip the
defaults; and each baseline / ablation runs one training step on the tiny model (model,
sizes and data overridden) with the behaviour its name promises."""

import dataclasses
import importlib
import json
import os

import ml_collections
import pytest

from harnessrl_jax import run_files, train
from harnessrl_jax.config import base_config, validate
from harnessrl_jax.config_view import section_view
from harnessrl_jax.errors import ConfigError
from harnessrl_jax.harness.config import HarnessConfig
from harnessrl_jax.judges.config import JudgeConfig, same_model
from harnessrl_jax.memory.config import MemoryConfig
from harnessrl_jax.models.config import ModelSettings
from harnessrl_jax.evolver.config import AblationConfig, EvolverConfig
from harnessrl_jax.rl.config import MeshConfig, RLConfig
from harnessrl_jax.rollout.config import RolloutConfig
from harnessrl_jax.run.config import DataConfig, TrainConfig
from repo_paths import REPO

BASELINES = ("grpo_static", "no_critic", "no_critic_no_memory", "sampling_only",
             "guidance_only", "rubric_only")


def load(name):
  return importlib.import_module(f"configs.{name}").get_config()


@pytest.mark.parametrize("name", ("default", "tiny", "paper") + BASELINES)
def test_config_loads_locked(name):
  c = load(name)
  assert c.is_locked
  with pytest.raises(AttributeError):
    c.train.no_such_field = 1
  assert c.train.steps >= 1 and "evolver" in c and "ablation" in c


@pytest.mark.parametrize("name", ("default", "tiny", "paper") + BASELINES)
def test_every_config_validates(name):
  c = load(name)
  validate(c)   # without the devices: the static checks
  if name == "paper":   # 16 hosts x 8 devices
    validate(c, device_count=128, process_count=16)
  else:
    validate(c, device_count=8)


def test_validate_lists_every_problem_with_its_field():
  c = load("tiny")
  c.train.steps = 0
  c.judge.backend = "llama"
  c.judge.transport_retries = -1
  c.rl.max_grad_norm = 0.0
  c.rl.lr_schedule = "cosine"
  c.rl.total_steps = 5
  c.rl.warmup_steps = 5
  c.rl.kl_estimator = "k9"
  c.harness.ladder = (1.0, 0.5, 0.7)
  c.memory.approx_kind = "lsh"
  c.ablation.routes = ("rubric", "vibes")
  c.evolver.rounds = -1
  c.rollout.top_p = 0.0
  c.rl.mesh.data = 4
  with pytest.raises(ConfigError) as e:
    validate(c, device_count=2)
  lines = str(e.value).splitlines()
  want = ["config.train.steps = 0", "config.judge.backend = 'llama'",
          "config.judge.transport_retries = -1", "config.rl.max_grad_norm = 0.0",
          "config.rl.total_steps = 5 must exceed config.rl.warmup_steps = 5",
          "config.rl.kl_estimator = 'k9'", "config.harness.ladder = (1.0, 0.5, 0.7)",
          "config.memory.approx_kind = 'lsh'", "config.ablation.routes",
          "config.evolver.rounds = -1", "config.rollout.top_p = 0.0",
          "config.rl.mesh = {'data': 4, 'fsdp': 1, 'tensor': 1} needs 4 devices but this "
          "run sees 2"]
  for start in want:
    assert sum(line.startswith(start) for line in lines) == 1, (start, lines)
  assert len(lines) == len(want), lines


@pytest.mark.parametrize("mesh,devices,processes,match", [
    ((2, -1, 1), 3, 1, r"3 devices are not a multiple of 2"),
    ((-1, -1, 1), 8, 1, r"at most one -1"),
    ((1, 0, 1), 8, 1, r"sizes must be positive"),
    ((2, 2, 1), 8, 2, r"uses 4 of the 8 devices of 2 processes"),
])
def test_validate_refuses_meshes_that_do_not_fit(mesh, devices, processes, match):
  c = load("tiny")
  c.rl.mesh.data, c.rl.mesh.fsdp, c.rl.mesh.tensor = mesh
  with pytest.raises(ConfigError, match=match):
    validate(c, device_count=devices, process_count=processes)


def test_validate_checks_the_batch_split_and_the_learner_temperature():
  c = load("tiny")   # 2 tasks x 4 samples = 8 rows
  c.rl.mesh.fsdp = -1
  validate(c)         # the split is unknown without the device count
  validate(c, device_count=8)
  with pytest.raises(ConfigError, match=r"8 rows do not split over the mesh's data x fsdp "
                                        r"= 16 devices"):
    validate(c, device_count=16)
  c.rl.mesh.fsdp, c.rl.mesh.data = 1, 3
  with pytest.raises(ConfigError, match=r"8 rows do not split.* = 3 devices"):
    validate(c)         # fully sized: known without the devices
  c = load("tiny")
  c.rollout.temperature = 0.7
  validate(c)         # one temperature: the learner's is the sampler's
  assert "temperature" not in c.rl
  c.rollout.temperature = 0.0   # greedy sampling is a law the learner cannot score
  with pytest.raises(ConfigError, match=r"config\.rollout\.temperature = 0\.0: the "
                                        r"learner's log-probs need > 0"):
    validate(c)


def _plain(x):
  """asdict / ConfigDict.to_dict values with tuples and lists alike."""
  if isinstance(x, dict):
    return {k: _plain(v) for k, v in x.items()}
  if isinstance(x, (list, tuple, frozenset)):
    return [_plain(v) for v in x]
  return x


@pytest.mark.parametrize("view,section", [
    (ModelSettings, "model"), (RolloutConfig, "rollout"), (JudgeConfig, "judge"),
    (HarnessConfig, "harness"), (MemoryConfig, "memory"), (TrainConfig, "train"),
    (DataConfig, "data"), (MeshConfig, "rl.mesh"), (RLConfig, "rl"),
    (EvolverConfig, "evolver"), (AblationConfig, "ablation")])
def test_views_round_trip_the_defaults(view, section):
  c = base_config()
  for part in section.split("."):
    c = c[part]
  v = view.from_config(c)
  assert view.from_config(v) == v   # a view is a section too
  got, want = _plain(dataclasses.asdict(v)), _plain(c.to_dict())
  assert got == want   # every field of the defaults, and nothing else


def test_same_model_compares_what_decides_the_weights():
  c = base_config()
  assert same_model(c.judge.model, c.model)          # both SmolLM2 at float32
  c.judge.model.cache_dir, c.judge.model.remat = "/elsewhere", True
  c.model.seed, c.model.family = 3, "qwen3"          # read only by source "tiny"
  assert same_model(c.judge.model, c.model)
  c.model.dtype = "bfloat16"
  assert not same_model(c.judge.model, c.model)
  assert same_model({"source": "tiny", "seed": 1}, {"source": "tiny", "seed": 1})
  assert not same_model({"source": "tiny", "seed": 1}, {"source": "tiny", "seed": 2})
  assert not same_model({"source": "tiny", "family": "qwen2"}, {"source": "tiny"})
  assert not same_model({"source": "hf", "path": "/m/a"}, {"source": "hf", "path": "/m/b"})
  assert same_model({"source": "hf", "path": "/m/a/"}, {"source": "hf", "path": "/m/a"})
  assert not same_model({"source": "smollm2"}, {"source": "tiny"})


def test_paper_scale():
  c = load("paper")
  assert (c.rl.tasks_per_step, c.rollout.num_samples) == (512, 8)
  assert (c.rl.learning_rate, c.rl.beta) == (1e-6, 0.001)
  assert c.rl.mesh.data * c.rl.mesh.fsdp * c.rl.mesh.tensor == 16 * 8
  assert c.model.source == "hf" and c.judge.llm_backend in ("openai", "jetstream")


@pytest.fixture(scope="module")
def small_data(tmp_path_factory):
  """Five training and two held-out tasks (each run builds its own jitted step; the test
  run's compilation cache, tests/conftest.py, makes the later ones skip XLA)."""
  root = tmp_path_factory.mktemp("data")
  for src, n in (("train", 5), ("heldout", 2)):
    with open(os.path.join(REPO, f"data/{src}.jsonl"), encoding="utf-8") as f:
      (root / f"{src}.jsonl").write_text("".join(f.readlines()[:n]))
  return root


def on_tiny(c, data):
  c.model.source = "tiny"
  c.judge.backend = "program"
  c.judge.model.source = "tiny"
  c.data.train = str(data / "train.jsonl")
  c.data.heldout = str(data / "heldout.jsonl")
  c.rollout.num_samples = 4
  c.rollout.max_new_tokens = 8
  c.rollout.prompt_buckets = (512,)
  c.rl.tasks_per_step = 2
  c.rl.micro_batch_size = 0
  c.rl.warmup_steps = 0
  c.rl.mesh.fsdp = 1
  c.train.steps = 1
  c.train.eval_tasks = 2
  c.train.eval_every = 0
  return c


# One single-interface arm shows the route restriction in CI; the other two: slow tier.
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow)
                                  if n in ("sampling_only", "rubric_only") else n
                                  for n in BASELINES])
def test_baseline_runs_one_step(name, small_data, tmp_path):
  c = on_tiny(load(name), small_data)
  s = train.run(c, str(tmp_path / name))
  assert s["steps"] == 1 and s["heldout_end"]["score"] is not None
  rows = [json.loads(l) for l in (tmp_path / name / "metrics.jsonl").read_text().splitlines()]
  assert len(rows) == 1 and rows[0]["step"] == 0
  history = tmp_path / name / run_files.HISTORY
  routes = {r for r, v in s["updates"].items() if sum(v.values())}
  accepted = {r for r, v in s["updates"].items() if v.get("accepted")}
  if name == "grpo_static":
    assert s["updates"] == {}
    # Only the guidance schedule writes history (cap 0 at the last step).
    ops = [json.loads(l)["op"]["op"] for l in history.read_text().splitlines()]
    assert set(ops) <= {"enforce_schedule"}
    assert not (tmp_path / name / "memory").exists()
    return
  assert routes, "the evolver looked at no criterion"
  for only in ("sampling", "guidance", "rubric"):
    if name == f"{only}_only":
      assert accepted <= {only}
      for r in routes - {only, "none"}:
        assert set(s["updates"][r]) == {"noop"}, s["updates"]
  if name.startswith("no_critic"):
    # Unmeasured: no re-sampled rollouts, no regraded cells.
    assert s["cost"]["critic_rollouts"] == 0 and s["cost"]["critic_judge_cells"] == 0
    assert accepted, s["updates"]
  assert (tmp_path / name / "memory").exists() == (name != "no_critic_no_memory")


def _toy_defaults():
  c = ml_collections.ConfigDict()
  c.rate = 0.5
  c.count = 3
  c.name = "a"
  c.on = True
  c.band = (1.0, 2.0)
  c.sub = ml_collections.ConfigDict()
  c.sub.size = 4
  return c


def test_a_default_is_a_view_field_with_its_type():
  """The derived view: a new default is a new field, read and coerced by its default's type;
  every missing or ill-typed field is named at once as config.<section>.<field>."""
  view = section_view(_toy_defaults, "config.toy")
  assert [f.name for f in dataclasses.fields(view)] == ["band", "count", "name", "on", "rate",
                                                         "sub"]
  c = _toy_defaults()
  c.rate, c.band = 2, [3, 4]      # an int for a float, a list for a tuple
  v = view.from_config(c)
  assert (v.rate, v.band, v.sub.size) == (2.0, (3.0, 4.0), 4)
  assert type(v.rate) is float and isinstance(v.band, tuple)
  with pytest.raises(dataclasses.FrozenInstanceError):
    v.rate = 1.0
  bad = c.to_dict()
  bad.update(count=2.5, on=1, sub={"size": "big"})
  del bad["name"]
  with pytest.raises(ConfigError) as e:
    view.from_config(ml_collections.ConfigDict(bad, type_safe=False))
  assert str(e.value).splitlines() == [
      "config.toy.count = 2.5: expected an integer, like its default 3",
      "config.toy.name: missing (build the section on its defaults)",
      "config.toy.on = 1: expected True or False, like its default True",
      "config.toy.sub.size = 'big': expected an integer, like its default 4"]
  # A plain dict names only what it changes; the rest are the defaults; no unknown names.
  assert view.from_config({"count": 7}).count == 7
  assert view.from_config({}) == view.from_config(_toy_defaults())
  with pytest.raises(ConfigError, match=r"config\.toy\.colour: no such field"):
    view.from_config({"colour": "red"})


def test_views_check_in_one_style_and_name_the_nested_path():
  c = base_config()
  c.judge.model.dtype = "float64"
  c.evolver.rounds = -1
  c.evolver.guidance_band = (5.0, 1.0)
  assert EvolverConfig.from_config(c.evolver, check=False).problems() == [
      "config.evolver.rounds = -1: must be >= 0",
      "config.evolver.guidance_band = [5.0, 1.0]: need 0 <= lo <= hi (points)"]
  with pytest.raises(ConfigError, match=r"config\.evolver\.rounds = -1"):
    EvolverConfig.from_config(c.evolver)
  c.judge.backend = "jetstream"    # loads judge.model, so its settings are checked
  assert JudgeConfig.from_config(c.judge, check=False).problems() == [
      "config.judge.model.dtype = 'float64': expected one of ('float32', 'bfloat16', "
      "'float16')"]
  c.judge.model = ml_collections.ConfigDict({**c.judge.model.to_dict(), "seed": "x"})
  with pytest.raises(ConfigError, match=r"^config\.judge\.model\.seed = 'x': expected an "
                                        r"integer"):
    JudgeConfig.from_config(c.judge)
