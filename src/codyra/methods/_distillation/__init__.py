"""methods/_distillation"""
