"""`python -m harnessrl_jax.distributed [cluster flags] --then MODULE -- MODULE_ARGS`.

Joins the JAX cluster (run/cluster.py says where it comes from), checks that every host runs
the same config (the files named by --config= in MODULE_ARGS), code and libraries, then runs
MODULE as __main__: a driver that does not call run/cluster.py itself still starts as one
cluster. docs/multihost.md has the launch recipes.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
from collections.abc import Sequence

import jax

from harnessrl_jax.errors import HarnessError
from harnessrl_jax.run.cluster import (ENV_COORDINATOR, ENV_NUM_PROCESSES, ENV_PROCESS_ID,
                                       check_consistent, initialize, run_digests)


def _config_text(module_args: Sequence[str]) -> str:
  """The config of a command line: its --config* arguments and the --config= files' bytes.

  Other arguments (--workdir, logging) may differ between processes.
  """
  parts = [a for a in module_args if a.startswith("--config")]
  for arg in parts[:]:
    if arg.startswith("--config="):
      path = arg.split("=", 1)[1]
      if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
          parts.append(f.read())
  return "\n".join(parts)


def main(argv: Sequence[str]) -> None:
  parser = argparse.ArgumentParser(
      prog="python -m harnessrl_jax.distributed",
      usage="%(prog)s [cluster flags] --then MODULE -- MODULE_ARGS",
      description="Join the JAX cluster, check that all hosts agree on config, code and "
                  "libraries, then run --then MODULE with the arguments after '--'. Unset "
                  f"cluster flags come from ${ENV_COORDINATOR}, ${ENV_NUM_PROCESSES}, "
                  f"${ENV_PROCESS_ID}, or SLURM / Cloud TPU detection (docs/multihost.md).")
  parser.add_argument("--coordinator_address", default=None, metavar="HOST:PORT",
                      help="address of process 0")
  parser.add_argument("--num_processes", type=int, default=None, metavar="N",
                      help="processes in the cluster")
  parser.add_argument("--process_id", type=int, default=None, metavar="I",
                      help="this process's index, 0..N-1")
  parser.add_argument("--then", required=True, metavar="MODULE",
                      help="module to run, e.g. harnessrl_jax.train")
  if "--" in argv:
    cut = list(argv).index("--")
    own, rest = list(argv[:cut]), list(argv[cut + 1:])
  else:
    own, rest = list(argv), []
  args = parser.parse_args(own)
  try:
    spec = initialize(args.coordinator_address, args.num_processes, args.process_id)
    check_consistent(run_digests(_config_text(rest)))
  except HarnessError as e:
    print(f"error: {e}", file=sys.stderr)
    sys.exit(2)
  if spec.multi:
    print(f"process {jax.process_index()}/{jax.process_count()} joined ({spec.source}): "
          f"{jax.local_device_count()} local of {jax.device_count()} devices", flush=True)
  sys.argv = [args.then, *rest]
  runpy.run_module(args.then, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
  main(sys.argv[1:])
