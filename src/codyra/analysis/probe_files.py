"""The names of a run's probe files (:mod:`codyra.analysis.probes`), without the probes' imports:
the workflow reads them when it builds the DAG."""

from __future__ import annotations


def interp_name(alpha: float) -> str:
    return f"interp-{alpha:g}"


def probed_alphas(cfg: dict) -> list[float]:
    """The interpolation alphas a probe job computes: alpha = 0 is theta_0 and alpha = 1 theta_N
    exactly (``scaled``), whose held-out accuracies the held-out jobs H_0 / H_N already wrote."""
    return [a for a in cfg["analysis"]["interpolation_alphas"] if a not in (0, 1)]


def remove_name(tower: str) -> str:
    return f"remove-{tower}"


def module_label(placement) -> str:
    """``vision_v`` for ``[vision, v]``: the removed modules in a name."""
    from codyra.experiment.sweeps import value_label

    return value_label(placement)


def without_name(placement) -> str:
    return f"without-{module_label(placement)}"


def probe_names(cfg: dict) -> list[str]:
    """The probe files a run's probe job writes (alpha = 0 and 1 are the held-out files H_0 / H_N)."""
    return (
        [interp_name(a) for a in probed_alphas(cfg)]
        + [remove_name(t) for t in cfg["analysis"]["remove_towers"]]
        + [without_name(p) for p in cfg["analysis"]["remove_modules"]]
    )
