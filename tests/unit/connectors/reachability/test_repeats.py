"""The repeat limiter: the first line of a kind passes, the rest are counted for 30 s."""

from __future__ import annotations

from delaybridge.connectors.reachability.repeats import MAX_KINDS, RepeatLimiter, kind_of


def test_one_line_per_kind_per_window_and_the_count_on_the_next() -> None:
    limiter = RepeatLimiter(window_s=30)
    assert limiter.admit("refused", 0.0).passes
    assert not any(limiter.admit("refused", t / 10).passes for t in range(1, 300))
    again = limiter.admit("refused", 30.0)
    assert again.passes and again.suppressed == 299 and again.over_s == 30.0
    assert again.suffix() == " (299 more like it in 30 s)"
    assert limiter.admit("refused", 60.0).suffix() == ""  # nothing came in between


def test_kinds_are_independent() -> None:
    limiter = RepeatLimiter(window_s=30)
    assert limiter.admit("a", 0.0).passes
    assert limiter.admit("b", 1.0).passes
    assert not limiter.admit("a", 2.0).passes


def test_hush_stands_for_a_line_that_passed() -> None:
    limiter = RepeatLimiter(window_s=30)
    limiter.hush("refused", 10.0)
    assert not limiter.admit("refused", 39.0).passes
    assert limiter.admit("refused", 40.0).suppressed == 1


def test_numbers_that_change_per_attempt_are_blanked_addresses_kept() -> None:
    one = kind_of(
        "_TRANSPORT",
        "10.0.0.5:9092/1: Connect to ipv4#10.0.0.5:9092 failed: Connection refused "
        "(after 12ms in state CONNECT, 3 identical error(s) suppressed)",
    )
    two = kind_of(
        "_TRANSPORT",
        "10.0.0.5:9092/1: Connect to ipv4#10.0.0.5:9092 failed: Connection refused "
        "(after 0ms in state CONNECT, 17 identical error(s) suppressed)",
    )
    other_broker = kind_of(
        "_TRANSPORT",
        "10.0.0.6:9092/2: Connect to ipv4#10.0.0.6:9092 failed: Connection refused "
        "(after 0ms in state CONNECT)",
    )
    assert one == two != other_broker
    assert kind_of("1/3 brokers are down") == kind_of("2/3 brokers are down")
    assert kind_of("[rdkafka#consumer-2]") == kind_of("[rdkafka#consumer-7]")
    assert "10.0.0.5:9092" in one[1]


def test_idle_kinds_are_forgotten_once_there_are_many() -> None:
    limiter = RepeatLimiter(window_s=30)
    for i in range(MAX_KINDS):
        limiter.admit(f"kind {i}", 0.0)
    limiter.admit("kind 0", 1.0)  # counted: kept
    limiter.admit("one more", 100.0)
    assert len(limiter) == 2
    assert limiter.admit("kind 0", 101.0).suppressed == 1
