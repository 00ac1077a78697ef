"""The README's Python example and the packaged saxpy example run against the daemon."""

import os
import re
import subprocess
import sys

import numpy  # noqa: F401 - the example imports it too

WORKSPACE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def readme_python_example() -> str:
    with open(os.path.join(WORKSPACE, "README.md")) as readme:
        text = readme.read()
    section = text.split("## Python\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_example_prints_what_it_says(daemon, capsys):
    source = readme_python_example().replace("unix:/tmp/gpucmdd.sock", daemon.target)
    exec(compile(source, "README.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    assert printed[1] == "[0. 2. 4. 6.]"
    assert printed[2] == "[3. 5. 7. 9.]"
    assert "driver='cpu'" in printed[0] and "serving=True" in printed[0]


def test_the_saxpy_example_checks_its_result(daemon):
    example = os.path.join(WORKSPACE, "client", "python", "examples", "saxpy_example.py")
    result = subprocess.run([sys.executable, example, f"--target={daemon.target}"],
                            capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert result.returncode == 0, result.stderr
    assert "max error" in result.stdout
