"""benchmarks/readme_run.py: it reads the runner's own steps line, and its
results file keeps one row per invocation, the hand-written rest kept."""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "benchmarks"))
import readme_run  # noqa: E402


def test_the_steps_line_is_read_with_or_without_a_mesh_note():
  """The line ``experiments/run/report.py`` prints after the metrics."""
  for line in ("steps: 4000 (6.6 s)", "steps: 4000 (6.6 s) on a 2x4 mesh"):
    text = f"test accuracy: 0.91\n{line}\nprivacy: ..."
    found = readme_run.STEPS.search(text)
    assert found and found.groups() == ("4000", "6.6")


def test_rows_are_appended_under_the_history_and_the_rest_is_kept(tmp_path):
  path = tmp_path / "readme_run.md"
  readme_run.write(str(path), "| row 1 |")
  path.write_text(path.read_text() + "\n## Discussion\n\nhand-written\n")
  readme_run.write(str(path), "| row 2 |")
  text = path.read_text()
  assert text.count("| row 1 |\n| row 2 |\n") == 1
  assert text.index("## History") < text.index("| row 1 |")
  assert text.rstrip().endswith("## Discussion\n\nhand-written")


def test_runs_of_different_lengths_are_refused():
  runs = [(4000, 6.6, 20.0), (3000, 5.0, 18.0)]
  try:
    readme_run.history_row(runs, (0.1,), (0.2,))
  except RuntimeError as err:
    assert "different step counts" in str(err)
  else:
    raise AssertionError("history_row accepted runs of different lengths")
