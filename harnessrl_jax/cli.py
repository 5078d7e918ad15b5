"""Shared absl plumbing for the entry points (`run`): `--help` that answers with the usage
and exits 0, and for every start the user can fix one line on stderr, `error: ...` naming
the flag or field and the fix, and exit status 2, before anything heavy loads: an unknown
flag, a flag value of the wrong type, a missing required flag, a stray argument, a config
file that does not exist, does not load or raises (`--config=FILE`), an override of a field
that does not exist (`--config.a.b=...`), and a HarnessError from the program's main (its
own refusals: config.validate's, one line per problem, a missing file, a refused key)."""

from __future__ import annotations

import logging as std_logging
import os
import re
import sys
import traceback
from collections.abc import Callable, Sequence

import ml_collections
from absl import app, flags
# is_config_flag is meant for users (its docstring) but not re-exported by the package.
from ml_collections.config_flags.config_flags import is_config_flag

from harnessrl_jax.errors import HarnessError

PACKAGE = __name__.split(".", 1)[0]
# absl's own help flags exit with status 1 and know no -h; these are answered before parsing.
HELP = frozenset({"-h", "-?", "-help", "--help", "-helpshort", "--helpshort"})
HELP_FULL = frozenset({"-helpfull", "--helpfull"})
# absl names a flag value's kind by its parser's flag_type(); what the user reads instead.
_KINDS = {"int": "an integer", "float": "a number", "bool": "true or false",
          "string": "a string", "tuple": "a tuple, e.g. '(1, 2)'"}
_REQUIRED = re.compile(r"Flag --(\S+) must have a value other than None")


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


def parse_flags(argv: Sequence[str], positional: int = 0) -> list[str]:
  """absl's flags parser, answering --help and turning every refusal into one line; up to
  `positional` arguments that are not flags are the program's (paths), any more a refusal.

  ml_collections runs the config file while the flags are parsed (a missing file surfaces
  only when the config is first used) and raises AttributeError / KeyError for an override
  of an unknown field; absl raises its own errors for the rest. Field values of the wrong
  type inside a tuple or set by the config file are `config.validate`'s to refuse.
  """
  wanted = help_wanted(argv)
  if wanted:
    print(usage(full=wanted == "full"))
    sys.exit(0)
  argv = list(argv)
  # ml_collections only warns of a get_config() that returns None; the refusal below says it.
  absl_logger = std_logging.getLogger("absl")
  absl_logger.addFilter(_no_none_warning)
  try:
    rest = flags.FLAGS(argv)
  except flags.UnrecognizedFlagError as e:
    _fail(f"--{e.flagname}: unknown flag{_suggestion(str(e))}; see --help")
  except flags.IllegalFlagValueError as e:
    _fail(_illegal_value(argv, e))
  except flags.Error as e:
    _fail(_one_line(str(e)))
  except Exception as e:  # pylint: disable=broad-except
    message = _config_failure(argv, e)
    if message is None:
      raise   # not the user's config: a bug, with its traceback
    _fail(message)
  finally:
    absl_logger.removeFilter(_no_none_warning)
  for name, path in _config_files(argv):
    _check_loaded(name, path)
  if len(rest) - 1 > positional:   # e.g. the rest of an unquoted value with a space
    _fail(f"{rest[1 + positional]!r}: unexpected argument; flags are --name=value (quote a value with "
          "spaces)")
  return rest


def run(main: Callable[[list[str]], None], *, positional: int = 0) -> None:
  """`absl.app.run(main)` with `parse_flags`, and a HarnessError from `main` (a cause the
  user can fix) as one line and exit status 2: every absl entry point starts here.
  `positional`: how many non-flag arguments the program takes (they reach `main`)."""

  def guarded(argv: list[str]) -> None:
    try:
      main(argv)
    except HarnessError as e:
      _fail(str(e))

  app.run(guarded, flags_parser=lambda argv: parse_flags(argv, positional))


# ---- the messages


