"""Judges: `Judge.score(tasks, responses, criteria) -> ScoreMatrix` over programmatic checks
and LLM backends (local JAX model, JetStream server, OpenAI-compatible server, or a pool of
servers: pool.py), plus the `TextClient` interface the evolver's text roles share; the local
backend's logit mode is a `VerdictClient` (one forward pass per cell, logit_client.py). See
judge.py and factory.py."""
