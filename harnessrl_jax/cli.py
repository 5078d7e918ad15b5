"""Shared absl plumbing for the entry points: `--help` that answers with the usage and exits
0, and config-file flags that fail with one clear line."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from absl import app, flags

PACKAGE = __name__.split(".", 1)[0]
# absl's own help flags exit with status 1 and know no -h; these are answered before parsing.
HELP = frozenset({"-h", "-?", "-help", "--help", "-helpshort", "--helpshort"})
HELP_FULL = frozenset({"-helpfull", "--helpfull"})


def help_wanted(argv: Sequence[str]) -> str | None:
  """"short" or "full" when the command line (before any `--`) asks for help, else None."""
  own = list(argv[1:])
  own = own[:own.index("--")] if "--" in own else own
  if HELP_FULL.intersection(own):
    return "full"
  return "short" if HELP.intersection(own) else None


def usage(full: bool = False) -> str:
  """The program's docstring and its flags.

  Short: the flags the program and this package define (the driver's, the cluster's);
  full: every flag, absl's and the libraries' included.
  """
  doc = (sys.modules["__main__"].__doc__ or f"usage: {sys.argv[0]} [flags]").strip()
  if full:
    return f"{doc}\n\nflags:\n{flags.FLAGS.get_help()}"
  # absl files the program's flags under its path; name it as it is run, `python -m NAME`.
  name = getattr(sys.modules["__main__"].__spec__, "name", sys.argv[0])
  sections = []
  for module in flags.FLAGS.flags_by_module_dict():
    if module == sys.argv[0] or module.split(".", 1)[0] == PACKAGE:
      text = flags.FLAGS.module_help(module).strip()
      sections.append(text.replace(module, name, 1) if module == sys.argv[0] else text)
  return (f"{doc}\n\nflags:\n\n" + "\n\n".join(sections)
          + "\n\nTry --helpfull to get a list of all flags.")


def parse_flags(argv: Sequence[str]) -> list[str]:
  """absl flags parser that answers --help and turns config-override mistakes into one-line
  errors.

  ml_collections raises AttributeError for an unknown config field and TypeError for a
  value of the wrong type; without this the user sees a traceback from inside absl.
  """
  wanted = help_wanted(argv)
  if wanted:
    print(usage(full=wanted == "full"))
    sys.exit(0)
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
  """`absl.app.run(main)` with `parse_flags`: every absl entry point starts here."""
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
