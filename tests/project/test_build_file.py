"""BUILD stays true: every module and test file is listed, every listed file exists.

BUILD is Starlark, whose syntax is a subset of Python's: it is parsed with `ast` and its
top-level rule calls are evaluated by a small interpreter (literals, lists, `+`, `glob`,
names bound at top level). No bazel is needed.
"""

import ast
import glob
import os

import pytest
from repo_paths import REPO

RULES = ("py_library", "py_binary", "py_test", "filegroup")
ENTRY_POINTS = ("train", "eval/__main__", "aot/__main__", "calibrate", "experiment", "audit", "serve",
                "data/validate", "data/convert", "distributed")


class BuildError(Exception):
  pass


def _glob(patterns, exclude=()):
  out = set()
  for pattern in patterns:
    out |= {os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, pattern),
                                                        recursive=True) if os.path.isfile(p)}
  for pattern in exclude:
    out -= {os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, pattern),
                                                        recursive=True)}
  if not out:
    raise BuildError(f"glob({list(patterns)}) matches no file")
  return sorted(out)


def _value(node, names):
  if isinstance(node, ast.Constant):
    return node.value
  if isinstance(node, (ast.List, ast.Tuple)):
    return [_value(e, names) for e in node.elts]
  if isinstance(node, ast.Dict):
    return {_value(k, names): _value(v, names) for k, v in zip(node.keys, node.values)}
  if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
    return _value(node.left, names) + _value(node.right, names)
  if isinstance(node, ast.Name) and node.id in names:
    return names[node.id]
  if isinstance(node, ast.Name) and node.id in ("True", "False"):
    return node.id == "True"
  if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
      and node.func.id == "glob"):
    kw = {k.arg: _value(k.value, names) for k in node.keywords}
    args = [_value(a, names) for a in node.args]
    return _glob(args[0] if args else kw["include"], kw.get("exclude", ()))
  raise BuildError(f"line {node.lineno}: unsupported expression {ast.dump(node)[:80]}")


def parse_build(text: str) -> dict[str, dict]:
  """name -> {"rule": ..., attributes...} of the BUILD file's targets."""
  names, targets = {}, {}
  for stmt in ast.parse(text, "BUILD").body:
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
      names[stmt.targets[0].id] = _value(stmt.value, names)
      continue
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
      raise BuildError(f"line {stmt.lineno}: not a rule call")
    call = stmt.value
    rule = call.func.id
    attrs = {k.arg: _value(k.value, names) for k in call.keywords}
    if rule in ("package", "exports_files", "load"):
      continue
    if rule not in RULES:
      raise BuildError(f"line {stmt.lineno}: unknown rule {rule}")
    if attrs.get("name") in targets:
      raise BuildError(f"line {stmt.lineno}: target {attrs['name']!r} defined twice")
    targets[attrs["name"]] = {"rule": rule, "line": stmt.lineno, **attrs}
  return targets


@pytest.fixture(scope="module")
def targets():
  with open(os.path.join(REPO, "BUILD"), encoding="utf-8") as f:
    return parse_build(f.read())


def _files(target):
  out = list(target.get("srcs", [])) + list(target.get("data", []))
  return [f for f in out + ([target["main"]] if "main" in target else [])
          if not f.startswith(":")]


def test_every_module_is_in_a_library(targets):
  listed = {f for t in targets.values() if t["rule"] == "py_library" for f in t["srcs"]}
  modules = {os.path.relpath(p, REPO)
             for p in glob.glob(os.path.join(REPO, "harnessrl_jax", "**", "*.py"),
                                recursive=True)}
  missing = sorted(modules - listed)
  assert not missing, f"add to a py_library's srcs in BUILD: {missing}"


def test_every_test_file_has_a_py_test(targets):
  tested = {}
  for name, t in targets.items():
    if t["rule"] == "py_test":
      for arg in t.get("args", []):
        tested[arg] = name
      assert t["args"][0] in t["srcs"], f"BUILD:{t['line']}: {name} runs a file not in srcs"
  tests = sorted(os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, "tests",
                                                                         "**", "test_*.py"),
                                                                recursive=True))
  missing = [t for t in tests if t not in tested]
  assert not missing, f"add a py_test to BUILD for each of: {missing}"
  misnamed = [(f, n) for f, n in tested.items() if n != os.path.basename(f)[:-3]]
  assert not misnamed, f"py_test names should be the file's: {misnamed}"


def test_test_helpers_are_listed(targets):
  listed = {f for t in targets.values() for f in t.get("srcs", [])}
  helpers = sorted(os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, "tests",
                                                                           "*.py")))
  missing = [h for h in helpers if h not in listed]
  assert not missing, f"add to the test_support py_library in BUILD: {missing}"


def test_every_named_file_exists(targets):
  absent = [(n, f) for n, t in targets.items() for f in _files(t)
            if not os.path.isfile(os.path.join(REPO, f))]
  assert not absent, f"BUILD names files that do not exist: {absent}"


def test_labels_resolve(targets):
  dangling = [(n, d) for n, t in targets.items()
              for d in list(t.get("deps", [])) + list(t.get("data", []))
              if d.startswith(":") and d[1:] not in targets]
  assert not dangling, f"BUILD: labels with no target: {dangling}"


def test_entry_points_are_binaries(targets):
  mains = {t["main"]: n for n, t in targets.items() if t["rule"] == "py_binary"}
  for entry in ENTRY_POINTS:
    path = f"harnessrl_jax/{entry}.py"
    assert path in mains, f"BUILD: no py_binary with main = {path!r}"
    assert path in targets[mains[path]]["srcs"]


def test_parser_rejects_what_bazel_would():
  # The checks above are only as good as the parser: it must see these mistakes.
  with pytest.raises(BuildError, match="defined twice"):
    parse_build('py_library(name = "a", srcs = [])\npy_test(name = "a", srcs = [])\n')
  with pytest.raises(BuildError, match="matches no file"):
    parse_build('filegroup(name = "f", srcs = glob(["no_such_dir/*.xyz"]))\n')
  with pytest.raises(BuildError, match="unknown rule"):
    parse_build('cc_library(name = "c")\n')
  got = parse_build('X = ["a.py"]\npy_library(name = "l", srcs = X + ["b.py"])\n')
  assert got["l"]["srcs"] == ["a.py", "b.py"]
