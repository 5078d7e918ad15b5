"""Every experiment config loads with only existing fields, and each baseline / ablation
runs one training step on the tiny model (model, sizes and data overridden) with the
behaviour its name promises."""

import importlib
import json
import os

import pytest

from harnessrl_jax import train

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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


def test_paper_scale():
  c = load("paper")
  assert (c.rl.tasks_per_step, c.rollout.num_samples) == (512, 8)
  assert (c.rl.learning_rate, c.rl.beta) == (1e-6, 0.001)
  assert c.rl.mesh.data * c.rl.mesh.fsdp * c.rl.mesh.tensor == 16 * 8
  assert c.model.source == "hf" and c.judge.llm_backend in ("openai", "jetstream")


@pytest.fixture(scope="module")
def small_data(tmp_path_factory):
  """Five training and two held-out tasks; a compilation cache for this module's runs
  (each run builds its own jitted step; the cache makes the later ones skip XLA)."""
  import jax  # pylint: disable=g-import-not-at-top
  root = tmp_path_factory.mktemp("data")
  names = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
           "jax_persistent_cache_min_entry_size_bytes")
  old = {n: getattr(jax.config, n) for n in names}
  for n, v in zip(names, (str(root / "jax_cache"), 0.0, 0)):
    jax.config.update(n, v)
  for src, n in (("train", 5), ("heldout", 2)):
    with open(os.path.join(REPO, f"data/{src}.jsonl"), encoding="utf-8") as f:
      (root / f"{src}.jsonl").write_text("".join(f.readlines()[:n]))
  yield root
  for n, v in old.items():
    jax.config.update(n, v)


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


@pytest.mark.parametrize("name", BASELINES)
def test_baseline_runs_one_step(name, small_data, tmp_path):
  c = on_tiny(load(name), small_data)
  s = train.run(c, str(tmp_path / name))
  assert s["steps"] == 1 and s["heldout_end"]["reward"] is not None
  rows = [json.loads(l) for l in (tmp_path / name / "metrics.jsonl").read_text().splitlines()]
  assert len(rows) == 1 and rows[0]["step"] == 0
  history = tmp_path / name / train.HISTORY
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
