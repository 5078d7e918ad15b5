"""Gated DeltaNet: the linear-attention mixer of Qwen3.5 (transformers' `Qwen3_5GatedDeltaNet`).

The gated delta rule, per value head (the state S is a [d_k, d_v] matrix):

    S_t = exp(g_t) (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,    o_t = S_t^T q_t

i.e. decay the state by exp(g_t) (g_t <= 0), then write v_t under key k_t with learning rate
beta_t in (0, 1), replacing part of what the state held there (the delta rule). Two equivalent
evaluations (all in float32):

  `recurrent_gated_delta_rule`: the recurrence token by token (a scan over time); a decode step
  costs O(d_k d_v) per head whatever the number of tokens before it.

  `chunked_gated_delta_rule`: the same over chunks of C tokens. With S_0 the state at the chunk's
  start and gamma_i = g_1 + ... + g_i the log-decay accumulated inside the chunk, the writes
  delta_j (S_j = exp(g_j) S_{j-1} + k_j delta_j^T) solve the unit lower-triangular system

      (I + A) delta = beta v - beta exp(gamma) K S_0,
      A_ij = beta_i exp(gamma_i - gamma_j) k_i.k_j  (j < i)

  (the WY / UT transform), after which

      o_i = exp(gamma_i) S_0^T q_i + sum_{j <= i} exp(gamma_i - gamma_j) (q_i.k_j) delta_j
      S_C = exp(gamma_C) S_0 + sum_j exp(gamma_C - gamma_j) k_j delta_j^T.

  Everything but S_0 is computed for all chunks at once; only S is carried by a scan over chunks.
  T is padded up to a multiple of C with g = beta = 0 and zero q/k/v, which leaves S unchanged.

The layer, `GatedDeltaNet`, mirrors `Qwen3_5GatedDeltaNet.forward` (transformers 5.x, qwen3_5):

  x [B,T,D]; padding positions (mask False) zeroed first, as HF's `apply_mask_to_padding_states`
  qkv  = silu(causal depthwise conv_K(x @ in_proj_qkv))   [B,T,2 Hk dk + Hv dv] -> q | k | v
  z    = x @ in_proj_z                                   [B,T,Hv,dv]
  beta = sigmoid(x @ in_proj_b),  g = -exp(A_log) * softplus(x @ in_proj_a + dt_bias)   [B,T,Hv]
  q, k = l2norm(q), l2norm(k)  (x * rsqrt(sum x^2 + 1e-6));  q *= dk ** -0.5
  q, k go from Hk to Hv heads: value head h reads key head h // (Hv / Hk) (repeat_interleave)
  o    = gated delta rule(q, k, v, g, beta)              [B,T,Hv,dv]
  y    = (rmsnorm(o) * norm.weight * silu(z)) @ out_proj  (norm over dv, weight not 1-centred)

The conv has no bias and uses the config's `hidden_act` (silu in every Qwen3.5 config); the gate
of the norm is always silu, as in HF.

Parameters: HF state-dict key under `...linear_attn.` -> ours [shape] (logical axes). Kernels
are [in, out], the transpose of torch's Linear weight; C = 2 Hk dk + Hv dv.
  in_proj_qkv.weight -> in_proj_qkv.kernel [D, C]      (embed, linear_conv)
  in_proj_z.weight   -> in_proj_z.kernel   [D, Hv dv]  (embed, linear_v)
  in_proj_b.weight   -> in_proj_b.kernel   [D, Hv]     (embed, linear_heads)
  in_proj_a.weight   -> in_proj_a.kernel   [D, Hv]     (embed, linear_heads)
  conv1d.weight      -> conv1d.kernel      [K, C]      (linear_conv_kernel, linear_conv);
                        HF's [C, 1, K] weight as weight[:, 0, :].T
  dt_bias, A_log     -> dt_bias, A_log     [Hv]        (linear_heads,)
  norm.weight        -> norm.weight        [dv]        (head_dim,)
  out_proj.weight    -> out_proj.kernel    [Hv dv, D]  (linear_v, embed)
New logical axes: linear_conv (the q|k|v channels, C = 2 Hk dk + Hv dv), linear_v (Hv dv),
linear_heads (Hv), linear_conv_kernel (K); sharding rules must name them before sharding.

State (`GatedDeltaNetState`, one per layer): `conv` [B, K-1, C], the last K-1 conv inputs
(activation dtype; HF's cache keeps [B, C, K], the same inputs channel-first plus one older
column the next step never reads), and `recurrent` [B, Hv, dk, dv] float32 (HF's layout).

Padding. HF multiplies the layer's input by the 2D mask (`apply_mask_to_padding_states`); the
projections have no bias, so a padding position's conv input, z, a and b are 0. We do the same.
For left padding this is exact: the conv of the first real tokens sees zeros exactly as the
causal zero-padding of an unpadded row, the padding positions get q = k = v = 0 and so only
decay a zero state: real tokens get the unpadded row's outputs, state and conv history. Padding
after real tokens is not a no-op (in HF either): the conv carries the last real inputs into the
next K-1 padding positions' q, k, v, which then write into the state, and every padding
position's g decays it.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
from flax import nnx, struct

from harnessrl_jax.errors import ConfigError
from harnessrl_jax.models.layers import Linear, param

# The recurrent state accumulates every token's write: keep its matmuls exact float32 (TPUs and
# GPUs otherwise run float32 dots in bf16 passes or TF32).
_HIGHEST = jax.lax.Precision.HIGHEST
# HF's l2norm eps (FLA's): x * rsqrt(sum(x^2) + eps).
_L2NORM_EPS = 1e-6
_CONV_ACTIVATIONS = {"silu": jax.nn.silu, "swish": jax.nn.silu}


@dataclasses.dataclass(frozen=True)
class GatedDeltaNetConfig:
  """The layer's hyperparameters, named as HF's `Qwen3_5TextConfig` fields.

  `GatedDeltaNet` reads only these attributes, so any config carrying them (a model config)
  can be passed instead.
  """

  hidden_size: int
  linear_num_key_heads: int
  linear_num_value_heads: int
  linear_key_head_dim: int
  linear_value_head_dim: int
  linear_conv_kernel_dim: int = 4
  rms_norm_eps: float = 1e-6
  hidden_act: str = "silu"
  dtype: str = "float32"        # activations
  param_dtype: str = "float32"


@struct.dataclass
class GatedDeltaNetState:
  """Decode state of one layer: conv [B, K-1, C] (last conv inputs), recurrent [B, Hv, dk, dv]."""

  conv: jax.Array
  recurrent: jax.Array


def zero_state(cfg: GatedDeltaNetConfig, batch: int, dtype=None) -> GatedDeltaNetState:
  """The state before any token; conv in `dtype` (default cfg.dtype), recurrent float32."""
  conv_dim = (2 * cfg.linear_num_key_heads * cfg.linear_key_head_dim
              + cfg.linear_num_value_heads * cfg.linear_value_head_dim)
  return GatedDeltaNetState(
      conv=jnp.zeros((batch, cfg.linear_conv_kernel_dim - 1, conv_dim),
                     jnp.dtype(dtype or cfg.dtype)),
      recurrent=jnp.zeros((batch, cfg.linear_num_value_heads, cfg.linear_key_head_dim,
                           cfg.linear_value_head_dim), jnp.float32))


def _dot(spec: str, a: jax.Array, b: jax.Array) -> jax.Array:
  return jnp.einsum(spec, a, b, precision=_HIGHEST)


def recurrent_gated_delta_rule(q: jax.Array, k: jax.Array, v: jax.Array, g: jax.Array,
                               beta: jax.Array, *, initial_state: jax.Array | None = None
                               ) -> tuple[jax.Array, jax.Array]:
  """The gated delta rule token by token.

  q, k [B,T,H,dk]; v [B,T,H,dv]; g (log-decay, <= 0), beta [B,T,H]; initial_state [B,H,dk,dv]
  or None (zeros). q is used as given (no normalisation or scaling here).
  Returns (out [B,T,H,dv], final state [B,H,dk,dv]), both float32.
  """
  b, _, h, dk = k.shape
  dv = v.shape[-1]
  state = (jnp.zeros((b, h, dk, dv), jnp.float32) if initial_state is None
           else initial_state.astype(jnp.float32))

  def step(s, xs):
    q_t, k_t, v_t, g_t, beta_t = xs
    s = s * jnp.exp(g_t)[..., None, None]
    delta = beta_t[..., None] * (v_t - _dot("bhkv,bhk->bhv", s, k_t))
    s = s + k_t[..., :, None] * delta[..., None, :]
    return s, _dot("bhkv,bhk->bhv", s, q_t)

  time_major = [jnp.moveaxis(x.astype(jnp.float32), 1, 0) for x in (q, k, v, g, beta)]
  state, out = jax.lax.scan(step, state, time_major)
  return jnp.moveaxis(out, 0, 1), state


def _to_chunks(x: jax.Array, chunk_size: int) -> jax.Array:
  """[B,T,H,...] -> [N,B,H,C,...] float32, T zero-padded at the end to N*C."""
  b, t, h = x.shape[:3]
  x = x.astype(jnp.float32)
  x = jnp.pad(x, [(0, 0), (0, -t % chunk_size)] + [(0, 0)] * (x.ndim - 2))
  x = x.reshape(b, -1, chunk_size, h, *x.shape[3:])
  return jnp.moveaxis(x, (1, 3), (0, 2))


def _unit_lower_inverse(a: jax.Array) -> jax.Array:
  """(I + a)^-1 for strictly lower-triangular a [..., C, C], by matmuls only.

  With b = -a nilpotent (b^C = 0): (I - b)^-1 = (I + b)(I + b^2)(I + b^4)...(I + b^(2^(m-1)))
  once 2^m >= C, i.e. 2 log2(C) matmuls. A triangular solve would do, but XLA:CPU deadlocked
  on it under SPMD partitioning (8 fake devices, the (2, 4) mesh), and matmuls are what
  accelerators run best.
  """
  c = a.shape[-1]
  eye = jnp.eye(c, dtype=a.dtype)
  power = -a
  inverse = eye + power
  for _ in range(max(0, math.ceil(math.log2(c)) - 1)):
    power = _dot("...ij,...jk->...ik", power, power)
    inverse = _dot("...ij,...jk->...ik", inverse, eye + power)
  return inverse


def chunked_gated_delta_rule(q: jax.Array, k: jax.Array, v: jax.Array, g: jax.Array,
                             beta: jax.Array, *, chunk_size: int,
                             initial_state: jax.Array | None = None
                             ) -> tuple[jax.Array, jax.Array]:
  """The gated delta rule in chunks of `chunk_size` tokens (module docstring); same arguments
  and results as `recurrent_gated_delta_rule`. Any T (padded internally)."""
  b, t, h, dk = k.shape
  dv = v.shape[-1]
  q, k, v, g, beta = (_to_chunks(x, chunk_size) for x in (q, k, v, g, beta))
  gamma = jnp.cumsum(g, axis=-1)                                          # [N,B,H,C]
  causal = jnp.tril(jnp.ones((chunk_size, chunk_size), bool))
  # exp(gamma_i - gamma_j) for j <= i, 0 above the diagonal; masked before exp, where the
  # difference is positive and could overflow.
  decay = jnp.exp(jnp.where(causal, gamma[..., :, None] - gamma[..., None, :], -jnp.inf))
  strict = jnp.tril(beta[..., :, None] * _dot("...id,...jd->...ij", k, k) * decay, -1)
  # One inverse for both right-hand sides: delta = u - w S_0.
  rhs = beta[..., None] * jnp.concatenate([v, jnp.exp(gamma)[..., None] * k], axis=-1)
  solved = _dot("...ij,...jd->...id", _unit_lower_inverse(strict), rhs)
  u, w = solved[..., :dv], solved[..., dv:]
  intra = _dot("...id,...jd->...ij", q, k) * decay
  q_decayed = q * jnp.exp(gamma)[..., None]
  k_to_end = k * jnp.exp(gamma[..., -1:] - gamma)[..., None]
  chunk_decay = jnp.exp(gamma[..., -1])[..., None, None]                 # [N,B,H,1,1]

  def step(s, xs):
    u_c, w_c, intra_c, q_c, k_c, decay_c = xs
    delta = u_c - _dot("bhck,bhkv->bhcv", w_c, s)
    out = _dot("bhck,bhkv->bhcv", q_c, s) + _dot("bhij,bhjv->bhiv", intra_c, delta)
    return decay_c * s + _dot("bhck,bhcv->bhkv", k_c, delta), out

  state = (jnp.zeros((b, h, dk, dv), jnp.float32) if initial_state is None
           else initial_state.astype(jnp.float32))
  state, out = jax.lax.scan(step, state, (u, w, intra, q_decayed, k_to_end, chunk_decay))
  out = jnp.moveaxis(out, (0, 2), (1, 3)).reshape(b, -1, h, dv)         # [B,N*C,H,dv]
  return out[:, :t], state


def causal_depthwise_conv(x: jax.Array, kernel: jax.Array, history: jax.Array,
                          activation) -> tuple[jax.Array, jax.Array]:
  """out_t = activation(sum_j kernel[j] * x_{t-K+1+j}) per channel, no bias.

  x [B,T,C]; kernel [K,C] (kernel[K-1] weighs the current input); history [B,K-1,C], the inputs
  before x (zeros at the start of a sequence). Returns (out [B,T,C], new history [B,K-1,C]).
  Computed in the kernel's dtype like HF's conv, returned in x's dtype.
  """
  taps, t = kernel.shape[0], x.shape[1]
  full = jnp.concatenate([history.astype(x.dtype), x], axis=1)           # [B,K-1+T,C]
  xk = full.astype(kernel.dtype)
  out = sum(xk[:, j:j + t] * kernel[j] for j in range(taps))
  return activation(out).astype(x.dtype), full[:, full.shape[1] - (taps - 1):]


def _l2norm(x: jax.Array) -> jax.Array:
  return x * jax.lax.rsqrt(jnp.sum(x * x, axis=-1, keepdims=True) + _L2NORM_EPS)


class GatedRMSNorm(nnx.Module):
  """rmsnorm(x) * weight * silu(gate) over the last axis, as HF's `Qwen3_5RMSNormGated`:
  normalised in float32, cast to the activation dtype before the weight, gated in float32."""

  def __init__(self, dim: int, eps: float, dtype, param_dtype):
    self.eps = eps
    self.dtype = jnp.dtype(dtype)
    self.weight = param(None, (dim,), ("head_dim",), jnp.dtype(param_dtype), "ones")

  def __call__(self, x: jax.Array, gate: jax.Array) -> jax.Array:
    x32 = x.astype(jnp.float32)
    x32 = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.eps)
    normed = self.weight[...].astype(self.dtype) * x32.astype(self.dtype)
    return (normed.astype(jnp.float32)
            * jax.nn.silu(gate.astype(jnp.float32))).astype(self.dtype)


class CausalConv1d(nnx.Module):
  """Depthwise causal conv over time with an explicit history (see `causal_depthwise_conv`)."""

  def __init__(self, channels: int, taps: int, activation: str, param_dtype, *,
               rngs: nnx.Rngs):
    if activation not in _CONV_ACTIVATIONS:
      raise ConfigError(f"gated deltanet: hidden_act={activation!r}; expected one of "
                        f"{sorted(_CONV_ACTIVATIONS)}")
    self.activation = _CONV_ACTIVATIONS[activation]
    self.kernel = param(rngs, (taps, channels), ("linear_conv_kernel", "linear_conv"),
                        jnp.dtype(param_dtype), "normal")

  def __call__(self, x: jax.Array, history: jax.Array) -> tuple[jax.Array, jax.Array]:
    return causal_depthwise_conv(x, self.kernel[...], history, self.activation)


class GatedDeltaNet(nnx.Module):
  """Qwen3.5's linear-attention mixer (module docstring). `cfg`: a `GatedDeltaNetConfig` or any
  object with its attributes; `chunk_size`: the chunk length of the parallel form (HF uses 64)."""

  def __init__(self, cfg: GatedDeltaNetConfig, *, chunk_size: int = 64, rngs: nnx.Rngs):
    if cfg.linear_num_value_heads % cfg.linear_num_key_heads:
      raise ConfigError(f"gated deltanet: linear_num_value_heads={cfg.linear_num_value_heads} "
                        f"is not a multiple of linear_num_key_heads={cfg.linear_num_key_heads}")
    self.cfg = cfg
    self.chunk_size = chunk_size
    self.dtype = jnp.dtype(cfg.dtype)
    d, hv = cfg.hidden_size, cfg.linear_num_value_heads
    self.key_dim = cfg.linear_num_key_heads * cfg.linear_key_head_dim
    self.value_dim = hv * cfg.linear_value_head_dim
    self.conv_dim = 2 * self.key_dim + self.value_dim
    param_dtype = jnp.dtype(cfg.param_dtype)
    # `Linear` reads only cfg.dtype / cfg.param_dtype.
    self.in_proj_qkv = Linear(d, self.conv_dim, ("embed", "linear_conv"), cfg, rngs=rngs)
    self.in_proj_z = Linear(d, self.value_dim, ("embed", "linear_v"), cfg, rngs=rngs)
    self.in_proj_b = Linear(d, hv, ("embed", "linear_heads"), cfg, rngs=rngs)
    self.in_proj_a = Linear(d, hv, ("embed", "linear_heads"), cfg, rngs=rngs)
    self.conv1d = CausalConv1d(self.conv_dim, cfg.linear_conv_kernel_dim, cfg.hidden_act,
                               param_dtype, rngs=rngs)
    # HF's init: dt_bias = 1, A = exp(A_log) ~ U(0.01, 16) (a checkpoint overwrites both).
    self.dt_bias = param(None, (hv,), ("linear_heads",), param_dtype, "ones")
    a_init = jax.random.uniform(rngs.params(), (hv,), jnp.float32, 0.01, 16.0)
    self.A_log = nnx.Param(jnp.log(a_init).astype(param_dtype), out_sharding=("linear_heads",),
                           eager_sharding=False)
    self.norm = GatedRMSNorm(cfg.linear_value_head_dim, cfg.rms_norm_eps, cfg.dtype,
                             cfg.param_dtype)
    self.out_proj = Linear(self.value_dim, d, ("linear_v", "embed"), cfg, rngs=rngs)

  def init_state(self, batch: int) -> GatedDeltaNetState:
    """The state before any token (continuing from it equals starting with state=None)."""
    return zero_state(self.cfg, batch)

  def __call__(self, x: jax.Array, mask: jax.Array | None = None,
               state: GatedDeltaNetState | None = None
               ) -> tuple[jax.Array, GatedDeltaNetState]:
    """x [B,T,D]; mask [B,T] (True = real token) or None; state None (a sequence's start) or
    the state after the tokens before x. Returns (y [B,T,D], state after x).

    T == 1 with a state runs the recurrence (a decode step, cost independent of the past);
    otherwise the chunked form, from `state` when given (chunked prefill).
    """
    cfg = self.cfg
    b, t, _ = x.shape
    hv, dk, dv = cfg.linear_num_value_heads, cfg.linear_key_head_dim, cfg.linear_value_head_dim
    if mask is not None:
      x = jnp.where(mask[..., None], x, jnp.zeros((), x.dtype))
    start = self.init_state(b) if state is None else state
    qkv, conv_history = self.conv1d(self.in_proj_qkv(x), start.conv.astype(x.dtype))
    q, k, v = jnp.split(qkv, [self.key_dim, 2 * self.key_dim], axis=-1)
    q = q.reshape(b, t, cfg.linear_num_key_heads, dk).astype(jnp.float32)
    k = k.reshape(b, t, cfg.linear_num_key_heads, dk).astype(jnp.float32)
    v = v.reshape(b, t, hv, dv)
    q = _l2norm(q) * (1.0 / math.sqrt(dk))
    k = _l2norm(k)
    groups = hv // cfg.linear_num_key_heads
    q, k = jnp.repeat(q, groups, axis=2), jnp.repeat(k, groups, axis=2)
    beta = jax.nn.sigmoid(self.in_proj_b(x))  # in the activation dtype, as HF
    g = -jnp.exp(self.A_log[...].astype(jnp.float32)) * jax.nn.softplus(
        self.in_proj_a(x).astype(jnp.float32) + self.dt_bias[...].astype(jnp.float32))
    if state is not None and t == 1:
      out, recurrent = recurrent_gated_delta_rule(q, k, v, g, beta,
                                                  initial_state=state.recurrent)
    else:
      out, recurrent = chunked_gated_delta_rule(
          q, k, v, g, beta, chunk_size=self.chunk_size,
          initial_state=None if state is None else state.recurrent)
    z = self.in_proj_z(x).reshape(b, t, hv, dv)
    y = self.norm(out.astype(self.dtype), z).reshape(b, t, self.value_dim)
    return self.out_proj(y), GatedDeltaNetState(conv=conv_history, recurrent=recurrent)
