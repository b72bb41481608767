"""A fleet of streams: the :class:`Pipeline` every part takes its tables from.

A pipeline is read from ``PIPELINE`` (a TOML file: ``[defaults]``, then ``[[streams]]``), or is the
one stream today's settings describe (TABLE, TABLE_SCHEMA, KAFKA_TOPIC…) — built by the same code.
Each declared stream (:class:`StreamDecl`) names its source (Kafka topics, or a topic pattern whose
captures name the table), its schema file, its raw table and the Iceberg table derived from it. A
pattern stream becomes one :class:`Stream` per matching topic (ingestion, from the broker's topics)
or per matching raw table (compaction, status and query, from the catalog's tables).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import tomllib
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from lakeflow.errors import ConfigurationError
from lakeflow.schema import SchemaError, TableSchema, declared_schema, load_schema
from lakeflow.settings.env import name as valid_name
from lakeflow.settings.env import namespace as valid_namespace
from lakeflow.settings.env import parse_duration
from lakeflow.settings.kafka import topic as valid_topic

if TYPE_CHECKING:
    from lakeflow.settings import Settings

ICEBERG_SUFFIX = "-compacted"  # the Iceberg table of raw table T is T-compacted unless named
_CAPTURE = re.compile(r"\{(\d+)\}")


class PipelineError(ConfigurationError, ValueError):
    """The pipeline file (or a stream of it) is unusable; the message names the stream and the key."""


# --- the file as a user writes it (keys in kebab-case; unknown keys refused) ----------------------


def _check(conv: Any, expected: str) -> AfterValidator:
    def check(value: Any) -> Any:
        if value is None:
            return value
        try:
            conv(value)
        except (TypeError, ValueError):
            raise ValueError(f"{value!r}: expected {expected}") from None
        return value

    return AfterValidator(check)


def _template(text: str) -> str:
    """A table name, ``{N}`` standing for a pattern's capture."""
    valid_name(_CAPTURE.sub("x", text))
    return text


def _regex(text: str) -> str:
    try:
        re.compile(text)
    except re.error as exc:
        raise ValueError(str(exc)) from None
    return text


def _key(fields: list[str]) -> list[str]:
    for f in fields:
        valid_name(f)
    return fields


NameText = Annotated[str, _check(valid_name, "letters, digits, '_' or '-' (at most 128)")]
TemplateText = Annotated[
    str, _check(_template, "a table name: letters, digits, '_' or '-', {1} for the pattern's first capture")
]
NamespaceText = Annotated[str, _check(valid_namespace, "namespace levels separated by '.'")]
DurationText = Annotated[str, _check(parse_duration, "a duration such as 90s, 15m, 2h or 1d")]
TopicText = Annotated[str, _check(valid_topic, "a Kafka topic name: letters, digits, '.', '_' or '-'")]
PatternText = Annotated[str, _check(_regex, "a regular expression")]
KeyList = Annotated[list[str], _check(_key, "field names")]


class _Spec(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=lambda n: n.replace("_", "-"), populate_by_name=False
    )


class LayoutSpec(_Spec):
    """What ``[defaults]`` and each stream may set (a stream's win)."""

    namespace: NamespaceText | None = None
    key: KeyList | None = None
    event_time: NameText | None = None
    partition_by: str | None = None
    compact_every: DurationText | None = None
    look_back: DurationText | None = None


class StreamSpec(LayoutSpec):
    """One ``[[streams]]`` entry."""

    name: NameText
    topics: list[TopicText] | None = None
    topic_pattern: PatternText | None = None
    schema_file: str | None = Field(None, alias="schema")
    table: TemplateText | None = None
    iceberg_table: TemplateText | None = None


class PipelineFile(_Spec):
    defaults: LayoutSpec = LayoutSpec()
    streams: list[StreamSpec] = Field(min_length=1)


