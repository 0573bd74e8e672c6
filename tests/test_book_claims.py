"""The book's prose states no number that it does not compute, and copies no sentence of the lesson.

1. Typed numbers. Every number written in a chapter's text (its prose, exercises and
   solutions, figure captions and alt texts; in every chapter and the glossary) must
   be one of:

   * written through glue ({glue:text}`name`), so the build computes it;
   * a literal of the page's own code (the settings of an experiment the page runs,
     such as ``depths = [1, 2, 4, ...]`` or ``lr=1e-3``, and the code of its solutions);
   * a value of the ANDREA presets (``andrea_ref.CONFIGS``: 768, 12, 8449, 0.02, ...);
   * a small count or ordinal (0 to 10: "block 1", "$x^3$"), or a year;
   * on the allow-list below, each entry with its reason (a constant of a formula, a
     figure a cited source reports);
   * in a caption or an alt text only (which cannot hold glue): within 15% of a value
     the same page glues, as a description of a computed figure.

   A typed result ("about $3 \\times 10^{-5}$" where the page computes 1.3e-3) is none
   of these, and fails the test with its chapter and the sentence it stands in.

2. Overlap. No run of six words of a German or Georgian edition's text repeats a run of
   the source lesson in that language (the lesson's facts are taken, never its sentences).
"""
from __future__ import annotations

import ast
import json
import math
import re
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
EXEC_DIR = ROOT / "_build" / "jupyter_execute" / "book"
# The source lesson lies beside the repository's checkout (../shared/source), or beside
# the folder of its worktrees.
SOURCE = next((p for p in (ROOT.parent / "shared" / "source", ROOT.parent.parent / "shared" / "source")
               if p.is_dir()), ROOT.parent / "shared" / "source")
PAGES = sorted(p.stem for p in BOOK.glob("0*.md")) + ["glossary"]

# Constants of formulas and figures reported by cited sources: typed on purpose.
ALLOWED = {
    "*": {
        0.044715: "the constant of GELU's tanh approximation (a definition)",
        1e-5: "LayerNorm's epsilon and the checks' tolerance, both definitions",
        100: "'more than a hundred layers', He et al. (2016) as cited",
    },
    "01_welcome": {},
    "02_attention_plus_mlp": {},
    "03_residual_connections": {
        19: "the last of the seeds range(10, 20) that exercise 3.4 runs",
    },
    "04_layernorm_and_placement": {
        25: "the lesson's own count of LayerNorms, quoted as the lesson's (and glued beside it)",
    },
    "05_mlp_and_gelu": {
        2048: "the 2017 transformer's hidden width, reported by Vaswani et al.",
        512: "the 2017 transformer's stream width, reported by Vaswani et al.",
        256: "LLaMA's rounding multiple, from its reference code",
    },
    "06_andrea_120m": {
        124: "GPT-2 small's parameter count in millions, computed in the chapter and rounded in the summary",
        120: "the model's name, ANDREA-120M",
        2048: "the 2017 transformer's hidden width, reported by Vaswani et al.",
        512: "the 2017 transformer's stream width, reported by Vaswani et al.",
        85: "the lesson's own figure, quoted as the lesson's",
    },
    "07_gelu_kernel": {
        16: "16-byte vector loads, a property of the hardware's memory instructions",
        2 ** -11: "the documented error bound of tanh.approx.f32 (PTX ISA)",
        12: "the emulation's input range (-12 to 12), a setting of E.fast_tanh_gelu_error_emulated",
        7.5: "the compute capability from which tanh.approx.f32 exists, reported by the PTX ISA",
    },
    "08_exercises": {
        2.7: "|x| = 2.7, where the checks probe GELU (the grading inputs)",
    },
    "glossary": {
        2017: "a year",
    },
}

