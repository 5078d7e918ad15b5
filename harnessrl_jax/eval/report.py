"""Per-run markdown report with PNG plots: `write_report(run_dir) -> path of report.md`.

Reads whatever of these the run directory holds and says in the report what is missing:
  metrics.jsonl        one row per step (0-based "step"), nested objects read as "a/b"
                       columns as in TensorBoard: "reward"; wall seconds "time/*" (all RL
                       except "time/evolver_s", the evolver, and "time/checkpoint_s", counted
                       in neither; flat "rollout_s", "judge_s", "update_s", "evolver_s" are
                       read too); "heldout_reward" (after step + 1 completed steps);
                       optional guidance shares "guidance/criterion|reference|critique"
                       (share of drawn tasks with the field mounted); optional oracle
                       columns "oracle/<class>"; attributor label counts "labels/<class>".
  summary.json         "heldout_start", "heldout_end" ({"reward": x}, 0-1), "heldout_evals"
                       ([{"step", "reward"}]) and "steps".
  oracle.jsonl         rows of `oracle.shares_by_step` (written by `evaluate --groups`).
  harness_history.jsonl | history.jsonl      HistoryRecord rows (accepted harness ops).
  evolver_candidates.jsonl | candidates.jsonl  CandidateRecord rows (accepted/rejected/noop).
  eval*.json           outputs of `python -m harnessrl_jax.evaluate` (with "step").
Held-out values are shown on the 0-100 scale (rewards in 0-1 are multiplied by 100).

Definitions used in the report:
  - accepted updates per 100 steps: harness ops the evolver's critic accepted, by interface
    (rubric_* -> rubric, add/drop_guidance -> guidance, sampling_* -> sampling), per 100
    steps of the bin; records logged with a "source" (calibration, guidance schedule) are
    not counted;
  - reversed rubric update: an accepted rubric op that deletes a criterion an earlier
    accepted op created, or sets a criterion's text or weight back to a value an earlier
    accepted op had given it (an undo back to the seed value is not visible in the log);
  - cost per 100 steps: wall hours of the bin's steps scaled to 100 steps, RL (rollout +
    judge + update) vs evolver; multiply by the number of hosts for cluster-hours;
  - best checkpoint: the held-out point with the highest score (the mean OOD score where
    eval files give one); hours to it = summed step wall time up to that step.
"""

from __future__ import annotations

import glob
import json
import math
import os
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from harnessrl_jax.eval.oracle import CLASSES

FIELDS = ("criterion", "reference", "critique")
ATTRIBUTOR = ("blind", "saturated", "spurious", "agree")
RL_COST = ("rollout_s", "judge_s", "update_s")
INTERFACES = ("rubric", "guidance", "sampling")


def _flatten(row: dict, prefix: str = "") -> dict:
  out = {}
  for k, v in row.items():
    if isinstance(v, dict):
      out.update(_flatten(v, f"{prefix}{k}/"))
    else:
      out[f"{prefix}{k}"] = v
  return out


def _read_jsonl(path: str) -> list[dict]:
  rows = []
  with open(path, encoding="utf-8") as f:
    for line in f:
      if line.strip():
        try:
          row = json.loads(line)
        except json.JSONDecodeError:
          continue  # a line cut by a crash mid-write; the report shows the rest
        if isinstance(row, dict):
          rows.append(row)
  return rows


def _first(run_dir: str, names: Sequence[str]) -> str | None:
  for name in names:
    path = os.path.join(run_dir, name)
    if os.path.isfile(path):
      return path
  return None


def _num(x: Any) -> float | None:
  if isinstance(x, dict):
    x = x.get("score", x.get("reward"))
  if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x):
    return float(x)
  return None


def _pct(x: float) -> float:
  """Held-out rewards come in 0-1 from the driver and 0-100 from evaluate."""
  return 100.0 * x if abs(x) <= 1.0 else x


def _interface(op_kind: str) -> str | None:
  if op_kind.startswith("rubric_"):
    return "rubric"
  if op_kind in ("add_guidance", "drop_guidance"):
    return "guidance"
  if op_kind.startswith("sampling_"):
    return "sampling"
  return None


def evolver_updates(history: Sequence[dict]) -> list[dict]:
  """History records the evolver's critic accepted (calibration and the guidance schedule
  log theirs with a "source" and are not updates the evolver chose)."""
  return [r for r in history if "source" not in (r.get("measurement") or {})]


