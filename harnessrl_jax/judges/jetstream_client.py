"""A client for a JetStream server's `Orchestrator.Decode` RPC (gRPC, streaming).

Tokenisation happens here, with the judge model's own chat template (`PromptBuilder`): the
request carries token ids and the server streams token ids back (JetStream's client-side
tokenisation mode), so the ids are exactly those the local backend feeds its model.
Requests are sent concurrently, up to `max_concurrency` streams; the server batches them
into its decode slots.

`schema=` is honoured (`takes_schema`) by our own server (`python -m harnessrl_jax.serve`):
the schema and max_tokens travel in a header ahead of the prompt ids
(serving/request_header.py), which our engine strips and decodes under. Another JetStream
engine would read the header as prompt ids: point schema requests at our server only.

Only the generated protobuf modules of JetStream are imported here; they need none of the
shims of `serving/jetstream_compat.py` (which only the server side imports).

Retried: UNAVAILABLE (refused or dropped connection), DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED
(the server's prefill queue is full), ABORTED, INTERNAL, UNKNOWN. Other status codes fail
the request at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from harnessrl_jax.data.schema import Message
from harnessrl_jax.judges.client import (RetryableError, RetryPolicy, Schema, ServerError,
                                         TextClient, call_with_retries, concurrent_map)
from harnessrl_jax.judges.local_client import answer_ids
from harnessrl_jax.serving import request_header

# gRPC's status names (grpc.StatusCode.X.name) that are worth retrying.
_RETRY_CODES = ("UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "ABORTED",
                "INTERNAL", "UNKNOWN")


class JetStreamClient(TextClient):
  """Decode RPCs against `python -m harnessrl_jax.serve` (or any JetStream server whose
  engine uses the same tokenizer)."""

  takes_schema = True
  regular_schemas = True

  def __init__(self, address: str, prompt_builder, *, max_prompt_tokens: int = 1024,
               timeout_s: float = 120.0, policy: RetryPolicy = RetryPolicy(),
               max_concurrency: int = 16, sleep: Callable[[float], None] | None = None):
    # Serving extras (requirements-serving.txt), imported only when this backend is used.
    # pylint: disable=g-import-not-at-top
    import grpc
    from jetstream.core.proto import jetstream_pb2, jetstream_pb2_grpc
    # pylint: enable=g-import-not-at-top
    self._grpc, self._pb2 = grpc, jetstream_pb2
    self.address = address
    self.prompt_builder = prompt_builder
    self.max_prompt_tokens = int(max_prompt_tokens)
    self.timeout_s = float(timeout_s)
    self.policy = policy
    self.max_concurrency = int(max_concurrency)
    self._sleep = sleep
    self._channel = grpc.insecure_channel(address)
    self._stub = jetstream_pb2_grpc.OrchestratorStub(self._channel)
    self.identity = f"jetstream:{address}"

  def close(self) -> None:
    self._channel.close()

  def health(self, timeout_s: float = 5.0) -> bool:
    """True when the server answers HealthCheck with is_live."""
    try:
      reply = self._stub.HealthCheck(self._pb2.HealthCheckRequest(), timeout=timeout_s)
    except self._grpc.RpcError:
      return False
    return bool(reply.is_live)

  def decode_ids(self, token_ids: Sequence[int], max_tokens: int) -> list[int]:
    """One Decode RPC (with retries): the generated token ids (stop token excluded)."""
    request = self._pb2.DecodeRequest(
        token_content=self._pb2.DecodeRequest.TokenContent(token_ids=list(token_ids)),
        max_tokens=int(max_tokens))

    def once() -> list[int]:
      out: list[int] = []
      try:
        for reply in self._stub.Decode(request, timeout=self.timeout_s):
          samples = reply.stream_content.samples
          if samples:
            out.extend(samples[0].token_ids)
      except self._grpc.RpcError as e:
        code = e.code().name if e.code() is not None else "UNKNOWN"
        message = f"Decode at {self.address}: {code}: {e.details()}"
        if code in _RETRY_CODES:
          raise RetryableError(message) from e
        raise ServerError(message + " (not retried)") from e
      return out

    kwargs = {} if self._sleep is None else {"sleep": self._sleep}
    return call_with_retries(once, self.policy, f"Decode at {self.address}", **kwargs)

  def _complete(self, chats: list[tuple[Message, ...]], max_tokens: int,
                schema: Schema | None = None) -> list[str | ServerError]:
    stop_ids = self.prompt_builder.eos_token_ids
    header = [] if schema is None else request_header.encode(schema, max_tokens)

    def one(chat: tuple[Message, ...]) -> str:
      ids = self.prompt_builder.encode_chat(chat)
      # +1: JetStream prepends a BOS slot; a schema header takes its own positions
      if len(ids) + len(header) + 1 > self.max_prompt_tokens:
        raise ServerError(f"{self.identity}: the judge prompt has {len(ids)} tokens"
                          f"{f' and a {len(header)}-position schema header' if header else ''};"
                          f" judge.jetstream.max_prompt_tokens={self.max_prompt_tokens} allows "
                          f"{self.max_prompt_tokens - 1} (raise it together with the "
                          "server's --max_prefill_length)")
      out = self.decode_ids(header + ids, max_tokens)
      if header and not out:
        raise ServerError(f"{self.identity}: no answer under schema "
                          f"{schema.get('title')!r}: the server refused it (its log says why: "
                          "not our engine, a schema it cannot compile, or max_tokens too small)")
      return self.prompt_builder.decode(answer_ids(out, stop_ids))

    return concurrent_map(one, chats, self.max_concurrency)
