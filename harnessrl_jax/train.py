"""`python -m harnessrl_jax.train --config=configs/NAME.py --workdir=DIR`: the main job.

One step (loop.py): draw tasks x ~ Cat(p_t) with their importance weights u = 1 / (N p)
-> render prompts with mounted guidance -> J rollouts each -> judge -> rubric rewards ->
group advantages -> GRPO update -> evolver (attributor, proposer, JIT critic; it writes
memory) -> H_{t+1}. The held-out tasks are scored under their unchanged seed rubrics,
without guidance and greedily, at the start, every train.eval_every steps and at the end.

Everything a run writes goes under --workdir:
  config.json               the config and its digest (another config is refused)
  checkpoints/, memory/     Orbax checkpoints and the memory at each (checkpoint.py)
  harness_history.jsonl     every applied harness operation (harness/history.py)
  evolver_candidates.jsonl  every measured candidate, accepted or not
  metrics.jsonl, tb/        one row per step; TensorBoard scalars
  oracle_groups.jsonl       the groups (task, J responses, rewards) of every
                            train.oracle_groups_every-th step, for
                            `python -m harnessrl_jax.evaluate --groups=...` (eval/oracle.py)
  summary.json              held-out reward at start and end, update counts, cost split
  report.md, *.png          the run's report (eval/report.py)
Rerunning with the same workdir resumes from the last complete checkpoint; what the
interrupted run wrote after it is dropped, and on CPU the resumed run ends bit-identical
to an uninterrupted one (tests/test_train_resume.py).

Several processes (hosts) form one run with --coordinator_address, --num_processes and
--process_id, or the environment distributed.py reads (docs/multihost.md): every process
runs this driver over one mesh, they refuse to start unless config, code and libraries
agree, all of them save the Orbax checkpoints together, and only process 0 writes the
run's other files and prints its progress.
"""

from __future__ import annotations

import hashlib
import json
import logging as std_logging
import math
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from absl import flags, logging
from flax import nnx
from ml_collections import config_flags

from harnessrl_jax import cli, distributed, harness, loop, metrics
from harnessrl_jax.checkpoint import (RunCheckpoints, config_text, guard_config,
                                      restore_target, run_key_of, state_tree)
from harnessrl_jax.data.loader import load_tasks
from harnessrl_jax.data.schema import Task
from harnessrl_jax.errors import ConfigError, DataError, HarnessError
from harnessrl_jax.eval import report
from harnessrl_jax.harness.history import HistoryLog, apply_logged, read_history, replay
from harnessrl_jax.harness.ops import SetLadder
from harnessrl_jax.judges.factory import make_judge
from harnessrl_jax.models.loading import load_model
from harnessrl_jax.rl import mesh as rl_mesh
from harnessrl_jax.rl.train_state import make_optimizer
from harnessrl_jax.rl.train_step import (StepConfig, build_step, decoder_forward,
                                         make_logprob_fn)
from harnessrl_jax.rollout import Sampler

HISTORY = "harness_history.jsonl"
CANDIDATES = "evolver_candidates.jsonl"
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def resolve(path: str) -> str:
  """Config paths are relative to the repository root unless absolute."""
  path = os.path.expanduser(path)
  return path if os.path.isabs(path) else os.path.join(REPO_ROOT, path)


# ---- refusals before any training


def load_split(path: str, domains: Sequence[str], field: str) -> tuple[Task, ...]:
  full = resolve(path)
  if not os.path.isfile(full):
    raise ConfigError(f"config.data.{field} = {path!r}: no such file ({full}); point it at "
                      "a task JSONL file (the bundled data is data/train.jsonl and "
                      "data/heldout.jsonl)")
  tasks = load_tasks(full)
  if domains:
    tasks = tuple(t for t in tasks if t.domain in domains)
  if not tasks:
    raise ConfigError(f"config.data.{field} = {path!r} holds no tasks for data.domains = "
                      f"{tuple(domains) or 'any'}: check the file or config.data.domains")
  return tasks


def interleave_domains(tasks: Sequence[Task]) -> tuple[Task, ...]:
  """Tasks round-robin over their domains (each domain in file order), so that a held-out
  subset of N covers every domain rather than the file's first one."""
  by_domain: dict[str, list[Task]] = {}
  for t in tasks:
    by_domain.setdefault(t.domain, []).append(t)
  queues = list(by_domain.values())
  out = []
  for i in range(max(len(q) for q in queues)):
    out.extend(q[i] for q in queues if i < len(q))
  return tuple(out)


