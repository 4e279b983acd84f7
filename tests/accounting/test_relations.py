"""One table between the neighbouring relations' names and
dp_accounting's ``NeighboringRelation``, read by every conversion."""

import dp_accounting
import pytest

from zoprivacy.accounting import events, relations
from zoprivacy.core import validation
from zoprivacy.mechanisms import values

Rel = dp_accounting.NeighboringRelation


def test_the_table_names_exactly_the_configurable_relations():
  assert tuple(relations.RELATIONS) == validation.NEIGHBORING_RELATIONS
  assert set(relations.NAMES) == {Rel.ADD_OR_REMOVE_ONE, Rel.REPLACE_ONE}


@pytest.mark.parametrize(
  "value,expected",
  [
    ("add_or_remove", Rel.ADD_OR_REMOVE_ONE),
    ("ADD_OR_REMOVE_ONE", Rel.ADD_OR_REMOVE_ONE),
    ("add_or_remove_one", Rel.ADD_OR_REMOVE_ONE),
    ("replace_one", Rel.REPLACE_ONE),
    (Rel.REPLACE_ONE, Rel.REPLACE_ONE),
  ],
)
def test_names_aliases_and_the_enum_convert(value, expected):
  assert relations.relation(value) is expected
  assert relations.relation(relations.name(value)) is expected


@pytest.mark.parametrize("value", ["swap", "", None, 1, Rel.REPLACE_SPECIAL])
def test_anything_else_is_refused(value):
  with pytest.raises(ValueError, match="Unknown neighboring relation"):
    relations.relation(value)


def test_the_mechanism_values_and_the_events_read_the_same_table():

  assert values.relation is relations.relation
  assert events.neighboring_relation is relations.relation
  assert values.RELATION_NAMES is relations.NAMES
