"""Export round trip: our params -> HF directory -> transformers (and back) -> same logits."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers
from flax import nnx

from harnessrl_jax.models import hf_io
from harnessrl_jax.models.architecture import ModelConfig
from harnessrl_jax.models.decoder import Decoder
from harnessrl_jax.models.tokenizer import tiny_prompt_builder


def randomised(cfg: ModelConfig, seed: int) -> Decoder:
  """A model with O(1) logits and non-trivial norms/biases, so a layout slip shows."""
  # An abstract model filled from NumPy: every parameter is overwritten, and eager
  # initialisers and jax.random draws compile one program per parameter shape (~10 s).
  model = nnx.eval_shape(lambda: Decoder(cfg, rngs=nnx.Rngs(seed)))
  assert not jax.tree.leaves(nnx.state(model, nnx.Not(nnx.Param)))   # nothing left abstract
  state = nnx.state(model, nnx.Param)
  leaves, treedef = jax.tree.flatten(state)
  rng = np.random.default_rng(seed)
  paths = [p for p, _ in jax.tree_util.tree_flatten_with_path(state)[0]]
  new = []
  for path, x in zip(paths, leaves):
    noise = rng.standard_normal(x.shape, dtype=np.float32)
    name = jax.tree_util.keystr(path)
    if "norm" in name or "layer_scalar" in name:
      # About 1 as a scale; Gemma 3's and Qwen3.5's norms are offsets from 1.
      offset = cfg.zero_centred_norms and "linear_attn" not in name
      v = (0.0 if offset else 1.0) + 0.3 * noise
    elif "bias" in name or x.ndim == 1:   # biases; Gated DeltaNet's dt_bias and A_log
      v = 0.5 * noise
    elif "embed_tokens" in name or "lm_head" in name:
      v = noise
    else:
      v = noise / np.sqrt(x.shape[-2])
    new.append(jnp.asarray(v, x.dtype))
  nnx.update(model, jax.tree.unflatten(treedef, new))
  return model


def _inputs(cfg, b=2, t=16):
  tokens = np.random.default_rng(5).integers(0, cfg.vocab_size, (b, t), dtype=np.int32)
  mask = np.ones((b, t), bool)
  mask[0, :4] = False
  positions = np.clip(np.cumsum(mask, 1) - 1, 0, None).astype(np.int32)
  return tokens, positions, mask


@pytest.mark.parametrize("family,tie", [("llama", True), ("qwen2", False), ("qwen3", False),
                                        ("gemma3", True), ("qwen3_5", False)])
def test_export_loads_in_transformers_with_same_logits(tmp_path, family, tie):
  cfg = ModelConfig.tiny(family, tie_word_embeddings=tie, eos_token_ids=(258,))
  model = randomised(cfg, seed=7)
  pb = tiny_prompt_builder()
  hf_io.save_hf_dir(model, tmp_path, tokenizer=pb)

  tokens, positions, mask = _inputs(cfg)
  ours = np.asarray(model(tokens, positions, mask)[0])
  assert np.abs(ours).max() > 1.0
  ref = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval()
  assert type(ref).__name__ == {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                                "qwen3": "Qwen3ForCausalLM",
                                "gemma3": "Gemma3ForCausalLM",
                                "qwen3_5": "Qwen3_5ForCausalLM"}[family]
  assert ref.config.tie_word_embeddings == tie
  with torch.no_grad():
    want = ref(input_ids=torch.tensor(tokens, dtype=torch.long),
               attention_mask=torch.tensor(mask.astype(np.int64)),
               position_ids=torch.tensor(positions, dtype=torch.long)).logits.numpy()
  # Qwen3.5: float32 noise of its recurrence on large logits (test_models_parity.TOL_QWEN3_5).
  np.testing.assert_allclose(ours[mask], want[mask], atol=6e-4 if family == "qwen3_5" else 1e-4,
                             rtol=0)

  # The tokenizer travels with the weights: a HF server renders the same prompt.
  tok = transformers.AutoTokenizer.from_pretrained(tmp_path)
  msgs = [{"role": "user", "content": "hi"}]
  assert tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True) == \
      pb.render_chat(msgs)
  assert ref.generation_config.eos_token_id in (258, [258])

  # And back: our importer restores identical parameters.
  back, back_cfg = hf_io.load_hf_dir(tmp_path)
  assert back_cfg == cfg
  for a, b in zip(jax.tree.leaves(nnx.state(model, nnx.Param)),
                  jax.tree.leaves(nnx.state(back, nnx.Param))):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_bf16_export_is_stored_as_bf16_and_loads(tmp_path):
  cfg = ModelConfig.tiny("llama")
  model = randomised(cfg, seed=3)
  hf_io.save_hf_dir(model, tmp_path, dtype=jnp.bfloat16)
  ref = transformers.AutoModelForCausalLM.from_pretrained(tmp_path)
  assert ref.model.embed_tokens.weight.dtype == torch.bfloat16
  back, _ = hf_io.load_hf_dir(tmp_path)
  emb = np.asarray(model.embed_tokens[...])
  np.testing.assert_allclose(np.asarray(back.embed_tokens[...]), emb, rtol=2 ** -8, atol=0)


@pytest.mark.parametrize("num_layers", [1, 2])
def test_scanned_and_listed_layers_export_the_same_tensors(num_layers):
  cfg = ModelConfig.tiny("qwen3", num_layers=num_layers)
  scanned = randomised(cfg, seed=11)
  tensors = hf_io.model_to_tensors(scanned)
  listed = hf_io.model_from_tensors(cfg.replace(scan_layers=False), tensors)
  again = hf_io.model_to_tensors(listed)
  assert sorted(tensors) == sorted(again)
  assert f"model.layers.{num_layers - 1}.self_attn.q_norm.weight" in tensors
  for name in tensors:
    np.testing.assert_array_equal(tensors[name], again[name])
  rescanned = hf_io.model_from_tensors(cfg, again)
  tokens, positions, mask = _inputs(cfg)
  want = np.asarray(scanned(tokens, positions, mask)[0])
  for model in (listed, rescanned):
    np.testing.assert_allclose(np.asarray(model(tokens, positions, mask)[0]), want, atol=1e-4)
