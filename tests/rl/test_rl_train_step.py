"""The jitted GRPO step: mesh vs one device, micro-batching, skips, no-signal groups."""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from flax import nnx

from harnessrl_jax.errors import ConfigError
from harnessrl_jax.models.architecture import ModelConfig
from harnessrl_jax.models.decoder import Decoder
from harnessrl_jax.rl import mesh as rl_mesh
from harnessrl_jax.rl import train_step as ts
from harnessrl_jax.rl.batch import RLBatch
from harnessrl_jax.rl.config import rl_defaults
from harnessrl_jax.rl.train_state import make_optimizer

B, P, N, V = 16, 5, 6, 48


@pytest.fixture(scope="module")
def model():
  graphdef, params = nnx.split(Decoder(ModelConfig.tiny(vocab_size=V, num_layers=1),
                                       rngs=nnx.Rngs(0)))
  # A second, different model as the frozen reference so the KL term is not trivially 0.
  _, ref = nnx.split(Decoder(ModelConfig.tiny(vocab_size=V, num_layers=1), rngs=nnx.Rngs(1)))
  return graphdef, params, ref


def _rl(**kw):
  rl = rl_defaults()
  rl.learning_rate = 1e-3
  rl.warmup_steps = 0
  rl.beta = 0.1
  rl.micro_batch_size = 8
  rl.logprob_chunk = 4
  rl.loss_aggregation = "token_mean"
  rl.update(kw)
  return rl


def _batch(seed=0, flat_groups=()):
  rng = np.random.default_rng(seed)
  tokens = rng.integers(0, V, (B, P + N)).astype(np.int32)
  pm = np.ones((B, P), bool)
  pm[:4, :2] = False
  rm = np.ones((B, N), bool)
  rm[3:, 4:] = False
  mask = np.concatenate([pm, rm], 1)
  gid = np.repeat(np.arange(4), 4).astype(np.int32)
  adv = rng.normal(size=B).astype(np.float32)
  adv[np.isin(gid, flat_groups)] = 0.0
  return RLBatch(tokens=tokens, positions=np.maximum(np.cumsum(mask, 1) - 1, 0).astype(np.int32),
                 attention_mask=mask, loss_mask=rm.astype(np.float32),
                 old_logprobs=rng.normal(-3.9, 0.3, (B, N)).astype(np.float32),
                 ref_logprobs=None, advantages=adv,
                 task_weight=rng.uniform(0.5, 2.0, B).astype(np.float32), group_id=gid)


def _run(model, rl, batch, mesh=None, with_ref=True, group_size=1):
  graphdef, params, ref = model
  tx = make_optimizer(rl)
  state, sh = rl_mesh.init_state(params, tx, mesh, ref if with_ref else None)
  _, step = ts.build_step(ts.decoder_forward(graphdef), rl, temperature=1.0, mesh=mesh,
                          state_sharding=sh,
                          donate=False, group_size=group_size)
  return state, step, rl_mesh.shard_batch(batch, mesh)


def _mu(state):
  # AdamW's first moment after one step is (1 - b1) * clipped gradient: a view of the gradient.
  return state.opt_state[1][0].mu


def _maxdiff(a, b):
  return max(jax.tree.leaves(jax.tree.map(lambda x, y: float(jnp.max(jnp.abs(x - y))), a, b)))


