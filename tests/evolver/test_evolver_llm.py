"""The LLM backends of the attributor and proposer: strict parsing, re-ask, fallback, and
that a rejected candidate's measurement reaches the proposer's prompt."""

import json

import jax
import pytest

from harnessrl_jax.evolver import (Critic, Evolver, LLMAttributor, RuleAttributor,
                                   make_attributor, make_proposer)
from harnessrl_jax.evolver.llm_json import ParseError, parse_object
from harnessrl_jax.evolver.proposer import ROUTE_OPS
from harnessrl_jax.errors import HarnessError
from harnessrl_jax.harness import from_tasks
from tests.evolver import test_evolver_fixtures as fx


def spurious_group():
  h = from_tasks([fx.SPURIOUS])
  return h, fx.record([fx.SPURIOUS], h, [fx.SPURIOUS_RESPONSES], fx.judge())[0]


def answer(labels):
  return json.dumps({"labels": labels})


GOOD = [{"criterion_id": "c1", "label": "agree", "confidence": 0.8, "evidence": [],
         "wording": ""},
        {"criterion_id": "c2", "label": "spurious", "confidence": 0.9,
         "evidence": ["All requirements met."], "wording": "covers everything"}]


def test_parse_object_is_strict():
  assert parse_object('```json\n{"a": 1}\n```') == {"a": 1}
  for bad in ('Sure! {"a": 1}', '{"a": 1} {"b": 2}', "[1]", '{"a": NaN}', ""):
    with pytest.raises(ParseError):
      parse_object(bad)


def test_llm_attributor_reads_a_valid_answer():
  h, g = spurious_group()
  client = fx.ScriptedClient([answer(GOOD)])
  att, cost = LLMAttributor(client, fx.settings()).attribute(g, h, None, 0)
  assert att.backend == "llm" and cost.llm_requests == 1
  lab = att.label_of("c2")
  assert (lab.label, lab.confidence, lab.evidence, lab.wording) == (
      "spurious", 0.9, ("All requirements met.",), "covers everything")
  assert lab.route == "rubric"
  # The prompt carried the rubric, the satisfaction counts and the responses.
  user = client.prompts[0][-1].content
  assert "States that the answer covers everything" in user and "All requirements met." in user


@pytest.mark.parametrize("mutate,why", [
    (lambda ls: ls[:1], "labels missing"),
    (lambda ls: [ls[0], {**ls[1], "label": "broken"}], "label"),
    (lambda ls: [ls[0], {**ls[1], "confidence": 1.5}], "confidence"),
    (lambda ls: [ls[0], {**ls[1], "evidence": ["Never said."]}], "not quoted verbatim"),
    (lambda ls: [ls[0], {**ls[1], "wording": "not in the text"}], "wording"),
    (lambda ls: [ls[0], {**ls[1], "extra": 1}], "keys"),
])
def test_llm_attributor_reasks_once_then_falls_back_to_rule(mutate, why):
  h, g = spurious_group()
  bad = answer(mutate([dict(x) for x in GOOD]))
  # First answer bad, re-ask gives a good one: used.
  client = fx.ScriptedClient([bad, answer(GOOD)])
  att, cost = LLMAttributor(client, fx.settings()).attribute(g, h, None, 0)
  assert att.backend == "llm" and att.label_of("c2").label == "spurious"
  assert cost.llm_requests == 2
  assert why.split()[0] in client.prompts[1][-1].content
  # Both bad: the rule backend answers, and the note says why.
  client = fx.ScriptedClient([bad, bad])
  att, cost = LLMAttributor(client, fx.settings(), fallback=RuleAttributor(fx.settings())
                            ).attribute(g, h, None, 0)
  assert cost.llm_requests == 2
  assert att.backend == "rule(fallback)" and why.split()[0] in att.note
  assert att.label_of("c2").label == "spurious"
  # Without a fallback the task stays unlabelled.
  att, _ = LLMAttributor(fx.ScriptedClient([bad, bad]), fx.settings()).attribute(g, h, None,
                                                                                  0)
  assert att.labels == () and "unparseable" in att.note


