"""load_model sources ("tiny", "hf"), ModelConfig parsing, PromptBuilder, and user errors."""

import json
import os

import jax
import numpy as np
import pytest
from flax import nnx
from safetensors.numpy import load_file, save_file

from harnessrl_jax.config import base_config
from harnessrl_jax.data.schema import Message
from harnessrl_jax.errors import ConfigError
from harnessrl_jax.models import hf_io, loading
from harnessrl_jax.models.architecture import ModelConfig
from harnessrl_jax.models.tokenizer import PromptBuilder, tiny_tokenizer
from tests.models.test_models_export import randomised


def _params(model):
  return [np.asarray(x) for x in jax.tree.leaves(nnx.state(model, nnx.Param))]


def test_tiny_source_is_seeded_and_matches_its_tokenizer():
  c = base_config()
  c.model.source = "tiny"
  a = loading.load_model(c.model)
  b = loading.load_model(c.model)
  other = loading.load_model({"source": "tiny", "seed": 1})
  assert a.config.family == "llama" and a.config.vocab_size == a.prompt_builder.vocab_size == 264
  for x, y in zip(_params(a.model), _params(b.model)):
    np.testing.assert_array_equal(x, y)
  assert not np.array_equal(_params(a.model)[0], _params(other.model)[0])
  ids = a.prompt_builder.encode_chat([Message("user", "hi")])
  logits, _ = a.model(np.asarray([ids]), np.arange(len(ids))[None], np.ones((1, len(ids)), bool))
  assert logits.shape == (1, len(ids), 264)
  q3 = loading.load_model({"source": "tiny", "family": "qwen3", "param_dtype": "bfloat16"})
  assert q3.config.qk_norm and q3.config.param_dtype == "bfloat16"


def test_hf_directory_source(tmp_path):
  cfg = ModelConfig.tiny("qwen2", eos_token_ids=(258,))
  model = randomised(cfg, seed=9)
  hf_io.save_hf_dir(model, tmp_path, tokenizer=tiny_tokenizer())
  lm = loading.load_model({"source": "hf", "path": str(tmp_path), "remat": True})
  assert lm.config.remat and lm.config.attention_bias
  assert 258 in lm.prompt_builder.eos_token_ids and lm.prompt_builder.pad_id == 259
  tokens = np.arange(10, dtype=np.int32)[None]
  args = (tokens, np.arange(10)[None], np.ones((1, 10), bool))
  np.testing.assert_allclose(np.asarray(lm.model(*args)[0]), np.asarray(model(*args)[0]),
                             atol=1e-6)


