"""The header contract (DESIGN §2): what a delay-topic record means, and what goes out.

Shared by the sidecar (``delaybridge.bridge``) and the reconciliation job
(``delaybridge.spark``), so the two can never disagree about a record. Modules:

- ``names``: the header names producers set and the sidecar adds;
- ``classify``: one record in, one decision out (``classify.classify``), a consumed
  batch into the sidecar's ingest plan (``classify.ingest_batch``), and the headers a
  delivered record carries (``classify.delivered_headers``); the per-record code is
  ``classifier`` (compiled with mypyc where it can be, ``delaybridge/hotpath.py``);
- ``decisions``: what classify takes and returns (:class:`SourceRecord`,
  :class:`Schedule`, :class:`Cancel`, :class:`Rejected`) and the record format's limits;
- ``due``: the timing headers, their precedence, the base of a relative delay;
- ``timing``: parsers of integers, RFC 3339 times, durations and delay levels;
- ``rules``: what classify needs from the settings (:class:`HeaderRules`), target checks;
- ``series``: recurring schedules (cron, fixed rate, their end, their stored state);
- ``jitter``: ``delay-jitter``, a herd spread after its due time by a hash of each id;
- ``reasons``: the stable dead-letter reason codes (:class:`Reason`);
- ``dead_letters``: the headers of a dead-lettered record, and how it is shrunk.
"""

from delaybridge.contract.decisions import Cancel, Decision, Rejected, Schedule, SourceRecord
from delaybridge.contract.reasons import Reason
from delaybridge.contract.rules import HeaderRules, Rejection
from delaybridge.contract.timing import TimeFormatError

__all__ = [
    "Cancel",
    "Decision",
    "HeaderRules",
    "Reason",
    "Rejected",
    "Rejection",
    "Schedule",
    "SourceRecord",
    "TimeFormatError",
]
