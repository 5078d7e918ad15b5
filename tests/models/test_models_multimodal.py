"""The released checkpoints of the paper's families are multimodal wrappers (Qwen3.5,
Gemma 3 4B and up, Gemma 4): config.json holds the text model under `text_config`, and the
weights hold vision (and Gemma 4's audio) towers beside the text decoder, under
`model.language_model.` or, as transformers stores Gemma 3, `language_model.model.`.

Each case builds transformers' own *ForConditionalGeneration on tiny random configs (text
decoders as in the families' parity tests, a one-layer vision tower, Gemma 4 with an audio
tower too), saves it with `save_pretrained`, loads it with `hf_io.load_hf_dir`, and checks
the text decoder's logits against the wrapper's on text-only input.
"""

import json

import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers

from harnessrl_jax.errors import ConfigError
from harnessrl_jax.models import hf_io
from harnessrl_jax.models.architecture import ModelConfig
from tests.models import test_models_gemma4 as g4
from tests.models import test_models_parity as parity
from tests.conftest import jitted_forward

# Special tokens of the wrappers (image, video, audio, their begin / end): ids above 256,
# which the text-only batches below never draw.
SPECIAL = dict(first=257)


def _gemma3():
  text = parity._hf_config("gemma3", True)   # pylint: disable=protected-access
  vision = transformers.SiglipVisionConfig(hidden_size=32, intermediate_size=64,
                                           num_hidden_layers=1, num_attention_heads=2,
                                           image_size=28, patch_size=14)
  cfg = transformers.Gemma3Config(text_config=text.to_dict(), vision_config=vision.to_dict(),
                                  mm_tokens_per_image=4, boi_token_index=259,
                                  image_token_index=260, eoi_token_index=261)
  return transformers.Gemma3ForConditionalGeneration(cfg), parity._randomise  # pylint: disable=protected-access


def _qwen3_5():
  text = parity._hf_config("qwen3_5", False)   # pylint: disable=protected-access
  vision = transformers.models.qwen3_5.Qwen3_5VisionConfig(
      depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
      patch_size=4, spatial_merge_size=2, temporal_patch_size=2)
  cfg = transformers.Qwen3_5Config(text_config=text.to_dict(), vision_config=vision.to_dict(),
                                   image_token_id=260, video_token_id=261,
                                   vision_start_token_id=262, vision_end_token_id=263)
  return transformers.Qwen3_5ForConditionalGeneration(cfg), parity._randomise  # pylint: disable=protected-access


def _gemma4():
  text = g4.hf_config(**g4.CASES["all_features"])
  vision = transformers.Gemma4VisionConfig(hidden_size=32, intermediate_size=64,
                                           num_hidden_layers=1, num_attention_heads=2,
                                           num_key_value_heads=2, head_dim=16)
  audio = transformers.Gemma4AudioConfig(hidden_size=32, num_hidden_layers=1,
                                         num_attention_heads=2)
  cfg = transformers.Gemma4Config(text_config=text.to_dict(), vision_config=vision.to_dict(),
                                  audio_config=audio.to_dict(), boi_token_id=259,
                                  image_token_id=260, eoi_token_id=261, video_token_id=262,
                                  audio_token_id=263)
  return transformers.Gemma4ForConditionalGeneration(cfg), g4.randomise


CASES = {"gemma3": _gemma3, "qwen3_5": _qwen3_5, "gemma4": _gemma4}
# Prefixes of the stored non-text parts, per case: each must be present, or the test
# would not show that they are left.
TOWERS = {"gemma3": ("vision_tower.", "multi_modal_projector."),
          "qwen3_5": ("model.visual.",),
          "gemma4": ("model.vision_tower.", "model.audio_tower.", "model.embed_vision.",
                     "model.embed_audio.")}


@pytest.fixture(scope="module", params=sorted(CASES))
def wrapped(request, tmp_path_factory):
  torch.manual_seed(0)
  ref, randomise = CASES[request.param]()
  ref = ref.float().eval()
  ref.config._attn_implementation = "eager"   # pylint: disable=protected-access
  ref.config.get_text_config()._attn_implementation = "eager"   # pylint: disable=protected-access
  randomise(ref, seed=len(request.param))
  path = tmp_path_factory.mktemp(request.param)
  ref.save_pretrained(path)
  ours, cfg = hf_io.load_hf_dir(path)
  return request.param, ref, ours, cfg, path


