"""Evaluation and analysis: held-out and OOD protocols (protocols.py, mcq.py, rouge.py), the
oracle's failure-class analysis (oracle.py), paired statistics (stats.py) and the per-run
report (report.py). Entry point: `python -m harnessrl_jax.evaluate`; docs/evaluation.md."""
