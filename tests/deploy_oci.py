"""What a kubelet and containerd would run for a pod, emulated with ``runc`` on this machine.

No cluster is available here, so the tests of ``deploy/k8s/grade-job.yaml`` turn the Job's pod
template into the OCI runtime configuration containerd's CRI plugin writes for it, and run
that with Debian's ``runc``:

- the user and group (``runAsUser``/``runAsGroup``, else the image's ``USER``), supplementary
  group ``fsGroup``;
- the capabilities: containerd's default set, with ``capabilities.add``/``drop`` applied (all
  of them when ``privileged``); the inheritable and ambient sets stay empty;
- ``allowPrivilegeEscalation: false`` -> ``noNewPrivileges``;
- the seccomp profile: ``RuntimeDefault`` is containerd's default for the container's
  capabilities (``deploy/seccomp/containerd_default.py``), ``Localhost`` reads the node's
  profile file as it is, ``Unconfined`` (or ``privileged``) none;
- containerd's masked and read-only ``/proc`` and ``/sys`` paths, none with
  ``procMount: Unmasked`` or ``privileged``; ``/sys`` and the cgroup file system read-only
  unless ``privileged``;
- ``hostUsers: false``: a user namespace mapping the container's uids 0..65535 onto a host
  range of its own, as the kubelet gives each such pod;
- new PID, IPC, UTS, mount, network and cgroup namespaces, a read-only root file system when
  ``readOnlyRootFilesystem``, the volume mounts as given, the memory limit as a cgroup limit.

What is not emulated: the pod's network (the container gets a network namespace with no
interface but loopback), AppArmor (this machine has none; on nodes that run it, containerd's
default AppArmor profile applies as well), the image itself (the root file system is this
machine's ``/usr``, ``/etc`` and the course's Python environment, bound read-only), device
plugins and the kubelet's own bind mounts (``/etc/hosts``, service account token).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
from deploy.seccomp import containerd_default  # noqa: E402

# containerd's default capabilities (pkg/oci: defaultUnixCaps)
DEFAULT_CAPS = ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
                "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
                "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"]
ALL_CAPS = DEFAULT_CAPS + ["CAP_DAC_READ_SEARCH", "CAP_LINUX_IMMUTABLE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN",
                           "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_PTRACE",
                           "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE",
                           "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_LEASE", "CAP_AUDIT_CONTROL", "CAP_MAC_OVERRIDE",
                           "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ",
                           "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE"]
# containerd's masked and read-only paths (pkg/oci: populateDefaultUnixSpec)
MASKED_PATHS = ["/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
                "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware",
                "/sys/devices/virtual/powercap"]
READONLY_PATHS = ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]
USERNS_SIZE = 65536


def skip_reason() -> str | None:
    """Why runc cannot emulate a pod here, or None."""
    if shutil.which("runc") is None:
        return "runc is not installed (Debian package runc): the grading pod cannot be emulated here"
    if shutil.which("tini") is None:
        return "tini is not installed (Debian package tini): the image's ENTRYPOINT cannot run here"
    if os.geteuid() != 0:
        return "runc needs root here to build the pod's namespaces: run the test as root"
    try:
        if int(Path("/proc/sys/user/max_user_namespaces").read_text()) <= 0:
            return "user namespaces are off (user.max_user_namespaces = 0): a hostUsers: false pod cannot run"
    except (OSError, ValueError):
        return "user namespaces are not available on this kernel"
    return None


def _quantity(text) -> int:
    text = str(text)
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "K": 10**3, "M": 10**6, "G": 10**9}
    for u, f in units.items():
        if text.endswith(u):
            return int(float(text[:-len(u)]) * f)
    return int(text)


def _seccomp(profile: dict | None, privileged: bool, bounding: list[str], localhost: dict[str, Path]) -> dict | None:
    kind = (profile or {}).get("type", "Unconfined")
    if privileged or kind == "Unconfined":
        return None
    if kind == "RuntimeDefault":
        return containerd_default.runtime_default(bounding)
    if kind == "Localhost":
        name = profile["localhostProfile"]
        if name not in localhost:
            raise ValueError(f"seccompProfile.localhostProfile: {name!r} is not installed on this emulated node")
        return json.loads(Path(localhost[name]).read_text())
    raise ValueError(f"seccompProfile.type: expected RuntimeDefault, Localhost or Unconfined, got {kind!r}")


def oci_config(pod: dict, container: dict, *, process_args: list[str], env: dict[str, str], cwd: str,
               image_user: int, volumes: dict[str, Path | None], ro_binds: dict[str, str],
               localhost_profiles: dict[str, Path], host_id: int, hostname: str = "andrea-grade-0") -> dict:
    """The OCI ``config.json`` containerd would write for ``container`` of the pod ``pod``
    (a pod template's ``spec``). ``volumes``: mountPath -> host folder (None: a tmpfs, as an
    ``emptyDir``); ``ro_binds``: path in the container -> host path, bound read-only: what stands
    in for the image."""
    psc = pod.get("securityContext") or {}
    csc = container.get("securityContext") or {}
    privileged = bool(csc.get("privileged"))
    uid = csc.get("runAsUser", psc.get("runAsUser", image_user))
    gid = csc.get("runAsGroup", psc.get("runAsGroup", 0 if uid == 0 else image_user))
    groups = [psc["fsGroup"]] if "fsGroup" in psc else []
    if privileged:
        caps = list(ALL_CAPS)
    else:
        capsec = csc.get("capabilities") or {}
        drop = {("CAP_" + c) if not c.startswith("CAP_") else c for c in capsec.get("drop", [])}
        caps = [] if "CAP_ALL" in drop else [c for c in DEFAULT_CAPS if c not in drop]
        for c in capsec.get("add", []):
            name = c if c.startswith("CAP_") else "CAP_" + c
            if name not in caps:
                caps.append(name)
    unmasked = privileged or csc.get("procMount") == "Unmasked"
    userns = pod.get("hostUsers") is False
    seccomp = _seccomp(csc.get("seccompProfile") or psc.get("seccompProfile"), privileged, caps, localhost_profiles)
    ro_sys = [] if privileged else ["ro"]
    mounts = [
        {"destination": "/proc", "type": "proc", "source": "proc", "options": ["nosuid", "noexec", "nodev"]},
        {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
         "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
        {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
         "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"]},
        {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": ["nosuid", "noexec", "nodev"]},
        {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
         "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
        {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev"] + ro_sys},
        {"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup",
         "options": ["nosuid", "noexec", "nodev", "relatime"] + ro_sys},
    ]
    for dest, source in ro_binds.items():
        mounts.append({"destination": dest, "type": "bind", "source": str(source), "options": ["rbind", "ro"]})
    by_name = {v["name"]: v for v in pod.get("volumes", [])}
    for vm in container.get("volumeMounts", []):
        dest = vm["mountPath"]
        host = volumes.get(dest)
        if host is None:
            if "emptyDir" not in by_name.get(vm["name"], {}):
                raise ValueError(f"volume {vm['name']!r} at {dest}: give a host folder for it")
            mounts.append({"destination": dest, "type": "tmpfs", "source": "tmpfs",
                           "options": ["nosuid", "nodev", "mode=1777"]})
        else:
            mounts.append({"destination": dest, "type": "bind", "source": str(host),
                           "options": ["rbind"] + (["ro"] if vm.get("readOnly") else ["rw"])})
    namespaces = [{"type": t} for t in ("pid", "ipc", "uts", "mount", "network", "cgroup")]
    linux: dict = {
        "namespaces": namespaces + ([{"type": "user"}] if userns else []),
        "maskedPaths": [] if unmasked else list(MASKED_PATHS),
        "readonlyPaths": [] if unmasked else list(READONLY_PATHS),
        "cgroupsPath": f"/andrea-emulated-pod-{uuid.uuid4().hex[:12]}",
        "resources": {"devices": [{"allow": False, "access": "rwm"}]},
    }
    limit = ((container.get("resources") or {}).get("limits") or {}).get("memory")
    if limit:
        linux["resources"]["memory"] = {"limit": _quantity(limit)}
    if userns:
        linux["uidMappings"] = [{"containerID": 0, "hostID": host_id, "size": USERNS_SIZE}]
        linux["gidMappings"] = [{"containerID": 0, "hostID": host_id, "size": USERNS_SIZE}]
    if seccomp is not None:
        linux["seccomp"] = seccomp
    return {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": False,
            "user": {"uid": uid, "gid": gid, "additionalGids": groups},
            "args": process_args,
            "env": [f"{k}={v}" for k, v in env.items()],
            "cwd": cwd,
            "capabilities": {"bounding": caps, "effective": caps, "permitted": caps, "inheritable": [],
                             "ambient": []},
            "noNewPrivileges": csc.get("allowPrivilegeEscalation") is False and not privileged,
        },
        "root": {"path": "rootfs", "readonly": bool(csc.get("readOnlyRootFilesystem"))},
        "hostname": hostname,
        "mounts": mounts,
        "linux": linux,
    }


def make_rootfs(path: Path, config: dict) -> None:
    """An empty root: the host's top-level symlinks (merged /usr) and a folder for every
    mount point, world-traversable so the pod's mapped uids can reach the binds."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o755)
    for name in ("bin", "lib", "lib32", "lib64", "libx32", "sbin"):
        p = Path("/") / name
        if p.is_symlink():
            (path / name).symlink_to(os.readlink(p))
    for m in config["mounts"]:
        target = path / m["destination"].lstrip("/")
        target.mkdir(parents=True, exist_ok=True)
        for d in [target, *target.parents]:
            if d == path.parent or not str(d).startswith(str(path)):
                break
            os.chmod(d, 0o755)
        # runc gives a tmpfs the mode of its mount point (an emptyDir is a 0777 folder)
        modes = [o.split("=", 1)[1] for o in m.get("options", []) if o.startswith("mode=")]
        if m["type"] == "tmpfs" and modes:
            os.chmod(target, int(modes[0], 8))


