"""build-support/test-prereqs.sh, which `make test` runs first: nothing to do when the Debian packages
the tests use are there; else apt-get as root or with passwordless sudo, or one line saying what is
missing and how to install it. Missing packages are simulated with a PATH of stand-ins (``id``,
``sudo``, ``apt-get`` recording their calls), so nothing is installed."""

from __future__ import annotations

import glob
import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "build-support" / "test-prereqs.sh"
# what the PATH of stand-ins lacks: every package but postgresql, which the script finds by its folder
POSTGRES_THERE = bool(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
MISSING = ["chromium", *([] if POSTGRES_THERE else ["postgresql"]), "prometheus", "prometheus-pushgateway"]


def _run(path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["/bin/bash", str(SCRIPT)], capture_output=True, text=True, timeout=60,
                          env={"PATH": path, "HOME": os.environ.get("HOME", "/root")})


def _stand_in(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    """A PATH folder with ``env`` and an ``apt-get`` that logs its arguments to ``calls``."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "env").symlink_to("/usr/bin/env")
    _stand_in(folder, "apt-get", f'echo "apt-get $*" >> {tmp_path / "calls"}')
    return folder


def _calls(fake_bin: Path) -> list[str]:
    calls = fake_bin.parent / "calls"
    return calls.read_text().splitlines() if calls.exists() else []


def test_with_everything_there_it_does_nothing(fake_bin: Path) -> None:
    _stand_in(fake_bin, "apt-get", "echo apt-get must not run >&2; exit 9")
    done = _run(f"{fake_bin}:{os.environ['PATH']}")  # this machine has the packages (.ci/run's make test)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_as_root_it_installs_what_is_missing(fake_bin: Path) -> None:
    _stand_in(fake_bin, "id", "echo 0")
    done = _run(str(fake_bin))
    assert done.returncode == 0, done.stderr
    assert _calls(fake_bin) == ["apt-get update -qq", f"apt-get install -y -qq {' '.join(MISSING)}"]
    assert done.stderr == f"make test: installing {' '.join(MISSING)} (apt-get)\n"


def test_with_passwordless_sudo_it_installs_through_sudo(fake_bin: Path) -> None:
    _stand_in(fake_bin, "id", "echo 1000")
    _stand_in(fake_bin, "sudo", f'echo "sudo $*" >> {fake_bin.parent / "calls"}; shift; exec "$@"')
    (fake_bin / "true").symlink_to("/bin/true")
    done = _run(str(fake_bin))
    assert done.returncode == 0, done.stderr
    assert _calls(fake_bin) == [
        "sudo -n true",
        "sudo -n apt-get update -qq",
        "apt-get update -qq",
        f"sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq {' '.join(MISSING)}",
        f"apt-get install -y -qq {' '.join(MISSING)}",
    ]


def test_without_root_or_sudo_it_says_what_to_install(fake_bin: Path) -> None:
    _stand_in(fake_bin, "id", "echo 1000")
    done = _run(str(fake_bin))
    packages = " ".join(MISSING)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (f"prerequisite missing for make test: {packages}; install them (as root): "
                           f"sudo apt-get update && sudo apt-get install -y {packages}\n")
    assert _calls(fake_bin) == []


def test_without_apt_get_it_names_the_packages(fake_bin: Path) -> None:
    (fake_bin / "apt-get").unlink()
    done = _run(str(fake_bin))
    assert done.returncode == 1
    assert done.stderr.startswith(f"prerequisite missing for make test: {' '.join(MISSING)} (Debian/Ubuntu packages;")
