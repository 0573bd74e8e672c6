"""The checks of andrea_ref.grading called directly (fast): the same submissions as the
nbgrader pipeline test, plus the tricks a grader must not fall for."""
from __future__ import annotations

import json
import math
import re
import sys
import warnings

import pytest
import torch

import grading_submissions as S
from andrea_ref import grading
from andrea_ref.grading import core, compare, inputs, integrity
from learner_functions import CHECKS, S_ROOT, learner_function

pytestmark = pytest.mark.fast  # in `make test-fast`: no book, no browser, no sandboxed class


@pytest.fixture(autouse=True)
def restore_torch():
    """Undo whatever a submission reassigned in torch (one of them patches torch.allclose).
    The whole check on one thread, as in the grader's workers: the checks put the learner's
    call on one thread themselves, this puts the references' computing there too."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
    for _label, space, name, value in integrity.SNAPSHOT:
        if vars(space).get(name, value) is not value and not hasattr(vars(space).get(name), "__wrapped__"):
            setattr(space, name, value)
    for name in set(vars(torch.Tensor)) - integrity.TENSOR_NAMES:
        delattr(torch.Tensor, name)
    core._TIMED_OUT.clear()


DIRECT = [c for c in S.CASES if c.source != "" and c.damage is None]


@pytest.mark.parametrize("case", DIRECT, ids=lambda c: c.student)
def test_each_check_on_each_submission(case, monkeypatch):
    monkeypatch.setattr(core, "CALL_TIME_LIMIT", 2.0)
    fn = learner_function(case)
    failed, messages = set(), []
    for grade_id, check in CHECKS[case.assignment].items():
        try:
            check(fn)
        except AssertionError as exc:
            failed.add(grade_id)
            messages.append(str(exc))
    assert failed == case.lost_cells()
    if case.feedback:
        assert any(case.feedback in m for m in messages), messages


def test_untouched_exercise_fails_every_check():
    def layer_norm(x, gamma, beta, eps=1e-5):
        raise NotImplementedError()

    for check in CHECKS["02_layernorm"].values():
        with pytest.raises(AssertionError, match="not written yet"):
            check(layer_norm)


def _good_gelu(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def test_tensor_subclass_is_refused():
    class Sneaky(torch.Tensor):
        def __eq__(self, other):
            return True

    with pytest.raises(AssertionError, match="plain torch.Tensor"):
        grading.check_gelu_values(lambda x: torch.zeros_like(x).as_subclass(Sneaky))


def test_patched_comparison_is_refused():
    original = torch.allclose
    try:
        torch.allclose = lambda *a, **k: True
        with pytest.raises(AssertionError, match="torch.allclose has been replaced"):
            grading.check_gelu_values(torch.relu)
    finally:
        torch.allclose = original


def test_patched_tensor_method_is_refused():
    assert "__eq__" not in vars(torch.Tensor)  # inherited from the C base class
    try:
        torch.Tensor.__eq__ = lambda self, other: torch.ones((), dtype=torch.bool)
        with pytest.raises(AssertionError, match=r"torch.Tensor.__eq__ has been replaced"):
            grading.check_gelu_values(_good_gelu)
    finally:
        del torch.Tensor.__eq__


def test_warnings_and_stderr_inside_a_correct_answer_stay_silent(capfd):
    def noisy(x):
        warnings.warn("deprecated something", UserWarning)
        print("debugging", file=sys.stderr)
        return _good_gelu(x)

    for check in CHECKS["03_gelu"].values():
        check(noisy)
    out, err = capfd.readouterr()
    assert err == ""
    assert "debugging" not in out


def test_forbidden_op_is_seen_through_any_name():
    import torch.nn.functional as F

    hidden = {"f": F.gelu}
    with pytest.raises(AssertionError, match="aten.gelu"):
        grading.check_gelu_values(lambda x: hidden["f"](x, approximate="tanh"))
    with pytest.raises(AssertionError, match=r"aten\.(native_)?layer_norm"):
        grading.check_layer_norm_shape(lambda x, g, b, eps=1e-5: torch.nn.LayerNorm(
            x.shape[-1], eps=eps, dtype=x.dtype)(x).detach() * g + b)


def test_reference_call_is_seen_through_an_alias_taken_earlier():
    import andrea_ref

    earlier = andrea_ref.gelu_tanh_torch  # the plain-torch twin: no aten.gelu at all
    with pytest.raises(AssertionError, match="own implementation"):
        grading.check_gelu_values(lambda x: earlier(x))


def test_slow_function_is_stopped_once(monkeypatch):
    monkeypatch.setattr(core, "CALL_TIME_LIMIT", 0.2)

    def slow(x):
        while True:
            x = x + 0

    with pytest.raises(AssertionError, match="did not finish within"):
        grading.check_gelu_values(slow)
    with pytest.raises(AssertionError, match="not called again"):
        grading.check_gelu_shape(slow)


def test_the_function_runs_on_one_thread_and_the_kernel_keeps_its_own():
    """The learner's function is timed on one thread, as in the grader's sandbox, whatever
    the learner's kernel uses for its own work, and the kernel's count comes back after,
    even where the function set one of its own."""
    seen = []

    def gelu(x):
        seen.append(torch.get_num_threads())
        torch.set_num_threads(3)
        return _good_gelu(x)

    torch.set_num_threads(2)  # the autouse fixture gives the thread count back after
    grading.check_gelu_values(gelu)
    assert len(seen) > 1 and set(seen) == {1}
    assert torch.get_num_threads() == 2


def test_report_never_raises_and_names_the_mistake(capsys):
    def unbiased(x, gamma, beta, eps=1e-5):
        m = x.mean(-1, keepdim=True)
        return gamma * (x - m) / torch.sqrt(x.var(-1, keepdim=True) + eps) + beta

    assert grading.report_layer_norm(unbiased) is False
    out = capsys.readouterr().out
    assert "\u2717 normalisation over the last axis" in out and "unbiased" in out
    assert "3 of 4 properties hold." in out


def test_report_all_ticks_for_a_correct_answer(capsys):
    assert grading.report_gelu(_good_gelu) is True
    assert "3 of 3 properties hold." in capsys.readouterr().out


def test_checks_leave_no_profiler_or_dispatch_mode_behind():
    before = sys.getprofile()
    with pytest.raises(AssertionError):
        grading.check_layer_norm_normalises(lambda x, g, b, eps=1e-5: x)
    assert sys.getprofile() is before
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    assert _get_current_dispatch_mode() is None


def test_failure_message_shows_the_tolerance_and_enough_digits():
    def off(x):  # sqrt(2/pi) written as 0.7975: 1e-4 away, more than the stated 1e-5
        return 0.5 * x * (1 + torch.tanh(0.7975 * (x + 0.044715 * x**3)))

    with pytest.raises(AssertionError) as info:
        grading.check_gelu_values(off)
    message = str(info.value)
    assert "rtol = 1e-05, atol = 1e-05" in message
    got, want = re.search(r"got (\S+), expected (\S+):", message).groups()
    assert got != want

    # a difference in the seventh digit shows in the printed numbers
    ref = torch.tensor([[0.5, -0.12227231]], dtype=torch.float64)
    out = ref.clone()
    out[0, 1] = -0.12227215
    message = compare.mismatch(out, ref, (1e-7, 1e-9))
    got, want = re.search(r"got (\S+), expected (\S+):", message).groups()
    assert (got, want) == ("-0.12227215", "-0.12227231")
    assert abs(float(got) - float(want)) == pytest.approx(1.6e-7, rel=1e-3)
    assert "at [0, 1]" in message and "rtol = 1e-07, atol = 1e-09" in message
    assert compare.mismatch(out, ref, (1e-5, 1e-5)) is None


def _rules(assignment):
    nb_name = S.ASSIGNMENTS[assignment][0]
    nb = json.loads((S_ROOT / "solutions" / assignment / nb_name).read_text())
    text = "".join(next(c for c in nb["cells"] if c.get("id") == "rules")["source"])
    return " ".join(text.split())


def test_notebooks_state_the_tolerances_the_checks_apply():
    from andrea_ref.grading import gelu as gelu_checks

    assert compare.FLOAT32_TOL == compare.FLOAT64_TOL == (1e-5, 1e-5)
    for assignment in S.ASSIGNMENTS:
        assert "rtol = atol = 1e-5" in _rules(assignment), assignment
        assert "float32 and float64 alike" in _rules(assignment), assignment
    assert gelu_checks.EXTREMES_TOL == (1e-3, 1e-5)
    assert "`x` or 0 within rtol = 1e-3, atol = 1e-5" in _rules("03_gelu")
    assert "by more than rtol = atol = 1e-4" in _rules("01_block")


def test_a_narrower_result_is_judged_with_its_rounding():
    """float16 or float32 for float64 input costs only the shape check's dtype point."""
    def half_norm(x, gamma, beta, eps=1e-5):
        mean = x.mean(dim=-1, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
        return (gamma * (x - mean) / torch.sqrt(var + eps) + beta).half()

    with pytest.raises(AssertionError, match="dtype torch.float16"):
        grading.check_layer_norm_shape(half_norm)
    for check in list(CHECKS["02_layernorm"].values())[1:]:
        check(half_norm)
    assert compare.tol_for(torch.float64, result=torch.zeros(1)) == (1e-5 + 2.0 ** -23, 1e-5)
    assert compare.tol_for(torch.float32, result=torch.zeros(1, dtype=torch.float64)) == (1e-5, 1e-5)


def test_a_value_check_refuses_integers():
    with pytest.raises(AssertionError, match="must be floating point"):
        grading.check_gelu_values(lambda x: torch.round(x).long())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_result_on_another_device_costs_only_the_shape_check():
    def cpu_gelu(x):
        return _good_gelu(x).cpu()

    with pytest.raises(AssertionError, match="on cpu; the input was on cuda"):
        grading.check_gelu_shape(cpu_gelu)
    grading.check_gelu_values(cpu_gelu)
    grading.check_gelu_extremes(cpu_gelu)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_checks_also_run_on_cuda():
    assert torch.device("cuda") in inputs.devices()
    for case in (c for c in S.CASES if c.source is None and c.damage is None):
        fn = learner_function(case)
        for check in CHECKS[case.assignment].values():
            check(fn)
