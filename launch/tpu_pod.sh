#!/usr/bin/env bash
# Training on a Cloud TPU pod slice: the same command on every worker VM at once
# (`gcloud compute tpus tpu-vm ssh --worker=all`); JAX finds the pod's coordinator, process
# count and ids itself (HARNESSRL_AUTO_CLUSTER=1 -> jax.distributed.initialize()).
#
#   TPU_NAME=my-v5e-32 ZONE=us-west4-a CONFIG=configs/paper.py \
#   WORKDIR=gs://bucket/runs/paper launch/tpu_pod.sh --config.rl.mesh.fsdp=-1
#
# Set up every worker once (jax[tpu] and libtpu at the project's jax version):
#   gcloud compute tpus tpu-vm ssh $TPU_NAME --zone=$ZONE --worker=all \
#     --command='cd ~/harnessrl_jax && ACCEL=tpu bash launch/setup_venv.sh'
# Check first, on any machine set up with ACCEL=tpu, that the run fits: `.venv/bin/python -m
# harnessrl_jax.aot --config=configs/paper.py --topology=v5p:4x4x8` (docs/multihost.md).
#
# Variables:
#   TPU_NAME   the TPU VM (pod slice) name (required)
#   ZONE       its zone (required)
#   CONFIG     config file, relative to REPO_DIR (required)
#   WORKDIR    run directory every worker can write (required; a gs:// bucket or a shared
#              mount: Orbax writes each worker's shards there)
#   PROJECT    GCP project (default: gcloud's configured one)
#   REPO_DIR   the checkout on every worker (default ~/harnessrl_jax); copy it there first,
#              e.g. `gcloud compute tpus tpu-vm scp --worker=all --recurse . $TPU_NAME:~/harnessrl_jax`
#              from a checkout without .venv (a venv made elsewhere points at that Python)
#   PYTHON     interpreter on the workers (default REPO_DIR/.venv/bin/python, with jax[tpu])
#   CHECK_ACCEL 1 (default): first check on worker 0 that PYTHON's jax has libtpu
#              (launch/check_accel.py, from the installed packages, so the TPU stays free;
#              the workers are set up alike); 0 skips it
# Arguments go to harnessrl_jax.train (config overrides; quote them for the remote shell).
set -euo pipefail
: "${TPU_NAME:?set TPU_NAME, the TPU VM name}"
: "${ZONE:?set ZONE, the zone of the TPU}"
: "${CONFIG:?set CONFIG, e.g. configs/paper.py}"
: "${WORKDIR:?set WORKDIR, a directory every worker can write (gs://... or a shared mount)}"
REPO_DIR="${REPO_DIR:-~/harnessrl_jax}"
PYTHON="${PYTHON:-$REPO_DIR/.venv/bin/python}"
command -v gcloud >/dev/null || { echo "error: gcloud not found: install the Google Cloud CLI" >&2; exit 2; }
project=()
[[ -n "${PROJECT:-}" ]] && project=(--project="$PROJECT")

if [[ "${CHECK_ACCEL:-1}" != 0 ]]; then
  gcloud compute tpus tpu-vm ssh "$TPU_NAME" --zone="$ZONE" "${project[@]}" --worker=0 \
    --command="cd $REPO_DIR && $PYTHON launch/check_accel.py tpu" || {
    echo "error: worker 0 of $TPU_NAME cannot run jax on its TPU (see above); set up every" \
      "worker: gcloud compute tpus tpu-vm ssh $TPU_NAME --zone=$ZONE --worker=all" \
      "--command='cd $REPO_DIR && ACCEL=tpu bash launch/setup_venv.sh'" >&2
    exit 2
  }
fi

extra=""
(($#)) && printf -v extra ' %q' "$@"   # quoted once more for the remote shell
remote="cd $REPO_DIR && HARNESSRL_AUTO_CLUSTER=1 $PYTHON -m harnessrl_jax.train \
--config=$CONFIG --workdir=$WORKDIR$extra"
exec gcloud compute tpus tpu-vm ssh "$TPU_NAME" --zone="$ZONE" "${project[@]}" \
  --worker=all --command="$remote"
