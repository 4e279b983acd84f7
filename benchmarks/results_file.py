"""One results file per benchmark, with one section per accelerator.

A run on the CPU rewrites the file and keeps the sections it does not
produce: ``## Discussion`` (hand-written) and every ``## On <device>``
section. A run on an accelerator (GPU or TPU) leaves the CPU report as it
is and replaces only its own ``## On <device kind>`` section, so the same
script run on a lent device adds its numbers to the same file, each
section naming the machine it ran on.
"""

from __future__ import annotations

import os

import jax

KEPT = ("## Discussion", "## On ")


def device_heading() -> str | None:
  """``"## On <device kind>"`` on an accelerator; ``None`` on the CPU."""
  device = jax.devices()[0]
  if device.platform == "cpu":
    return None
  return f"## On {device.device_kind} ({device.platform})"


def split_sections(text: str) -> tuple[list[str], dict[str, list[str]]]:
  """``(head, {heading: lines})`` of a Markdown file's ``## `` sections."""
  head, sections, current = [], {}, None
  for line in text.splitlines():
    if line.startswith("## "):
      current = line
      sections[current] = [line]
    elif current is None:
      head.append(line)
    else:
      sections[current].append(line)
  return head, sections


def _demoted(lines: list[str], heading: str) -> list[str]:
  """A whole report as one section: its title becomes ``heading`` and every
  ``## `` heading inside it a ``### `` one."""
  out = [heading]
  for line in lines:
    if line.startswith("# "):
      continue
    out.append("#" + line if line.startswith("## ") else line)
  return out


def replace_section(path: str, heading: str, lines: list[str]) -> None:
  """Writes ``lines`` in place of the first section of ``path`` whose
  heading starts with ``heading`` (appended if none does), leaving every
  other section of the file as it is."""
  old = open(path).read() if os.path.exists(path) else ""
  head, sections = split_sections(old)
  old_heading = next((h for h in sections if h.startswith(heading)), None)
  sections = {
    (heading if h == old_heading else h): s for h, s in sections.items()
  }
  sections[heading] = lines + [""]
  body = head + [l for s in sections.values() for l in s]
  with open(path, "w") as f:
    f.write("\n".join(body).rstrip() + "\n")


def write_report(path: str, lines: list[str]) -> None:
  """Writes a run's report: the whole file on the CPU (keeping the
  :data:`KEPT` sections), its device's section on an accelerator."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  heading = device_heading()
  if heading is not None:
    replace_section(path, heading, _demoted(lines, heading))
    return
  old = open(path).read() if os.path.exists(path) else ""
  _, sections = split_sections(old)
  kept = [
    l for h, s in sections.items() if h.startswith(KEPT) for l in s + [""]
  ]
  with open(path, "w") as f:
    f.write("\n".join(lines + [""] + kept).rstrip() + "\n")
