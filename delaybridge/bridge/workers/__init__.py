"""Several sidecar processes in one pod, behind the pod's one HTTP port.

- ``identity``: how many workers, and what each must not share;
- ``supervisor``: start, watch, restart and stop them;
- ``launch``: ``delaybridge run`` as a supervisor;
- ``fanout``: the pod's HTTP answers, merged from its workers';
- ``worker_http``: asking one worker;
- ``metrics_merge``: one ``/metrics`` with a ``worker`` label.
"""
