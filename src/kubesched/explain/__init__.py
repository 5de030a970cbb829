"""Why each pod went where it went: per node, per plugin (``kubesched explain``, ``simulate -o html``)."""
