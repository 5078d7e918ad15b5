"""`python -m harnessrl_jax.eval --run=RUN_DIR [--checkpoint=STEP] [benchmark paths]`.

Evaluates one checkpoint of a run and renders the run's report (docs/evaluation.md):
  1. config: RUN_DIR/config.json (written by train.py); --config=FILE where there is none;
  2. policy: the checkpoint --checkpoint names ("latest", the default, or a step number)
     from RUN_DIR/checkpoints/; "initial", or a run without checkpoints, uses the config's
     model as loaded;
  3. held-out: config.data.heldout under the unchanged seed rubrics, greedy, no guidance;
  4. OOD: each benchmark whose local file is given (--medqa, --gpqa, --rolebench,
     --ifbench, --ifeval, --writingbench); WritingBench goes through the config's judge;
  5. oracle (optional): --groups=LOGGED_GROUPS.jsonl is compared pairwise by the
     --oracle_backend client (default: the judge's LLM backend; --oracle_model and
     --oracle_base_url swap in another OpenAI-compatible model); per-step shares go to
     RUN_DIR/oracle.jsonl;
  6. comparison (optional): --compare=OTHER_EVAL.json gives paired bootstrap intervals and
     permutation p-values per benchmark over the items both evaluations share;
  7. writes RUN_DIR/eval_step<STEP>.json (or --out; an existing file of the same step is
     updated, newest result per benchmark) and RUN_DIR/report.md with its plots.
"""

from __future__ import annotations

import json
import os
from typing import Any

import jax
import ml_collections
import numpy as np
from absl import flags
from ml_collections import config_flags

from harnessrl_jax import run_files
from harnessrl_jax.config import base_config, validate
from harnessrl_jax.data.splits import load_split
from harnessrl_jax.errors import ConfigError
from harnessrl_jax.eval import heldout as heldout_score
from harnessrl_jax.eval import oracle, protocols, report, stats
from harnessrl_jax.eval.common import FLAGS as BENCH_FLAGS
from harnessrl_jax.eval.common import require_file
from harnessrl_jax.run.identity import as_current_tree

def _merge(cfg: ml_collections.ConfigDict, values: dict[str, Any]) -> None:
  """Sets stored values into cfg (lists become tuples where cfg holds a tuple)."""
  for k, v in values.items():
    if isinstance(v, dict):
      if k not in cfg:
        cfg[k] = ml_collections.ConfigDict()
      _merge(cfg[k], v)
    elif isinstance(v, list) and isinstance(cfg.get(k), tuple):
      cfg[k] = tuple(v)
    else:
      cfg[k] = v


def load_run_config(run_dir: str, fallback=None) -> ml_collections.ConfigDict:
  """The run's stored config (RUN_DIR/config.json over the defaults), else `fallback`."""
  path = os.path.join(run_dir, run_files.CONFIG)
  if not os.path.isfile(path):
    if fallback is None:
      raise ConfigError(f"{path}: not found; pass --config=FILE for a run without a stored "
                        "config")
    return fallback
  with open(path, encoding="utf-8") as f:
    stored = json.load(f)
  cfg = base_config()
  with cfg.unlocked():
    # a run recorded before a field left or joined the tree loads in today's fields
    # (run/identity.py)
    _merge(cfg, as_current_tree(stored.get(run_files.CONFIG_TREE, stored)))
  return cfg


def checkpoint_step(run_dir: str, which: str) -> int | None:
  """The checkpoint step to load, or None for the config's model."""
  if which == "initial" or not os.path.isdir(os.path.join(run_dir, run_files.CHECKPOINTS)):
    if which not in ("initial", "latest"):
      raise ConfigError(f"--checkpoint={which}: {run_dir}/checkpoints does not exist")
    return None
  from harnessrl_jax.run.checkpoint import RunCheckpoints  # pylint: disable=g-import-not-at-top
  ckpts = RunCheckpoints(run_dir)
  try:
    steps = ckpts.steps()
  finally:
    ckpts.close()
  if which == "latest":
    return steps[-1] if steps else None
  if not which.isdigit() or int(which) not in steps:
    raise ConfigError(f"--checkpoint={which}: {run_dir}/checkpoints holds steps {steps}")
  return int(which)


def load_policy(cfg, run_dir: str, step: int | None):
  """(loaded model, params): the config's model, with a checkpoint's params if `step`."""
  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.models.loading import load_model_split
  loaded, graphdef, params = load_model_split(cfg.model)
  if step is None:
    return loaded, params
  from harnessrl_jax.run.checkpoint import RunCheckpoints, restore_target, state_tree
  from harnessrl_jax.rl.train_state import create_train_state
  from harnessrl_jax.rl.train_step import build_step, decoder_forward
  tx, _ = build_step(decoder_forward(graphdef), cfg.rl, temperature=cfg.rollout.temperature)
  state = create_train_state(params, tx, ref_params=None)
  # This process's own (single-device) shardings: the checkpoint's may name devices of a
  # multi-process run that are not here.
  abstract = restore_target(state_tree(state, jax.random.key(0)))
  ckpts = RunCheckpoints(run_dir)
  try:
    restored, _ = ckpts.restore(step, abstract)
  finally:
    ckpts.close()
  return loaded, restored["params"]


