"""No file of the project refers to anything outside the repository."""

import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).parents[2]
# Paths of the workspace this project was written in, and issue numbers.
FORBIDDEN = re.compile(r"\.\./shared|/work/|\bissue #?\d+\b", re.IGNORECASE)


def test_tracked_text_files_do_not_point_outside_the_repository():
  files = subprocess.run(
    ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
  ).stdout.split()
  offenders = []
  for name in files:
    path = ROOT / name
    if path.suffix in {".png", ".bin", ".safetensors", ".npz", ".gz"}:
      continue
    try:
      text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, FileNotFoundError):
      continue
    for n, line in enumerate(text.splitlines(), 1):
      if FORBIDDEN.search(line) and "FORBIDDEN" not in line:
        offenders.append(f"{name}:{n}: {line.strip()[:100]}")
  assert not offenders, "\n".join(offenders)
