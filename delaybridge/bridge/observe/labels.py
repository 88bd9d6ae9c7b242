"""A metric's labels, and the budget that keeps topic labels bounded.

A :class:`Label` says what a metric's label may hold: a closed set of values exported
at 0 from the first scrape (dashboards and alerts then see every value before it
happens), or topic names. Topic names come from producers' headers, so a stray
producer could create series without bound: every topic label goes through a
:class:`LabelBudget` that passes the first ``limit`` distinct values and folds the rest
into :data:`OTHER`.
"""

from __future__ import annotations

from dataclasses import dataclass

OTHER = "__other__"
DEFAULT_TOPIC_LABELS = 500


@dataclass(frozen=True, slots=True)
class Label:
    """One label of a metric: its name, and how its values are bounded."""

    name: str
    values: tuple[str, ...] = ()
    """Values exported at 0 from the first scrape (the rest appear when first counted)."""
    topic: bool = False
    """Its values are topic names: folded through the label's :class:`LabelBudget`."""


DELAY_TOPIC = Label("delay_topic", topic=True)
TARGET_TOPIC = Label("target_topic", topic=True)


class LabelBudget:
    """Pass through the first ``limit`` distinct label values, fold the rest into OTHER."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._seen: set[str] = set()

    def __call__(self, value: str) -> str:
        if value in self._seen:
            return value
        if len(self._seen) >= self._limit:
            return OTHER
        self._seen.add(value)
        return value
