"""`PromptBuilder`: the single place where chat messages become token ids (and ids text).

It wraps a `transformers` tokenizer and renders messages with the tokenizer's own chat
template. `tiny_tokenizer()` builds a byte-level tokenizer in memory (256 byte tokens and 8
special tokens, ChatML template) so tests and the "tiny" model need no files; it is a
`ByteTokenizer`, which offers the part of a transformers tokenizer's API this package uses
without importing transformers.
`GEMMA3_CHAT_TEMPLATE` is Gemma 3's turn format, for Gemma tokenizers that ship without a
template (the Gemma 3 270M base GGUF).

`transformers` / `tokenizers` are imported inside the functions that build tokenizers:
importing transformers takes seconds, and holders of a ready PromptBuilder never pay it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from harnessrl_jax.errors import ConfigError

ROLES = ("system", "user", "assistant")
# End-of-turn markers of the supported chat formats: generation stops at any that exist.
_END_OF_TURN = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>",
                "<end_of_turn>")

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
# Gemma 3's turn format, as in Google's Gemma 3 tokenizers: <bos>, a system message folded
# into the first user turn, "assistant" spoken as "model". The BOS is part of the text because
# encode() adds no special tokens (and Gemma degrades badly without it).
GEMMA3_CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% if messages[0]['role'] == 'system' %}"
    "{% set prefix = messages[0]['content'] + '\n\n' %}{% set turns = messages[1:] %}"
    "{% else %}{% set prefix = '' %}{% set turns = messages %}{% endif %}"
    "{% for message in turns %}"
    "{{ '<start_of_turn>' + ('model' if message['role'] == 'assistant' else message['role'])"
    " + '\n' + (prefix if loop.first else '') + message['content'] | trim"
    " + '<end_of_turn>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}")
TINY_SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>",
                       "<|reserved_0|>", "<|reserved_1|>", "<|reserved_2|>", "<|reserved_3|>")


def _message_dict(m: Any, i: int) -> dict[str, str]:
  if isinstance(m, Mapping):
    role, content = m.get("role"), m.get("content")
  else:
    role, content = getattr(m, "role", None), getattr(m, "content", None)
  if role not in ROLES or not isinstance(content, str):
    raise ConfigError(f"chat message {i}: role={role!r}, content type "
                      f"{type(content).__name__}; expected role in {ROLES} and str content")
  return {"role": role, "content": content}


class NoChatTemplateError(ConfigError):
  """The tokenizer has no chat template (a base model's files)."""


class PromptBuilder:
  """Chat messages -> token ids via the tokenizer's chat template; ids -> text."""

  def __init__(self, tokenizer, eos_token_ids: Sequence[int] = ()):
    if not getattr(tokenizer, "chat_template", None):
      raise NoChatTemplateError(
          f"tokenizer {getattr(tokenizer, 'name_or_path', '')!r} has no chat template; add one "
          "to tokenizer_config.json / chat_template.jinja")
    self.tokenizer = tokenizer
    eos = [int(i) for i in eos_token_ids]
    if tokenizer.eos_token_id is not None:
      eos.append(int(tokenizer.eos_token_id))
    vocab = tokenizer.get_vocab()
    eos += [vocab[t] for t in _END_OF_TURN if t in vocab]
    self.eos_token_ids: tuple[int, ...] = tuple(dict.fromkeys(eos))
    if not self.eos_token_ids:
      raise ConfigError("tokenizer has no end-of-sequence token; generation could not stop")
    pad = tokenizer.pad_token_id
    self.pad_id: int = int(pad) if pad is not None else self.eos_token_ids[0]

  @classmethod
  def from_pretrained(cls, path: str | os.PathLike, eos_token_ids: Sequence[int] = (),
                      default_chat_template: str | None = None):
    """Loads tokenizer files (tokenizer.json, tokenizer_config.json, ...) from a directory;
    `default_chat_template` is used when they carry no template (a base model's files)."""
    from transformers import AutoTokenizer
    try:
      tok = AutoTokenizer.from_pretrained(os.fspath(path))
    except (OSError, ValueError) as e:
      raise ConfigError(f"{path}: cannot load a tokenizer ({e})") from e
    if default_chat_template and not tok.chat_template:
      tok.chat_template = default_chat_template
    return cls(tok, eos_token_ids)

  @property
  def vocab_size(self) -> int:
    return len(self.tokenizer)

  def render_chat(self, messages: Sequence[Any], add_generation_prompt: bool = True) -> str:
    """The prompt text the chat template produces (what `encode_chat` tokenises)."""
    msgs = [_message_dict(m, i) for i, m in enumerate(messages)]
    return self.tokenizer.apply_chat_template(msgs, tokenize=False,
                                              add_generation_prompt=add_generation_prompt)

  def encode_chat(self, messages: Sequence[Any], add_generation_prompt: bool = True) -> list[int]:
    """Token ids of the rendered chat; the template supplies every special token."""
    return self.encode(self.render_chat(messages, add_generation_prompt))

  def encode(self, text: str) -> list[int]:
    """Token ids of plain text, no special tokens added."""
    return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

  def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
    return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)

  def save(self, path: str | os.PathLike) -> None:
    self.tokenizer.save_pretrained(os.fspath(path))


