"""Everything google-jetstream 0.2.2 needs to run next to current JAX, in one place.

Import this module before any `jetstream` module (the serving code does). It fixes:

1. `seqio` at import time. `jetstream.engine.token_utils` imports
   `seqio.vocabularies.{Vocabulary, SentencePieceVocabulary}` at module load even when the
   engine never uses them, and seqio pulls TensorFlow (site-packages 0.8 -> 3.2 GB, ~10 s
   import). We install google-jetstream with `--no-deps` (requirements-nodeps.txt) and,
   when no real seqio is importable, register a stub module whose two classes raise if
   anyone actually instantiates them. Our engine brings its own tokenizer.
2. `jax.tree_map`, removed from current JAX. The orchestrator calls it after every insert
   (`delete_pytree`); without it the first Decode kills the server process (the client sees
   "UNAVAILABLE: Stream removed"). We alias it to `jax.tree.map`.
3. The bind address. `jetstream.core.server_lib._HOST` is "[::]" (all interfaces);
   `load_server_lib(host)` sets it to the requested host, 127.0.0.1 by default.
4. Logging. `jetstream.core.orchestrator` sets the ROOT logger to DEBUG and adds a stdout
   handler at import, and logs several lines per decode step through the root logger at
   INFO. Unless asked to keep them, `load_server_lib` removes that handler and raises the
   root logger to WARNING (it cannot target the orchestrator alone: it logs via root).

The generated protobuf modules (`jetstream.core.proto.*`) need none of this; the judge's
client imports only those.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import types

import jax


def _install_seqio_stub() -> None:
  if "seqio" in sys.modules or importlib.util.find_spec("seqio") is not None:
    return

  class _Unavailable:
    """Stands in for a seqio vocabulary; only a real seqio install can provide one."""

    def __init__(self, *args, **kwargs):
      del args, kwargs
      raise RuntimeError(
          "seqio is not installed (harnessrl_jax stubs it for JetStream); SentencePiece "
          "vocabularies are unavailable. Engines here bring their own tokenizer.")

  seqio = types.ModuleType("seqio")
  seqio.__doc__ = "Stub installed by harnessrl_jax.serving.jetstream_compat."
  vocabularies = types.ModuleType("seqio.vocabularies")
  vocabularies.Vocabulary = type("Vocabulary", (_Unavailable,), {})
  vocabularies.SentencePieceVocabulary = type("SentencePieceVocabulary", (_Unavailable,), {})
  seqio.vocabularies = vocabularies
  sys.modules["seqio"] = seqio
  sys.modules["seqio.vocabularies"] = vocabularies


def _alias_tree_map() -> None:
  try:
    jax.tree_map  # pylint: disable=pointless-statement
  except AttributeError:
    jax.tree_map = jax.tree.map


_install_seqio_stub()
_alias_tree_map()


def bind_address(host: str, port: int) -> str:
  """host:port as gRPC wants it (IPv6 literals bracketed)."""
  if ":" in host and not host.startswith("["):
    host = f"[{host}]"
  return f"{host}:{port}"


def load_server_lib(host: str = "127.0.0.1", keep_jetstream_logging: bool = False):
  """Imports `jetstream.core.server_lib`, bound to `host` instead of all interfaces."""
  root = logging.getLogger()
  level, handlers = root.level, list(root.handlers)
  from jetstream.core import server_lib  # pylint: disable=g-import-not-at-top
  if not keep_jetstream_logging:
    root.setLevel(max(level, logging.WARNING))
    for handler in list(root.handlers):
      if handler not in handlers:
        root.removeHandler(handler)
  # server_lib formats f"{_HOST}:{port}"; an IPv6 literal needs its brackets.
  server_lib._HOST = bind_address(host, 0).rsplit(":", 1)[0]  # pylint: disable=protected-access
  return server_lib
