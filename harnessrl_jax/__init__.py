"""harnessrl_jax: rubric-reward GRPO whose training harness co-evolves with the policy."""

__version__ = "0.1.0"