def check_mesh(mesh_cfg):
  """The learner's mesh, None for a single device; it must fit the devices there are, and
  on several processes span all of them (each process feeds its own devices' rows)."""
  sizes = {a: int(mesh_cfg.get(a, 1)) for a in ("data", "fsdp", "tensor")}
  fixed = math.prod(s for s in sizes.values() if s > 0)
  have = jax.device_count()
  if fixed > have:
    raise ConfigError(f"config.rl.mesh = {sizes} needs {fixed} devices but this run sees "
                      f"{have} ({jax.devices()[0].platform}): lower config.rl.mesh.data / "
                      "fsdp / tensor (or set one of them to -1 to use what is there)")
  if -1 not in sizes.values() and jax.process_count() > 1 and fixed != have:
    raise ConfigError(f"config.rl.mesh = {sizes} uses {fixed} of the {have} devices of "
                      f"{jax.process_count()} processes: a run on several processes needs a "
                      "mesh over every device; set one axis to -1 (e.g. "
                      "--config.rl.mesh.fsdp=-1)")
  if -1 not in sizes.values():
    # A fully sized mesh uses that many devices (the first ones), one device none at all.
    return rl_mesh.mesh_from_config(mesh_cfg, jax.devices()[:fixed]) if fixed > 1 else None
  mesh = rl_mesh.mesh_from_config(mesh_cfg)   # ConfigError on sizes that do not divide
  return mesh if mesh.size > 1 else None


def check_batch(cfg, mesh) -> None:
  rows = int(cfg.rl.tasks_per_step) * int(cfg.rollout.num_samples)
  split = 1 if mesh is None else int(mesh.shape["data"]) * int(mesh.shape["fsdp"])
  if rows % split:
    raise ConfigError(f"config.rl.tasks_per_step x rollout.num_samples = {rows} rows do not "
                      f"split over the mesh's data x fsdp = {split} devices: make it a "
                      "multiple")


def _probe(url: str, what: str, timeout_s: float) -> None:
  try:
    urllib.request.urlopen(url, timeout=timeout_s).close()
  except urllib.error.HTTPError:
    return  # the server answered (404 / 401 are fine: it is up)
  except (urllib.error.URLError, OSError) as e:
    raise ConfigError(f"{what}: cannot reach {url} ({getattr(e, 'reason', e)}); start the "
                      "server first, fix the address, or set judge.backend = 'program' / "
                      "'local'") from None


def check_judge(judge_cfg, *, timeout_s: float = 5.0) -> None:
  """A remote judge must answer at start-up, not after the first rollouts."""
  backend = judge_cfg.llm_backend if judge_cfg.backend == "hybrid" else judge_cfg.backend
  if backend == "openai":
    if not judge_cfg.openai.model:
      raise ConfigError("judge.openai.model is empty: name the served model")
    _probe(judge_cfg.openai.base_url.rstrip("/") + "/models",
           f"judge.openai.base_url = {judge_cfg.openai.base_url!r}", timeout_s)
  elif backend == "jetstream":
    import socket  # pylint: disable=g-import-not-at-top
    host, _, port = judge_cfg.jetstream.address.rpartition(":")
    try:
      socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)),
                               timeout=timeout_s).close()
    except (OSError, ValueError) as e:
      raise ConfigError(f"judge.jetstream.address = {judge_cfg.jetstream.address!r}: cannot "
                        f"connect ({e}); start `python -m harnessrl_jax.serve` first or fix "
                        "the address") from None


def preflight(cfg) -> tuple[tuple[Task, ...], tuple[Task, ...]]:
  """Everything that can be refused before a model is loaded; returns (train, held-out)."""
  domains = tuple(cfg.data.domains)
  try:
    train = load_split(cfg.data.train, domains, "train")
    heldout = load_split(cfg.data.heldout, domains, "heldout")
  except DataError as e:
    raise ConfigError(f"config.data: the task files do not load:\n{e}") from None
  n_eval = int(cfg.train.eval_tasks)
  if n_eval > 0:
    heldout = interleave_domains(heldout)[:n_eval]
  if int(cfg.train.steps) < 1:
    raise ConfigError(f"config.train.steps = {cfg.train.steps}: must be >= 1")
  check_batch(cfg, check_mesh(cfg.rl.mesh))
  check_judge(cfg.judge)
  if cfg.evolver.async_evolver:
    raise ConfigError("evolver.async_evolver = True: the training driver runs the evolver "
                      "synchronously (exact resume needs H_{t+1} before step t+1); set it "
                      "to False")
  return train, heldout


