"""The sidecar: delay topics in, due messages out (DESIGN §1-§6).

Subpackages by idea, in the layers import-linter checks (each imports only those below):

- ``cli``: the ``run``, ``send``, ``cancel``, ``status`` and ``pending`` commands;
- ``workers``: several sidecar processes per pod (supervisor, one HTTP port in front);
- ``http``: the HTTP server and its router (metrics, health, the admin API);
- ``service`` (module): the loop and its assembly; ``telemetry``, ``tuning`` (modules);
- ``admin``: what the HTTP thread may ask of the loop (commands, pending listing);
- ``ownership`` (module): the owned partitions, from assignment to release;
- ``ingest`` | ``delivery``: records in; due records out;
- ``state`` | ``cancels``: the changelog, restores and standbys; cancels across partitions;
- ``produce``: the one producer and its produce-with-retry;
- ``partition``: one partition's state;
- ``commit``: the commit point (which offsets may commit, when stores are durable);
- ``observe``: counts and metrics; ``flow`` (module): when ingest and delivery run.

docs/architecture.md draws them, and follows one record through them.
"""
