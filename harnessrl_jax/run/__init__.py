"""The run driver's room: what `python -m harnessrl_jax.train` is built from.

step.py (one training step as small functions), checkpoint.py (checkpoints and the config
guard), metrics.py (metrics.jsonl, TensorBoard, the summary), identity.py (which config fields
define the experiment), config.py (the `data`, `train` and `ablation` config sections),
cluster.py (several processes as one JAX cluster). Only the entry points at the package root
import this room; it imports every room below it.
"""
