"""kubesched.plugins: the in-tree plugins, one package per plugin, named as upstream.

The runtime never imports a plugin by itself: :func:`kubesched.plugins.registry.in_tree_registry` is the one
explicit table the scheduler, the config loader (as its catalog) and the CLI read. Plugins import only
:mod:`kubesched.framework` and :mod:`kubesched.api` (docs/explanation/design.md#plugins-see-only-the-framework);
shared code lives in :mod:`.helper`.
"""