def reversed_rubric_updates(history: Sequence[dict]) -> list[dict]:
  """Accepted rubric ops that undo an earlier accepted op (module docstring)."""
  created: set[tuple[str, str]] = set()
  seen: dict[tuple[str, str, str], list[Any]] = defaultdict(list)
  out = []
  for rec in evolver_updates(history):
    op = rec.get("op") or {}
    kind, task = op.get("op", ""), op.get("task_id")
    if not kind.startswith("rubric_") or task is None:
      continue
    cid = op.get("criterion_id") or op.get("new_id")
    key = (task, cid)
    undo = False
    if kind == "rubric_delete":
      undo = key in created
    for attr in ("text", "weight"):
      if kind in ("rubric_rewrite", "rubric_reweight") and op.get(attr) is not None:
        # earlier[-1] is the current value: setting it again is a no-op, not an undo.
        undo |= op[attr] in seen[(task, cid, attr)][:-1]
    if undo:
      out.append(rec)
    if kind in ("rubric_create", "rubric_merge"):
      created.add(key)
    for attr in ("text", "weight"):
      if attr in op and op[attr] is not None:
        seen[(task, cid, attr)].append(op[attr])
  return out


class RunData:
  """Everything the report reads from a run directory; absent parts are listed in missing."""

  def __init__(self, run_dir: str):
    self.run_dir = run_dir
    self.missing: list[str] = []
    path = os.path.join(run_dir, "metrics.jsonl")
    self.metrics = sorted((_flatten(r) for r in _read_jsonl(path)),
                          key=lambda r: r.get("step", 0)) if os.path.isfile(path) else []
    if not self.metrics:
      self.missing.append("metrics.jsonl (per-step reward and cost)")
    path = os.path.join(run_dir, "summary.json")
    self.summary = {}
    if os.path.isfile(path):
      with open(path, encoding="utf-8") as f:
        self.summary = json.load(f)
    else:
      self.missing.append("summary.json (held-out at start and end)")
    path = os.path.join(run_dir, "oracle.jsonl")
    self.oracle = _read_jsonl(path) if os.path.isfile(path) else []
    if not self.oracle:
      self.oracle = [{"step": r["step"], **{k: r[f"oracle/{k}"] for k in CLASSES}}
                     for r in self.metrics if all(f"oracle/{k}" in r for k in CLASSES)]
    if not self.oracle:
      self.missing.append("oracle.jsonl (oracle failure classes; run evaluate --groups)")
    path = _first(run_dir, ("harness_history.jsonl", "history.jsonl"))
    self.history = _read_jsonl(path) if path else []
    if path is None:
      self.missing.append("harness_history.jsonl (accepted harness updates)")
    path = _first(run_dir, ("evolver_candidates.jsonl", "candidates.jsonl"))
    self.candidates = _read_jsonl(path) if path else []
    if path is None:
      self.missing.append("evolver_candidates.jsonl (critic verdicts)")
    self.evals = []
    for p in sorted(glob.glob(os.path.join(run_dir, "eval*.json"))):
      with open(p, encoding="utf-8") as f:
        try:
          self.evals.append(json.load(f))
        except json.JSONDecodeError:
          self.missing.append(f"{os.path.basename(p)} (unreadable JSON)")

  def label_shares(self) -> list[dict]:
    """Per step, the attributor's criterion labels ("labels/<class>" counts) as shares."""
    rows = []
    for r in self.metrics:
      counts = {k[len("labels/"):]: _num(v) or 0.0 for k, v in r.items()
                if k.startswith("labels/")}
      total = sum(counts.values())
      if "step" in r and total:
        rows.append({"step": r["step"], **{k: v / total for k, v in counts.items()}})
    return rows

  def series(self, key: str) -> tuple[np.ndarray, np.ndarray]:
    pts = [(r["step"], _num(r.get(key))) for r in self.metrics if "step" in r]
    pts = [(s, v) for s, v in pts if v is not None]
    return (np.array([p[0] for p in pts], float), np.array([p[1] for p in pts], float))

  def heldout_points(self) -> list[tuple[int, float, float | None]]:
    """(step, held-out 0-100, mean OOD or None), one per step (later sources win)."""
    pts: dict[int, tuple[float, float | None]] = {}
    start, end = _num(self.summary.get("heldout_start")), _num(self.summary.get("heldout_end"))
    if start is not None:
      pts[0] = (_pct(start), None)
    for e in self.summary.get("heldout_evals") or []:
      if isinstance(e, dict) and isinstance(e.get("step"), int) and _num(e) is not None:
        pts[e["step"]] = (_pct(_num(e)), None)
    for s, v in zip(*self.series("heldout_reward")):
      pts[int(s) + 1] = (_pct(v), None)   # logged on the row of the step it follows
    if end is not None and "steps" in self.summary:
      pts[int(self.summary["steps"])] = (_pct(end), None)
    for e in self.evals:
      step, held = e.get("step"), e.get("heldout") or {}
      if not isinstance(step, int):
        continue
      h = _num(held.get("score")) if not held.get("limit") else None   # a subset: not comparable
      ood = _num((e.get("ood") or {}).get("ood_mean"))
      if h is None and step in pts:
        h = pts[step][0]
      if h is not None:
        pts[step] = (h, ood)
    return sorted((s, h, o) for s, (h, o) in pts.items())

  def step_seconds(self) -> dict[int, tuple[float, float]]:
    """step -> (RL seconds, evolver seconds)."""
    out = {}
    for r in self.metrics:
      if "step" not in r:
        continue
      nested = [k for k in r if k.startswith("time/")]
      if nested:
        rl = sum(_num(r[k]) or 0.0 for k in nested
                 if k not in ("time/evolver_s", "time/checkpoint_s"))
        ev = _num(r.get("time/evolver_s")) or 0.0
      else:
        rl = sum(_num(r.get(k)) or 0.0 for k in RL_COST)
        ev = _num(r.get("evolver_s")) or 0.0
      out[int(r["step"])] = (rl, ev)
    return out


