"""speclab.__version__: pyproject.toml's [project] version, which CMakeLists.txt's
project(VERSION) repeats for the C++ build (speclab --version, the speclab_version attribute of
run files); found without importlib.metadata for the source and build trees, and without tomllib
on Python < 3.11."""

import re
import subprocess
import sys
from pathlib import Path

import speclab

SOURCE = Path(__file__).resolve().parents[2]


def _cmake_version():
    text = (SOURCE / "CMakeLists.txt").read_text()
    return re.search(r"project\(\s*speclab\s+VERSION\s+([0-9][^\s)]*)", text).group(1)


def _pyproject_version():
    text = (SOURCE / "pyproject.toml").read_text()
    project = re.search(r"^\[project\]$(.*?)(?=^\[|\Z)", text, re.M | re.S).group(1)
    return re.search(r'^version\s*=\s*"([^"]+)"', project, re.M).group(1)


def test_version_is_the_projects():
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", speclab.__version__), speclab.__version__
    assert speclab.__version__ == _pyproject_version()
    # The C++ build's version comes from CMakeLists.txt: the two must be changed together.
    assert _cmake_version() == _pyproject_version()


def test_version_without_tomllib(monkeypatch):
    monkeypatch.setitem(sys.modules, "tomllib", None)  # `import tomllib` raises ImportError
    assert speclab._pyproject_version(str(SOURCE / "pyproject.toml")) == _pyproject_version()


def test_another_projects_pyproject_is_not_read(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "other"\nversion = "9.9"\n')
    assert speclab._pyproject_version(str(tmp_path / "pyproject.toml")) is None
    (tmp_path / "broken.toml").write_text("[project\n")
    assert speclab._pyproject_version(str(tmp_path / "broken.toml")) is None


def test_version_of_a_build_tree_outside_the_source_tree(tmp_path):
    """A copy of the package under a build directory elsewhere finds the source tree through the
    build's CMakeCache.txt."""
    package = tmp_path / "build" / "python" / "speclab"
    package.mkdir(parents=True)
    package.joinpath("__init__.py").write_text(Path(speclab.__file__).read_text())
    (tmp_path / "build" / "CMakeCache.txt").write_text(
        f"CMAKE_BUILD_TYPE:STRING=Release\nspeclab_SOURCE_DIR:STATIC={SOURCE}\n")
    code = "import speclab; print(speclab.__version__)"
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, env={"PYTHONPATH": str(package.parent)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == _pyproject_version()
