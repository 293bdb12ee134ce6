"""What the MLflow UI opens on: saved views of an experiment's runs, its description, the link to them.

MLflow 3.17's experiment page opens on its GenAI overview unless the URL says
``workflowType=machine_learning`` (or the browser remembers an earlier choice): the experiment's
kind tag does not choose the page. The runs table's columns, filter, sort and charts are state the
browser keeps, except for saved views: an experiment tag ``mlflow.sharedViewState.<id>`` whose value
is an envelope ``{"name", "createdAt", "state"}``, ``state`` the view's search facets and UI state as
JSON; the URL parameter ``viewStateShareKey=<id>`` opens it, and the UI lists it among the saved views
(its "Save & share view" writes the same tags). What a store cannot set: the colours of grouped rows
(the browser's local storage) and whether the runs table or the charts open (the URL's
``compareRunsMode``).
"""

from __future__ import annotations

import json
from urllib.parse import urlencode

SHARED_VIEW = "mlflow.sharedViewState."  # + the view's id: an experiment tag per saved view
NOTE = "mlflow.note.content"  # the experiment's description (Markdown)
SUMMARY, SEEDS, CURVES, BAND = "summary", "seeds", "curves", "band"  # the views' ids (URL: viewStateShareKey)
CREATED = 0  # the views' createdAt (ms): fixed, so rewriting them changes no tag


def headline(cfg: dict) -> tuple[str, ...]:
    """The metrics a comparison of methods reads first, as the tables name them: TRACE leads with OP
    (its Table 2; OP equals Last), the other benchmarks with Last (Table 1)."""
    first = "OP" if cfg["data"]["kind"] == "trace" else "Last"
    return (first, "Average", "Transfer", "Forgetting", "BWT")


def metric_column(name: str) -> str:
    return f"metrics.`{name}`"


def tag_column(name: str) -> str:
    return f"tags.`{name}`"


RUN_NAME_COLUMN = tag_column("mlflow.runName")
CURVE_CHARTS = "Accuracy/"  # the charts of the per-task accuracy curves (a regex over chart names)


def columns(*keys: str) -> dict:
    """The runs table's columns beside the run names, in this order (the UI's own order is alphabetical)."""
    return {"selectedColumns": list(keys), "columnOrder": list(keys)}


def saved_views(cfg: dict) -> dict[str, tuple[str, dict]]:
    """id -> (name, state) of each view this experiment offers: the state as the UI saves it (search
    facets, then UI state; what a view leaves out is the UI's default). Every view shows all its runs
    in the charts (the default: the first 10)."""
    names = headline(cfg)
    common = {"orderByKey": metric_column(names[0]), "orderByAsc": False, "runsHiddenMode": "SHOW_ALL"}
    summaries = {**common, "searchFilter": "tags.kind = 'summary'"}
    seeds = {**common, "searchFilter": "tags.kind = 'run'"}
    means = [metric_column(name) for name in names]
    spread = [metric_column(column) for name in names for column in (name, f"{name} std")]
    by_method = {"aggregateFunction": "average", "groupByKeys": [{"mode": "tag", "groupByData": "method"}]}
    return {
        SUMMARY: ("Methods: mean ± std over seeds", {**summaries, **columns(*spread)}),
        SEEDS: (
            "Runs: one per method and seed",
            {**seeds, "orderByKey": RUN_NAME_COLUMN, "orderByAsc": True, **columns(*means)},
        ),
        CURVES: (
            "Per-task accuracy curves, mean over seeds",
            {**summaries, **columns(*means), "chartsSearchFilter": CURVE_CHARTS},
        ),
        BAND: (
            "Per-task accuracy curves, band over seeds",
            {
                **seeds,
                "groupBy": by_method,
                "groupsExpanded": {f"tag.method.{method}": False for method in cfg["methods"]},  # a row per method
                "useGroupedValuesInCharts": True,
                "chartsSearchFilter": CURVE_CHARTS,
            },
        ),
    }


def view_tags(cfg: dict) -> dict[str, str]:
    """The experiment tags of the saved views."""
    return {
        f"{SHARED_VIEW}{view}": json.dumps({"name": name, "createdAt": CREATED, "state": json.dumps(state)})
        for view, (name, state) in saved_views(cfg).items()
    }


def view_link(experiment_id: str, view: str = SUMMARY, charts: bool = False, base: str = "") -> str:
    """The URL of a saved view of the experiment in the classic (machine learning) experiment page;
    ``base`` empty: a link relative to the UI's page (the experiment's description)."""
    query = {"workflowType": "machine_learning", "viewStateShareKey": view}
    if charts:
        query["compareRunsMode"] = "CHART"
    return f"{base}{'/' if base else ''}#/experiments/{experiment_id}/runs?{urlencode(query)}"


def experiment_note(cfg: dict, experiment_id: str) -> str:
    """The experiment's description (Markdown): where to look, the filters to type, what the names mean."""
    views = saved_views(cfg)

    def link(view: str, charts: bool = False) -> str:
        return f"[{views[view][0]}]({view_link(experiment_id, view, charts)})"

    tasks = ", ".join(cfg["tasks"])
    return f"""**Start here: {link(SUMMARY)}**, one summary run per method (filter `tags.kind = 'summary'`),
best {headline(cfg)[0]} first; each metric is the mean over seeds, `<metric> std` its spread. Then
{link(CURVES, charts=True)} (the summary runs, in the methods' colours) or
{link(BAND, charts=True)} (the runs grouped by method).

- {link(SEEDS)}: `tags.kind = 'run'`. All of one method: filter `tags.method = '<method>'` and sort by
  Run Name: its summary, then each seed's run, its matrix rows (`row00`: the pretrained model; their
  `Accuracy/...` columns are its matrix) and training tasks (`task01-...`).
- Metrics as the tables name them: Transfer, Average, Last, Forgetting, BWT, OP (% points, rounded to
  0.01); per task `Last/01_<task>`, ... and `Accuracy/01_<task>`, the accuracy on that task after
  training task i (at step i; on a row's run, after that row's task). A task's index leads its name, so
  names sort in stream order.
- Other kinds: `train`, `row`, `pretrained` (row 0, shared by all methods), `tables`.

{cfg["benchmark"]}, {len(cfg["tasks"])} tasks: {tasks}. The result files are the source of truth; these
runs mirror them.
"""