def _illegal_value(argv: Sequence[str], e: flags.IllegalFlagValueError) -> str:
  """A value absl or a config file refused: a required flag left out, a value its parser
  cannot read, or a config file whose get_config() raised TypeError / ValueError."""
  text = str(e)
  missing = _REQUIRED.findall(text)
  for name in missing:
    if _flag_arg(argv, name) is not None:   # given, yet None: a get_config() without return
      return f"--{name}={_flag_arg(argv, name)}: get_config() returned None; return the config"
  if missing:
    names = [f"--{n}" for n in missing]
    if len(names) == 1:
      return f"{names[0]} is required: {flags.FLAGS[missing[0]].help}"
    return f"{', '.join(names)} are required; see --help"
  m = re.match(r"flag --(\S+?)=", text)
  name = m.group(1) if m else ""
  if name not in flags.FLAGS:
    return _one_line(text)
  flag = flags.FLAGS[name]
  value = _flag_arg(argv, name)
  if is_config_flag(flag):   # get_config() raised TypeError / ValueError
    inner = _chain(e)[-1]
    return (_config_failure(argv, e)
            or f"--{name}={value}: {type(inner).__name__}: {_short(inner)}")
  kind = flag.parser.flag_type()
  reason = _one_line(text.split(": ", 1)[-1])
  section, _, field = name.partition(".")
  if field and is_config_flag(flags.FLAGS[section]):   # an override of a config field
    now = _field_value(flags.FLAGS[section].value, field)
    if isinstance(now, ml_collections.ConfigDict):
      return (f"--{name}={value}: {name} is a section; set its fields one by one, e.g. "
              f"--{name}.{next(iter(now.keys()), 'FIELD')}=...")
    kind = {bool: "bool", int: "int", float: "float", tuple: "tuple"}.get(type(now), kind)
    where = f"; the config file sets {name} = {now!r}"
  else:
    where = ""
  want = f"expected {_KINDS.get(kind, kind)}"
  if kind not in ("int", "float", "bool"):   # their reasons add nothing to the kind
    want += f" ({reason})"
  return f"--{name}={value}: {want}{where}"


def _config_failure(argv: Sequence[str], e: BaseException) -> str | None:
  """The line for an exception raised while a config file was loaded or overridden, or
  None when it came from elsewhere."""
  configs = _config_files(argv)
  if not configs:
    return None
  name, path = configs[0]
  chain = _chain(e)
  if any(isinstance(x, OSError) and "failure to load" in str(x) for x in chain):
    return _unloadable(name, path, next(x for x in chain if isinstance(x, OSError)))
  where = os.path.abspath(path.split(":", 1)[0])
  for x in reversed(chain):   # the innermost: the config file's own error
    line = _line_in(x, where)
    if line is not None:
      return f"--{name}={path}: line {line}: {type(x).__name__}: {_short(x)}"
  if isinstance(e, AttributeError) and "get_config" in str(e):
    return (f"--{name}={path}: defines no get_config(); a config file defines get_config() "
            "returning base_config() with its changes")
  if isinstance(e, (AttributeError, KeyError)):   # an override of an unknown field
    found = _unknown_field(argv, name, _text(e))
    if found is not None:
      override, parent, leaf = found
      return f"{override}: unknown field {parent}.{leaf}{_suggestion(_text(e))}"
  return None


def _check_loaded(name: str, path: str) -> None:
  """Refuses a config flag whose file did not load (ml_collections defers that error to the
  config's first use) or whose get_config() returned no ConfigDict."""
  value = flags.FLAGS[name].value
  if isinstance(value, ml_collections.ConfigDict):
    return
  if value is None:
    _fail(f"--{name}={path}: get_config() returned None; return the config")
  try:
    getattr(value, "lock", None)   # an unloaded config raises its load error on any use
  except OSError as e:
    _fail(_unloadable(name, path, e))
  _fail(f"--{name}={path}: get_config() returned a {type(value).__name__}, not a ConfigDict")