def make_generate(loaded, params, rollout_cfg, *, key: jax.Array, batch_size: int):
  """generate(conversations) -> greedy responses, `batch_size` prompts per sampler call."""
  # pylint: disable=g-import-not-at-top
  from flax import nnx
  from harnessrl_jax.rollout import SamplingParams
  from harnessrl_jax.rollout.config import RolloutConfig
  from harnessrl_jax.rollout.texts import TextSampler
  # pylint: enable=g-import-not-at-top
  graphdef, _ = nnx.split(loaded.model)
  texts = TextSampler.from_config(graphdef, loaded.prompt_builder, rollout_cfg)
  greedy = SamplingParams.from_config(rollout_cfg, temperature=0.0)
  return texts.generate_fn(params, greedy, key, batch_size=batch_size,
                           pad_multiple=RolloutConfig.from_config(rollout_cfg).eval_pad_multiple)


def oracle_config(judge_cfg, model: str, base_url: str):
  """The judge section with the oracle's OpenAI-compatible model and server swapped in: the
  oracle should be a stronger model than the judge (paper: a different model family). A
  server given here replaces the judge's pool (judge.endpoints) too."""
  cfg = judge_cfg.copy_and_resolve_references()
  with cfg.unlocked():
    if model:
      cfg.openai.model = model
    if base_url:
      cfg.openai.base_url = base_url
      cfg.endpoints = ()
  return cfg


def compare_evals(a: dict, b: dict, *, seed: int = 0, num_resamples: int = 10_000) -> dict:
  """Per benchmark present in both: paired stats over the shared item ids (a minus b)."""
  def benches(e):
    out = {"heldout": e["heldout"]} if e.get("heldout") else {}
    out.update({k: v for k, v in (e.get("ood") or {}).items() if isinstance(v, dict)})
    return out
  ea, eb, out = benches(a), benches(b), {}
  for name in sorted(set(ea) & set(eb)):
    ids = sorted(set(ea[name].get("items", {})) & set(eb[name].get("items", {})))
    if len(ids) >= 2:
      xa = np.array([ea[name]["items"][i] for i in ids])
      xb = np.array([eb[name]["items"][i] for i in ids])
      out[name] = stats.compare(xa, xb, seed=seed, num_resamples=num_resamples)
  return out


def run(cfg, run_dir: str, *, checkpoint: str = "latest", bench_paths: dict[str, str],
        heldout: bool = True, heldout_limit: int = 0, batch_size: int = 16,
        gpqa_seed: int = 0, groups: str = "", oracle_backend: str = "",
        oracle_max_tokens: int = 256, oracle_model: str = "", oracle_base_url: str = "",
        compare: str = "", out: str = "") -> dict:
  """Evaluates one checkpoint; returns what it writes to the evaluation JSON."""
  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.judges.factory import make_client, make_run_judge
  os.makedirs(run_dir, exist_ok=True)
  for bench, name in BENCH_FLAGS.items():  # fail before minutes of model loading
    if bench_paths.get(name):
      require_file(bench, bench_paths[name])
  step = checkpoint_step(run_dir, checkpoint)
  result: dict[str, Any] = {"run": os.path.abspath(run_dir), "checkpoint": checkpoint,
                            "step": 0 if step is None else step}
  need_policy = heldout or any(bench_paths.values())
  judge = None
  if need_policy:
    loaded, params = load_policy(cfg, run_dir, step)
    if heldout or bench_paths.get("writingbench"):
      judge = make_run_judge(cfg, loaded)
    generate = make_generate(loaded, params, cfg.rollout, batch_size=batch_size,
                             key=jax.random.key(int(cfg.seed)))
    if heldout:
      tasks = load_split(cfg.data.heldout, tuple(cfg.data.domains), field="heldout")
      result["heldout"] = heldout_score.evaluate(tasks[:heldout_limit or None], generate, judge)
      if 0 < heldout_limit < len(tasks):
        result["heldout"]["limit"] = heldout_limit   # a subset: the report does not plot it
    result["ood"] = protocols.run_ood(bench_paths, generate, judge, seed=gpqa_seed)
  if groups:
    client = make_client(oracle_config(cfg.judge, oracle_model, oracle_base_url),
                         oracle_backend or None)
    try:
      analysis = oracle.analyze(oracle.read_groups(groups), client,
                                max_tokens=oracle_max_tokens)
    finally:
      client.close()
    oracle.write_rows(os.path.join(run_dir, run_files.ORACLE), analysis["by_step"])
    result["oracle"] = analysis["overall"]
  if compare:
    with open(compare, encoding="utf-8") as f:
      result["comparison"] = {"against": compare,
                              "results": compare_evals(result, json.load(f))}
  path = out or os.path.join(run_dir, run_files.eval_file(result["step"]))
  if os.path.isfile(path):   # evaluations of the same step add up, newest per benchmark
    with open(path, encoding="utf-8") as f:
      old = json.load(f)
    ood = {**(old.get("ood") or {}), **result.get("ood", {})}
    result = {**old, **result, "ood": ood}
    if ood:
      scores = [v["score"] for v in ood.values() if isinstance(v, dict) and
                np.isfinite(v.get("score", np.nan))]
      ood["ood_mean"] = float(np.mean(scores)) if scores else float("nan")
  with open(path, "w", encoding="utf-8") as f:
    json.dump(result, f, indent=1, sort_keys=True, allow_nan=True)
  result["report"] = report.write_report(run_dir)
  return result


