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
"""
from __future__ import annotations

import json

import zmq
import zmq.asyncio
from jupyter_client.manager import AsyncKernelManager
from nbformat.v4 import new_output
from traitlets import Integer

from nbgrader.preprocessors import Execute

MAX_MESSAGE = 8 << 20
# names of the notebooks (nbgrader's unique_key) whose output was cut in this process
LIMIT_HITS: set[str] = set()


class CappedKernelManager(AsyncKernelManager):
    """A kernel manager whose sockets refuse messages over ``MAX_MESSAGE`` bytes."""

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
