"""Sharded forward on a (fsdp=2, tensor=4) mesh of 8 fake CPU devices equals the unsharded one."""

import jax
import numpy as np
import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P

from harnessrl_jax.errors import ConfigError
from harnessrl_jax.models import sharding
from harnessrl_jax.models.architecture import ModelConfig
from harnessrl_jax.models.decoder import Decoder
from harnessrl_jax.models.kv_cache import init_cache


def _inputs(cfg, b=4, t=12):
  rng = np.random.default_rng(0)
  tokens = rng.integers(0, cfg.vocab_size, (b, t), dtype=np.int32)
  mask = np.ones((b, t), bool)
  mask[1, :3] = False
  positions = np.clip(np.cumsum(mask, 1) - 1, 0, None).astype(np.int32)
  return tokens, positions, mask


def _place(model, mesh):
  """Moves the model's parameters onto `mesh` in place, as the learner places its state
  (`jax.device_put(state, param_shardings(state, mesh))`, rl/mesh.py)."""
  state = nnx.state(model)
  nnx.update(model, jax.device_put(state, sharding.param_shardings(state, mesh)))


@pytest.fixture(scope="module")
def mesh():
  assert len(jax.devices()) == 8, "tests/conftest.py should give 8 fake CPU devices"
  return sharding.make_mesh({"fsdp": 2, "tensor": 4})


@pytest.mark.parametrize("family", ["llama", "qwen3", "gemma3"])
def test_sharded_forward_equals_unsharded(mesh, family):
  cfg = ModelConfig.tiny(family)  # scanned layers: parameters stacked on a 'layers' axis
  model = Decoder(cfg, rngs=nnx.Rngs(3))
  tokens, positions, mask = _inputs(cfg)
  want = np.asarray(model(tokens, positions, mask)[0])

  graphdef, state = nnx.split(model)
  shardings = sharding.param_shardings(state, mesh)
  state = jax.device_put(state, shardings)
  # Parameters really are split: the embedding is [vocab/tensor, embed/fsdp] per device.
  emb = state["embed_tokens"][...]
  assert emb.sharding.spec == P("tensor", "fsdp")
  assert emb.addressable_shards[0].data.shape == (cfg.vocab_size // 4, cfg.hidden_size // 2)
  q = state["layers"]["self_attn"]["q_proj"]["kernel"][...]  # [layers, embed, q_heads]
  assert q.sharding.spec == P(None, "fsdp", "tensor")

  batch = sharding.batch_sharding(mesh)
  args = [jax.device_put(x, batch) for x in (tokens, positions, mask)]

  @jax.jit
  def forward(state, tokens, positions, mask):
    return nnx.merge(graphdef, state)(tokens, positions, mask)[0]

  got = forward(state, *args)
  np.testing.assert_allclose(np.asarray(got), want, atol=2e-5, rtol=0)


def test_sharded_hybrid_qwen3_5_equals_unsharded(mesh):
  """Qwen3.5's list of linear- and full-attention blocks: forward, then a cached prefill and
  decode steps (KV cache and Gated DeltaNet states) on the (2, 4) mesh."""
  cfg = ModelConfig.tiny("qwen3_5")
  model = Decoder(cfg, rngs=nnx.Rngs(5))
  tokens, positions, mask = _inputs(cfg)
  # One jitted step for the reference and the sharded calls (a new nnx.jit wrapper per call
  # traces and lowers again; eager references dispatch op by op: both slower).
  step = nnx.jit(lambda m, *a: m(*a))
  want = np.asarray(step(model, tokens, positions, mask)[0])
  want_cached = [np.asarray(step(model, tokens[:, :8], positions[:, :8], mask[:, :8],
                                 init_cache(cfg, 4, 12))[0])]
  _place(model, mesh)
  z = model.layers[0].linear_attn.in_proj_z.kernel[...]   # [repeats, embed, linear_v]
  assert z.sharding.spec == P(None, "fsdp", "tensor")
  np.testing.assert_allclose(np.asarray(step(model, tokens, positions, mask)[0]),
                             want, atol=2e-5, rtol=0)
  got, cache = step(model, tokens[:, :8], positions[:, :8], mask[:, :8],
                    init_cache(cfg, 4, 12))
  np.testing.assert_allclose(np.asarray(got), want_cached[0], atol=2e-5, rtol=0)
  for i in range(8, 12):   # decode continues from the sharded states: the uncached logits
    got, cache = step(model, tokens[:, i:i + 1], positions[:, i:i + 1], mask[:, i:i + 1],
                      cache)
    np.testing.assert_allclose(np.asarray(got[:, 0]), want[:, i], atol=2e-5, rtol=0)
  assert len(cache.linear) == 2 and cache.k.shape[0] == 1


# The dense variant repeats what the MoE one runs, less the experts (and gemma3 covers the
# rings): slow tier.
@pytest.mark.parametrize("moe", [pytest.param(False, marks=pytest.mark.slow), True])
def test_sharded_gemma4_equals_unsharded(mesh, moe):
  """Gemma 4 (tiny: per-type head sizes, K = V, per-layer inputs, KV-shared layers; moe: and
  a 4-expert block in every layer): forward, then a cached prefill and decode steps (rings
  and full-length KV) on the (2, 4) mesh."""
  cfg = ModelConfig.tiny("gemma4", **(
      dict(num_experts=4, top_k_experts=2, moe_intermediate_size=32) if moe else {}))
  model = Decoder(cfg, rngs=nnx.Rngs(6))
  tokens, positions, mask = _inputs(cfg)
  step = nnx.jit(lambda m, *a: m(*a))   # once, as in the Qwen3.5 test above
  want = np.asarray(step(model, tokens, positions, mask)[0])
  _place(model, mesh)
  # The full layer's q_proj [embed, heads * 32] splits both ways; K = V: no v_proj there.
  q = model.layers[1].self_attn.q_proj.kernel[...]
  assert q.sharding.spec == P("fsdp", "tensor") and model.layers[1].self_attn.v_proj is None
  np.testing.assert_allclose(np.asarray(step(model, tokens, positions, mask)[0]),
                             want, atol=2e-5, rtol=0)
  got, cache = step(model, tokens[:, :8], positions[:, :8], mask[:, :8],
                    init_cache(cfg, 4, 12))
  # Real tokens only: padding queries (row 1's first 3) are free to differ.
  np.testing.assert_allclose(np.asarray(got)[mask[:, :8]], want[:, :8][mask[:, :8]], atol=2e-5,
                             rtol=0)
  for i in range(8, 12):   # past the window of 4: the rings have wrapped
    got, cache = step(model, tokens[:, i:i + 1], positions[:, i:i + 1], mask[:, i:i + 1],
                      cache)
    np.testing.assert_allclose(np.asarray(got[:, 0]), want[:, i], atol=2e-5, rtol=0)


def test_sharded_cached_decode_equals_unsharded(mesh):
  cfg = ModelConfig.tiny("qwen2", scan_layers=False)
  model = Decoder(cfg, rngs=nnx.Rngs(4))
  tokens, positions, mask = _inputs(cfg, t=8)
  want = np.asarray(model(tokens[:, :6], positions[:, :6], mask[:, :6], init_cache(cfg, 4, 8))[0])
  _place(model, mesh)
  got, cache = nnx.jit(lambda m, *a: m(*a))(model, tokens[:, :6], positions[:, :6],
                                             mask[:, :6], init_cache(cfg, 4, 8))
  np.testing.assert_allclose(np.asarray(got), want, atol=2e-5, rtol=0)
  assert int(cache.index) == 6


def test_abstract_state_gives_shardings_to_initialise_directly_on_the_mesh(mesh):
  cfg = ModelConfig.tiny("llama", tie_word_embeddings=False)
  abstract = nnx.eval_shape(lambda: Decoder(cfg, rngs=nnx.Rngs(5)))
  shardings = sharding.param_shardings(nnx.state(abstract), mesh)
  init = jax.jit(lambda: nnx.state(Decoder(cfg, rngs=nnx.Rngs(5))), out_shardings=shardings)
  state = init()
  assert state["lm_head"][...].sharding.spec == P("fsdp", "tensor")
  want = nnx.state(Decoder(cfg, rngs=nnx.Rngs(5)))
  for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(want)):  # same draws (jit: ulps)
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-9)


