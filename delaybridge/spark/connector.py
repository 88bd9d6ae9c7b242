"""The jars that give PySpark its Kafka source, pinned and checksummed.

PySpark's wheel ships Spark without ``spark-sql-kafka-0-10``. Rather than let Spark
resolve ``--packages`` through Ivy at job start (a network fetch nobody verified), the
connector and the few dependencies PySpark lacks are pinned in a lock file next to this
module (``spark-kafka-4.2.0.lock``, format: :mod:`delaybridge.jars`) and fetched into the
jar cache *before* the session starts. ``spark.jars`` then names local files only.

Offline use: run ``delaybridge reconcile --fetch-jars`` once where Maven Central is
reachable (or copy the cache), then ``--offline`` checks the cache and never opens a
socket; a missing or damaged jar is an error naming the file and the fix.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from delaybridge.errors import ConfigError
from delaybridge.jars import fetch, read_lock, sha256_of

SPARK_VERSION = "4.2.0"
LOCK_NAME = f"spark-kafka-{SPARK_VERSION}.lock"


def lock_file() -> Path:
    """The packaged lock (package data of ``delaybridge.spark``)."""
    return Path(str(resources.files(__package__ or "delaybridge.spark").joinpath(LOCK_NAME)))


def connector_jars(cache_dir: Path, *, offline: bool = False, progress: bool = True) -> list[Path]:
    """Local paths of the connector jars, verified against the lock.

    Online, missing jars are downloaded (sha256-checked) into ``cache_dir``. Offline,
    every jar must already be there with the pinned hash.
    """
    check_pyspark_version()
    lock = lock_file()
    if not offline:
        return fetch(lock, cache_dir, progress=progress)
    paths = []
    for artifact in read_lock(lock):
        path = cache_dir / artifact.filename
        if not path.is_file():
            raise ConfigError(
                f"--offline: {path} is missing ({artifact.coordinate} from {lock}); "
                "run `delaybridge reconcile --fetch-jars` where Maven Central is reachable"
            )
        actual = sha256_of(path)
        if actual != artifact.sha256:
            raise ConfigError(
                f"--offline: {path} has sha256 {actual}, {lock} pins {artifact.sha256}; "
                "delete it and run `delaybridge reconcile --fetch-jars`"
            )
        paths.append(path)
    return paths


def check_pyspark_version() -> None:
    """The lock matches one Spark release; another PySpark would load mismatched classes."""
    import pyspark

    if pyspark.__version__ != SPARK_VERSION:
        raise ConfigError(
            f"pyspark {pyspark.__version__} is installed, but {LOCK_NAME} pins the Kafka "
            f"connector of Spark {SPARK_VERSION}; install pyspark=={SPARK_VERSION}"
        )