def test_mesh_and_micro_batches_match_single_device(model):
  rl = _rl()
  batch = _batch()
  state, step, b1 = _run(model, rl, batch)
  s1, m1 = step(state, b1)
  assert float(m1["grad_norm"]) > 0 and float(m1["kl"]) > 0 and float(m1["clip_frac"]) > 0

  mesh = rl_mesh.mesh_from_config(ml_collections.ConfigDict({"data": 2, "fsdp": 2, "tensor": 2}))
  state8, step8, b8 = _run(model, rl, batch, mesh)
  s8, m8 = step8(state8, b8)
  emb = s8.params["embed_tokens"][...]
  assert len(emb.sharding.device_set) == 8 and not emb.sharding.is_fully_replicated
  assert _mu(s8)["embed_tokens"][...].sharding == emb.sharding
  for k in m1:
    np.testing.assert_allclose(m8[k], m1[k], rtol=1e-5, atol=1e-6, err_msg=k)
  assert _maxdiff(s1.params, s8.params) < 1e-5
  assert _maxdiff(jax.tree.map(lambda x: 10 * x, _mu(s1)),
                  jax.tree.map(lambda x: 10 * x, _mu(s8))) < 1e-5

  # One micro-batch of 16 gives the same update as two of 8 (weights are batch-global).
  state_f, step_f, bf = _run(model, _rl(micro_batch_size=0), batch)
  sf, mf = step_f(state_f, bf)
  np.testing.assert_allclose(mf["loss"], m1["loss"], rtol=1e-5)
  assert _maxdiff(jax.tree.map(lambda x: 10 * x, _mu(s1)),
                  jax.tree.map(lambda x: 10 * x, _mu(sf))) < 1e-5

  # A non-finite loss skips the update and leaves params and optimiser state bit-identical.
  bad = batch.replace(advantages=np.where(np.arange(B) == 5, np.nan, batch.advantages)
                      .astype(np.float32))
  s_bad, m_bad = step(s1, rl_mesh.shard_batch(bad, None))
  assert float(m_bad["skipped"]) == 1.0 and int(s_bad.skipped_steps) == 1
  assert int(s_bad.step) == 2
  assert _maxdiff(s_bad.params, s1.params) == 0.0
  assert _maxdiff(s_bad.opt_state, s1.opt_state) == 0.0
  s_ok, m_ok = step(s_bad, b1)
  assert float(m_ok["skipped"]) == 0.0 and int(s_ok.skipped_steps) == 1
  assert all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree.leaves(s_ok.params))
  assert _maxdiff(s_ok.params, s1.params) > 0


def test_flat_groups_contribute_no_gradient(model):
  rl = _rl(beta=0.0, loss_aggregation="seq_mean_token_mean")
  batch = _batch(1, flat_groups=(1, 3))
  state, step, b = _run(model, rl, batch, with_ref=False)
  s_a, m_a = step(state, b)
  assert float(m_a["zero_adv_group_frac"]) == 0.5
  # Changing what the flat groups' rows say changes nothing in the update.
  flat_rows = np.isin(batch.group_id, (1, 3))
  other = np.random.default_rng(9).integers(0, V, batch.tokens.shape).astype(np.int32)
  changed = batch.replace(tokens=np.where(flat_rows[:, None], other, batch.tokens))
  s_b, _ = step(state, rl_mesh.shard_batch(changed, None))
  assert _maxdiff(_mu(s_a), _mu(s_b)) < 1e-9
  # All groups flat: the gradient is exactly zero.
  s_z, m_z = step(state, rl_mesh.shard_batch(_batch(1, flat_groups=(0, 1, 2, 3)), None))
  assert float(m_z["grad_norm"]) == 0.0 and float(m_z["zero_adv_group_frac"]) == 1.0
  assert _maxdiff(s_z.params, state.params) == 0.0


def test_bad_micro_batch_size_is_a_config_error(model):
  state, step, b = _run(model, _rl(micro_batch_size=5), _batch())
  with pytest.raises(ConfigError, match="micro_batch_size"):
    step(state, b)


def _left_padded_batch(seed=0, p=12, lengths=(5, 3, 5, 2) * 4):
  """A batch whose prompts are left-padded in a wider bucket than its longest prompt."""
  rng = np.random.default_rng(seed)
  b = _batch(seed)
  pm = np.arange(p)[None, :] >= p - np.asarray(lengths)[:, None]
  rm = np.asarray(b.attention_mask[:, P:])
  mask = np.concatenate([pm, rm], 1)
  tokens = np.concatenate([rng.integers(0, V, (B, p)).astype(np.int32),
                           np.asarray(b.tokens[:, P:])], 1)
  return b.replace(tokens=tokens, attention_mask=mask,
                   positions=np.maximum(np.cumsum(mask, 1) - 1, 0).astype(np.int32))


