"""The pipeline file (PIPELINE): the issue's TOML as written, the settings' one stream built by the same
code, a topic pattern's streams from topics and from tables, and every bad input one line naming the
stream and the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lakeflow.settings import load_settings
from lakeflow.settings.env import SettingsError
from lakeflow.streams import Pipeline, PipelineError, load_pipeline

ISSUE_TOML = """\
[defaults]
namespace = "plant"

[[streams]]
name = "vibration"
topics = ["plant.vibration"]
schema = "schemas/vibration.schema.json"   # relative to the pipeline file
table = "vibration"                         # raw table; the Iceberg table is derived as today

[[streams]]
name = "meters"
topic-pattern = 'plant\\.meters\\.(.+)'      # one table per matching topic
schema = "schemas/meter.schema.json"
table = "meters_{1}"                        # {1}: the pattern's first capture
key = ["meter_id", "seq"]
event-time = "read_at"
"""
METER = {"title": "meter", "type": "object", "required": ["meter_id", "seq", "read_at"],
         "properties": {"meter_id": {"type": "string"}, "seq": {"type": "integer"}, "read_at": {"type": "integer"}}}
VIBRATION = {"title": "vibration", "type": "object", "required": ["device_id", "seq", "at"],
             "properties": {"device_id": {"type": "string"}, "seq": {"type": "integer"},
                            "at": {"type": "string", "format": "date-time"}},
             "x-lakeflow": {"key": ["device_id", "seq"]}}


def pipeline(tmp_path: Path, text: str = ISSUE_TOML, **env: str) -> Pipeline:
    (tmp_path / "schemas").mkdir(exist_ok=True)
    (tmp_path / "schemas" / "meter.schema.json").write_text(json.dumps(METER))
    (tmp_path / "schemas" / "vibration.schema.json").write_text(json.dumps(VIBRATION))
    (tmp_path / "pipeline.toml").write_text(text)
    settings = load_settings({"PIPELINE": str(tmp_path / "pipeline.toml"), **env}, env_file=tmp_path / "none.env")
    return load_pipeline(settings)


def test_the_issues_pipeline_as_written(tmp_path: Path) -> None:
    p = pipeline(tmp_path)
    streams = p.streams(["plant.vibration", "plant.meters.hall1", "plant.meters.hall2", "plant.other"])
    assert [(s.name, s.declared, s.raw_name, s.iceberg_name, s.topics) for s in streams] == [
        ("vibration", "vibration", "plant.vibration", "plant.vibration-compacted", ("plant.vibration",)),
        ("meters_hall1", "meters", "plant.meters_hall1", "plant.meters_hall1-compacted", ("plant.meters.hall1",)),
        ("meters_hall2", "meters", "plant.meters_hall2", "plant.meters_hall2-compacted", ("plant.meters.hall2",)),
    ]
    meters = streams[1].schema
    assert (meters.key, meters.event_time, streams[0].schema.key) == (("meter_id", "seq"), "read_at",
                                                                      ("device_id", "seq"))
    by_table = p.streams_of_tables(["vibration", "meters_hall1", "meters_hall1-compacted", "unrelated"])
    assert [(s.name, s.topics) for s in by_table] == [("vibration", ("plant.vibration",)), ("meters_hall1", ())]
    assert p.find("meters_hall2", streams).table == "meters_hall2"
    with pytest.raises(PipelineError, match="'meters' is a topic pattern: name one of its tables"):
        p.find("meters", streams)


def test_without_a_pipeline_file_the_settings_are_one_stream(tmp_path: Path) -> None:
    settings = load_settings({"TABLE": "readings", "KAFKA_TOPIC": "t1"}, env_file=tmp_path / "none.env")
    (stream,) = load_pipeline(settings).streams()
    assert (stream.name, stream.raw_name, stream.iceberg_name, stream.topics) == (
        "readings", "iot.readings", "iot.readings-compacted", ("t1",))


def test_a_pattern_without_capture_gathers_its_topics_into_one_table(tmp_path: Path) -> None:
    text = ISSUE_TOML.replace('table = "meters_{1}"', 'table = "meters"')
    _, stream = pipeline(tmp_path, text).streams(["plant.meters.a", "plant.meters.b"])
    assert (stream.table, stream.topics) == ("meters", ("plant.meters.a", "plant.meters.b"))


@pytest.mark.parametrize(("change", "message"), [
    (("event-time = ", "evnet-time = "), "stream 'meters': unknown key 'evnet-time'"),
    (("[defaults]", "[defaults]\nspeed = 1"), r"\[defaults\]: unknown key 'speed'"),
    (("meter.schema.json", "missing.schema.json"), "stream 'meters': key 'schema': .*cannot read it"),
    (('table = "vibration"', 'table = "meters_hall1"'), "streams 'vibration' and 'meters'|key 'table'"),
    (('topics = ["plant.vibration"]', 'topics = ["plant.meters.x"]'),
     "stream 'vibration': key 'topics': topic 'plant.meters.x' also matches stream 'meters'"),
    (("table = \"meters_{1}\"", "table = \"meters_{2}\""), "stream 'meters': key 'table': \\{2\\} names no capture"),
    (('name = "meters"', 'name = "vibration"'), "key 'name': two streams are called 'vibration'"),
    (('table = "vibration"', 'table = "vib ration"'), "stream 'vibration': key 'table': 'vib ration': expected"),
    (("'plant\\.meters\\.(.+)'", "'plant\\.(meters'"), "stream 'meters': key 'topic-pattern'"),
    (('namespace = "plant"', 'namespace = 3'), r"\[defaults\]: key 'namespace'"),
])
def test_bad_input_is_one_line_naming_the_stream_and_the_key(tmp_path: Path, change: tuple[str, str],
                                                             message: str) -> None:
    with pytest.raises(PipelineError, match=message) as caught:
        pipeline(tmp_path, ISSUE_TOML.replace(*change)).streams(["plant.meters.hall1"])
    assert "\n" not in str(caught.value) and caught.value.exit_code == 2


def test_a_topic_two_streams_claim_and_a_capture_that_is_no_table_name(tmp_path: Path) -> None:
    p = pipeline(tmp_path)
    with pytest.raises(PipelineError, match="stream 'meters': key 'table': topic 'plant.meters.a b' gives 'meters_a b'"):
        p.streams(["plant.meters.a b"])
    text = ISSUE_TOML + '\n[[streams]]\nname = "more"\ntopic-pattern = \'plant\\.m(.+)\'\n' \
        'schema = "schemas/meter.schema.json"\ntable = "more_{1}"\nkey = ["meter_id", "seq"]\nevent-time = "read_at"\n'
    with pytest.raises(PipelineError, match="streams 'meters' and 'more': key 'topic-pattern': both match"):
        pipeline(tmp_path, text).streams(["plant.meters.x"])


def test_the_variables_of_one_stream_and_a_pipeline_exclude_each_other(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="TABLE, KAFKA_TOPIC and PIPELINE are both set"):
        load_settings({"PIPELINE": "p.toml", "TABLE": "x", "KAFKA_TOPIC": "t"}, env_file=tmp_path / "none.env")
    settings = load_settings({"PIPELINE": "p.toml", "SOURCE": "kafka", "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9092"},
                             env_file=tmp_path / "none.env")  # the pipeline names the topics
    assert settings.pipeline is not None and settings.kafka_topic is None


def test_pipeline_show_and_register_cover_every_stream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture) -> None:
    from lakeflow.cli.main import main

    pipeline(tmp_path)  # the files
    monkeypatch.setenv("PIPELINE", str(tmp_path / "pipeline.toml"))
    monkeypatch.setenv("LAKEFLOW_HOME", str(tmp_path / "home"))
    assert main(["register"]) == 0
    out, err = capsys.readouterr()
    assert "created: plant.vibration in the local catalog" in err
    assert main(["register"]) == 0 and "already registered: plant.vibration" in capsys.readouterr().err
    from lakeflow.catalog.local import LocalCatalog

    LocalCatalog(tmp_path / "home").register(("plant",), "meters_hall1")  # as the job does for a new topic
    assert main(["pipeline", "show", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [(s["stream"], s["raw_table"], s["iceberg_table"]) for s in shown["streams"]] == [
        ("vibration", "plant.vibration", "plant.vibration-compacted"),
        ("meters_hall1", "plant.meters_hall1", "plant.meters_hall1-compacted")]
    assert all(s["plan"]["exists"] is False for s in shown["streams"])
    assert main(["pipeline", "show"]) == 0
    text = capsys.readouterr().out
    assert "stream meters: topic pattern" in text and "stream meters_hall1 (of meters)" in text
    (tmp_path / "pipeline.toml").write_text(ISSUE_TOML.replace("event-time", "evnet-time"))
    assert main(["pipeline", "show"]) == 2
    assert capsys.readouterr().err.strip().endswith("stream 'meters': unknown key 'evnet-time'")