_ROLE = re.compile(r"\{[a-z][\w:-]*\}`[^`]*`")
_CODE_SPAN = re.compile(r"``[^`]*``|`[^`\n]*`")
_LINK_TARGET = re.compile(r"\]\([^)]*\)")
_FENCE = re.compile(r"^(`{3,}|:{3,})\s*(\{[^}]*\}|python|bash|text|cpp)?[^\n]*\n(.*?)^\1\s*$", re.S | re.M)
_OPTION = re.compile(r"^:[\w-]+:.*$", re.M)
_HTML = re.compile(r"<[^>]+>")
# A number: mantissa (thousands may be grouped by commas), optional decimals, optional
# exponent in code form (1e-5) or TeX form (\times 10^{-5}, or a bare 10^{-5} / 2^{26}).
_NUMBER = re.compile(
    r"(?<![\w.\\^_])(?<![A-Za-z]-)"
    r"(?P<mant>\d{1,3}(?:,\d{3})+|\d+)(?P<frac>\.\d+)?"
    r"(?:(?P<e>e[-+−]?\d+)|\s*(?:\\times|\\cdot|×)\s*10\^\{?(?P<texexp>[-−]?\d+)\}?"
    r"|\^\{?(?P<pow>[-−]?\d+)\}?)?"
    r"(?P<pct>\s*(?:%|\\%))?"
    r"(?![\w]|\.\d)"
)


def numbers(text: str) -> list[tuple[float, str]]:
    """The numbers written in `text` (prose with markup), each with the words around it."""
    clean = _ROLE.sub(" ", text)
    clean = _CODE_SPAN.sub(" ", clean)
    clean = _LINK_TARGET.sub("]", clean)
    clean = _HTML.sub(" ", clean)
    clean = re.sub(r"\\(?:text|operatorname|mathrm|mathbf|label|ref)\{[^}]*\}", " ", clean)
    found = []
    for m in _NUMBER.finditer(clean):
        if re.search(r"(?:[Ee]xercises?|[Cc]hapters?)\s+$", clean[max(0, m.start() - 12):m.start()]):
            continue                              # "exercise 4.2", "chapter 3": references, not values
        value = float(m.group("mant").replace(",", "") + (m.group("frac") or ""))
        if m.group("e"):
            value *= 10.0 ** int(m.group("e")[1:].replace("−", "-"))
        elif m.group("texexp"):
            value *= 10.0 ** int(m.group("texexp").replace("−", "-"))
        elif m.group("pow"):
            value = value ** int(m.group("pow").replace("−", "-"))
        if m.group("pct"):
            value /= 100
        context = " ".join(clean[max(0, m.start() - 60):m.end() + 40].split())
        found.append((value, context))
    return found


def _literals(code: str) -> set[float]:
    """Numeric literals of Python code, with unary minus, and simple constant powers (2**26)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
                and not isinstance(node.value, bool):
            out.add(float(node.value))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) \
                and isinstance(node.left, ast.Constant) and isinstance(node.right, (ast.Constant, ast.UnaryOp)):
            try:
                out.add(float(node.left.value ** ast.literal_eval(node.right)))
            except (ValueError, TypeError, OverflowError, ZeroDivisionError):
                pass
    return out


@lru_cache(maxsize=None)
def page(name: str) -> dict:
    """A page's prose pieces ('prose' and 'caption' kinds) and the literals of its code."""
    import jupytext

    text = (BOOK / f"{name}.md").read_text(encoding="utf-8")
    pieces, literals = [], set()
    if text.startswith("---") and "jupytext" in text.split("---", 2)[1]:
        nb = jupytext.reads(text, fmt="md:myst")
        cells = [(c.cell_type, c.source, c.metadata) for c in nb.cells]
    else:
        cells = [("markdown", text, {})]
    for kind, source, meta in cells:
        if kind == "code":
            literals |= _literals(source)
            mystnb = meta.get("mystnb", {})
            for key in (("figure", "caption"), ("image", "alt")):
                value = mystnb.get(key[0], {}).get(key[1])
                if value:
                    pieces.append(("caption", value))
            continue
        pieces.extend(_markdown_pieces(source, literals))
    return {"pieces": pieces, "literals": literals}


def _markdown_pieces(source: str, literals: set[float]) -> list[tuple[str, str]]:
    """Prose of a markdown cell; code blocks inside it add to ``literals``, graphviz is skipped."""
    pieces = []

    def take(m):
        info, body = (m.group(2) or ""), m.group(3)
        if info in ("python", "{code-cell}") or m.group(1).startswith("`") and info == "":
            literals.update(_literals(body))
            return " "
        if info.startswith("{graphviz}") or info in ("bash", "text", "cpp") or info.startswith("{literalinclude}"):
            caption = re.search(r"^:caption:(.*)$", body, re.M)
            if caption:
                pieces.append(("caption", caption.group(1)))
            return " "
        if info.startswith("{math}"):
            return body
        # an admonition, exercise, solution, glossary...: its body is prose (it may nest fences)
        return _FENCE.sub(take, _OPTION.sub(" ", body))

    prose = _FENCE.sub(take, source)
    pieces.append(("prose", _OPTION.sub(" ", prose)))
    return pieces


