"""Reader for the IDX file format of (Fashion-)MNIST.

Layout (big-endian): two zero bytes, one type byte, one byte ``ndim``, then
``ndim`` uint32 dimension sizes, then the data in C order. For the MNIST family
the type byte is ``0x08`` (unsigned byte), giving a 16-byte header for the
``idx3`` image files (magic ``0x00000803``) and an 8-byte header for the
``idx1`` label files (magic ``0x00000801``).
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np

#: IDX type byte -> big-endian numpy dtype.
IDX_DTYPES = {
  0x08: np.dtype(">u1"),
  0x09: np.dtype(">i1"),
  0x0B: np.dtype(">i2"),
  0x0C: np.dtype(">i4"),
  0x0D: np.dtype(">f4"),
  0x0E: np.dtype(">f8"),
}


class IDXFormatError(ValueError):
  """The bytes are not a well-formed IDX file."""


def parse_idx(data: bytes, source: str = "<bytes>") -> np.ndarray:
  """Parses IDX bytes into a native-endian numpy array, validating the header."""
  if len(data) < 4:
    raise IDXFormatError(
      f"{source}: {len(data)} bytes, too short for an IDX header"
    )
  zero, type_code, ndim = struct.unpack(">HBB", data[:4])
  if zero != 0:
    raise IDXFormatError(
      f"{source}: magic number must start with two zero bytes, "
      f"got {data[:2].hex()}"
    )
  if type_code not in IDX_DTYPES:
    raise IDXFormatError(f"{source}: unknown IDX type byte 0x{type_code:02x}")
  if ndim == 0:
    raise IDXFormatError(f"{source}: IDX file with 0 dimensions")
  header_len = 4 + 4 * ndim
  if len(data) < header_len:
    raise IDXFormatError(
      f"{source}: truncated header ({len(data)} < {header_len} bytes)"
    )
  shape = struct.unpack(">" + "I" * ndim, data[4:header_len])
  dtype = IDX_DTYPES[type_code]
  expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
  body = len(data) - header_len
  if body != expected:
    raise IDXFormatError(
      f"{source}: header shape {shape} needs {expected} data bytes, "
      f"file has {body}"
    )
  arr = np.frombuffer(data, dtype=dtype, offset=header_len).reshape(shape)
  return arr.astype(dtype.newbyteorder("="))


def read_idx(path, expected_ndim: int | None = None) -> np.ndarray:
  """Reads a (optionally gzip-compressed) IDX file. ``.gz`` is detected from
  the gzip magic bytes, not the file name."""
  path = Path(path)
  raw = path.read_bytes()
  if raw[:2] == b"\x1f\x8b":
    raw = gzip.decompress(raw)
  arr = parse_idx(raw, str(path))
  if expected_ndim is not None and arr.ndim != expected_ndim:
    raise IDXFormatError(
      f"{path}: expected {expected_ndim} dimensions, got {arr.shape}"
    )
  return arr


def write_idx(path, array: np.ndarray, compress: bool | None = None) -> None:
  """Writes ``array`` as IDX (gzip-compressed when ``compress`` or the name ends in .gz)."""
  path = Path(path)
  array = np.asarray(array)
  for code, dt in IDX_DTYPES.items():
    if dt.newbyteorder("=") == array.dtype.newbyteorder("="):
      type_code = code
      break
  else:
    raise ValueError(f"dtype {array.dtype} has no IDX type code")
  header = struct.pack(">HBB", 0, type_code, array.ndim)
  header += struct.pack(">" + "I" * array.ndim, *array.shape)
  payload = (
    header + np.ascontiguousarray(array).astype(IDX_DTYPES[type_code]).tobytes()
  )
  if compress or (compress is None and path.suffix == ".gz"):
    payload = gzip.compress(payload, compresslevel=6)
  path.write_bytes(payload)
