"""containerd's RuntimeDefault seccomp profile, as data (OCI runtime-spec form).

Transcribed from containerd 2.x, ``contrib/seccomp/seccomp_default.go`` (``DefaultProfile``,
Apache-2.0): the list of syscalls every container may make, the ones a capability in the
container's bounding set adds, and the rules for ``clone``/``clone3`` without
``CAP_SYS_ADMIN``. Kept as a module of its own because two things need it:

- ``make_profile.py`` builds the grading pods' Localhost profile (``andrea-grading.json``)
  from the profile a pod with no capability gets, plus what bubblewrap needs;
- the tests' emulation of a kubelet and containerd (``tests/deploy_oci.py``) gives a
  ``RuntimeDefault`` pod exactly this, to show that such a pod cannot build the sandbox.

No library ships this profile for Python; containerd builds it in Go at run time, so it is
written here once. The kernel-version rule (``ptrace`` and ``process_vm_*`` from Linux 4.8)
is taken as met: user namespaces for pods need Linux 6.3 or later anyway.
"""
from __future__ import annotations

# syscalls every container may make (containerd: the first, unconditional rule)
ALLOWED = """
    accept accept4 access adjtimex alarm bind brk cachestat capget capset chdir chmod chown
    chown32 clock_adjtime clock_adjtime64 clock_getres clock_getres_time64 clock_gettime
    clock_gettime64 clock_nanosleep clock_nanosleep_time64 close close_range connect
    copy_file_range creat dup dup2 dup3 epoll_create epoll_create1 epoll_ctl epoll_ctl_old
    epoll_pwait epoll_pwait2 epoll_wait epoll_wait_old eventfd eventfd2 execve execveat exit
    exit_group faccessat faccessat2 fadvise64 fadvise64_64 fallocate fanotify_mark fchdir fchmod
    fchmodat fchmodat2 fchown fchown32 fchownat fcntl fcntl64 fdatasync fgetxattr flistxattr
    flock fork fremovexattr fsetxattr fstat fstat64 fstatat64 fstatfs fstatfs64 fsync ftruncate
    ftruncate64 futex futex_requeue futex_time64 futex_wait futex_waitv futex_wake futimesat
    getcpu getcwd getdents getdents64 getegid getegid32 geteuid geteuid32 getgid getgid32
    getgroups getgroups32 getitimer getpeername getpgid getpgrp getpid getppid getpriority
    getrandom getresgid getresgid32 getresuid getresuid32 getrlimit get_robust_list getrusage
    getsid getsockname getsockopt get_thread_area gettid gettimeofday getuid getuid32 getxattr
    getxattrat inotify_add_watch inotify_init inotify_init1 inotify_rm_watch io_cancel ioctl
    io_destroy io_getevents io_pgetevents io_pgetevents_time64 ioprio_get ioprio_set io_setup
    io_submit ipc kill landlock_add_rule landlock_create_ruleset landlock_restrict_self lchown
    lchown32 lgetxattr link linkat listen listmount listxattr listxattrat llistxattr _llseek
    lremovexattr lseek lsetxattr lsm_get_self_attr lsm_list_modules lsm_set_self_attr lstat
    lstat64 madvise membarrier memfd_create memfd_secret mincore mkdir mkdirat mknod mknodat
    mlock mlock2 mlockall map_shadow_stack mmap mmap2 mprotect mq_getsetattr mq_notify mq_open
    mq_timedreceive mq_timedreceive_time64 mq_timedsend mq_timedsend_time64 mq_unlink mremap
    mseal msgctl msgget msgrcv msgsnd msync munlock munlockall munmap name_to_handle_at
    nanosleep newfstatat _newselect open openat openat2 pause pidfd_open pidfd_send_signal pipe
    pipe2 pkey_alloc pkey_free pkey_mprotect poll ppoll ppoll_time64 prctl pread64 preadv
    preadv2 prlimit64 process_mrelease pselect6 pselect6_time64 pwrite64 pwritev pwritev2 read
    readahead readlink readlinkat readv recv recvfrom recvmmsg recvmmsg_time64 recvmsg
    remap_file_pages removexattr removexattrat rename renameat renameat2 restart_syscall rmdir
    rseq rt_sigaction rt_sigpending rt_sigprocmask rt_sigqueueinfo rt_sigreturn rt_sigsuspend
    rt_sigtimedwait rt_sigtimedwait_time64 rt_tgsigqueueinfo sched_getaffinity sched_getattr
    sched_getparam sched_get_priority_max sched_get_priority_min sched_getscheduler
    sched_rr_get_interval sched_rr_get_interval_time64 sched_setaffinity sched_setattr
    sched_setparam sched_setscheduler sched_yield seccomp select semctl semget semop semtimedop
    semtimedop_time64 send sendfile sendfile64 sendmmsg sendmsg sendto setfsgid setfsgid32
    setfsuid setfsuid32 setgid setgid32 setgroups setgroups32 setitimer setpgid setpriority
    setregid setregid32 setresgid setresgid32 setresuid setresuid32 setreuid setreuid32
    setrlimit set_robust_list setsid setsockopt set_thread_area set_tid_address setuid setuid32
    setxattr setxattrat shmat shmctl shmdt shmget shutdown sigaltstack signalfd signalfd4
    sigprocmask sigreturn socketcall socketpair splice stat stat64 statfs statfs64 statmount
    statx symlink symlinkat sync sync_file_range syncfs sysinfo tee tgkill time timer_create
    timer_delete timer_getoverrun timer_gettime timer_gettime64 timer_settime timer_settime64
    timerfd_create timerfd_gettime timerfd_gettime64 timerfd_settime timerfd_settime64 times
    tkill truncate truncate64 ugetrlimit umask uname unlink unlinkat uretprobe utime utimensat
    utimensat_time64 utimes vfork vmsplice wait4 waitid waitpid write writev
""".split()

