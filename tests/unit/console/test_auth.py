"""Sessions, CSRF checks and the login throttle, on a fake clock."""

from __future__ import annotations

from delaybridge.console.auth import LoginThrottle, SessionStore, same_origin, token_matches


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_session_is_found_by_its_id_only_and_keeps_no_id() -> None:
    store = SessionStore(idle_s=60, max_s=3600, clock=Clock())
    session_id, session = store.create("alice", "10.0.0.1")
    assert store.get(session_id) is session
    assert store.get(session_id + "x") is None and store.get(None) is None and store.get("") is None
    assert session_id not in session.key and session_id not in session.fingerprint
    assert len(session_id) >= 43, "256 random bits, url-safe"
    other_id, other = store.create("alice", "10.0.0.1")
    assert other_id != session_id and other.csrf_token != session.csrf_token


def test_sessions_end_when_idle_when_too_old_and_at_logout() -> None:
    clock = Clock()
    store = SessionStore(idle_s=60, max_s=300, clock=clock)
    idle_id, _ = store.create("a", "r")
    clock.now += 61
    assert store.get(idle_id) is None, "idle for longer than idle_s"
    busy_id, _ = store.create("b", "r")
    for _ in range(5):
        clock.now += 50
        assert store.get(busy_id) is not None, "each request keeps it alive"
    clock.now += 51
    assert store.get(busy_id) is None, "older than max_s, however busy"
    gone_id, _ = store.create("c", "r")
    assert store.end(gone_id) is not None
    assert store.get(gone_id) is None and store.end(gone_id) is None
    assert len(store) == 0


def test_the_store_is_bounded() -> None:
    clock = Clock()
    store = SessionStore(idle_s=60, max_s=300, clock=clock, max_sessions=3)
    ids = []
    for who in "abcd":
        clock.now += 1
        ids.append(store.create(who, "r")[0])
    assert len(store) == 3
    assert store.get(ids[0]) is None, "the least recently seen made room"


def test_csrf_token_compare() -> None:
    assert token_matches("abc", "abc")
    assert not token_matches("abc", "abd")
    assert not token_matches("abc", "")
    assert not token_matches("abc", None)


def test_same_origin() -> None:
    own = "http://console.example:8081/"
    assert same_origin(own, "http://console.example:8081", None)
    assert same_origin(own, "HTTP://Console.Example:8081", None)
    assert not same_origin(own, "http://evil.example", None)
    assert not same_origin(own, "http://console.example:9999", None)
    assert not same_origin(own, "https://console.example:8081", None), "scheme counts"
    assert not same_origin(own, "null", "http://console.example:8081/x"), "Origin wins"
    assert same_origin(own, None, "http://console.example:8081/message?id=x")
    assert not same_origin(own, None, "http://evil.example/page")
    assert same_origin(own, None, None), "neither header: left to the token check"


def test_login_throttle_backs_off_per_address() -> None:
    clock = Clock()
    throttle = LoginThrottle(free=3, window_s=300, max_wait_s=60, clock=clock)
    for _ in range(3):
        assert throttle.wait_s("a") == 0
        throttle.failed("a")
    assert throttle.wait_s("a") == 2.0
    assert throttle.wait_s("b") == 0, "per address"
    clock.now += 2
    assert throttle.wait_s("a") == 0
    throttle.failed("a")
    assert throttle.wait_s("a") == 4.0, "doubles"
    for _ in range(10):
        throttle.failed("a")
    assert throttle.wait_s("a") == 60.0, "capped"
    throttle.succeeded("a")
    assert throttle.wait_s("a") == 0
    throttle.failed("c")
    clock.now += 301
    assert throttle.wait_s("c") == 0
