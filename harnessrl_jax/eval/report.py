"""Per-run markdown report with PNG plots: `write_report(run_dir) -> path of report.md`.

Reads exactly the files and fields the driver (train.py, run/metrics.py) and
`python -m harnessrl_jax.eval` write, by run_files' names. Its sections, and what each
reads:
  Training            metrics.jsonl: step, reward; summary.json: steps, skipped_updates
  Held-out score      summary.json: heldout_start, heldout_evals, heldout_end; metrics.jsonl:
                      heldout_score (on the row of the step it follows, so at step + 1);
                      eval_step<N>.json: heldout (an evaluation of a subset, marked "limit",
                      is not a held-out point). All in points, 0-100.
  Best checkpoint     the held-out points, and eval_step<N>.json's ood_mean where given;
                      summary.json: best_checkpoint (the one the driver kept)
  Out-of-distribution eval_step<N>.json: ood
  Failure classes     oracle.jsonl (`evaluate --groups`); metrics.jsonl: labels (the
                      attributor's own per-criterion view, a different instrument)
  Harness updates, guidance and cost per 100 steps
                      harness_history.jsonl, evolver_candidates.jsonl; metrics.jsonl:
                      guidance, time
Each section ends with what it lacks ("Missing: ..."). A line that is not JSON, or lacks a
field its writer always writes, is listed under "Unreadable" as FILE:LINE: why, and its
readable fields are still used; a last line without its newline is the mark of a kill
mid-write and is called that.

Definitions used in the report:
  - accepted updates per 100 steps: harness ops the evolver's critic accepted, by interface
    (run_files.interface_of), per 100 steps of the bin; records the run applied itself
    (measurement "source": calibration, guidance schedule) are not counted;
  - reversed rubric update: an accepted rubric op that deletes a criterion an earlier
    accepted op created, or sets a criterion's text or weight back to a value an earlier
    accepted op had given it (an undo back to the seed value is not visible in the log);
  - guidance share: per field, the mean over the bin's steps of the share of drawn tasks
    with the field mounted;
  - cost per 100 steps: wall hours of the bin's steps scaled to 100 steps, RL (rollout +
    judge + update), evolver and checkpoint saves; multiply by the number of hosts for
    cluster-hours;
  - best checkpoint: the held-out point with the highest score (the mean OOD score where
    eval files give one); hours to it = summed step wall time before that step.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import math
import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from harnessrl_jax import run_files as rf
from harnessrl_jax.errors import HarnessError
from harnessrl_jax.eval.common import json_rows
from harnessrl_jax.eval.figures import Figures
from harnessrl_jax.harness.history import HistoryRecord

_SHOWN_PROBLEMS = 20   # per file; the rest are counted


# ---- reading: each file into frozen readings, every unreadable part into `problems`


def _num(x: Any) -> float | None:
  """A finite number, else None (null, NaN, anything else)."""
  if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x):
    return float(x)
  return None


def _is_num_or_null(x: Any) -> bool:
  return x is None or (isinstance(x, (int, float)) and not isinstance(x, bool))


def _jsonl(run_dir: str, name: str, problems: list[str]) -> tuple[tuple[int, dict], ...] | None:
  """(line number, object) of each readable line of RUN_DIR/name; None when there is no
  such file. Unreadable lines go to `problems` as "name:LINE: why"."""
  path = os.path.join(run_dir, name)
  if not os.path.isfile(path):
    return None
  found: list[str] = []
  rows = []
  for n, where, row in json_rows(path, found):
    if isinstance(row, dict):
      rows.append((n, row))
    else:
      found.append(f"{where}: not a JSON object")
  with open(path, "rb") as f:
    data = f.read()
  if data and not data.endswith(b"\n"):
    n_last = data.count(b"\n") + 1
    last = f"{path}:{n_last}: "
    found = [f"{last}cut off: the last line has no newline (the run was killed mid-write)"
             if p.startswith(last + "not JSON") else p for p in found]
  problems.extend(name + p[len(path):] for p in found)   # named relative to the run dir
  return tuple(rows)


def _json(run_dir: str, name: str, problems: list[str]) -> dict | None:
  path = os.path.join(run_dir, name)
  if not os.path.isfile(path):
    return None
  try:
    with open(path, encoding="utf-8") as f:
      obj = json.load(f)
  except json.JSONDecodeError as e:
    problems.append(f"{name}:{e.lineno}: not JSON ({e.msg})")
    return None
  if not isinstance(obj, dict):
    problems.append(f"{name}: not a JSON object")
    return None
  return obj


@dataclasses.dataclass(frozen=True)
class StepRow:
  """What the report reads of one metrics.jsonl row; None where the row has no readable
  value (`heldout`: also None on steps without an evaluation)."""

  step: int
  reward: float | None
  seconds: tuple[float, float, float] | None   # (RL, evolver, checkpoint)
  labels: Mapping[str, int] | None
  guidance: Mapping[str, float] | None
  heldout: float | None


def _step_row(row: dict, where: str, problems: list[str]) -> StepRow | None:
  step = row.get(rf.STEP)
  if not isinstance(step, int) or isinstance(step, bool) or step < 0:
    problems.append(f"{where}: {rf.STEP}: not a step number; row left out")
    return None
  bad = lambda field, why: problems.append(f"{where}: {field}: {why}")  # noqa: E731
  if rf.REWARD not in row or not _is_num_or_null(row[rf.REWARD]):
    bad(rf.REWARD, "missing or not a number")
  t = row.get(rf.TIME)
  seconds = None
  need = (*rf.RL_TIMES, rf.EVOLVER_S)
  if not isinstance(t, dict) or any(_num(t.get(k)) is None for k in need) or (
      rf.CHECKPOINT_S in t and _num(t[rf.CHECKPOINT_S]) is None):
    bad(rf.TIME, f"needs seconds {', '.join(need)} (and {rf.CHECKPOINT_S} after a save)")
  else:
    seconds = (sum(t[k] for k in rf.RL_TIMES), float(t[rf.EVOLVER_S]),
               float(t.get(rf.CHECKPOINT_S, 0.0)))
  labels = row.get(rf.LABELS)
  if not isinstance(labels, dict) or not set(labels) <= set(rf.ATTRIBUTOR_LABELS) or any(
      not isinstance(v, int) for v in labels.values()):
    bad(rf.LABELS, f"needs counts of {', '.join(rf.ATTRIBUTOR_LABELS)}")
    labels = None
  guidance = row.get(rf.GUIDANCE)
  if not isinstance(guidance, dict) or any(_num(guidance.get(f)) is None
                                           for f in rf.GUIDANCE_FIELDS):
    bad(rf.GUIDANCE, f"needs shares of {', '.join(rf.GUIDANCE_FIELDS)}")
    guidance = None
  if rf.HELDOUT_SCORE in row and not _is_num_or_null(row[rf.HELDOUT_SCORE]):
    bad(rf.HELDOUT_SCORE, "not a number")
  return StepRow(step, _num(row.get(rf.REWARD)), seconds, labels, guidance,
                 _num(row.get(rf.HELDOUT_SCORE)))


@dataclasses.dataclass(frozen=True)
class Summary:
  """What the report reads of summary.json (held-out scores in points)."""

  start: float | None
  evals: tuple[tuple[int, float], ...]   # (completed steps, score) with a score
  end: float | None
  steps: int | None
  skipped_updates: int | None
  best_checkpoint: int | None


def _summary(obj: dict, problems: list[str]) -> Summary:
  bad = lambda field, why: problems.append(f"{rf.SUMMARY}: {field}: {why}")  # noqa: E731

  def score(field):
    result = obj.get(field)
    if not isinstance(result, dict) or not _is_num_or_null(result.get(rf.SCORE, "")):
      bad(field, f"needs a held-out result with a {rf.SCORE!r} (points or null)")
      return None
    return _num(result[rf.SCORE])

  evals = []
  listed = obj.get(rf.HELDOUT_EVALS)
  if not isinstance(listed, list):
    bad(rf.HELDOUT_EVALS, "missing or not a list")
    listed = []
  for e in listed:
    if not isinstance(e, dict) or not isinstance(e.get(rf.STEP), int) or \
        not _is_num_or_null(e.get(rf.SCORE, "")):
      bad(rf.HELDOUT_EVALS, f"{e!r}: needs {rf.STEP} and {rf.SCORE}")
    elif _num(e[rf.SCORE]) is not None:
      evals.append((e[rf.STEP], _num(e[rf.SCORE])))
  ints = {}
  for field in (rf.STEPS, rf.SKIPPED_UPDATES, rf.BEST_CHECKPOINT):
    v = obj.get(field)
    if field != rf.BEST_CHECKPOINT or v is not None:   # no held-out score: no best
      if not isinstance(v, int) or isinstance(v, bool):
        bad(field, "missing or not an integer")
        v = None
    ints[field] = v
  return Summary(score(rf.HELDOUT_START), tuple(evals), score(rf.HELDOUT_END),
                 ints[rf.STEPS], ints[rf.SKIPPED_UPDATES], ints[rf.BEST_CHECKPOINT])


@dataclasses.dataclass(frozen=True)
class EvalFile:
  """What the report reads of one eval_step<N>.json."""

  name: str
  step: int
  heldout: float | None                 # None: none, or a subset ("limit")
  ood: tuple[tuple[str, str, float | None, Any], ...]   # (benchmark, metric, score, items)
  ood_mean: float | None


def _eval_file(name: str, obj: dict, problems: list[str]) -> EvalFile | None:
  step = obj.get(rf.STEP)
  if not isinstance(step, int) or step != rf.eval_step_of(name):
    problems.append(f"{name}: {rf.STEP}: {step!r} is not the step its name gives")
    return None
  held = obj.get(rf.EVAL_HELDOUT) or {}
  heldout = None if rf.LIMIT in held else _num(held.get(rf.SCORE))
  ood = obj.get(rf.EVAL_OOD) or {}
  rows = tuple((k, str(v.get(rf.METRIC, "")), _num(v.get(rf.SCORE)), v.get(rf.NUM_ITEMS))
               for k, v in sorted(ood.items()) if isinstance(v, dict))
  return EvalFile(name, step, heldout, rows, _num(ood.get(rf.OOD_MEAN)))


@dataclasses.dataclass(frozen=True)
class RunData:
  """Everything the report reads from a run directory (`read_run`). A file that is not
  there is in `absent` (its readings empty); unreadable lines are in `problems`."""

  run_dir: str
  metrics: tuple[StepRow, ...]                 # by step
  summary: Summary | None
  oracle: tuple[dict, ...]                     # {step, CLASS: share or None}, by step
  history: tuple[HistoryRecord, ...]
  verdicts: tuple[str, ...]                    # of evolver_candidates.jsonl's rows
  evals: tuple[EvalFile, ...]                  # by step
  absent: frozenset[str]
  problems: tuple[str, ...]


def read_run(run_dir: str) -> RunData:
  """Reads a run directory (module docstring); never raises for what the files hold."""
  problems: list[str] = []
  absent = set()

  def rows(name):
    out = _jsonl(run_dir, name, problems)
    if out is None:
      absent.add(name)
    return out or ()

  metrics: dict[int, StepRow] = {}
  for n, row in rows(rf.METRICS):
    r = _step_row(row, f"{rf.METRICS}:{n}", problems)
    if r is not None and r.step in metrics:   # a resume drops what it redoes: not expected
      problems.append(f"{rf.METRICS}:{n}: {rf.STEP}: {r.step} logged again; this row is used")
    if r is not None:
      metrics[r.step] = r
  oracle = []
  for n, row in rows(rf.ORACLE):
    if not isinstance(row.get(rf.STEP), int) or any(
        not _is_num_or_null(row.get(k, "")) for k in rf.ORACLE_CLASSES):
      problems.append(f"{rf.ORACLE}:{n}: needs {rf.STEP} and shares of "
                      f"{', '.join(rf.ORACLE_CLASSES)}")
    else:
      oracle.append({rf.STEP: row[rf.STEP], **{k: _num(row[k]) for k in rf.ORACLE_CLASSES}})
  history = []
  for n, row in rows(rf.HISTORY):
    try:
      history.append(HistoryRecord.from_json(row))
    except (HarnessError, TypeError) as e:
      problems.append(f"{rf.HISTORY}:{n}: {e}")
  verdicts = []
  for n, row in rows(rf.CANDIDATES):
    if row.get(rf.VERDICT) not in rf.VERDICTS:
      problems.append(f"{rf.CANDIDATES}:{n}: {rf.VERDICT}: not one of "
                      f"{', '.join(rf.VERDICTS)}")
    else:
      verdicts.append(row[rf.VERDICT])
  summary_obj = _json(run_dir, rf.SUMMARY, problems)
  if not os.path.isfile(os.path.join(run_dir, rf.SUMMARY)):
    absent.add(rf.SUMMARY)
  evals = []
  for path in sorted(glob.glob(os.path.join(run_dir, rf.EVAL_GLOB))):
    name = os.path.basename(path)
    obj = _json(run_dir, name, problems) if rf.eval_step_of(name) is not None else None
    e = None if obj is None else _eval_file(name, obj, problems)
    if e is not None:
      evals.append(e)
  if not evals:
    absent.add(rf.EVAL_GLOB)
  return RunData(run_dir, tuple(metrics[s] for s in sorted(metrics)),
                 None if summary_obj is None else _summary(summary_obj, problems),
                 tuple(sorted(oracle, key=lambda r: r[rf.STEP])), tuple(history),
                 tuple(verdicts), tuple(sorted(evals, key=lambda e: e.step)),
                 frozenset(absent), tuple(problems))


# ---- what the sections compute


def evolver_updates(history: Sequence[HistoryRecord]) -> list[HistoryRecord]:
  """History records the evolver's critic accepted (the run logs the ops it applies
  itself, calibration and the guidance schedule, with a "source")."""
  return [r for r in history if rf.SOURCE not in r.measurement]


def reversed_rubric_updates(history: Sequence[HistoryRecord]) -> list[HistoryRecord]:
  """Accepted rubric ops that undo an earlier accepted op (module docstring)."""
  created: set[tuple[str, str]] = set()
  seen: dict[tuple[str, str, str], list[Any]] = defaultdict(list)
  out = []
  for rec in evolver_updates(history):
    op = rec.op
    if rf.interface_of(op.kind) != "rubric":
      continue
    task = op.task_id
    cid = getattr(op, "criterion_id", None) or getattr(op, "new_id", None)
    values = {a: getattr(op, a, None) for a in ("text", "weight")}
    undo = op.kind == "rubric_delete" and (task, cid) in created
    if op.kind in ("rubric_rewrite", "rubric_reweight"):
      # seen[...][-1] is the current value: setting it again is a no-op, not an undo.
      undo |= any(v is not None and v in seen[(task, cid, a)][:-1] for a, v in values.items())
    if undo:
      out.append(rec)
    if op.kind in ("rubric_create", "rubric_merge"):
      created.add((task, cid))
    for a, v in values.items():
      if v is not None:
        seen[(task, cid, a)].append(v)
  return out


def label_shares(data: RunData) -> list[dict]:
  """Per step with labels, the attributor's criterion labels as shares."""
  out = []
  for r in data.metrics:
    total = sum(r.labels.values()) if r.labels else 0
    if total:
      out.append({rf.STEP: r.step, **{k: r.labels.get(k, 0) / total
                                     for k in rf.ATTRIBUTOR_LABELS}})
  return out