# allowed from Linux 4.8 on (always, here)
ALLOWED_KERNEL_4_8 = ["process_vm_readv", "process_vm_writev", "ptrace"]

# per architecture (runtime.GOARCH), and the seccomp architectures of each
ARCH_SYSCALLS = {
    "amd64": ["arch_prctl", "modify_ldt"],
    "arm64": ["arm_fadvise64_64", "arm_sync_file_range", "sync_file_range2", "breakpoint", "cacheflush",
              "set_tls"],
}
ARCHITECTURES = {
    "amd64": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
    "arm64": ["SCMP_ARCH_ARM", "SCMP_ARCH_AARCH64"],
}

# what a capability in the bounding set adds
BY_CAPABILITY = {
    "CAP_DAC_READ_SEARCH": ["open_by_handle_at"],
    "CAP_SYS_ADMIN": ["bpf", "clone", "clone3", "fanotify_init", "fsconfig", "fsmount", "fsopen", "fspick",
                      "lookup_dcookie", "mount", "mount_setattr", "move_mount", "open_tree", "perf_event_open",
                      "quotactl", "quotactl_fd", "setdomainname", "sethostname", "setns", "syslog", "umount",
                      "umount2", "unshare"],
    "CAP_SYS_BOOT": ["reboot"],
    "CAP_SYS_CHROOT": ["chroot"],
    "CAP_SYS_MODULE": ["delete_module", "init_module", "finit_module"],
    "CAP_SYS_PACCT": ["acct"],
    "CAP_SYS_PTRACE": ["kcmp", "pidfd_getfd", "process_madvise", "process_vm_readv", "process_vm_writev", "ptrace"],
    "CAP_SYS_RAWIO": ["iopl", "ioperm"],
    "CAP_SYS_TIME": ["settimeofday", "stime", "clock_settime", "clock_settime64"],
    "CAP_SYS_TTY_CONFIG": ["vhangup"],
    "CAP_SYS_NICE": ["get_mempolicy", "mbind", "set_mempolicy", "set_mempolicy_home_node"],
    "CAP_SYSLOG": ["syslog"],
    "CAP_BPF": ["bpf"],
    "CAP_PERFMON": ["perf_event_open"],
}

AF_VSOCK = 40
ENOSYS = 38
# CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWCGROUP
CLONE_NAMESPACE_FLAGS = 0x00020000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x02000000


def _allow(names, args=()):
    return {"names": list(names), "action": "SCMP_ACT_ALLOW", "args": list(args)}


def _arg(index, value, op, value_two=0):
    return {"index": index, "value": value, "valueTwo": value_two, "op": op}


def runtime_default(capabilities=(), arches=("amd64",)) -> dict:
    """The ``linux.seccomp`` section containerd writes for a container whose bounding set is
    ``capabilities`` (names like ``CAP_SYS_ADMIN``), on nodes of the given architectures."""
    caps = set(capabilities)
    rules = [_allow(ALLOWED), _allow(["socket"], [_arg(0, AF_VSOCK, "SCMP_CMP_NE")])]
    rules += [_allow(["personality"], [_arg(0, v, "SCMP_CMP_EQ")]) for v in (0x0, 0x0008, 0x20000, 0x20008, 0xFFFFFFFF)]
    rules.append(_allow(ALLOWED_KERNEL_4_8))
    for arch in arches:
        rules.append(_allow(ARCH_SYSCALLS[arch]))
    for cap, names in BY_CAPABILITY.items():  # containerd walks the bounding set; the order is immaterial
        if cap in caps:
            rules.append(_allow(names))
    if "CAP_SYS_ADMIN" not in caps:
        rules.append(_allow(["clone"], [_arg(0, CLONE_NAMESPACE_FLAGS, "SCMP_CMP_MASKED_EQ", 0)]))
        rules.append({"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": ENOSYS})
    architectures = [a for arch in arches for a in ARCHITECTURES[arch]]
    return {"defaultAction": "SCMP_ACT_ERRNO", "architectures": architectures, "syscalls": rules}
