"""A JSON schema as a token automaton over one tokenizer's vocabulary (host side, NumPy).

outlines-core turns the schema into a regular expression and that into a DFA over the
tokenizer's tokens (`Index`): from each state, which tokens may come next and where each
leads. We store it in a form the jitted sampler can read with plain gathers:

  next_state [S, C] int32   the state after a token of class c in state s; -1: not allowed
  token_class [V] int32     each vocabulary id's class; ids with identical columns share one
  cost [S] int32            fewest tokens that still complete the answer from s, counting
                            the stop token (NEVER where no completion exists)

Grouping ids whose transition columns are identical keeps the table small: a JSON grammar
treats most tokens alike (inside a string every plain-text token is just "more string"), so
C is a few hundred where V is 49152. `cost` lets the sampler refuse any token after which the
answer could no longer be closed within the tokens left: the answer is complete, valid JSON
before max_tokens runs out, with no length bounds written into the schema.

Stop tokens (the model's end-of-turn ids) are allowed in final states only; they lead to
END (-2), which a `Constraints` batch maps to its free state. Special tokens other than
the stop ids are never allowed under a schema.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from harnessrl_jax.errors import HarnessError

NEVER = 1 << 30  # the cost of a state from which no completion exists
END = -2         # next_state of a stop token in a final state


class SchemaError(HarnessError):
  """A schema the grammar backend cannot compile, or a vocabulary it cannot read."""


@dataclasses.dataclass(frozen=True, eq=False)
class TokenDFA:
  """One schema's automaton (see the module docstring); states 0..S-1, `initial` first."""

  next_state: np.ndarray   # [S, C] int32
  token_class: np.ndarray  # [V] int32
  cost: np.ndarray         # [S] int32
  initial: int
  key: str                 # the schema's canonical JSON (what it was compiled from)

  @property
  def num_states(self) -> int:
    return self.next_state.shape[0]

  @property
  def min_tokens(self) -> int:
    """The fewest tokens of a complete answer, stop token included."""
    return int(self.cost[self.initial])


def _byte_decoder() -> dict[str, int]:
  from harnessrl_jax.models.tokenizer import _byte_to_unicode  # pylint: disable=g-import-not-at-top
  return {ch: b for b, ch in _byte_to_unicode().items()}


def token_bytes(tokenizer) -> list[bytes | None]:
  """The bytes each vocabulary id stands for (None: a special / added token).

  Byte-level BPE vocabularies (GPT-2 alphabet: SmolLM2, Qwen, the tiny test tokenizer) map
  each character back to its byte; SentencePiece ones (Gemma) write spaces as U+2581 and
  raw bytes as <0xNN>. Anything else is refused rather than guessed.
  """
  vocab = tokenizer.get_vocab()
  special = {int(i) for i in getattr(tokenizer, "added_tokens_decoder", {})}
  special |= {int(i) for i in getattr(tokenizer, "all_special_ids", [])}
  size = max(len(tokenizer), max(vocab.values()) + 1)
  out: list[bytes | None] = [None] * size
  bytes_of = _byte_decoder()
  plain = [(t, i) for t, i in vocab.items() if i not in special]
  byte_level = all(ch in bytes_of for t, _ in plain for ch in t)
  for text, i in plain:
    if byte_level:
      out[i] = bytes(bytes_of[ch] for ch in text)
    elif len(text) == 6 and text.startswith("<0x") and text.endswith(">"):
      out[i] = bytes([int(text[3:5], 16)])
    else:
      out[i] = text.replace("\u2581", " ").encode("utf-8")
  if not byte_level and not any(t.startswith("\u2581") for t, _ in plain):
    raise SchemaError("grammar: the tokenizer is neither byte-level BPE nor SentencePiece; "
                      "its tokens' bytes are unknown")
  return out


def canonical(schema: dict[str, Any]) -> str:
  """The schema as compact JSON: equal schemas share one compiled automaton. Keys keep
  their order: the order of "properties" is the order the answer writes them in."""
  return json.dumps(schema, separators=(",", ":"), ensure_ascii=False)


def _costs(num_states: int, edges: np.ndarray, finals: np.ndarray) -> np.ndarray:
  """Fewest tokens to a final state plus one stop token (breadth first over reversed
  edges [E, 2] of (from, to))."""
  cost = np.full(num_states, NEVER, np.int64)
  preds = collections.defaultdict(list)
  for a, b in edges:
    preds[int(b)].append(int(a))
  frontier = [int(s) for s in np.flatnonzero(finals)]
  cost[frontier] = 1
  while frontier:
    nxt = []
    for b in frontier:
      for a in preds[b]:
        if cost[a] == NEVER:
          cost[a] = cost[b] + 1
          nxt.append(a)
    frontier = nxt
  return cost.astype(np.int32)


