"""Canonical serialisation of a harness and its SHA-256 digest.

Text is canonical JSON: sorted keys, no whitespace, UTF-8, no ASCII escaping. Numbers are
hashed as their stored bytes in a fixed layout (little-endian int32 levels and guidance
cap, float32 ladder and weights with their exact padding), so the digest is bit-exact and
cheap on large pools. Nothing depends on set or dict iteration order, the Python hash
seed, the process or the machine.

  header       = JSON {format, total_weight, guidance_caps, num_tasks, num_criteria}
  numbers      = sha256 of  levels <i4 [N] | guidance_cap <i4 | ladder <f4 [L] |
                 weights <f4 [N, K]        (each array's bytes in C order, concatenated)
  task digest  = sha256(JSON {id, criteria: [{id, text, anchor, tags, check}],
                              retired_ids, guidance: [[field, content], ...]})
  digest       = sha256(header + "\\n" + numbers hex + "\\n" + task digests, one a line)

`canonical(h)` is the same content as one readable JSON-like dict (floats as the shortest
decimal that reads back to the stored float32), for inspection and diffs.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np

from harnessrl_jax.harness.state import Harness

FORMAT = "harnessrl_jax.harness/1"


def dumps(obj: Any) -> str:
  """The canonical JSON text of a JSON-like value."""
  return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                    allow_nan=False)


def _header(h: Harness) -> dict[str, Any]:
  return {"format": FORMAT, "total_weight": h.total_weight,
          "guidance_caps": list(h.guidance_caps), "num_tasks": h.num_tasks,
          "num_criteria": int(np.shape(h.weights)[1])}


def numbers_digest(h: Harness) -> str:
  m = hashlib.sha256()
  for a, dtype in ((h.levels, "<i4"), (h.guidance_cap, "<i4"), (h.ladder, "<f4"),
                   (h.weights, "<f4")):
    m.update(np.ascontiguousarray(np.asarray(a), dtype=dtype).tobytes())
  return m.hexdigest()


def canonical(h: Harness) -> dict[str, Any]:
  """The whole harness as one JSON-like dict."""
  levels = np.asarray(h.levels).tolist()
  weights = np.asarray(h.weights, np.float32).tolist()  # the float32 values, exactly
  return {"header": _header(h),
          "ladder": np.asarray(h.ladder, np.float32).tolist(),
          "guidance_cap": int(np.asarray(h.guidance_cap)),
          "tasks": [{**json.loads(t.canonical_text), "level": levels[i],
                     "weights": weights[i][:len(t.criteria)]}
                    for i, t in enumerate(h.tasks)]}


def digest(h: Harness) -> str:
  """SHA-256 (hex) of the harness."""
  lines = [dumps(_header(h)), numbers_digest(h)] + [t.text_digest for t in h.tasks]
  return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()