def define_flags() -> dict[str, Any]:
  """The CLI's flags; defined only when run as a program, so that importing this module
  (the training driver, tests) never collides with another entry point's --config."""
  f = {
      "run": flags.DEFINE_string("run", None, "The run directory (train.py's --workdir).",
                                 required=True),
      "checkpoint": flags.DEFINE_string(
          "checkpoint", "latest", "'latest', a step number, or 'initial' (the config's model)."),
      "config": config_flags.DEFINE_config_file(
          "config", None, "Config file, for runs without RUN_DIR/config.json.",
          lock_config=False),
      "gpqa_seed": flags.DEFINE_integer("gpqa_seed", 0, "Seed of GPQA's option shuffle."),
      "heldout": flags.DEFINE_bool("heldout", True, "Score the held-out split."),
      "heldout_limit": flags.DEFINE_integer("heldout_limit", 0,
                                            "Only the first N held-out tasks (0: all)."),
      "batch_size": flags.DEFINE_integer("batch_size", 16, "Prompts per generation call."),
      "groups": flags.DEFINE_string("groups", "", "Logged groups JSONL for the oracle analysis."),
      "oracle_backend": flags.DEFINE_string(
          "oracle_backend", "", "LLM backend of the oracle ('local', 'jetstream', 'openai'; "
          "'' = the judge's)."),
      "oracle_max_tokens": flags.DEFINE_integer("oracle_max_tokens", 256,
                                                "Oracle answer length."),
      "oracle_model": flags.DEFINE_string("oracle_model", "", "Model name for an 'openai' "
                                          "oracle ('' = judge.openai.model)."),
      "oracle_base_url": flags.DEFINE_string("oracle_base_url", "", "Server of an 'openai' "
                                             "oracle ('' = judge.openai.base_url)."),
      "compare": flags.DEFINE_string("compare", "", "Another evaluation JSON to compare with."),
      "out": flags.DEFINE_string("out", "", "Where the evaluation JSON goes (default "
                                 "RUN_DIR/eval_step<STEP>.json)."),
  }
  bench = {name: flags.DEFINE_string(name, "", f"Local copy of {b} ('' skips it).")
           for b, name in BENCH_FLAGS.items()}
  return {"flags": f, "bench": bench}


def main(argv, defined):
  """Evaluates --run; cli.run makes a HarnessError one line."""
  del argv
  f = {k: v.value for k, v in defined["flags"].items()}
  cfg = load_run_config(f["run"], f["config"])
  validate(cfg)   # every field's type and value, before a model loads
  result = run(cfg, f["run"], checkpoint=f["checkpoint"],
               bench_paths={k: v.value for k, v in defined["bench"].items()},
               heldout=f["heldout"], heldout_limit=f["heldout_limit"],
               batch_size=f["batch_size"], gpqa_seed=f["gpqa_seed"], groups=f["groups"],
               oracle_backend=f["oracle_backend"],
               oracle_max_tokens=f["oracle_max_tokens"], oracle_model=f["oracle_model"],
               oracle_base_url=f["oracle_base_url"], compare=f["compare"], out=f["out"])
  scores = {"heldout": (result.get("heldout") or {}).get("score")}
  scores.update({k: v["score"] for k, v in (result.get("ood") or {}).items()
                 if isinstance(v, dict)})
  print(" | ".join(f"{k} {v:.2f}" for k, v in scores.items() if v is not None))
  for bench in ("IFBench", "IFEval"):
    official = ((result.get("ood") or {}).get(bench) or {}).get("official")
    if official:   # the benchmark's own evaluation: the numbers comparable with published ones
      print(f"{bench} official: " + (official["unavailable"] if "unavailable" in official else
            "  ".join(f"{mode} prompt {official[mode]['prompt_level']:.2f} instruction "
                      f"{official[mode]['instruction_level']:.2f}"
                      for mode in ("strict", "loose"))
            + (f"  (left out, no data here: {official['unscored']})"
               if "unscored" in official else "")))
  print(f"report: {result['report']}")

