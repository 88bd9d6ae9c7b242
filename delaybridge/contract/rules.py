"""What classify() needs from the settings, and the checks on a target topic.

:class:`HeaderRules` is built once from the settings (:meth:`HeaderRules.from_strings`)
and shared by the sidecar and the reconciliation job. :class:`Rejection` is how every
rule says no: a stable :class:`~delaybridge.contract.reasons.Reason` and a detail that
names the header at fault; classify() turns it into a dead letter.

Targets (DESIGN §2): a legal topic name; never one of the sidecar's own topics (delay
topics, by name or by the subscription pattern; the cancel, dead-letter and changelog
topics) nor a Kafka-internal topic (``__``-prefixed); and, when an allow-list pattern
is set, one that matches it. Anyone who may write a delay topic could otherwise make
the sidecar write any topic its identity may write (forged cancels, for one).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from delaybridge.contract.reasons import Reason
from delaybridge.contract.timing import parse_level_table

if TYPE_CHECKING:
    from delaybridge.settings import Settings

_TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
TimestampPolicy = Literal["clamp", "dead-letter", "trust"]
DEFAULT_SKEW_MS = 300_000


class Rejection(Exception):
    """A record breaks a rule of the contract; it goes to the dead-letter topic."""

    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True, slots=True, eq=False)  # hashed by identity: a cache key
class HeaderRules:
    """The settings classify() applies (see the module docstring for targets)."""

    delay_levels_ms: tuple[int, ...]
    max_delay_ms: int
    routes: dict[str, str]
    delay_topics: frozenset[str] = frozenset()
    internal_topics: frozenset[str] = frozenset()
    """The sidecar's own topics besides the delay topics (cancel, dead-letter, changelog)."""
    delay_topic_pattern: re.Pattern[str] | None = None
    target_allow: re.Pattern[str] | None = None
    max_timestamp_skew_ms: int = DEFAULT_SKEW_MS
    """How far a CreateTime stamp may be from the sidecar's clock (see ``contract/due.py``)."""
    timestamp_policy: TimestampPolicy = "clamp"
    expire_after_ms: Mapping[str, int] = field(default_factory=dict)
    """Per target topic, the default ``delay-expire-after`` (``contract/expiry.py``)."""

    @classmethod
    def from_strings(
        cls,
        delay_levels: str,
        max_delay_ms: int,
        routes: dict[str, str] | None = None,
        delay_topics: Sequence[str] = (),
        *,
        internal_topics: Sequence[str] = (),
        delay_topic_pattern: str = "",
        target_allow: str = "",
        max_timestamp_skew_ms: int = DEFAULT_SKEW_MS,
        timestamp_policy: TimestampPolicy = "clamp",
        expire_after_ms: Mapping[str, int] | None = None,
    ) -> HeaderRules:
        return cls(
            parse_level_table(delay_levels),
            max_delay_ms,
            dict(routes or {}),
            frozenset(delay_topics),
            frozenset(internal_topics),
            re.compile(delay_topic_pattern) if delay_topic_pattern else None,
            re.compile(target_allow) if target_allow else None,
            max_timestamp_skew_ms,
            timestamp_policy,
            dict(expire_after_ms or {}),
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> HeaderRules:
        """The rules a sidecar with these settings applies."""
        s = settings
        return cls.from_strings(
            s.delay_levels,
            s.store.max_delay_ms,
            s.routes,
            s.delay_topics,
            internal_topics=(s.dead_letter_topic, s.cancel_topic, s.horizon_topic),
            delay_topic_pattern=s.delay_topic_pattern,
            target_allow=s.target_topic_allow,
            max_timestamp_skew_ms=s.max_timestamp_skew_ms,
            timestamp_policy=s.timestamp_policy,
            expire_after_ms=s.delivery.expire_after_ms,
        )

    @staticmethod
    def is_topic_name(name: str) -> bool:
        """A legal Kafka topic name (1..249 of ``[A-Za-z0-9._-]``)."""
        return _TOPIC_NAME.match(name) is not None

    def check_target(self, target: str) -> None:
        """Raise :class:`Rejection` unless ``target`` may receive delivered records."""
        verdict = _target_verdict(self, target)
        if verdict is not None:
            raise Rejection(*verdict)


@functools.lru_cache(maxsize=4096)
def _target_verdict(rules: HeaderRules, target: str) -> tuple[Reason, str] | None:
    """Target names repeat across millions of records: judge each one once."""
    if _TOPIC_NAME.match(target) is None:
        return Reason.BAD_TARGET, f"{target[:300]!r} is not a legal Kafka topic name"
    if target in rules.delay_topics or (
        rules.delay_topic_pattern is not None and rules.delay_topic_pattern.match(target)
    ):
        return Reason.TARGET_IS_DELAY_TOPIC, f"target {target!r} is a delay topic"
    if target in rules.internal_topics or target.startswith("__"):
        return Reason.BAD_TARGET, f"target {target!r} is an internal topic"
    if rules.target_allow is not None and rules.target_allow.fullmatch(target) is None:
        pattern = rules.target_allow.pattern
        return Reason.BAD_TARGET, f"target {target!r} is not allowed (allow-list {pattern!r})"
    return None