def _bin(step: int, width: int) -> int:
  return (step // width) * width


def per_bin(data: RunData, width: int = 100) -> dict[int, dict[str, float]]:
  """Per bin of `width` steps: accepted ops per interface, reversals, guidance shares and
  cost, each scaled to 100 steps (so a short last bin is comparable)."""
  steps = sorted(data.step_seconds())
  if not steps:
    steps = sorted({int(r.get("step", 0)) for r in data.history})
  n_in = defaultdict(int)
  for s in steps:
    n_in[_bin(s, width)] += 1
  rows: dict[int, dict[str, float]] = {b: defaultdict(float) for b in n_in}
  reversed_ids = {id(r) for r in reversed_rubric_updates(data.history)}
  for rec in evolver_updates(data.history):
    b = _bin(int(rec.get("step", 0)), width)
    iface = _interface((rec.get("op") or {}).get("op", ""))
    if b in rows and iface:
      rows[b][f"accepted_{iface}"] += 1
      if id(rec) in reversed_ids:
        rows[b]["reversed_rubric"] += 1
      if (rec.get("op") or {}).get("op") == "add_guidance":
        rows[b][f"added_{rec['op'].get('field')}"] += 1
  for s, (rl, ev) in data.step_seconds().items():
    rows[_bin(s, width)]["rl_hours"] += rl / 3600
    rows[_bin(s, width)]["evolver_hours"] += ev / 3600
  for r in data.metrics:
    for f in FIELDS:
      v = _num(r.get(f"guidance/{f}"))
      if v is not None and "step" in r:
        rows[_bin(int(r["step"]), width)][f"share_{f}"] += v / n_in[_bin(int(r["step"]), width)]
  for b, row in rows.items():
    scale = 100.0 / n_in[b]
    for k in list(row):
      if not k.startswith("share_"):
        row[k] *= scale
  return {b: dict(rows[b]) for b in sorted(rows)}


def guidance_key(bins: dict) -> tuple[str, str]:
  """("share_", what) where metrics log mounted-field shares, else ("added_", what)."""
  if any(k.startswith("share_") for r in bins.values() for k in r):
    return "share_", "mean share of drawn tasks with the field mounted"
  return "added_", "accepted additions of the field per 100 steps (mounted shares not logged)"


def best_checkpoint(data: RunData) -> dict | None:
  pts = data.heldout_points()
  if not pts:
    return None
  use_ood = any(o is not None for _, _, o in pts)
  cand = [(o if use_ood else h, s) for s, h, o in pts if not use_ood or o is not None]
  score, step = max(cand, key=lambda x: (x[0], -x[1]))  # earliest step among ties
  secs = data.step_seconds()
  hours = sum(rl + ev for s, (rl, ev) in secs.items() if s < step) / 3600
  return {"step": int(step), "score": float(score), "hours": hours,
          "by": "mean OOD score" if use_ood else "held-out score"}


def _plots(data: RunData, out_dir: str, bins: dict) -> dict[str, str]:
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  made = {}

  def save(fig, name):
    path = os.path.join(out_dir, name)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    made[name] = path

  panels = [(rows, keys, title, unit) for rows, keys, title, unit in (
      (data.oracle, CLASSES, "Failure classes (oracle)", "% of judged response pairs"),
      (data.label_shares(), ATTRIBUTOR, "Attributor labels", "% of labelled criteria"))
             if rows]
  if panels:
    fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 4), squeeze=False)
    for ax, (rows, keys, title, unit) in zip(axes[0], panels):
      steps = [r["step"] for r in rows]
      for k in keys:
        ax.plot(steps, [100 * (_num(r.get(k)) or 0.0) for r in rows], marker="o", label=k)
      ax.set(xlabel="step", ylabel=unit, title=title)
      ax.legend(fontsize=8)
    save(fig, "failure_classes.png")
  steps, reward = data.series("reward")
  held = data.heldout_points()
  if len(steps) or held:
    fig, ax = plt.subplots(figsize=(7, 4))
    if len(steps):
      ax.plot(steps, 100 * reward, label="training reward x100")
    if held:
      ax.plot([s for s, _, _ in held], [h for _, h, _ in held], marker="o", label="held-out")
      ood = [(s, o) for s, _, o in held if o is not None]
      if ood:
        ax.plot(*zip(*ood), marker="s", label="OOD mean")
    ax.set(xlabel="step", ylabel="score (0-100)", title="Reward and held-out score")
    ax.legend(fontsize=8)
    save(fig, "reward_heldout.png")
  prefix, _ = guidance_key(bins)
  if bins and (data.history or prefix == "share_"):
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    x = np.arange(len(bins))
    labels = [str(b) for b in bins]
    for i, f in enumerate(FIELDS):
      a1.bar(x + (i - 1) * 0.25, [r.get(prefix + f, 0.0) for r in bins.values()], 0.25,
             label=f)
    a1.set(xticks=x, xticklabels=labels, xlabel="steps from", title="Guidance fields")
    a1.legend(fontsize=8)
    for i, iface in enumerate(INTERFACES):
      a2.bar(x + (i - 1) * 0.25, [r.get(f"accepted_{iface}", 0.0) for r in bins.values()],
             0.25, label=iface)
    a2.plot(x, [r.get("reversed_rubric", 0.0) for r in bins.values()], "k^",
            label="reversed rubric")
    a2.set(xticks=x, xticklabels=labels, xlabel="steps from", title="Accepted updates / 100 steps")
    a2.legend(fontsize=8)
    save(fig, "guidance_updates.png")
  if data.metrics:
    fig, ax = plt.subplots(figsize=(7, 4))
    x = np.arange(len(bins))
    rl = [r.get("rl_hours", 0.0) for r in bins.values()]
    ev = [r.get("evolver_hours", 0.0) for r in bins.values()]
    ax.bar(x, rl, label="RL")
    ax.bar(x, ev, bottom=rl, label="evolver")
    ax.set(xticks=x, xticklabels=[str(b) for b in bins], xlabel="steps from",
           ylabel="wall hours / 100 steps", title="Cost")
    ax.legend(fontsize=8)
    save(fig, "cost.png")
  return made