# ---- building the run's pieces


def build_evolve(cfg, workdir: str, *, judge, graphdef, prompt_builder):
  """(evolve function, memory or None, calibration ops to apply to H_0)."""
  ev = cfg.evolver
  if not ev.enabled:
    return loop.static_evolve, None, ()
  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.ablations import RouteFilter, UncheckedCritic
  from harnessrl_jax.evolver import build_evolver, calibration_of
  from harnessrl_jax.evolver.measure import PolicySampler
  from harnessrl_jax.memory import Memory, embedder_from_config
  # pylint: enable=g-import-not-at-top
  cal = calibration_of(ev)
  setup_ops = () if cal is None else (SetLadder(tuple(float(x) for x in cal.ladder)),)
  primary = distributed.is_primary()   # the others evolve alike but log nothing
  evolver = build_evolver(
      cfg, judge=judge, resample=None,
      history_log=HistoryLog(os.path.join(workdir, HISTORY)) if primary else None,
      candidate_log=os.path.join(workdir, CANDIDATES) if primary else None)
  ab = cfg.ablation
  if not ab.critic:
    evolver.critic = UncheckedCritic(judge, None, ev, bands=evolver.critic.bands)
  if set(ab.routes) != {"rubric", "guidance", "sampling"}:
    evolver.proposer = RouteFilter(evolver.proposer, ab.routes)
  law = loop.sampling_params(cfg.rollout)
  buckets = tuple(int(b) for b in cfg.rollout.prompt_buckets)
  evolve = loop.make_evolve(
      evolver, lambda params: PolicySampler(graphdef, params, prompt_builder, law, buckets))
  memory = Memory(cfg.memory, embedder_from_config(cfg.memory)) if ab.memory else None
  return evolve, memory, setup_ops


def params_sha256(params) -> str:
  """SHA-256 of the leaves' bytes; on several processes give it `distributed.to_host`'s
  copies (np.asarray fails on an array with shards on other hosts)."""
  m = hashlib.sha256()
  for leaf in jax.tree.leaves(params):
    m.update(np.ascontiguousarray(np.asarray(leaf)).tobytes())
  return m.hexdigest()


def _json_safe(obj):
  if isinstance(obj, float) and not math.isfinite(obj):
    return None
  if isinstance(obj, dict):
    return {k: _json_safe(v) for k, v in obj.items()}
  if isinstance(obj, (list, tuple)):
    return [_json_safe(v) for v in obj]
  return obj


def say(text: str) -> None:
  """A line on the terminal, from process 0 only."""
  if distributed.is_primary():
    print(text, flush=True)


def fresh_start(workdir: str, h0, setup_ops, history_log) -> tuple[Any, int]:
  """A run without a complete checkpoint starts over: logs of an earlier attempt go (on
  process 0, the one that writes them), the calibration's ops are applied to H_0 (logged
  to `history_log` unless None). Returns (harness, history length)."""
  if distributed.is_primary():
    for name in (HISTORY, CANDIDATES, metrics.GROUPS, metrics.METRICS):
      if os.path.exists(os.path.join(workdir, name)):
        os.remove(os.path.join(workdir, name))
  h = h0
  for op in setup_ops:
    h, _ = apply_logged(h, op, step=0, log=history_log, measurement={"source": "calibration"})
  return h, len(setup_ops)


def resume(ckpts: RunCheckpoints, step: int, state, run_key, h0, workdir: str):
  """(state, run key, harness, meta) at checkpoint `step`; what the interrupted run wrote
  after it (history, metrics, group and candidate lines) is dropped by process 0 before
  any process reads the history. The harness is H_0 replayed through the checkpoint's
  share of the history and must match the checkpoint's digest."""
  restored, meta = ckpts.restore(step, restore_target(state_tree(state, run_key)))
  state = state.replace(params=restored["params"], opt_state=restored["opt_state"],
                        step=restored["step"], skipped_steps=restored["skipped_steps"])
  history_path = os.path.join(workdir, HISTORY)
  n, first = int(meta["history_len"]), int(meta["step"])
  if distributed.is_primary():
    metrics.truncate_lines(history_path, n)
  distributed.barrier("history_truncated")
  h = replay(h0, read_history(history_path) if n else [], source=history_path)
  if harness.digest(h) != meta["harness_digest"]:
    raise HarnessError(f"{workdir}: the harness replayed from {HISTORY} does not match "
                       f"checkpoint {step}; run `python -m harnessrl_jax.audit {workdir}`")
  if distributed.is_primary():
    for name in (metrics.METRICS, metrics.GROUPS, CANDIDATES):
      metrics.truncate_jsonl(os.path.join(workdir, name), lambda r: r["step"] < first)
  return state, run_key_of(restored), h, meta


