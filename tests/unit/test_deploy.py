"""deploy/docker/: the ingestion image (Flink's Kubernetes operator) and the compaction image (Spark on
Kubernetes) install the locked job environments, from the base image of the locked engine's
version. No Docker engine here builds them: these checks read the Dockerfiles."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "deploy" / "docker"
# image → (its base image ARG, the distribution the base image version must equal, the lock file)
IMAGES = {
    "ingestion": ("FLINK_IMAGE", "apache-flink", "envs/ingestion/requirements.txt"),
    "compaction": ("SPARK_IMAGE", "pyspark", "envs/compaction/requirements.txt"),
}


def _dockerfile(name: str) -> str:
    return (DOCKER / f"{name}.Dockerfile").read_text()


@pytest.mark.parametrize("name", sorted(IMAGES))
def test_each_image_installs_its_lock_file_with_hashes(name: str) -> None:
    _, _, lock = IMAGES[name]
    text = _dockerfile(name)
    assert f"COPY {lock} /tmp/lakeflow/requirements.txt\n" in text
    assert "uv pip install --python /opt/lakeflow/bin/python --require-hashes -r /tmp/lakeflow/requirements.txt\n" in text
    assert "uv pip install --python /opt/lakeflow/bin/python --no-deps /tmp/lakeflow " in text  # lakeflow, nothing more
    assert (REPO / lock).is_file(), f"{lock}: no such lock file (make lock writes it)"


@pytest.mark.parametrize("name", sorted(IMAGES))
def test_each_base_image_is_the_locked_engine_version(name: str) -> None:
    arg, distribution, lock = IMAGES[name]
    image = re.search(rf"^ARG {arg}=\S+:(\d+\.\d+\.\d+)\S*$", _dockerfile(name), re.M)
    assert image, f"{name}.Dockerfile: no ARG {arg}=<image>:<x.y.z>…"
    pinned = re.search(rf"^{distribution}==(\S+)", (REPO / lock).read_text(), re.M)
    assert pinned and pinned.group(1) == image.group(1), (lock, pinned and pinned.group(1), image.group(1))


@pytest.mark.parametrize("name", sorted(IMAGES))
def test_what_each_image_copies_is_in_the_repository_or_built_by_make(name: str) -> None:
    built = {"build/lakeflow-flink.jar": "make jar", "build/jars/spark-hadoop-*/*.jar": "make s3a-jars"}
    makefile = (REPO / "Makefile").read_text()
    assert "$(JAR): " in makefile and "JAR := build/lakeflow-flink.jar" in makefile
    assert "s3a-jars: install" in makefile and "lakeflow jars spark" in makefile
    # .dockerignore excludes everything ("*") but what it names with "!"
    allowed = [p[1:].rstrip("/") for p in (REPO / ".dockerignore").read_text().splitlines() if p.startswith("!")]
    for line in re.findall(r"^COPY (?!--from)(.+)$", _dockerfile(name), re.M):
        *sources, _ = line.split()
        for source in sources:
            if source not in built and source not in IMAGES[name]:
                assert list(REPO.glob(source)), f"{name}.Dockerfile copies {source}: not in the repository"
            assert any(source == a or source.startswith(a + "/") for a in allowed), (
                f".dockerignore keeps {source} out of the build context")
