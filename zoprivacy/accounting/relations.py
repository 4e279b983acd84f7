"""The neighbouring relations: one table between their names and
dp_accounting's ``NeighboringRelation``.

Add/remove-one (DP-ZO Def. 2.1) is the default of every function in this
package; replace-one (DPZero Lemma 2.2, sensitivity ``2C/n``) must be asked
for. Configs, the command line and serialized plans name a relation
(:data:`zoprivacy.core.validation.NEIGHBORING_RELATIONS`); the plan, the
mechanism values and every accountant hold the enum. Every conversion in
the package goes through :func:`relation` and :func:`name` below.
"""

from __future__ import annotations

import dp_accounting

Relation = dp_accounting.NeighboringRelation
NeighboringLike = str | Relation
ADD_OR_REMOVE = Relation.ADD_OR_REMOVE_ONE
REPLACE_ONE = Relation.REPLACE_ONE

# The one table: canonical name -> relation (and back).
RELATIONS = {"add_or_remove": ADD_OR_REMOVE, "replace_one": REPLACE_ONE}
NAMES = {rel: rel_name for rel_name, rel in RELATIONS.items()}
# Names accepted besides the canonical ones (any case): the enum's own.
_ALIASES = {rel.name.lower(): rel for rel in NAMES}


def relation(value: NeighboringLike) -> Relation:
  """The ``dp_accounting.NeighboringRelation`` of ``value``: the enum
  itself, its canonical name (``'add_or_remove'``, ``'replace_one'``) or
  the enum's name (``'add_or_remove_one'``, any case)."""
  if isinstance(value, Relation) and value in NAMES:
    return value
  if isinstance(value, str):
    key = value.lower()
    if key in RELATIONS or key in _ALIASES:
      return RELATIONS.get(key) or _ALIASES[key]
  raise ValueError(
    f"Unknown neighboring relation {value!r}; use 'add_or_remove' or "
    "'replace_one' (or dp_accounting.NeighboringRelation)."
  )


def name(value: NeighboringLike) -> str:
  """The canonical name (``'add_or_remove'`` or ``'replace_one'``)."""
  return NAMES[relation(value)]
