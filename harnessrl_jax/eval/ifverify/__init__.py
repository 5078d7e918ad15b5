"""Instruction-following verdicts for IFBench (and, later, IFEval) ids in two modes.

  official  reproduces the official verifiers' verdicts, their quirks included, so that a
            reported IFBench number can be put beside a published one (allenai/IFBench's
            strict and loose evaluation). Needs NLTK's English Punkt and stop-word data.
  strict    our corrected semantics (data/checks.py through the IFBench importer), the ones
            training rewards use.

Modules: text.py (the official verifiers' text units: NLTK sentences, \\w+ words, stop
words); official_*.py (one checker per instruction id, by id family); registry.py (the
official evaluation's strict and loose protocol over a row, both modes);
harnessrl_jax/eval/ifbench_verify.py is the command line.
"""