@lru_cache(maxsize=None)
def glued(name: str) -> dict[str, float]:
    path = EXEC_DIR / f"{name}.glue.json"
    if not path.is_file():
        return {}
    out = {}
    for key, output in json.loads(path.read_text()).items():
        try:
            value = ast.literal_eval(output["data"]["text/plain"])
        except (ValueError, SyntaxError):
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = float(value)
    return out


@lru_cache(maxsize=None)
def _preset_values() -> set[float]:
    import dataclasses

    from andrea_ref import CONFIGS
    values = set()
    for cfg in CONFIGS.values():
        for field in dataclasses.fields(cfg):
            v = getattr(cfg, field.name)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                values.add(float(v))
        values.add(float(cfg.head_dim))
    return values


def _same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-300)


def typed_problems(name: str, pieces=None, glued_values=None) -> list[str]:
    """Every typed number of a page that none of the rules allows, with its context."""
    info = page(name)
    pieces = info["pieces"] if pieces is None else pieces
    glue_values = list(glued(name).values()) if glued_values is None else glued_values
    allowed = {**ALLOWED["*"], **ALLOWED.get(name, {})}
    known = info["literals"] | _preset_values() | set(allowed)
    problems = []
    for kind, text in pieces:
        for value, context in numbers(text):
            v = abs(value)
            if v <= 10 and float(v).is_integer():
                continue                          # a small count, an ordinal, an exponent
            if float(v).is_integer() and 1900 <= v <= 2099:
                continue                          # a year
            if any(_same(v, abs(k)) for k in known):
                continue
            if kind == "caption" and any(g and abs(v - abs(g)) <= 0.15 * abs(g) for g in glue_values):
                continue
            problems.append(f"{name} ({kind}): {value:g} in '... {context} ...'")
    return problems


@pytest.mark.parametrize("name", PAGES)
def test_no_typed_number_contradicts_the_computation(name):
    problems = typed_problems(name)
    assert not problems, ("numbers typed in the text instead of glued from the computation "
                          "(glue them, or add them to ALLOWED with a reason):\n" + "\n".join(problems))


def test_every_allowed_number_is_used():
    """An entry of ALLOWED that no page needs any more is removed, not kept as a loophole."""
    unused = []
    for name, entries in ALLOWED.items():
        names = PAGES if name == "*" else [name]
        written = [abs(v) for n in names for _, text in page(n)["pieces"] for v, _ in numbers(text)]
        unused += [f"{name}: {k:g}" for k in entries if not any(_same(k, v) for v in written)]
    assert not unused, f"allowed numbers no page writes: {unused}"


def test_the_scan_catches_a_typed_result():
    """The scan flags the exercise the kernel chapter once had: a bound typed from memory
    (about 3e-5) on a page that computes 1.3e-3."""
    old = ('(b) "the hardware tanh keeps a float32 GELU within about $3 \\times 10^{-5}$ of the formula"; '
           '(c) "the CPU twin agrees with `F.gelu(approximate=\'tanh\')` to float32 rounding".')
    problems = typed_problems("07_gelu_kernel", pieces=[("prose", old)], glued_values=[1.3e-3])
    assert len(problems) == 1 and "3e-05" in problems[0]
    # the same words with the number glued pass
    fixed = old.replace("about $3 \\times 10^{-5}$", "{glue:text}`k_fast_gap:.1e`")
    assert typed_problems("07_gelu_kernel", pieces=[("prose", fixed)], glued_values=[1.3e-3]) == []


