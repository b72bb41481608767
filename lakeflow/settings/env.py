"""The settings layer: the environment over a dotenv file → typed pydantic models.

Each area declares a :class:`EnvModel` whose fields are aliased to their variable and carry their
description (the source of ``.env.example``). :func:`load` reports every error at once, each one
naming its variable; values that are secrets are never shown.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, TypeVar
from urllib.parse import urlparse

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

from lakeflow.errors import ConfigurationError
from lakeflow.secret import Secret, redact_url

M = TypeVar("M", bound="EnvModel")
T = TypeVar("T")

ENV_FILE = "LAKEFLOW_ENV_FILE"
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,127}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_TOKEN = re.compile(r"^[^\s\x00-\x1f\x7f]+$")  # one token: no spaces or control characters (header-safe)
_DURATION = re.compile(r"^(\d+)(ms|s|m|h|d)?$")
_UNIT_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


class SettingsError(ConfigurationError, ValueError):
    """One or more variables are missing or malformed; the message names each of them."""


class Invalid(ConfigurationError, ValueError):
    """A variable's value is wrong: ``expected`` says how, ``shown`` is the value as it may be
    printed (``None``: not at all, e.g. a secret)."""

    def __init__(self, expected: str, shown: str | None) -> None:
        super().__init__(expected)
        self.expected, self.shown = expected, shown


class EnvModel(BaseModel):
    """Settings of one area: each field's alias is its variable, its description documents it.
    Build with :func:`load` from :func:`overlay` / :func:`environment`."""

    model_config = ConfigDict(
        str_strip_whitespace=True, extra="ignore", frozen=True, arbitrary_types_allowed=True, validate_default=True
    )


def env_file(environ: Mapping[str, str]) -> Path:
    """The dotenv file lakeflow reads: ``$LAKEFLOW_ENV_FILE``, else ``./.env.local``."""
    return Path(environ.get(ENV_FILE) or ".env.local")


def overlay(environ: Mapping[str, str], path: Path | None) -> dict[str, str]:
    """``environ`` over the dotenv file ``path`` (``None``: no file); values stripped, blank ones
    counted as unset. The file is read with python-dotenv without ``${VAR}`` interpolation, so a
    secret holding ``$`` stays as written."""
    from dotenv import dotenv_values

    file = dotenv_values(path, interpolate=False) if path is not None and path.is_file() else {}
    values = {k: v.strip() for k, v in file.items() if v is not None}
    values.update({k: v.strip() for k, v in environ.items()})
    return {k: v for k, v in values.items() if v}


def environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What lakeflow reads: ``environ`` (default ``os.environ``) over :func:`env_file`."""
    environ = os.environ if environ is None else environ
    return overlay(environ, env_file(environ))


def load(
    model: type[M],
    values: Mapping[str, str],
    what: str,
    problems: Iterable[str] = (),
    context: dict[str, Any] | None = None,
) -> M:
    """``model`` from ``values`` (see :func:`environment`). ``problems`` (checks across variables)
    are reported with the fields' errors in one :class:`SettingsError` headed ``invalid {what}``: one
    line for one error, a line per error otherwise."""
    errors = list(problems)
    try:
        result = model.model_validate(values, context=context)
    except ValidationError as exc:
        errors = [message(e, model) for e in exc.errors()] + errors
    if len(errors) == 1:
        raise SettingsError(f"invalid {what}: {errors[0]}")
    if errors:
        raise SettingsError(f"invalid {what}:\n  " + "\n  ".join(errors))
    return result


def load_only(model: type[M], names: Iterable[str], what: str, environ: Mapping[str, str] | None = None) -> M:
    """``model`` from the variables ``names`` of ``environ`` (default ``os.environ``, no dotenv file),
    its other fields at their defaults: a command reads only what it uses, so a bad value of another
    command's variable cannot fail it. Blank values count as unset."""
    environ = os.environ if environ is None else environ
    return load(model, {k: environ[k].strip() for k in names if environ.get(k, "").strip()}, what)


def message(error: Mapping[str, Any], model: type[EnvModel]) -> str:
    """One pydantic error as ``NAME='value': expected …`` (the value left out unless shown safely)."""
    name = ".".join(str(part) for part in error["loc"])
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, Invalid):
        shown = f"{name}={cause.shown!r}" if cause.shown is not None else name
        return f"{shown}: {cause.expected}"
    if error["type"] == "missing":
        field = variables(model).get(name)
        return f"{name} is missing: expected {field.description if field else 'a value'}"
    return f"{name}: {error['msg']}"


def variables(model: type[EnvModel]) -> dict[str, Any]:
    """The variables of ``model``: name → its field (derived fields, without an alias, left out)."""
    return {f.alias: f for f in model.model_fields.values() if f.alias}


# --- value types: each checks a string and says what it expects ---------------------------------


