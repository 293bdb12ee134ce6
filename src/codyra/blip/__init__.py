"""The BLIP family: Hugging Face BLIP image-text models, classified like CLIP by class prompts."""
