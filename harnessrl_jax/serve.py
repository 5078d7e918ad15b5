"""Serve a model for the judge and the evolver over JetStream's gRPC API.

  python -m harnessrl_jax.serve --model=smollm2 --port=9000
  python -m harnessrl_jax.serve --model=/path/to/hf_dir_or.gguf --port=9000 --host=0.0.0.0

--model is "tiny" (random test model), "smollm2" (the packaged SmolLM2-135M-Instruct),
"gemma3-270m" (Gemma 3 270M base, the optional extra requirements-gemma.txt, under the Gemma
terms of use https://ai.google.dev/gemma/terms; a base model, for serving tests rather than
judging) or a path (HF safetensors directory or .gguf file). Binds 127.0.0.1 unless --host
says otherwise.
Clients: harnessrl_jax.judges.jetstream_client.JetStreamClient (judge.backend="jetstream").
Needs the serving extras: requirements-serving.txt and google-jetstream (--no-deps).
"""

from __future__ import annotations

import logging

from absl import flags

from harnessrl_jax import cli

_MODEL = flags.DEFINE_string("model", "smollm2",
                             "tiny | smollm2 | gemma3-270m | PATH (HF dir or .gguf)")
_PORT = flags.DEFINE_integer("port", 9000, "gRPC port")
_HOST = flags.DEFINE_string("host", "127.0.0.1", "bind address (0.0.0.0 or :: for all)")
_SLOTS = flags.DEFINE_integer("max_concurrent_decodes", 8, "decode slots (batch rows)")
_PREFILL = flags.DEFINE_integer("max_prefill_length", 1024,
                                "longest prompt + 1, a power of two in 16..32768")
_DECODE = flags.DEFINE_integer("max_decode_length", 512, "longest answer in tokens")
_SCHEMA_STATES = flags.DEFINE_integer(
    "schema_states", 0, "JSON-schema tables: states per slot to allocate up front (0: grow "
    "on demand; each growth compiles generate again)")
_SCHEMA_CLASSES = flags.DEFINE_integer("schema_classes", 0,
                                       "JSON-schema tables: token classes per slot up front")
_PREFIX_CACHE = flags.DEFINE_integer(
    "prefix_cache_entries", 16, "prompts whose K, V are kept so that a prompt starting with "
    "the same tokens prefills only the rest (0: off; models with sliding windows or linear "
    "attention: always off)")
_SEED = flags.DEFINE_integer("seed", 0, "weights seed for --model=tiny")
_CACHE_DIR = flags.DEFINE_string("cache_dir", "", "converted-weights cache (GGUF sources)")
_DTYPE = flags.DEFINE_string("dtype", "float32", "activation dtype")
_THREADS = flags.DEFINE_integer("threads", 0, "gRPC worker threads (0: JetStream default)")
_JS_LOG = flags.DEFINE_bool("jetstream_logging", False,
                            "keep JetStream's per-step DEBUG logging on stdout")


def model_config(model: str, *, seed: int = 0, cache_dir: str = "",
                 dtype: str = "float32") -> dict:
  """The config.model fields that --model names."""
  base = {"cache_dir": cache_dir, "dtype": dtype, "param_dtype": "float32", "remat": False}
  if model in ("tiny", "smollm2", "gemma3-270m"):
    return {**base, "source": model, "path": "", "seed": seed}
  return {**base, "source": "hf", "path": model}


def main(argv) -> None:
  del argv
  from harnessrl_jax.models.loading import load_model  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.serving.engine import DecoderEngine  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.serving.server import start_server  # pylint: disable=g-import-not-at-top

  loaded = load_model(model_config(_MODEL.value, seed=_SEED.value, cache_dir=_CACHE_DIR.value,
                                   dtype=_DTYPE.value))
  engine = DecoderEngine(loaded.model, loaded.prompt_builder,
                         max_concurrent_decodes=_SLOTS.value,
                         max_prefill_length=_PREFILL.value, max_decode_length=_DECODE.value,
                         schema_table=(_SCHEMA_STATES.value, _SCHEMA_CLASSES.value),
                         prefix_cache_entries=_PREFIX_CACHE.value)
  server = start_server(engine, _PORT.value, host=_HOST.value, threads=_THREADS.value or None,
                        keep_jetstream_logging=_JS_LOG.value)
  logging.warning("harnessrl_jax.serve: %s on %s:%d (%d slots)", _MODEL.value, _HOST.value,
                  _PORT.value, _SLOTS.value)
  server.wait_for_termination()


if __name__ == "__main__":
  cli.run(main)
