"""The evaluation's figures: an A matrix's heatmap and the figures comparing methods.

Each is drawn with matplotlib's object API (no pyplot: its global state is not thread-safe, and
the tables job runs inside the Snakemake process) and saved as a PNG and, beside it, the same
figure as a vector PDF. The comparison figures draw the numbers they are given (the tables' own,
``codyra.evaluation.tables``) and return the figure, whose artists hold what was drawn. A method
keeps its style in every figure: its colour by its place in the grid's method list, in the
palette of its MLflow runs (matplotlib's tab20 without its greys), and, once the palette is used
up, another marker and line style; grey is the zero-shot reference.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from codyra.store.io import atomic_write

REFERENCE_COLOR = "#7f7f7f"
MARKERS, LINESTYLES = ("o", "s", "^", "D"), ("-", "--", ":", "-.")  # a set per round through the palette
Stat = tuple[float, float]  # (mean, std over seeds)


class Style(NamedTuple):
    color: str
    marker: str
    linestyle: str


def palette() -> list[str]:
    """tab20's dark colours, then its light ones, without the greys."""
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    colors = [to_hex(c) for c in colormaps["tab20"].colors]
    return [c for c in colors[0::2] + colors[1::2] if c not in (REFERENCE_COLOR, "#c7c7c7")]


def method_styles(methods: list[str], reference: set[str] = frozenset()) -> dict[str, Style]:
    """Each method's style by its place in ``methods`` (the grid's order); the ``reference`` methods grey."""
    colors = palette()
    styles = {}
    for k, method in enumerate(methods):
        round_ = k // len(colors) % len(MARKERS)
        color = REFERENCE_COLOR if method in reference else colors[k % len(colors)]
        styles[method] = Style(color, MARKERS[round_], LINESTYLES[round_])
    return styles


def _figure(width: float, height: float):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _save(fig, png: Path) -> None:
    """``png`` and the same figure as a PDF beside it, each written atomically."""
    for path, ext in ((png, "png"), (png.with_suffix(".pdf"), "pdf")):
        atomic_write(path, lambda tmp, ext=ext: fig.savefig(tmp, format=ext, dpi=110))


def save_heatmap(A, tasks: list[str], title: str, png: Path) -> None:
    """The A matrix as ``png`` and, beside it, the same figure as a vector PDF: row i is the model
    after training tasks 1..i (row 0: the pretrained model), column j the evaluated task."""
    fig = _figure(1.8 + 0.9 * len(tasks), 1.4 + 0.7 * len(A))
    ax = fig.add_subplot()
    image = ax.imshow(A, vmin=0, vmax=100, cmap="viridis")
    for i, row in enumerate(A):
        for j, value in enumerate(row):
            ax.text(
                j, i, f"{value:.1f}", ha="center", va="center", fontsize=8, color="white" if value < 60 else "black"
            )
    ax.set_xticks(range(len(tasks)), tasks, rotation=45, ha="right")
    ax.set_yticks(range(len(A)), ["pretrained"] + [f"after {k}: {t}" for k, t in enumerate(tasks, 1)])
    ax.set_xlabel("evaluated task j")
    ax.set_ylabel("model after training task i")
    ax.set_title(title)
    fig.colorbar(image, ax=ax, label="accuracy (%)")
    _save(fig, png)


class Point(NamedTuple):
    """A method in the scatter: its label, style and the (mean, std over seeds) on each axis."""

    label: str
    style: Style
    x: Stat
    y: Stat


def save_scatter(points: list[Point], x_label: str, y_label: str, title: str, png: Path):
    """A point per method at its means, error bars of its std over seeds on both axes, its label
    beside it; returns the figure."""
    fig = _figure(7.5, 5.5)
    ax = fig.add_subplot()
    for point in points:
        (x, x_std), (y, y_std) = point.x, point.y
        color, marker = point.style.color, point.style.marker
        ax.errorbar(x, y, xerr=x_std, yerr=y_std, fmt=marker, color=color, capsize=3, label=point.label)
        ax.annotate(point.label, (x, y), xytext=(4, 4), textcoords="offset points", fontsize=7, color="0.25")
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    _save(fig, png)
    return fig


class Curve(NamedTuple):
    """A method's accuracy on each task after each task: ``A[i][j]`` = (mean, std over seeds), i = 0..N."""

    label: str
    style: Style
    A: list[list[Stat]]


def save_curves(curves: list[Curve], tasks: list[str], title: str, png: Path):
    """A panel per task j: the accuracy on j of the model after each task i (0: pretrained), a line
    per method at its mean and a band of ± its std over seeds; returns the figure."""
    columns = min(len(tasks), 3)
    rows = -(-len(tasks) // columns)
    fig = _figure(3.6 * columns + 2.2, 2.8 * rows + 0.6)
    axes = fig.subplots(rows, columns, squeeze=False, sharex=True, sharey=True)
    steps = range(len(tasks) + 1)
    for j, (ax, task) in enumerate(zip(axes.flat, tasks, strict=False)):
        for curve in curves:
            mean = [curve.A[i][j][0] for i in steps]
            std = [curve.A[i][j][1] for i in steps]
            color, marker, linestyle = curve.style
            ax.plot(steps, mean, color=color, marker=marker, markersize=3, linestyle=linestyle, label=curve.label)
            low = [m - s for m, s in zip(mean, std, strict=True)]
            high = [m + s for m, s in zip(mean, std, strict=True)]
            ax.fill_between(steps, low, high, color=color, alpha=0.15, linewidth=0)
        ax.axvline(j + 1, color="black", linewidth=0.6, linestyle=":")  # the step that trains task j
        ax.set_title(f"task {j + 1}: {task}", fontsize=9)
        ax.set_xticks(steps, ["pre"] + [str(i) for i in steps[1:]])
        ax.grid(alpha=0.3)
        if j + columns >= len(tasks):  # the lowest panel of its column
            ax.tick_params(labelbottom=True)
            ax.set_xlabel("after training task i")
    for ax in axes.flat[len(tasks) :]:
        ax.set_axis_off()
    for ax in axes[:, 0]:
        ax.set_ylabel("accuracy (%)")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper", fontsize=7)
    fig.suptitle(title, fontsize=10)
    _save(fig, png)
    return fig
