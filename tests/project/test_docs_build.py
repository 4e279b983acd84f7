"""The Sphinx site builds with warnings as errors and renders every module."""

import os
import pathlib
import pkgutil
import subprocess
import sys

import pytest

import zoprivacy

ROOT = pathlib.Path(__file__).parents[2]
pytest.importorskip("sphinx")
pytest.importorskip("myst_parser")


def _modules():
  names = {"zoprivacy"}
  for info in pkgutil.walk_packages(zoprivacy.__path__, "zoprivacy."):
    if not info.name.split(".")[-1].startswith("_"):
      names.add(info.name)
  return names


# Slow (20-24 s on 2 cores); CI runs it in its slow step.
@pytest.mark.slow
def test_sphinx_build_has_no_warnings_and_renders_every_module(tmp_path):
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  out = subprocess.run(
    [sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", "docs",
     str(tmp_path)],
    cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
  )  # fmt: skip
  assert out.returncode == 0, out.stderr[-3000:]
  rendered = {p.stem for p in (tmp_path / "_autosummary").glob("*.html")}
  assert _modules() <= rendered, sorted(_modules() - rendered)
  mechanisms = (
    tmp_path / "_autosummary" / "zoprivacy.mechanisms.noise.html"
  ).read_text()
  assert "GaussianDpEvent" in mechanisms and "contribution bound" in mechanisms
  for guide in (
    "conventions",
    "accounting",
    "extending",
    "hidden_state",
    "api",
  ):
    assert (tmp_path / f"{guide}.html").exists(), guide
