"""The names a run directory speaks, in one place: its file names, the fields of the rows
and summaries written into them, and the vocabularies those rows use (guidance fields,
attributor labels, routes and interfaces, critic verdicts, oracle classes). Writers
(train.py, run/metrics.py, eval/evaluate.py, run/checkpoint.py) and readers (eval/report.py, audit.py)
import these names instead of spelling them. A leaf module: standard library only.

A run directory (`python -m harnessrl_jax.train --workdir=DIR`) holds the files of
WORKDIR_FILES (below; attributions.jsonl rows: {STEP: 0-based step, "task_id",
"criterion_id", "label", "confidence", "backend", "signals", with evolver.intervention
"correlational_label" and the edits' flips}; heldout_responses.jsonl rows: {STEP:
completed steps, "task_id", "response"}),
and, written by `python -m harnessrl_jax.eval --run=DIR`:
  eval_step<N>.json         held-out / OOD / oracle results of the checkpoint after N steps
  oracle.jsonl              per-step oracle class shares (eval/oracle.shares_by_step rows)
"""

from __future__ import annotations

import re
import textwrap

# ---- file names

CONFIG = "config.json"
CONFIG_CHANGES = "config_changes.jsonl"
CHECKPOINTS = "checkpoints"
MEMORY = "memory"
METRICS = "metrics.jsonl"
TENSORBOARD = "tb"
HISTORY = "harness_history.jsonl"
CANDIDATES = "evolver_candidates.jsonl"
ATTRIBUTIONS = "attributions.jsonl"
GROUPS = "oracle_groups.jsonl"
HELDOUT_RESPONSES = "heldout_responses.jsonl"
ORACLE = "oracle.jsonl"
SUMMARY = "summary.json"
REPORT = "report.md"
EVAL_GLOB = "eval_step*.json"
_EVAL_NAME = re.compile(r"eval_step(\d+)\.json")
LEDGER = "records_ledger.jsonl"

# The one list of what a training run's workdir holds (train.py's docstring is built from
# it, docs/operational.md repeats it, tests/run/test_audit_files.py checks all three and
# the audit's coverage): (name, what it holds, how `python -m harnessrl_jax.audit` covers it).
WORKDIR_FILES = (
    (CONFIG, "the config and its experiment part's digest", "file"),
    (CONFIG_CHANGES, "each operational field changed on a resume, with its step", "lines"),
    (CHECKPOINTS + "/", "Orbax checkpoints; each one's metadata holds the ledger's and the "
     "history's heads", "checkpoint"),
    (MEMORY + "/", "the evolver memory at each checkpoint", "not covered"),
    (HISTORY, "every applied harness operation, hash-chained (history.py)", "lines"),
    (METRICS, "one row per step (run_files' row fields)", "lines"),
    (TENSORBOARD + "/", "TensorBoard scalars of the rows, and the ledger's head at each "
     "checkpoint", "not covered"),
    (CANDIDATES, "every measured candidate, accepted or not", "lines"),
    (ATTRIBUTIONS, "every attributor label, a row per (step, task, criterion)", "lines"),
    (GROUPS, "logged groups for the oracle analysis (eval/oracle.group_record)", "lines"),
    (HELDOUT_RESPONSES, "each held-out evaluation's greedy responses, a row per task",
     "lines"),
    (SUMMARY, "the run's summary (run_files' summary fields)", "file"),
    (LEDGER, "one hash chain over every record above (run_ledger.py)", "chain"),
    (REPORT, "the report, with its *.png (eval/report.py)", "not covered"),
)
# The files whose every line gets a ledger entry, and those entered whole when written.
LEDGERED_LINES = tuple(n for n, _, how in WORKDIR_FILES if how == "lines")
LEDGERED_FILES = tuple(n for n, _, how in WORKDIR_FILES if how == "file")


def workdir_listing(indent: int = 2) -> str:
  """WORKDIR_FILES as the aligned lines of a docstring."""
  width = max(len(n) for n, _, _ in WORKDIR_FILES) + 2
  out = []
  for n, what, how in WORKDIR_FILES:
    text = what + ("" if how == "not covered" else f" [audit: {how}]")
    lines = textwrap.wrap(text, 88 - indent - width)
    out.append(" " * indent + f"{n:<{width}}{lines[0]}")
    out.extend(" " * (indent + width) + l for l in lines[1:])
  return "\n".join(out)


def eval_file(step: int) -> str:
  """The evaluation file of the checkpoint after `step` completed steps."""
  return f"eval_step{int(step)}.json"