def test_number_reader():
    read = [v for v, _ in numbers("x = 1,024 and $3 \\times 10^{-5}$, 1.3e-3, $2^{26}$, 45%, "
                                  "GPT-2, ANDREA-120M, fp16, $W_1$, $x^3$, {glue:text}`a_12`, `12.5`, "
                                  "exercise 4.2, Chapter 31")]
    assert len(read) == 5 and all(math.isclose(a, b) for a, b in zip(read, [1024, 3e-5, 1.3e-3, 2 ** 26, 0.45]))


# ----------------------------------------------------------------------- overlap
def _words(text: str) -> list[str]:
    return re.findall(r"[^\W\d_]+", text.lower())


def _ngrams(words: list[str], n: int = 6) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


@pytest.mark.parametrize("language", ["de", "ka"])
def test_no_six_words_of_the_lesson_in_an_edition(language):
    lesson = SOURCE / f"lesson-{language}.txt"
    if not lesson.is_file():
        pytest.skip(f"the source lesson is not at {lesson}")
    from babel.messages.pofile import read_po

    shared = _ngrams(_words(lesson.read_text(encoding="utf-8")))
    hits = []
    for po in sorted((BOOK / "locales" / language / "LC_MESSAGES" / "book").glob("*.po")):
        with po.open("rb") as f:
            for message in read_po(f):
                if not message.id or not isinstance(message.string, str):
                    continue
                text = _CODE_SPAN.sub(" ", _ROLE.sub(" ", message.string))
                common = _ngrams(_words(text)) & shared
                if common:
                    hits.append(f"{po.name}: {' '.join(sorted(common)[0])!r} in {message.string[:120]!r}")
    assert not hits, "runs of six words shared with the source lesson:\n" + "\n".join(hits)


# ------------------------------------------------------------ the prose's verdicts
def _values(name: str) -> dict:
    values = glued(name)
    if not values:
        pytest.fail(f"{name}.glue.json is missing: build the book first (make book)")
    return values


def _glued_text(name: str) -> dict:
    out = {}
    for key, output in json.loads((EXEC_DIR / f"{name}.glue.json").read_text()).items():
        try:
            out[key] = ast.literal_eval(output["data"]["text/plain"])
        except (ValueError, SyntaxError):
            out[key] = output["data"]["text/plain"]
    return out


def test_depth_verdicts_hold_over_the_seeds():
    """Chapter 3's words about its ten-seed figures: a narrow band with residuals, a wide
    scatter without them at 12 blocks, every seed below the band from the collapse on."""
    v = _values("03_residual_connections")
    assert v["grad_res_max"] / v["grad_res_min"] < 1.3                      # "a narrow band"
    assert v["grad_nores_12_max"] / v["grad_nores_12_min"] > 4               # "scatter widely"
    assert v["grad_nores_12_min"] < v["grad_res_min"] < v["grad_nores_12_max"]  # "some above, some below"
    assert v["grad_nores_32_max"] < v["grad_res_min"] and v["grad_all_below_from"] <= 32
    assert abs(v["grad_nores_12"] / v["grad_res_12"] - 1) < 0.3              # the lesson's claim fails at 12
    assert v["ex34_bare_max"] / v["ex34_bare_min"] > 2                       # "spread over a wide range"
    assert v["sum_plain_64_min"] > 5 * v["sum_scaled_64_max"]                # "the seeds hardly differ"
    assert 1 < v["ex35_ratio"] < math.sqrt(2)                                # "smaller by less than that"
    assert abs(v["drop_zero_share"] - 0.1) < 0.01 and abs(v["drop_mean_after"] - v["drop_mean_before"]) < 0.01
    assert v["stream_change_0"] > 1 > 0.5 > v["ident_rel_unit"]              # the identity verdict


