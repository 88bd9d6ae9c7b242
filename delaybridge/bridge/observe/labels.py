"""Topic labels with a budget: producers name topics, so their series must be bounded."""

from __future__ import annotations

OTHER = "__other__"
DEFAULT_TOPIC_LABELS = 500


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
