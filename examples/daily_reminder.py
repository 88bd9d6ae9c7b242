"""A reminder every weekday at 09:00 in Paris, for as long as the subscription runs.

A recurring schedule: a cron expression in an IANA time zone (summer time included:
09:00 stays 09:00 local), ending at the subscription's end. Each occurrence arrives on
``reminders`` with ``delay-occurrence`` (1, 2, ...); cancelling the id stops the series,
and rescheduling it replaces the series with a new one.

    python -m examples.daily_reminder --bootstrap 127.0.0.1:9092 --delay-topic delay
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from delaybridge.client import DelayClient

REMINDERS = "reminders"


def subscribe(client: DelayClient, user: str, until: datetime) -> None:
    """Remind ``user`` every weekday at 09:00 Paris time until ``until``."""
    client.schedule(
        REMINDERS,
        f'{{"remind": "{user}", "what": "stand-up"}}',
        key=user,
        id=f"stand-up/{user}",
        cron="0 9 * * 1-5",
        tz="Europe/Paris",
        until=until,
    )


def move_to_ten(client: DelayClient, user: str, until: datetime) -> None:
    """The stand-up moved to 10:00: the new series replaces the old one."""
    client.reschedule(
        f"stand-up/{user}",
        REMINDERS,
        f'{{"remind": "{user}", "what": "stand-up"}}',
        key=user,
        cron="0 10 * * 1-5",
        tz="Europe/Paris",
        until=until,
    )


def unsubscribe(client: DelayClient, user: str) -> None:
    """No more reminders: the cancel stops the series."""
    client.cancel(f"stand-up/{user}", target=REMINDERS)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--delay-topic", default="delay")
    args = parser.parse_args(argv)
    until = datetime.now(UTC) + timedelta(days=90)
    with DelayClient.connect(args.bootstrap, args.delay_topic) as client:
        subscribe(client, "ada", until)
        subscribe(client, "grace", until)
        move_to_ten(client, "grace", until)
    print(f"subscribed: watch {REMINDERS} on weekdays at 09:00 and 10:00 Europe/Paris")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
