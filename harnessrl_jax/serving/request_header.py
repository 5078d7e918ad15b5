"""A JSON schema carried inside a JetStream Decode request, ahead of the prompt's token ids.

JetStream 0.2.2's DecodeRequest has max_tokens and the content, nothing else, and the engine
sees neither the request nor max_tokens: only the padded prompt ids. So our client writes a
header in front of the ids and our engine's prefill reads and strips it:

  [MARK, max_tokens, n, w_1 .. w_k, prompt ids ...]

MARK is negative, so it is never a token id and a prompt cannot start a header by accident;
the w_i pack the zlib-compressed schema JSON (n bytes) three bytes per non-negative int32.
A header costs 3 + ceil(n / 3) prompt positions (the verdict schema: ~60); the client counts
them against the prompt limit. No client of another engine ever sends one: only
JetStreamClient writes it, and only our DecoderEngine reads it.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from typing import Any

MARK = -20_241_020


def encode(schema: dict[str, Any], max_tokens: int) -> list[int]:
  """The header of a request whose answer must follow `schema` within max_tokens."""
  raw = zlib.compress(json.dumps(schema, separators=(",", ":"),
                                 ensure_ascii=False).encode("utf-8"), 9)
  padded = raw + b"\0" * (-len(raw) % 3)
  words = [int.from_bytes(padded[i:i + 3], "big") for i in range(0, len(padded), 3)]
  return [MARK, int(max_tokens), len(raw), *words]


def decode(ids: Sequence[int]) -> tuple[dict[str, Any] | None, int, int]:
  """(schema or None, max_tokens or 0, header length) of request ids that may start with a
  header; ValueError for a malformed one."""
  if len(ids) == 0 or int(ids[0]) != MARK:
    return None, 0, 0
  if len(ids) < 3:
    raise ValueError("schema header: truncated")
  max_tokens, n = int(ids[1]), int(ids[2])
  k = -(-n // 3)
  if n < 1 or len(ids) < 3 + k:
    raise ValueError(f"schema header: {n} bytes announced, {len(ids) - 3} words present")
  raw = b"".join(int(w).to_bytes(3, "big") for w in ids[3:3 + k])[:n]
  schema = json.loads(zlib.decompress(raw).decode("utf-8"))
  if not isinstance(schema, dict):
    raise ValueError("schema header: not a JSON object")
  return schema, max_tokens, 3 + k
