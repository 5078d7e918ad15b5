"""The one exception type for errors a user can cause (bad data, bad config, bad input)."""


class HarnessError(Exception):
  """An error the user can fix; the message says what and where."""


class DataError(HarnessError):
  """Malformed task data. Carries every problem found, each as `FILE:LINE: field: message`."""

  def __init__(self, problems):
    self.problems = tuple(problems)
    super().__init__("\n".join(self.problems))


class ConfigError(HarnessError):
  """A configuration that cannot run."""


def refuse(problems) -> None:
  """Raises one ConfigError listing `problems` (strings), one a line; returns if none."""
  problems = list(problems)
  if problems:
    raise ConfigError("\n".join(problems))
