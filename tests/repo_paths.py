"""Paths the tests share: the checkout's root and the fixtures (tests/ is on pytest's path)."""

import os

TESTS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(TESTS)
FIXTURES = os.path.join(TESTS, "fixtures")
