"""One check: a config on a topology -> a Report (the table `python -m harnessrl_jax.aot`
prints, and its JSON)."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import jax

from harnessrl_jax.aot import check as check_lib
from harnessrl_jax.aot import programs as programs_lib
from harnessrl_jax.aot import topology as topology_lib
from harnessrl_jax.config import validate
from harnessrl_jax.errors import ConfigError
from harnessrl_jax.judges.config import JudgeConfig
from harnessrl_jax.models import plan as plan_lib
from harnessrl_jax.models.architecture import ModelConfig
from harnessrl_jax.models.config import ModelSettings
from harnessrl_jax.rollout.config import RolloutConfig

GIB = 2**30
PROGRAMS = ("train_step", "logprobs", "rollout", "engine_prefill", "engine_generate")
ENGINE = ("engine_prefill", "engine_generate")


@dataclasses.dataclass(frozen=True)
class Report:
  """What one check compiled and found."""

  config: str
  topology: str
  device_kind: str
  devices: int
  hosts: int
  hbm_bytes: int
  budget_bytes: int
  memory_fraction: float
  bf16_flops: float            # per device
  policy: dict[str, Any]       # architecture, parameters, mesh, remat
  results: tuple[check_lib.Result, ...]

  def fits(self, r: check_lib.Result) -> bool:
    return not r.error and r.peak <= self.budget_bytes

  def ideal_s(self, r: check_lib.Result) -> float:
    """The program's model FLOPs at the bf16 peak of every device it runs on."""
    return r.flops / (r.devices * self.bf16_flops)

  def failure(self) -> str:
    """One line naming the first program of the run that does not fit; '' when all do."""
    for r in self.results:
      if r.in_run and not self.fits(r):
        why = (f"the compiler refused it ({r.error})" if r.error else
               f"peak {r.peak / GIB:.1f} GiB per device > budget {self.budget_bytes / GIB:.1f}"
               f" GiB ({self.memory_fraction:.0%} of {self.hbm_bytes / GIB:.1f} GiB)")
        fix = ("fewer judge.max_concurrency slots or a bfloat16 judge.model" if r.name in ENGINE
               else "--config.rl.micro_batch_size, --config.model.remat=True or a larger mesh")
        return f"does not fit: {r.name} on {self.topology}: {why}; try {fix}"
    return ""

  def to_json(self) -> dict[str, Any]:
    out = {k: v for k, v in dataclasses.asdict(self).items() if k != "results"}
    out["results"] = []
    for r in self.results:
      row = r.to_json()
      row["fits"] = self.fits(r)
      row["headroom_bytes"] = self.budget_bytes - r.peak
      row["ideal_s"] = self.ideal_s(r)
      out["results"].append(row)
    out["fits"] = not self.failure()
    return out


def check(config: Any, constants: Mapping[str, Any], topology: str, *, config_name: str = "",
          memory_fraction: float | None = None, only: Sequence[str] = (),
          policy_config: str = "", judge_config: str = "") -> Report:
  """Compiles `config`'s programs (all, or `only` these) for `topology`."""
  unknown = sorted(set(only) - set(PROGRAMS))
  if unknown:
    raise ConfigError(f"--programs: unknown {unknown}; choose from {list(PROGRAMS)}")
  if memory_fraction is not None and not 0 < memory_fraction <= 1:
    raise ConfigError(f"--memory_fraction={memory_fraction}: must be in (0, 1]")
  topo = topology_lib.parse_topology(topology)
  devices = topology_lib.compile_only_devices(topo)
  hosts = len({d.process_index for d in devices})
  judged_by_engine = JudgeConfig.from_config(config.judge, check=False).text_backend == "jetstream"
  # The engine's programs by default only where the run's judge is our JetStream engine.
  wanted = set(only or [p for p in PROGRAMS if p not in ENGINE or judged_by_engine])
  learner = bool(wanted - set(ENGINE))
  # The learner's mesh must fit the topology; the engine alone runs on one of its devices.
  validate(config, device_count=len(devices) if learner else None, process_count=hosts)
  programs, policy, source = [], None, ""
  if learner:
    arch, source = plan_lib.policy_architecture(config, constants, policy_config)
    policy = programs_lib.build_policy(config, arch, devices)
    programs = [p for p in programs_lib.train_programs(config, policy) if p.name in wanted]
    if "rollout" in wanted:
      programs.append(programs_lib.rollout_program(config, policy))
  if wanted & set(ENGINE):
    judge_arch, judge_source = judge_architecture(config, constants, judge_config)
    m = ModelSettings.from_config(config.judge.model, check=False)
    judge_arch = judge_arch.replace(dtype=m.dtype, param_dtype=m.param_dtype)
    programs += [p for p in programs_lib.engine_programs(config, judge_arch, devices[0],
                                                         in_run=judged_by_engine,
                                                         source=judge_source)
                 if p.name in wanted]
  results = []
  for p in programs:   # minutes each at paper scale: say what is compiling
    print(f"compiling {p.name} for {topo.name} ...", file=sys.stderr, flush=True)
    results.append(check_lib.compile_program(p))
    print(f"  {p.name}: {results[-1].compile_s:.1f} s", file=sys.stderr, flush=True)
  results = tuple(results)
  kind = topo.kind
  fraction = kind.default_fraction if memory_fraction is None else memory_fraction
  return Report(
      config=config_name, topology=topo.name, device_kind=devices[0].device_kind,
      devices=len(devices), hosts=hosts, hbm_bytes=kind.hbm_bytes,
      budget_bytes=topology_lib.usable_bytes(kind, fraction), memory_fraction=fraction,
      bf16_flops=kind.bf16_flops, policy=_policy_summary(config, policy, source)
      if policy is not None else {}, results=results)


