"""A fake :class:`~delaybridge.connectors.reachability.ListenerProbe`: Kafka's listener
is up or down because the test says so.

``begin()`` answers at once from :attr:`listening`, unless :attr:`hold` is set: then the
check stays running (a black-holed address, a slow DNS) until :meth:`answer`.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field

from delaybridge.connectors.reachability import ListenerCheck

SERVER = "kafka-0:9092"


@dataclass
class FakeListenerProbe:
    listening: bool = True
    hold: bool = False
    checks: int = 0
    """How many checks were begun."""
    pending: list[Future[ListenerCheck]] = field(default_factory=list)

    def begin(self) -> Future[ListenerCheck]:
        self.checks += 1
        future: Future[ListenerCheck] = Future()
        if self.hold:
            self.pending.append(future)
        else:
            future.set_result(self.check())
        return future

    def answer(self) -> None:
        """Complete the held checks with the listener's state now."""
        for future in self.pending:
            future.set_result(self.check())
        self.pending.clear()

    def check(self) -> ListenerCheck:
        if self.listening:
            return ListenerCheck(SERVER)
        return ListenerCheck(None, (f"{SERVER}: Connection refused",))
