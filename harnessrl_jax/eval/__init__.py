"""Evaluation and analysis: held-out and OOD protocols (protocols.py, mcq.py, rouge.py), the
oracle's failure-class analysis (oracle.py), paired statistics (stats.py), the per-run
report (report.py), and the testbed's ground-truth measures (testbed.py) with the
experiment report over arms and seeds (experiment_report.py). Entry point:
`python -m harnessrl_jax.eval`; docs/evaluation.md."""