def _policy_summary(config: Any, policy: programs_lib.Policy, source: str) -> dict[str, Any]:
  mesh = ({"data": 1, "fsdp": 1, "tensor": 1} if policy.mesh is None
          else dict(policy.mesh.shape))
  return {"architecture": source, "family": policy.cfg.family,
          "parameters": int(sum(x.size for x in jax.tree.leaves(policy.params))),
          "mesh": mesh, "remat": policy.cfg.remat, "dtype": policy.cfg.dtype,
          "param_dtype": policy.cfg.param_dtype,
          "samples": RolloutConfig.from_config(config.rollout, check=False).num_samples}


def judge_architecture(config: Any, constants: Mapping[str, Any],
                       judge_config: str = "") -> tuple[ModelConfig, str]:
  """The judge model's architecture: --judge_config, the config file's JUDGE_HF_CONFIG, or
  config.judge.model read as models.plan reads config.model."""
  if judge_config:
    return ModelConfig.from_hf(plan_lib.read_hf_config(judge_config)), judge_config
  if "JUDGE_HF_CONFIG" in constants:
    return (ModelConfig.from_hf(constants["JUDGE_HF_CONFIG"]),
            "the config file's JUDGE_HF_CONFIG")
  arch, source = plan_lib.policy_architecture(_JudgeModel(config.judge.model), {})
  return arch, source


@dataclasses.dataclass(frozen=True)
class _JudgeModel:
  """config.judge.model where `policy_architecture` reads config.model."""

  model: Any


def _gib(n: int) -> str:
  return f"{n / GIB:9.2f}"


def format_report(report: Report) -> str:
  """The table (see __main__'s docstring for the columns)."""
  p = report.policy
  lines = [
      f"{report.config or 'config'} on {report.topology}: {report.devices} x "
      f"{report.device_kind} on {report.hosts} host(s), {report.hbm_bytes / GIB:.1f} GiB "
      f"each; budget {report.memory_fraction:.0%} = {report.budget_bytes / GIB:.1f} GiB"]
  if p:
    mesh = " x ".join(f"{a} {s}" for a, s in p["mesh"].items())
    lines.append(
        f"policy {p['family']}, {p['parameters'] / 1e9:.2f} B parameters ({p['architecture']});"
        f" mesh {mesh}; remat {'on' if p['remat'] else 'off'}; {p['param_dtype']} parameters, "
        f"{p['dtype']} activations")
  lines += [
      "",
      f"{'program':<16}{'compile s':>10}{'args GiB':>10}{'out GiB':>10}{'temp GiB':>10}"
      f"{'peak GiB':>10}{'of budget':>10}  {'fits':<5}{'TFLOP':>10}{'ideal s':>9}  collectives",
  ]
  for r in report.results:
    fits = "yes" if report.fits(r) else "NO"
    if not r.in_run:
      fits += "*"
    coll = ", ".join(f"{k} {n}" for k, n in r.collectives.items()) or "-"
    ideal = report.ideal_s(r)
    if r.error:
      lines.append(f"{r.name:<16}{r.compile_s:10.1f}{'':>40}{_gib(r.peak)}"
                   f"{r.peak / report.budget_bytes:10.0%}  {fits:<5}{r.flops / 1e12:10.1f}"
                   f"{ideal:9.3f}  refused: {r.error}")
      continue
    lines.append(f"{r.name:<16}{r.compile_s:10.1f}{_gib(r.argument)} {_gib(r.output)} "
                 f"{_gib(r.temp)} {_gib(r.peak)}{r.peak / report.budget_bytes:10.0%}  "
                 f"{fits:<5}{r.flops / 1e12:10.1f}{ideal:9.3f}  {coll}")
  lines.append("")
  for r in report.results:
    lines.append(f"  {r.name}: {r.note}")
  if any(not r.in_run for r in report.results):
    lines.append("  * not part of this run's verdict (see its note)")
  lines.append("  ideal s: the model's FLOPs at the bf16 peak of the devices it runs on (a bound); "
               "collectives: instructions in the HLO, a loop body's counted once")
  failure = report.failure()
  lines.append(failure or f"fits: every program the run compiles peaks within "
                          f"{report.budget_bytes / GIB:.1f} GiB per device")
  return "\n".join(lines)