# --- what the parts take ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Stream:
    """One stream's messages, their schema and the two tables they land in."""

    name: str  # the declared stream's, or, of a pattern stream, its table's
    declared: str  # the declaring stream's name
    namespace: tuple[str, ...]
    table: str  # the raw (generic) table
    iceberg_table: str
    schema: TableSchema
    topics: tuple[str, ...] = ()  # its Kafka topics (none: synthetic, or not known here)
    compact_every_s: float | None = None
    look_back_s: float | None = None

    @property
    def raw_name(self) -> str:
        return ".".join((*self.namespace, self.table))

    @property
    def iceberg_name(self) -> str:
        return ".".join((*self.namespace, self.iceberg_table))


@dataclass(frozen=True)
class StreamDecl:
    """A declared stream: of fixed topics (or synthetic), or of a topic pattern whose captures fill
    its table templates."""

    name: str
    namespace: tuple[str, ...]
    table: str  # a name, or a template with {N}
    iceberg_table: str
    schema: TableSchema
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    compact_every_s: float | None = None
    look_back_s: float | None = None

    def fixed(self) -> Stream | None:
        """The one stream of a declaration without a pattern (None for a pattern's)."""
        if self.pattern is not None:
            return None
        return Stream(
            self.name,
            self.name,
            self.namespace,
            self.table,
            self.iceberg_table,
            self.schema,
            self.topics,
            self.compact_every_s,
            self.look_back_s,
        )

    def for_topic(self, topic: str) -> Stream | None:
        """The stream of ``topic`` when it matches the pattern; PipelineError when its capture makes
        no valid table name."""
        m = re.fullmatch(self.pattern, topic) if self.pattern else None
        if m is None:
            return None
        return self._with(m.groups(), (topic,), f"topic {topic!r}")

    def for_table(self, table: str) -> Stream | None:
        """The stream whose raw table is ``table`` when it fits the template (its topics unknown)."""
        if self.pattern is None:
            return None
        parts = _CAPTURE.split(self.table)  # text, N, text, N, …
        regex = "".join(re.escape(p) if i % 2 == 0 else f"(?P<c{p}_{i}>.+?)" for i, p in enumerate(parts))
        m = re.fullmatch(regex, table)
        if m is None:
            return None
        captures: dict[int, str] = {}
        for group, value in m.groupdict().items():
            n = int(group[1:].split("_")[0])
            if captures.setdefault(n, value) != value:
                return None
        count = max(captures, default=0)
        return self._with(tuple(captures.get(i + 1, "") for i in range(count)), (), f"table {table!r}")

    def _with(self, captures: tuple[str | None, ...], topics: tuple[str, ...], what: str) -> Stream:
        def fill(template: str, key: str) -> str:
            def one(m: re.Match[str]) -> str:
                n = int(m.group(1))
                if not 1 <= n <= len(captures):
                    raise PipelineError(f"stream {self.name!r}: key {key!r}: {{{n}}} names no capture of the pattern")
                return captures[n - 1] or ""

            filled = _CAPTURE.sub(one, template)
            try:
                return valid_name(filled)
            except ValueError:
                raise PipelineError(
                    f"stream {self.name!r}: key {key!r}: {what} gives {filled!r}, no valid table name "
                    "(letters, digits, '_' or '-')"
                ) from None

        table = fill(self.table, "table")
        return Stream(
            table,
            self.name,
            self.namespace,
            table,
            fill(self.iceberg_table, "iceberg-table"),
            self.schema,
            topics,
            self.compact_every_s,
            self.look_back_s,
        )


