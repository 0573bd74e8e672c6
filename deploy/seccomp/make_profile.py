"""Build the grading pods' seccomp profile, ``andrea-grading.json`` (a Localhost profile).

    python deploy/seccomp/make_profile.py          # write andrea-grading.json
    python deploy/seccomp/make_profile.py --check  # exit 1 if the file is not what this builds

The profile is containerd's RuntimeDefault for a container with no capability at all
(``containerd_default.py``), on amd64 and arm64 nodes, with what bubblewrap needs to build
the grader's sandbox inside the pod's user namespace, and nothing else:

- ``clone`` with namespace flags (RuntimeDefault allows ``clone`` only without them) and
  ``unshare``: the sandbox's new user, mount, PID, network, IPC, UTS and cgroup namespaces;
- ``mount``, ``umount2``, ``pivot_root``, ``chroot``: its read-only binds, private ``/proc``,
  ``/tmp`` and home, and its new root;
- ``sethostname``: the sandbox's own host name (in its own UTS namespace).

The kernel lets these act only on namespaces the calling user namespace owns: in a pod with
``hostUsers: false`` that is the pod's own, never the node's. Still refused, as by
RuntimeDefault: ``setns``, ``bpf``, ``perf_event_open``, the keyring calls, the new mount API
(``fsopen``, ``open_tree``, ``move_mount`` ...), module loading, ``clone3`` (ENOSYS, so the C
library falls back to ``clone``). The format is the OCI runtime-spec's ``linux.seccomp``,
which containerd reads as it is; its fields are also the ones CRI-O's (Docker's) format has.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import containerd_default  # noqa: E402

PROFILE = HERE / "andrea-grading.json"
NODE_ARCHES = ("amd64", "arm64")
BUBBLEWRAP_NEEDS = ["clone", "unshare", "mount", "umount2", "pivot_root", "chroot", "sethostname"]


def grading_profile() -> dict:
    base = containerd_default.runtime_default((), arches=NODE_ARCHES)
    rules = []
    for rule in base["syscalls"]:
        if rule["names"] == ["clone"] and rule.get("args"):
            continue  # replaced by an unconditional clone below
        rules.append(rule)
    rules.append({"names": BUBBLEWRAP_NEEDS, "action": "SCMP_ACT_ALLOW", "args": []})
    return {**base, "syscalls": rules}


def render() -> str:
    return json.dumps(grading_profile(), indent=1) + "\n"


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args not in ([], ["--check"]):
        print("usage: make_profile.py [--check]", file=sys.stderr)
        return 2
    text = render()
    if args == ["--check"]:
        if not PROFILE.exists() or PROFILE.read_text() != text:
            print(f"{PROFILE.name} is out of date: run python deploy/seccomp/make_profile.py", file=sys.stderr)
            return 1
        return 0
    PROFILE.write_text(text)
    print(f"wrote {PROFILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