def run(cfg, workdir: str) -> dict[str, Any]:
  """Trains (or resumes) the run in `workdir`; returns its summary. On several processes
  every process calls this (after `distributed.initialize`) and gets the same summary."""
  workdir = os.path.abspath(workdir)
  # A collective: every process must pass it, so it comes before any refusal of one.
  distributed.check_consistent(distributed.run_digests(config_text(cfg)))
  primary = distributed.is_primary()
  guard_config(cfg, workdir)
  train_tasks, heldout_tasks = preflight(cfg)
  total_steps = int(cfg.train.steps)

  start = time.perf_counter()
  loaded = load_model(cfg.model)
  graphdef, params = nnx.split(loaded.model)
  pb = loaded.prompt_builder
  say(f"model {cfg.model.source} loaded in {time.perf_counter() - start:.1f}s")
  judge_loaded = loaded if cfg.judge.model.to_dict() == cfg.model.to_dict() else None
  judge = make_judge(cfg.judge, loaded=judge_loaded)
  mesh = check_mesh(cfg.rl.mesh)
  sampler = Sampler.from_config(graphdef, cfg.rollout, pad_id=pb.pad_id,
                                eos_token_ids=pb.eos_token_ids, mesh=mesh)
  h0 = harness.from_tasks(train_tasks, cfg.harness)
  evolve, memory, setup_ops = build_evolve(cfg, workdir, judge=judge, graphdef=graphdef,
                                           prompt_builder=pb)
  tx = make_optimizer(cfg.rl)
  # The reference policy is a frozen copy of the initial policy, rebuilt (not restored) on
  # resume; init_state gives it its own buffers, as train_step donates the state's.
  state, shardings = rl_mesh.init_state(params, tx, mesh,
                                        ref_params=params if cfg.rl.beta > 0 else None)
  _, train_step = build_step(decoder_forward(graphdef), cfg.rl, mesh=mesh,
                             state_sharding=shardings)
  logprob_fn = make_logprob_fn(decoder_forward(graphdef), StepConfig.from_config(cfg.rl),
                               mesh=mesh)
  learner = loop.Learner(train_tasks, pb, sampler, judge, train_step, logprob_fn,
                         int(cfg.rl.tasks_per_step), int(cfg.rollout.num_samples),
                         int(cfg.rl.num_epochs), cfg.rollout, cfg.rl, mesh)

  ckpts = RunCheckpoints(workdir, int(cfg.train.keep_checkpoints))
  history_log = HistoryLog(os.path.join(workdir, HISTORY)) if primary else None
  run_key = jax.random.key(cfg.seed)
  latest = ckpts.latest()
  if latest is None:
    h, history_len = fresh_start(workdir, h0, setup_ops, history_log)
    first, summary = 0, None
    if memory is not None:
      memory.sync_rubrics(h)
  else:
    state, run_key, h, meta = resume(ckpts, latest, state, run_key, h0, workdir)
    first, history_len, summary = int(meta["step"]), int(meta["history_len"]), meta["summary"]
    if memory is not None:
      memory = type(memory).load(ckpts.memory_dir(latest), cfg.memory, memory.embedder)
    say(f"resumed {workdir} from checkpoint {latest} (harness "
        f"{meta['harness_digest'][:12]})")
  eval_kw = dict(sampler=sampler, prompt_builder=pb, judge=judge, rollout_cfg=cfg.rollout,
                 key=jax.random.fold_in(run_key, -1 & 0x7FFFFFFF))
  if summary is None:   # a fresh start: the held-out reward before any update
    summary = metrics.new_summary(loop.evaluate(heldout_tasks, params=state.params,
                                                **eval_kw))
    say(f"held-out seed-rubric reward at start: {summary['heldout_start']['reward']}")

  writer = metrics.MetricsWriter(workdir) if primary else None
  log_every, eval_every = int(cfg.train.log_every), int(cfg.train.eval_every)
  ckpt_every = int(cfg.train.checkpoint_every)
  for step in range(first, total_steps):
    op = loop.schedule_op(h, step, total_steps)
    if op is not None:
      h, _ = apply_logged(h, op, step=step, log=history_log,
                          measurement={"source": "guidance schedule"})
      history_len += 1
    draw_key, roll_key, evolve_key = loop.step_keys(run_key, step)
    state, rec = loop.rl_step(learner, state, h, step, draw_key, roll_key)
    mounted = np.asarray(h.guidance_mask)[list(rec.task_indices)]   # H_t's, as drawn
    t0 = time.perf_counter()
    h, elog = evolve(h, memory, rec, params=state.params, key=evolve_key)
    evolver_s = time.perf_counter() - t0
    history_len += elog.history_records

    summary = metrics.accumulate(summary, rec, elog, evolver_s)
    row = metrics.step_row(rec, elog, evolver_s, mounted)
    heldout = None
    if eval_every and (step + 1) % eval_every == 0 and step + 1 < total_steps:
      heldout = loop.evaluate(heldout_tasks, params=state.params, **eval_kw)
      summary["heldout_evals"].append({"step": step + 1, "reward": heldout["reward"]})
      row["heldout_reward"] = heldout["reward"]
    if step + 1 == total_steps:
      heldout = loop.evaluate(heldout_tasks, params=state.params, **eval_kw)
      summary["heldout_end"] = heldout
      row["heldout_reward"] = heldout["reward"]
    # The row goes out before the checkpoint that covers it: a kill in between resumes
    # from the previous checkpoint, which drops the row and writes it again.
    if writer is not None:
      every = int(cfg.train.oracle_groups_every)
      groups = metrics.group_rows(rec) if every and step % every == 0 else ()
      writer.write(_json_safe(row), groups=groups)
    if (step + 1) % ckpt_every == 0 or step + 1 == total_steps or heldout is not None:
      t1 = time.perf_counter()
      meta = {"step": step + 1, "history_len": history_len,
              "harness_digest": harness.digest(h), "harness": harness.canonical(h),
              "last_draw": list(rec.task_indices), "summary": _json_safe(summary)}
      ckpts.save(step + 1, state_tree(state, run_key), meta, memory=memory,
                 heldout_reward=None if heldout is None else heldout["reward"])
      row["time"]["checkpoint_s"] = time.perf_counter() - t1
    if step % log_every == 0 or step + 1 == total_steps:
      say(metrics.progress_line(row, total_steps))

  summary["steps"] = total_steps
  summary["skipped_updates"] = int(state.skipped_steps)
  summary["harness_digest"] = harness.digest(h)
  summary["params_sha256"] = params_sha256(distributed.to_host(state.params))
  summary["best_checkpoint"] = ckpts.best()
  summary = _json_safe(summary)
  ckpts.close()
  if jax.process_count() > 1:   # each process's end state, to compare across the logs
    print(f"process {jax.process_index()}/{jax.process_count()} done: harness "
          f"{summary['harness_digest']} params_sha256 {summary['params_sha256']}", flush=True)
  if not primary:
    return summary
  with open(os.path.join(workdir, "summary.json"), "w", encoding="utf-8") as f:
    json.dump(summary, f, indent=2, sort_keys=True)
  print(metrics.summary_table(summary), flush=True)
  print(f"({workdir}/summary.json)", flush=True)
  print(f"report: {report.write_report(workdir)}", flush=True)
  return summary


_CONFIG = config_flags.DEFINE_config_file("config", None, "Experiment config file.",
                                          lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Where the run writes everything.")
distributed.define_flags()


def main(argv):
  del argv
  if _WORKDIR.value is None:
    raise ConfigError("--workdir is required: the directory the run writes into")
  if not flags.FLAGS["verbosity"].present:
    # Orbax and JAX log every save at INFO; the driver prints its own progress lines.
    logging.set_verbosity(logging.WARNING)
    # Orbax warns at every save without a held-out reward; only evaluated steps have one.
    std_logging.getLogger("absl").addFilter(
        lambda record: "did not provide metrics" not in record.getMessage())
  try:
    spec = distributed.initialize_from_flags()   # before the first array (no-op alone)
    if spec.multi:
      print(f"process {jax.process_index()}/{jax.process_count()} joined ({spec.source}): "
            f"{jax.local_device_count()} local of {jax.device_count()} devices", flush=True)
    run(_CONFIG.value, _WORKDIR.value)
  except HarnessError as e:   # a cause the user can fix: one message, no traceback
    print(f"error: {e}", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
  cli.run(main)