def test_trimming_prompt_padding_rounds_to_the_multiple():
  from harnessrl_jax.rl.batch import trim_prompt_padding
  full = _left_padded_batch()
  widths = {}
  for multiple, width in [(4, 8), (1, 5), (5, 5), (32, 12), (0, 12)]:
    trimmed = trim_prompt_padding(full, multiple)
    assert trimmed.prompt_len == width and trimmed.loss_mask.shape == (B, N)
    np.testing.assert_array_equal(np.asarray(trimmed.attention_mask).sum(),
                                  np.asarray(full.attention_mask).sum())
    widths.setdefault(width, []).append(trimmed)
  # Batches of one width are the same batch, and width 12 is the untrimmed one: the update
  # test below runs each distinct batch once.
  for same in [*widths.values(), [full, *widths[12]]]:
    for other in same[1:]:
      for x, y in zip(jax.tree.leaves(other), jax.tree.leaves(same[0])):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.parametrize("multiple,width", [(4, 8), (1, 5)])
def test_trimming_prompt_padding_keeps_loss_and_gradient(model, multiple, width):
  from harnessrl_jax.rl.batch import trim_prompt_padding
  rl = _rl()
  full = _left_padded_batch()
  trimmed = trim_prompt_padding(full, multiple)
  assert trimmed.prompt_len == width
  state, step, b_full = _run(model, rl, full)
  s_full, m_full = step(state, b_full)
  state, step, b_trim = _run(model, rl, trimmed)
  s_trim, m_trim = step(state, b_trim)
  for k in ("loss", "pg_loss", "kl_loss", "grad_norm", "entropy"):
    np.testing.assert_allclose(float(m_trim[k]), float(m_full[k]), rtol=2e-5, atol=1e-7,
                               err_msg=k)
  assert _maxdiff(_mu(s_trim), _mu(s_full)) < 1e-6


def _shared_prompt_batch(seed=0):
  """`_batch` with each group's 4 rows on one prompt, as the rollout gives them (group 0's
  prompt left-padded; responses of several lengths)."""
  b = _batch(seed)
  first = np.repeat(np.arange(0, B, 4), 4)
  tokens, mask = np.asarray(b.tokens).copy(), np.asarray(b.attention_mask).copy()
  tokens[:, :P], mask[:, :P] = tokens[first, :P], mask[first, :P]
  mask[5, P + 2:] = False   # one response of 2 tokens, one of 6 in the same group
  loss_mask = mask[:, P:].astype(np.float32)
  return b.replace(tokens=tokens, attention_mask=mask, loss_mask=loss_mask,
                   positions=np.maximum(np.cumsum(mask, 1) - 1, 0).astype(np.int32))


# Micro-batches of 8 slice the same packed rows the mesh variant slices: slow tier.
@pytest.mark.parametrize("micro,mesh_axes", [pytest.param(8, None, marks=pytest.mark.slow),
                                             (0, None), (16, (2, 2, 2))])
