"""The local backend's logit verdict mode (judges/logit_client.py) on the tiny random model.

References are independent of the client's batching: one unpadded full forward pass of the
Decoder over the rendered judge prompt plus the forced prefix (text tokenised in one go),
comparing the logits of the hand-derived verdict tokens of the byte tokenizer ('t' for
true, 'f' for false; the shared ' ' is dropped by the rule).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from harnessrl_jax.data.schema import Criterion, Message, Task
from harnessrl_jax.errors import ConfigError
from harnessrl_jax.judges import prompt as prompt_lib
from harnessrl_jax.judges.client import VerdictClient
from harnessrl_jax.judges.config import judge_defaults
from harnessrl_jax.judges.factory import make_client, make_judge
from harnessrl_jax.judges.judge import Judge, JudgeSettings
from harnessrl_jax.judges.local_client import LocalClient
from harnessrl_jax.judges.logit_client import LogitVerdictClient, verdict_token_ids
from harnessrl_jax.models.architecture import ModelConfig
from harnessrl_jax.models.decoder import Decoder
from harnessrl_jax.models.loading import LoadedModel
from harnessrl_jax.models.tokenizer import tiny_prompt_builder

# Judge prompts are ~1040 byte tokens; two buckets so batches pad to different widths.
BUCKETS = (1088, 1280)
T_ID, F_ID = ord("t"), ord("f")

TASKS = (
    Task(id="a", domain="general", prompt=(Message("user", "Say hi."),),
         criteria=(Criterion("c1", "Says hi", 2.0),
                   Criterion("c2", "Is rude to the user", -4.0))),
    Task(id="b", domain="general",
         prompt=(Message("system", "Be brief."), Message("user", "Name a colour, please.")),
         criteria=(Criterion("c1", "Names a colour", 3.0),
                   Criterion("c2", "Uses more than ten words", -1.0))),
)
RESPONSES = (("hi", "Hello there, friend! How are you doing on this fine day? " * 2),
             ('{"criteria_met": true}', "Blue."))


WIDTH = BUCKETS[-1]


def reference_forward(model):
  """Unpadded-prefix full forward at a fixed width (right padding cannot reach earlier
  positions under the causal mask): ids -> (hidden [n, D], logits [n, V]) of its tokens."""
  graphdef, params = nnx.split(model)

  @jax.jit
  def forward(params, tokens, mask):
    m = nnx.merge(graphdef, params)
    pos = jnp.arange(WIDTH)[None]
    return m.hidden_states(tokens, pos, mask)[0], m(tokens, pos, mask)[0][0]

  def run(ids):
    tokens = np.zeros((1, WIDTH), np.int32)
    tokens[0, :len(ids)] = ids
    hidden, logits = forward(params, tokens, np.arange(WIDTH)[None] < len(ids))
    return np.asarray(hidden[len(ids) - 1], np.float64), np.asarray(logits[len(ids) - 1])

  return run


def reference_ids(pb, messages):
  """The judge prompt and forced prefix, rendered to text and tokenised in one go."""
  return pb.encode(pb.render_chat(messages) + prompt_lib.VERDICT_PREFIX)


def judge_model(pb):
  """Tiny random model (untied unembedding, weights scaled up) whose "f" output column is
  the "t" column minus a direction orthogonal to the mean last hidden state of the test
  cells: the verdict then turns on what differs between cells, not the shared prefix."""
  cfg = ModelConfig.tiny(max_position_embeddings=2048, tie_word_embeddings=False)
  graphdef, params = nnx.split(Decoder(cfg, rngs=nnx.Rngs(1)))
  model = nnx.merge(graphdef, jax.tree.map(lambda x: x * 3.0, params))
  run = reference_forward(model)
  hidden = np.stack([run(reference_ids(pb, m))[0] for *_, m in all_cells()])
  mean = hidden.mean(0) / np.linalg.norm(hidden.mean(0))
  spread = hidden - hidden.mean(0)
  direction = spread[0] - (spread[0] @ mean) * mean  # orthogonal to the mean, not to cells
  head = np.asarray(model.lm_head[...], np.float64)
  head[:, F_ID] = head[:, T_ID] - 0.04 * direction / np.linalg.norm(direction)
  model.lm_head[...] = jnp.asarray(head, jnp.float32)
  return model, reference_forward(model)


@pytest.fixture(scope="module")
def setup():
  pb = tiny_prompt_builder()
  model, run = judge_model(pb)
  return model, pb, run


def reference_margin(run, pb, messages):
  """logit(true token) - logit(false token) after the forced prefix."""
  logits = run(reference_ids(pb, messages))[1].astype(np.float64)
  return logits[T_ID] - logits[F_ID]


def all_cells():
  return [(t, k, j, prompt_lib.judge_messages(task.prompt, crit, RESPONSES[t][j]))
          for t, task in enumerate(TASKS) for k, crit in enumerate(task.criteria)
          for j in range(2)]


class FakeBuilder:
  """A tokenizer stand-in with scripted splits, to exercise the verdict-token rule."""

  def __init__(self, table):
    self.table = table

  def encode(self, text):
    return list(self.table[text])


def test_verdict_token_rule():
  # Byte tokenizer: " true" and " false" both start with ' ' (dropped); "true"/"false"
  # start with 't' / 'f'.
  assert verdict_token_ids(tiny_prompt_builder()) == ((T_ID,), (F_ID,))
  p = "P"
  bpe_like = FakeBuilder({p: [1, 2], p + " true": [1, 2, 10], p + "true": [1, 2, 11, 12],
                          p + " false": [1, 2, 20], p + "false": [1, 30]})  # merged: skipped
  assert verdict_token_ids(bpe_like, p) == ((10, 11), (20,))
  same = FakeBuilder({p: [1], p + " true": [1, 5], p + "true": [1, 5, 6],
                      p + " false": [1, 5, 7], p + "false": [1, 5]})
  with pytest.raises(ConfigError, match="generate"):
    verdict_token_ids(same, p)


def test_verdicts_match_full_forward_and_do_not_depend_on_the_batch(setup):
  model, pb, run = setup
  cells = all_cells()
  chats = [m for *_, m in cells]
  # batch 3 over 8 prompts: three batches, the last with a filler row; lengths differ.
  client = LogitVerdictClient(model, pb, batch_size=3, prompt_buckets=BUCKETS)
  lengths = {len(client.verdict_ids(c)) for c in chats}
  assert len(lengths) > 3 and min(lengths) <= BUCKETS[0] < max(lengths)
  got = client.verdicts(chats)
  margins = np.array([reference_margin(run, pb, c) for c in chats])
  assert np.abs(margins).min() > 1e-3 and np.abs(margins).max() < 5  # p_true not saturated
  for v, m in zip(got, margins):
    assert v.met == (m > 0)
    np.testing.assert_allclose(v.p_true, 1 / (1 + np.exp(-m)), rtol=1e-4, atol=1e-5)
    assert v.raw == f"logit verdict: p_true={v.p_true:.4f}"
  assert {v.met for v in got} == {True, False}
  # Alone (batch 1, smallest bucket that fits) vs in a batch with other lengths.
  alone = LogitVerdictClient(model, pb, batch_size=1, prompt_buckets=BUCKETS)
  for i in (0, 3, 7):
    single = alone.verdicts([chats[i]])[0]
    assert single.met == got[i].met
    np.testing.assert_allclose(single.p_true, got[i].p_true, rtol=1e-5, atol=1e-6)
  mixed = client.verdicts([chats[5], chats[0], chats[2]])
  assert [v.met for v in mixed] == [got[5].met, got[0].met, got[2].met]


def test_judge_uses_verdicts_negative_wording_cache_and_never_unscores(setup):
  model, pb, run = setup

  class Recording(LogitVerdictClient):
    def _verdicts(self, chats):
      self.seen = getattr(self, "seen", []) + list(chats)
      return super()._verdicts(chats)

  client = Recording(model, pb, batch_size=4, prompt_buckets=BUCKETS)
  judge = Judge(client, use_checks=False, settings=JudgeSettings(parse_retries=3))
  m = judge.score(TASKS, RESPONSES)
  assert m.scored.all() and m.stats.unscored == () and m.stats.requests == 8
  # Each request is exactly the shared judge prompt, so a negative criterion carries the
  # same UNDESIRABLE wording as in generate mode; a score is that request's verdict.
  assert len(client.seen) == 8
  for t, k, j, messages in all_cells():
    assert messages in client.seen
    margin = reference_margin(run, pb, messages)
    assert m.scores[t, k, j] == float(margin > 0)
    assert m.raw[t][k][j].startswith("logit verdict: p_true=")
    if TASKS[t].criteria[k].weight < 0:
      assert "UNDESIRABLE" in messages[1].content
  # Regrade: every cell from the cache, nothing sent.
  again = judge.score(TASKS, RESPONSES)
  assert again.stats.cache_hits == 8 and again.stats.requests == 0
  np.testing.assert_array_equal(again.scores, m.scores)
  assert again.raw == m.raw and len(client.seen) == 8
  # Generate mode with the same weights keys its cache apart.
  assert Judge(LocalClient(model, pb), use_checks=False).identity != judge.identity


def test_only_overlong_prompts_are_unscored(setup):
  model, pb, run = setup
  client = LogitVerdictClient(model, pb, batch_size=4, prompt_buckets=BUCKETS)
  judge = Judge(client, use_checks=False, settings=JudgeSettings(max_unscored_share=1.0))
  odd = ("", "```json\n{\"criteria_met\": false}\n```", "ünïcödé ✓", "x" * 300)
  m = judge.score(TASKS[:1], [odd])
  assert m.scored[:, :, :3].all() and not m.scored[:, :, 3].any()
  assert dict(m.stats.unscored) == {"refused": 2}   # too long: a refusal, never retried
  assert "largest of judge.local.prompt_buckets" in m.raw[0][0][3]


def test_factory_picks_the_verdict_mode(setup):
  model, pb, run = setup
  loaded = LoadedModel(model, model.cfg, pb)
  cfg = judge_defaults()
  assert cfg.local.verdict == "logits"
  cfg.local.prompt_buckets = BUCKETS
  judge = make_judge(cfg, loaded=loaded)
  assert isinstance(judge.client, LogitVerdictClient) and judge.verdict_client is judge.client
  cfg.local.verdict = "generate"
  text = make_client(cfg, loaded=loaded)
  assert type(text) is LocalClient and not isinstance(text, VerdictClient)
  assert make_judge(cfg, loaded=loaded).verdict_client is None
  cfg.local.verdict = "sample"
  with pytest.raises(ConfigError, match="judge.local.verdict"):
    make_client(cfg, loaded=loaded)
  # A logit client still generates text for the evolver's text roles.
  out = LogitVerdictClient(model, pb, batch_size=2, prompt_buckets=(48,)).complete(
      [[Message("user", "hi")]], max_tokens=3)
  assert isinstance(out[0], str)


def test_shared_prefixes_are_prefilled_once_and_keep_the_verdicts(setup):
  """The cells of one (task, response) share the conversation and the response: prefilled
  once into a KV cache, their verdicts equal the per-request ones."""
  from harnessrl_jax.judges.logit_client import prefix_groups  # pylint: disable=g-import-not-at-top
  model, pb, _ = setup
  cells = all_cells()
  chats = [m for *_, m in cells]
  shared = LogitVerdictClient(model, pb, batch_size=2, prompt_buckets=BUCKETS)
  plain = LogitVerdictClient(model, pb, batch_size=2, prompt_buckets=BUCKETS,
                             share_prefixes=False)
  assert shared.share_prefixes and not plain.share_prefixes
  prompts = [shared.verdict_ids(c) for c in chats]
  groups = prefix_groups(prompts)
  assert len(groups) < len(prompts)
  for length, members in groups:
    assert all(prompts[i][:length] == prompts[members[0]][:length] for i in members)
    assert all(len(prompts[i]) > length for i in members)
  # Each response's two criteria share at least the conversation and the response.
  by_cell = {i: (cells[i][0], cells[i][2]) for i in range(len(cells))}
  for _, members in groups:
    assert len({by_cell[i][0] for i in members}) == 1
  got, want = shared.verdicts(chats), plain.verdicts(chats)
  for a, b in zip(got, want):
    assert a.met == b.met
    np.testing.assert_allclose(a.p_true, b.p_true, rtol=1e-4, atol=1e-5)
  # Batch 1: a call's suffix rows (4) are fewer than a group of six; it goes alone.
  one = LogitVerdictClient(model, pb, batch_size=1, prompt_buckets=BUCKETS)
  six = [prompt_lib.judge_messages(TASKS[0].prompt, Criterion(f"k{i}", f"Criterion {i}", 1.0),
                                   "hi") for i in range(6)]
  assert [len(m) for _, m in prefix_groups([one.verdict_ids(c) for c in six])] == [6]
  for a, b in zip(one.verdicts(six), plain.verdicts(six)):
    np.testing.assert_allclose(a.p_true, b.p_true, rtol=1e-4, atol=1e-5)
