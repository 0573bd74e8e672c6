"""The grader's kernel client (classroom.execution.capped.PromptKernelClient) takes a
kernel as soon as it is ready, and ready still means what jupyter_client means: no
output the kernel sends is lost, from the first line of the first cell on."""
from __future__ import annotations

import asyncio
import sys

import pytest
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

from classroom.execution.capped import CappedKernelManager, PromptKernelClient

pytestmark = pytest.mark.fast


def _ready_kernel(km, then=None, timeout=60):
    """Start ``km``'s kernel, wait until its client says it is ready, then await
    ``then(client)`` (if given) and return what it gives; the kernel is stopped after."""
    async def go():
        await km.start_kernel()
        kc = km.client()
        kc.start_channels()
        try:
            await kc.wait_for_ready(timeout=timeout)
            return await then(kc) if then is not None else None
        finally:
            kc.stop_channels()
            await km.shutdown_kernel(now=True)
    return asyncio.run(go())


def _run(nb):
    client = NotebookClient(nb, kernel_name="python3", kernel_manager_class=CappedKernelManager, timeout=60)
    return client.execute()


def test_every_output_from_the_first_line_on_arrives():
    """The first cell prints at once, many lines, then shows a value; a later cell's output
    is its own. Run several kernels in a row: nothing is lost or misplaced in any."""
    nb = new_notebook(cells=[new_code_cell("for i in range(300):\n    print(i)\n'first'"),
                             new_code_cell("print('second')")])
    for _ in range(3):
        out = _run(nb)
        first, second = out.cells[0].outputs, out.cells[1].outputs
        text = "".join(o["text"] for o in first if o["output_type"] == "stream")
        assert text.split() == [str(i) for i in range(300)]
        assert [o["data"]["text/plain"] for o in first if o["output_type"] == "execute_result"] == ["'first'"]
        assert [o.get("text") for o in second] == ["second\n"]


def test_the_client_is_the_prompt_one_and_reports_its_kernel():
    km = CappedKernelManager(kernel_name="python3")
    assert isinstance(km.client(), PromptKernelClient)

    async def ask(kc):
        return (await kc.kernel_info(reply=True, timeout=10))["content"]

    info = _ready_kernel(km, ask)
    assert info.get("language_info", {}).get("name") == "python", info


def test_a_kernel_that_dies_at_start_is_said_to_have_died(tmp_path, monkeypatch):
    """A kernel that exits before it ever answers: the wait ends with jupyter_client's
    error, not a hang."""
    spec_dir = tmp_path / "kernels" / "dies"
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(
        '{"argv": ["%s", "-c", "import sys; sys.exit(3)"], "display_name": "dies", "language": "python"}'
        % sys.executable)
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    km = CappedKernelManager(kernel_name="dies", kernel_spec_manager=KernelSpecManager())
    with pytest.raises(RuntimeError, match="died before replying"):
        _ready_kernel(km, timeout=30)
