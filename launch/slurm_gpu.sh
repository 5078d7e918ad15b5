#!/usr/bin/env bash
# Training on a SLURM GPU cluster: one process per host, each driving its 8 GPUs; all hosts
# form one JAX cluster and the learner's mesh (config.rl.mesh) spans every GPU.
#
# Set up once, in a checkout on the shared filesystem: `ACCEL=cuda bash launch/setup_venv.sh`
# (jax's CUDA plugin at the project's jax version, and faiss-gpu). Before queueing, check that
# the run fits: `.venv/bin/python -m harnessrl_jax.aot --config=configs/paper.py
# --topology=h100:16x8` (docs/multihost.md).
#
# Submit from a login node (the script calls srun itself, inside an allocation or not):
#   NODES=2 CONFIG=configs/paper.py WORKDIR=/shared/runs/paper launch/slurm_gpu.sh \
#     --config.rl.mesh.data=2 --config.rl.mesh.fsdp=8
#
# Variables:
#   NODES            hosts to run on (required); one task per host
#   CONFIG           config file, relative to the repository (required)
#   WORKDIR          run directory on a filesystem every host sees (required): Orbax
#                    writes each host's shards there, process 0 writes logs and metrics
#   GPUS_PER_NODE    GPUs per host (default 8)
#   PARTITION        SLURM partition (default: the cluster's)
#   TIME_LIMIT       srun --time (default 24:00:00)
#   COORDINATOR_PORT port on the first host for JAX's coordinator (default 8476)
#   PYTHON           interpreter on the hosts (default .venv/bin/python of this checkout,
#                    which must be on the shared filesystem)
#   CHECK_ACCEL      1 (default): before srun, check that PYTHON's jax has its CUDA plugin
#                    (launch/check_accel.py, from the installed packages: a login node
#                    usually has no GPU to ask); 0 skips it (e.g. a jax built on a local CUDA)
# Arguments go to harnessrl_jax.train (config overrides). The coordinator is the first host
# of the job step; each task reads its process id from SLURM_PROCID.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
: "${NODES:?set NODES, the number of hosts (one process each)}"
: "${CONFIG:?set CONFIG, e.g. configs/paper.py}"
: "${WORKDIR:?set WORKDIR to a directory on a filesystem shared by all hosts}"
GPUS_PER_NODE="${GPUS_PER_NODE:-8}"
TIME_LIMIT="${TIME_LIMIT:-24:00:00}"
COORDINATOR_PORT="${COORDINATOR_PORT:-8476}"
PYTHON="${PYTHON:-$root/.venv/bin/python}"
command -v srun >/dev/null || { echo "error: srun not found: run this on a SLURM login node" >&2; exit 2; }
[[ -f "$root/$CONFIG" ]] || { echo "error: CONFIG=$CONFIG: no such file under $root" >&2; exit 2; }
[[ -x "$PYTHON" ]] || { echo "error: PYTHON=$PYTHON is not executable (run ACCEL=cuda bash launch/setup_venv.sh on the shared filesystem)" >&2; exit 2; }
# Without the plugin jax would fall back to the CPU on every host, after the queue wait.
if [[ "${CHECK_ACCEL:-1}" != 0 ]]; then
  "$PYTHON" "$root/launch/check_accel.py" cuda || exit 2
fi

partition=()
[[ -n "${PARTITION:-}" ]] && partition=(--partition="$PARTITION")
# Single quotes: SLURM_* are expanded on each host by the task's own shell.
# shellcheck disable=SC2016
task='
  head="$(scontrol show hostnames "$SLURM_STEP_NODELIST" | head -n 1)"
  export HARNESSRL_COORDINATOR="$head:'"$COORDINATOR_PORT"'"
  export HARNESSRL_NUM_PROCESSES="$SLURM_NTASKS"
  export HARNESSRL_PROCESS_ID="$SLURM_PROCID"
  # JAX preallocates 75% of each GPU unless told; the compile check (harnessrl_jax.aot)
  # budgets 92% (aot/topology.py GPU_MEMORY_FRACTION), so the run gets that share.
  export XLA_PYTHON_CLIENT_MEM_FRACTION="${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.92}"
  exec "$0" -m harnessrl_jax.train "$@"
'
cd "$root"
exec srun --nodes="$NODES" --ntasks-per-node=1 --gpus-per-node="$GPUS_PER_NODE" \
  --time="$TIME_LIMIT" "${partition[@]}" --kill-on-bad-exit=1 \
  bash -c "$task" "$PYTHON" --config="$CONFIG" --workdir="$WORKDIR" "$@"