@dataclass(frozen=True)
class Pipeline:
    """The declared streams, from ``source`` (the pipeline file, or the settings)."""

    declared: tuple[StreamDecl, ...]
    source: str

    @property
    def patterns(self) -> tuple[StreamDecl, ...]:
        return tuple(d for d in self.declared if d.pattern is not None)

    @property
    def topics(self) -> tuple[str, ...]:
        """The fixed streams' topics."""
        return tuple(t for d in self.declared for t in d.topics)

    def streams(self, topics: Iterable[str] = ()) -> tuple[Stream, ...]:
        """Every stream: the fixed ones, and a pattern's for each of ``topics`` (a broker's) it matches.
        A topic two patterns match, or two streams writing one table, is a PipelineError."""
        found = [s for d in self.declared if (s := d.fixed()) is not None]
        matched: dict[tuple[str, str], Stream] = {}  # a template without a capture gathers its topics
        for topic in sorted(set(topics) - set(self.topics)):
            claims = [d for d in self.patterns if re.fullmatch(d.pattern or "", topic)]
            if len(claims) > 1:
                names = " and ".join(repr(d.name) for d in claims)
                raise PipelineError(f"streams {names}: key 'topic-pattern': both match topic {topic!r}")
            for s in (s for d in claims if (s := d.for_topic(topic)) is not None):
                prior = matched.get((s.declared, s.raw_name))
                matched[(s.declared, s.raw_name)] = replace(s, topics=prior.topics + s.topics) if prior else s
        return _distinct_tables([*found, *matched.values()])

    def streams_of_tables(self, tables: Iterable[str]) -> tuple[Stream, ...]:
        """Every stream whose raw table exists: the fixed ones, and a pattern's for each of ``tables``
        (a catalog's raw table names in its namespace) its template matches."""
        found = [s for d in self.declared if (s := d.fixed()) is not None]
        known = {s.table for s in found}
        matched = [s for t in sorted(set(tables) - known) for d in self.patterns if (s := d.for_table(t)) is not None]
        derived = {s.iceberg_name for s in (*found, *matched)}  # a listing may hold the Iceberg tables too
        return _distinct_tables([*found, *(s for s in matched if s.raw_name not in derived)])

    def find(self, name: str, streams: Iterable[Stream]) -> Stream:
        """The stream called ``name`` (a declared stream, or a pattern stream's table) among ``streams``."""
        chosen = [s for s in streams if s.name == name]
        if chosen:
            return chosen[0]
        names = sorted({s.name for s in streams} | {d.name for d in self.declared if d.pattern is None})
        pattern = [d.name for d in self.patterns if d.name == name]
        if pattern:
            raise PipelineError(
                f"stream {name!r} is a topic pattern: name one of its tables ({', '.join(names) or 'none yet'})"
            )
        raise PipelineError(f"no stream {name!r} in {self.source}: expected one of {', '.join(names)}")


def _distinct_tables(streams: list[Stream]) -> tuple[Stream, ...]:
    seen: dict[str, Stream] = {}
    for s in streams:
        for table in (s.raw_name, s.iceberg_name):
            other = seen.setdefault(table, s)
            if other is not s:
                pair = f"{other.declared!r} and {s.declared!r}" if other.declared != s.declared else repr(s.declared)
                raise PipelineError(f"streams {pair}: key 'table': both write {table}")
    return tuple(streams)


# --- loading ---------------------------------------------------------------------------------------


def load_pipeline(settings: Settings) -> Pipeline:
    """The pipeline of ``settings``: PIPELINE's file, else the one stream the settings describe."""
    if settings.pipeline is None:
        return Pipeline((_settings_stream(settings),), "the settings")
    return read_pipeline(settings.pipeline, settings)


def _settings_stream(settings: Settings) -> StreamDecl:
    return StreamDecl(
        name=settings.table,
        namespace=settings.namespace,
        table=settings.table,
        iceberg_table=f"{settings.table}{ICEBERG_SUFFIX}",
        schema=declared_schema(settings),
        topics=(settings.kafka_topic,) if settings.kafka_topic else (),
    )


