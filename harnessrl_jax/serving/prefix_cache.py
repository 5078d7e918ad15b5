"""The KV of recent prompts, kept so that a prefill starting with the same tokens computes
only the rest (JetStream 0.2.2's orchestrator never passes `existing_prefix`, so the engine
finds shared prefixes itself).

Why: a judge sends one request per (task, response, criterion), and the requests of one
(task, response) share everything but the rubric item at the end (judges/prompt.py).

An entry holds one prompt's context tokens and their K, V ([attention layers, E, KV, Dh],
left-aligned, E = a power of two >= the context, so the engine compiles once per E). Lookup
hashes the context's prefixes at every `block` tokens and returns the longest one some entry
starts with, its tokens compared exactly (a hash only finds the candidate). Entries are
evicted least recently used; a lookup that finds one counts as a use.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import threading

import numpy as np


@dataclasses.dataclass(frozen=True)
class Entry:
  tokens: np.ndarray   # [n] int32, the context this entry's K, V belong to
  k: object            # [attention layers, E, KV, Dh] device array, rows [0, n) real
  v: object


@dataclasses.dataclass
class Stats:
  lookups: int = 0
  hits: int = 0
  tokens_looked_up: int = 0
  tokens_reused: int = 0


def block_hashes(tokens: np.ndarray, block: int) -> list[bytes]:
  """Digest of tokens[:block * (i + 1)] for each whole block i (chained, so each costs one
  block's hashing)."""
  out, h = [], b""
  data = np.ascontiguousarray(tokens, np.int32)
  for i in range(len(data) // block):
    h = hashlib.blake2b(h + data[i * block:(i + 1) * block].tobytes(), digest_size=16).digest()
    out.append(h)
  return out


class PrefixCache:
  """At most `max_entries` contexts; prefixes are matched in whole blocks of `block` tokens."""

  def __init__(self, max_entries: int, block: int = 16):
    if max_entries < 1 or block < 1:
      raise ValueError(f"PrefixCache(max_entries={max_entries}, block={block}): both >= 1")
    self.max_entries, self.block = int(max_entries), int(block)
    self._entries: collections.OrderedDict[int, Entry] = collections.OrderedDict()
    self._by_hash: dict[bytes, list[int]] = {}   # block-prefix digest -> entry ids holding it
    self._hashes: dict[int, list[bytes]] = {}
    self._next_id = 0
    self._lock = threading.Lock()
    self.stats = Stats()

  def __len__(self) -> int:
    return len(self._entries)

  def lookup(self, context: np.ndarray, *, keep: int = 1) -> tuple[int, Entry | None]:
    """(P, entry): the longest block-aligned P <= len(context) - keep with context[:P] equal
    to entry.tokens[:P]; (0, None) when none."""
    context = np.asarray(context, np.int32)
    with self._lock:
      self.stats.lookups += 1
      self.stats.tokens_looked_up += len(context)
      limit = (len(context) - keep) // self.block
      hashes = block_hashes(context[:limit * self.block], self.block)
      for i in range(len(hashes) - 1, -1, -1):
        p = (i + 1) * self.block
        for eid in reversed(self._by_hash.get(hashes[i], ())):
          entry = self._entries[eid]
          if np.array_equal(entry.tokens[:p], context[:p]):
            self._entries.move_to_end(eid)
            self.stats.hits += 1
            self.stats.tokens_reused += p
            return p, entry
      return 0, None

  def covers(self, context: np.ndarray) -> bool:
    """Whether every whole block of `context` is already held (storing it adds nothing)."""
    context = np.asarray(context, np.int32)
    with self._lock:
      hashes = block_hashes(context, self.block)
      return bool(hashes) and hashes[-1] in self._by_hash

  def store(self, tokens: np.ndarray, k, v) -> None:
    """Keeps `tokens` (a context of at least one block) with its K, V; evicts the least
    recently used entry beyond `max_entries`."""
    tokens = np.array(tokens, np.int32)
    hashes = block_hashes(tokens, self.block)
    if not hashes:
      return
    with self._lock:
      eid, self._next_id = self._next_id, self._next_id + 1
      self._entries[eid] = Entry(tokens, k, v)
      self._hashes[eid] = hashes
      for h in hashes:
        self._by_hash.setdefault(h, []).append(eid)
      while len(self._entries) > self.max_entries:
        old, _ = self._entries.popitem(last=False)
        for h in self._hashes.pop(old):
          holders = self._by_hash[h]
          holders.remove(old)
          if not holders:
            del self._by_hash[h]
