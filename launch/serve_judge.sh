#!/usr/bin/env bash
# Starts JetStream servers (`python -m harnessrl_jax.serve`) for the judge and the evolver on
# their own hosts, waits until each accepts connections, and prints the trainer's overrides.
#
#   JUDGE_HOSTS="judge-0" MODEL=smollm2 launch/serve_judge.sh
#   JUDGE_HOSTS=127.0.0.1 MODEL=tiny launch/serve_judge.sh     # this machine, no ssh
#
# Variables:
#   JUDGE_HOSTS     hosts to start one server each on, space-separated (required);
#                   127.0.0.1 / localhost start it here, others over ssh
#   MODEL           tiny | smollm2 | gemma3-270m | a path on the server host (default smollm2)
#   PORT            gRPC port on every host (default 9000)
#   SLOTS           --max_concurrent_decodes (default 8)
#   MAX_PREFILL     --max_prefill_length, a power of two (default 1024); the trainer's
#                   judge.jetstream.max_prompt_tokens must not exceed it
#   MAX_DECODE      --max_decode_length (default 512)
#   REPO_DIR        the checkout on the server hosts (default: this one's path)
#   PYTHON          interpreter there (default REPO_DIR/.venv/bin/python, with
#                   requirements-serving.txt and google-jetstream installed)
#   SSH             ssh command for remote hosts (default ssh)
#   LOG_DIR         server logs, as SERVER_HOST.log on each host (default /tmp/harnessrl_serve)
#   READY_TIMEOUT   seconds to wait for each server (default 900: loading and warm-up)
# Stop a server with the `kill PID` line printed for it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
: "${JUDGE_HOSTS:?set JUDGE_HOSTS, the hosts to start JetStream servers on (127.0.0.1 for here)}"
MODEL="${MODEL:-smollm2}"
PORT="${PORT:-9000}"
SLOTS="${SLOTS:-8}"
MAX_PREFILL="${MAX_PREFILL:-1024}"
MAX_DECODE="${MAX_DECODE:-512}"
REPO_DIR="${REPO_DIR:-$root}"
PYTHON="${PYTHON:-$REPO_DIR/.venv/bin/python}"
SSH="${SSH:-ssh}"
LOG_DIR="${LOG_DIR:-/tmp/harnessrl_serve}"
READY_TIMEOUT="${READY_TIMEOUT:-900}"
[[ "$PORT" =~ ^[0-9]+$ ]] || { echo "error: PORT=$PORT is not a port number" >&2; exit 2; }

is_local() { [[ "$1" == "127.0.0.1" || "$1" == "localhost" ]]; }

start() {  # HOST -> prints the server's pid on that host
  local host="$1" bind=0.0.0.0 cmd
  is_local "$host" && bind=127.0.0.1
  # `|| exit` and `;`, not `&&`: `a && b &` would background the whole list, whose shell
  # keeps our stdout open (and $! would name that shell, not the server).
  cmd="mkdir -p $LOG_DIR || exit 1; cd $REPO_DIR || exit 1; nohup $PYTHON -m harnessrl_jax.serve \
--model=$MODEL --port=$PORT --host=$bind --max_concurrent_decodes=$SLOTS \
--max_prefill_length=$MAX_PREFILL --max_decode_length=$MAX_DECODE \
>$LOG_DIR/server_$host.log 2>&1 </dev/null & echo \$!"
  if is_local "$host"; then
    [[ -x "$PYTHON" ]] || { echo "error: PYTHON=$PYTHON is not executable" >&2; exit 2; }
    bash -c "$cmd"
  else
    $SSH "$host" "$cmd"
  fi
}

wait_ready() {  # HOST PID
  local host="$1" deadline=$((SECONDS + READY_TIMEOUT)) probe
  probe="import socket, sys; socket.create_connection(('$host', $PORT), timeout=2).close()"
  until python3 -c "$probe" 2>/dev/null; do
    if is_local "$host" && ! kill -0 "$2" 2>/dev/null; then
      echo "error: the server on $host exited; see $LOG_DIR/server_$host.log" >&2; exit 1
    fi
    if ((SECONDS > deadline)); then
      echo "error: $host:$PORT not ready after ${READY_TIMEOUT}s; see $LOG_DIR/server_$host.log there" >&2
      exit 1
    fi
    sleep 2
  done
}

hosts=($JUDGE_HOSTS)
for host in "${hosts[@]}"; do
  pid="$(start "$host")"
  if is_local "$host"; then stop="kill $pid"; else stop="$SSH $host kill $pid"; fi
  echo "started $MODEL on $host:$PORT (stop it with: $stop)" >&2
  wait_ready "$host" "$pid"
  echo "ready: $host:$PORT" >&2
done

# One address per trainer: the judge and the evolver's LLM roles share it.
echo "# trainer overrides (a second host serves a second trainer, or a fallback):"
for host in "${hosts[@]}"; do
  echo "--config.judge.backend=jetstream --config.judge.jetstream.address=$host:$PORT" \
       "--config.judge.jetstream.max_prompt_tokens=$MAX_PREFILL --config.evolver.llm_backend=jetstream"
done
