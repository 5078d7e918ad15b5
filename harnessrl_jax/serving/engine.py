"""A JetStream `Engine` for our Flax `Decoder`: prefill, insert and greedy generate over
decode slots, served by JetStream's own orchestrator (see harnessrl_jax/serve.py).

Decode state: one KV cache of `slots` rows and M = max_prefill_length + max_decode_length
cache slots, with a single write index g shared by all rows (the decoder's cache contract).
Each row keeps its tokens right-aligned, ending at g; positions are explicit per row, and K is
cached after RoPE, so where a token sits in the cache does not matter, only its mask bit.
Hybrid stacks (qwen3_5) keep KV for their attention layers only; each linear_attention layer
carries a constant-size state per row (cache.linear, kv_cache.py) instead of slots.
Sliding-window layers (gemma3, gemma4) keep window-sized rings (kv_cache.py: slot s in entry
s % window, which slot an entry holds following from g), so their memory does not grow with M;
rows' slots stay contiguous, so the window counted in slots is the window in tokens.
  prefill: runs the prompt minus its last token, left-padded to its length rounded up to
           PREFILL_MULTIPLE (not to JetStream's power-of-two bucket), keeping the last
           token to feed first: exactly what the rollout sampler does, so greedy output
           equals the local judge's.
           With kept prefixes (serving/prefix_cache.py, models that attend fully), a
           prompt whose first whole 16-token blocks equal a kept prompt's computes only the
           rest: the kept K, V fill slots [R - P, R) and the rest runs as a left-padded
           chunk at [R, W); the chunk's padding stays in the row (masked), so the row's
           slot count is P + the chunk, not the prompt's length.
  insert:  writes the prefix's window into [g - W, g) of the slot's row and clears the
           rest of the row's mask (the invariant g >= max_prefill_length makes room); the
           prefix's linear states replace the row's, so a reused slot keeps nothing of the
           request it held before. Its rings rotate by the window's start g - W: prefix
           slot s becomes g - W + s, so ring entry s % window moves to
           (g - W + s) % window; entries the prefix does not fill hold slots whose mask bit
           insert cleared.
  generate: feeds every row's pending token at g (greedy argmax), g += 1; the decoder
           advances every row's linear states by that token. Attention reads the last
           `window` slots when a power of two >= MIN_WINDOW holds every live row and is
           under a third of the cache (`_window_for`), else the whole cache. The state is
           donated to insert, generate and compaction: each writes in place instead of
           copying the cache.
When g reaches M the cache is compacted: every row is shifted left so that the longest
live row still fits. Only slots move: a linear state summarises its row's tokens wherever
they sit, so compaction leaves it alone; rings rotate with their slots. A live row that
would outgrow M is ended (its token marked invalid, which JetStream reads as "complete"), as
is a prompt longer than max_prefill_length; this holds for hybrid stacks too (their
attention layers need the slots).

Token protocol with JetStream 0.2.2: the orchestrator prepends `bos_id` to every prompt
(`token_utils.pad_tokens(is_bos=True)`); our chat templates already produce complete id
sequences, so prefill drops that first slot. Text requests are tokenised as plain text
(no chat template); the judge client sends token ids.

JSON schemas: a request's ids may start with a schema header (serving/request_header.py:
the schema and the request's max_tokens, which JetStream does not pass to engines). Prefill
strips it and compiles the schema (rollout/schema_dfa.py, cached); insert gives the slot the
schema's table (serving/slot_grammar.py), and generate masks each slot's logits with it, so
the answer is complete JSON in the schema within max_tokens. A header that does not parse,
a schema that does not compile, or one that cannot be completed within max_tokens ends the
request with no output (logged).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import logging
import zlib
from typing import Any

from harnessrl_jax.serving import jetstream_compat  # noqa: F401  # before any jetstream import
# pylint: disable=g-bad-import-order,g-import-not-at-top
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jetstream.engine import engine_api, token_utils, tokenizer_api, tokenizer_pb2

from harnessrl_jax.errors import ConfigError, HarnessError
from harnessrl_jax.models.kv_cache import (DecodeCache, KVCache, init_cache, map_rows,
                                           to_decode_cache)
from harnessrl_jax.rollout import batching
from harnessrl_jax.rollout.schema_dfa import SchemaCompiler
from harnessrl_jax.serving import request_header, slot_grammar
from harnessrl_jax.serving.prefix_cache import PrefixCache

# JetStream's prefill buckets: max_prefill_length must be one of them (token_utils).
PREFILL_BUCKETS = tuple(16 * 2 ** i for i in range(12))


@dataclasses.dataclass(frozen=True)
class DecodeState:
  """Slots of the generate loop. Device arrays plus a host mirror of the bookkeeping that
  decides compaction (so no step waits on the device for it)."""

  cache: KVCache         # k, v [attention layers, S, M, KV, Dh]; mask [S, M]; index = g;
                         # linear: per linear layer, states with a leading [S] axis;
                         # ring_k, ring_v [sliding layers, S, W, KV, Dh] or None
  tokens: jax.Array      # [S] int32, the token each row feeds next
  positions: jax.Array   # [S] int32, its position id
  generated: jax.Array   # [S] int32, tokens emitted so far
  live: jax.Array        # [S] bool, False: empty, finished by the engine, or stale
  grammar: slot_grammar.SlotGrammar  # each slot's schema table, state and tokens left
  g: int                 # host copy of cache.index
  row_len: np.ndarray    # [S] host: cache slots each row occupies, ending at g
  row_live: np.ndarray   # [S] host view of `live` (synced from the device at compaction)


class EngineTokenizer(tokenizer_api.Tokenizer):
  """JetStream's tokenizer interface over our PromptBuilder (used for text requests and
  for stop tokens)."""

  def __init__(self, prompt_builder, bos_id: int, stop_ids=()):
    self.prompt_builder = prompt_builder
    self._bos_id = int(bos_id)
    # The model's and the tokenizer's end tokens, as the local judge stops on.
    self._stop = {int(i) for i in (*prompt_builder.eos_token_ids, *stop_ids)}

  def encode(self, s: str, **kwargs):
    return token_utils.pad_tokens(
        np.asarray(self.prompt_builder.encode(s), np.int32), self.bos_id, self.pad_id,
        is_bos=kwargs.get("is_bos", True), prefill_lengths=kwargs.get("prefill_lengths"),
        max_prefill_length=kwargs.get("max_prefill_length"),
        jax_padding=kwargs.get("jax_padding", True))

  def decode(self, token_ids, **kwargs) -> str:
    del kwargs
    return self.prompt_builder.decode(token_ids)

  @property
  def pad_id(self) -> int:
    return int(self.prompt_builder.pad_id)

  @property
  def eos_id(self) -> int:
    return int(self.prompt_builder.eos_token_ids[0])

  @property
  def bos_id(self) -> int:
    return self._bos_id

  @property
  def stop_tokens(self) -> set[int]:
    return set(self._stop)


def _only_row(cache: KVCache) -> KVCache:
  """A one-row cache without its batch axis: k, v [attention layers, W, KV, Dh], mask [W],
  linear states without their leading [1]."""
  return map_rows(cache, lambda x, axis: jnp.take(x, 0, axis=axis))


@functools.partial(jax.jit, static_argnums=(0, 4))
def _prefill(graphdef, params, tokens, mask, ring: bool) -> KVCache:
  """The cache row of one left-padded context (`_only_row`); left padding leaves the linear
  states exactly those of the unpadded context (linear_attention.py)."""
  model = nnx.merge(graphdef, params)
  positions = jnp.maximum(jnp.cumsum(mask.astype(jnp.int32), axis=1) - 1, 0)
  cache = init_cache(model.cfg, 1, tokens.shape[1], ring=ring)
  _, cache = model(tokens, positions, mask, cache)
  return _only_row(cache)


# Generate attends over a window of the cache that holds every live row, rounded up to a
# power of two from here (each size compiles generate once): a judge's 500-token rows need
# not read a 2048 + 256-slot cache at every token.
MIN_WINDOW = 64
# Prefill rows are the context rounded up to this, whatever JetStream's bucket: each width
# compiles prefill and insert once.
PREFILL_MULTIPLE = 128
SUFFIX_MULTIPLE = 16   # a prefill on a kept prefix computes its suffix in chunks of these


@functools.partial(jax.jit, static_argnums=0)
def _prefill_on_prefix(graphdef, params, entry_k, entry_v, reused, tokens, mask) -> KVCache:
  """The cache row of a context whose first `reused` tokens have K, V in entry_k, entry_v
  [attention layers, E, KV, Dh] (left-aligned): those fill slots [R - reused, R) and the
  rest of the context, `tokens` [1, S] left-padded, runs at [R, W) on top of them
  (R = W - S, W = the row's width, static: mask [1, W] is only its shape's carrier)."""
  model = nnx.merge(graphdef, params)
  width, chunk = mask.shape[1], tokens.shape[1]
  region = width - chunk
  src = jnp.arange(region) - (region - reused)
  held = src >= 0
  take = lambda e: jnp.where(held[None, :, None, None],
                             jnp.take(e, jnp.clip(src, 0, e.shape[1] - 1), axis=1), 0)
  cache = init_cache(model.cfg, 1, width)
  pad = jnp.zeros((entry_k.shape[0], 1, chunk) + entry_k.shape[2:], cache.k.dtype)
  chunk_mask = mask[:, region:]
  cache = cache.replace(
      k=jnp.concatenate([take(entry_k)[:, None].astype(cache.k.dtype), pad], axis=2),
      v=jnp.concatenate([take(entry_v)[:, None].astype(cache.v.dtype), pad], axis=2),
      mask=jnp.concatenate([held[None], jnp.zeros((1, chunk), bool)], axis=1),
      index=jnp.asarray(region, jnp.int32))
  positions = reused + jnp.maximum(jnp.cumsum(chunk_mask.astype(jnp.int32), axis=1) - 1, 0)
  _, cache = model(tokens, positions, chunk_mask, cache)
  return _only_row(cache)


@jax.jit
def _gather_slots(k, v, slots):
  """K, V of one row ([attention layers, W, KV, Dh]) at `slots`, in that order (new
  buffers: JetStream deletes the prefix's own after insert)."""
  return jnp.take(k, slots, axis=1), jnp.take(v, slots, axis=1)


@functools.partial(jax.jit, donate_argnums=0)
def _insert(state_arrays, prefix, slot, g):
  """Writes a prefix into row `slot`: KV into window [g - W, g), its linear states over the
  row's (whatever the slot's previous request left there)."""
  cache, tokens, positions, generated, live = state_arrays
  width = prefix["mask"].shape[0]
  start = g - width
  row_mask = jnp.zeros((1, cache.mask.shape[1]), bool)
  row_mask = jax.lax.dynamic_update_slice(row_mask, prefix["mask"][None], (0, start))
  zero = jnp.zeros((), jnp.int32)
  k = jax.lax.dynamic_update_slice(cache.k, prefix["k"][:, None], (zero, slot, start, zero, zero))
  v = jax.lax.dynamic_update_slice(cache.v, prefix["v"][:, None], (zero, slot, start, zero, zero))
  mask = jax.lax.dynamic_update_slice(cache.mask, row_mask, (slot, zero))
  linear = jax.tree.map(lambda rows, row: rows.at[slot].set(row), cache.linear,
                        prefix["linear"])
  cache = cache.replace(k=k, v=v, mask=mask, linear=linear)
  if cache.ring_k is not None:   # prefix slot s -> start + s: entry s % W -> (start + s) % W
    put = lambda rows, row: rows.at[:, slot].set(jnp.roll(row, start, axis=1))
    cache = cache.replace(ring_k=put(cache.ring_k, prefix["ring_k"]),
                          ring_v=put(cache.ring_v, prefix["ring_v"]))
  return (cache, tokens.at[slot].set(prefix["token"]),
          positions.at[slot].set(prefix["position"]), generated.at[slot].set(0),
          live.at[slot].set(prefix["live"]))


def _window(cache: KVCache, window: int) -> DecodeCache:
  """The last `window` slots of every row, [g + 1 - window, g + 1): the step's own slot g
  and the `window - 1` before it, as a DecodeCache (a copy, in the layouts decode attention
  reads; index g becomes window - 1). Slots move as one block, so the causal and
  sliding-window comparisons between slots still hold."""
  start = cache.index + 1 - window
  cut = lambda x, axis: jax.lax.dynamic_slice_in_dim(x, start, window, axis=axis)
  return to_decode_cache(cache.replace(k=cut(cache.k, 2), v=cut(cache.v, 2),
                                       mask=cut(cache.mask, 1),
                                       index=jnp.asarray(window - 1, jnp.int32)))


def _write_back(cache: KVCache, window_cache: DecodeCache, g) -> KVCache:
  """`cache` with the step's slot g (the window's last) taken from `window_cache`: in place
  when `cache` is donated."""
  zero = jnp.zeros((), jnp.int32)
  # DecodeCache layouts: k [L, B, K, W, Dh], v [L, B, K, Dh, W] -> [L, B, 1, K, Dh].
  new_k = jnp.transpose(window_cache.k[:, :, :, -1:], (0, 1, 3, 2, 4))
  new_v = jnp.transpose(window_cache.v[..., -1:], (0, 1, 4, 2, 3))
  put = lambda full, new: jax.lax.dynamic_update_slice(full, new, (zero, zero, g, zero, zero))
  mask = jax.lax.dynamic_update_slice(cache.mask, window_cache.mask[:, -1:], (zero, g))
  return cache.replace(k=put(cache.k, new_k), v=put(cache.v, new_v),
                       mask=mask, index=g + 1, linear=window_cache.linear)


@functools.partial(jax.jit, static_argnums=(0, 5), donate_argnums=(2, 3))
def _generate(graphdef, params, state_arrays, grammar, stop_ids, window, layer_params):
  """One greedy step for every row, each masked by its slot's schema table (free slots:
  every token allowed, logits untouched); returns the new arrays, the new grammar and
  [S, 3] (token, valid, len).

  window > 0: attention reads only the last `window` slots (`_window`), which hold every
  live row (the caller sizes it); 0: all of them. The decode state is donated, so the
  step's K, V and mask are written in place rather than into a copy of the whole cache.
  A row that emits a stop token is no longer live afterwards, so it stops constraining
  compaction (JetStream completes the request on that token).
  """
  cache, tokens, positions, generated, live = state_arrays
  model = nnx.merge(graphdef, params)
  step = lambda c: model(tokens[:, None], positions[:, None],
                         jnp.ones((tokens.shape[0], 1), bool), c, layer_params=layer_params)
  if window:
    logits, near = step(_window(cache, window))
    cache = _write_back(cache, near, cache.index)
  else:
    logits, cache = step(cache)
  logits = jnp.where(slot_grammar.allowed(grammar), logits[:, -1], -jnp.inf)
  nxt = jnp.argmax(logits, axis=-1).astype(jnp.int32)
  grammar = slot_grammar.advance(grammar, nxt)
  generated = generated + 1
  data = jnp.stack([nxt, live.astype(jnp.int32), generated], axis=1)
  live = live & ~jnp.isin(nxt, stop_ids)
  return (cache, nxt, positions + 1, generated, live), grammar, data


def _longest(row_len: np.ndarray, row_live: np.ndarray) -> int:
  """The longest live row's length in slots (0 with none live)."""
  return int(row_len[row_live].max()) if row_live.any() else 0


@functools.partial(jax.jit, donate_argnums=0)
def _compact(cache: KVCache, shift, keep):
  """Moves every row's tokens `shift` slots to the left; the write index becomes `keep`.
  Linear states are per row, not per slot: they stay as they are."""
  roll = lambda x: jnp.roll(x, -shift, axis=2)
  slots = jnp.arange(cache.mask.shape[1])
  mask = jnp.roll(cache.mask, -shift, axis=1) & (slots < keep)[None]
  cache = cache.replace(k=roll(cache.k), v=roll(cache.v), mask=mask,
                        index=jnp.asarray(keep, jnp.int32))
  if cache.ring_k is not None:   # slot s -> s - shift: entry s % W -> (s - shift) % W
    cache = cache.replace(ring_k=roll(cache.ring_k), ring_v=roll(cache.ring_v))
  return cache


class DecoderEngine(engine_api.Engine):
  """Greedy serving of a `Decoder` with `max_concurrent_decodes` slots."""

  def __init__(self, model, prompt_builder, *, max_concurrent_decodes: int = 8,
               max_prefill_length: int = 1024, max_decode_length: int = 512,
               schema_table: tuple[int, int] = (0, 0), prefix_cache_entries: int = 16,
               devices=None):
    if max_prefill_length not in PREFILL_BUCKETS:
      raise ConfigError(f"max_prefill_length={max_prefill_length}: JetStream 0.2.2 needs one "
                        f"of its prefill buckets {PREFILL_BUCKETS}")
    if max_decode_length < 2 or max_concurrent_decodes < 1:
      raise ConfigError(f"max_decode_length={max_decode_length} (need >= 2) and "
                        f"max_concurrent_decodes={max_concurrent_decodes} (need >= 1)")
    self.graphdef, self._params = nnx.split(model)
    self.cfg = model.cfg
    self._ring = bool(self.cfg.ring_layers)   # sliding layers keep window-sized rings
    self.prompt_builder = prompt_builder
    self._slots = int(max_concurrent_decodes)
    self._max_prefill = int(max_prefill_length)
    self._cache_len = self._max_prefill + int(max_decode_length)
    devices = list(devices) if devices is not None else jax.devices()[:1]
    self._mesh = jax.sharding.Mesh(np.asarray(devices[:1]), ("x",))
    bos = self.cfg.bos_token_id
    self._tokenizer = EngineTokenizer(prompt_builder, bos if bos is not None else
                                      prompt_builder.pad_id, self.cfg.eos_token_ids)
    self._stop_ids = jnp.asarray(sorted(self._tokenizer.stop_tokens), jnp.int32)
    # On CPU, each layer's weights sliced out of the stack once: XLA:CPU would otherwise
    # copy every slice of a scanned stack at every generated token (Decoder.layer_states).
    # Not on accelerators, where the copy would hold a second set of weights in device
    # memory for the server's lifetime and was never measured.
    self._layer_params = model.layer_states() if devices[0].platform == "cpu" else None
    self.steps_by_window: collections.Counter[int] = collections.Counter()   # 0: whole cache
    self._compiler: SchemaCompiler | None = None   # built on the first schema request
    # Schema tables' starting size (states, token classes): a schema larger than the tables
    # so far grows them, which compiles generate anew; sized ahead, that happens never.
    self._schema_table = tuple(int(n) for n in schema_table)
    # Kept prompts need every slot of every layer's K, V: not for sliding windows (rings)
    # or linear attention, whose state is not a per-token cache.
    # Blocks of SUFFIX_MULTIPLE: a kept prefix then always leaves its suffix chunk room in the
    # row (reused + chunk = the context rounded up to 16 <= the width, a power of two).
    self.prefix_cache = (PrefixCache(prefix_cache_entries, block=SUFFIX_MULTIPLE)
                         if prefix_cache_entries > 0 and model.attends_fully() else None)

  # --- JetStream Engine API -------------------------------------------------------------

  def load_params(self, *args, **kwargs):
    del args, kwargs
    return self._params

  def init_decode_state(self, *args, **kwargs) -> DecodeState:
    del args, kwargs
    s = self._slots
    cache = init_cache(self.cfg, s, self._cache_len, ring=self._ring)
    cache = cache.replace(index=jnp.asarray(self._max_prefill, jnp.int32))
    # Buffers of their own: insert and generate donate the state, and one buffer in two
    # places cannot be donated.
    zeros = lambda: jnp.zeros((s,), jnp.int32)
    return DecodeState(cache=cache, tokens=zeros(), positions=zeros(), generated=zeros(),
                       live=jnp.zeros((s,), bool),
                       grammar=slot_grammar.empty(s, self.cfg.vocab_size,
                                                  *self._schema_table),
                       g=self._max_prefill,
                       row_len=np.zeros((s,), np.int64), row_live=np.zeros((s,), bool))

  def prefill(self, *, params, existing_prefix=None, padded_tokens, true_length: int):
    if existing_prefix is not None:
      logging.warning("DecoderEngine: existing_prefix is not supported; ignored")
    padded = np.asarray(padded_tokens, np.int32)
    width = padded.shape[0]
    ids = padded[1:true_length]  # slot 0 holds the BOS JetStream prepends (see module doc)
    if true_length > width or len(ids) == 0:
      if true_length > width:
        logging.error("DecoderEngine: a %d-token prompt exceeds max_prefill_length=%d; "
                      "ending it with no output", true_length, self._max_prefill)
      return self._dead(width, params)
    try:
      dfa, max_tokens, ids = self._schema_of(ids)
    except (HarnessError, ValueError, OverflowError, zlib.error) as e:
      logging.error("DecoderEngine: schema request refused, ending it with no output: %s", e)
      return self._dead(width, params)
    if len(ids) == 0:
      return self._dead(width, params)
    context, last = ids[:-1], ids[-1]
    # JetStream pads to powers of two; a row needs only its context, rounded up to
    # PREFILL_MULTIPLE (a 1,200-token prompt computes 1,280 positions, not 2,048).
    width = min(width, batching.round_up(max(len(context), 1), PREFILL_MULTIPLE))
    prefix = self._prefix_on_kept(context, int(last), width, params)
    if prefix is None:
      tokens = np.full((width,), self.prompt_builder.pad_id, np.int32)
      mask = np.zeros((width,), bool)
      if len(context):
        tokens[width - len(context):] = context
        mask[width - len(context):] = True
      prefix = self._prefix(tokens, mask, int(last), len(context), True, params)
      self._keep(context, prefix, width - len(context) + np.arange(len(context)), reused=0)
    prefix["schema"] = (dfa, max_tokens)   # host objects: JetStream deletes only jax.Arrays
    return prefix

  def _prefix_on_kept(self, context: np.ndarray, last: int, width: int, params):
    """The prefix of a context computed on top of a kept prompt's K, V, or None when no
    kept prompt shares a block with it."""
    if self.prefix_cache is None:
      return None
    reused, entry = self.prefix_cache.lookup(context)
    if entry is None:
      return None
    n = len(context)
    chunk = batching.round_up(n - reused, SUFFIX_MULTIPLE)
    tokens = np.full((1, chunk), self.prompt_builder.pad_id, np.int32)
    chunk_mask = np.zeros((1, width), bool)
    tokens[0, chunk - (n - reused):] = context[reused:]
    chunk_mask[0, width - (n - reused):] = True
    row = _prefill_on_prefix(self.graphdef, params, entry.k, entry.v,
                             jnp.asarray(reused, jnp.int32), jnp.asarray(tokens),
                             jnp.asarray(chunk_mask))
    prefix = self._row_prefix(row, last, n, True)
    prefix["row_slots"] = np.asarray(reused + chunk)   # the chunk's padding sits in the row
    region = width - chunk
    slots = np.concatenate([region - reused + np.arange(reused),
                            width - (n - reused) + np.arange(n - reused)])
    self._keep(context, prefix, slots, reused=reused)
    return prefix

  def _keep(self, context: np.ndarray, prefix, slots: np.ndarray, *, reused: int) -> None:
    """Keeps the context's K, V (at `slots` of the prefix's row) for later prefills, when
    most of it was new: a request that reused most of its context (a judge's next criterion
    on the same response) would only crowd out the prompt it reused."""
    cache = self.prefix_cache
    n = len(context)
    if cache is None or n < cache.block or 2 * reused >= n or cache.covers(context):
      return
    size = max(SUFFIX_MULTIPLE, 1 << (n - 1).bit_length())   # E: one compile per power of 2
    idx = np.zeros((size,), np.int32)
    idx[:n] = slots
    k, v = _gather_slots(prefix["k"], prefix["v"], jnp.asarray(idx))
    cache.store(context, k, v)

  def _schema_of(self, ids: np.ndarray):
    """(the request's TokenDFA or None, its max_tokens, the prompt ids without header)."""
    schema, max_tokens, used = request_header.decode(ids)
    if schema is None:
      return None, 0, ids
    if self._compiler is None:
      self._compiler = SchemaCompiler(self.prompt_builder.tokenizer,
                                      sorted(self._tokenizer.stop_tokens), self.cfg.vocab_size)
    dfa = self._compiler.compile(schema)
    if dfa.min_tokens > max_tokens:
      raise HarnessError(f"schema {schema.get('title')!r} needs at least {dfa.min_tokens} "
                         f"tokens; the request allows {max_tokens}")
    return dfa, max_tokens, ids[used:]

  def _dead(self, width: int, params):
    """The prefix of a request that ends at once with no output."""
    return self._prefix(np.zeros((width,), np.int32), np.zeros((width,), bool), 0, 0, False,
                        params)

  def _prefix(self, tokens, mask, last: int, context_len: int, live: bool, params):
    if mask.any():
      row = _prefill(self.graphdef, params, jnp.asarray(tokens[None]), jnp.asarray(mask[None]),
                     self._ring)
    else:  # nothing to attend to yet: an empty window and the linear layers' initial states
      # Eager, so every leaf is a buffer of its own: JetStream deletes them after insert.
      row = _only_row(init_cache(self.cfg, 1, tokens.shape[0], ring=self._ring))
    return self._row_prefix(row, last, context_len, live)

  @staticmethod
  def _row_prefix(row: KVCache, last: int, context_len: int, live: bool):
    return {"k": row.k, "v": row.v, "mask": row.mask, "linear": row.linear,
            "ring_k": row.ring_k, "ring_v": row.ring_v,
            "token": jnp.asarray(last, jnp.int32),
            "position": jnp.asarray(context_len, jnp.int32),
            "live": jnp.asarray(live),
            "row_slots": np.asarray(context_len)}   # slots from its first token to the end

  def insert(self, prefix, decode_state: DecodeState, slot: int) -> DecodeState:
    st = decode_state
    arrays = _insert(self._arrays(st), {k: prefix[k] for k in
                                        ("k", "v", "mask", "linear", "ring_k", "ring_v",
                                         "token", "position", "live")},
                     jnp.asarray(slot, jnp.int32), jnp.asarray(st.g, jnp.int32))
    row_len, row_live = st.row_len.copy(), st.row_live.copy()
    row_len[slot] = int(prefix["row_slots"])
    row_live[slot] = bool(np.asarray(prefix["live"]))
    dfa, max_tokens = prefix.get("schema", (None, 0))
    grammar = slot_grammar.assign(st.grammar, slot, dfa, max_tokens)
    return self._with(st, arrays, grammar=grammar, row_len=row_len, row_live=row_live)

  def generate(self, params, decode_state: DecodeState):
    st = decode_state
    row_len, row_live = st.row_len, st.row_live
    arrays = self._arrays(st)
    # A live row whose next token has no slot left, even after compaction, ends here.
    full = row_live & (row_len >= self._cache_len)
    if full.any():
      row_live = row_live & ~full
      arrays = arrays[:4] + (arrays[4] & jnp.asarray(row_live),)
    g = st.g
    if g == self._cache_len:
      row_live = row_live & np.asarray(arrays[4])  # rows that emitted a stop token are done
      keep = max(_longest(row_len, row_live), self._max_prefill)
      cache = _compact(arrays[0], jnp.asarray(g - keep, jnp.int32), jnp.asarray(keep, jnp.int32))
      arrays, g = (cache,) + arrays[1:], keep
    window = self._window_for(row_len, row_live, g)
    self.steps_by_window[window] += 1
    arrays, grammar, data = _generate(self.graphdef, params, arrays, st.grammar,
                                      self._stop_ids, window, self._layer_params)
    st = DecodeState(*arrays, grammar=grammar, g=g + 1, row_len=row_len + 1,
                     row_live=row_live)
    result = engine_api.ResultTokens(data=data, tokens_idx=(0, 1), valid_idx=(1, 2),
                                     length_idx=(2, 3), samples_per_slot=1)
    return st, result

  def _window_for(self, row_len: np.ndarray, row_live: np.ndarray, g: int) -> int:
    """The attention window of the next step: the smallest power of two (>= MIN_WINDOW)
    holding every live row and the step's slot; 0 (all slots) when that would not fit
    below the write index, for ring caches (their entries are placed by the index), and
    when the window is over a third of the cache: the window is a copy, which XLA:CPU
    makes at about 3x the cost per slot of reading the cache in place (SmolLM2, 2 and 8
    slots, AMD EPYC 2 cores, idle, 2026-12-03: 2304 slots in place 93 and 299 ms a step;
    windows of 2048 153 ms, of 1024 343 ms, of 256 60 and 119 ms)."""
    need = _longest(row_len, row_live) + 1
    window = max(MIN_WINDOW, 1 << (need - 1).bit_length())
    if self._ring or window > g + 1 or 3 * window > self._cache_len:
      return 0
    return window

  def get_prefix_destination_sharding(self) -> Any:
    return None  # interleaved serving only: prefixes never move between engines

  def get_tokenizer(self) -> tokenizer_pb2.TokenizerParameters:
    return tokenizer_pb2.TokenizerParameters(path="harnessrl_jax")

  def build_tokenizer(self, metadata: tokenizer_pb2.TokenizerParameters) -> EngineTokenizer:
    del metadata
    return self._tokenizer

  @property
  def max_concurrent_decodes(self) -> int:
    return self._slots

  @property
  def samples_per_slot(self) -> int:
    return 1

  @property
  def max_prefill_length(self) -> int:
    return self._max_prefill

  @property
  def mesh(self) -> jax.sharding.Mesh:
    return self._mesh

  @property
  def colocated_cpus(self):
    return None

  # --- helpers ----------------------------------------------------------------------------

  @staticmethod
  def _arrays(st: DecodeState):
    return (st.cache, st.tokens, st.positions, st.generated, st.live)

  @staticmethod
  def _with(st: DecodeState, arrays, **host) -> DecodeState:
    return dataclasses.replace(st, cache=arrays[0], tokens=arrays[1], positions=arrays[2],
                               generated=arrays[3], live=arrays[4], **host)
