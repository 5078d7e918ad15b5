"""Test-wide environment: 8 fake CPU devices for sharding tests, no hub access, fp32 matmuls."""

import os
import sys

# Must run before jax is imported anywhere in the test process.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
  sys.path.insert(0, REPO_ROOT)


def tiny_driver_data(root):
  """The first 8 training and 4 held-out bundled tasks under `root` (train.jsonl,
  heldout.jsonl) and an environment whose JAX compilation cache lives there too, for tests
  that run the tiny driver in subprocesses; returns that environment."""
  for src, dst, n in (("data/train.jsonl", "train.jsonl", 8),
                      ("data/heldout.jsonl", "heldout.jsonl", 4)):
    with open(os.path.join(REPO_ROOT, src), encoding="utf-8") as f:
      lines = f.readlines()[:n]
    with open(os.path.join(root, dst), "w", encoding="utf-8") as f:
      f.writelines(lines)
  return dict(os.environ, JAX_COMPILATION_CACHE_DIR=os.path.join(root, "jax_cache"),
              JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
              JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
