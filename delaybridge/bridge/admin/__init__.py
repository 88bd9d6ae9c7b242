"""The admin API's side of the loop: what the HTTP thread may ask of the running sidecar.

- ``control``: the interface between the HTTP thread and the owner thread
  (:class:`Control`, its errors);
- ``commands``: its implementation, queued to the owner thread (:class:`AdminControl`);
- ``pending``: the listing and counts of pending messages;
- ``status``: JSON views of partitions and stored messages;
- ``replicas``: asking every replica and merging their answers.
"""

from delaybridge.bridge.admin.commands import AdminControl
from delaybridge.bridge.admin.control import BadRequest, Control, ControlTimeout

__all__ = ["AdminControl", "BadRequest", "Control", "ControlTimeout"]
