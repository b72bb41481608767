"""A string that never shows itself: secrets stay out of reprs, logs and exceptions."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

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


# Fragments that mark a configuration key as secret, matched with separators removed, in any of
# the key styles we meet (Lakekeeper ``s3.secret-access-key``, Hadoop ``fs.s3a.secret.key``, boto3
# ``aws_session_token``, Kafka ``sasl.jaas.config``, JDBC ``pwd``, Iceberg REST ``credential``).
_SECRET_MARKERS = (
    "secret",
    "token",
    "password",
    "passwd",
    "pwd",
    "accesskey",
    "apikey",
    "privatekey",
    "credential",
    "jaas",
    "userinfo",
    "ssekey",
    "encryptionkey",
)
_SECRET_WORDS = frozenset({"auth", "authorization"})  # as a key's last word (``http.auth``)
# Keys naming when a secret expires, or where / how one is found, rather than the secret itself.
_NOT_SECRET_SUFFIXES = (
    "expires-at-ms",
    "expiration-time",
    "expires-at",
    "provider",
    "file",
    "path",
    "url",
    "uri",
    "type",
)
_SEPARATORS = re.compile(r"[^a-z0-9]+")


def is_secret_key(key: str) -> bool:
    """True when a configuration key (or variable name) names a credential: keys, tokens, passwords."""
    k = key.lower()
    if k.endswith(_NOT_SECRET_SUFFIXES):
        return False
    words = [w for w in _SEPARATORS.split(k) if w]
    compact = "".join(words)
    return any(marker in compact for marker in _SECRET_MARKERS) or bool(words) and words[-1] in _SECRET_WORDS


def redact(config: Mapping[str, str], secret_keys: Iterable[str] = ()) -> dict[str, str]:
    """A copy of ``config`` with every secret value replaced by ``***``."""
    extra = set(secret_keys)
    return {k: (REDACTED if k in extra or is_secret_key(k) else v) for k, v in config.items()}


# URL credentials: ``user:pass@`` after ``scheme://`` (or Oracle's ``jdbc:oracle:thin:user/pass@``), and
# ``key=value`` parameters after ``?``, ``&`` or ``;`` (JDBC: ``?user=u&password=p``, ``;password=p``).
_USERINFO_SHOWN = re.compile(r"(?:(?<=://)|(?<=:thin:))(.*)@")  # up to the last '@': a password may hold '/'
_USERINFO = re.compile(r"(?<=://)[^/?#]*@|(?<=:thin:)[^@]+(?=@)")
_PARAM = re.compile(r"([;?&])([^;?&#=]+)=([^;&#]*)")
_USER_KEYS = frozenset({"user", "username", "uid", "userid"})


def redact_url(url: str) -> str:
    """``url`` fit for a message: its password and secret parameters as ``***`` (the user kept)."""

    def userinfo(m: re.Match) -> str:
        user, colon, _ = m.group(1).partition(":")
        return f"{user}:{REDACTED}@" if colon else f"{REDACTED}@"

    def param(m: re.Match) -> str:
        return f"{m[1]}{m[2]}={REDACTED}" if is_secret_key(m[2]) else m[0]

    return _PARAM.sub(param, _USERINFO_SHOWN.sub(userinfo, url))


def strip_credentials(url: str) -> str:
    """``url`` without credentials (userinfo, user and password parameters): an identity to publish."""
    if "@" not in url and "=" not in url:
        return url

    def param(m: re.Match) -> str:
        if m[2].strip().lower() in _USER_KEYS or is_secret_key(m[2]):
            return "?" if m[1] == "?" else ""  # the query's first parameter: keep its '?' for the next
        return m[0]

    out = _PARAM.sub(param, _USERINFO.sub("", url)).replace("?&", "?")
    return re.sub(r"\?(?=$|#)", "", out)
