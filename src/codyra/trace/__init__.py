"""The TRACE benchmark, independent of any model: task folders and examples (``data``) and the
per-task metrics (``metrics``, with ``rouge`` and ``sari``). Import-light: scoring jobs do not
pay for torch or transformers."""
