"""`Decoder`: the one decoder-only transformer behind the policy, reference model and judge.

Call contract (shapes: B batch, T new tokens, S cache slots, D hidden, V vocab):
  decoder(tokens[B,T] int32, positions[B,T] int32, attention_mask[B,T] bool, cache=None)
      -> (logits[B,T,V] float32, cache')
  * cache None: query t attends key s iff s <= t and attention_mask[b, s]. Padding may sit on
    either side; positions are explicit (left padding: cumsum(mask) - 1, clipped at 0).
  * cache given: the T tokens' K/V go to slots [index, index+T), cache.mask there :=
    attention_mask, query t attends slot s iff cache.mask[b, s] and s <= index + t; the
    returned cache has index + T. Prefill is one call with the whole prompt, decode T=1.
    layer_params (optional): `layer_states()`, used instead of the stacked weights (decode).
    cache may also be a kv_cache.DecodeCache (the sampler's decode loop): the same
    contract in the layouts decode attention reads in place.
  * "sliding_attention" layers (Gemma 3 and 4) also need slot s > query slot - sliding_window:
    the window counts slots (padding included), as HF's masks count cache positions.
  * Gemma 4: per-layer inputs [B,T,L,P] are computed once from the tokens and embeddings
    and handed to each block; a KV-shared layer attends over the keys/values its source
    layer (`cfg.kv_source`) read in the same call, under its own mask, and has no cache.
  hidden_states(...) -> [B,T,D] after the final norm; unembed_matrix() -> [D,V].
  logits == logits_from_hidden(hidden_states) == hidden_states @ unembed_matrix in float32,
  soft-capped when cfg.final_logit_softcapping is set.

Functional use: `graphdef, params = nnx.split(model)`; `nnx.merge(graphdef, params)(...)`.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from harnessrl_jax.errors import ConfigError
from harnessrl_jax.models import layers, sharding
from harnessrl_jax.models.block import Block
from harnessrl_jax.models.architecture import ModelConfig
from harnessrl_jax.models.kv_cache import DecodeCache, KVCache, ring_slots
from harnessrl_jax.models.per_layer_inputs import PerLayerInputs


def _run_block(graphdef, state, x, cos, sin, allowed, kv, extra=None):
  """One block as a pure function of its parameters (for lax.scan and jax.checkpoint);
  its output rows stay split over the batch axes (`sharding.constrain_rows`)."""
  x, kv, keys = nnx.merge(graphdef, state)(x, cos, sin, allowed, kv, extra)
  return sharding.constrain_rows(x), kv, keys


def _stacked_blocks(cfg: ModelConfig, layer_type: str, count: int, rngs: nnx.Rngs) -> Block:
  """One Block whose every parameter has a leading [count] axis (logical 'layers')."""

  @nnx.split_rngs(splits=count)
  @nnx.vmap(in_axes=(0,), out_axes=0, transform_metadata={nnx.PARTITION_NAME: "layers"})
  def make(rngs):
    return Block(cfg, layer_type, rngs=rngs)

  return make(rngs)


def _ring_allowed(slot_mask: jax.Array, new_mask: jax.Array, index: jax.Array,
                  window: int) -> jax.Array:
  """allowed [B,T,W+T] of a ring-cached sliding layer: the ring's entries as they were
  before this call (slot_mask [B,S] says which slots hold real tokens), then the call's own
  T tokens (new_mask [B,T]); a key is seen when real, causal and < `window` slots back."""
  t = new_mask.shape[1]
  slots, held = ring_slots(index, window)
  query = index + jnp.arange(t)
  old = (held[None, :] & jnp.take(slot_mask, jnp.maximum(slots, 0), axis=1))[:, None, :]
  old = old & (slots[None, :] > query[:, None] - window)[None]
  offset = jnp.arange(t)[:, None] - jnp.arange(t)[None, :]   # query - key, in slots
  new = ((offset >= 0) & (offset < window))[None] & new_mask[:, None, :]
  return jnp.concatenate([old, new], axis=-1)


class _Slots(NamedTuple):
  """Where a forward's queries and keys sit: query [T] and key [S] slot numbers, and which
  key slots hold real tokens, key_mask [B,S]."""
  query: jax.Array
  key: jax.Array
  key_mask: jax.Array


@dataclasses.dataclass
class _Caches:
  """The cache arrays one forward threads through its layers (all None without a cache),
  and how many layers of each cache kind have used theirs so far: KV (full), ring and
  linear state are each indexed by their own layers; KV-shared layers (Gemma 4) own none,
  they read the keys their source layer returned."""
  k: jax.Array | None = None
  v: jax.Array | None = None
  ring_k: jax.Array | None = None
  ring_v: jax.Array | None = None
  linear: list | None = None
  mask: jax.Array | None = None    # [B,S] after this call's tokens are written
  index: jax.Array | None = None   # the first slot this call writes
  decode: bool = False             # a DecodeCache (the decode layouts)
  ring: bool = False               # sliding layers keep window-sized rings
  n_full: int = 0
  n_ring: int = 0
  n_linear: int = 0

  @property
  def cached(self) -> bool:
    return self.index is not None

  def run_layer(self, run, graphdef, state, x, layer_inputs, layer_type: str, shared: bool,
                extra):
    """One unstacked layer with its cache (read and updated here): (x, the keys it read,
    or None for linear attention and KV-shared layers)."""
    ringed = self.ring and layer_type == "sliding_attention"
    if layer_type == "linear_attention":
      layer_cache = None if not self.cached else self.linear[self.n_linear]
      x, new_state, _ = run(graphdef, state, x, *layer_inputs, layer_cache)
      if self.cached:
        self.linear[self.n_linear] = new_state
      self.n_linear += 1
      return x, None
    if shared:
      kv = None if not self.cached else (None, None, 0, self.index, self.decode, ringed)
      x, _, _ = run(graphdef, state, x, *layer_inputs, kv, extra)
      return x, None
    if ringed:
      x, (self.ring_k, self.ring_v), keys = run(
          graphdef, state, x, *layer_inputs,
          (self.ring_k, self.ring_v, self.n_ring, self.index, self.decode, True), extra)
      self.n_ring += 1
      return x, keys
    kv = None if not self.cached else (self.k, self.v, self.n_full, self.index, self.decode,
                                       False)
    x, new_kv, keys = run(graphdef, state, x, *layer_inputs, kv, extra)
    if new_kv is not None:
      self.k, self.v = new_kv
    self.n_full += 1
    return x, keys


def _open_caches(cache: KVCache | DecodeCache | None, attention_mask: jax.Array,
                 t: int) -> tuple[_Slots, _Caches]:
  """The slots of a forward of `t` new tokens and its cache state: without a cache the
  tokens are slots 0..t-1; with one they are written at [index, index+t)."""
  if cache is None:
    return _Slots(jnp.arange(t), jnp.arange(t), attention_mask), _Caches()
  index = cache.index
  new_mask = jax.lax.dynamic_update_slice(cache.mask, attention_mask, (0, index))
  slots = _Slots(index + jnp.arange(t), jnp.arange(cache.max_len), new_mask)
  return slots, _Caches(k=cache.k, v=cache.v, ring_k=cache.ring_k, ring_v=cache.ring_v,
                        linear=list(cache.linear), mask=new_mask, index=index,
                        decode=isinstance(cache, DecodeCache), ring=cache.ring_k is not None)


class Decoder(nnx.Module):
  """Token embedding, `num_layers` pre-norm blocks, final RMSNorm, (tied) unembedding.

  With `cfg.scan_layers` the blocks are one stacked Block run by `lax.scan` (the KV cache
  rides in the scan carry and is updated in place), or, for stacks with linear attention,
  one stacked Block per position of `cfg.scan_group`, scanned over the pattern's repeats (so
  remat and compile time work per group as for uniform stacks; each group's linear states
  are scanned inputs and outputs); otherwise an `nnx.List` of blocks.
  """

  def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
    self.cfg = cfg
    pdt = jnp.dtype(cfg.param_dtype)
    self.embed_tokens = layers.param(rngs, (cfg.vocab_size, cfg.hidden_size),
                                     ("vocab", "embed"), pdt, "normal")
    if cfg.scan_layers and cfg.scan_group:
      repeats = cfg.num_layers // len(cfg.scan_group)
      self.layers = nnx.List([_stacked_blocks(cfg, t, repeats, rngs) for t in cfg.scan_group])
    elif cfg.scan_layers:
      self.layers = _stacked_blocks(cfg, cfg.layer_types[0], cfg.num_layers, rngs)
    else:
      self.layers = nnx.List([Block(cfg, t, layer=i, rngs=rngs)
                              for i, t in enumerate(cfg.layer_types)])
    self.per_layer_inputs = (PerLayerInputs(cfg, rngs=rngs) if cfg.per_layer_input_size
                             else None)
    self.norm = layers.RMSNorm(cfg.hidden_size, cfg)
    self.lm_head = (None if cfg.tie_word_embeddings else
                    layers.param(rngs, (cfg.hidden_size, cfg.vocab_size), ("embed", "vocab"),
                                 pdt, "normal"))

  def unembed_matrix(self) -> jax.Array:
    """[D, V] in the parameter dtype: the tied embedding transposed, or lm_head."""
    if self.lm_head is None:
      return self.embed_tokens[...].T
    return self.lm_head[...]

  def layer_states(self) -> list[nnx.State] | None:
    """With scan_layers, each layer's parameters sliced out as arrays of their own (a copy
    of the weights); None for unstacked layers.

    For decoding: `lax.scan` slices the stacked weights anew at every call, and XLA:CPU
    materialises each slice before its matmul, i.e. copies every weight once per token.
    Slice once per rollout and pass the list as `layer_params=`.
    """
    cfg = self.cfg
    if not cfg.scan_layers:
      return None
    if cfg.scan_group:
      period = len(cfg.scan_group)
      stacks = [nnx.state(m) for m in self.layers]
      return [jax.tree.map(lambda a, i=i: a[i // period], stacks[i % period])
              for i in range(cfg.num_layers)]
    stacked = nnx.state(self.layers)
    return [jax.tree.map(lambda a, i=i: a[i], stacked) for i in range(cfg.num_layers)]

  def _layer_graphdefs(self) -> list[nnx.GraphDef]:
    """Per layer, the graphdef its `layer_states()` entry merges with."""
    cfg = self.cfg
    if cfg.scan_group:
      graphdefs = [nnx.graphdef(m) for m in self.layers]
      return [graphdefs[i % len(graphdefs)] for i in range(cfg.num_layers)]
    return [nnx.graphdef(self.layers)] * cfg.num_layers

  def _forward(self, tokens, positions, attention_mask, cache: KVCache | DecodeCache | None,
               layer_params: list[nnx.State] | None = None, allowed: jax.Array | None = None):
    """(final-norm hidden states, the updated cache or None): embed, build each layer
    type's RoPE tables and mask, run the layers (a list, a scan, or a scan over groups)."""
    cfg = self.cfg
    self._check_packed_mask(cache, allowed)
    tokens = jnp.asarray(tokens, jnp.int32)
    attention_mask = jnp.asarray(attention_mask, bool)
    t = tokens.shape[1]
    x = self._embed(tokens)
    per_layer = None if self.per_layer_inputs is None else self.per_layer_inputs(tokens, x)
    positions = jnp.asarray(positions, jnp.int32)
    slots, caches = _open_caches(cache, attention_mask, t)
    types = sorted(set(cfg.layer_types) - {"linear_attention"})
    inputs = self._layer_inputs(types, positions, attention_mask, slots, caches, allowed)
    # Remat only pays in a backward pass. A cached forward (rollout, serving, the logit
    # judge's prefixes) is never differentiated, and its cache tuple carries Python
    # flags (layer index, decode, ring) that jax.checkpoint would turn into tracers.
    remat = cfg.remat and cache is None
    run = jax.checkpoint(_run_block, static_argnums=(0,)) if remat else _run_block
    if caches.ring and layer_params is None and cfg.scan_layers:
      layer_params = self.layer_states()   # ring and full layers read different caches
    if layer_params is not None or not cfg.scan_layers:
      x = self._run_layer_list(x, inputs, run, caches, per_layer, layer_params)
    elif cfg.scan_group:
      x, caches.k, caches.v, caches.linear = self._scan_groups(
          x, inputs, run, caches.k, caches.v, caches.linear, caches.index, caches.decode)
    else:
      x = self._scan_layers(x, types, inputs, run, caches)
    h = self.norm(x)
    if cache is None:
      return h, None
    return h, cache.replace(k=caches.k, v=caches.v, mask=caches.mask, index=caches.index + t,
                            linear=tuple(caches.linear), ring_k=caches.ring_k,
                            ring_v=caches.ring_v)

  def _check_packed_mask(self, cache, allowed: jax.Array | None) -> None:
    """Refuses an explicit mask where it cannot mean what it says (cached or windowed)."""
    if allowed is not None and (cache is not None or not self.attends_fully()):
      raise ConfigError("an explicit attention mask (shared-prompt packing) needs a forward "
                        "without a cache and a model whose layers are all full attention; "
                        f"this one has {sorted(set(self.cfg.layer_types))}")

  def _embed(self, tokens: jax.Array) -> jax.Array:
    """[B,T,D] token embeddings in the activation dtype, rows split over the batch axes."""
    cfg = self.cfg
    x = jnp.take(self.embed_tokens[...], tokens, axis=0)
    if cfg.gemma_style:
      # HF scales in the embedding's dtype, by sqrt(hidden) rounded to that dtype.
      x = x * jnp.asarray(cfg.hidden_size ** 0.5, x.dtype)
    return sharding.constrain_rows(x.astype(jnp.dtype(cfg.dtype)))

  def _layer_inputs(self, types: list[str], positions, attention_mask, slots: _Slots,
                    caches: _Caches, allowed: jax.Array | None) -> dict[str, tuple]:
    """Per layer type: (cos, sin, allowed [B,T,S]; a ring's [B,T,W+T]); linear attention
    takes only the token mask."""
    cfg = self.cfg
    dtype = jnp.dtype(cfg.dtype)
    causal = slots.key[None, :] <= slots.query[:, None]
    inputs = {"linear_attention": (None, None, attention_mask)}
    for layer_type in types:
      rope = layers.rope_cos_sin(positions, layers.rope_inv_freq(cfg, layer_type), dtype)
      near = causal
      if layer_type == "sliding_attention" and caches.ring:
        inputs[layer_type] = (*rope, _ring_allowed(caches.mask, attention_mask, caches.index,
                                                   cfg.sliding_window))
        continue
      if layer_type == "sliding_attention":
        near = causal & (slots.key[None, :] > slots.query[:, None] - cfg.sliding_window)
      inputs[layer_type] = (*rope, near[None] & slots.key_mask[:, None, :] if allowed is None
                            else allowed)
    return inputs

  def _run_layer_list(self, x, inputs, run, caches: _Caches, per_layer,
                      layer_params: list[nnx.State] | None) -> jax.Array:
    """The layers one after another: unstacked blocks, or `layer_states()` slices."""
    cfg = self.cfg
    if layer_params is not None:
      blocks = list(zip(self._layer_graphdefs(), layer_params))
    else:
      blocks = [nnx.split(block) for block in self.layers]
    stored = {}   # keys/values of the layers KV-shared layers read (Gemma 4)
    for i, (layer_type, (graphdef, state)) in enumerate(zip(cfg.layer_types, blocks)):
      source = cfg.kv_source(i)
      extra = (None if per_layer is None else per_layer[:, :, i],
               None if source is None else stored[source])
      x, keys = caches.run_layer(run, graphdef, state, x, inputs[layer_type], layer_type,
                                 source is not None, extra)
      if i in cfg.kv_store_layers:
        stored[i] = keys
    return x

  def _scan_layers(self, x, types: list[str], inputs, run, caches: _Caches) -> jax.Array:
    """The stacked block run by `lax.scan`, the KV cache in the carry."""
    cfg = self.cfg
    index, decode = caches.index, caches.decode
    graphdef, stacked = nnx.split(self.layers)
    # Mixed attention types share the stacked weights; each layer picks its mask and RoPE
    # tables by a per-layer index (one select per layer, not a second compiled block).
    type_index = jnp.asarray([types.index(lt) for lt in cfg.layer_types], jnp.int32)
    per_type = jax.tree.map(lambda *a: jnp.stack(a), *[inputs[lt] for lt in types])

    def body(carry, xs):
      x, k_cache, v_cache, layer = carry
      state, which = xs
      cos, sin, allowed = (inputs[types[0]] if len(types) == 1 else
                           jax.tree.map(lambda a: a[which], per_type))
      kv = None if k_cache is None else (k_cache, v_cache, layer, index, decode, False)
      x, new_kv, _ = run(graphdef, state, x, cos, sin, allowed, kv)
      if new_kv is not None:
        k_cache, v_cache = new_kv
      return (x, k_cache, v_cache, layer + 1), None

    (x, caches.k, caches.v, _), _ = jax.lax.scan(
        body, (x, caches.k, caches.v, jnp.zeros((), jnp.int32)), (stacked, type_index))
    return x

  def _scan_groups(self, x, inputs, run, k_cache, v_cache, linear, index, decode):
    """The layers as a scan over repeats of `cfg.scan_group` (see the class docstring)."""
    cfg = self.cfg
    group = cfg.scan_group
    graphdefs, stacks = zip(*(nnx.split(m) for m in self.layers))
    per_group = sum(t != "linear_attention" for t in group)   # KV layers per repeat
    n_lin = len(group) - per_group
    # Linear states by position in the pattern, stacked over repeats.
    lin_in = None if linear is None else tuple(
        jax.tree.map(lambda *a: jnp.stack(a), *linear[i::n_lin]) for i in range(n_lin))

    def body(carry, xs):
      x, k_cache, v_cache, repeat = carry
      states, lin_states = xs
      new_lin, n_attn = [], 0
      for j, layer_type in enumerate(group):
        if layer_type == "linear_attention":
          layer_cache = None if lin_states is None else lin_states[len(new_lin)]
          x, new_state, _ = run(graphdefs[j], states[j], x, *inputs[layer_type], layer_cache)
          new_lin.append(new_state)
          continue
        kv = None if k_cache is None else (k_cache, v_cache, repeat * per_group + n_attn,
                                           index, decode, False)
        x, new_kv, _ = run(graphdefs[j], states[j], x, *inputs[layer_type], kv)
        if new_kv is not None:
          k_cache, v_cache = new_kv
        n_attn += 1
      return (x, k_cache, v_cache, repeat + 1), (None if lin_states is None else tuple(new_lin))

    (x, k_cache, v_cache, _), lin_out = jax.lax.scan(
        body, (x, k_cache, v_cache, jnp.zeros((), jnp.int32)), (tuple(stacks), lin_in))
    if linear is not None:
      repeats = cfg.num_layers // len(group)
      linear = [jax.tree.map(lambda a, r=r: a[r], lin_out[i])
                for r in range(repeats) for i in range(n_lin)]
    return x, k_cache, v_cache, linear

  def hidden_states(self, tokens, positions, attention_mask,
                    allowed: jax.Array | None = None) -> jax.Array:
    """[B,T,D] final-norm outputs (activation dtype), no cache.

    allowed: optional [B,T,T] bool, query t may see key s; replaces the causal mask over
    `attention_mask`'s keys (packed rows; only for models that `attends_fully`).
    """
    return self._forward(tokens, positions, attention_mask, None, allowed=allowed)[0]

  def hidden_and_cache(self, tokens, positions, attention_mask, cache: KVCache):
    """(final-norm outputs [B,T,D], the updated cache): a cached forward without the
    unembedding, for callers that read a few positions' logits."""
    return self._forward(tokens, positions, attention_mask, cache)

  def attends_fully(self) -> bool:
    """Whether every layer is full attention, so any key mask is meaningful (sliding
    windows count slots and linear attention runs along the row: neither can pack)."""
    return all(t == "full_attention" for t in self.cfg.layer_types)

  def __call__(self, tokens, positions, attention_mask,
               cache: KVCache | DecodeCache | None = None, *,
               layer_params: list[nnx.State] | None = None):
    h, cache = self._forward(tokens, positions, attention_mask, cache, layer_params)
    return self.logits_from_hidden(h), cache

  def logits_from_hidden(self, h: jax.Array) -> jax.Array:
    """float32 logits [..., V] of final-norm hidden states [..., D]."""
    logits = jnp.einsum("...d,dv->...v", h, self.unembed_matrix().astype(h.dtype),
                        preferred_element_type=jnp.float32)
    return layers.softcap(logits, self.cfg.final_logit_softcapping)
