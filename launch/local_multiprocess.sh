#!/usr/bin/env bash
# N CPU processes on this machine forming one JAX cluster on 127.0.0.1 (gloo collectives).
#
# Variables:
#   NUM_PROCESSES        processes to start (required, >= 1)
#   DEVICES_PER_PROCESS  fake CPU devices each process sees (default 2)
#   PORT                 coordinator port on 127.0.0.1 (default: a free one)
#   MODULE               module every process runs (default harnessrl_jax.train); it must
#                        join the cluster itself, as the driver does (for any other module:
#                        MODULE=harnessrl_jax.distributed and arguments --then=OTHER -- ARGS)
#   LOG_DIR              process I writes LOG_DIR/process_I.log (default: a new temp dir)
#   PYTHON               interpreter (default .venv/bin/python)
# Arguments go to MODULE. Example, two steps of the tiny config over one mesh of 2 x 2 devices:
#   NUM_PROCESSES=2 launch/local_multiprocess.sh --config=configs/tiny.py --workdir=runs/mh \
#     --config.rl.mesh.fsdp=-1
# Process I runs `python -m MODULE ARGS` with HARNESSRL_COORDINATOR=127.0.0.1:PORT,
# HARNESSRL_NUM_PROCESSES=N and HARNESSRL_PROCESS_ID=I, from which it joins the cluster and
# refuses to start when the processes disagree on config or code. Exit status: 0 when all
# processes succeed, else the first failure's (the others are stopped).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
: "${NUM_PROCESSES:?set NUM_PROCESSES, the number of CPU processes to start}"
[[ "$NUM_PROCESSES" =~ ^[1-9][0-9]*$ ]] || { echo "error: NUM_PROCESSES=$NUM_PROCESSES is not a positive integer" >&2; exit 2; }
DEVICES_PER_PROCESS="${DEVICES_PER_PROCESS:-2}"
MODULE="${MODULE:-harnessrl_jax.train}"
PYTHON="${PYTHON:-$root/.venv/bin/python}"
[[ -x "$PYTHON" ]] || { echo "error: PYTHON=$PYTHON is not executable (run launch/setup_venv.sh)" >&2; exit 2; }
if [[ -z "${PORT:-}" ]]; then
  PORT="$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
fi
LOG_DIR="${LOG_DIR:-$(mktemp -d -t harnessrl_mp.XXXXXX)}"
mkdir -p "$LOG_DIR"

pids=()
stop_all() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap stop_all INT TERM
for ((i = 0; i < NUM_PROCESSES; i++)); do
  JAX_PLATFORMS=cpu XLA_FLAGS="--xla_force_host_platform_device_count=$DEVICES_PER_PROCESS" \
  PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" HARNESSRL_COORDINATOR="127.0.0.1:$PORT" \
  HARNESSRL_NUM_PROCESSES="$NUM_PROCESSES" HARNESSRL_PROCESS_ID="$i" \
    "$PYTHON" -m "$MODULE" "$@" >"$LOG_DIR/process_$i.log" 2>&1 &
  pids+=("$!")
done
echo "started $NUM_PROCESSES processes (coordinator 127.0.0.1:$PORT); logs in $LOG_DIR" >&2

status=0
remaining=("${pids[@]}")
while ((${#remaining[@]})); do
  # wait -n: the first process to end; a failure stops the rest (they would hang in collectives).
  set +e; wait -n "${remaining[@]}"; rc=$?; set -e
  alive=()
  for p in "${remaining[@]}"; do kill -0 "$p" 2>/dev/null && alive+=("$p"); done
  remaining=("${alive[@]+"${alive[@]}"}")
  if ((rc != 0 && status == 0)); then
    status=$rc
    echo "error: a process exited with status $rc; stopping the others (logs in $LOG_DIR)" >&2
    stop_all
  fi
done
exit "$status"
