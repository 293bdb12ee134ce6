"""Errors shared by low modules (paths, config) without importing each other."""


class ConfigError(ValueError):
    """A config value or a name derived from it is invalid; the message names the key and the fix."""