def read_pipeline(path: Path, settings: Settings) -> Pipeline:
    """The pipeline declared in the TOML file ``path``; every error one line naming the stream and key."""
    where = f"PIPELINE={path}"
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise PipelineError(f"{where}: cannot read it: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise PipelineError(f"{where}: not TOML: {exc}") from None
    try:
        spec = PipelineFile.model_validate(data)
    except ValidationError as exc:
        raise PipelineError(f"{where}: {_one_line(exc, data)}") from None
    declared = tuple(_declared(s, spec.defaults, path.parent, settings, where) for s in spec.streams)
    _check_distinct(declared, where)
    return Pipeline(declared, str(path))


def _one_line(exc: ValidationError, data: Any) -> str:
    error = exc.errors()[0]
    loc = list(error["loc"])
    head = ""
    if loc[:1] == ["streams"] and len(loc) > 1 and isinstance(loc[1], int):
        entry = data["streams"][loc[1]] if isinstance(data.get("streams"), list) else {}
        label = entry.get("name") if isinstance(entry, Mapping) else None
        head = f"stream {label!r}: " if isinstance(label, str) else f"streams[{loc[1]}]: "
        loc = loc[2:]
    elif loc[:1] == ["defaults"]:
        head, loc = "[defaults]: ", loc[1:]
    key = ".".join(str(p) for p in loc)
    if error["type"] == "extra_forbidden":
        return f"{head}unknown key {key!r}"
    if error["type"] == "missing":
        return f"{head}key {key!r} is missing"
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{head}key {key!r}: {message}" if key else f"{head}{message}"


def _declared(s: StreamSpec, defaults: LayoutSpec, folder: Path, settings: Settings, where: str) -> StreamDecl:
    def pick(key: str) -> Any:
        value = getattr(s, key)
        return value if value is not None else getattr(defaults, key)

    head = f"{where}: stream {s.name!r}"
    if s.topics is not None and s.topic_pattern is not None:
        raise PipelineError(f"{head}: keys 'topics' and 'topic-pattern' exclude each other")
    if s.topic_pattern is None and s.table is not None and _CAPTURE.search(s.table):
        raise PipelineError(f"{head}: key 'table': {{N}} needs a 'topic-pattern'")
    if s.schema_file is None:
        raise PipelineError(f"{head}: key 'schema' is missing: the stream's JSON Schema file")
    table = s.table or s.name
    key = pick("key")
    try:
        schema = load_schema(
            folder / s.schema_file,
            event_time=pick("event_time"),
            key=tuple(key) if key is not None else None,
            partition_by=pick("partition_by"),
        )
    except SchemaError as exc:
        raise PipelineError(f"{head}: key 'schema': {exc}") from None
    namespace = pick("namespace")
    every, look_back = pick("compact_every"), pick("look_back")
    return StreamDecl(
        name=s.name,
        namespace=valid_namespace(namespace) if namespace else settings.namespace,
        table=table,
        iceberg_table=s.iceberg_table or f"{table}{ICEBERG_SUFFIX}",
        schema=schema,
        topics=tuple(s.topics or ()),
        pattern=s.topic_pattern,
        compact_every_s=parse_duration(every) if every else None,
        look_back_s=parse_duration(look_back) if look_back else None,
    )


def _check_distinct(declared: tuple[StreamDecl, ...], where: str) -> None:
    names: set[str] = set()
    owner: dict[str, str] = {}
    for d in declared:
        if d.name in names:
            raise PipelineError(f"{where}: stream {d.name!r}: key 'name': two streams are called {d.name!r}")
        names.add(d.name)
        for topic in d.topics:
            other = owner.setdefault(topic, d.name)
            if other != d.name:
                raise PipelineError(f"{where}: stream {d.name!r}: key 'topics': topic {topic!r} is stream {other!r}'s")
    for d in declared:
        for p in (p for p in declared if p.pattern is not None and p is not d):
            claimed = [t for t in d.topics if re.fullmatch(p.pattern or "", t)]
            if claimed:
                raise PipelineError(
                    f"{where}: stream {d.name!r}: key 'topics': topic {claimed[0]!r} also matches stream "
                    f"{p.name!r}'s topic-pattern"
                )
    try:
        Pipeline(declared, where).streams()
    except PipelineError as exc:
        raise PipelineError(f"{where}: {exc}") from None
    templates: dict[tuple[tuple[str, ...], str], str] = {}
    for d in declared:
        if d.pattern is not None:
            other = templates.setdefault((d.namespace, d.table), d.name)
            if other != d.name:
                raise PipelineError(f"{where}: streams {other!r} and {d.name!r}: key 'table': both write {d.table}")
