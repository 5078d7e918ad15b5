"""`harnessrl_jax.eval.evaluate`: stored config round trip, evaluation comparison, and an
end-to-end evaluation of the tiny random model that renders the run report."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from harnessrl_jax.eval import evaluate
from harnessrl_jax.run.checkpoint import config_text, record_config
from harnessrl_jax.errors import ConfigError, DataError
from repo_paths import REPO

FIX = os.path.join(REPO, "tests", "fixtures")


def _tiny():
  import importlib.util  # pylint: disable=g-import-not-at-top
  spec = importlib.util.spec_from_file_location("tiny", os.path.join(REPO, "configs", "tiny.py"))
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod.get_config()


def test_stored_config_round_trip(tmp_path):
  cfg = _tiny()
  record_config(cfg, str(tmp_path), resumed_at=None)   # what train.py writes
  back = evaluate.load_run_config(str(tmp_path))
  assert config_text(back) == config_text(cfg)
  assert back.rollout.prompt_buckets == (512,) and back.model.source == "tiny"
  with pytest.raises(ConfigError, match="config.json: not found; pass --config"):
    evaluate.load_run_config(str(tmp_path / "none"))
  with pytest.raises(ConfigError, match="checkpoints does not exist"):
    evaluate.checkpoint_step(str(tmp_path), "7")


def test_oracle_config_swaps_model_only():
  cfg = _tiny()
  out = evaluate.oracle_config(cfg.judge, "big-model", "http://oracle:8000/v1")
  assert out.openai.model == "big-model" and out.openai.base_url == "http://oracle:8000/v1"
  assert cfg.judge.openai.model != "big-model"          # the run's judge is untouched
  assert out.max_new_tokens == cfg.judge.max_new_tokens


def test_compare_evals_pairs_shared_items():
  rng = np.random.default_rng(0)
  base = rng.normal(50, 10, 60)
  a = {"heldout": {"items": {f"t{i}": float(v + 5) for i, v in enumerate(base)}},
       "ood": {"MedQA": {"items": {"q1": 100.0, "q2": 0.0, "q3": 100.0}}, "ood_mean": 50.0}}
  b = {"heldout": {"items": {f"t{i}": float(v) for i, v in enumerate(base)} | {"x": 1.0}},
       "ood": {"MedQA": {"items": {"q1": 0.0, "q2": 0.0}}}}
  out = evaluate.compare_evals(a, b, num_resamples=500)
  assert out["heldout"]["difference"] == pytest.approx(5.0)
  assert out["heldout"]["num_items"] == 60 and out["heldout"]["p_value"] < 0.01
  assert out["MedQA"]["difference"] == pytest.approx(50.0) and out["MedQA"]["num_items"] == 2


def test_evaluate_tiny_model_end_to_end(tmp_path):
  cfg = _tiny()
  record_config(cfg, str(tmp_path), resumed_at=None)   # what train.py writes
  (tmp_path / "metrics.jsonl").write_text(
      json.dumps({"step": 0, "reward": 0.25, "time": {"rollout_s": 1.0}}) + "\n")
  with pytest.raises(DataError, match="MedQA: no file at"):
    evaluate.run(cfg, str(tmp_path), checkpoint="initial", heldout=False,
                 bench_paths={"medqa": str(tmp_path / "missing.jsonl")})
  result = evaluate.run(cfg, str(tmp_path), checkpoint="latest", heldout_limit=2,
                        bench_paths={"medqa": os.path.join(FIX, "eval_medqa.jsonl"),
                                     "ifbench": os.path.join(FIX, "eval_ifbench.jsonl")})
  assert result["step"] == 0 and result["heldout"]["num_items"] + \
      result["heldout"]["invalid"] == 2 and result["heldout"]["limit"] == 2
  assert result["ood"]["MedQA"]["num_items"] == 3
  assert 0.0 <= result["ood"]["MedQA"]["score"] <= 100.0
  assert result["ood"]["IFBench"]["num_items"] == 2
  saved = json.loads((tmp_path / "eval_step0.json").read_text())
  assert saved["ood"]["MedQA"]["items"] == result["ood"]["MedQA"]["items"]
  again = evaluate.run(cfg, str(tmp_path), heldout=False, bench_paths={
      "rolebench": os.path.join(FIX, "eval_rolebench.jsonl")})
  merged = json.loads((tmp_path / "eval_step0.json").read_text())
  assert set(merged["ood"]) == {"MedQA", "IFBench", "RoleBench", "ood_mean"}
  assert merged["heldout"]["items"] == result["heldout"]["items"]   # kept from the first
  assert again["ood"]["RoleBench"]["num_items"] == 2
  text = (tmp_path / "report.md").read_text()
  assert "MedQA" in text and (tmp_path / "reward_heldout.png").exists()
