"""``delaybridge console``: a web console for the replicas of one delaybridge group.

Its own process (:mod:`~delaybridge.console.cli`), a Flask app served by waitress
(:mod:`~delaybridge.console.app`, :mod:`~delaybridge.console.server`). It fans out to
every replica through the admin API (:mod:`~delaybridge.console.replicas`, merged by
:mod:`~delaybridge.console.cluster_view` and the CLI's own listing merge), samples their
``/metrics`` for rates (:mod:`~delaybridge.console.metrics_history`), reads the
dead-letter topic with its own Kafka client (:mod:`~delaybridge.console.dead_letters`)
and reschedules by writing a replacing record (:mod:`~delaybridge.console.reschedule`).
Logins, sessions and CSRF are in :mod:`~delaybridge.console.auth`; every change is
audited (:mod:`~delaybridge.console.audit`). docs/console.md is the operator's guide.

The Flask and waitress imports live in the modules that need them, so the sidecar's
CLI starts without the ``console`` extra.
"""
