"""Errors shared across Lakeline. Each says what was wrong in words a user can act on."""


class LakelineError(Exception):
    """Base class of every error Lakeline raises on purpose."""


class ValidationError(LakelineError):
    """Input (a key, an item, a message, a name) is not acceptable; nothing was executed."""


class ConfigError(LakelineError):
    """Configuration is missing or inconsistent."""
