"""The package's rooms import downwards only: no stage room (data, models, rollout, rl,
judges, serving, harness, memory, evolver, eval, aot) imports the driver's room
(harnessrl_jax/run/) or an entry point at the package root. The exceptions are the two
commands that live in a room (`python -m harnessrl_jax.eval` and `python -m
harnessrl_jax.aot`), which are entry points themselves."""

import ast
import os

from repo_paths import REPO

PACKAGE = os.path.join(REPO, "harnessrl_jax")
# The driver's room and the package root's modules except the leaves every room may use
# (errors.py, cli.py, run_files.py, run_ledger.py, config_view.py: stdlib-only vocabulary).
HIGHER = ("harnessrl_jax.run", "harnessrl_jax.train", "harnessrl_jax.experiment",
          "harnessrl_jax.audit", "harnessrl_jax.calibrate", "harnessrl_jax.serve",
          "harnessrl_jax.distributed", "harnessrl_jax.config")
ENTRY_POINTS_IN_ROOMS = {"eval/evaluate.py", "aot/run.py"}


def _imports(path):
  tree = ast.parse(open(path, encoding="utf-8").read(), filename=path)
  for node in ast.walk(tree):
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
      yield node.lineno, node.module
      for alias in node.names:
        yield node.lineno, f"{node.module}.{alias.name}"
    elif isinstance(node, ast.Import):
      for alias in node.names:
        yield node.lineno, alias.name


def _is_higher(module):
  return any(module == h or module.startswith(h + ".") for h in HIGHER)


def test_rooms_do_not_import_the_driver_or_entry_points():
  bad = []
  for root, _, files in os.walk(PACKAGE):
    rel_root = os.path.relpath(root, PACKAGE)
    if rel_root == "." or rel_root.split(os.sep)[0] == "run":
      continue   # the package root (entry points) and the driver's room may import anything
    for name in files:
      rel = os.path.join(rel_root, name).replace(os.sep, "/")
      if not name.endswith(".py") or rel in ENTRY_POINTS_IN_ROOMS:
        continue
      bad += [f"harnessrl_jax/{rel}:{line} imports {module}"
              for line, module in _imports(os.path.join(root, name)) if _is_higher(module)]
  assert not bad, "\n".join(sorted(set(bad)))


def test_the_check_sees_an_upward_import(tmp_path):
  path = tmp_path / "x.py"
  path.write_text("from harnessrl_jax.run import step\nimport harnessrl_jax.errors\n")
  assert [m for _, m in _imports(str(path)) if _is_higher(m)] == [
      "harnessrl_jax.run", "harnessrl_jax.run.step"]
