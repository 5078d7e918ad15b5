"""Defaults of the `judge` config section (merged into harnessrl_jax/config.py by the lead).

Backends (judge.backend):
  program   - the verifiable checks of data/checks.py only; criteria without a check stay
              unscored (masked).
  local     - a JAX model in this process (CPU default). judge.local.verdict picks how:
              "logits"   - one forward pass per cell: the assistant turn is forced to
                           '{"criteria_met":' and the verdict is the likelier of the
                           "true"/"false" next tokens (judges/logit_client.py); always a
                           verdict, raw text "logit verdict: p_true=...";
              "generate" - greedy JSON verdicts through the rollout engine, parsed.
  jetstream - a JetStream server started with `python -m harnessrl_jax.serve`.
  openai    - any OpenAI-compatible chat-completions server (vLLM, SGLang, tpu-inference).
  hybrid    - program checks where a criterion has one, `judge.llm_backend` otherwise.
"""

from __future__ import annotations

import ml_collections

BACKENDS = ("program", "local", "jetstream", "openai", "hybrid")
LOCAL_VERDICT_MODES = ("logits", "generate")
LLM_BACKENDS = ("local", "jetstream", "openai")


def judge_defaults() -> ml_collections.ConfigDict:
  """The judge section with documented defaults."""
  j = ml_collections.ConfigDict()
  j.backend = "local"
  j.llm_backend = "local"              # the LLM half of "hybrid"
  j.max_new_tokens = 128               # length of one generated verdict (explanation + JSON)
  j.parse_retries = 1                  # re-asks per unparseable cell before it is left unscored
  j.transport_retries = 3              # per request: time-outs, refused connections, 5xx, garbage
  j.backoff_s = 0.5                    # first back-off; doubles per retry
  j.backoff_max_s = 8.0
  j.timeout_s = 120.0                  # per request
  j.max_concurrency = 16               # requests in flight (openai, jetstream)
  # A step fails (before any update, so the last checkpoint stays intact) when more than
  # this share of its real cells has no verdict.
  j.max_unscored_share = 0.1
  j.cache_size = 200_000               # cached verdicts (LRU); regrading unchanged cells is free

  # Judge model for "local" (same fields as config.model; a frozen judge, not the policy).
  j.model = ml_collections.ConfigDict()
  j.model.source = "smollm2"
  j.model.path = ""
  j.model.cache_dir = ""
  j.model.dtype = "float32"
  j.model.param_dtype = "float32"
  j.model.remat = False
  j.local = ml_collections.ConfigDict()
  j.local.verdict = "logits"           # "logits" (one forward per cell) or "generate"
  j.local.batch_size = 16              # prompts per forward / greedy rollout call
  j.local.prompt_buckets = (128, 256, 512, 1024, 2048)

  j.openai = ml_collections.ConfigDict()
  j.openai.base_url = "http://127.0.0.1:8000/v1"
  j.openai.model = ""                  # required for backend "openai"
  j.openai.api_key_env = "OPENAI_API_KEY"  # name of the variable; the key never sits in config
  j.openai.temperature = 0.0

  j.jetstream = ml_collections.ConfigDict()
  j.jetstream.address = "127.0.0.1:9000"
  # Must not exceed the server's --max_prefill_length: JetStream 0.2.2 silently keeps only
  # the LAST tokens of a longer prompt, so the client refuses such prompts instead.
  j.jetstream.max_prompt_tokens = 1024
  return j
