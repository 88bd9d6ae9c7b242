"""Reconciliation of sent vs delivered delayed messages, read from Kafka with PySpark.

``run_reconciliation(settings) -> Report`` is the entry point (the CLI's
``delaybridge reconcile``, ``spark-submit delaybridge/spark/job.py``, tests, the demo).
Importing this package does not import PySpark; running the job does.
See docs/reconciliation.md.
"""

from delaybridge.spark.job import run_reconciliation
from delaybridge.spark.report import Counts, Report
from delaybridge.spark.settings import ReconcileSettings

__all__ = ["Counts", "ReconcileSettings", "Report", "run_reconciliation"]
