"""`python -m harnessrl_jax.train --config=configs/NAME.py --workdir=DIR`: the main job.

One step (run/step.py): draw tasks x ~ Cat(p_t) with their importance weights u = 1 / (N p)
-> render prompts with mounted guidance -> J rollouts each -> judge -> rubric rewards ->
group advantages -> GRPO update -> evolver (attributor, proposer, JIT critic; it writes
memory) -> H_{t+1}. The held-out score (eval/heldout.py: seed rubrics, greedy, no
guidance; points 0-100, mean over domains) is taken at the start, every train.eval_every
steps and at the end.

The module reads top-down: `preflight` (every refusal before a model loads), `build_run`
(the run's constant parts, a frozen `Run`), `start` (a fresh start or a resume, as a
`Progress`), `train_loop` (one `step_fns.rl_step` and one evolver step per step; `due` says when
to evaluate, checkpoint, log) and `finish` (summary and report).

Everything a run writes goes under --workdir (run_files.WORKDIR_FILES; "audit" says how
`python -m harnessrl_jax.audit` covers each):
{workdir_files}
--workdir is checked before any model loads: a file, a path under a file, a directory
this process cannot write, or the workdir of a run with another experiment is refused in
one line. With --audit_key_file (or the file the environment variable
HARNESSRL_AUDIT_KEY_FILE names) every ledger entry is an HMAC under that key, so without
the key no rewrite of the run's records passes the audit (docs/operational.md, "Auditing a
run"); the key is never written into the workdir or the log.
Rerunning with the same workdir resumes from the last complete checkpoint; what the
interrupted run wrote after it is dropped, and on CPU the resumed run ends bit-identical
to an uninterrupted one (tests/run/test_train_resume.py).

Several processes (hosts) form one run with --coordinator_address, --num_processes and
--process_id, or the environment run/cluster.py reads (docs/multihost.md): every process
runs this driver over one mesh, they refuse to start unless config, code and libraries
agree, all of them save the Orbax checkpoints together, and only process 0 writes the
run's other files and prints its progress.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging as std_logging
import math
import os
import socket
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import httpx
import jax
import numpy as np
from absl import flags, logging
from ml_collections import config_flags

from harnessrl_jax import cli, harness, run_files, run_ledger
from harnessrl_jax.run.checkpoint import (RunCheckpoints, config_text, guard_config,
                                      record_config, restore_target, run_key_of,
                                      state_tree)
from harnessrl_jax.config import validate
from harnessrl_jax.data.schema import Task
from harnessrl_jax.data.splits import load_split
from harnessrl_jax.errors import ConfigError, DataError, HarnessError
from harnessrl_jax.eval import report
from harnessrl_jax.harness.history import (HistoryLog, apply_logged, head_of, read_history,
                                           replay)
from harnessrl_jax.harness.ops import SetLadder
from harnessrl_jax.harness.state import Harness
from harnessrl_jax.judges.config import REMOTE_BACKENDS, JudgeConfig
from harnessrl_jax.judges.factory import make_run_judge
from harnessrl_jax.models.loading import load_model_split
from harnessrl_jax.rl import mesh as rl_mesh
from harnessrl_jax.rl.config import RLConfig
from harnessrl_jax.rl.train_state import TrainState, make_optimizer
from harnessrl_jax.rl.train_step import (StepConfig, build_step, decoder_forward,
                                         make_logprob_fn, prompt_group_size)
from harnessrl_jax.rollout import SamplingParams
from harnessrl_jax.rollout.config import RolloutConfig
from harnessrl_jax.models import sharding
from harnessrl_jax.rollout.texts import TextSampler
from harnessrl_jax.run import cluster, metrics
from harnessrl_jax.run import step as step_fns
from harnessrl_jax.run.config import TrainConfig

__doc__ = __doc__.replace("{workdir_files}", run_files.workdir_listing())


def due(n: int, every: int, total: int) -> bool:
  """Whether an every-`every`-steps action falls after the n-th completed step (counted
  from 1) of a `total`-step run: after steps every, 2 every, ... and always after the last;
  `every` <= 0 means only after the last."""
  return n == total or (every > 0 and n % every == 0)


# ---- refusals before any model is loaded


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


def _probe(url: str, what: str, timeout_s: float) -> None:
  try:
    httpx.get(url, timeout=timeout_s)   # any status means it is up (404 / 401 are fine)
  except httpx.RequestError as e:
    raise ConfigError(f"{what}: cannot reach {url} ({type(e).__name__}: {e}); start the "
                      "server first, fix the address, or set judge.backend = 'program' / "
                      "'local'") from None


def check_judge(judge_cfg, *, timeout_s: float = 5.0) -> None:
  """A remote judge must answer at start-up, not after the first rollouts: every server of a
  pool too (the pool rides out one dying mid-run; at start-up a silent one is likelier a
  wrong address)."""
  j = JudgeConfig.from_config(judge_cfg, check=False)
  backend = j.text_backend
  if backend not in REMOTE_BACKENDS:
    return
  for address in j.addresses(backend):
    field = "judge.endpoints entry" if address in j.endpoints else {
        "openai": "judge.openai.base_url =", "jetstream": "judge.jetstream.address ="}[backend]
    if backend == "openai":
      _probe(address.rstrip("/") + "/models", f"{field} {address!r}", timeout_s)
      continue
    host, _, port = address.rpartition(":")
    try:
      socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)),
                               timeout=timeout_s).close()
    except (OSError, ValueError) as e:
      raise ConfigError(f"{field} {address!r}: cannot connect ({e}); start `python -m "
                        "harnessrl_jax.serve` first or fix the address") from None


def check_workdir(workdir: str) -> None:
  """Refuses a --workdir the run could not write into, before anything loads, changing
  nothing: an existing file, a path under a file, a directory this process cannot create
  or write. (Another experiment's run directory is `guard_config`'s refusal.)"""
  path = os.path.abspath(workdir)
  if os.path.exists(path) and not os.path.isdir(path):
    raise ConfigError(f"--workdir={workdir}: {path} is a file, not a directory; name a new "
                      "or existing directory")
  existing = path
  while not os.path.exists(existing):
    existing = os.path.dirname(existing)
  if not os.path.isdir(existing):
    raise ConfigError(f"--workdir={workdir}: {existing} is a file, so no directory can be "
                      f"made under it; name a directory elsewhere")
  if not os.access(existing, os.W_OK | os.X_OK):
    what = "the workdir" if existing == path else f"{existing}, where it would be made,"
    raise ConfigError(f"--workdir={workdir}: {what} is not writable by this process; "
                      "fix its permissions or name another directory")
  if existing != path:   # root passes os.access; a mount may still refuse (e.g. /proc)
    try:
      os.rmdir(tempfile.mkdtemp(prefix=".harnessrl_probe_", dir=existing))
    except OSError as e:
      raise ConfigError(f"--workdir={workdir}: no directory can be made in {existing} "
                        f"({e.strerror}); name a directory elsewhere") from None


def preflight(cfg) -> tuple[tuple[Task, ...], tuple[Task, ...]]:
  """Everything that can be refused before a model is loaded; returns (train, held-out)."""
  validate(cfg, device_count=jax.device_count(), process_count=jax.process_count())
  domains = tuple(cfg.data.domains)
  try:
    train = load_split(cfg.data.train, domains, field="train")
    heldout = load_split(cfg.data.heldout, domains, field="heldout")
  except DataError as e:
    raise ConfigError(f"config.data: the task files do not load:\n{e}") from None
  n_eval = TrainConfig.from_config(cfg.train).eval_tasks
  if n_eval > 0:
    heldout = interleave_domains(heldout)[:n_eval]
  check_judge(cfg.judge)
  return train, heldout


# ---- the run's constant parts


@dataclasses.dataclass(frozen=True)
class Run:
  """What a run is built from, once, before its first step (`build_run`)."""

  workdir: str
  train: TrainConfig              # config.train as a typed view
  heldout_tasks: tuple[Task, ...]
  learner: step_fns.Learner           # sampler, judge, update functions, sizes
  evolve: step_fns.Evolve             # H_t -> H_{t+1} (step_fns.static_evolve without an evolver)
  memory: Any                     # the fresh memory (memory.Memory) or None
  memory_config: Any              # config.memory, to load a checkpoint's memory
  h0: Harness                     # H_0 before the calibration's ops
  setup_ops: tuple                # the calibration's ops applied to H_0 on a fresh start
  initial_state: TrainState       # step 0's params and optimiser state, on the mesh
  state_shardings: Any
  run_key: jax.Array
  ckpts: RunCheckpoints
  history_log: HistoryLog         # the run's one log (it writes on process 0 only)
  writer: metrics.MetricsWriter | None

  @property
  def eval_key(self) -> jax.Array:
    return jax.random.fold_in(self.run_key, -1 & 0x7FFFFFFF)


def _evolver(cfg, workdir: str, *, judge, texts: TextSampler, sampling: SamplingParams,
             history_log: HistoryLog, train_tasks: Sequence[Task]):
  """(evolve function, fresh memory or None, calibration ops to apply to H_0)."""
  ev = cfg.evolver
  if not ev.enabled:
    return step_fns.static_evolve, None, ()
  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.evolver import build_evolver, calibration_of
  from harnessrl_jax.memory import Memory, embedder_from_config
  # pylint: enable=g-import-not-at-top
  cal = calibration_of(ev)
  setup_ops = () if cal is None else (SetLadder(tuple(float(x) for x in cal.ladder)),)
  primary = cluster.is_primary()   # the others evolve alike but log nothing
  evolver = build_evolver(
      cfg, judge=judge, history_log=history_log,
      candidate_log=os.path.join(workdir, run_files.CANDIDATES) if primary else None,
      attribution_log=os.path.join(workdir, run_files.ATTRIBUTIONS) if primary else None,
      tasks=train_tasks,
      prompt_tokens=lambda chat: len(texts.prompt_builder.encode_chat(chat)))
  memory = Memory(cfg.memory, embedder_from_config(cfg.memory)) if cfg.ablation.memory else None
  return step_fns.make_evolve(evolver, texts, sampling), memory, setup_ops


def build_run(cfg, workdir: str, train_tasks: Sequence[Task],
              heldout_tasks: Sequence[Task]) -> Run:
  """Loads the model and builds every constant part of the run."""
  start = time.perf_counter()
  loaded, graphdef, params = load_model_split(cfg.model)
  say(f"model {cfg.model.source} loaded in {time.perf_counter() - start:.1f}s")
  judge = make_run_judge(cfg, loaded)
  mesh = rl_mesh.mesh_for_devices(cfg.rl.mesh)
  texts = TextSampler.from_config(graphdef, loaded.prompt_builder, cfg.rollout, mesh=mesh)
  sampling = SamplingParams.from_config(cfg.rollout)
  # One log for the driver's ops and the evolver's, so the chain head is one value; every
  # process chains alike (the head goes into the checkpoint), process 0 alone writes.
  history_log = HistoryLog(os.path.join(workdir, run_files.HISTORY),
                           write=cluster.is_primary())
  evolve, memory, setup_ops = _evolver(cfg, workdir, judge=judge, texts=texts, sampling=sampling,
                                       history_log=history_log, train_tasks=train_tasks)
  tx = make_optimizer(cfg.rl)
  # The reference policy is a frozen copy of the initial policy, rebuilt (not restored) on
  # resume; init_state gives it its own buffers, as train_step donates the state's.
  state, shardings = rl_mesh.init_state(params, tx, mesh,
                                        ref_params=params if cfg.rl.beta > 0 else None)
  forward = decoder_forward(graphdef)
  group = prompt_group_size(cfg.rl, texts.sampler.num_samples, loaded.model, mesh)
  _, train_step = build_step(forward, cfg.rl, temperature=cfg.rollout.temperature, tx=tx,
                             mesh=mesh, state_sharding=shardings, group_size=group)
  rl = RLConfig.from_config(cfg.rl)
  learner = step_fns.Learner(
      train_tasks=tuple(train_tasks), texts=texts, judge=judge, train_step=train_step,
      logprob_fn=make_logprob_fn(forward, StepConfig.from_config(
          cfg.rl, group, temperature=cfg.rollout.temperature), mesh=mesh),
      sampling=sampling, tasks_per_step=rl.tasks_per_step, num_samples=texts.sampler.num_samples,
      num_epochs=rl.num_epochs, advantage=rl.advantage, eps_advantage=rl.eps_advantage,
      mesh=mesh, prompt_pad_multiple=rl.prompt_pad_multiple, prompt_group=group,
      eval_pad_multiple=RolloutConfig.from_config(cfg.rollout).eval_pad_multiple)
  train = TrainConfig.from_config(cfg.train)
  primary = cluster.is_primary()
  return Run(
      workdir=workdir, train=train, heldout_tasks=tuple(heldout_tasks), learner=learner,
      evolve=evolve, memory=memory, memory_config=cfg.memory,
      h0=harness.from_tasks(train_tasks, cfg.harness), setup_ops=setup_ops,
      initial_state=state, state_shardings=shardings, run_key=jax.random.key(cfg.seed),
      ckpts=RunCheckpoints(workdir, train.keep_checkpoints),
      history_log=history_log,
      writer=metrics.MetricsWriter(workdir) if primary else None)


# ---- a fresh start or a resume


@dataclasses.dataclass(frozen=True)
class Progress:
  """Where a run stands after `step` completed steps: what the loop carries."""

  step: int
  state: TrainState
  run_key: jax.Array
  harness: Harness
  memory: Any
  history_len: int                # lines of the harness history covering `harness`
  summary: dict[str, Any]         # metrics.new_summary ... (a value, replaced each step)


def fresh_start(run: Run) -> Progress:
  """A run without a complete checkpoint starts over: logs of an earlier attempt go (on
  process 0, the one that writes them), the calibration's ops are applied to H_0 (and
  logged), and the held-out score before any update is taken."""
  if cluster.is_primary():
    for name in (run_files.HISTORY, run_files.CANDIDATES, run_files.ATTRIBUTIONS,
                 run_files.GROUPS, run_files.METRICS, run_files.HELDOUT_RESPONSES):
      if os.path.exists(os.path.join(run.workdir, name)):
        os.remove(os.path.join(run.workdir, name))
    _ledger(run).start_over()
    run.writer.cut_back(0)   # and its TensorBoard scalars
  run.history_log.reset()
  h = run.h0
  for op in run.setup_ops:
    h, _ = apply_logged(h, op, step=0, log=run.history_log,
                        measurement={run_files.SOURCE: run_files.SOURCE_CALIBRATION})
  if run.memory is not None:
    run.memory.sync_rubrics(h)
  heldout = _heldout_responses_out(run, 0, step_fns.evaluate(
      run.heldout_tasks, run.learner, run.initial_state.params, run.eval_key))
  say(f"held-out score at start: {_points(heldout['score'])}")
  return Progress(0, run.initial_state, run.run_key, h, run.memory, len(run.setup_ops),
                  metrics.new_summary(heldout))


def resume(run: Run, step: int) -> Progress:
  """The run as checkpoint `step` left it. What the interrupted run wrote after it
  (history, metrics, group, candidate and attribution lines) is dropped by process 0 before
  any process reads the history; a metrics row the kill kept from being written is
  restored from the checkpoint. The checkpoint's share of the history must be an intact
  hash chain ending at the head the checkpoint stored, and H_0 replayed through it must
  match its digest."""
  workdir = run.workdir
  restored, meta = run.ckpts.restore(
      step, restore_target(state_tree(run.initial_state, run.run_key)))
  state = run.initial_state.replace(
      params=restored["params"], opt_state=restored["opt_state"], step=restored["step"],
      skipped_steps=restored["skipped_steps"])
  history_path = os.path.join(workdir, run_files.HISTORY)
  n, done = int(meta["history_len"]), int(meta["step"])
  if cluster.is_primary():
    metrics.truncate_lines(history_path, n)
  cluster.barrier("history_truncated")
  # read_history checks the chain; its head must be the one the checkpoint stored.
  records = read_history(history_path) if n else []
  head = head_of(records)
  if len(records) != n or head != meta.get(run_files.HISTORY_HEAD):
    raise HarnessError(f"{history_path}: its first {n} records do not end at checkpoint "
                       f"{step}'s {run_files.HISTORY_HEAD}; run `python -m "
                       f"harnessrl_jax.audit {workdir}`")
  run.history_log.reset(head)
  h = replay(run.h0, records, source=history_path)
  if harness.digest(h) != meta["harness_digest"]:
    raise HarnessError(f"{workdir}: the harness replayed from {run_files.HISTORY} does not "
                       f"match checkpoint {step}; run `python -m harnessrl_jax.audit "
                       f"{workdir}`")
  if cluster.is_primary():
    for name in (run_files.METRICS, run_files.GROUPS, run_files.CANDIDATES,
                 run_files.ATTRIBUTIONS):
      metrics.truncate_jsonl(os.path.join(workdir, name), lambda r: r["step"] < done)
    metrics.truncate_jsonl(os.path.join(workdir, run_files.HELDOUT_RESPONSES),
                           lambda r: r["step"] <= done)   # completed steps, not 0-based
    metrics.truncate_jsonl(os.path.join(workdir, run_files.CONFIG_CHANGES),
                           lambda r: r["step"] <= done)   # as record_config will
    # The ledger as the checkpoint left it, then the rows kept past it (run_ledger.py).
    _ledger(run).resume(meta)
    _ledger(run).sync(run_files.LEDGERED_LINES)
    metrics.restore_last_row(os.path.join(workdir, run_files.METRICS), meta["row"])
    run.writer.cut_back(done, meta["row"])   # tb/ as metrics.jsonl: each step once
    _say_heads(run, done, meta)
  memory = run.memory
  if memory is not None:
    memory = type(memory).load(run.ckpts.memory_dir(step), run.memory_config,
                               memory.embedder)
  say(f"resumed {workdir} from checkpoint {step} (harness {meta['harness_digest'][:12]})")
  return Progress(done, state, run_key_of(restored), h, memory, n, meta["summary"])


def _heldout_responses_out(run: Run, step: int, result: dict[str, Any]) -> dict[str, Any]:
  """A held-out result without its responses, which go to heldout_responses.jsonl (with
  `step`, the completed steps) rather than into the summary and every checkpoint."""
  responses = result.pop(run_files.RESPONSES)
  if cluster.is_primary():
    run_ledger.append_jsonl(
        os.path.join(run.workdir, run_files.HELDOUT_RESPONSES),
        [{run_files.STEP: int(step), "task_id": tid, "response": r}
         for tid, r in responses.items()])
  return result


def _ledger(run: Run) -> run_ledger.Ledger:
  """The run's records ledger (process 0's; `start` registers it)."""
  return run_ledger.ledger_of(os.path.join(run.workdir, run_files.LEDGER))


def _say_heads(run: Run, steps: int, meta: dict[str, Any]) -> None:
  """The heads checkpoint `steps` stores, on the terminal and in TensorBoard: a copy kept
  outside the workdir pins the history up to it (docs/operational.md)."""
  if not cluster.is_primary() or run_files.LEDGER_HEAD not in meta:
    return
  heads = {run_files.LEDGER_HEAD: meta[run_files.LEDGER_HEAD],
           run_files.HISTORY_HEAD: meta[run_files.HISTORY_HEAD]}
  say(f"checkpoint {steps}: {run_files.LEDGER_HEAD} {heads[run_files.LEDGER_HEAD]} "
      f"({meta[run_files.LEDGER_LEN]} entries), {run_files.HISTORY_HEAD} "
      f"{heads[run_files.HISTORY_HEAD]}")
  run.writer.heads(steps, heads)


def start(run: Run, audit_key: bytes | None = None) -> Progress:
  """A fresh start or a resume; process 0 appends every record through a records ledger
  (HMAC-keyed under `audit_key`)."""
  if cluster.is_primary():
    run_ledger.register(run_ledger.Ledger(run.workdir, audit_key))
  latest = run.ckpts.latest()
  return fresh_start(run) if latest is None else resume(run, latest)


# ---- the loop


def _with_endpoints(run, row: dict[str, Any]) -> dict[str, Any]:
  """`row` with the judge's per-endpoint counters when it judges through a pool."""
  stats = getattr(getattr(run.learner.judge, "client", None), "stats", None)
  return row if stats is None else {**row, run_files.ENDPOINTS: stats()}


