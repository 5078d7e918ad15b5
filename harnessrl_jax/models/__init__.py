"""Flax (NNX) decoder models, Hugging Face / GGUF weight I/O, tokenisation and sharding."""