def heldout_points(data: RunData) -> list[tuple[int, float, float | None]]:
  """(completed steps, held-out points, mean OOD or None), one per step; an eval file's
  score wins over the driver's for its step."""
  pts: dict[int, tuple[float, float | None]] = {}
  s = data.summary
  if s is not None and s.start is not None:
    pts[0] = (s.start, None)
  for step, score in s.evals if s is not None else ():
    pts[step] = (score, None)
  for r in data.metrics:
    if r.heldout is not None:
      pts[r.step + 1] = (r.heldout, None)
  if s is not None and s.end is not None and s.steps is not None:
    pts[s.steps] = (s.end, None)
  for e in data.evals:
    h = e.heldout if e.heldout is not None else pts.get(e.step, (None, None))[0]
    if h is not None:
      pts[e.step] = (h, e.ood_mean)
  return sorted((step, h, o) for step, (h, o) in pts.items())


def step_seconds(data: RunData) -> dict[int, tuple[float, float, float]]:
  """step -> (RL, evolver, checkpoint) wall seconds, for rows with readable times."""
  return {r.step: r.seconds for r in data.metrics if r.seconds is not None}


def _bin(step: int, width: int) -> int:
  return (step // width) * width


def per_bin(data: RunData, width: int = 100) -> dict[int, dict[str, float]]:
  """Per bin of `width` logged steps: accepted ops per interface, reversals and hours, each
  scaled to 100 steps (so a short last bin is comparable), and mean guidance shares."""
  n_in: dict[int, int] = defaultdict(int)
  for r in data.metrics:
    n_in[_bin(r.step, width)] += 1
  rows: dict[int, dict[str, float]] = {b: defaultdict(float) for b in n_in}
  reversed_ids = {id(r) for r in reversed_rubric_updates(data.history)}
  for rec in evolver_updates(data.history):
    b, iface = _bin(rec.step, width), rf.interface_of(rec.op.kind)
    if b in rows and iface:
      rows[b][f"accepted_{iface}"] += 1
      rows[b]["reversed_rubric"] += id(rec) in reversed_ids
  for step, (rl, ev, ck) in step_seconds(data).items():
    for key, s in (("rl_hours", rl), ("evolver_hours", ev), ("checkpoint_hours", ck)):
      rows[_bin(step, width)][key] += s / 3600
  for b, row in rows.items():
    for k in row:
      row[k] *= 100.0 / n_in[b]
  with_guidance: dict[int, list[Mapping[str, float]]] = defaultdict(list)
  for r in data.metrics:
    if r.guidance is not None:
      with_guidance[_bin(r.step, width)].append(r.guidance)
  for b, shares in with_guidance.items():
    for f in rf.GUIDANCE_FIELDS:
      rows[b][f"share_{f}"] = float(np.mean([g[f] for g in shares]))
  return {b: dict(rows[b]) for b in sorted(rows)}


def best_checkpoint(data: RunData) -> dict | None:
  pts = heldout_points(data)
  if not pts:
    return None
  use_ood = any(o is not None for _, _, o in pts)
  cand = [(o if use_ood else h, s) for s, h, o in pts if not use_ood or o is not None]
  score, step = max(cand, key=lambda x: (x[0], -x[1]))  # earliest step among ties
  hours = sum(sum(v) for s, v in step_seconds(data).items() if s < step) / 3600
  return {"step": int(step), "score": float(score), "hours": hours,
          "by": "mean OOD score" if use_ood else "held-out score"}


# ---- plots


def _plots(data: RunData, out_dir: str, bins: dict) -> dict[str, str]:
  """Writes the run's figures into out_dir; returns file name -> path of those made."""
  figs = Figures(out_dir)
  _failure_class_figure(figs, data)
  _reward_figure(figs, data)
  if bins:
    _guidance_updates_figure(figs, bins)
    _cost_figure(figs, bins)
  return figs.made


def _failure_class_figure(figs: Figures, data: RunData) -> None:
  """failure_classes.png: the oracle's failure classes and the attributor's labels over
  steps, one panel each (those with rows)."""
  panels = [(rows, keys, title, unit) for rows, keys, title, unit in (
      (data.oracle, rf.ORACLE_CLASSES, "Failure classes (oracle)", "% of judged response pairs"),
      (label_shares(data), rf.ATTRIBUTOR_LABELS, "Attributor labels", "% of labelled criteria"))
             if rows]
  if not panels:
    return
  fig, axes = figs.plt.subplots(1, len(panels), figsize=(7 * len(panels), 4), squeeze=False)
  for ax, (rows, keys, title, unit) in zip(axes[0], panels):
    steps = [r[rf.STEP] for r in rows]
    for k in keys:
      ax.plot(steps, [np.nan if r[k] is None else 100 * r[k] for r in rows], marker="o",
              label=k)
    ax.set(xlabel="step", ylabel=unit, title=title)
    ax.legend(fontsize=8)
  figs.save(fig, "failure_classes.png")


def _reward_figure(figs: Figures, data: RunData) -> None:
  """reward_heldout.png: training reward, held-out score and OOD mean over steps."""
  rewards = [(r.step, r.reward) for r in data.metrics if r.reward is not None]
  held = heldout_points(data)
  if not (rewards or held):
    return
  fig, ax = figs.plt.subplots(figsize=(7, 4))
  if rewards:
    ax.plot(*zip(*[(s, 100 * v) for s, v in rewards]), label="training reward x100")
  if held:
    ax.plot([s for s, _, _ in held], [h for _, h, _ in held], marker="o", label="held-out")
    ood = [(s, o) for s, _, o in held if o is not None]
    if ood:
      ax.plot(*zip(*ood), marker="s", label="OOD mean")
  ax.set(xlabel="completed steps", ylabel="points (0-100)", title="Reward and held-out score")
  ax.legend(fontsize=8)
  figs.save(fig, "reward_heldout.png")


def _guidance_updates_figure(figs: Figures, bins: dict) -> None:
  """guidance_updates.png: per bin of steps, the guidance fields mounted and the accepted
  updates per interface (and reversed rubrics)."""
  x, labels = np.arange(len(bins)), [str(b) for b in bins]
  fig, (a1, a2) = figs.plt.subplots(1, 2, figsize=(10, 4))
  for i, f in enumerate(rf.GUIDANCE_FIELDS):
    a1.bar(x + (i - 1) * 0.25, [r.get(f"share_{f}", 0.0) for r in bins.values()], 0.25,
           label=f)
  a1.set(xticks=x, xticklabels=labels, xlabel="steps from", ylabel="share of drawn tasks",
         title="Guidance fields mounted")
  a1.legend(fontsize=8)
  for i, iface in enumerate(rf.INTERFACES):
    a2.bar(x + (i - 1) * 0.25, [r.get(f"accepted_{iface}", 0.0) for r in bins.values()],
           0.25, label=iface)
  a2.plot(x, [r.get("reversed_rubric", 0.0) for r in bins.values()], "k^",
          label="reversed rubric")
  a2.set(xticks=x, xticklabels=labels, xlabel="steps from", title="Accepted updates / 100 steps")
  a2.legend(fontsize=8)
  figs.save(fig, "guidance_updates.png")


def _cost_figure(figs: Figures, bins: dict) -> None:
  """cost.png: wall hours per bin of steps, stacked: RL, evolver, checkpoints."""
  x, labels = np.arange(len(bins)), [str(b) for b in bins]
  fig, a3 = figs.plt.subplots(figsize=(7, 4))
  bottom = np.zeros(len(bins))
  for key, name in (("rl_hours", "RL"), ("evolver_hours", "evolver"),
                    ("checkpoint_hours", "checkpoints")):
    h = np.array([r.get(key, 0.0) for r in bins.values()])
    a3.bar(x, h, bottom=bottom, label=name)
    bottom += h
  a3.set(xticks=x, xticklabels=labels, xlabel="steps from", ylabel="wall hours / 100 steps",
         title="Cost")
  a3.legend(fontsize=8)
  figs.save(fig, "cost.png")


# ---- the sections


@dataclasses.dataclass(frozen=True)
class Section:
  """One section of report.md: its markdown lines and what it lacks."""

  title: str
  lines: tuple[str, ...]
  missing: tuple[str, ...]


def _fmt(x: Any, digits: int = 2) -> str:
  return "-" if x is None else f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
  out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  out += ["| " + " | ".join(_fmt(c) for c in row) + " |" for row in rows]
  return out + [""]


def _absent(data: RunData, name: str, what: str) -> list[str]:
  return [f"{name} ({what})"] if name in data.absent else []


_ORACLE_HOW = ("the oracle analysis: `python -m harnessrl_jax.eval --run=RUN_DIR "
               f"--groups=RUN_DIR/{rf.GROUPS}`")
_EVAL_HOW = ("evaluations: `python -m harnessrl_jax.eval --run=RUN_DIR "
             "[--checkpoint=STEP] --medqa=FILE ...`")


def _training(data: RunData) -> Section:
  lines = []
  rewards = [r.reward for r in data.metrics if r.reward is not None]
  if data.metrics:
    lines.append(f"{len(data.metrics)} logged steps (steps {data.metrics[0].step}-"
                 f"{data.metrics[-1].step})" + (
                     f"; training reward first {rewards[0]:.4f}, last {rewards[-1]:.4f}."
                     if rewards else "; no step has a valid training reward."))
  s = data.summary
  if s is not None and s.steps is not None:
    lines.append(f"The run finished after {s.steps} steps; {_fmt(s.skipped_updates)} updates "
                 "were skipped (non-finite gradients).")
  return Section("Training", tuple(lines), tuple(
      _absent(data, rf.METRICS, "per-step reward, labels, guidance and cost")
      + _absent(data, rf.SUMMARY, "written when the run finishes")))


def _heldout(data: RunData, plots: dict) -> Section:
  held = heldout_points(data)
  lines = (_table(["completed steps", "held-out (points)", "OOD mean"],
                  [(s, h, o) for s, h, o in held]) if held else [])
  if "reward_heldout.png" in plots:
    lines.append("![reward and held-out score](reward_heldout.png)")
  missing = _absent(data, rf.SUMMARY, "held-out score at start, evaluations and end")
  if not held and rf.SUMMARY not in data.absent:
    missing.append(f"a held-out score in {rf.SUMMARY} (see Unreadable)")
  return Section("Held-out score", tuple(lines), tuple(missing))


def _best(data: RunData) -> Section:
  best = best_checkpoint(data)
  lines = []
  if best:
    lines.append(f"Best {best['by']} {best['score']:.2f} at step {best['step']}, after "
                 f"{best['hours']:.3f} wall hours.")
  if data.summary is not None and data.summary.best_checkpoint is not None:
    lines.append(f"The driver kept checkpoint {data.summary.best_checkpoint} as its best by "
                 "held-out score.")
  return Section("Best checkpoint", tuple(lines),
                 () if best else ("held-out scores (see Held-out score)",))


def _ood(data: RunData) -> Section:
  lines = []
  for e in data.evals:
    if e.ood:
      lines += [f"{e.name} (after step {e.step}), mean {_fmt(e.ood_mean)}:", ""]
      lines += _table(["benchmark", "metric", "score", "items"], e.ood)
  return Section("Out-of-distribution", tuple(lines),
                 () if lines else (f"{rf.EVAL_GLOB} with OOD scores ({_EVAL_HOW})",))


def _failures(data: RunData, plots: dict) -> Section:
  lines = []
  if data.oracle:
    lines += _table([rf.STEP, *rf.ORACLE_CLASSES],
                    [[r[rf.STEP]] + [None if r[k] is None else 100 * r[k]
                                     for k in rf.ORACLE_CLASSES] for r in data.oracle])
    lines += ["Oracle: % of judged response pairs; agree = reward-oracle agreement.", ""]
  labels = label_shares(data)
  if labels:
    shown = labels if len(labels) <= 12 else labels[::max(1, len(labels) // 10)] + labels[-1:]
    lines += ["Attributor labels (the evolver's own per-criterion view, not the oracle), % "
              "of labelled criteria:", ""]
    lines += _table([rf.STEP, *rf.ATTRIBUTOR_LABELS],
                    [[r[rf.STEP]] + [100 * r[k] for k in rf.ATTRIBUTOR_LABELS] for r in shown])
  elif data.metrics:
    lines += ["No step has attributor labels (the evolver is off, or labelled nothing).", ""]
  if "failure_classes.png" in plots:
    lines.append("![failure classes](failure_classes.png)")
  missing = _absent(data, rf.ORACLE, _ORACLE_HOW)
  if rf.ORACLE not in data.absent and not data.oracle:
    missing.append(f"readable rows in {rf.ORACLE} (see Unreadable)")
  return Section("Failure classes", tuple(lines), tuple(missing))


def _updates(data: RunData, bins: dict, plots: dict) -> Section:
  lines = []
  if bins:
    lines += _table(["steps from", *rf.INTERFACES, "reversed rubric", *rf.GUIDANCE_FIELDS,
                     "RL h", "evolver h", "checkpoint h"],
                    [[b] + [r.get(f"accepted_{i}", 0.0) for i in rf.INTERFACES]
                     + [r.get("reversed_rubric", 0.0)]
                     + [r.get(f"share_{f}") for f in rf.GUIDANCE_FIELDS]
                     + [r.get(k, 0.0) for k in ("rl_hours", "evolver_hours",
                                                "checkpoint_hours")]
                     for b, r in bins.items()])
    lines += ["Updates: accepted harness ops per 100 steps. Guidance columns: mean share of "
              "drawn tasks with the field mounted. Hours: wall hours per 100 steps (x hosts "
              "for cluster-hours).", ""]
  accepted_rubric = [r for r in evolver_updates(data.history)
                     if rf.interface_of(r.op.kind) == "rubric"]
  if accepted_rubric:
    rev = len(reversed_rubric_updates(data.history))
    lines += [f"Reversed rubric updates: {rev} of {len(accepted_rubric)} "
              f"({100 * rev / len(accepted_rubric):.1f}%).", ""]
  if data.verdicts:
    counts = {v: data.verdicts.count(v) for v in rf.VERDICTS}
    lines += ["Critic verdicts: " + ", ".join(f"{k} {n}" for k, n in counts.items()) + ".", ""]
  for name in ("guidance_updates.png", "cost.png"):
    if name in plots:
      lines += [f"![{name[:-4]}]({name})", ""]
  return Section("Harness updates, guidance and cost per 100 steps", tuple(lines), tuple(
      _absent(data, rf.METRICS, "steps, guidance shares and times")
      + _absent(data, rf.HISTORY, "accepted harness updates")
      + _absent(data, rf.CANDIDATES, "critic verdicts; none when the evolver is off")))


def _unreadable(problems: Sequence[str]) -> Section:
  by_file: dict[str, list[str]] = defaultdict(list)
  for p in problems:
    by_file[p.split(":", 1)[0]].append(p)
  lines = []
  for name, found in by_file.items():
    lines += [f"- {p}" for p in found[:_SHOWN_PROBLEMS]]
    if len(found) > _SHOWN_PROBLEMS:
      lines.append(f"- {name}: and {len(found) - _SHOWN_PROBLEMS} more")
  return Section("Unreadable", tuple(lines), ())


def sections(data: RunData, plots: dict | None = None,
             bin_width: int = 100) -> tuple[Section, ...]:
  """The report's sections (`plots`: the names `_plots` made)."""
  plots = plots or {}
  out = (_training(data), _heldout(data, plots), _best(data), _ood(data),
         _failures(data, plots), _updates(data, per_bin(data, bin_width), plots))
  return out + ((_unreadable(data.problems),) if data.problems else ())


def write_report(run_dir: str, *, out_dir: str | None = None, bin_width: int = 100) -> str:
  """Renders report.md (and its PNGs) into `out_dir` (default: run_dir); returns its path."""
  out_dir = out_dir or run_dir
  os.makedirs(out_dir, exist_ok=True)
  data = read_run(run_dir)
  plots = _plots(data, out_dir, per_bin(data, bin_width))
  lines = [f"# Run report: {os.path.basename(os.path.abspath(run_dir))}", ""]
  for s in sections(data, plots, bin_width):
    lines += [f"## {s.title}", "", *s.lines]
    if s.lines and s.lines[-1]:
      lines.append("")
    if s.missing:
      lines += ["Missing: " + "; ".join(s.missing) + ".", ""]
  path = os.path.join(out_dir, rf.REPORT)
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines))
  return path
