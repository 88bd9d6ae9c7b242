"""The tally: every count declared as the counter it is exported as, drained per refresh."""

from __future__ import annotations

from collections import Counter
from dataclasses import fields

from delaybridge.bridge.observe.tally import Tally, declarations
from delaybridge.contract.reasons import Reason


def test_drain_hands_over_the_counts_and_starts_again_from_zero() -> None:
    tally = Tally()
    tally.enqueued["delay"] += 3
    tally.dead_lettered[Reason.BAD_TIME] += 1
    tally.cancelled += 2
    tally.lateness_ms.append(40)
    taken = tally.drain()
    assert taken.enqueued == Counter({"delay": 3})
    assert taken.dead_lettered == Counter({Reason.BAD_TIME: 1})
    assert (taken.cancelled, taken.lateness_ms) == (2, [40])
    assert tally == Tally()
    tally.enqueued["delay"] += 1  # the drained counts are not shared with the tally
    assert taken.enqueued == Counter({"delay": 3})


def test_every_count_is_declared_as_a_counter() -> None:
    # A field the loop counts into without a declaration would never reach /metrics;
    # the lateness values are the histogram's, not a counter's.
    declared = {name for name, _ in declarations()}
    assert declared == {f.name for f in fields(Tally)} - {"lateness_ms"}


def test_a_labelled_count_is_a_counter_by_label_value_and_the_others_ints() -> None:
    fresh = Tally()
    for name, declaration in declarations():
        held = getattr(fresh, name)
        if declaration.label is None:
            assert held == 0 and isinstance(held, int), name
        else:
            assert held == Counter() and isinstance(held, Counter), name


def test_metric_names_are_unique_and_carry_no_suffix() -> None:
    names = [declaration.name for _, declaration in declarations()]
    assert len(names) == len(set(names))
    assert all(n.startswith("delaybridge_") and not n.endswith("_total") for n in names)