def test_text_logits_match_the_wrapper(wrapped):
  name, ref, ours, cfg, path = wrapped
  stored = hf_io.read_safetensors_dir(str(path))
  for prefix in TOWERS[name]:
    assert any(n.startswith(prefix) for n in stored), (name, prefix, sorted(stored)[:8])
  assert json.loads((path / "config.json").read_text())["model_type"] == name
  assert cfg.family == name and cfg.vocab_size == 264
  tokens = np.random.default_rng(1).integers(0, SPECIAL["first"], size=(2, 24), dtype=np.int32)
  mask = np.ones_like(tokens, dtype=bool)
  mask[0, :5] = False   # left padding
  positions = np.clip(np.cumsum(mask, axis=1) - 1, 0, None).astype(np.int32)
  with torch.no_grad():
    want = ref(input_ids=torch.tensor(tokens, dtype=torch.long),
               attention_mask=torch.tensor(mask.astype(np.int64)),
               position_ids=torch.tensor(positions, dtype=torch.long)).logits.numpy()
  got = np.asarray(jitted_forward(ours)(jnp.asarray(tokens), jnp.asarray(positions),
                                        jnp.asarray(mask))[0])
  assert np.abs(want[mask]).max() > 1.0   # logits are not trivially small
  np.testing.assert_allclose(got[mask], want[mask], atol=parity.tol(cfg), rtol=0)


def test_wrapped_equals_text_only_export(wrapped, tmp_path):
  """What we export is the text model alone (a *ForCausalLM directory): it reloads to the
  same parameters, and its config to the same ModelConfig."""
  _, _, ours, cfg, _ = wrapped
  hf_io.save_hf_dir(ours, tmp_path)
  again, cfg_again = hf_io.load_hf_dir(tmp_path)
  assert cfg_again == cfg
  a, b = hf_io.model_to_tensors(ours), hf_io.model_to_tensors(again)
  assert a.keys() == b.keys()
  for n in a:
    np.testing.assert_array_equal(a[n], b[n], err_msg=n)


def test_both_stored_layouts_read_alike(wrapped):
  """`model.language_model.X` (transformers' module names) and `language_model.model.X`
  with `language_model.lm_head.weight` (Gemma 3's stored layout) give one text model."""
  _, _, ours, cfg, path = wrapped
  text = hf_io.model_to_tensors(ours)
  new = {("model.language_model." + n[len("model."):] if n.startswith("model.") else n): t
         for n, t in text.items()}
  old = {("language_model." + n): t for n, t in text.items()}
  towers = {"model.vision_tower.x.weight": np.zeros(2, np.float32),
            "vision_tower.y.weight": np.zeros(2, np.float32)}
  for layout in (new, old):
    again = hf_io.model_to_tensors(hf_io.model_from_tensors(cfg, {**layout, **towers}))
    assert again.keys() == text.keys()
    for n in text:
      np.testing.assert_array_equal(again[n], text[n], err_msg=n)


def test_unknown_tensors_of_a_wrapper_are_still_refused(wrapped):
  _, _, ours, cfg, _ = wrapped
  text = {("model.language_model." + n[len("model."):] if n.startswith("model.") else n): t
          for n, t in hf_io.model_to_tensors(ours).items()}
  with pytest.raises(ConfigError, match="unexpected tensors.*model.speech_tower.w"):
    hf_io.model_from_tensors(cfg, {**text, "model.speech_tower.w": np.zeros(2, np.float32)},
                             where="ckpt")


def test_a_wrapper_without_its_text_config_is_refused():
  for model_type in ("gemma3", "gemma4", "qwen3_5"):
    with pytest.raises(ConfigError, match=f"model_type='{model_type}' is a multimodal wrapper"):
      ModelConfig.from_hf({"model_type": model_type, "hidden_size": 64})
