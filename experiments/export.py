r"""Exports a finished run's fine-tuned causal LM as a Hugging Face folder.

::

  python -m experiments.export --workdir WORKDIR --out OUT \
      [--lora merge|adapter] [--dtype float32|bfloat16|float16]

Reads the run's configuration and ``params_sha256`` from
``WORKDIR/result.json``, restores its last checkpoint (the final
parameters, checked against that digest), and writes ``OUT`` with
:mod:`zoprivacy.models.hf_export`: ``config.json``, ``model.safetensors``
(sharded past 5 GB) and ``tokenizer.json``, in Hugging Face's layout (a
model read from GGUF included). LoRA adapters are merged into the weights
(``--lora merge``, the default), or written in PEFT's format (``--lora
adapter``: ``adapter_config.json`` and ``adapter_model.safetensors``, whose
base is the run's ``model_dir`` when that is a Hugging Face folder, else
the base model written to ``OUT/base``). ``--dtype``: the weights' dtype
(float32, the default, is what the run computed with). ``OUT/export.json``
records the run it came from and its ``(epsilon, delta)``.

The tasks whose model has a Hugging Face format export: the OPT, Llama and
Mistral tasks (``*_opt``) and ``vader_llm`` (SmolLM2 from GGUF), fine-tuned
fully or with LoRA; anything else is refused in one paragraph.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import ml_collections

from experiments import tasks
from experiments.run import errors
from experiments.tuning import trials
from zoprivacy.models import hf_export

LORA_MODES = ("merge", "adapter")


def _finished_run(workdir: Path) -> dict:
  path = workdir / "result.json"
  if not path.is_file():
    raise ValueError(
      f"{workdir} holds no finished run (no result.json): export reads a "
      "run's final parameters; let the run finish (rerun its command to "
      "resume it) or give the workdir of a finished run."
    )
  checkpoints = workdir / "checkpoints"
  if not checkpoints.is_dir() or not any(
    p.name.isdigit() for p in checkpoints.iterdir()
  ):
    raise ValueError(
      f"{workdir} holds no checkpoint ({checkpoints}): the final parameters"
      " are read from the run's last checkpoint, which the runner writes at"
      " the end of every run with a workdir."
    )
  return json.loads(path.read_text())


def _run_config(result: dict, workdir: Path) -> ml_collections.ConfigDict:
  """The run's config, with the noise multiplier it ran with (its
  checkpoint's template, without calibrating again)."""
  config = ml_collections.ConfigDict(result["config"])
  config.workdir = str(workdir)
  if result.get("noise_multiplier") is not None:
    config.privacy.noise_multiplier = result["noise_multiplier"]
    config.privacy.target_epsilon = None
  return config


def _exportable(config, result: dict):
  task = tasks.get_task(config)
  if task.export is None:
    peft = (
      f" fine-tuned with peft={config.peft!r}" if config.get("peft") else ""
    )
    raise ValueError(
      f"the {config.dataset} task's model{peft} has no Hugging Face format:"
      " export writes the causal LMs of the *_opt tasks and vader_llm, "
      "fine-tuned fully or with LoRA (prefix tuning's keys and values are "
      "no weights of a model)."
    )
  params, frozen = trials.final_params(config, task, result["params_sha256"])
  return task.export(params, frozen)


def _check_out(out: Path) -> None:
  if out.exists() and (not out.is_dir() or any(out.iterdir())):
    raise ValueError(
      f"{out} exists and is not an empty folder; export writes a new "
      "folder (choose another --out, or remove it)."
    )


def _write_model(out: Path, model, params, dtype: str) -> list[Path]:
  written = hf_export.save_model(out, params, model.config, dtype=dtype)
  if model.tokenizer is not None:
    written.append(hf_export.save_tokenizer(out, model.tokenizer))
  return written


def export(workdir, out, *, lora="merge", dtype="float32") -> dict:
  """Writes the run in ``workdir`` to ``out`` (module docstring); returns
  what ``OUT/export.json`` records, with the files written."""
  if lora not in LORA_MODES or dtype not in hf_export.DTYPES:
    raise ValueError(
      f"--lora {lora!r} / --dtype {dtype!r}: use --lora one of {LORA_MODES}"
      f" and --dtype one of {tuple(hf_export.DTYPES)}."
    )
  workdir, out = Path(workdir).expanduser(), Path(out).expanduser()
  result = _finished_run(workdir)
  _check_out(out)
  config = _run_config(result, workdir)
  model = _exportable(config, result)
  if lora == "merge" or model.adapters is None:
    written = _write_model(out, model, model.params, dtype)
  else:
    base = Path(config.get("model_dir") or "").expanduser()
    if not (base / "config.json").is_file():  # GGUF: a base folder written
      base = out / "base"
      written = _write_model(base, model, model.base, dtype)
    else:
      written = []
    written += hf_export.save_adapter(
      out, model.adapters, model.config, base_model=base.resolve(), dtype=dtype
    )
  record = {
    "workdir": str(workdir.resolve()),
    "estimator": result.get("estimator"),
    "dataset": result.get("dataset"),
    "num_steps": result.get("num_steps"),
    "epsilon": result.get("epsilon"),
    "delta": result.get("delta"),
    "params_sha256": result["params_sha256"],
    "lora": lora if model.adapters is not None else None,
    "dtype": dtype,
    "files": sorted(str(p.relative_to(out)) for p in written),
  }
  (out / "export.json").write_text(json.dumps(record, indent=2) + "\n")
  return record


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(
    prog="python -m experiments.export", description=__doc__.split("\n")[0]
  )
  parser.add_argument("--workdir", required=True, help="a finished run's")
  parser.add_argument("--out", required=True, help="a new folder")
  parser.add_argument("--lora", default="merge", choices=LORA_MODES)
  parser.add_argument(
    "--dtype", default="float32", choices=tuple(hf_export.DTYPES)
  )
  parser.add_argument("--debug", action="store_true", help="tracebacks")
  args = parser.parse_args(argv)
  try:
    record = export(args.workdir, args.out, lora=args.lora, dtype=args.dtype)
  except errors.user_errors() as e:
    if args.debug:
      raise
    print(errors.one_paragraph(e), file=sys.stderr)
    return 2
  print(json.dumps(record, indent=2))
  return 0


if __name__ == "__main__":
  sys.exit(main())
