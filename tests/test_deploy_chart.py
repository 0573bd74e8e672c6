"""deploy/z2jh/values.yaml installs: checked the way ``helm install`` checks it.

- the chart's default values (Zero to JupyterHub 4.3.1, copied in deploy/z2jh/chart-4.3.1/)
  are merged under ours by Helm's rules, then validated against the chart's JSON schema
  (``deploy/check_values.py``, with ``jsonschema``); the values that came before (groups under
  ``hub.loadGroups``) and a misspelt key are rejected with the key's path;
- Helm's merge rules themselves: maps merged recursively, ours win, ``null`` deletes, lists
  are replaced whole;
- the pre-spawn hook of the values (run with a spawner standing in for KubeSpawner's): an
  instructor gets the course image, the gradebook Secret and the label the gradebook's
  NetworkPolicy selects; a learner none of them;
- learners' servers get no egress to private addresses, and one rule of ours: the exchange.
"""
from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest
import yaml

import deploy_files
from deploy import check_values

ROOT = deploy_files.ROOT

VALUES = ROOT / "deploy" / "z2jh" / "values.yaml"


def _values() -> dict:
    return yaml.safe_load(VALUES.read_text())


def _defaults() -> dict:
    return yaml.safe_load((check_values.CHART / "values.yaml").read_text())


def test_values_pass_the_charts_schema():
    assert check_values.problems(_values()) == []
    proc = subprocess.run([sys.executable, str(ROOT / "deploy" / "check_values.py")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "values.yaml: valid for Zero to JupyterHub 4.3.1"


def test_groups_under_hub_load_groups_are_rejected(tmp_path):
    bad = _values()
    bad["hub"]["loadGroups"] = bad["hub"]["config"]["JupyterHub"].pop("load_groups")
    assert check_values.problems(bad) == ["hub: Additional properties are not allowed ('loadGroups' was unexpected)"]
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(bad))
    proc = subprocess.run([sys.executable, str(ROOT / "deploy" / "check_values.py"), str(path)],
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == ["values.yaml: hub: Additional properties are not allowed "
                                        "('loadGroups' was unexpected)"]
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("path, value, message", [
    (["singleuser", "networkPolicy", "egres"], [], "'egres' was unexpected"),
    (["singleuser", "storage", "capacity"], 2, "2 is not of type 'string'"),
    (["cull", "timeout"], "an hour", "'an hour' is not of type 'integer'"),
])
def test_a_wrong_key_or_type_is_named(path, value, message):
    bad = _values()
    node = bad
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    found = check_values.problems(bad)
    assert len(found) == 1 and message in found[0], found
    where = ".".join(path[:-1] if "unexpected" in message else path)
    assert found[0].startswith(where + ":"), found


def test_bad_input_is_one_line(tmp_path):
    for text, expected in (("- a list\n", "expected a YAML mapping"), ("a: [\n", "is not YAML")):
        path = tmp_path / "v.yaml"
        path.write_text(text)
        proc = subprocess.run([sys.executable, str(ROOT / "deploy" / "check_values.py"), str(path)],
                              capture_output=True, text=True)
        assert proc.returncode == 2 and expected in proc.stderr and len(proc.stderr.splitlines()) == 1, proc.stderr
    proc = subprocess.run([sys.executable, str(ROOT / "deploy" / "check_values.py"), str(tmp_path / "none.yaml")],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("VALUES: cannot read"), proc.stderr


def test_helm_merge_rules():
    defaults = {"a": {"b": 1, "c": {"d": 2, "e": 3}}, "l": [1, 2], "s": "x", "t": {"u": 1}}
    user = {"a": {"c": {"d": 20, "e": None}, "f": 4}, "l": [9], "s": None, "new": {"k": None, "m": 1}}
    assert check_values.coalesce(user, defaults) == {
        "a": {"b": 1, "c": {"d": 20}, "f": 4}, "l": [9], "t": {"u": 1}, "new": {"m": 1}}
    assert defaults["a"]["c"] == {"d": 2, "e": 3}  # the chart's defaults are left alone
    # on the real chart: our networkPolicy keeps the chart's egressAllowRules
    merged = check_values.coalesce(_values(), _defaults())
    rules = merged["singleuser"]["networkPolicy"]["egressAllowRules"]
    assert rules == _defaults()["singleuser"]["networkPolicy"]["egressAllowRules"]


def test_learners_reach_no_private_address_but_the_exchange():
    merged = check_values.coalesce(_values(), _defaults())
    policy = merged["singleuser"]["networkPolicy"]
    assert policy["enabled"] is True
    assert policy["egressAllowRules"]["privateIPs"] is False  # so no in-cluster gradebook
    assert policy["egress"] == [{"to": [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "ngshare"}}}],
                                 "ports": [{"protocol": "TCP", "port": 8080}]}]
    ngshare = {d["kind"]: d for d in deploy_files.manifests(deploy_files.K8S / "ngshare.yaml")}
    assert ngshare["Deployment"]["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"] == "ngshare"
    port = ngshare["Service"]["spec"]["ports"][0]["port"]
    assert port == 8080 and merged["hub"]["services"]["ngshare"]["url"] == f"http://ngshare:{port}"
    # nothing of the old shared-folder exchange is left: no chmod at spawn, no exchange volume
    assert "chmod" not in VALUES.read_text()
    assert not merged["singleuser"].get("initContainers")
    assert not merged["singleuser"]["storage"].get("extraVolumes")