def eval_step_of(name: str) -> int | None:
  """The step an evaluation file's name gives, None for any other name."""
  m = _EVAL_NAME.fullmatch(name)
  return int(m.group(1)) if m else None


# ---- config.json: {CONFIG_TREE: the whole config, operational values as of the last start,
# EXPERIMENT_SHA256: SHA-256 of its experiment part (config_identity.experiment_digest)}

CONFIG_TREE = "config"
EXPERIMENT_SHA256 = "experiment_sha256"

# ---- config_changes.jsonl: one row per changed operational field, {STEP: the 0-based step
# from which the new value holds (the resumed checkpoint's), CHANGED_FIELD: its dotted path,
# OLD_VALUE, NEW_VALUE}

CHANGED_FIELD, OLD_VALUE, NEW_VALUE = "field", "old", "new"

# ---- a checkpoint's metadata (train.py writes it; resume and audit.py check it)

HISTORY_HEAD = "history_head"   # hash of the last history record it covers (history.py)
LEDGER_LEN = "ledger_len"       # records_ledger.jsonl entries up to its own (run_ledger.py)
LEDGER_HEAD = "ledger_head"     # the hash of the last of them

# ---- vocabularies

GUIDANCE_FIELDS = ("criterion", "reference", "critique")   # harness.FIELDS, columns [N, 3]
ATTRIBUTOR_LABELS = ("blind", "saturated", "spurious", "agree")
# Attributor label -> the interface whose operations fix it ("agree" needs no fix).
ROUTES = {"blind": "guidance", "saturated": "sampling", "spurious": "rubric"}
INTERFACES = ("rubric", "guidance", "sampling")
VERDICT = "verdict"   # the critic's, on each evolver_candidates.jsonl row
# "unmeasurable": the judge gave no verdict on some cell of the candidate's measurement (or
# on any cell of a criterion it changes), so there is no Delta to accept or reject it by.
VERDICTS = ("accepted", "rejected", "unmeasurable", "noop")
ACCEPTED, REJECTED, UNMEASURABLE, NOOP = VERDICTS
ORACLE_CLASSES = ("blind", "saturated", "spurious_reversed", "spurious_unordered", "agree")


def interface_of(op_kind: str) -> str | None:
  """The interface a harness operation kind changes; None for the run's own bookkeeping
  (set_ladder, enforce_schedule)."""
  if op_kind.startswith("rubric_"):
    return "rubric"
  if op_kind in ("add_guidance", "drop_guidance"):
    return "guidance"
  if op_kind.startswith("sampling_"):
    return "sampling"
  return None


# Harness-history "measurement" of an op the run applied itself, not the evolver's critic.
SOURCE = "source"
SOURCE_CALIBRATION = "calibration"
SOURCE_SCHEDULE = "guidance schedule"

# ---- an unscored record: the cells of a judged batch (a training step's, a held-out
# evaluation's, the critic's measurements of a step, a calibration pass's) that the judge
# tried and got no verdict for, by cause (judges/score_matrix.Unscored). Cells without a
# check under a judge without an LLM are unscored by design and in none of these counts.

COUNT = "count"       # cells without a verdict
SHARE = "share"       # count / cells (0 when cells is 0): what the stop limits compare
CELLS = "cells"       # cells the judge tried
CAUSES = "causes"     # {cause: cells}, causes below with a nonzero count
# transport: the request failed through its retries (time-outs, connections, 5xx, garbage
# bodies); parse: the answers stayed unreadable through judge.parse_retries re-asks;
# refused: the server refused the request for good (a 4xx, a prompt too long).
UNSCORED_CAUSES = ("transport", "parse", "refused")

# ---- metrics.jsonl: one row per step, written once, complete, after the step's checkpoint

STEP = "step"                     # 0-based step t
REWARD = "reward"                 # mean rubric reward (in [.., 1]) of valid rollouts, or null
UNSCORED = "unscored"             # the learner's judge failures (an unscored record, below)
CRITIC_UNSCORED = "critic_unscored"   # the critic's, summed over its measurements of the step
RESPONSE_LEN = "response_len"     # mean response tokens
TIME = "time"                     # {phase: wall seconds}, the phases below
EVOLVER = "evolver"               # {verdict: candidates}, all routes together
LABELS = "labels"                 # {attributor label: criteria so labelled}
HARNESS = "harness"               # digest prefix of H_{t+1}
TASKS = "tasks"                   # the drawn task indices
GUIDANCE = "guidance"             # {guidance field: share of drawn tasks with it mounted}
HELDOUT_SCORE = "heldout_score"   # held-out points after t + 1 steps (evaluated steps only)
HELDOUT_UNSCORED = "heldout_unscored"   # that evaluation's unscored record
POSITIONS = "positions"           # {ROLLOUT_S | UPDATE_S | CRITIC: {COMPUTED: n, REAL: n}}:
                                  # token positions one pass of that phase computed (CRITIC:
                                  # its re-samples), and the real tokens among them (the rest
                                  # is padding)
