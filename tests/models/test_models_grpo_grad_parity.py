"""GRPO loss gradients of the new families against transformers + torch autograd.

Our loss (rl.train_step.response_logprobs + rl.losses.grpo_loss) on a tiny random Qwen3.5
hybrid, Gemma 3 and Gemma 4, against the same loss written out in torch on transformers'
model with the same weights (exported by hf_io): the loss value and every parameter's
gradient, mapped to HF names and layouts by hf_io's own export. Old log-probs differ from
the current ones so some ratios are clipped; beta > 0 so the k3 KL term's gradient is in it
too.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers
from flax import nnx

from harnessrl_jax.models import hf_io
from harnessrl_jax.models.architecture import ModelConfig
from harnessrl_jax.rl import losses
from harnessrl_jax.rl.batch import RLBatch
from harnessrl_jax.rl.train_step import decoder_forward, response_logprobs
from tests.models.test_models_export import randomised

PROMPT, RESPONSE, ROWS = 7, 9, 4
LOSS_CFG = losses.LossConfig(clip_eps_low=0.2, clip_eps_high=0.28, beta=0.1,
                             kl_estimator="k3", loss_aggregation="seq_mean_token_mean")


def _batch(cfg: ModelConfig, seed: int) -> RLBatch:
  rng = np.random.default_rng(seed)
  tokens = rng.integers(0, cfg.vocab_size, (ROWS, PROMPT + RESPONSE)).astype(np.int32)
  mask = np.ones(tokens.shape, bool)
  mask[1, :3] = False                      # a left-padded prompt
  loss_mask = np.ones((ROWS, RESPONSE), np.float32)
  loss_mask[2, 5:] = 0.0                   # a response that ended early
  mask[2, PROMPT + 5:] = False
  positions = np.clip(np.cumsum(mask, 1) - 1, 0, None).astype(np.int32)
  return RLBatch(tokens=tokens, positions=positions, attention_mask=mask, loss_mask=loss_mask,
                 old_logprobs=None, ref_logprobs=None,
                 advantages=rng.normal(size=ROWS).astype(np.float32),
                 task_weight=rng.uniform(0.5, 1.5, ROWS).astype(np.float32),
                 group_id=np.zeros(ROWS, np.int32))


def _torch_loss(ref_model, batch: RLBatch, old, ref_logp) -> torch.Tensor:
  """The GRPO objective from its formulas (spec Eq. 2), independently of rl/losses.py."""
  logits = ref_model(input_ids=torch.tensor(batch.tokens, dtype=torch.long),
                     attention_mask=torch.tensor(batch.attention_mask.astype(np.int64)),
                     position_ids=torch.tensor(batch.positions, dtype=torch.long)).logits
  logits = logits[:, PROMPT - 1:PROMPT - 1 + RESPONSE]
  targets = torch.tensor(batch.tokens[:, PROMPT:], dtype=torch.long)
  logp = torch.log_softmax(logits, -1).gather(-1, targets[..., None])[..., 0]
  adv = torch.tensor(batch.advantages)[:, None]
  ratio = torch.exp(logp - torch.tensor(old))
  pg = -torch.minimum(ratio * adv, torch.clamp(ratio, 0.8, 1.28) * adv)
  d = torch.tensor(ref_logp) - logp
  kl = torch.exp(d) - d - 1
  mask = torch.tensor(batch.loss_mask)
  weights = mask / mask.sum(1, keepdim=True) / ROWS * torch.tensor(batch.task_weight)[:, None]
  return (weights * (pg + LOSS_CFG.beta * kl)).sum()


# Gemma 4 adds to Gemma 3 what its logits parity covers; its gradients: slow tier.
@pytest.mark.parametrize("family", ["qwen3_5", "gemma3",
                                    pytest.param("gemma4", marks=pytest.mark.slow)])
def test_grpo_gradients_match_torch(tmp_path, family):
  cfg = ModelConfig.tiny(family)
  model = randomised(cfg, seed=11)
  hf_io.save_hf_dir(model, tmp_path)
  ref_model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32)
  batch = _batch(cfg, seed=3)
  graphdef, params = nnx.split(model)
  forward = decoder_forward(graphdef)
  logp_now = response_logprobs(forward, params, batch, chunk=4, temperature=1.0)[0]
  rng = np.random.default_rng(5)
  # Old and reference log-probs a little off the current ones: ratios on both sides of the
  # clip range, a non-trivial KL.
  old = np.asarray(logp_now) + rng.normal(0, 0.3, logp_now.shape).astype(np.float32)
  ref_logp = np.asarray(logp_now) + rng.normal(0, 0.5, logp_now.shape).astype(np.float32)

  def loss_fn(p):
    logp = response_logprobs(forward, p, batch, chunk=4, temperature=1.0)[0]
    return losses.grpo_loss(logp, jnp.asarray(old), jnp.asarray(ref_logp),
                            jnp.asarray(batch.advantages), jnp.asarray(batch.task_weight),
                            jnp.asarray(batch.loss_mask), LOSS_CFG)[0]

  # Jitted: one compile instead of op-by-op dispatch through the backward pass.
  ours_loss, grads = jax.jit(jax.value_and_grad(loss_fn))(params)
  want_loss = _torch_loss(ref_model, batch, old, ref_logp)
  want_loss.backward()
  ratio = np.exp(np.asarray(logp_now) - old)[batch.loss_mask > 0]
  assert (ratio < 0.8).any() and (ratio > 1.28).any()   # both clip branches are exercised
  np.testing.assert_allclose(float(ours_loss), want_loss.item(), rtol=1e-5, atol=1e-6)

  grad_model = nnx.merge(graphdef, grads)
  ours = hf_io.model_to_tensors(grad_model)
  theirs = {n: p.grad.numpy() for n, p in ref_model.named_parameters() if p.grad is not None}
  if cfg.tie_word_embeddings:
    ours.pop("lm_head.weight", None)
  # Gemma 4's layer scalars are buffers in transformers (no gradient), parameters here.
  scalars = {n for n in ours if n.endswith("layer_scalar")}
  assert len(scalars) == (cfg.num_layers if cfg.family == "gemma4" else 0)
  ours = {n: g for n, g in ours.items() if n not in scalars}
  assert set(ours) == set(theirs)
  worst = 0.0
  pad = ref_model.config.pad_token_id
  if pad is not None and (batch.tokens == pad).any():
    # torch's Embedding(padding_idx=pad) passes no gradient to the pad row's input use
    # (Gemma's pad id is 0, a real token here; the tied unembedding still does): measured,
    # that row is the only one that differs, so it is left out (of Gemma 4's per-layer
    # table too: also an Embedding with padding_idx, and untied, so its row gets none).
    for tree in (ours, theirs):
      for table in ("model.embed_tokens.weight", "model.embed_tokens_per_layer.weight"):
        if table in tree:
          tree[table] = np.delete(tree[table], pad, 0)
  for name, g in theirs.items():
    scale = max(np.abs(g).max(), 1e-3)
    err = np.abs(ours[name] - g).max() / scale
    worst = max(worst, err)
    assert err < 1e-3, (name, err, scale)
  assert worst > 0   # a real comparison, not two zero trees
