#!/usr/bin/env bash
# Starts N JetStream servers (`python -m harnessrl_jax.serve`) per host for the judge and the
# evolver, on consecutive ports from PORT0, waits until each accepts connections, and prints
# the trainer's overrides (a pool, judge.endpoints, when there are several) and how to stop
# them.
#
#   launch/serve_judge.sh N [PORT0] [extra serve args]
#   MODEL=tiny launch/serve_judge.sh 3                    # 3 here, ports 9000..9002
#   launch/serve_judge.sh 2 9100 --dtype=bfloat16         # extra args go to every server
#   JUDGE_HOSTS="judge-0 judge-1" GPU_EACH=1 launch/serve_judge.sh 8   # 8 per host, over ssh
#
# N defaults to 1 and PORT0 to 9000. Variables:
#   JUDGE_HOSTS     hosts to start servers on, space-separated (default 127.0.0.1);
#                   127.0.0.1 / localhost start them here, others over ssh
#   MODEL           tiny | smollm2 | gemma3-270m | a path on the server host (default smollm2)
#   GPU_EACH        1: server i of a host sees only GPU i (CUDA_VISIBLE_DEVICES=i); without
#                   it, servers sharing a GPU host would each try to take most of its memory
#   SLOTS           --max_concurrent_decodes (default 8); the trainer's judge.pool.max_in_flight
#                   is set to it
#   MAX_PREFILL     --max_prefill_length, a power of two (default 1024); the trainer's
#                   judge.jetstream.max_prompt_tokens must not exceed it
#   MAX_DECODE      --max_decode_length (default 512)
#   REPO_DIR        the checkout on the server hosts (default: this one's path)
#   PYTHON          interpreter there (default REPO_DIR/.venv/bin/python, with
#                   requirements-serving.txt and google-jetstream installed)
#   SSH             ssh command for remote hosts (default ssh)
#   LOG_DIR         server logs, as server_HOST_PORT.log on each host (default /tmp/harnessrl_serve)
#   READY_TIMEOUT   seconds to wait for each server (default 900: loading and warm-up)
#   JAX_CACHE       persistent compilation cache on the server hosts, shared by their servers
#                   (default REPO_DIR/.cache/jax, as launch/run_default.sh's; "" turns it off):
#                   a restarted server loads its prefill and generate programs instead of
#                   compiling them again at its first requests
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
N="${1:-1}"
PORT0="${2:-9000}"
shift $(($# < 2 ? $# : 2))
extra=""
if (($#)); then extra="$(printf '%q ' "$@")"; fi   # quoted again for the shell that starts them
JUDGE_HOSTS="${JUDGE_HOSTS:-127.0.0.1}"
MODEL="${MODEL:-smollm2}"
GPU_EACH="${GPU_EACH:-0}"
SLOTS="${SLOTS:-8}"
MAX_PREFILL="${MAX_PREFILL:-1024}"
MAX_DECODE="${MAX_DECODE:-512}"
REPO_DIR="${REPO_DIR:-$root}"
PYTHON="${PYTHON:-$REPO_DIR/.venv/bin/python}"
SSH="${SSH:-ssh}"
LOG_DIR="${LOG_DIR:-/tmp/harnessrl_serve}"
READY_TIMEOUT="${READY_TIMEOUT:-900}"
JAX_CACHE="${JAX_CACHE-$REPO_DIR/.cache/jax}"
[[ "$N" =~ ^[1-9][0-9]*$ ]] || { echo "error: N=$N is not a positive count" >&2; exit 2; }
[[ "$PORT0" =~ ^[0-9]+$ ]] || { echo "error: PORT0=$PORT0 is not a port number" >&2; exit 2; }

is_local() { [[ "$1" == "127.0.0.1" || "$1" == "localhost" ]]; }

start() {  # HOST PORT INDEX -> prints the server's pid on that host
  local host="$1" port="$2" i="$3" bind=0.0.0.0 env="" cmd
  is_local "$host" && bind=127.0.0.1
  [[ "$GPU_EACH" == 1 ]] && env="CUDA_VISIBLE_DEVICES=$i"
  [[ -n "$JAX_CACHE" ]] && env="$env JAX_COMPILATION_CACHE_DIR=$JAX_CACHE \
JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0"
  # `|| exit` and `;`, not `&&`: `a && b &` would background the whole list, whose shell
  # keeps our stdout open (and $! would name that shell, not the server).
  cmd="mkdir -p $LOG_DIR || exit 1; cd $REPO_DIR || exit 1; $env nohup $PYTHON -m \
harnessrl_jax.serve --model=$MODEL --port=$port --host=$bind --max_concurrent_decodes=$SLOTS \
--max_prefill_length=$MAX_PREFILL --max_decode_length=$MAX_DECODE $extra\
>$LOG_DIR/server_${host}_$port.log 2>&1 </dev/null & echo \$!"
  if is_local "$host"; then
    [[ -x "$PYTHON" ]] || { echo "error: PYTHON=$PYTHON is not executable" >&2; exit 2; }
    bash -c "$cmd"
  else
    $SSH "$host" "$cmd"
  fi
}

wait_ready() {  # HOST PORT PID
  local host="$1" port="$2" deadline=$((SECONDS + READY_TIMEOUT)) probe
  probe="import socket; socket.create_connection(('$host', $port), timeout=2).close()"
  until python3 -c "$probe" 2>/dev/null; do
    if is_local "$host" && ! kill -0 "$3" 2>/dev/null; then
      echo "error: the server on $host:$port exited; see $LOG_DIR/server_${host}_$port.log" >&2
      exit 1
    fi
    if ((SECONDS > deadline)); then
      echo "error: $host:$port not ready after ${READY_TIMEOUT}s; see" \
           "$LOG_DIR/server_${host}_$port.log there" >&2
      exit 1
    fi
    sleep 2
  done
}

# Start every server first (they load their models side by side), then wait for each.
hosts=($JUDGE_HOSTS) servers=() stops=()
for host in "${hosts[@]}"; do
  pids=""
  for ((i = 0; i < N; i++)); do
    port=$((PORT0 + i))
    pid="$(start "$host" "$port" "$i")"
    servers+=("$host $port $pid")
    pids="$pids $pid"
  done
  if is_local "$host"; then stops+=("kill$pids"); else stops+=("$SSH $host kill$pids"); fi
  echo "started $N x $MODEL on $host, ports $PORT0..$((PORT0 + N - 1))" >&2
done
for s in "${servers[@]}"; do
  read -r host port pid <<<"$s"
  wait_ready "$host" "$port" "$pid"
  echo "ready: $host:$port" >&2
done

# The judge and the evolver's LLM roles share these servers (one pool when there are several).
flags="--config.judge.backend=jetstream --config.evolver.llm_backend=jetstream"
flags="$flags --config.judge.jetstream.max_prompt_tokens=$MAX_PREFILL"
if ((${#servers[@]} == 1)); then
  read -r host port _ <<<"${servers[0]}"
  flags="$flags --config.judge.jetstream.address=$host:$port"
else
  for s in "${servers[@]}"; do
    read -r host port _ <<<"$s"
    flags="$flags --config.judge.endpoints=$host:$port"
  done
  flags="$flags --config.judge.pool.max_in_flight=$SLOTS"
fi
echo "# trainer overrides:"
echo "$flags"
echo "# stop the servers with:"
printf '%s\n' "${stops[@]}"
