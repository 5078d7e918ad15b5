"""Serving our Flax decoders with JetStream: the Engine, the server entry and its shims."""
