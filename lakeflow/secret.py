"""A string that never shows itself: secrets stay out of reprs, logs and exceptions."""

from __future__ import annotations

from typing import Iterable, Mapping

REDACTED = "***"


class Secret:
    """Wraps a secret value; ``str()``/``repr()`` print ``***``, ``reveal()`` gives the value."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"Secret({REDACTED})"

    def __str__(self) -> str:
        return REDACTED

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __bool__(self) -> bool:
        return bool(self._value)


# Key fragments that mark a configuration value as secret, in any of the key styles we emit
# (Lakekeeper ``s3.secret-access-key``, Hadoop ``fs.s3a.secret.key``, boto3 ``aws_session_token``).
_SECRET_MARKERS = ("secret", "session.token", "session-token", "session_token", "access.key",
                   "access-key", "access_key", "token", "password", "sas-token", "sse.key",
                   "encryption.key")


def is_secret_key(key: str) -> bool:
    """True when a configuration key names a credential (keys, tokens, passwords)."""
    k = key.lower()
    if k.endswith(("expires-at-ms", "expiration-time", "expires-at", "provider")):
        return False
    return any(marker in k for marker in _SECRET_MARKERS)


def redact(config: Mapping[str, str], secret_keys: Iterable[str] = ()) -> dict[str, str]:
    """A copy of ``config`` with every secret value replaced by ``***``."""
    extra = set(secret_keys)
    return {k: (REDACTED if k in extra or is_secret_key(k) else v) for k, v in config.items()}