def proposal(ops, kind="x"):
  return json.dumps({"kind": kind, "rationale": "because", "ops": ops})


def test_llm_proposer_in_the_loop_gets_the_measurement_back():
  h, g = spurious_group()
  cfg = fx.settings(attributor="llm", proposer="llm")
  reweight = {"op": "rubric_reweight", "task_id": "t-spur", "criterion_id": "c2",
              "weight": 1.0}
  rewrite = {"op": "rubric_rewrite", "task_id": "t-spur", "criterion_id": "c2",
             "text": 'States that the answer covers everything the question asks; '
                     '"All requirements met." and "All requirements have been met." '
                     'do not count.'}
  attr_client = fx.ScriptedClient([answer(GOOD)])
  prop_client = fx.ScriptedClient([
      proposal([{"op": "sampling_level_down", "task_id": "t-spur"}]),  # wrong route
      proposal([reweight]),                                             # re-ask: ok
      proposal([rewrite], "rewrite"),
  ])
  ev = Evolver(cfg, attributor=make_attributor(cfg, client=attr_client),
               proposer=make_proposer(cfg, client=prop_client),
               critic=Critic(fx.judge(), cfg))
  res = ev.step(h, [g], step=0, key=jax.random.key(0))
  recs = [r for r in res.records if r.route == "rubric"]
  assert [r.verdict for r in recs] == ["rejected", "accepted"]
  # Reweight 40 -> 1 point: rewards (.98, .98, .02, .02) keep the mean 0.5; sign fails.
  assert recs[0].measurement.delta == pytest.approx(0.0, abs=1e-3)
  assert "not allowed for route rubric" in prop_client.prompts[1][-1].content
  # The second proposal request carried the first candidate and its measurement.
  state = prop_client.prompts[2][-1].content
  assert '"rejected_candidates"' in state and "(i) sign" in state
  assert recs[1].measurement.delta == pytest.approx(20.0, abs=1e-4)
  assert res.accounting["attributor"]["llm_requests"] == 1
  assert res.accounting["proposer"]["llm_requests"] == 3


def test_llm_roles_need_a_client():
  with pytest.raises(HarnessError, match="needs a TextClient"):
    make_attributor(fx.settings(attributor="llm"))
  with pytest.raises(HarnessError, match="needs a TextClient"):
    make_proposer(fx.settings(proposer="llm"))


class DownClient(fx.TextClient):
  identity = "down"

  def _complete(self, chats, max_tokens):
    from harnessrl_jax.judges.client import ServerError  # pylint: disable=g-import-not-at-top
    return [ServerError("refused after 4 attempts") for _ in chats]


def test_a_failed_server_is_a_fallback_and_a_noop_not_a_crash():
  h, g = spurious_group()
  cfg = fx.settings(attributor="llm", proposer="llm")
  ev = Evolver(cfg, attributor=make_attributor(cfg, client=DownClient()),
               proposer=make_proposer(cfg, client=DownClient()),
               critic=Critic(fx.judge(), cfg))
  res = ev.step(h, [g], step=0, key=jax.random.key(0))
  att = res.attributions[0]
  assert att.backend == "rule(fallback)" and "server error" in att.note
  assert [r.verdict for r in res.records] == ["noop"]
  assert res.harness is h and res.history == ()


def test_llm_attributor_through_a_local_model_client():
  """The real TextClient path: the local client decodes under the attribution schema, so a
  random tiny model's answer passes strict parsing when max_tokens can hold one; when it
  cannot, the request fails (no answer is cut short) and the rule backend labels the task."""
  from harnessrl_jax.judges.config import judge_defaults  # pylint: disable=g-import-not-at-top
  from harnessrl_jax.judges.factory import make_client  # pylint: disable=g-import-not-at-top
  jc = judge_defaults()
  jc.model.source = "tiny"
  jc.local.batch_size = 1
  jc.local.prompt_buckets = (4096,)
  client = make_client(jc, "local")
  h, g = spurious_group()
  cfg = fx.settings(attributor="llm", llm_max_tokens=4)
  att, cost = make_attributor(cfg, client=client).attribute(g, h, None, 0)
  assert att.backend == "rule(fallback)" and "needs at least" in att.note
  assert cost.llm_requests == 1
  assert att.label_of("c2").label == "spurious"
  cfg = fx.settings(attributor="llm", llm_max_tokens=240)
  att, cost = make_attributor(cfg, client=client).attribute(g, h, None, 0)
  assert att.backend == "llm" and cost.llm_requests == 1, att.note
  assert [lab.criterion_id for lab in att.labels] == ["c1", "c2"]


