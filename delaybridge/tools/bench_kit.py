"""What every ``delaybridge bench`` command does around its measurements.

* :func:`bench_cluster` — a temporary work directory and the clients of the cluster the
  command was pointed at, or of a local broker it starts there and stops when done;
* :func:`report` — the results as JSON and as a table, one column per run.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from delaybridge.connectors import KafkaClients, KafkaSettings


@contextmanager
def bench_cluster(prefix: str, kafka: KafkaSettings | None) -> Iterator[tuple[Path, KafkaClients]]:
    """A temporary work directory (named ``<prefix>...``, removed when the block ends) and
    the clients of ``kafka``; with None, of a local broker (data under ``<work>/kafka``,
    1 GiB heap) started here and stopped when the block ends."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        work = Path(tmp)
        if kafka is not None:
            yield work, KafkaClients(kafka)
            return
        # Imported here: the local broker is only needed without a cluster, and the e2e
        # package (which free_port comes from) imports this module.
        from delaybridge.connectors.localkafka import LocalKafka
        from delaybridge.tools.e2e.sidecar import free_port

        broker = LocalKafka(
            work / "kafka", port=free_port(), controller_port=free_port(), heap_mb=1024
        )
        broker.start(timeout_s=120)
        try:
            yield work, KafkaClients(KafkaSettings(bootstrap_servers=broker.bootstrap))
        finally:
            broker.stop()


def report(
    console: Console,
    json_path: Path,
    name: str,
    runs: list[dict[str, Any]],
    heading: Callable[[dict[str, Any]], str],
) -> None:
    """Write ``{name: runs}`` to ``json_path`` and print the table ``delaybridge bench
    <name>``: a line per metric (the first run's keys), a column per run headed
    ``heading(run)``."""
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps({name: runs}, indent=2))
    table = Table(title=f"delaybridge bench {name}")
    table.add_column("metric")
    for run in runs:
        table.add_column(heading(run), justify="right")
    for metric in runs[0]:
        table.add_row(metric, *(str(run[metric]) for run in runs))
    console.print(table)
    console.print(f"JSON written to {json_path}")