def parsed(conv: Callable[[str], T], expected: str, *, shown: bool = True) -> BeforeValidator:
    """A validator converting the variable's string with ``conv`` (ValueError: ``expected``)."""

    def check(value: Any) -> Any:
        if not isinstance(value, str):
            return value  # a default or an already converted value
        try:
            return conv(value)
        except (TypeError, ValueError):
            raise Invalid(f"expected {expected}", value if shown else None) from None

    return BeforeValidator(check)


def _bounded(kind: Callable[[str], T], ok: Callable[[T], bool]) -> Callable[[str], T]:
    def conv(raw: str) -> T:
        value = kind(raw)
        if not ok(value):
            raise ValueError(raw)
        return value

    return conv


def name(raw: str) -> str:
    if not _NAME.match(raw):
        raise ValueError(raw)
    return raw


def namespace(raw: str) -> tuple[str, ...]:
    return tuple(name(level) for level in raw.split("."))


def line(raw: str) -> str:
    if _CONTROL.search(raw):
        raise ValueError(raw)
    return raw


def secret(raw: str) -> Secret:
    if not _TOKEN.match(raw):
        raise ValueError("not one token")
    return Secret(raw)


def choice(options: Iterable[str]) -> Callable[[str], str]:
    allowed = tuple(options)

    def conv(raw: str) -> str:
        if raw not in allowed:
            raise ValueError(raw)
        return raw

    return conv


def flag(raw: str) -> bool:
    if raw.lower() not in ("true", "false"):
        raise ValueError(raw)
    return raw.lower() == "true"


def parse_duration(text: str) -> float:
    """``90s``, ``15m``, ``2h``, ``1d``, ``500ms`` or plain seconds → seconds; ValueError otherwise."""
    m = _DURATION.match(text.strip())
    if not m:
        raise ValueError(f"{text!r}: expected a duration such as 90s, 15m, 2h or 1d")
    return int(m.group(1)) * _UNIT_S[m.group(2) or "s"]


def local_path(raw: Any) -> Path:
    return Path(raw).expanduser().resolve()


PositiveInt = Annotated[int, parsed(_bounded(int, lambda n: n > 0), "a positive integer")]
Port = Annotated[int, parsed(_bounded(int, lambda n: 0 <= n <= 65535), "a port number (0 to 65535)")]
NonNegativeInt = Annotated[int, parsed(_bounded(int, lambda n: n >= 0), "a whole number (0 or more)")]
PositiveFloat = Annotated[float, parsed(_bounded(float, lambda x: 0 < x < float("inf")), "a positive number")]
Name = Annotated[str, parsed(name, "letters, digits, '_' or '-' (at most 128)")]
Namespace = Annotated[
    tuple[str, ...],
    parsed(namespace, "dot-separated levels of letters, digits, '_' or '-' (no '..', '/', '+' or spaces)"),
]
Line = Annotated[str, parsed(line, "one line without control characters")]
Token = Annotated[
    Secret, parsed(secret, "one token without spaces or control characters (the value is not shown)", shown=False)
]
Password = Annotated[Secret, BeforeValidator(lambda v: Secret(v) if isinstance(v, str) else v)]
Flag = Annotated[bool, parsed(flag, "true or false")]
Duration = Annotated[float, parsed(parse_duration, "a duration such as 90s, 15m, 2h or 1d")]
LocalPath = Annotated[Path, BeforeValidator(local_path)]


def choices(options: Iterable[str]) -> BeforeValidator:
    """A validator accepting one of ``options``."""
    allowed = tuple(options)
    return parsed(choice(allowed), f"one of {', '.join(allowed)}")


def url(example: str, *, base: bool = False) -> BeforeValidator:
    """An http(s) URL without credentials in it (shown with its password as ``***``); a ``base``
    URL (one lakeflow appends paths to) has no query and loses a trailing ``/``."""

    def check(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        problem = url_problem(value, example, base=base)
        if problem is not None:
            raise problem
        return value.rstrip("/") if base else value

    return BeforeValidator(check)


def url_problem(value: str, example: str, *, base: bool = False) -> Invalid | None:
    """What is wrong with an http(s) URL (``None``: nothing)."""
    shown = redact_url(value)
    try:
        parsed_url = urlparse(value)
        parsed_url.port  # noqa: B018 -- raises ValueError on a malformed port
    except ValueError:
        return Invalid(f"expected an http(s) URL like {example}", shown)
    if parsed_url.scheme not in ("http", "https") or not parsed_url.hostname or _CONTROL.search(value):
        return Invalid(f"expected an http(s) URL like {example}", shown)
    if "@" in parsed_url.netloc:
        return Invalid(
            f"credentials inside the URL are not allowed ({shown}); use TOKEN or OAUTH_* for "
            "Lakekeeper, vended credentials for S3",
            None,
        )
    if base and (parsed_url.query or parsed_url.fragment):
        return Invalid(f"expected a base URL without '?' or '#', like {example}", shown)
    return None


def is_uuid(value: str) -> bool:
    """True when ``value`` is a UUID (a warehouse id rather than a warehouse name)."""
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True
