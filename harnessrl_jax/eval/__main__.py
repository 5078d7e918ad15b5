"""`python -m harnessrl_jax.eval --run=RUN_DIR ...`: the flags and main are in eval/evaluate.py."""

from harnessrl_jax import cli
from harnessrl_jax.eval import evaluate

if __name__ == "__main__":
  _DEFINED = evaluate.define_flags()
  cli.run(lambda argv: evaluate.main(argv, _DEFINED))