class _Group(SimpleNamespace):
    pass


def _spawn(groups: list[str]):
    """Run the values' pre-spawn hook on a spawner with KubeSpawner's attributes."""
    from traitlets.config import Config
    c = Config()
    code = _values()["hub"]["extraConfig"]["andrea-roles"]
    exec(compile(code, "values.yaml:hub.extraConfig.andrea-roles", "exec"), {"c": c, "__name__": "z2jh"})
    hook = c.KubeSpawner.pre_spawn_hook
    shared_env = {"ANDREA_NGSHARE_URL": "x"}
    spawner = SimpleNamespace(user=SimpleNamespace(name="u", groups=[_Group(name=g) for g in groups]),
                              environment=shared_env, extra_labels={}, image="learner-image")
    import asyncio
    import os
    os.environ["ANDREA_COURSE_IMAGE"] = _values()["hub"]["extraEnv"]["ANDREA_COURSE_IMAGE"]
    try:
        asyncio.run(hook(spawner))
    finally:
        del os.environ["ANDREA_COURSE_IMAGE"]
    assert shared_env == {"ANDREA_NGSHARE_URL": "x"}  # the shared dict is not written to
    return spawner


def test_the_hook_gives_instructors_the_course_and_the_gradebook():
    policy = next(d for d in deploy_files.manifests(deploy_files.K8S / "network-policies.yaml")
                  if d["metadata"]["name"] == "andrea-instructors-to-gradebook")
    selector = policy["spec"]["podSelector"]["matchLabels"]

    inst = _spawn(["instructors"])
    assert inst.environment["ANDREA_ROLE"] == "instructor"
    assert inst.environment["JUPYTER_CONFIG_DIR"] == "/etc/andrea/instructor"
    assert inst.environment["NBGRADER_DB_URL"] == {
        "valueFrom": {"secretKeyRef": {"name": "andrea-gradebook", "key": "url"}}}
    assert inst.image == _values()["hub"]["extraEnv"]["ANDREA_COURSE_IMAGE"]
    labels = {**inst.extra_labels, "component": "singleuser-server"}  # the chart's label
    assert all(labels.get(k) == v for k, v in selector.items())

    learner = _spawn(["someone-else"])
    assert learner.environment["ANDREA_ROLE"] == "learner"
    assert learner.environment["JUPYTER_CONFIG_DIR"] == "/etc/andrea/learner"
    assert "NBGRADER_DB_URL" not in learner.environment
    assert learner.image == "learner-image"
    labels = {**learner.extra_labels, "component": "singleuser-server"}
    assert not all(labels.get(k) == v for k, v in selector.items())


def test_schema_copies_are_the_published_ones():
    import hashlib
    readme = (check_values.CHART / "README.md").read_text()
    for name in ("values.schema.yaml", "values.yaml"):
        digest = hashlib.sha256((check_values.CHART / name).read_bytes()).hexdigest()
        assert f"{digest}  {name}" in readme, name
