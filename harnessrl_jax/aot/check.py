"""Compiling the run's programs for a topology and reading what XLA planned: per-device
memory (`compiled.memory_analysis()`), the collectives in the optimised HLO, the verdict.

Memory is per device, as XLA's buffer assignment has it: arguments (the state and batch
shards a device holds), outputs, aliased bytes (donated inputs reused as outputs), temporaries
(activations, gradients in flight, gathered weights), and the peak of live bytes over the
program's schedule. A GPU compile whose peak exceeds the device still succeeds (XLA only
logs), so the verdict compares the peak with `topology.usable_bytes` itself; a TPU compile
that does not fit fails with RESOURCE_EXHAUSTED, reported here as a row that does not fit.

Collectives are counted in the HLO text, one per instruction: an all-gather inside the
layer scan or a decode loop counts once however often it runs.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections import Counter
from typing import Any

from harnessrl_jax.aot.programs import Program

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all",
               "collective-permute", "collective-broadcast")
# `%x = bf16[..] all-gather-start(...)`: async pairs count once, by their start.
_COLLECTIVE = re.compile(r"=\s*[^=]*?\b(" + "|".join(COLLECTIVES) + r")(?:-start)?\(")
# libtpu: "Used 97.51G of 95.74G hbm. Exceeded hbm capacity by 1.77G."
_TPU_USED = re.compile(r"Used\s+([\d.]+)([KMGT])\s+of\s+([\d.]+)([KMGT])\s+hbm")
_UNITS = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


@dataclasses.dataclass(frozen=True)
class Result:
  """One program compiled (or refused) for one topology; bytes are per device."""

  name: str
  in_run: bool
  note: str
  compile_s: float
  argument: int
  output: int
  alias: int
  temp: int
  peak: int
  flops: float
  collectives: dict[str, int]
  devices: int = 1             # devices the program runs on
  error: str = ""              # the compiler's refusal (TPU: does not fit), first line

  def to_json(self) -> dict[str, Any]:
    return dataclasses.asdict(self)


def collectives_of(hlo_text: str) -> dict[str, int]:
  """Collective instructions in an HLO module's text, by kind."""
  counts = Counter(m.group(1) for m in _COLLECTIVE.finditer(hlo_text))
  return {k: counts[k] for k in COLLECTIVES if counts[k]}


def _peak(stats) -> int:
  peak = int(getattr(stats, "peak_memory_in_bytes", 0) or 0)
  if peak:
    return peak
  # Older runtimes report no peak: everything a call holds at once, at worst.
  return (stats.argument_size_in_bytes + stats.output_size_in_bytes
          - stats.alias_size_in_bytes + stats.temp_size_in_bytes)


def compile_program(program: Program) -> Result:
  """Lowers and compiles `program`; a compiler refusal becomes a Result with `error`."""
  start = time.perf_counter()
  try:
    compiled = program.lower().compile()
  except Exception as e:  # pylint: disable=broad-except
    message = str(e)
    if "RESOURCE_EXHAUSTED" not in message:
      raise
    used = _TPU_USED.search(message)
    peak = int(float(used.group(1)) * _UNITS[used.group(2)]) if used else 0
    first = next((line for line in message.splitlines() if "RESOURCE_EXHAUSTED" in line),
                 message.splitlines()[0])
    return Result(program.name, program.in_run, program.note,
                  time.perf_counter() - start, 0, 0, 0, 0, peak, program.flops, {},
                  devices=program.devices, error=first.strip()[:300])
  seconds = time.perf_counter() - start
  stats = compiled.memory_analysis()
  return Result(program.name, program.in_run, program.note, seconds,
                argument=int(stats.argument_size_in_bytes),
                output=int(stats.output_size_in_bytes), alias=int(stats.alias_size_in_bytes),
                temp=int(stats.temp_size_in_bytes), peak=_peak(stats), flops=program.flops,
                collectives=collectives_of(compiled.as_text()), devices=program.devices)