class SchemaClient(fx.ScriptedClient):
  """A ScriptedClient whose server would decode under a JSON schema: records each one."""

  takes_schema = True

  def __init__(self, answers):
    super().__init__(answers)
    self.schemas = []

  def _complete(self, chats, max_tokens, schema=None):
    self.schemas.append(schema)
    return super()._complete(chats, max_tokens)


def test_llm_roles_send_their_answer_schemas():
  """Structured outputs: the attributor's schema closes the criterion ids and labels, the
  proposer's the route's op kinds; a client that cannot take a schema gets none."""
  h, g = spurious_group()
  client = SchemaClient([answer(GOOD)])
  LLMAttributor(client, fx.settings()).attribute(g, h, None, 0)
  (att,) = client.schemas
  items = att["properties"]["labels"]["prefixItems"]
  assert [i["properties"]["criterion_id"]["const"] for i in items] == ["c1", "c2"]
  assert all(set(i["required"]) == set(GOOD[1]) for i in items) and att["required"] == ["labels"]
  assert "spurious" in items[0]["properties"]["label"]["enum"]
  assert "All requirements met." in items[1]["properties"]["evidence"]["items"]["enum"]
  cfg = fx.settings(proposer="llm")
  prop = SchemaClient([proposal([])] * 20)   # no ops: a noop per request
  ev = Evolver(cfg, attributor=make_attributor(cfg), proposer=make_proposer(cfg, client=prop),
               critic=Critic(fx.judge(), cfg))
  ev.step(h, [g], step=0, key=jax.random.key(0))
  assert prop.schemas
  for s in prop.schemas:
    assert set(s["required"]) == {"kind", "rationale", "ops"}
    kinds = {o["properties"]["op"]["const"] for o in s["properties"]["ops"]["items"]["anyOf"]}
    assert any(kinds <= set(allowed) for allowed in ROUTE_OPS.values())
    for o in s["properties"]["ops"]["items"]["anyOf"]:
      assert o["properties"]["task_id"]["const"] == g.task_id
  plain = fx.ScriptedClient([answer(GOOD)])   # no takes_schema: _complete(chats, max_tokens)
  assert LLMAttributor(plain, fx.settings()).attribute(g, h, None, 0)[0].backend == "llm"


def test_clients_of_regular_grammar_engines_get_no_open_check_objects():
  """Our engines compile schemas to a DFA, which cannot hold an open check object: the
  proposer neither offers nor documents checks to them; other schema clients get both."""
  h, g = spurious_group()
  cfg = fx.settings(proposer="llm")
  prompts = {}
  for regular in (False, True):
    prop = SchemaClient([proposal([])] * 20)
    prop.regular_schemas = regular
    ev = Evolver(cfg, attributor=make_attributor(cfg), proposer=make_proposer(cfg, client=prop),
                 critic=Critic(fx.judge(), cfg))
    ev.step(h, [g], step=0, key=jax.random.key(0))
    rubric = [s for s in prop.schemas if any(
        o["properties"]["op"]["const"] == "rubric_create"
        for o in s["properties"]["ops"]["items"]["anyOf"])]
    assert rubric
    has_check = ["check" in o["properties"] for s in rubric
                 for o in s["properties"]["ops"]["items"]["anyOf"]
                 if o["properties"]["op"]["const"] in ("rubric_create", "rubric_rewrite")]
    assert all(has_check) if not regular else not any(has_check)
    prompts[regular] = " ".join(m.content for chat in prop.prompts for m in chat)
  assert "Check kinds" in prompts[False] and "Check kinds" not in prompts[True]
