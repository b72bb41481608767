"""What lakeflow needs before anything is installed: Linux (process control reads ``/proc``), a Python
of pyproject's ``requires-python`` (3.11: ``typing.Self``) and a JDK 11+ with ``javac``. The Makefile runs this file first (``python lakeflow/prereqs.py``), with the
interpreter it is about to build ``.venv`` from: standard library only, so any Python 3 can say
clearly that it is the wrong one. One message per missing prerequisite, with what to install;
exit code 1 if any is missing.
"""

import re
import shutil
import subprocess
import sys
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
MIN_JDK = 11


def os_problem(platform: str = sys.platform) -> str | None:
    """Why this operating system cannot run lakeflow, or None: the Flink and Spark clusters are found,
    and stopped, through ``/proc`` (elsewhere ``lakeflow flink down`` would stop nothing)."""
    if platform == "linux":
        return None
    return (
        f"lakeflow needs Linux (it finds and stops its Flink and Spark processes through /proc); this is "
        f"{platform}. Use a Linux machine, VM or container."
    )


def python_range(pyproject: Path = PYPROJECT) -> tuple[tuple[int, int], tuple[int, int]]:
    """``requires-python = ">=A.B,<C.D"`` of pyproject.toml as ((A, B), (C, D))."""
    text = pyproject.read_text()
    low = re.search(r'requires-python\s*=\s*"[^"]*>=\s*(\d+)\.(\d+)', text)
    high = re.search(r'requires-python\s*=\s*"[^"]*<\s*(\d+)\.(\d+)', text)
    if not (low and high):
        raise ValueError(f"{pyproject}: requires-python is not of the form '>=A.B,<C.D'")
    return (int(low.group(1)), int(low.group(2))), (int(high.group(1)), int(high.group(2)))


def python_problem(version: tuple[int, int], executable: str) -> str | None:
    """Why this interpreter cannot build lakeflow's virtualenv, or None."""
    (lo, hi) = python_range()
    if lo <= version < hi:
        return None
    allowed = [f"3.{m}" for m in range(lo[1], hi[1])] if lo[0] == hi[0] == 3 else [f"{lo[0]}.{lo[1]}+"]
    newest = allowed[-1]
    return (
        f"lakeflow needs Python {' or '.join(allowed)}; {executable} is {version[0]}.{version[1]}. "
        f"Install one (Debian/Ubuntu: apt-get install python{newest} python{newest}-venv; or pyenv install "
        f"{newest}) and name it: make run PYTHON=python{newest}"
    )


def jdk_problem(javac: str | None = None) -> str | None:
    """Why there is no usable JDK (``javac`` of Java ``MIN_JDK`` or newer on PATH), or None."""
    install = (
        "Install a JDK (Debian/Ubuntu: apt-get install openjdk-17-jdk-headless) and put its bin/ on PATH: "
        "Flink runs on it and `make jar` compiles with javac."
    )
    path = javac or shutil.which("javac")
    if not path:
        return f"lakeflow needs a JDK {MIN_JDK} or newer; javac is not on PATH. {install}"
    try:
        proc = subprocess.run([path, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"lakeflow needs a JDK {MIN_JDK} or newer; {path} -version failed ({exc}). {install}"
    found = re.search(r"javac (\d+)(?:\.(\d+))?", proc.stdout + proc.stderr)
    if not found:
        return f"lakeflow needs a JDK {MIN_JDK} or newer; {path} -version says nothing readable. {install}"
    major = int(found.group(1))
    major = int(found.group(2) or 0) if major == 1 else major  # javac 1.8.0 is Java 8
    if major < MIN_JDK:
        return f"lakeflow needs a JDK {MIN_JDK} or newer; {path} is Java {major}. {install}"
    return None


def problems() -> list[str]:
    """Every missing prerequisite, one message each; on another OS than Linux only that one."""
    wrong_os = os_problem()
    if wrong_os:
        return [wrong_os]
    found = [python_problem(sys.version_info[:2], sys.executable), jdk_problem()]
    return [p for p in found if p]


def main() -> int:
    missing = problems()
    for message in missing:
        print(f"prerequisite missing: {message}", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