def run(config: dict, workdir: Path, timeout: float, stop_when=None) -> subprocess.CompletedProcess:
    """Run the container to its end: ``runc run`` on a bundle in ``workdir``.

    ``stop_when``: a function polled while it runs; once it returns true the container's
    init gets SIGTERM (``runc kill``, as the kubelet stops a pod), and the result's
    ``stop_seconds`` says how long the container took to end after it."""
    os.chmod(workdir, 0o755)  # the pod's mapped root must reach the bundle
    bundle = workdir / "bundle"
    rootfs = bundle / "rootfs"
    make_rootfs(rootfs, config)
    (bundle / "config.json").write_text(json.dumps(config, indent=1))
    state = workdir / "runc-state"
    name = f"andrea-{uuid.uuid4().hex[:10]}"
    cmd = ["runc", "--root", str(state), "run", "--bundle", str(bundle), name]
    try:
        if stop_when is None:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        out, err = workdir / "stdout", workdir / "stderr"
        with open(out, "w") as fo, open(err, "w") as fe:
            proc = subprocess.Popen(cmd, stdout=fo, stderr=fe, text=True, stdin=subprocess.DEVNULL)
            deadline, signalled = time.monotonic() + timeout, None
            while proc.poll() is None and time.monotonic() < deadline:
                if signalled is None and stop_when():
                    subprocess.run(["runc", "--root", str(state), "kill", name, "TERM"], capture_output=True)
                    signalled = time.monotonic()
                time.sleep(0.2)
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        done = subprocess.CompletedProcess(cmd, proc.returncode, out.read_text(), err.read_text())
        done.stop_seconds = None if signalled is None else time.monotonic() - signalled
        return done
    finally:
        subprocess.run(["runc", "--root", str(state), "delete", "--force", name], capture_output=True)