def train_loop(run: Run, p: Progress) -> Progress:
  """Steps p.step .. train.steps - 1; each ends with its metrics row written, complete, after
  the checkpoint that covers it (a kill in between is repaired by `resume`)."""
  total, t = run.train.steps, run.train
  state, h, summary, history_len = p.state, p.harness, p.summary, p.history_len
  for step in range(p.step, total):
    n = step + 1   # steps completed once this one is
    op = step_fns.schedule_op(h, step, total)
    if op is not None:
      h, _ = apply_logged(h, op, step=step, log=run.history_log,
                          measurement={run_files.SOURCE: run_files.SOURCE_SCHEDULE})
      history_len += 1
    draw_key, roll_key, evolve_key = step_fns.step_keys(p.run_key, step)
    state, rec = step_fns.rl_step(run.learner, state, h, step, draw_key, roll_key)
    mounted = np.asarray(h.guidance_mask)[list(rec.task_indices)]   # H_t's, as drawn
    t0 = time.perf_counter()
    h, elog = run.evolve(h, p.memory, rec, params=state.params, key=evolve_key)
    evolver_s = time.perf_counter() - t0
    history_len += elog.history_records
    summary = metrics.accumulate(summary, rec, elog, evolver_s)

    heldout = heldout_s = None
    if due(n, t.eval_every, total):
      t1 = time.perf_counter()
      heldout = _heldout_responses_out(run, n, step_fns.evaluate(
          run.heldout_tasks, run.learner, state.params, run.eval_key, after=n))
      heldout_s = time.perf_counter() - t1
      summary = metrics.with_heldout(summary, n, heldout, final=n == total)
    row = _with_endpoints(run, metrics.step_row(rec, elog, evolver_s=evolver_s,
                                                mounted=mounted, heldout=heldout,
                                                heldout_s=heldout_s))
    if run.writer is not None and t.oracle_groups_every > 0 and due(
        n, t.oracle_groups_every, total):
      run.writer.write_groups(metrics.group_rows(rec))
    if due(n, t.checkpoint_every, total) or heldout is not None:
      t1 = time.perf_counter()
      meta = {"step": n, "history_len": history_len, "harness_digest": harness.digest(h),
              run_files.HISTORY_HEAD: run.history_log.head,
              "harness": harness.canonical(h), "last_draw": list(rec.task_indices),
              "summary": json_safe(summary), "row": json_safe(row)}
      if cluster.is_primary():   # its entry pins this metadata; the heads go into it
        meta = _ledger(run).checkpoint(n, meta)
      run.ckpts.save(n, state_tree(state, p.run_key), meta, memory=p.memory,
                     heldout_reward=None if heldout is None else heldout["score"])
      row = _with_endpoints(run, metrics.step_row(
          rec, elog, evolver_s=evolver_s, mounted=mounted, heldout=heldout,
          heldout_s=heldout_s, checkpoint_s=time.perf_counter() - t1))
      _say_heads(run, n, meta)
    if run.writer is not None:
      run.writer.write(json_safe(row))
    if due(n, t.log_every, total):
      say(metrics.progress_line(row, total))
  return dataclasses.replace(p, step=total, state=state, harness=h, summary=summary,
                             history_len=history_len)