def _unloadable(name: str, path: str, e: BaseException) -> str:
  m = re.search(r"\[Errno \d+\] ([^:\n]+)", str(e))
  reason = m.group(1).lower() if m else _one_line(str(e))
  if reason.startswith("no such file"):
    return (f"--{name}={path}: no such file (a path relative to the current directory, "
            f"e.g. --{name}=configs/tiny.py)")
  return f"--{name}={path}: cannot load it: {reason}"


# ---- small helpers


def _config_files(argv: Sequence[str]) -> list[tuple[str, str]]:
  """(flag name, file) of each config-file flag given on the command line."""
  out = []
  for name in sorted(set(flags.FLAGS)):
    if "." not in name and is_config_flag(flags.FLAGS[name]):
      path = _flag_arg(argv, name)
      if path is not None:
        out.append((name, path))
  return out


def _flag_arg(argv: Sequence[str], name: str) -> str | None:
  """The value given to --name (as `--name=V` or `--name V`) before any `--`, or None."""
  own = list(argv[1:])
  own = own[:own.index("--")] if "--" in own else own
  for i, arg in enumerate(own):
    for dashes in ("--", "-"):
      if arg.startswith(f"{dashes}{name}="):
        return arg.split("=", 1)[1]
      if arg == f"{dashes}{name}" and i + 1 < len(own):
        return own[i + 1]
  return None


def _unknown_field(argv: Sequence[str], name: str,
                   text: str) -> tuple[str, str, str] | None:
  """(override, its parent section, the unknown key) for the command-line override
  (`--config.a.b=v`) whose key ml_collections' message names (quoted)."""
  for arg in argv[1:]:
    parts = arg.split("=", 1)[0].lstrip("-").split(".")
    if parts[0] == name:
      for i in range(1, len(parts)):
        if f"'{parts[i]}'" in text:
          return arg, ".".join(parts[:i]), parts[i]
  return None


def _field_value(config, dotted: str):
  """The value at a dotted path of a config (None where there is none)."""
  for key in dotted.split("."):
    if not isinstance(config, ml_collections.ConfigDict) or key not in config:
      return None
    config = config[key]
  return config


def _chain(e: BaseException) -> list[BaseException]:
  """e and the exceptions it was raised from or during, outermost first."""
  out = [e]
  while (out[-1].__cause__ or out[-1].__context__) is not None and len(out) < 20:
    out.append(out[-1].__cause__ or out[-1].__context__)
  return out


def _line_in(e: BaseException, path: str) -> int | None:
  """The line of `path` at which `e` was raised (its innermost frame there), if any."""
  if isinstance(e, SyntaxError) and e.filename and os.path.abspath(e.filename) == path:
    return e.lineno
  lines = [f.lineno for f in traceback.extract_tb(e.__traceback__)
           if os.path.abspath(f.filename) == path]
  return lines[-1] if lines else None


def _short(e: BaseException) -> str:
  """An exception's message on one line, without ml_collections' list of every field."""
  text = e.msg if isinstance(e, SyntaxError) else _text(e)
  text = re.sub(r' Other fields present: "\{.*?\}"', "", text, flags=re.S)
  return _one_line(text)


def _text(e: BaseException) -> str:
  """The message of e, unquoted: ml_collections wraps a KeyError's repr in its errors."""
  return str(e).replace("\\n", "\n").replace("\\'", "'")


def _suggestion(text: str) -> str:
  m = re.search(r'Did you mean:? "?([\w., ]+?)"? (instead|\?)', text)
  return f" (did you mean {m.group(1).strip()}?)" if m else ""


def _no_none_warning(record: std_logging.LogRecord) -> bool:
  return "get_config() returned None" not in record.getMessage()


def _one_line(text: str) -> str:
  text = " ".join(text.split())
  quoted = len(text) > 1 and text[0] == text[-1] and text[0] in "'\""
  return text[1:-1] if quoted else text


def _fail(message: str) -> None:
  """Exits 2 with `message`: one line, or one line per problem (e.g. config.validate's)."""
  for line in message.splitlines() or [""]:
    print(f"error: {line}", file=sys.stderr)
  sys.exit(2)
