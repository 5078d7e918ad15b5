"""Starting a JetStream server around our engine (used by `python -m harnessrl_jax.serve`,
tests and benchmarks)."""

from __future__ import annotations

from harnessrl_jax.serving import jetstream_compat
# pylint: disable=g-bad-import-order,g-import-not-at-top
from jetstream.core import config_lib

from harnessrl_jax.serving.engine import DecoderEngine


def start_server(engine: DecoderEngine, port: int, *, host: str = "127.0.0.1",
                 threads: int | None = None, keep_jetstream_logging: bool = False):
  """Serves `engine` with JetStream's orchestrator and gRPC server; returns the server
  (call `.stop()` to end it, `.wait_for_termination()` to block).

  One interleaved slice: prefill and generate share the engine's device and weights.
  """
  server_lib = jetstream_compat.load_server_lib(host, keep_jetstream_logging)
  device = engine.mesh.devices.flat[0]
  config = config_lib.ServerConfig(
      interleaved_slices=(f"{device.platform}=1",),
      interleaved_engine_create_fns=(lambda devices: engine,))
  return server_lib.run(port=port, config=config, devices=[device], threads=threads)
