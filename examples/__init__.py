"""Runnable examples of ``delaybridge.client`` (docs/client.md), one per use case.

Each runs against a Kafka broker and a running sidecar (``delaybridge kafka up``,
``delaybridge run``): ``python -m examples.<name> --help``. The retry example also runs
end to end in the tests (tests/integration/client/test_retry_example.py).
"""
