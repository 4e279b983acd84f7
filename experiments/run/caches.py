"""The runner's caches in the user's cache folder: compiled programs and
noise calibrations, so that a second run of a config starts in seconds.

``$XDG_CACHE_HOME/zoprivacy`` (``~/.cache/zoprivacy`` by default) holds

* ``jax/``: JAX's persistent compilation cache. Every program the run
  compiles is stored (no minimum compile time), keyed by JAX on its HLO,
  the devices and the compiler options, and loaded by a later run. What a
  program holds is the computation only: the runner passes the private
  data, the noise, the batches and every key derived from the run's secret
  as arguments, never as constants (``tests/experiments/
  test_startup_caches.py`` trains on data carrying a canary value and finds
  neither it nor the secret in any stored program).
* ``calibrations/``: the noise calibration's starting points
  (:mod:`zoprivacy.privacy.calibration`'s cache: public numbers; the plan's
  epsilon is recomputed and checked on every run).

Both folders are the owner's only (mode 0700): a program loaded from the
cache runs as the user, so a folder that another user owns or may write to
is not used (the run compiles, and says why once). Environment:
``ZOPRIVACY_NO_CACHE=1`` turns both caches off;
``JAX_COMPILATION_CACHE_DIR`` and ``ZOPRIVACY_CALIBRATION_CACHE_DIR``, when
set, name the folders instead (the test suite shares its own).
"""

from __future__ import annotations

import os
import stat
import sys

NO_CACHE = "ZOPRIVACY_NO_CACHE"
CALIBRATION_VAR = "ZOPRIVACY_CALIBRATION_CACHE_DIR"
COMPILATION_VAR = "JAX_COMPILATION_CACHE_DIR"


def root() -> str | None:
  """``$XDG_CACHE_HOME/zoprivacy`` (or ``~/.cache/zoprivacy``); ``None``
  when caching is off or there is no home folder."""
  if os.environ.get(NO_CACHE):
    return None
  base = os.environ.get("XDG_CACHE_HOME") or os.path.join(
    os.path.expanduser("~"), ".cache"
  )
  if base.startswith("~"):  # no home folder to expand
    return None
  return os.path.join(base, "zoprivacy")


def owner_only_folder(path: str) -> bool:
  """Creates ``path`` (mode 0700) or checks an existing one: a real folder
  (no link) owned by this user; its mode is narrowed to 0700. ``False``,
  with a note on stderr, where it cannot be used safely."""
  try:
    os.makedirs(path, mode=0o700, exist_ok=True)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
      raise PermissionError("not a folder of this user's own")
    if stat.S_IMODE(info.st_mode) != 0o700:
      os.chmod(path, 0o700)
  except OSError as err:
    print(f"note: not caching in {path} ({err}).", file=sys.stderr)
    return False
  return True


def use_calibration_cache() -> None:
  """Stores the noise calibrations in the user's cache folder, unless a
  folder is set already or caching is off."""
  base = root()
  if base is None or os.environ.get(CALIBRATION_VAR):
    return
  folder = os.path.join(base, "calibrations")
  if owner_only_folder(folder):
    os.environ[CALIBRATION_VAR] = folder


def use_compilation_cache() -> None:
  """Points JAX's persistent compilation cache at the user's cache folder
  (every program, however quick to compile), unless a folder is set
  already or caching is off. Call before anything is compiled."""
  # Imported here: the command line sets the calibration cache before
  # JAX loads.
  import jax  # pylint: disable=g-import-not-at-top

  if not jax.config.jax_compilation_cache_dir:
    base = root()
    if base is None:
      return
    folder = os.path.join(base, "jax")
    if not owner_only_folder(folder):
      return
    jax.config.update("jax_compilation_cache_dir", folder)
  for option in (
    "jax_persistent_cache_min_compile_time_secs",
    "jax_persistent_cache_min_entry_size_bytes",
  ):
    if option.upper() not in os.environ:  # the user's setting wins
      jax.config.update(option, 0)