def test_indivisible_dimensions_stay_replicated(mesh):
  # SmolLM2 has 49152 = 4 * 12288 vocab rows but 3 KV heads of 64 (192) and 9 query heads.
  assert sharding.logical_to_spec(("vocab", "embed"), (49152, 576), mesh) == P("tensor", "fsdp")
  assert sharding.logical_to_spec(("embed", "kv_heads"), (576, 190), mesh) == P("fsdp", None)
  assert sharding.logical_to_spec(("vocab", "embed"), (49153, 577), mesh) == P(None, None)
  assert sharding.logical_to_spec(("norm",), (576,), mesh) == P(None)
  # A rule naming an axis the mesh lacks is ignored; a mesh axis is used once per array.
  rules = {**sharding.DEFAULT_RULES, "embed": ("pipeline", "tensor"), "mlp": "tensor"}
  assert sharding.logical_to_spec(("embed", "mlp"), (64, 128), mesh, rules) == P("tensor", None)


def test_bad_mesh_and_rules_raise_config_errors(mesh):
  with pytest.raises(ConfigError, match="needs 6 devices"):
    sharding.make_mesh({"data": 2, "tensor": 3})
  with pytest.raises(ConfigError, match="unknown axes"):
    sharding.make_mesh({"model": 8})
  with pytest.raises(ConfigError, match="no rule for logical axis 'embed'"):
    sharding.logical_to_spec(("embed",), (64,), mesh, {"vocab": "tensor"})
