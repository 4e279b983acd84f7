"""``import zoprivacy.accounting`` is cheap and never imports JAX."""

import subprocess
import sys
import textwrap

import pytest

import zoprivacy.accounting as accounting


def _run(code: str) -> str:
  out = subprocess.run(
    [sys.executable, "-c", textwrap.dedent(code)],
    capture_output=True,
    text=True,
    check=True,
  )
  return out.stdout.strip()


def test_accounting_import_does_not_import_jax_or_dp_accounting():
  out = _run("""
    import sys, time
    t = time.perf_counter()
    import zoprivacy.accounting
    dt = time.perf_counter() - t
    print(sorted(m for m in ("jax", "jaxlib", "dp_accounting", "scipy")
                 if m in sys.modules), dt)
  """)
  loaded, seconds = out.rsplit(" ", 1)
  assert loaded == "[]"
  # Measured about 0.01 s; generous for a loaded CI machine.
  assert float(seconds) < 0.3


def test_accounting_cli_path_does_not_import_jax():
  out = _run("""
    import sys
    from zoprivacy.privacy import __main__ as cli
    from zoprivacy.accounting import pld_epsilon
    from zoprivacy.privacy import calibrate_noise_multiplier, epsilon_report
    print("jax" in sys.modules)
  """)
  assert out == "False"


def test_lazy_top_level_exports_resolve():
  out = _run("""
    import sys
    import zoprivacy
    before = "jax" in sys.modules
    est = zoprivacy.dpzero
    print(before, "jax" in sys.modules, callable(est),
          sorted(zoprivacy.__all__) == sorted(dir(zoprivacy)))
  """)
  assert out == "False True True True"


def test_every_accounting_export_resolves():
  assert len(accounting.__all__) == 14
  for name in accounting.__all__:
    assert getattr(accounting, name) is not None, name


def test_a_name_that_moved_up_says_where_it_is():
  """What reads a plan moved to zoprivacy.privacy; the old name says so."""
  with pytest.raises(ImportError, match=r"zoprivacy\.privacy\.calibrate\("):
    accounting.calibrate_plan  # noqa: B018
  with pytest.raises(ImportError, match="zoprivacy.privacy.PrivacyLedger"):
    from zoprivacy.accounting import PrivacyLedger  # noqa: F401
