"""Test-wide environment: 8 fake CPU devices for sharding tests, no hub access, fp32 matmuls,
one persistent compilation cache for the whole run, and the `slow` tier.

`@pytest.mark.slow` marks what CI's budget (~25 minutes on 2 cores) leaves out: the second and
later variants of a parity family whose first variant covers the same code path, and runs
that take minutes. They run with HARNESSRL_SLOW_TESTS=1 (`HARNESSRL_SLOW_TESTS=1 bash
launch/test.sh`), as the whole suite before a release should."""

import atexit
import os
import shutil
import tempfile

import pytest

# Must run before jax is imported anywhere in the test process. Tiny configs compile far
# longer than they run, so XLA:CPU's backend skips its expensive LLVM passes here: 16-18%
# off the model and rollout test files measured alone (2026-12-02, AMD EPYC 2 cores), and the
# compiled programs compute the same HLO (every parity bar holds as before).
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8"
                      " --xla_backend_optimization_level=0"
                      " --xla_llvm_disable_expensive_passes=true")
# Two pytest-xdist workers share two cores, and torch's OpenMP threads compete with the other
# worker's XLA threads: one transformers.generate reference took 55 s in the suite against
# 10 s alone, and 19 s in the suite with one thread (AMD EPYC 2 cores, 2026-12-02).
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# One persistent compilation cache for this test process, every subprocess it starts (tiny
# driver runs, multi-process runs) and, under pytest-xdist, every worker (they inherit the
# controller's environment): a program the tests build again and again -- the tiny driver's
# step in each module's runs, a model rebuilt by each test -- compiles once per test run.
# Entries are keyed by the program and its compile options, so sharing changes no number;
# a torn read between concurrent processes costs a recompilation (jax warns).
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
  _cache = tempfile.mkdtemp(prefix="harnessrl-test-jax-cache-")
  os.environ["JAX_COMPILATION_CACHE_DIR"] = _cache
  atexit.register(shutil.rmtree, _cache, True)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# NLTK's Punkt and stop-word data for the official instruction-following verifiers
# (eval/ifverify): the shared copy beside the checkout where there is one.
_NLTK_DATA = os.path.join(REPO_ROOT, "..", "shared", "data", "nltk_data")
if os.path.isdir(_NLTK_DATA):
  os.environ.setdefault("NLTK_DATA", os.path.abspath(_NLTK_DATA))


def tiny_driver_data(root):
  """The first 8 training and 4 held-out bundled tasks under `root` (train.jsonl,
  heldout.jsonl), for tests that run the tiny driver in subprocesses; returns their
  environment (this process's, with the run's shared compilation cache)."""
  for src, dst, n in (("data/train.jsonl", "train.jsonl", 8),
                      ("data/heldout.jsonl", "heldout.jsonl", 4)):
    with open(os.path.join(REPO_ROOT, src), encoding="utf-8") as f:
      lines = f.readlines()[:n]
    with open(os.path.join(root, dst), "w", encoding="utf-8") as f:
      f.writelines(lines)
  return dict(os.environ)


def jitted_forward(model):
  """`model(tokens, positions, mask, cache=None, *, layer_params=None)` under one `jax.jit`.
  Called eagerly, a tiny model compiles each of its ops on its own: ~170 compiles, 8 s, for
  one 6-layer Gemma 4 forward; under jit its forward compiles once per shape."""
  import jax  # pylint: disable=g-import-not-at-top
  from flax import nnx  # pylint: disable=g-import-not-at-top
  graphdef, state = nnx.split(model)

  @jax.jit
  def forward(state, tokens, positions, mask, cache, layer_params):
    return nnx.merge(graphdef, state)(tokens, positions, mask, cache,
                                      layer_params=layer_params)

  return lambda tokens, positions, mask, cache=None, *, layer_params=None: forward(
      state, tokens, positions, mask, cache, layer_params)


SLOW = os.environ.get("HARNESSRL_SLOW_TESTS") == "1"
_SLOW_REASON = "slow tier, outside CI's ~25-minute budget (HARNESSRL_SLOW_TESTS=1 runs it)"


def skip_unless_slow(covered_by: str) -> None:
  """Skips the calling test (one case of a parametrised family) outside the slow tier;
  `covered_by` says what CI's tier runs in its place."""
  if not SLOW:
    pytest.skip(f"{_SLOW_REASON}; CI runs {covered_by}")


def pytest_configure(config):
  config.addinivalue_line(
      "markers", "slow: outside CI's time budget; runs with HARNESSRL_SLOW_TESTS=1")


# pytest-xdist (--dist loadfile) hands whole files to the workers in collection order; the
# longest files (measured 2026-12-02) go first, so that no worker ends the run alone with one
# of them (alphabetical order left one worker ~60 s behind the other in a simulation).
LONGEST_FIRST = ("test_evolver_llm_jetstream.py", "test_experiment.py", "test_train_resume.py",
                 "test_models_gemma4.py", "test_models_parity.py", "test_rl_train_step.py",
                 "test_models_smollm2.py", "test_models_sharding.py", "test_rollout_sampler.py",
                 "test_judges_logit_verdict.py", "test_serving_jetstream.py",
                 "test_pool_jetstream_fault.py")


def pytest_collection_modifyitems(config, items):
  rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
  items.sort(key=lambda item: rank.get(item.path.name, len(rank)))   # stable within a file
  if SLOW:
    return
  skip = pytest.mark.skip(reason=_SLOW_REASON)
  for item in items:
    if "slow" in item.keywords:
      item.add_marker(skip)
