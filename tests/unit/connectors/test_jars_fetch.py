"""fetch(): downloads over HTTP from a local server, verification, caching, errors.

A ThreadingHTTPServer on 127.0.0.1 serves a Maven-layout directory, so no test
here needs the network.
"""

from __future__ import annotations

import hashlib
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from delaybridge.errors import IntegrityError
from delaybridge.jars import Artifact, FetchError, fetch


@dataclass
class Repo:
    """A local Maven repository over HTTP that counts requests per path."""

    root: Path
    url: str
    requests: Counter[str] = field(default_factory=Counter)
    fail_next: list[int] = field(default_factory=list)  # status codes to answer first

    def publish(self, group: str, artifact: str, version: str, payload: bytes) -> Artifact:
        a = Artifact(group, artifact, version, hashlib.sha256(payload).hexdigest())
        path = self.root / a.url("").lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(payload)
        return a


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Repo]:
    root = tmp_path / "repo"
    root.mkdir()
    state: dict[str, Repo] = {}

    class Handler(SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(root), **kwargs)

        def do_GET(self) -> None:
            served = state["repo"]
            served.requests[self.path] += 1
            if served.fail_next:
                self.send_error(served.fail_next.pop(0))
                return
            super().do_GET()

        def log_message(self, format: str, *args: Any) -> None:
            del format, args  # keep pytest output clean

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state["repo"] = Repo(root, f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state["repo"]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def write_lock(path: Path, artifacts: list[Artifact]) -> Path:
    path.write_text("".join(f"{a.coordinate} {a.sha256}\n" for a in artifacts))
    return path


def test_fetch_downloads_in_lock_order_and_then_uses_the_cache(repo: Repo, tmp_path: Path) -> None:
    second = repo.publish("org.example", "second", "2.0", b"second jar " * 1000)
    first = repo.publish("org.example", "first", "1.0", b"first jar")
    lock = write_lock(tmp_path / "x.lock", [second, first])
    dest = tmp_path / "jars"

    classpath = fetch(lock, dest, progress=False, repo=repo.url)

    assert classpath == [dest / "second-2.0.jar", dest / "first-1.0.jar"]
    assert classpath[1].read_bytes() == b"first jar"
    assert sorted(p.name for p in dest.iterdir()) == ["first-1.0.jar", "second-2.0.jar"]
    assert sum(repo.requests.values()) == 2

    assert fetch(lock, dest, progress=False, repo=repo.url) == classpath
    assert sum(repo.requests.values()) == 2, "verified cached jars must not be downloaded again"


def test_checksum_mismatch_deletes_download_and_names_both_hashes(
    repo: Repo, tmp_path: Path
) -> None:
    good = repo.publish("org.example", "lib", "1.0", b"the real bytes")
    pinned = Artifact(good.group, good.artifact, good.version, "f" * 64)
    lock = write_lock(tmp_path / "x.lock", [pinned])
    dest = tmp_path / "jars"

    with pytest.raises(IntegrityError) as caught:
        fetch(lock, dest, progress=False, repo=repo.url)

    message = str(caught.value)
    assert "org.example:lib:1.0" in message
    assert good.sha256 in message and "f" * 64 in message
    assert str(lock) in message
    assert list(dest.iterdir()) == [], "neither the jar nor a partial file may remain"


def test_damaged_cache_entry_is_downloaded_again(repo: Repo, tmp_path: Path) -> None:
    a = repo.publish("org.example", "lib", "1.0", b"good")
    lock = write_lock(tmp_path / "x.lock", [a])
    dest = tmp_path / "jars"
    dest.mkdir()
    (dest / a.filename).write_bytes(b"truncated")

    fetch(lock, dest, progress=False, repo=repo.url)

    assert (dest / a.filename).read_bytes() == b"good"


def test_missing_artifact_fails_at_once_naming_it(repo: Repo, tmp_path: Path) -> None:
    absent = Artifact("org.example", "absent", "9.9", "e" * 64)
    lock = write_lock(tmp_path / "x.lock", [absent])

    with pytest.raises(FetchError, match=r"org\.example:absent:9\.9: GET .* HTTP 404"):
        fetch(lock, tmp_path / "jars", progress=False, repo=repo.url)
    assert sum(repo.requests.values()) == 1, "a 404 is not worth retrying"


def test_server_errors_are_retried(repo: Repo, tmp_path: Path) -> None:
    a = repo.publish("org.example", "lib", "1.0", b"eventually")
    repo.fail_next.append(503)
    lock = write_lock(tmp_path / "x.lock", [a])

    [jar] = fetch(lock, tmp_path / "jars", progress=False, repo=repo.url, attempts=2)

    assert jar.read_bytes() == b"eventually"
    assert sum(repo.requests.values()) == 2


def test_unreachable_repository_fails_after_all_attempts(tmp_path: Path) -> None:
    a = Artifact("org.example", "lib", "1.0", "e" * 64)
    lock = write_lock(tmp_path / "x.lock", [a])
    # Port 9 (discard) on loopback: nothing listens, the connection is refused at once.
    with pytest.raises(FetchError, match=r"org\.example:lib:1\.0: GET .* failed after 1 attempts"):
        fetch(lock, tmp_path / "jars", progress=False, repo="http://127.0.0.1:9", attempts=1)
