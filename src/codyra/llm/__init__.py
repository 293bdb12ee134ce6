"""The causal-LM family (TRACE with Hugging Face decoders): ``family`` (the family object),
``targets`` (q, k, v, o, gate, up, down projections for the shared adapters), ``model``
(theta_0 and theta_i = theta_0 + stored updates), ``collate`` and ``loss`` (supervised
fine-tuning batches), ``train`` (the family's training session), ``zero`` (DeepSpeed ZeRO-2
ranks) and ``launch`` (``codyra train`` re-executed under torchrun), ``generation`` and
``evaluate`` (cells). TRACE's data and scoring are :mod:`codyra.trace`; the mini TRACE is
:mod:`codyra.mini.trace`.

Import the submodules directly: this package stays import-light so that config validation
does not pay for torch or transformers.
"""
