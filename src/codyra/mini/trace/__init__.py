"""The mini TRACE: synthetic TRACE-style tasks (``tasks``), a byte-level BPE tokenizer
(``tokenizer``) and theta_0, a tiny LLaMA (``model_configs``) pretrained as a language model
(``pretrain``)."""