COMPUTED, REAL = "computed", "real"
ENDPOINTS = "endpoints"           # with a judge endpoint pool only: {endpoint: its counters
                                  # since this process started (judges/pool.PoolClient.stats)}
# The update's statistics (loss, kl, ...) sit flat beside these fields.

ROLLOUT_S, JUDGE_S, UPDATE_S = "rollout_s", "judge_s", "update_s"
RL_TIMES = (ROLLOUT_S, JUDGE_S, UPDATE_S)   # the RL step (loop.StepRecord.timings)
EVOLVER_S = "evolver_s"
CHECKPOINT_S = "checkpoint_s"               # only on rows after which a checkpoint was saved
HELDOUT_S = "heldout_s"                     # only on rows after which the held-out set was scored

# ---- summary.json (also in every checkpoint's metadata)

HELDOUT_START = "heldout_start"   # held-out result before any update
HELDOUT_EVALS = "heldout_evals"   # [{STEP: completed steps, SCORE: points, UNSCORED: record}]
HELDOUT_END = "heldout_end"       # held-out result after the last step
UPDATES = "updates"               # {route: {verdict: candidates}}
# LABELS: {attributor label: criteria so labelled}, summed over steps
LABEL_SHARES = "label_shares"     # {"first" | "last": {label: share}} of labelled steps
COST = "cost"                     # the keys below
RL_S, CRITIC_ROLLOUTS, CRITIC_JUDGE_CELLS = "rl_s", "critic_rollouts", "critic_judge_cells"
# COST also holds EVOLVER_S and POSITIONS (summed over steps).
# UNSCORED: {LEARNER | CRITIC: unscored record summed over the steps}
LEARNER, CRITIC = "learner", "critic"
STEPS = "steps"
SKIPPED_UPDATES = "skipped_updates"
HARNESS_DIGEST = "harness_digest"
PARAMS_SHA256 = "params_sha256"
BEST_CHECKPOINT = "best_checkpoint"   # the kept checkpoint with the best held-out score
FINISHED = (STEPS, SKIPPED_UPDATES, HARNESS_DIGEST, PARAMS_SHA256, BEST_CHECKPOINT)

# ---- a held-out result (eval/heldout.py), in summary.json and eval_step<N>.json

SCORE = "score"           # points 0-100 (Lambda = 100): mean over domains, or null
BY_DOMAIN = "by_domain"   # {domain: points or null}
LIMIT = "limit"           # present on an evaluation of a subset: not a held-out point
RESPONSES = "responses"   # {task id: response}; the driver moves it to heldout_responses.jsonl
# UNSCORED: the evaluation's unscored record

# ---- eval_step<N>.json

EVAL_HELDOUT = "heldout"  # a held-out result
EVAL_OOD = "ood"          # {benchmark: {METRIC, SCORE, NUM_ITEMS, ...}, OOD_MEAN: points}
EVAL_ORACLE = "oracle"    # eval/oracle.overall of the logged groups
OOD_MEAN = "ood_mean"
METRIC = "metric"
NUM_ITEMS = "num_items"

# ---- row fields the testbed analysis reads (eval/testbed.py): heldout_responses.jsonl,
# oracle_groups.jsonl (eval/oracle.group_record; RESPONSES: its J responses),
# evolver_candidates.jsonl (CandidateRecord.to_json), attributions.jsonl

TASK_ID, CRITERION_ID = "task_id", "criterion_id"
RESPONSE = "response"             # heldout_responses.jsonl: the greedy response
GROUP_TASK = "task"               # oracle_groups.jsonl: the task as drawn (its seed rubric)
ROUTE = "route"                   # evolver_candidates.jsonl
OFFERED_FROM = "offered_from"     # evolver_candidates.jsonl: the task a repair came from
LABEL = "label"                   # attributions.jsonl: the attributor label used
SIGNALS = "signals"               # attributions.jsonl: the label's evidence, and
CORRELATIONAL_LABEL = "correlational_label"   # the label before the interventional test

# ---- an experiment's directory (harnessrl_jax/experiment.py): its report
# (eval/experiment_report.py) is REPORT with its PNGs, and REPORT_JSON, the same numbers
REPORT_JSON = "report.json"
