"""The mini CLIP benchmark: a tiny CLIP (``model_configs``) pretrained (``pretrain``) on the
synthetic scenes of :mod:`codyra.data.scenes`, then a stream of small tasks."""
