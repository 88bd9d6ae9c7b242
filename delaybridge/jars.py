"""Pinned Maven jars: a tiny lock format and a verifying downloader.

The Kafka broker, the Kafka container image and the Spark connector all run on
jars from Maven Central. None of them trusts the network: each jar is named in a
*lock file* together with its sha256, and :func:`fetch` refuses a byte that does
not match. A lock line reads::

    org.apache.kafka:kafka-clients:4.3.1 52501b7b...0b36
    group:artifact:version:classifier     <sha256>       # classifier optional

Blank lines and ``#`` comments are ignored. Lines are kept in order: the order is
the classpath order. Lock files are written by ``scripts/lock-jars``, which asks
Maven for the runtime dependency closure (see docs/local-kafka.md). Downloads
are atomic, so an interrupted fetch never leaves half a jar under its final
name and several processes may fill one cache at once.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from delaybridge.download_progress import FetchProgress
from delaybridge.durable import replacing
from delaybridge.errors import ConfigError, DelayBridgeError, IntegrityError

MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
"""Where jars come from unless ``DELAYBRIDGE_MAVEN_REPO`` names a mirror."""

_SHA256 = re.compile(r"[0-9a-f]{64}")
_log = logging.getLogger(__name__)


class FetchError(DelayBridgeError):
    """A jar could not be downloaded (HTTP error, timeouts after all retries)."""


@dataclass(frozen=True)
class Artifact:
    """One pinned jar: Maven coordinates plus the sha256 of its bytes."""

    group: str
    artifact: str
    version: str
    sha256: str
    classifier: str = ""

    @property
    def coordinate(self) -> str:
        """``group:artifact:version[:classifier]``, as written in the lock."""
        parts = (self.group, self.artifact, self.version, self.classifier)
        return ":".join(p for p in parts if p)

    @property
    def filename(self) -> str:
        """Maven's file name, e.g. ``kafka-clients-4.3.1.jar``."""
        suffix = f"-{self.classifier}" if self.classifier else ""
        return f"{self.artifact}-{self.version}{suffix}.jar"

    def url(self, repo: str = MAVEN_CENTRAL) -> str:
        """The jar's address in a Maven repository laid out like Central."""
        group_path = self.group.replace(".", "/")
        return f"{repo.rstrip('/')}/{group_path}/{self.artifact}/{self.version}/{self.filename}"


