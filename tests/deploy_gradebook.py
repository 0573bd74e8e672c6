"""The gradebook's URL as the deployment's documents tell the operator to write it, and an
instructor's server as the image has it, unable to import the grader.

deploy/README.md's ``kubectl create secret generic andrea-gradebook --from-literal=url='...'``
gives the one form the Secret holds (``postgresql://grader:PASSWORD@HOST/gradebook``); every
pod that reads the Secret (an instructor's server, through nbgrader_config.py, and the
grading Job, through the grader) gets it in ``$NBGRADER_DB_URL`` exactly as written. The tests
take the form from the README itself, so a test of "the documented URL" follows the document.
"""
from __future__ import annotations

import re
from pathlib import Path

from deploy_files import DEPLOY

README = DEPLOY / "README.md"
SECRET_COMMAND = re.compile(r"create secret generic andrea-gradebook\s+--from-literal=url='(?P<url>[^']+)'")
# every PostgreSQL URL written anywhere (the scheme, with a driver if one is named)
DATABASE_URL = re.compile(r"\bpostgres(?:ql)?(?:\+[A-Za-z0-9_]+)?://[^\s'\"`)]*")
# the deployment's own words: its documents and the comments of its files (the chart's
# published schema, deploy/z2jh/chart-4.3.1/, is the chart's, about the hub's own database)
DOCUMENTS = ("README.md", "k8s/*.yaml", "z2jh/values.yaml", "image/*")


def documented_url(password: str, host: str) -> str:
    """The README's Secret URL with its placeholders filled in."""
    m = SECRET_COMMAND.search(README.read_text())
    assert m, "deploy/README.md no longer gives the command that creates the gradebook's Secret"
    url = m.group("url")
    assert "PASSWORD" in url and "HOST" in url, url
    return url.replace("PASSWORD", password).replace("HOST", host)


def urls_in_documents() -> dict[str, list[str]]:
    """{file relative to deploy/: the PostgreSQL URLs it writes}, for every file that writes one."""
    found: dict[str, list[str]] = {}
    for pattern in DOCUMENTS:
        for path in sorted(DEPLOY.glob(pattern)):
            if path.is_file():
                urls = DATABASE_URL.findall(Path(path).read_text())
                if urls:
                    found[str(path.relative_to(DEPLOY))] = urls
    return found


def hide_the_grader(folder: Path) -> Path:
    """Make ``folder`` a directory that, first on ``PYTHONPATH``, makes ``classroom``
    unimportable: an instructor's server in the image cannot import the grader (the image
    keeps it in ``/opt/andrea-block-lab``, on no Python path), while this checkout's
    environment has the repository on its path. Returns ``folder``."""
    (folder / "classroom").mkdir(parents=True, exist_ok=True)
    (folder / "classroom" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'classroom'\", name='classroom')\n")
    return folder
