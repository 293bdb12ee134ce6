"""Errors shared by low modules (paths, config, the model families) without importing each other."""


class ConfigError(ValueError):
    """A config value or a name derived from it is invalid; the message names the key and the fix."""


class WeightsUnavailableError(FileNotFoundError):
    """Pretrained weights (open_clip or Hugging Face) are neither in the cache nor downloadable
    from here; the message names the cache and the fix. A FileNotFoundError: the CLI reports it."""


class NotWritableError(OSError):
    """A folder a job writes its results to cannot be written (read-only, full disk, not a
    folder); raised before the job's work starts, the message names the folder."""


class MissingExtraError(ImportError):
    """A command needs a package of an optional extra that is not installed; the message names
    the extra and the install command (:func:`codyra.extras.require_extra`)."""
