"""Live mode: a scheduler process serving a real cluster (``kubesched run``); see :mod:`.run`."""
