"""The sidecar's commands: ``run``, ``send``, ``cancel``, ``status`` (``commands``) and
``pending list|stats`` (``pending``); ``send`` writes the header contract (``send``);
``gc_tuning`` sets the collector up for a ``run``."""
