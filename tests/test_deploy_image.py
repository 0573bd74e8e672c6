"""The image of deploy/image/Dockerfile, checked without building it (no registry of base
images here): parsed by Docker's own parser (the ``dockerfile`` package), its build context
computed with the Docker SDK's own ``.dockerignore`` matcher.

- the learner target installs the runtime requirements only (no pytest, Playwright, Jupyter
  Book), holds no solution in any of its stages, and keeps tini as its ENTRYPOINT;
- torch comes from PyTorch's CPU index unless a build argument names another variant;
- every file the Dockerfile copies exists and is in the build context; build outputs and
  environments at any depth are not (nested node_modules, book/_vendor, _build, venvs ...);
- each check rejects a bad copy of the Dockerfile or of .dockerignore.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from packaging.requirements import Requirement

import deploy_files  # noqa: E402

ROOT = deploy_files.ROOT
TOOLING = {"pytest", "pytest-timeout", "playwright", "jupyter-book", "sphinx", "sphinx-intl", "sphinx-exercise",
           "sphinxcontrib-bibtex", "jupytext", "kubernetes-validate", "dockerfile", "jsonschema", "docker"}


def _requirements(path: Path) -> tuple[list[Requirement], list[str]]:
    reqs, includes = [], []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("-r "):
            includes.append(line[3:].strip())
        else:
            reqs.append(Requirement(line))
    return reqs, includes


def _installed_files(instructions) -> list[str]:
    """The requirements files the RUN instructions install (``pip install -r``; not those
    that ``pip uninstall -r`` takes out)."""
    import re
    out = []
    for ins in instructions:
        if ins.cmd == "RUN":
            for command in re.split(r";|&&|\|\|", ins.value[0]):
                if re.search(r"\bpip\s+install\b", command):
                    out += re.findall(r"-r\s+([^\s;&|]+)", command)
    return out


def image_problems(instructions, dockerignore: str) -> list[str]:
    problems = []
    learner = deploy_files.stage_instructions_of(instructions, "learner")
    files = _installed_files(learner)
    names = {Path(f).name for f in files}
    if names != {"requirements-runtime.txt", "requirements-nodeps.txt"}:
        problems.append(f"the learner image installs {sorted(names)}, expected the runtime files only")
    for ins in learner:
        if ins.cmd == "COPY" and not any(f.startswith("--from") for f in ins.flags):
            if any(src in (".", "./", "solutions", "solutions/") for src in ins.value[:-1]):
                problems.append(f"the learner image copies {list(ins.value[:-1])} (the solutions)")
    entry = [i for i in learner if i.cmd == "ENTRYPOINT"]
    if not entry or not entry[-1].json or entry[-1].value[0] != "tini":
        problems.append("the learner image's ENTRYPOINT is not tini in exec form")
    args = {i.value[0].split("=")[0]: i.value[0].split("=", 1)[1] for i in learner if i.cmd == "ARG" and "=" in i.value[0]}
    runs = " ".join(i.value[0] for i in learner if i.cmd == "RUN")
    if args.get("TORCH_VARIANT") != "cpu" or "download.pytorch.org/whl/$TORCH_VARIANT" not in runs:
        problems.append("torch does not come from PyTorch's CPU index by default")
    from docker.utils.build import exclude_paths
    patterns = [p.strip() for p in dockerignore.splitlines() if p.strip() and not p.startswith("#")]
    context = exclude_paths(str(ROOT), patterns, dockerfile="deploy/image/Dockerfile")
    for ins in instructions:
        if ins.cmd != "COPY" or any(f.startswith("--from") for f in ins.flags):
            continue
        for src in ins.value[:-1]:
            if src in (".", "./"):
                continue
            path = ROOT / src
            if not path.exists():
                problems.append(f"COPY {src}: no such file in the repository")
            elif path.is_file() and src not in context:
                problems.append(f"COPY {src}: left out of the build context by .dockerignore")
    return problems


def _dockerignore() -> str:
    return (ROOT / ".dockerignore").read_text()


def test_the_dockerfile_passes():
    assert image_problems(deploy_files.dockerfile(), _dockerignore()) == []


def _bad(text_edit) -> list:
    import dockerfile as df
    return list(df.parse_string(text_edit(deploy_files.DOCKERFILE.read_text())))


@pytest.mark.parametrize("edit, expected", [
    (lambda t: t.replace("-r /tmp/requirements/requirements-runtime.txt", "-r requirements.txt"),
     "installs ['requirements-nodeps.txt', 'requirements.txt']"),
    (lambda t: t.replace("FROM base AS learner\n", "FROM base AS learner\nCOPY . /opt/andrea-block-lab/\n"),
     "copies ['.']"),
    (lambda t: t.replace('ENTRYPOINT ["tini", "-g", "--"]\nCMD ["andrea-singleuser"',
                         'ENTRYPOINT ["python"]\nCMD ["andrea-singleuser"'), "ENTRYPOINT is not tini"),
    (lambda t: t.replace("ARG TORCH_VARIANT=cpu", "ARG TORCH_VARIANT=pypi"), "CPU index"),
    (lambda t: t.replace("COPY cuda ./cuda", "COPY kernels ./kernels"), "COPY kernels: no such file"),
])
def test_a_bad_dockerfile_is_rejected(edit, expected):
    found = image_problems(_bad(edit), _dockerignore())
    assert any(expected in p for p in found), found


def test_a_context_that_drops_a_needed_file_is_rejected():
    found = image_problems(deploy_files.dockerfile(), _dockerignore() + "\n**/nbgrader_config.py\n")
    assert any("deploy/image/nbgrader_config.py: left out" in p for p in found), found


def test_the_runtime_requirements_hold_no_tooling_and_make_installs_them():
    runtime, includes = _requirements(ROOT / "requirements-runtime.txt")
    assert includes == []
    names = {r.name.lower() for r in runtime}
    assert not names & TOOLING, names & TOOLING
    assert {"torch", "nbgrader", "jupyterlab", "ipykernel", "jupyterhub"} <= names
    everything, includes = _requirements(ROOT / "requirements.txt")
    assert includes == ["requirements-runtime.txt"]
    assert {"pytest", "playwright", "jupyter-book"} <= {r.name.lower() for r in everything}
    # what the image installs is what the tests run with: every runtime pin is met here
    from importlib.metadata import version
    for req in runtime + _requirements(ROOT / "requirements-nodeps.txt")[0]:
        assert req.specifier.contains(version(req.name), prereleases=True), (req, version(req.name))


def test_what_requirements_remove_names_is_gone_here_and_from_the_image():
    removed, includes = _requirements(ROOT / "requirements-remove.txt")
    assert removed and includes == []
    from importlib.metadata import PackageNotFoundError, version
    for req in removed:
        with pytest.raises(PackageNotFoundError):
            version(req.name)
    learner = deploy_files.stage_instructions_of(deploy_files.dockerfile(), "learner")
    runs = " ".join(i.value[0] for i in learner if i.cmd == "RUN")
    assert "pip uninstall -y -r /tmp/requirements/requirements-remove.txt" in runs


def test_build_outputs_at_any_depth_stay_out_of_the_context(tmp_path):
    from docker.utils.build import exclude_paths
    made = ["andrea_ref/__init__.py", "solutions/03_gelu/gelu.ipynb", "deploy/image/nbgrader_config.py",
            "hub/node_modules/x/index.js", "lab/deep/er/node_modules/y.js", "node_modules/z.js",
            "book/_vendor/mathjax/tex-chtml.js", "_build/html/index.html", "book/locales/_build/x",
            ".venv/bin/python", ".venv-hub/bin/python", ".venv-ngshare/bin/python", "sub/venv/bin/python",
            "andrea_ref/__pycache__/x.cpython-311.pyc", "solutions/.ipynb_checkpoints/a.ipynb", "_grading/state/x",
            "gradebook.db", "course/gradebook.db", ".git/HEAD", "x.egg-info/PKG-INFO", "bench/results/r.json",
            "andrea_ref/locales/de/LC_MESSAGES/m.mo"]
    for rel in made:
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("x")
    patterns = [p.strip() for p in _dockerignore().splitlines() if p.strip() and not p.startswith("#")]
    context = {p for p in exclude_paths(str(tmp_path), patterns) if (tmp_path / p).is_file()}
    assert context == {"andrea_ref/__init__.py", "solutions/03_gelu/gelu.ipynb", "deploy/image/nbgrader_config.py"}
    # the old file, which named node_modules at the top only, lets nested ones in
    old = [p for p in patterns if p not in ("**/node_modules",)] + ["node_modules"]
    assert "lab/deep/er/node_modules/y.js" in exclude_paths(str(tmp_path), old)