def test_placement_verdicts_hold():
    """Chapter 4's words about BatchNorm, RMSNorm, Adam and its training runs."""
    v = _values("04_layernorm_and_placement")
    assert v["ln_other"] == 0 == v["ln_later"] and v["bn_other"] > 0.1 and v["bn_later"] > 0.1
    assert v["rms_gap_centred"] < 1e-12 < 0.1 < v["rms_gap_raw"]
    assert v["ln_scale_gap"] < 1e-5 and v["ex42_gap"] < 1e-4
    # Adam: every first update is the learning rate, whatever the gradient
    assert v["adam_post_grad_max"] > v["adam_pre_grad_max"]
    assert abs(v["adam_update_min"] / v["adam_lr"] - 1) < 0.01 and abs(v["adam_update_max"] / v["adam_lr"] - 1) < 0.01
    assert v["adam_rescale_change"] < 0.01 and v["ex45_change"] < 0.05
    assert v["adam_logit_ratio_max"] > 1 and v["adam_logit_more"] >= 5
    # "post-norm stalls at the unigram entropy in every seed; pre-norm learns in every seed"
    assert abs(v["train_post_best"] - v["train_unigram"]) < 0.1 and v["train_post_final"] > v["train_unigram"] - 0.1
    assert v["train_pre_worst"] < v["train_unigram"] - 0.5
    # "within 100 steps none of the remedies helps": all at or above the unigram entropy
    for key in ("rem_w50_final", "rem_lr3_final", "rem_lr1_final"):
        assert v[key] >= v["train_unigram"], key
    # "only the longer run gets further", after the first 100 steps
    assert v["rem_long_at_100"] > v["train_unigram"] - 0.1 and v["rem_long_below_step"] > 100
    assert v["train_pre_below_step"] < 30                                # pre-norm "at once"
    assert v["rem_long_final"] < v["train_unigram"] - 0.2
    assert v["ex44_ratio"] > v["ex44_ratio_12"] and v["ex44_pre_first"] > v["ex44_pre_first_12"] > v["ex44_pre_last"]
    assert 0 < v["ex44_pre_rises"] < v["ex44_steps"] / 2


def test_other_verdicts_hold():
    two = _values("02_attention_plus_mlp")
    assert two["ch2_affine_gap"] < 1e-5 and two["ch2_ex4_mlp_count"] == 1 and 0.35 < two["ch2_ex4_ratio"] < 0.65
    six = _values("06_andrea_120m")
    assert abs(six["tie_untied"] - six["tie_bigram"]) < 0.01                # "to within rounding"
    assert six["tie_untied"] < six["tie_ln"] < six["tie_bare"] < six["tie_unigram"]
    assert six["tie_bare_share"] > 0.5 and six["tie_ln_gap"] < 0.1
    assert six["tie_pair_ab"] != six["tie_pair_ba"]
    assert six["tm_w_min"] > 0.02 and six["tm_w_max"] < 0.5 and six["tm_w_spread"] > 2   # "not flat", "no choice"
    seven = _values("07_gelu_kernel")
    assert seven["k_fast_vs_fp16"] == 0.5 and seven["k_fast_vs_bf16"] == 1 / 16  # "a factor of two ... sixteen"
    assert seven["kx4_over_tol"] > 1 and _glued_text("07_gelu_kernel")["kx5_second_compiled"] is False
    eight = _glued_text("08_exercises")
    assert eight["mm_all_caught"] is True
    for key in ("mm_unbiased_loss", "mm_eps_loss", "mm_erf_loss"):          # "barely notices"
        assert abs(eight[key]) < 2e-3, key
    for key in ("mm_unbiased_block", "mm_eps_block", "mm_erf_block"):
        assert eight[key] < 1e-3, key
    assert eight["mm_residual_loss"] > eight["mm_unigram"] and eight["mm_post_loss"] > eight["mm_unigram"]
    assert eight["mm_residual_block"] > 0.5
    assert (eight["dt_residual_step"], eight["dt_post_step"], eight["ex81_step"]) == ("block.out", "ln_1.in", "ln_2.out")
    assert eight["ex81_n_failed"] == 2


def test_the_shared_norm_block_fails_exactly_the_named_checks():
    """Exercise 8.1 names the two checks a block with one LayerNorm for both sublayers fails."""
    from andrea_ref import museum as M
    from book_values import shared_norm_block

    graded = M.grade(M.Exhibit("shared_norm", "block", shared_norm_block, "shared"))
    assert [prop for prop, ok, _ in graded if not ok] == ["a LayerNorm per sublayer", "the whole block"]


def test_every_museum_exhibit_is_caught_and_named():
    """Each exhibit fails at least one graded check, and that check names a likely mistake."""
    from andrea_ref import museum as M

    for exhibit in M.EXHIBITS:
        failed = [(prop, likely) for prop, ok, likely in M.grade(exhibit) if not ok]
        assert failed and all(likely for _, likely in failed), exhibit.key
