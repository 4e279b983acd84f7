"""Packaging metadata: the oldest-versions CI job pins setup.cfg's bounds."""

import configparser
import pathlib
import re

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = pathlib.Path(__file__).parents[2]


def _requirements():
  cfg = configparser.ConfigParser()
  cfg.read(ROOT / "setup.cfg")
  lines = cfg["options"]["install_requires"].strip().splitlines()
  return [Requirement(line.strip()) for line in lines if line.strip()]


def _lower_bound(req):
  bounds = [Version(s.version) for s in req.specifier if s.operator == ">="]
  return bounds[0] if bounds else None


def test_oldest_constraints_pin_every_lower_bound():
  text = (ROOT / ".ci" / "oldest-constraints.txt").read_text()
  pins = {
    m.group(1).lower(): Version(m.group(2))
    for m in re.finditer(r"^([\w.-]+)==([\w.]+)$", text, re.M)
  }
  for req in _requirements():
    low = _lower_bound(req)
    name = req.name.lower()
    if name in pins:
      assert pins[name] == low, (name, pins[name], low)
      assert pins[name] in req.specifier, name
  for core in ("jax", "jaxlib", "optax", "flax", "dp-accounting", "chex"):
    assert core in pins, core


def test_python_and_packages_metadata():
  cfg = configparser.ConfigParser()
  cfg.read(ROOT / "setup.cfg")
  assert cfg["options"]["python_requires"].strip() == ">=3.11"
  include = cfg["options.packages.find"]["include"].split()
  assert include == ["zoprivacy", "zoprivacy.*"]
  extras = cfg["options.extras_require"]
  assert {"tensorboard", "plots", "test"} <= set(extras)


def test_cuda_extra_pins_jax_cuda_wheels_to_the_jax_pin():
  cfg = configparser.ConfigParser()
  cfg.read(ROOT / "setup.cfg")
  jax = next(r for r in _requirements() if r.name == "jax")
  lines = cfg["options.extras_require"]["cuda12"].strip().splitlines()
  cuda = {r.name: r for r in (Requirement(x.strip()) for x in lines if x)}
  assert set(cuda) == {"jax", "jax-cuda12-plugin", "jax-cuda12-pjrt"}
  assert cuda["jax"].extras == {"cuda12"}
  assert cuda["jax-cuda12-plugin"].extras == {"with-cuda"}
  for req in cuda.values():
    assert req.specifier == jax.specifier, (req, jax)
