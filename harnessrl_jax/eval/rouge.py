"""ROUGE-L F-measure (Lin 2004), the metric RoleBench reports.

Tokens: the text lower-cased, every run of characters outside [a-z0-9] turned into a space,
split on whitespace; no stemming, no stop-word removal. With L = the length of the longest
common subsequence of candidate c and reference r:
    P = L / |c|,  R = L / |r|,  F = 2 P R / (P + R)   (0 when L = 0 or a side is empty).
Against several references an answer takes its best F (RoleBench lists several generated
references for some questions).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def tokenize(text: str) -> list[str]:
  return _NON_ALNUM.sub(" ", text.lower()).split()


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
  """Length of the longest common subsequence; O(|a| |b|) time, O(|b|) memory."""
  prev = [0] * (len(b) + 1)
  for x in a:
    cur = [0]
    for j, y in enumerate(b):
      cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
    prev = cur
  return prev[-1]


def rouge_l(candidate: str, reference: str) -> float:
  """ROUGE-L F of one candidate against one reference, in [0, 1]."""
  c, r = tokenize(candidate), tokenize(reference)
  lcs = lcs_length(c, r) if c and r else 0
  if lcs == 0:
    return 0.0
  p, rec = lcs / len(c), lcs / len(r)
  return 2 * p * rec / (p + rec)


def rouge_l_multi(candidate: str, references: Sequence[str]) -> float:
  """Best ROUGE-L F over the references (0 without any)."""
  return max((rouge_l(candidate, ref) for ref in references), default=0.0)
