"""The mini BLIP: a tiny BLIP image-text model (``model_configs``) pretrained (``pretrain``) on the
mini CLIP's synthetic scenes by the same contrastive loop, so the BLIP family runs the mini
benchmark (``config/mini_blip.yaml``) as the mini CLIP does."""