def finish(run: Run, p: Progress) -> dict[str, Any]:
  """The run's summary (every process gets it; process 0 writes it and the report)."""
  summary = json_safe(metrics.finished(
      p.summary, steps=p.step, skipped_updates=int(p.state.skipped_steps),
      harness_digest=harness.digest(p.harness),
      params_sha256=params_sha256(sharding.to_host(p.state.params)),
      best_checkpoint=run.ckpts.best()))
  run.ckpts.close()
  if jax.process_count() > 1:   # each process's end state, to compare across the logs
    print(f"process {jax.process_index()}/{jax.process_count()} done: harness "
          f"{summary['harness_digest']} params_sha256 {summary['params_sha256']}", flush=True)
  if not cluster.is_primary():
    return summary
  run_ledger.write_text(os.path.join(run.workdir, run_files.SUMMARY),
                        json.dumps(summary, indent=2, sort_keys=True))
  print(metrics.summary_table(summary), flush=True)
  print(f"({run.workdir}/{run_files.SUMMARY})", flush=True)
  print(f"report: {report.write_report(run.workdir)}", flush=True)
  return summary


def run(cfg, workdir: str, *, audit_key_file: str | None = None) -> dict[str, Any]:
  """Trains (or resumes) the run in `workdir`; returns its summary. On several processes
  every process calls this (after `cluster.initialize`) and gets the same summary.
  `audit_key_file` (else the file run_ledger.KEY_ENV names, else none) keys the ledger."""
  shown_workdir, workdir = workdir, os.path.abspath(workdir)
  # A collective: every process must pass it, so it comes before any refusal of one.
  cluster.check_consistent(cluster.run_digests(config_text(cfg)))
  check_workdir(shown_workdir)   # reads only, as the two below
  guard_config(cfg, workdir)   # reads only: a start refused before its first step
  train_tasks, heldout_tasks = preflight(cfg)   # leaves no config.json to refuse the next
  audit_key = run_ledger.key_from(audit_key_file, workdir)
  parts = build_run(cfg, workdir, train_tasks, heldout_tasks)
  progress = start(parts, audit_key)
  # Checkpoints follow >= 1 steps: step 0 is a fresh start, any other a resume.
  for line in record_config(cfg, workdir, resumed_at=progress.step or None):
    say(line)
  return finish(parts, train_loop(parts, progress))


