"""``delaybridge console`` as a child process, as an operator runs it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from tests.support import wait_until

_SERVING = re.compile(r"delaybridge console: serving on (http://\S+)")


class ConsoleProcess:
    def __init__(self, work: Path, name: str, args: list[str], token: str) -> None:
        self.log = work / f"{name}.log"
        env = dict(os.environ, PYTHONUNBUFFERED="1", DELAYBRIDGE_HTTP__ADMIN_TOKEN=token)
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "delaybridge", "console", "--port", "0", *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )
        self.url = wait_until(self._url, 60, f"console {name} to serve", detail=self.tail)

    def _url(self) -> str:
        code = self.proc.poll()
        assert code is None, f"console exited {code}:\n{self.tail()}"
        found = _SERVING.search(self.log.read_text(errors="replace"))
        return found.group(1) if found else ""

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.text().splitlines()[-n:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
