"""LLM continual learning on TRACE with Hugging Face causal LMs.

- data: ``data`` (task folders, tokenisation), ``collate``, ``mini_trace`` + ``tokenizer``
  (the synthetic mini TRACE), ``pretrain`` (its theta_0);
- model: ``targets`` (q, k, v, o, gate, up, down projections for the shared adapters),
  ``model`` (theta_0 and theta_i = theta_0 + stored updates);
- training: ``train`` (the task loop), ``backends`` (one process) and ``zero`` (DeepSpeed
  ZeRO-2 ranks), ``launch`` (``codyra train`` re-executed under torchrun);
- evaluation: ``generation``, ``evaluate`` (cells), ``metrics``, ``rouge``, ``sari``.

Import the submodules directly (``codyra.llm.metrics``, ``codyra.llm.data``, ...): this
package stays import-light so that scoring jobs do not pay for torch or transformers.
"""