# ---- small helpers


def params_sha256(params) -> str:
  """SHA-256 of the leaves' bytes; on several processes give it `sharding.to_host`'s
  copies (np.asarray fails on an array with shards on other hosts)."""
  m = hashlib.sha256()
  for leaf in jax.tree.leaves(params):
    m.update(np.ascontiguousarray(np.asarray(leaf)).tobytes())
  return m.hexdigest()


def json_safe(obj):
  """`obj` with non-finite floats as None (JSON has no NaN)."""
  if isinstance(obj, float) and not math.isfinite(obj):
    return None
  if isinstance(obj, dict):
    return {k: json_safe(v) for k, v in obj.items()}
  if isinstance(obj, (list, tuple)):
    return [json_safe(v) for v in obj]
  return obj


def _points(x: float | None) -> str:
  return "-" if x is None else f"{x:.2f} points"


def say(text: str) -> None:
  """A line on the terminal, from process 0 only."""
  if cluster.is_primary():
    print(text, flush=True)


_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "The experiment's config file, e.g. configs/tiny.py.", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "The directory the run writes into.")
_AUDIT_KEY_FILE = flags.DEFINE_string(
    "audit_key_file", None, "A file (outside the workdir) holding a secret of >= 16 bytes: "
    f"the records ledger's entries become HMACs under it. Default: the file ${run_ledger.KEY_ENV} "
    "names, else none (a keyless chain).")
cluster.define_flags()


def main(argv):
  """The run `--config` and `--workdir` name; cli.run makes a HarnessError one line."""
  del argv
  if not flags.FLAGS["verbosity"].present:
    # Orbax and JAX log every save at INFO; the driver prints its own progress lines.
    logging.set_verbosity(logging.WARNING)
    # Orbax warns at every save without a held-out reward; only evaluated steps have one.
    std_logging.getLogger("absl").addFilter(
        lambda record: "did not provide metrics" not in record.getMessage())
  spec = cluster.initialize_from_flags()   # before the first array (no-op alone)
  if spec.multi:
    print(f"process {jax.process_index()}/{jax.process_count()} joined ({spec.source}): "
          f"{jax.local_device_count()} local of {jax.device_count()} devices", flush=True)
  run(_CONFIG.value, _WORKDIR.value, audit_key_file=_AUDIT_KEY_FILE.value)


if __name__ == "__main__":
  # Required only when run: tests import this module next to other entry points' flags.
  flags.mark_flags_as_required(["config", "workdir"])
  cli.run(main)