def _pct_or_dash(x: Any) -> float | str:
  v = _num(x)
  return "-" if v is None else 100 * v


def _fmt(x: Any, digits: int = 2) -> str:
  return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
  out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  out += ["| " + " | ".join(_fmt(c) for c in row) + " |" for row in rows]
  return out + [""]


def write_report(run_dir: str, *, out_dir: str | None = None, bin_width: int = 100) -> str:
  """Renders report.md (and its PNGs) into `out_dir` (default: run_dir); returns its path."""
  out_dir = out_dir or run_dir
  os.makedirs(out_dir, exist_ok=True)
  data = RunData(run_dir)
  bins = per_bin(data, bin_width)
  plots = _plots(data, out_dir, bins)
  lines = [f"# Run report: {os.path.basename(os.path.abspath(run_dir))}", ""]
  n = len(data.metrics)
  if n:
    _, reward = data.series("reward")
    lines += [f"{n} logged steps; training reward first {reward[0]:.4f}, last "
              f"{reward[-1]:.4f}." if len(reward) else f"{n} logged steps.", ""]
  lines += ["## Reward and held-out score", ""]
  held = data.heldout_points()
  if held:
    lines += _table(["step", "held-out (0-100)", "OOD mean"],
                    [(s, h, "-" if o is None else o) for s, h, o in held])
  else:
    lines += ["No held-out scores logged.", ""]
  if "reward_heldout.png" in plots:
    lines += ["![reward](reward_heldout.png)", ""]
  best = best_checkpoint(data)
  lines += ["## Best checkpoint", ""]
  lines += ([f"Best {best['by']} {best['score']:.2f} at step {best['step']}, after "
             f"{best['hours']:.3f} wall hours.", ""] if best else ["No scores to rank.", ""])
  for e in data.evals:
    if e.get("ood"):
      lines += [f"OOD at step {e.get('step', '?')}:", ""]
      lines += _table(["benchmark", "metric", "score", "items"],
                      [(k, v.get("metric", ""), v.get("score"), v.get("num_items"))
                       for k, v in e["ood"].items() if isinstance(v, dict)])
  lines += ["## Failure classes (oracle)", ""]
  if data.oracle:
    lines += _table(["step"] + list(CLASSES),
                    [[r["step"]] + [_pct_or_dash(r.get(k)) for k in CLASSES]
                     for r in data.oracle])
    lines += ["Shares in % of judged pairs; agree = reward-oracle agreement.", ""]
    if "failure_classes.png" in plots:
      lines += ["![failure classes](failure_classes.png)", ""]
  else:
    lines += ["Not available.", ""]
  labels = data.label_shares()
  if labels:
    shown = labels if len(labels) <= 12 else labels[::max(1, len(labels) // 10)] + labels[-1:]
    lines += ["Attributor labels (the evolver's own per-criterion view, not the oracle), % of "
              "labelled criteria:", ""]
    lines += _table(["step"] + list(ATTRIBUTOR),
                    [[r["step"]] + [100 * r.get(k, 0.0) for k in ATTRIBUTOR] for r in shown])
  if "failure_classes.png" in plots and not data.oracle:
    lines += ["![failure classes](failure_classes.png)", ""]
  lines += ["## Harness updates, guidance and cost per 100 steps", ""]
  if bins:
    prefix, what = guidance_key(bins)
    lines += _table(["steps from", "rubric", "guidance", "sampling", "reversed rubric",
                     "criterion", "reference", "critique", "RL h", "evolver h"],
                    [[b, r.get("accepted_rubric", 0.0), r.get("accepted_guidance", 0.0),
                      r.get("accepted_sampling", 0.0), r.get("reversed_rubric", 0.0)]
                     + [r.get(prefix + f, 0.0) for f in FIELDS]
                     + [r.get("rl_hours", 0.0), r.get("evolver_hours", 0.0)]
                     for b, r in bins.items()])
    lines += [f"Updates: accepted harness ops per 100 steps. Guidance columns: {what}. "
              "Hours: wall hours per 100 steps (x hosts for cluster-hours).", ""]
    accepted_rubric = sum(1 for r in evolver_updates(data.history)
                          if _interface((r.get("op") or {}).get("op", "")) == "rubric")
    rev = len(reversed_rubric_updates(data.history))
    if accepted_rubric:
      lines += [f"Reversed rubric updates: {rev} of {accepted_rubric} "
                f"({100 * rev / accepted_rubric:.1f}%).", ""]
    if data.candidates:
      verdicts = defaultdict(int)
      for c in data.candidates:
        verdicts[c.get("verdict", "?")] += 1
      lines += ["Critic verdicts: " + ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items())),
                ""]
    if "guidance_updates.png" in plots:
      lines += ["![updates](guidance_updates.png)", ""]
    if "cost.png" in plots:
      lines += ["![cost](cost.png)", ""]
  else:
    lines += ["Not available.", ""]
  if data.missing:
    lines += ["## Missing", ""] + [f"- {m}" for m in data.missing] + [""]
  path = os.path.join(out_dir, "report.md")
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines))
  return path