def test_shared_prompt_packing_keeps_loss_and_gradient(model, micro, mesh_axes):
  """Each group packed into one row [prompt, r_1..r_4] gives the row layout's update."""
  rl = _rl(micro_batch_size=micro)
  batch = _shared_prompt_batch()
  state, step, b_rows = _run(model, rl, batch)
  s_rows, m_rows = step(state, b_rows)
  mesh = None if mesh_axes is None else rl_mesh.mesh_from_config(ml_collections.ConfigDict(
      dict(zip(("data", "fsdp", "tensor"), mesh_axes))))
  graphdef = model[0]
  assert ts.prompt_group_size(rl, 4, nnx.merge(graphdef, model[1]), mesh) == 4
  state, step, b_packed = _run(model, rl, batch, mesh, group_size=4)
  s_packed, m_packed = step(state, b_packed)
  assert float(m_rows["kl"]) > 0 and float(m_rows["grad_norm"]) > 0
  for k in m_rows:
    np.testing.assert_allclose(float(m_packed[k]), float(m_rows[k]), rtol=2e-5, atol=1e-7,
                               err_msg=k)
  assert _maxdiff(_mu(s_packed), _mu(s_rows)) < 1e-6
  cfg = ts.StepConfig.from_config(rl, temperature=1.0)
  fwd = ts.decoder_forward(graphdef)
  rows = ts.make_logprob_fn(fwd, cfg)(model[1], batch)
  packed = ts.make_logprob_fn(fwd, ts.StepConfig.from_config(rl, 4, temperature=1.0))(model[1], batch)
  np.testing.assert_allclose(np.asarray(packed), np.asarray(rows), atol=2e-5)


def test_prompt_group_size_packs_only_what_it_can():
  dense = Decoder(ModelConfig.tiny(), rngs=nnx.Rngs(0))
  rl = _rl()   # 4 tasks x J 4, micro-batches of 8
  assert ts.prompt_group_size(rl, 4, dense) == 4
  assert ts.prompt_group_size(_rl(share_prompts=False), 4, dense) == 1
  assert ts.prompt_group_size(rl, 1, dense) == 1
  assert ts.prompt_group_size(_rl(micro_batch_size=6, tasks_per_step=3), 4, dense) == 1
  eight = rl_mesh.mesh_from_config(ml_collections.ConfigDict({"data": 8, "fsdp": 1,
                                                              "tensor": 1}))
  assert ts.prompt_group_size(rl, 4, dense, eight) == 1    # one row per device
  for family in ("gemma3", "qwen3_5"):   # sliding windows, linear attention
    other = Decoder(ModelConfig.tiny(family), rngs=nnx.Rngs(0))
    assert ts.prompt_group_size(rl, 4, other) == 1
    with pytest.raises(ConfigError, match="full attention"):
      other.hidden_states(jnp.zeros((1, 3), jnp.int32), jnp.zeros((1, 3), jnp.int32),
                          jnp.ones((1, 3), bool), jnp.ones((1, 3, 3), bool))


def test_update_positions_count_each_packed_prompt_once():
  from harnessrl_jax import run_files
  from harnessrl_jax.run import step as step_fns
  batch = _shared_prompt_batch()
  mask = np.asarray(batch.attention_mask)
  rows = step_fns.update_positions(batch)
  assert rows == {run_files.COMPUTED: B * (P + N), run_files.REAL: int(mask.sum())}
  packed = step_fns.update_positions(batch, 4)
  prompts_once = int(mask[::4, :P].sum())
  assert packed == {run_files.COMPUTED: 4 * (P + 4 * N),
                    run_files.REAL: prompts_once + int(mask[:, P:].sum())}
  assert packed[run_files.REAL] <= packed[run_files.COMPUTED]


def test_packing_refuses_groups_whose_prompts_differ():
  from harnessrl_jax.errors import HarnessError  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.rl.batch import check_shared_prompts  # pylint: disable=g-import-not-at-top
  batch = _shared_prompt_batch()
  check_shared_prompts(batch, 4)
  check_shared_prompts(_batch(), 1)   # rows as sampled: nothing to check
  tokens = np.asarray(batch.tokens).copy()
  tokens[9, 1] = (tokens[9, 1] + 1) % V
  with pytest.raises(HarnessError, match=r"rows 8\.\.11"):
    check_shared_prompts(batch.replace(tokens=tokens), 4)
  mask = np.asarray(batch.attention_mask).copy()
  mask[5, 0] = False
  with pytest.raises(HarnessError, match=r"attention_mask differ within the group of rows 4"):
    check_shared_prompts(batch.replace(attention_mask=mask), 4)