def read_lock(path: Path) -> list[Artifact]:
    """Parse a lock file; errors name the file and the line number."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read jar lock: {exc.strerror}") from exc
    artifacts: list[Artifact] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        artifact = _parse_line(line, f"{path}:{number}")
        if artifact.filename in seen:
            raise ConfigError(
                f"{path}:{number}: {artifact.filename} already pinned on line "
                f"{seen[artifact.filename]}; a flat jar directory cannot hold both"
            )
        seen[artifact.filename] = number
        artifacts.append(artifact)
    if not artifacts:
        raise ConfigError(f"{path}: jar lock pins no artifacts")
    return artifacts


def _parse_line(line: str, where: str) -> Artifact:
    fields = line.split()
    if len(fields) != 2:
        raise ConfigError(f"{where}: expected 'group:artifact:version[:classifier] sha256'")
    coordinate, sha256 = fields
    parts = coordinate.split(":")
    if len(parts) not in (3, 4) or not all(parts):
        raise ConfigError(f"{where}: {coordinate!r} is not group:artifact:version[:classifier]")
    if not _SHA256.fullmatch(sha256):
        raise ConfigError(f"{where}: {sha256!r} is not a lower-case hex sha256")
    classifier = parts[3] if len(parts) == 4 else ""
    return Artifact(parts[0], parts[1], parts[2], sha256, classifier)


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def fetch(
    lock: Path,
    dest: Path,
    *,
    progress: bool = True,
    repo: str | None = None,
    timeout_s: float = 30.0,
    attempts: int = 4,
) -> list[Path]:
    """Make ``dest`` hold every jar of ``lock``, verified; return the classpath.

    Steps, per artifact in lock order:

    1. If ``dest/<filename>`` exists and its sha256 matches, keep it.
       (A mismatching file is a damaged cache entry: it is replaced.)
    2. Otherwise download it from ``repo`` (default: ``$DELAYBRIDGE_MAVEN_REPO``
       or Maven Central) into a temporary file, hashing as bytes arrive; network
       errors are retried ``attempts`` times with backoff.
    3. If the hash differs from the lock, delete the temporary file and raise
       :class:`IntegrityError` naming the artifact, the URL and both hashes.
    4. Otherwise move it into place durably (:func:`delaybridge.durable.replacing`:
       fsync, ``os.replace``, fsync the directory).

    ``progress`` shows a rich bar with bytes, but only on a terminal outside CI.
    """
    artifacts = read_lock(lock)
    repo = repo or os.environ.get("DELAYBRIDGE_MAVEN_REPO") or MAVEN_CENTRAL
    dest.mkdir(parents=True, exist_ok=True)
    missing = [a for a in artifacts if not _verified(dest / a.filename, a)]
    if missing:
        started = time.monotonic()
        with FetchProgress(len(missing), enabled=progress) as bar:
            total_bytes = sum(
                _download_one(a, dest, repo, bar, lock, timeout_s, attempts) for a in missing
            )
        _log.info(
            "fetched %d of %d jars (%.1f MB) from %s into %s in %.1f s",
            len(missing),
            len(artifacts),
            total_bytes / 1e6,
            repo,
            dest,
            time.monotonic() - started,
        )
    return [dest / a.filename for a in artifacts]


def _verified(path: Path, artifact: Artifact) -> bool:
    if not path.is_file():
        return False
    actual = sha256_of(path)
    if actual == artifact.sha256:
        return True
    _log.warning(
        "%s: cached %s has sha256 %s, lock pins %s; downloading it again",
        path,
        artifact.coordinate,
        actual,
        artifact.sha256,
    )
    return False


def _download_one(
    artifact: Artifact,
    dest: Path,
    repo: str,
    bar: FetchProgress,
    lock: Path,
    timeout_s: float,
    attempts: int,
) -> int:
    url = artifact.url(repo)
    # A unique temporary name: two processes may fetch the same jar into one cache.
    with replacing(dest / artifact.filename, suffix=".part", unique=True) as tmp:
        actual, size = _download(url, tmp, bar, artifact, timeout_s, attempts)
        if actual != artifact.sha256:
            raise IntegrityError(  # replacing() deletes the download
                f"{artifact.coordinate}: {url} has sha256 {actual}, but {lock} pins "
                f"{artifact.sha256}; the download was deleted"
            )
    return size


def _download(
    url: str, tmp: Path, bar: FetchProgress, artifact: Artifact, timeout_s: float, attempts: int
) -> tuple[str, int]:
    """Download ``url`` into ``tmp`` (rewritten by each attempt); return its sha256 and size.

    Retries transient failures (timeouts, resets, HTTP 5xx and 429) with
    exponential backoff; a 404 or other client error fails at once.
    """
    for attempt in range(1, attempts + 1):
        try:
            return _download_once(url, tmp, bar, artifact.filename, timeout_s)
        except urllib.error.HTTPError as exc:
            if (exc.code < 500 and exc.code != 429) or attempt == attempts:
                raise FetchError(
                    f"{artifact.coordinate}: GET {url} failed: HTTP {exc.code} {exc.reason}"
                ) from exc
            error: Exception = exc
        except OSError as exc:  # URLError, timeouts and resets are all OSErrors
            if attempt == attempts:
                raise FetchError(
                    f"{artifact.coordinate}: GET {url} failed after {attempts} attempts: {exc}"
                ) from exc
            error = exc
        backoff_s = 0.5 * 2**attempt
        _log.warning(
            "GET %s failed (%s); retry %d/%d in %.0f s",
            url,
            error,
            attempt,
            attempts - 1,
            backoff_s,
        )
        time.sleep(backoff_s)  # backoff between attempts, not a wait on a condition
    raise AssertionError("unreachable: the last attempt returns or raises")


def _download_once(
    url: str, tmp: Path, bar: FetchProgress, name: str, timeout_s: float
) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    request = urllib.request.Request(url, headers={"User-Agent": "delaybridge-jars/1"})
    with tmp.open("wb") as out, urllib.request.urlopen(request, timeout=timeout_s) as resp:
        length = resp.headers.get("Content-Length")
        task = bar.start_file(name, int(length) if length else None)
        while block := resp.read(1 << 16):
            digest.update(block)
            out.write(block)
            size += len(block)
            bar.advance(task, len(block))
        bar.finish_file(task)
    return digest.hexdigest(), size
