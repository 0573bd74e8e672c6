"""The deployment files as the deploy tests read them: one loader for each (deploy/)."""
from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
DOCKERFILE = DEPLOY / "image" / "Dockerfile"


def manifests(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(Path(path).read_text()) if d]


def grading_job() -> dict:
    return next(d for d in manifests(K8S / "grade-job.yaml") if d["kind"] == "Job")


def dockerfile() -> list:
    """The Dockerfile's instructions, parsed by Docker's own parser (the ``dockerfile`` package)."""
    import dockerfile as df
    return list(df.parse_file(str(DOCKERFILE)))


def stage_instructions(target: str) -> list:
    """The instructions that make the Dockerfile's ``target``, through the stages it is built FROM."""
    return stage_instructions_of(dockerfile(), target)


def stage_instructions_of(instructions, target: str) -> list:
    stages: dict[str, list] = {}
    parent: dict[str, str | None] = {}
    name = None
    for ins in instructions:
        if ins.cmd == "FROM":
            words = ins.value
            name = words[2].lower() if len(words) == 3 and words[1].upper() == "AS" else words[0]
            parent[name] = words[0] if words[0] in stages else None
            stages[name] = []
        elif name is not None:
            stages[name].append(ins)
    chain = []
    while target is not None:
        chain.insert(0, target)
        target = parent[target]
    return [ins for s in chain for ins in stages[s]]


def image_entrypoint(target: str = "course") -> list[str]:
    """The ENTRYPOINT of the image the grading Job runs (target ``course``)."""
    entry = [i for i in stage_instructions(target) if i.cmd == "ENTRYPOINT"][-1]
    assert entry.json, "ENTRYPOINT must be in exec form (a shell form would not run tini as PID 1)"
    return list(entry.value)


def image_user(target: str = "course") -> int:
    users = [i for i in stage_instructions(target) if i.cmd == "USER"]
    return int(users[-1].value[0])
