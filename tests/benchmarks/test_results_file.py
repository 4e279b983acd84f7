"""The benchmarks' results files: one file per benchmark, one section per
accelerator, the CPU report and the hand-written discussion kept."""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "benchmarks"))
import results_file  # noqa: E402

CPU_REPORT = ["# Title", "", "intro", "", "## Setting A", "", "| a |", ""]
GPU_REPORT = ["# Title", "", "gpu intro", "", "## Setting A", "", "| g |"]
GPU = "## On NVIDIA H100 80GB HBM3 (gpu)"


def _write(monkeypatch, path, lines, heading):
  monkeypatch.setattr(results_file, "device_heading", lambda: heading)
  results_file.write_report(str(path), lines)
  return path.read_text()


def test_gpu_run_adds_its_section_and_a_cpu_rerun_keeps_it(
  monkeypatch, tmp_path
):
  path = tmp_path / "bench.md"
  _write(monkeypatch, path, CPU_REPORT, None)
  path.write_text(path.read_text() + "\n## Discussion\n\nhand-written\n")
  text = _write(monkeypatch, path, GPU_REPORT, GPU)
  # The CPU report and the discussion are untouched; the GPU report is one
  # section, its own headings one level down, its title dropped.
  assert text.startswith("# Title\n\nintro\n\n## Setting A\n\n| a |\n")
  assert "## Discussion\n\nhand-written\n" in text
  gpu = text[text.index(GPU) :]
  assert gpu.splitlines() == [
    GPU,
    "",
    "gpu intro",
    "",
    "### Setting A",
    "",
    "| g |",
  ]
  assert "# Title" not in gpu
  # A second GPU run replaces its section instead of adding one.
  again = _write(monkeypatch, path, GPU_REPORT[:3] + ["rerun"], GPU)
  assert again.count(GPU) == 1 and "rerun" in again and "| g |" not in again
  # A CPU rerun rewrites the CPU report and keeps the other sections.
  new_cpu = ["# Title", "", "new intro", "", "## Setting A", "", "| b |"]
  text = _write(monkeypatch, path, new_cpu, None)
  assert text.startswith("# Title\n\nnew intro\n\n## Setting A\n\n| b |\n")
  assert "| a |" not in text and "intro\n\n## Setting A\n\n| a |" not in text
  assert text.count(GPU) == 1 and "rerun" in text
  assert text.count("## Discussion") == 1 and "hand-written" in text


def test_replace_section_keeps_the_section_in_place(tmp_path):
  path = tmp_path / "bench.md"
  path.write_text(
    "# T\n\n## One\n\n1\n\n## Exact noise (old)\n\nold\n\n## Three\n\n3\n"
  )
  results_file.replace_section(
    str(path), "## Exact noise", ["## Exact noise (new)", "", "new"]
  )
  text = path.read_text()
  assert text.index("## One") < text.index("new") < text.index("## Three")
  assert "old" not in text and text.count("## Exact noise") == 1
