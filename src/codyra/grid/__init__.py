"""A results grid as a whole: its state at a glance (``codyra status``, :mod:`codyra.grid.status`) and
the supported way to redo part of it (``codyra invalidate``, :mod:`codyra.grid.invalidate`, which asks
the workflow's own DAG what depends on the files it removes: :mod:`codyra.grid.dag`)."""
