"""Test-wide environment: 8 fake CPU devices for sharding tests, no hub access, fp32 matmuls,
and one persistent compilation cache for the whole run."""

import atexit
import os
import shutil
import sys
import tempfile

# Must run before jax is imported anywhere in the test process.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
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
if REPO_ROOT not in sys.path:
  sys.path.insert(0, REPO_ROOT)


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
