#!/usr/bin/env bash
#SBATCH --job-name=harnessrl-grid
#SBATCH --array=0-17
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --gpus=1
#SBATCH --time=24:00:00
#SBATCH --output=slurm-%x-%A_%a.out
# An arms x seeds grid (python -m harnessrl_jax.experiment) as a SLURM job array: array
# task N runs the grid's N-th run (--task_index; seed-major order, see `--list`), and a job
# that starts once every array task has ended writes grid.json and report.md
# (--report_only). Runs that finished are skipped, unfinished ones resume, so resubmitting
# after time limits or failures continues the grid.
#
# Submit both from a login node (the script submits itself, sized to the grid):
#   CONFIG=configs/testbed.py WORKDIR=/shared/runs/testbed launch/slurm_experiment.sh \
#     --seeds=0,1,2,3,4
# or by hand (the #SBATCH --array above is configs/testbed.py's 6 arms x 3 seeds):
#   jid=$(sbatch --parsable --array=0-17 launch/slurm_experiment.sh)
#   sbatch --dependency=afterany:$jid --wrap="cd $PWD && .venv/bin/python \
#     -m harnessrl_jax.experiment --config=configs/testbed.py --workdir=runs/testbed \
#     --report_only"
#
# Variables (sbatch passes the environment on to the jobs):
#   CONFIG       the grid's config file, relative to the repository (default
#                configs/testbed.py)
#   WORKDIR      the grid's directory, on a filesystem every node sees (default runs/testbed;
#                relative paths: to the repository)
#   PARALLEL     array tasks running at once (default: as many as SLURM allows)
#   PARTITION    SLURM partition (default: the cluster's)
#   PYTHON       interpreter on the nodes (default .venv/bin/python of this checkout, which
#                must be on the shared filesystem)
# Each array task asks for one GPU (#SBATCH --gpus above; drop it on a CPU partition).
# Arguments go to harnessrl_jax.experiment in every job (--arms, --seeds, config
# overrides); each run's output is in WORKDIR/ARM/seedK/train.log.
set -euo pipefail
# In a job this script is SLURM's spooled copy: the checkout is the submitter's (below), or
# the directory sbatch ran in.
if [[ -n "${SLURM_JOB_ID:-}" ]]; then
  root="${HARNESSRL_ROOT:-$SLURM_SUBMIT_DIR}"
else
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  export HARNESSRL_ROOT="$root"
fi
CONFIG="${CONFIG:-configs/testbed.py}"
WORKDIR="${WORKDIR:-runs/testbed}"
PYTHON="${PYTHON:-$root/.venv/bin/python}"
cd "$root"
grid=("$PYTHON" -m harnessrl_jax.experiment --config="$CONFIG" --workdir="$WORKDIR" "$@")

if [[ -n "${SLURM_ARRAY_TASK_ID:-}" ]]; then   # an array task: one run
  exec "${grid[@]}" --task_index="$SLURM_ARRAY_TASK_ID"
fi
[[ -z "${SLURM_JOB_ID:-}" ]] || { echo "error: submit this script from a login node (bash launch/slurm_experiment.sh), or with sbatch --array" >&2; exit 2; }
command -v sbatch >/dev/null || { echo "error: sbatch not found: run this on a SLURM login node" >&2; exit 2; }
[[ -x "$PYTHON" ]] || { echo "error: PYTHON=$PYTHON is not executable (run launch/setup_venv.sh on the shared filesystem)" >&2; exit 2; }

# `--list` checks the grid (a bad flag or config is refused here, not in the queue).
runs=$("${grid[@]}" --list | wc -l)
options=(--parsable --chdir="$root")
[[ -n "${PARTITION:-}" ]] && options+=(--partition="$PARTITION")
array="0-$((runs - 1))${PARALLEL:+%$PARALLEL}"
jid=$(sbatch "${options[@]}" --array="$array" "$root/launch/slurm_experiment.sh" "$@")
printf -v report ' %q' "${grid[@]}" --report_only
rid=$(sbatch "${options[@]}" --dependency="afterany:$jid" --job-name=harnessrl-grid-report \
  --ntasks=1 --time=1:00:00 --output="slurm-%x-%j.out" --wrap="cd $(printf %q "$root") &&$report")
echo "array job $jid ($runs runs, tasks $array), report job $rid; grid: $WORKDIR"
