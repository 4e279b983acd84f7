"""How a model runs a stack of layers so that ghost clipping sees inside it.

The causal LMs declare their decoder layers as one ``nn.scan`` over
parameters stacked on a leading layer axis. A layer inside a lifted
transform is invisible to :mod:`~zoprivacy.first_order.layer_capture`: its
parameters are slices of the stacks, its calls run in the scan's own trace,
and nothing but the scan's carry comes out of it. A model that runs its
stack through :func:`scan` hands the stack to the active capture when there
is one (ghost clipping's traces of the loss): the capture runs the same
layers as a ``lax.scan`` over the layer index whose body slices each stack,
taps every supported layer call and returns the calls' inputs, layer by
layer (:meth:`~zoprivacy.first_order.layer_capture.Interceptor.scan_stack`).
Outside a capture :func:`scan` returns ``None`` and the model runs its own
scan, so its compiled program is unchanged.
"""

from __future__ import annotations

import contextlib
import contextvars

_CAPTURE = contextvars.ContextVar("zoprivacy_layer_stack", default=None)


def scan(stacked, step, x, xs, slice_layer):
  """``(x, ys)`` of the active capture's scan of the stack, or ``None``.

  ``stacked``: the tree of ``[L, ...]`` parameter stacks, the very arrays
  the model's parameters hold; ``step(layer_params, x, xs_l) -> (x,
  ys_l)``: one layer; ``xs``: ``None`` or a tree of ``[L, ...]`` arrays
  scanned with the layers (a key/value cache); ``slice_layer(stack,
  index)``: layer ``index`` of one stack (16-bit stacks sliced as bits,
  :mod:`zoprivacy.models.narrow_slices`).
  """
  capture = _CAPTURE.get()
  if capture is None:
    return None
  return capture(stacked, step, x, xs, slice_layer)


@contextlib.contextmanager
def capturing(capture):
  """Within the block, :func:`scan` hands stacks to ``capture`` (a
  callable with :func:`scan`'s arguments, returning ``(x, ys)`` or
  ``None`` to let the model run its own scan)."""
  token = _CAPTURE.set(capture)
  try:
    yield
  finally:
    _CAPTURE.reset(token)
