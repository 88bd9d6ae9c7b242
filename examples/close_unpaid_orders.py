"""Close an order that is still unpaid 30 minutes after it was placed.

When an order is placed, schedule its "close" message with the order's id; when it is
paid, cancel it. If the payment comes first, the close never arrives; if not, the order
service receives it on ``orders.close`` and closes the order. A second payment attempt
that re-opens the order can push the deadline back with ``reschedule``.

    python -m examples.close_unpaid_orders --bootstrap 127.0.0.1:9092 --delay-topic delay
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import timedelta

from delaybridge.client import DelayClient

CLOSE_TOPIC = "orders.close"
UNPAID_FOR = timedelta(minutes=30)


def order_placed(client: DelayClient, order_id: str) -> None:
    """The order exists: close it in 30 minutes unless it is paid by then."""
    client.schedule(
        CLOSE_TOPIC, f'{{"close": "{order_id}"}}', key=order_id, id=order_id, delay=UNPAID_FOR
    )


def payment_started(client: DelayClient, order_id: str) -> None:
    """A payment is under way: give it 10 more minutes (replaces the pending close)."""
    client.reschedule(
        order_id,
        CLOSE_TOPIC,
        f'{{"close": "{order_id}"}}',
        key=order_id,
        delay=timedelta(minutes=10),
    )


def order_paid(client: DelayClient, order_id: str) -> None:
    """Paid: the close must never arrive."""
    client.cancel(order_id, target=CLOSE_TOPIC)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--delay-topic", default="delay")
    args = parser.parse_args(argv)
    with DelayClient.connect(args.bootstrap, args.delay_topic) as client:
        order_placed(client, "order-1001")  # never paid: closed at 30 min
        order_placed(client, "order-1002")
        payment_started(client, "order-1002")  # closed at 10 min unless paid
        order_placed(client, "order-1003")
        order_paid(client, "order-1003")  # never closed
    print(f"scheduled: watch {CLOSE_TOPIC} for order-1001 and order-1002")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
