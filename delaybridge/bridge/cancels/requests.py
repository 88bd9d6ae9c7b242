"""The cancel topic's records: a cancel (or a replace) as one sidecar tells every other.

A cancel is a record in *some* delay-topic partition, but the message it cancels may sit
in another partition owned by another sidecar. So the sidecar that consumes a cancel
re-publishes it to the cancel topic as a :class:`CancelRequest` (JSON, keyed by the id),
and every sidecar reads the whole cancel topic and applies it to every store it holds
(the protocol: ``ledger.py``; the reading: ``feed.py``). Anything may be written to the
cancel topic, by mistake or on purpose, so :meth:`CancelRequest.decode` refuses, with a
reason, whatever is not a cancel this sidecar can apply.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from delaybridge.timerlog.replace_waits import Origin

MAX_ID_BYTES = 0xFFFF  # the store's cancel log holds ids up to this length
MAX_TOPIC_CHARS = 249  # Kafka's limit on topic names
Parsed = tuple[Origin | None, int | None]
"""An origin ``topic/partition/offset`` as ((topic, partition), offset)."""


class UnreadableCancel(ValueError):
    """A record on the cancel topic that is not a cancel this sidecar can apply."""


@dataclass(frozen=True, slots=True)
class CancelRequest:
    """A cancel as carried on the cancel topic (JSON; key = the id).

    ``sent_ms`` is the cancel record's timestamp in the delay topic: the cancel applies
    to messages with its id sent before it (DESIGN §2, ``timerlog.Cancel``), ties in one
    delay-topic partition broken by the offset in ``origin``; None (the admin API,
    records of an older sidecar) cancels whatever is pending with the id, and no more.
    """

    id: str
    target_topic: str | None
    origin: str
    sent_ms: int | None = None
    replace: bool = False
    """Made by a schedule with an explicit id: replaces (``ledger.py``)."""
    prefix: bool = False
    """A cancel by id prefix (``delay-cancel-prefix``, the admin API's bulk cancel):
    ``id`` is the prefix (``prefix.py``)."""

    def encode(self) -> bytes:
        doc: dict[str, object] = {
            "id": self.id,
            "target_topic": self.target_topic,
            "origin": self.origin,
        }
        if self.sent_ms is not None:
            doc["sent_ms"] = self.sent_ms
        if self.replace:
            doc["replace"] = True
        if self.prefix:
            doc["prefix"] = True
        return orjson.dumps(doc)

    @classmethod
    def decode(cls, raw: bytes) -> CancelRequest:
        """Parse and check one cancel-topic value; UnreadableCancel says what is wrong.

        Anything may be written to the cancel topic (by mistake or on purpose), and every
        replica reads all of it, so nothing here may raise anything else.
        """
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise UnreadableCancel(f"not JSON: {exc}") from exc
        if not isinstance(doc, dict):
            raise UnreadableCancel(f"expected a JSON object, got {type(doc).__name__}")
        id, topic, origin, sent = (doc.get(k) for k in ("id", "target_topic", "origin", "sent_ms"))
        if not isinstance(id, str) or not id:
            raise UnreadableCancel("'id' must be a non-empty string")
        if len(id.encode()) > MAX_ID_BYTES:
            raise UnreadableCancel(f"'id' is longer than {MAX_ID_BYTES} bytes")
        if topic is not None and (not isinstance(topic, str) or len(topic) > MAX_TOPIC_CHARS):
            raise UnreadableCancel(
                f"'target_topic' must be a topic name (at most {MAX_TOPIC_CHARS}) or null"
            )
        if not isinstance(origin, str | None):
            raise UnreadableCancel("'origin' must be a string")
        if sent is not None and (not isinstance(sent, int) or isinstance(sent, bool)):
            raise UnreadableCancel("'sent_ms' must be an integer")
        replace = doc.get("replace", False)
        if not isinstance(replace, bool):
            raise UnreadableCancel("'replace' must be true or false")
        if replace and (topic is None or sent is None):
            raise UnreadableCancel("a replace needs 'target_topic' and 'sent_ms'")
        prefix = doc.get("prefix", False)
        if not isinstance(prefix, bool) or (prefix and replace):
            raise UnreadableCancel("'prefix' must be true or false, and not with 'replace'")
        return cls(id, topic, origin or "", sent, replace, prefix)


def parse_origin(origin: str) -> Parsed:
    """``topic/partition/offset`` as ((topic, partition), offset); None where unreadable
    (no partition: the cancel rule, it wins a tie)."""
    o_topic, o_partition, o_offset = [*origin.rsplit("/", 2), "", ""][:3]
    if not o_partition.isdigit():
        return None, None
    return (o_topic, int(o_partition)), int(o_offset) if o_offset.isdigit() else None
