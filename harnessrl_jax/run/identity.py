"""Which config fields define the experiment and which are operational.

A run's identity is its experiment part: the fields whose values decide what the run
computes (data, models, sampling, judging protocol, learner, harness, memory, evolver, step
count, held-out subset, seed). Changing one mid-run would make a different run, so a
workdir with a checkpoint refuses it (`checkpoint.guard_config`) and `config.json` keeps
the experiment part's digest.

The operational fields (`OPERATIONAL`) say where the run's services are and how it talks
to them and reports: endpoints, key variable names, time-outs, retries, back-off,
concurrency, cache sizes, the judge failure limits, logging / evaluation / checkpoint
cadence. They may change when a run resumes (a judge that moved, a longer time-out, a
larger `judge.max_unscored_share` after a stop); `checkpoint.record_config` logs each
change with the step it took effect at. None of them changes what a step computes from the
verdicts it gets: the retry and limit fields only decide whether a cell gets a verdict or
stays unscored (unscored cells are excluded from rewards) and whether the run stops, and
the cadence fields decide what is evaluated, saved and logged, never the trajectory
(parameters, harness, draws; tests/run/test_train_resume.py resumes with changed ones
and ends bit-identical to an uninterrupted run).

Settings that only look like performance knobs but change array shapes (batch sizes,
prompt buckets, decode phases, chunking, the mesh) are experiment fields: they can change
float rounding, and a run promises bit-identical resumes.

Every leaf of `config.base_config()` not in `OPERATIONAL` is an experiment field, so a new
field is one until it is listed there with its reason (a change is refused: the safe side).
docs/operational.md lists the operational fields and why. A field that has left the tree
but that recorded runs hold is in `RETIRED`; one that joined it after runs were recorded
without it, with the value that reproduces them, in `ADDED`.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from harnessrl_jax.errors import refuse

# field path -> why it may change on resume (docs/operational.md shows this table)
OPERATIONAL: Mapping[str, str] = MappingProxyType({
    # where the services and caches are
    "judge.openai.base_url": "where the server is; the judge is `judge.openai.model`",
    "judge.openai.api_key_env": "the name of the variable that holds the key",
    "judge.jetstream.address": "where the server is; its model is `judge.model`",
    "judge.jetstream.max_prompt_tokens": (
        "the server's `--max_prefill_length`, raised together with it; a longer prompt is "
        "refused (an unscored cell), never cut"),
    "judge.endpoints": ("where the servers of a pool are (`judge.openai.base_url` / "
                        "`judge.jetstream.address` for one); each serves the judge's model"),
    "model.cache_dir": ("where converted weights are cached; the weights are named by "
                        "source, path and seed"),
    "judge.model.cache_dir": "the same for the judge's model",
    # how requests are waited for and retried
    "judge.timeout_s": "how long a request is waited for",
    "judge.transport_retries": "how often a failed request is retried",
    "judge.backoff_s": "the first wait between retries",
    "judge.backoff_max_s": "the longest wait between retries",
    "judge.parse_retries": ("re-asks of an unreadable answer; a parsed verdict is the "
                            "judge's either way"),
    "judge.max_concurrency": "requests in flight; each is answered alone",
    "judge.pool.max_in_flight": (
        "requests in flight per endpoint of a pool; each is answered alone"),
    "judge.pool.failure_threshold": (
        "when a pool takes a failing endpoint out; its requests are retried on the others"),
    "judge.pool.cooldown_s": "how long a failing endpoint stays out before it is probed",
    "judge.cache_size": (
        "verdicts kept in memory; the cache is not checkpointed (a resumed run starts with "
        "it empty and stays bit-identical)"),
    # limits: when a run stops cleanly (before the step's update)
    "judge.max_unscored_share": (
        "the learner's stop limit on cells without a verdict; the stop message recommends "
        "raising it"),
    "evolver.max_unscored_share": (
        "the same stop limit for the critic's cells; below it a candidate that lost cells is "
        "unmeasurable"),
    # reporting cadence
    "train.log_every": "progress lines on the terminal",
    "train.eval_every": "when held-out evaluations run; they feed nothing back into training",
    "train.checkpoint_every": "when checkpoints are saved; a resumed run is bit-identical",
    "train.keep_checkpoints": "how many checkpoints stay on disk",
    "train.oracle_groups_every": "which steps' groups go to `oracle_groups.jsonl`",
})


# Fields a run recorded before they left the tree -> the value they must hold for the
# record to mean what the current tree means (given the record's other fields). A recorded
# config holding one is read with the field dropped (`as_current_tree`): resume, evaluation
# and identity checks of older runs go on.
RETIRED: Mapping[str, Callable[[Mapping[str, Any]], Any]] = MappingProxyType({
    # the learner's temperature: one number with the sampler's since (validate required it)
    "rl.temperature": lambda leaves: leaves.get("rollout.temperature"),
    # the driver always ran the evolver synchronously (validate refused True)
    "evolver.async_evolver": lambda leaves: False,
})

# Fields that joined the tree after runs were recorded without them -> the value under
# which the current code computes what the code before the field computed. A recorded config lacking one is read with that value filled in
# (`as_current_tree`), so an older run resumes and is evaluated under a newer version while
# the new option stays at it; any other value is a change like any other. A new field not
# listed here is absent from older records, which reads as a change (the safe side): list
# it only once old and new code were shown to give the same records at that value.
ADDED: Mapping[str, Any] = MappingProxyType({
    # issue 46's options; records equal at f59676e and after (docs/testbed.md, "Power first")
    "evolver.accept_test": "band",       # the bands were the only rule
    "evolver.accept_alpha": 0.05,        # read by accept_test="ttest" only
    "evolver.guidance_own_memory": False,
    "evolver.intervention_edits": [],
    "evolver.intervention_overturns": True,
    "evolver.intervention_untested_stands": False,
    "evolver.intervention_min_words": 0,
})


def _section(tree: dict[str, Any], parents: list[str]) -> dict[str, Any] | None:
  for p in parents:
    tree = tree.get(p) if isinstance(tree, dict) else None
  return tree if isinstance(tree, dict) else None


def as_current_tree(tree: Mapping[str, Any]) -> dict[str, Any]:
  """A recorded config tree in the current tree's fields (a deep copy): its `RETIRED`
  fields dropped, the `ADDED` fields it lacks filled in, the others as recorded.

  Raises:
    ConfigError: naming each retired field whose recorded value differs from the one the
      current tree implies (that run computed something this version cannot).
  """
  leaves = flat(tree)
  problems = [f"recorded config.{path} = {leaves[path]!r}: this field is gone (now "
              f"{implied(leaves)!r} for the recorded config); this version cannot reproduce "
              "that run" for path, implied in RETIRED.items()
              if path in leaves and leaves[path] != implied(leaves)]
  refuse(problems)
  out = copy.deepcopy(dict(tree))
  for path in RETIRED:
    *parents, name = path.split(".")
    section = _section(out, parents)
    if section is not None:
      section.pop(name, None)
  for path, value in ADDED.items():
    *parents, name = path.split(".")
    section = _section(out, parents)
    if section is not None and path not in leaves:
      section[name] = copy.deepcopy(value)
  return out


def config_tree(config) -> dict[str, Any]:
  """A ConfigDict as plain JSON values (tuples as lists), the form config.json stores."""
  return json.loads(config.to_json_best_effort())


def flat(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
  """{dotted field path: leaf value} of a nested mapping."""
  out = {}
  for k, v in tree.items():
    if isinstance(v, Mapping):
      out.update(flat(v, f"{prefix}{k}."))
    else:
      out[f"{prefix}{k}"] = v
  return out


def is_operational(path: str) -> bool:
  return path in OPERATIONAL


def experiment_digest(tree: Mapping[str, Any]) -> str:
  """SHA-256 of the experiment part of a config tree (canonical JSON of its flat leaves)."""
  part = {k: v for k, v in flat(tree).items() if not is_operational(k)}
  return hashlib.sha256(json.dumps(part, sort_keys=True).encode("utf-8")).hexdigest()


@dataclasses.dataclass(frozen=True)
class Change:
  """One field whose value differs between two config trees (None: absent there)."""

  field: str
  old: Any
  new: Any

  @property
  def operational(self) -> bool:
    return is_operational(self.field)

  def __str__(self) -> str:
    return f"{self.field}: {self.old!r} -> {self.new!r}"


def differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[Change, ...]:
  """Every field whose value differs between two config trees, sorted by path; `old` may
  be a recorded tree of another version (read by `as_current_tree`: retired fields dropped
  or refused, added ones filled in).
  """
  a, b = flat(as_current_tree(old)), flat(new)
  return tuple(Change(k, a.get(k), b.get(k))
               for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k))


def shown(changes, limit: int = 6) -> str:
  """The first `limit` changes on one line, `...` when there are more."""
  changes = list(changes)
  return ", ".join(map(str, changes[:limit])) + (" ..." if len(changes) > limit else "")
