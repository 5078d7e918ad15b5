"""A bounded, thread-safe LRU cache of verdicts keyed by the full judge request.

The key hashes (judge identity, the rendered judge prompt): the prompt holds the task's
conversation, the criterion text and polarity, and the response, so a regrade of unchanged
cells (the JIT critic regrades whole groups under a candidate rubric) is free, and any
change to one of them is a miss. Only parsed verdicts are stored, never failures;
`FailedRequests` remembers failures apart, so that the judge can bound how often it sends a
request that keeps failing (judges/judge.py).
"""

from __future__ import annotations

import collections
import hashlib
import json
import threading
from collections.abc import Sequence
from typing import Any


def cache_key(identity: str, messages: Sequence[Any]) -> str:
  """sha256 over the judge identity and the request messages."""
  payload = json.dumps([identity, [_as_dict(m) for m in messages]], ensure_ascii=False,
                       sort_keys=True)
  return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _as_dict(message: Any) -> dict[str, str]:
  if isinstance(message, dict):
    return {"role": message["role"], "content": message["content"]}
  return {"role": message.role, "content": message.content}


class VerdictCache:
  """LRU map key -> (verdict, raw text)."""

  def __init__(self, max_size: int):
    self._max_size = max(0, int(max_size))
    self._data: collections.OrderedDict[str, tuple[bool, str]] = collections.OrderedDict()
    self._lock = threading.Lock()

  def get(self, key: str) -> tuple[bool, str] | None:
    with self._lock:
      hit = self._data.get(key)
      if hit is not None:
        self._data.move_to_end(key)
      return hit

  def put(self, key: str, verdict: bool, raw: str) -> None:
    if not self._max_size:
      return
    with self._lock:
      self._data[key] = (bool(verdict), raw)
      self._data.move_to_end(key)
      while len(self._data) > self._max_size:
        self._data.popitem(last=False)

  def __len__(self) -> int:
    with self._lock:
      return len(self._data)


class FailedRequests:
  """LRU map key -> (cause of the latest failure, calls the request failed in)."""

  def __init__(self, max_size: int):
    self._max_size = max(1, int(max_size))
    self._data: collections.OrderedDict[str, tuple[str, int]] = collections.OrderedDict()
    self._lock = threading.Lock()

  def get(self, key: str) -> tuple[str, int] | None:
    with self._lock:
      return self._data.get(key)

  def add(self, key: str, cause: str) -> None:
    """One more call in which the request failed, for `cause`."""
    with self._lock:
      calls = self._data.pop(key, ("", 0))[1]
      self._data[key] = (cause, calls + 1)
      while len(self._data) > self._max_size:
        self._data.popitem(last=False)

  def discard(self, key: str) -> None:
    with self._lock:
      self._data.pop(key, None)

  def __len__(self) -> int:
    with self._lock:
      return len(self._data)
