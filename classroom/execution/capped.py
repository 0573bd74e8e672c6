"""nbgrader's notebook execution with the learner's output bounded in bytes.

nbgrader keeps every output a kernel sends and trims it by lines only after the
notebook has run, so a kernel that prints a gigabyte makes a gigabyte notebook, a
gigabyte feedback page and many gigabytes of grader memory. Here:

- the ZeroMQ sockets to the kernel refuse any single message over
  ``MAX_MESSAGE`` bytes (libzmq drops it before it is read into memory);
- outputs are counted as they arrive: past ``max_output_bytes`` per notebook nothing
  more is kept, and one line says so (``limit_hit`` records it for the report);
- ``update_display_data`` (rewriting an earlier cell's output) and widget messages
  are ignored: an output, once written, belongs to the cell that wrote it -- so a
  later cell cannot smuggle what it saw into an earlier one.

A kernel is used as soon as it is ready (:class:`PromptKernelClient`): jupyter_client
waits for 0.2 s of silence on IOPub after every start, a fifth of a second per notebook
graded.
"""
from __future__ import annotations

import json
import time
from queue import Empty

import zmq
import zmq.asyncio
from jupyter_client.asynchronous.client import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager
from nbformat.v4 import new_output
from traitlets import DottedObjectName, Integer, Type

from nbgrader.preprocessors import Execute

MAX_MESSAGE = 8 << 20
# names of the notebooks (nbgrader's unique_key) whose output was cut in this process
LIMIT_HITS: set[str] = set()


class PromptKernelClient(AsyncKernelClient):
    """jupyter_client's asynchronous client, ready the moment its kernel is.

    Ready means what jupyter_client means: the kernel answered a ``kernel_info_request``
    on the shell channel, and IOPub is connected (a subscriber that connects late misses
    what was published before, so outputs could be lost). jupyter_client proves the
    second by waiting for any IOPub message and then reads IOPub until it has been
    silent for 0.2 s. Here the proof is the ``idle`` status of that very request on
    IOPub, the last message the kernel publishes for it: what came before it (the
    start-up's status messages) is read and dropped, and nothing is waited for after
    it. Anything later belongs to no request of nbclient's, which reads only the
    messages whose parent is its own request."""

    async def wait_for_ready(self, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
        while True:
            msg_id = self.kernel_info()
            reply = await self._reply_to(msg_id, min(deadline, time.monotonic() + 1.0))
            if reply is not None and await self._idle_after(msg_id, min(deadline, time.monotonic() + 0.2)):
                handle = getattr(self, "_handle_kernel_info_reply", None)  # adapts to an older protocol
                if handle is not None:
                    handle(reply)
                return
            if not await self.is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout:.0f} seconds")

    async def _reply_to(self, msg_id: str, until: float) -> dict | None:
        """The shell reply to request ``msg_id`` (earlier requests' replies are dropped)."""
        while (left := until - time.monotonic()) > 0:
            try:
                msg = await self.shell_channel.get_msg(timeout=left)
            except Empty:
                return None
            if msg.get("parent_header", {}).get("msg_id") == msg_id and msg["msg_type"] == "kernel_info_reply":
                return msg
        return None

    async def _idle_after(self, msg_id: str, until: float) -> bool:
        """Whether IOPub carries the idle status of request ``msg_id`` before ``until``."""
        while (left := until - time.monotonic()) > 0:
            try:
                msg = await self.iopub_channel.get_msg(timeout=left)
            except Empty:
                return False
            if (msg["msg_type"] == "status" and msg.get("parent_header", {}).get("msg_id") == msg_id
                    and msg.get("content", {}).get("execution_state") == "idle"):
                return True
        return False


class CappedKernelManager(AsyncKernelManager):
    """A kernel manager whose sockets refuse messages over ``MAX_MESSAGE`` bytes, and
    whose clients are :class:`PromptKernelClient`."""

    client_class = DottedObjectName("classroom.execution.capped.PromptKernelClient")
    client_factory = Type(PromptKernelClient, klass=AsyncKernelClient)

    def _context_default(self) -> zmq.asyncio.Context:
        self._created_context = True
        ctx = zmq.asyncio.Context()
        ctx.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE)
        return ctx


class CappedExecute(Execute):
    max_output_bytes = Integer(2 << 20, help="bytes of output kept per notebook").tag(config=True)

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", CappedKernelManager)
        super().__init__(*args, **kwargs)
        self.output_bytes = 0
        self.limit_hit = False

    def preprocess(self, nb, resources=None, km=None):
        self.output_bytes = 0
        self.limit_hit = False
        try:
            nb, resources = super().preprocess(nb, resources, km=km)
        finally:
            if self.limit_hit:
                LIMIT_HITS.add(str((resources or {}).get("unique_key", "")))
        return nb, resources

    def output(self, outs, msg, display_id, cell_index):
        try:
            size = len(json.dumps(msg.get("content", {})))
        except (TypeError, ValueError):
            size = self.max_output_bytes + 1
        self.output_bytes += size
        if self.output_bytes > self.max_output_bytes:
            if not self.limit_hit:
                self.limit_hit = True
                outs.append(new_output("stream", name="stderr", text=(
                    f"[grading] output beyond {self.max_output_bytes} bytes per notebook was dropped\n")))
            return None
        return super().output(outs, msg, None, cell_index)

    def _update_display_id(self, display_id, msg):
        return None

    def handle_comm_msg(self, outs, msg, cell_index):
        return None
