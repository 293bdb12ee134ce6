"""The CLIP family: open_clip models and theta_0, task streams, training, zero-shot heads, cells."""
