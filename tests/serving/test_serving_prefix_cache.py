"""PrefixCache: longest block-aligned match with exact token comparison, least-recently-used
eviction, and a prefix still found after one of the entries holding it is evicted."""

import numpy as np
import pytest

from harnessrl_jax.serving.prefix_cache import PrefixCache, block_hashes


def ctx(*values):
  return np.asarray(values, np.int32)


def test_longest_whole_block_match_leaving_one_token():
  cache = PrefixCache(4, block=2)
  cache.store(ctx(1, 2, 3, 4, 5, 6), "k", "v")
  assert cache.lookup(ctx(1, 2, 3, 4, 9)) == (4, cache._entries[0])  # pylint: disable=protected-access
  p, _ = cache.lookup(ctx(1, 2, 3, 4))     # one token must be left to compute
  assert p == 2
  assert cache.lookup(ctx(1, 2, 3, 4, 5, 6, 7))[0] == 6
  assert cache.lookup(ctx(2, 2, 3, 4, 5)) == (0, None)
  assert cache.stats.lookups == 4 and cache.stats.hits == 3 and cache.stats.tokens_reused == 12


def test_least_recently_used_is_evicted_and_shared_blocks_survive():
  cache = PrefixCache(2, block=2)
  cache.store(ctx(1, 2, 3, 4), "a", "a")
  cache.store(ctx(1, 2, 7, 8), "b", "b")
  assert cache.lookup(ctx(1, 2, 3, 4, 0))[1].k == "a"      # touches a: b is now the oldest
  cache.store(ctx(5, 6, 5, 6), "c", "c")                    # evicts b
  assert cache.covers(ctx(5, 6, 5, 6, 1)) and not cache.covers(ctx(5, 6, 5, 7))
  assert len(cache) == 2 and cache.lookup(ctx(1, 2, 7, 8, 0))[0] == 2   # a still holds [1, 2]
  cache.store(ctx(9, 9), "d", "d")                          # evicts c (a was just used)
  assert cache.lookup(ctx(5, 6, 5, 6, 0)) == (0, None) and not cache.covers(ctx(5, 6))
  assert cache.lookup(ctx(1, 2, 0))[1].k == "a"


def test_a_hash_only_proposes_tokens_are_compared():
  cache = PrefixCache(2, block=2)
  cache.store(ctx(1, 2, 3, 4), "a", "a")
  # Forge a collision: the stored entry's digest under another context's key.
  forged = block_hashes(ctx(8, 8, 8, 8), 2)[-1]
  cache._by_hash[forged] = cache._by_hash[block_hashes(ctx(1, 2, 3, 4), 2)[-1]]  # pylint: disable=protected-access
  assert cache.lookup(ctx(8, 8, 8, 8, 0)) == (0, None)


def test_sizes_are_checked():
  with pytest.raises(ValueError, match="max_entries=0"):
    PrefixCache(0)