def classes_of(columns: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
               vocab_size: int) -> np.ndarray:
  """[V] class ids such that two ids share a class iff every state treats them alike.

  `columns`: per state, (tokens, next states, state index). Each id's column is hashed
  incrementally (64-bit, wrapping); `build` checks the result exactly afterwards.
  """
  h = np.zeros(vocab_size, np.uint64)
  with np.errstate(over="ignore"):
    for toks, nxt, s in columns:
      tag = (np.uint64(s) * np.uint64(0x9E3779B97F4A7C15)
             + nxt.astype(np.uint64) * np.uint64(0xBF58476D1CE4E5B9) + np.uint64(1))
      h[toks] = h[toks] * np.uint64(0x94D049BB133111EB) + tag
  _, cls = np.unique(h, return_inverse=True)
  return cls.astype(np.int32)


def build(transitions: dict[int, dict[int, int]], initial: int, finals: set[int],
          stop_ids: Sequence[int], vocab_size: int, key: str) -> TokenDFA:
  """A TokenDFA from outlines-core-shaped transitions {state: {token: next}} (any state
  ids); stop ids are added to the final states (leading to END)."""
  states = sorted(set(transitions) | {initial} | set(finals) |
                  {n for row in transitions.values() for n in row.values()})
  index = {s: k for k, s in enumerate(states)}
  stop = np.asarray(sorted(set(int(t) for t in stop_ids)), np.int64)
  stop_set = set(stop.tolist())
  columns = []
  for s in states:
    row = {t: n for t, n in transitions.get(s, {}).items()
           if t not in stop_set and t < vocab_size}
    toks = np.fromiter(row, np.int64, len(row))
    nxt = np.fromiter((index[n] for n in row.values()), np.int64, len(row))
    if s in finals and len(stop):
      toks = np.concatenate([toks, stop])
      nxt = np.concatenate([nxt, np.full(len(stop), END, np.int64)])
    columns.append((toks, nxt, index[s]))
  token_class = classes_of([(t, n - END, k) for t, n, k in columns], vocab_size)
  table = np.full((len(states), int(token_class.max()) + 1), -1, np.int32)
  for toks, nxt, k in columns:
    table[k, token_class[toks]] = nxt
  for toks, nxt, k in columns:  # exact check of the hashed grouping
    row = table[k, token_class]
    if (row >= 0).sum() + (row == END).sum() != len(toks) or (row[toks] != nxt).any():
      raise SchemaError("grammar: token classes collided; this is a bug")
  edges = np.asarray([(k, n) for toks, nxt, k in columns for n in set(nxt.tolist())
                      if n >= 0], np.int64).reshape(-1, 2)
  final_mask = np.zeros(len(states), bool)
  final_mask[[index[s] for s in finals]] = True
  return TokenDFA(table, token_class, _costs(len(states), edges, final_mask),
                  index[initial], key)


class SchemaCompiler:
  """Compiles JSON schemas to TokenDFAs for one tokenizer (outlines-core), keeping the last
  `cache_size` of them: the judge asks under one schema all run long."""

  def __init__(self, tokenizer, stop_ids: Sequence[int], vocab_size: int, *,
               cache_size: int = 64):
    import outlines_core  # pylint: disable=g-import-not-at-top
    self._oc = outlines_core
    self.stop_ids = tuple(int(t) for t in stop_ids)
    if not self.stop_ids:
      raise SchemaError("grammar: no stop token; a constrained answer could not end")
    self.vocab_size = int(vocab_size)
    by_bytes: dict[bytes, list[int]] = {}
    for i, b in enumerate(token_bytes(tokenizer)):
      if b and i < self.vocab_size and i not in self.stop_ids:
        by_bytes.setdefault(b, []).append(i)
    # outlines-core wants one EOS id; our stop ids are added to final states in `build`.
    self._vocabulary = outlines_core.Vocabulary(self.stop_ids[0], by_bytes)
    self.compile_key = functools.lru_cache(maxsize=cache_size)(self._compile)

  def compile(self, schema: dict[str, Any]) -> TokenDFA:
    return self.compile_key(canonical(schema))

  def _compile(self, key: str) -> TokenDFA:
    from outlines_core.json_schema import build_regex_from_schema  # pylint: disable=g-import-not-at-top
    try:
      # No optional whitespace between tokens: fewer states, and nothing for a small model
      # to wander into.
      regex = build_regex_from_schema(key, "")
      index = self._oc.Index(regex, self._vocabulary)
    except Exception as e:  # pylint: disable=broad-except  # the backend's own errors vary
      raise SchemaError(f"grammar: cannot compile the schema {key[:200]}: {e}") from e
    eos = self.stop_ids[0]
    transitions = {s: {t: n for t, n in row.items() if t != eos}
                   for s, row in index.get_transitions().items()}
    return build(transitions, index.get_initial_state(), set(index.get_final_states()),
                 self.stop_ids, self.vocab_size, key)