def test_model_config_reads_pre_v5_rope_fields_and_round_trips_json():
  old = {"model_type": "llama", "vocab_size": 128, "hidden_size": 64, "intermediate_size": 96,
         "num_hidden_layers": 2, "num_attention_heads": 8, "rope_theta": 500000.0,
         "rope_scaling": {"type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
         "eos_token_id": [5, 7], "tie_word_embeddings": True}
  cfg = ModelConfig.from_hf(old)
  assert cfg.rope_theta == 500000.0 and cfg.rope_scaling["rope_type"] == "llama3"
  assert cfg.num_kv_heads == 8 and cfg.head_dim == 8 and cfg.eos_token_ids == (5, 7)
  assert ModelConfig.from_json(json.loads(json.dumps(cfg.to_json()))) == cfg
  assert hash(cfg) == hash(ModelConfig.from_hf(old))  # usable as a static jit argument
  again = ModelConfig.from_hf(cfg.to_hf())
  assert again == cfg


def test_gemma3_config_reads_old_and_new_rope_fields_and_round_trips():
  # A pre-v5 file as Google's Gemma 3 1B ships it: rope_local_base_freq, a pattern, no types.
  old = {"model_type": "gemma3_text", "vocab_size": 128, "hidden_size": 64,
         "intermediate_size": 96, "num_hidden_layers": 7, "num_attention_heads": 4,
         "num_key_value_heads": 1, "head_dim": 32, "rope_theta": 1000000.0,
         "rope_local_base_freq": 10000.0, "rope_scaling": {"rope_type": "linear", "factor": 8.0},
         "sliding_window": 512, "sliding_window_pattern": 6, "query_pre_attn_scalar": 32,
         "hidden_activation": "gelu_pytorch_tanh", "attn_logit_softcapping": None,
         "final_logit_softcapping": None, "eos_token_id": [1, 106]}
  cfg = ModelConfig.from_hf(old)
  assert cfg.family == "gemma3" and cfg.qk_norm and cfg.tie_word_embeddings
  assert cfg.layer_types == ("sliding_attention",) * 5 + ("full_attention", "sliding_attention")
  assert (cfg.rope_theta, cfg.rope_local_theta) == (1e6, 1e4)
  assert dict(cfg.rope_scaling) == {"rope_type": "linear", "factor": 8.0}
  assert cfg.attention_scale == 32 ** -0.5 and cfg.hidden_act == "gelu_pytorch_tanh"
  assert ModelConfig.from_hf(cfg.to_hf()) == cfg   # the v5 form (rope_parameters per type)
  assert ModelConfig.from_json(json.loads(json.dumps(cfg.to_json()))) == cfg
  with pytest.raises(ConfigError, match="multimodal"):
    ModelConfig.from_hf({**old, "model_type": "gemma3"})
  with pytest.raises(ConfigError, match="hidden_activation='silu'"):
    ModelConfig.from_hf({**old, "hidden_activation": "silu"})
  with pytest.raises(ConfigError, match="sliding_window > 0"):
    ModelConfig.from_hf({**old, "sliding_window": None})


@pytest.mark.parametrize("change,match", [
    ({"model_type": "gpt2"}, "model_type='gpt2' is not supported"),
    ({"use_sliding_window": True}, "use_sliding_window"),
    ({"hidden_act": "gelu"}, "hidden_act"),
    ({"attention_bias": True}, "attention_bias"),
    ({"num_key_value_heads": 3}, "not a multiple of num_kv_heads=3"),
    ({"rope_parameters": {"rope_type": "yarn", "factor": 4.0}}, "'yarn' is not supported"),
])
def test_unsupported_hf_configs_raise_config_errors(change, match):
  base = {"model_type": "llama", "vocab_size": 128, "hidden_size": 64,
          "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4}
  with pytest.raises(ConfigError, match=match):
    ModelConfig.from_hf({**base, **change})


def test_checkpoint_errors_name_the_file_and_tensor(tmp_path):
  cfg = ModelConfig.tiny("llama")
  hf_io.save_hf_dir(randomised(cfg, seed=1), tmp_path)
  weights = os.path.join(tmp_path, "model.safetensors")
  tensors = load_file(weights)
  del tensors["model.layers.1.mlp.up_proj.weight"]
  save_file(tensors, weights)
  with pytest.raises(ConfigError, match=r"'model.layers.1.mlp.up_proj.weight' is missing"):
    hf_io.load_hf_dir(tmp_path)
  tensors["model.layers.1.mlp.up_proj.weight"] = np.zeros((7, 64), np.float32)
  save_file(tensors, weights)
  with pytest.raises(ConfigError, match=r"up_proj.weight' has shape \(7, 64\).*\(128, 64\)"):
    hf_io.load_hf_dir(tmp_path)
  with open(weights, "wb") as f:
    f.write(b"\x00" * 100)
  with pytest.raises(ConfigError, match="model.safetensors: cannot read"):
    hf_io.load_hf_dir(tmp_path)


@pytest.mark.parametrize("model_cfg,match", [
    ({"source": "nope"}, "config.model.source = 'nope'"),
    ({"source": "hf", "path": ""}, "config.model.path is empty"),
    ({"sauce": "tiny"}, "config.model.sauce: no such field"),
    ({"source": "hf", "path": "/no/such/dir"}, "neither a directory nor a .gguf"),
])
def test_bad_model_config_raises(model_cfg, match):
  with pytest.raises(ConfigError, match=match):
    loading.load_model(model_cfg)


def test_tiny_tokenizer_equals_its_transformers_form():
  """ByteTokenizer (no transformers import) against the PreTrainedTokenizerFast it converts
  to: rendering, encoding and decoding, special tokens in the text included."""
  ours = tiny_tokenizer()
  ref = ours.to_transformers()
  texts = ["", "plain", "Grüße 👋  x , y\n\n", " lead and trail ", "a<|im_end|>b<|pad|>",
           "tabs\tand \r\n ends", "<|im_start|>user\nhi<|im_end|>\n"]
  for text in texts:
    assert ours(text)["input_ids"] == ref(text, add_special_tokens=False)["input_ids"], text
  rng = np.random.default_rng(0)
  for ids in [rng.integers(0, 264, n).tolist() for n in (0, 1, 7, 40)] + [[257, 65, 258, 259]]:
    for skip in (True, False):
      assert ours.decode(ids, skip) == ref.decode(ids, skip_special_tokens=skip), (ids, skip)
  chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi 👋"},
          {"role": "assistant", "content": "Hello."}]
  for gen in (True, False):
    assert ours.apply_chat_template(chat, add_generation_prompt=gen) == ref.apply_chat_template(
        chat, tokenize=False, add_generation_prompt=gen)
  assert (len(ours), ours.get_vocab(), ours.eos_token_id, ours.pad_token_id) == (
      len(ref), ref.get_vocab(), ref.eos_token_id, ref.pad_token_id)
  assert set(ours.added_tokens_decoder) == set(ref.added_tokens_decoder)
  assert ours.all_special_ids == ref.all_special_ids


def test_prompt_builder_validates_messages_and_template():
  pb = PromptBuilder(tiny_tokenizer())
  text = "Grüße 👋"
  assert pb.decode(pb.encode(text)) == text
  assert pb.encode_chat([{"role": "user", "content": "a"}], add_generation_prompt=False) == (
      [257] + pb.encode("user\na") + [258] + pb.encode("\n"))
  with pytest.raises(ConfigError, match="chat message 1: role='robot'"):
    pb.encode_chat([Message("user", "a"), {"role": "robot", "content": "b"}])
  tok = tiny_tokenizer()
  tok.chat_template = None
  with pytest.raises(ConfigError, match="no chat template"):
    PromptBuilder(tok)
