"""Compiles a run's accelerator programs for a named topology, with no device, and says
whether they fit:

  python -m harnessrl_jax.aot --config=configs/paper.py --topology=h100:16x8
  python -m harnessrl_jax.aot --config=configs/paper.py --topology=v5p:4x4x8 --json=aot.json
  python -m harnessrl_jax.aot --config=configs/tiny.py --topology=h100:1 \\
      --config.model.remat=False --config.rl.micro_batch_size=16

Topologies (harnessrl_jax/aot/topology.py): h100, h200, a100 as HOSTSxGPUS (h100:16x8) or
GPUS (h100:8); TPU slices v4, v5e, v5p, v6e by chips per torus axis (v5p:4x4x8). GPU needs
requirements-cuda.txt installed, TPU requirements-tpu.txt (or both, compile-only, from
`AOT=1 bash launch/setup_venv.sh`: requirements-aot.txt); neither needs a device.

It builds the run's mesh and shardings on the topology's devices, compiles what the run
jits there (the GRPO train step, the log-prob forward, the rollout program; where the judge
is our JetStream engine, its prefill and generate on one device, as `serve` runs it: the
judge model of --judge_config, the file's JUDGE_HF_CONFIG or config.judge.model; ask for
them with --programs to size a judge the run reaches elsewhere) and prints one
row each: compile seconds; per-device argument, output, temporary and peak bytes; the peak
against the budget (HBM x --memory_fraction: JAX's GPU allocator holds only that share);
FLOPs per call counted from the model and the time they take at the bf16 peak of every
device; the collectives in the compiled HLO by kind. --json writes the same as JSON.

Exit 0 when every program the run uses fits; 2 with one line naming the first that does
not and its peak. Any --config.* override applies, so batch, remat and mesh settings can be
tried here before a job is queued.
"""

from __future__ import annotations

import json
import runpy
import sys

from absl import flags
from ml_collections import config_flags

from harnessrl_jax import cli

_CONFIG = config_flags.DEFINE_config_file("config", None,
                                          "The experiment's config file, e.g. configs/paper.py.")
_TOPOLOGY = flags.DEFINE_string("topology", None,
                                "KIND:SHAPE, e.g. h100:16x8 (hosts x GPUs) or v5p:4x4x8.")
_JSON = flags.DEFINE_string("json", "", "Also write the table as JSON to this path.")
_FRACTION = flags.DEFINE_float("memory_fraction", None,
                               "Share of HBM a run may use (default: 0.92 on GPUs, what "
                               "launch/slurm_gpu.sh gives XLA_PYTHON_CLIENT_MEM_FRACTION; "
                               "1.0 on TPUs).")
_ONLY = flags.DEFINE_list("programs", [], "Compile only these (train_step, logprobs, "
                          "rollout, engine_prefill, engine_generate); default: all the run "
                          "uses (the engine's where the judge is our JetStream engine).")
_POLICY_CONFIG = flags.DEFINE_string("policy_config", "", "A HF config.json (or its "
                                     "directory) for the policy's architecture.")
_JUDGE_CONFIG = flags.DEFINE_string("judge_config", "", "A HF config.json (or its directory) "
                                    "for the judge model's (engine_* programs).")


def main(argv) -> None:
  del argv
  from harnessrl_jax.aot import topology  # pylint: disable=g-import-not-at-top
  topology.use_compile_only_plugins()   # before jax looks for plugins (its first backend)
  # Compile-only devices need no backend but the host's; a GPU host must not claim its GPUs.
  import jax  # pylint: disable=g-import-not-at-top
  jax.config.update("jax_platforms", "cpu")
  from harnessrl_jax.aot import run  # pylint: disable=g-import-not-at-top
  path = config_flags.get_config_filename(flags.FLAGS["config"]).split(":", 1)[0]
  report = run.check(_CONFIG.value, runpy.run_path(path), _TOPOLOGY.value,
                     config_name=path, memory_fraction=_FRACTION.value,
                     only=tuple(_ONLY.value), policy_config=_POLICY_CONFIG.value,
                     judge_config=_JUDGE_CONFIG.value)
  print(run.format_report(report), flush=True)
  if _JSON.value:
    with open(_JSON.value, "w", encoding="utf-8") as f:
      json.dump(report.to_json(), f, indent=1)
  failure = report.failure()
  if failure:
    print(failure, file=sys.stderr, flush=True)
    sys.exit(2)


if __name__ == "__main__":
  flags.mark_flags_as_required(["config", "topology"])
  cli.run(main)