def _byte_to_unicode() -> dict[int, str]:
  """The GPT-2 byte-level alphabet: printable bytes map to themselves, others to 256+n."""
  keep = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
  out, n = {}, 0
  for b in range(256):
    if b in keep:
      out[b] = chr(b)
    else:
      out[b] = chr(256 + n)
      n += 1
  return out


class ByteTokenizer:
  """The tiny byte-level tokenizer on the `tokenizers` library alone: importing transformers
  takes 1-2 s, which every run of the tiny model (most of the test suite's driver runs) paid
  for a tokenizer with no files. It offers what `PromptBuilder`, the schema compiler and
  `save_hf_dir` use of a transformers tokenizer, with the same results (tested against
  `to_transformers()`); `save_pretrained` writes transformers' files.

  Ids 0-255 are bytes, 256-263 special tokens; no merges, so any text round-trips and every
  id decodes. ChatML chat template; eos <|im_end|> (258), pad <|pad|> (259).
  """

  name_or_path = "tiny"
  eos_token = "<|im_end|>"
  pad_token = "<|pad|>"

  def __init__(self):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    vocab = {ch: b for b, ch in _byte_to_unicode().items()}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    core.add_special_tokens(list(TINY_SPECIAL_TOKENS))
    self.core = core
    self.chat_template: str | None = CHATML_TEMPLATE
    self.eos_token_id = core.token_to_id(self.eos_token)
    self.pad_token_id = core.token_to_id(self.pad_token)
    self.added_tokens_decoder = {core.token_to_id(t): t for t in TINY_SPECIAL_TOKENS}
    self.all_special_ids = [self.eos_token_id, self.pad_token_id]

  def __len__(self) -> int:
    return self.core.get_vocab_size(with_added_tokens=True)

  def get_vocab(self) -> dict[str, int]:
    return self.core.get_vocab(with_added_tokens=True)

  def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
    return {"input_ids": self.core.encode(text, add_special_tokens=add_special_tokens).ids}

  def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
    return self.core.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)

  def apply_chat_template(self, messages: Sequence[Mapping[str, str]], tokenize: bool = False,
                          add_generation_prompt: bool = False) -> str:
    """The rendered template, as transformers renders it (a sandbox with trimmed blocks)."""
    if tokenize:
      raise ValueError("ByteTokenizer renders text only: tokenize=False")
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(self.chat_template).render(
        messages=list(messages), add_generation_prompt=add_generation_prompt,
        eos_token=self.eos_token, pad_token=self.pad_token)

  def to_transformers(self):
    """The same tokenizer as a transformers `PreTrainedTokenizerFast`."""
    from transformers import PreTrainedTokenizerFast
    return PreTrainedTokenizerFast(tokenizer_object=self.core, eos_token=self.eos_token,
                                   pad_token=self.pad_token, chat_template=self.chat_template)

  def save_pretrained(self, path: str | os.PathLike) -> None:
    self.to_transformers().save_pretrained(os.fspath(path))


def tiny_tokenizer() -> ByteTokenizer:
  """The tiny model's tokenizer (see `ByteTokenizer`)."""
  return ByteTokenizer()


def tiny_prompt_builder() -> PromptBuilder:
  return PromptBuilder(tiny_tokenizer())
