"""Shared absl plumbing for the entry points: config-file flags that fail with one clear line."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from absl import app, flags


def parse_flags(argv: Sequence[str]) -> list[str]:
  """absl flags parser that turns config-override mistakes into one-line errors.

  ml_collections raises AttributeError for an unknown config field and TypeError for a
  value of the wrong type; without this the user sees a traceback from inside absl.
  """
  try:
    return flags.FLAGS(list(argv))
  except flags.Error as e:
    _fail(f"flags: {_short_config_error(str(e))}")
  except (AttributeError, KeyError) as e:
    _fail(f"config: unknown field{_culprit(argv, e)}: {_unquote(e)}")
  except (TypeError, ValueError) as e:
    _fail(f"config: wrong type: {_unquote(e)}")
  raise AssertionError("unreachable")


def run(main: Callable[[list[str]], None]) -> None:
  app.run(main, flags_parser=parse_flags)


def _short_config_error(text: str) -> str:
  """Keeps an error in a config file to its first line, its frame in that file and its cause."""
  lines = text.splitlines()
  if "Traceback" not in text:
    return text
  frames = [l.strip() for l in lines if l.strip().startswith("File ") and "site-packages" not in l]
  return " | ".join([lines[0].rstrip(": "), *frames, lines[-1].strip()])


def _culprit(argv: Sequence[str], e: BaseException) -> str:
  """Names the command-line override that set the unknown field, when there is one."""
  for arg in argv:
    name = arg.split("=", 1)[0]
    if name.startswith("--config.") and name.rsplit(".", 1)[-1] in str(e):
      return f" in {name}"
  return ""


def _unquote(e: BaseException) -> str:
  text = str(e.args[0]) if e.args else str(e)
  return text.strip("'\"").replace("\\'", "'").replace("\\n", " ").replace("\n", " ")


def _fail(message: str) -> None:
  print(f"error: {message}", file=sys.stderr)
  sys.exit(2)
