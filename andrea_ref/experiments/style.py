"""The look of the book's figures: one palette and one matplotlib style for every chapter."""
from __future__ import annotations


# One palette for every figure: the colour of a variant never changes between chapters.
PLOT_COLORS = {
    "pre": "#1b6ca8",
    "post": "#d1495b",
    "residual": "#1b6ca8",
    "no_residual": "#d1495b",
    "attn": "#1b6ca8",
    "mlp": "#edae49",
    "gelu": "#1b6ca8",
    "gelu_exact": "#00798c",
    "relu": "#7f7f7f",
    "error": "#d1495b",
}


def use_book_style() -> None:
    """Apply the book's matplotlib style (call once per chapter)."""
    import matplotlib

    matplotlib.rcParams.update({
        "figure.figsize": (6.4, 3.6),
        "figure.dpi": 110,
        "savefig.dpi": 110,
        "savefig.bbox": "tight",
        "font.size": 10,
        "axes.titlesize": 11,
        "axes.labelsize": 10,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "legend.frameon": False,
        "lines.linewidth": 1.8,
    })
    try:  # figures as SVG: sharp at any zoom (only inside IPython, e.g. the book's build)
        from IPython import get_ipython
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:
        return
    if get_ipython() is not None:
        set_matplotlib_formats("svg")
