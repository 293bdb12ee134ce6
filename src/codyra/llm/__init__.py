"""LLM continual learning on TRACE: data, tokenisation, metrics and a synthetic mini TRACE.

Import the submodules directly (``codyra.llm.metrics``, ``codyra.llm.data``, ...): this
package stays import-light so that scoring jobs do not pay for torch or transformers.
"""
