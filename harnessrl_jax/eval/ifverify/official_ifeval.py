"""Official-mode checkers of the 25 IFEval ids (google-research instruction_following_eval,
also in IFBench's registry): each reproduces the verdict of IFEval's check_following for
that id (quirks included; each quirk named in a comment and listed in docs/evaluation.md)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from harnessrl_jax.eval.ifverify import text  # pylint: disable=unused-import

# id -> checker(response, kwargs without nulls, prompt) -> followed
CHECKERS: dict[str, Callable[[str, Mapping[str, Any], str], bool]] = {}
