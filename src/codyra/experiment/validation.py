"""Validation of an experiment config: the schema, the method options, the semantics.

The JSON schema in ``codyra/experiment/schemas/config.schema.yaml`` is the single source of the
structure and of the defaults; the CLI and the Snakemake workflow validate with the same function
(:func:`validate_config`), whose errors name exact key paths and say how to fix them.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import math
from functools import cache
from pathlib import Path

from codyra.errors import ConfigError
from codyra.experiment.resolve import resolve_job, select_backbone, task_settings
from codyra.yaml_loader import load_yaml

SCHEMA_PATH = Path(__file__).resolve().parent / "schemas" / "config.schema.yaml"


@cache
def schema() -> dict:
    return load_yaml(SCHEMA_PATH.read_text())


def _fill_defaults(node, sch: dict) -> None:
    if not isinstance(node, dict):
        return
    for key, sub in sch.get("properties", {}).items():
        if key not in node and "default" in sub:
            node[key] = copy.deepcopy(sub["default"])
        if key in node:
            _fill_defaults(node[key], sub)


def _key_path(parts) -> str:
    """``tasks[1].methods.codyra.kappa_max`` for ``["tasks", 1, "methods", "codyra", "kappa_max"]``."""
    text = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts).lstrip(".")
    return text or "<top level>"


def validate_config(cfg: dict) -> dict:
    """The one validation path of the CLI and the workflow: schema (method options of every kind
    and every per-task override included), then the semantics; errors name exact key paths. A
    config without most of the required keys was written as an overlay: it is refused with the
    line that says how to write one (``overlay_advice``) first, then its own keys' errors."""
    from codyra.experiment.sweeps import expand_ablations

    advice = overlay_advice(cfg)
    try:
        _refuse_task_entries(cfg)
        select_backbone(cfg)
        expand_ablations(cfg)  # before validation: each variant is checked like any method
    except ConfigError as err:
        raise ConfigError("\n".join(filter(None, [advice, str(err)]))) from None
    _fill_defaults(cfg, schema())
    lines = _error_lines(cfg, overlay=advice is not None)
    if advice or lines:
        listed = "invalid configuration:\n  " + "\n  ".join(lines) if lines else None
        raise ConfigError("\n".join(filter(None, [advice, listed])))
    _check_semantics(cfg)
    return cfg


def _refuse_task_entries(cfg: dict) -> None:
    """A stream written as entries with settings (``tasks: [{name: A, methods: ...}]``) predates
    settings keyed by name: say how to write it now rather than list the schema's errors."""
    tasks = cfg.get("tasks")
    entries = [k for k, task in enumerate(tasks) if isinstance(task, dict)] if isinstance(tasks, list) else []
    if entries:
        raise ConfigError(
            f"config key tasks[{entries[0]}]: tasks lists task names in training order (tasks: [Aircraft, DTD]); "
            "per-task settings go in task_settings, keyed by the task's name "
            "(task_settings: {Aircraft: {methods: {zscl: {train: {lr: 5.0e-5}}}}})"
        )


def overlay_advice(cfg: dict) -> str | None:
    """For a config that lacks more than one of the required top-level keys (an overlay written as
    if it were merged into config/config.yaml, as Snakemake merges its --configfile into a
    Snakefile's), the one line that names them and says how to write an overlay; None otherwise
    (a full config that lacks one key gets the schema's line for it)."""
    missing = [key for key in schema()["required"] if key not in cfg]
    if len(missing) < 2:
        return None
    return (
        f"the config has no {', '.join(missing)}: a config file given to snakemake --configfile or codyra --config "
        "replaces config/config.yaml, it is not merged into it; to change a few keys, start the file with "
        "`extends: config/config.yaml` (the base's path, relative to the file), which merges the file's mappings "
        "into the base's key by key and replaces every other value it sets"
    )


def _error_lines(cfg: dict, overlay: bool) -> list[str]:
    """The config's errors of structure and method options, one line each (the first 10)."""
    errors, missing = _schema_errors(cfg, schema(), overlay)
    errors += _method_option_errors(cfg) + _non_finite(cfg, [])
    ordered = sorted(errors, key=lambda e: str(e[0])) + sorted(missing, key=lambda e: str(e[0]))
    return [f"config key {_key_path(path)}: {message}" for path, message in ordered[:10]]


def _schema_errors(instance, sch: dict, overlay: bool) -> tuple[list[tuple[list, str]], list[tuple[list, str]]]:
    """The schema's errors, and its missing required keys apart: those go last, as a misspelt
    key's 'unknown key' line says more. An overlay's missing keys of mappings are left out: the
    base it is to extend holds them (those of list items are its own, as a list replaces)."""
    import jsonschema

    errors, missing = [], []
    for e in jsonschema.Draft202012Validator(sch).iter_errors(instance):
        path = list(e.absolute_path)
        if e.validator == "additionalProperties" and e.validator_value is False:
            errors += [(path + [key], message) for key, message in _unknown_keys(e.instance, e.schema)]
        elif e.validator != "required":
            errors.append((path, _message(e)))
        elif not overlay or any(isinstance(part, int) for part in path):
            missing.append((path, _message(e)))
    return errors, missing


def _unknown_keys(instance: dict, sch: dict) -> list[tuple[str, str]]:
    """(key, message) for each key of ``instance`` its schema does not define, with the nearest defined one."""
    known = sorted(sch.get("properties", {}))
    return [(key, unknown_key_message(key, known)) for key in instance if key not in known]


def unknown_key_message(key, known) -> str:
    """'unknown key; did you mean 'lr'?' (the closest of ``known``), or the keys there are."""
    close = difflib.get_close_matches(str(key), [str(k) for k in known], n=1, cutoff=0.6)
    if close:
        return f"unknown key; did you mean {close[0]!r}?"
    return f"unknown key; the keys here: {', '.join(map(str, known)) or '(none)'}"


def _message(error) -> str:
    if error.validator == "pattern":  # only names have patterns: say what a name may be
        return (
            f"{error.instance!r} is not a valid name: it becomes a folder under results/, "
            "so use letters, digits, '_', '.' and '-', starting with a letter or digit"
        )
    if error.validator == "oneOf":  # a key that takes one of several forms: name them
        forms = [f"{s['const']!r}" if "const" in s else f"a value of type {s['type']}" for s in error.validator_value]
        return f"{error.instance!r} is none of the forms it takes: {' or '.join(forms)}"
    return error.message


def _method_option_errors(cfg: dict) -> list[tuple[list, str]]:
    """Every method config and per-task override against the typed options of its method's kind;
    one without a kind (an overlay's entry) against the options of every kind. Parts of the
    wrong shape are the schema's to report."""
    from codyra.methods import available_kinds, method_class
    from codyra.methods.options import COMMON_KEYS, option_errors

    entries = _mappings(cfg.get("method_configs"))
    kinds = {name: spec.get("kind") for name, spec in entries.items()}
    errors = [
        (["method_configs", name, "kind"], f"unknown method kind {kind!r}; available: {', '.join(available_kinds())}")
        for name, kind in kinds.items()
        if isinstance(kind, str) and kind not in available_kinds()
    ]
    layers = [(["method_configs", name], spec) for name, spec in entries.items()]
    layers += [
        (["task_settings", task, "methods", m], spec)
        for task, settings in _mappings(cfg.get("task_settings")).items()
        for m, spec in _mappings(settings.get("methods")).items()
    ]
    for path, spec in layers:
        kind = kinds.get(path[-1])
        if kind in available_kinds():
            options = method_class(kind).Options
            names = [f.name for f in dataclasses.fields(options)]
            for key, message in option_errors(options, spec, kind=kind):
                close = difflib.get_close_matches(key, names, n=1, cutoff=0.6) if key not in names else []
                errors.append(([*path, key], message + (f" (did you mean {close[0]!r}?)" if close else "")))
        elif kind is None:
            every = _every_option()
            for key in spec:
                if key not in COMMON_KEYS and key not in every:
                    close = difflib.get_close_matches(str(key), every, n=1, cutoff=0.6)
                    hint = f" (did you mean {close[0]!r}?)" if close else ""
                    errors.append(([*path, key], f"no method kind has an option {key!r}{hint}"))
    return errors


def _every_option() -> list[str]:
    """The options of every method kind (a key none of them has is misspelt whatever the kind)."""
    from codyra.methods import available_kinds, method_class

    return sorted({f.name for kind in available_kinds() for f in dataclasses.fields(method_class(kind).Options)})


def _mappings(node) -> dict:
    """The entries of ``node`` (name -> mapping) that are mappings; none when ``node`` is not one."""
    return {name: spec for name, spec in node.items() if isinstance(spec, dict)} if isinstance(node, dict) else {}


def _non_finite(node, path: list) -> list[tuple[list, str]]:
    """NaN and infinities pass JSON-schema ranges (every comparison with NaN is false)."""
    if isinstance(node, float) and not math.isfinite(node):
        return [(path, f"{node} is not a finite number")]
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    return [e for key, value in items for e in _non_finite(value, [*path, key])]


def _check_semantics(cfg: dict) -> None:
    from codyra.adapters.targets import parse_placement
    from codyra.methods import method_class
    from codyra.methods.lora import norm_references

    names = cfg["tasks"]
    known = known_task_names(cfg["data"]["kind"])
    for k, name in enumerate(names):
        if known is not None and name not in known:
            raise ConfigError(
                f"config key tasks[{k}]: {name!r} is not a dataset of the {cfg['data']['kind']} protocol; "
                f"choose from {', '.join(known)}"
            )
    _check_task_settings(cfg, known)
    _check_heldout(cfg, names)
    from codyra.store.paths import RESERVED_NAMES

    for name in RESERVED_NAMES & set(cfg["method_configs"]):
        raise ConfigError(
            f"config key method_configs.{name}: the name is reserved (results/<benchmark>/{name}/ is not a method's)"
        )
    for m in cfg["methods"]:
        if m not in cfg["method_configs"]:
            raise ConfigError(
                f"config key methods: {m!r} has no entry in method_configs (defined: {sorted(cfg['method_configs'])})"
            )
    _check_families(cfg)
    _check_family_data(cfg)
    vocabulary = placement_vocabulary(cfg["model"]["family"])
    for task, settings in cfg["task_settings"].items():
        for m in settings.get("methods", {}):
            if m not in cfg["method_configs"]:
                raise ConfigError(f"config key task_settings.{task}.methods: {m!r} is not a method in method_configs")
    for k, task in enumerate(cfg["tasks"]):
        for m in cfg["methods"]:
            train = resolve_job(cfg, m, k + 1)["train"]
            _check_accumulation(cfg["model"]["family"], train["gradient_accumulation"], m, task)
            _check_optimizer(cfg["model"]["family"], train, m, task)
            _check_augmentation(cfg["data"]["kind"], train, m, task)
            _check_compile(cfg["model"]["family"], train, m, task)
    for m in cfg["methods"]:
        # the method's own config first, then each task that overrides it: the error names that layer
        base = {k: v for k, v in cfg["method_configs"][m].items() if k != "train"}
        layers = [(f"method_configs.{m}", base)]
        layers += [
            (f"task_settings.{t}.methods.{m}", resolve_job(cfg, m, k + 1)["method"])
            for k, t in enumerate(cfg["tasks"])
            if m in task_settings(cfg, t).get("methods", {})
        ]
        for where, options in layers:
            try:
                method = method_class(options["kind"])(options)
                if hasattr(method.options, "placement"):
                    parse_placement(method.options.placement, vocabulary)
            except ValueError as err:
                raise ConfigError(f"config key {where}: {err}") from err
            for ref in norm_references(options):
                if ref == m or ref not in cfg["methods"]:
                    raise ConfigError(
                        f"config key {where}.norm_target: {ref!r} must be another method of the grid "
                        "(config key methods), whose updates' ||dW||_F set the target"
                    )
    for k, placement in enumerate(cfg["analysis"]["remove_modules"]):
        try:
            parse_placement(placement, vocabulary)
        except ValueError as err:
            raise ConfigError(f"config key analysis.remove_modules[{k}]: {err}") from None
    for name, sweep in cfg["ablations"].items():
        if "label" in sweep:
            raise ConfigError(f"config key ablations.{name}.label: applies to single_task sweeps; use table")
    check_single_task(cfg)


def _check_families(cfg: dict) -> None:
    """Each method of the grid runs on the model family (its class's ``families``)."""
    from codyra.methods import method_of

    family = cfg["model"]["family"]
    for m in cfg["methods"]:
        cls = method_of(cfg, m)
        if family not in cls.families:
            raise ConfigError(
                f"config key methods: method {m!r} (kind {cls.kind!r}) does not run on model family {family!r}; "
                f"kind {cls.kind!r} supports {', '.join(cls.families)}: "
                "remove it from methods or pick a benchmark of that family"
            )


def _check_task_settings(cfg: dict, known: tuple[str, ...] | None) -> None:
    """Settings are keyed by the name of a task of the stream, or of a task the benchmark provides (a
    stream may leave out a task its base configures); any other name is misspelt, and its settings
    would apply to nothing. ``known``: the data kind's datasets; TRACE's task folders may be any,
    so there the benchmark's are TRACE's own eight."""
    if known is None and cfg["data"]["kind"] == "trace":
        from codyra.trace.metrics import TRACE_TASKS

        known = TRACE_TASKS
    for name in cfg["task_settings"]:
        if name in cfg["tasks"] or name in (known or ()):
            continue
        close = difflib.get_close_matches(name, cfg["tasks"], n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ConfigError(
            f"config key task_settings.{name}: {name!r} is not a task of the stream "
            f"(tasks: {', '.join(cfg['tasks'])}); {hint}name a task of the stream, "
            f"or set task_settings.{name}: null to drop the settings"
        )


def _check_heldout(cfg: dict, stream: list[str]) -> None:
    kind = cfg["data"]["kind"]
    known = known_heldout_names(kind)
    for k, name in enumerate(cfg["heldout_tasks"]):
        if name in stream:
            raise ConfigError(
                f"config key heldout_tasks[{k}]: {name!r} is a task of the stream (tasks); "
                "a held-out task is never trained on"
            )
        if name not in known:
            raise ConfigError(
                f"config key heldout_tasks[{k}]: {name!r} is not a held-out dataset of the {kind} protocol; "
                f"choose from {', '.join(known) or '(none)'}"
            )


def _check_accumulation(family: str, steps: int, method: str, task: str) -> None:
    # type and range: the schema (every layer); here what depends on the model family
    where = f"train.gradient_accumulation for method {method!r}, task {task!r}"
    if family in IMAGE_FAMILIES and steps != 1:
        raise ConfigError(
            f"{where}: CLIP training takes each batch in one pass, as the paper and the released code do "
            "(BLIP trains as CLIP); set it to 1 and choose train.batch_size instead"
        )


def _check_augmentation(data_kind: str, train: dict, method: str, task: str) -> None:
    if train["augmentation"] != "paper" and data_kind not in ("mtil", "xtail"):
        raise ConfigError(
            f"train.augmentation for method {method!r}, task {task!r}: {train['augmentation']!r} transforms MTIL's and "
            f"X-TAIL's images; data.kind {data_kind} trains on its images as they are: remove the key"
        )


def _check_optimizer(family: str, train: dict, method: str, task: str) -> None:
    where = f"train.optimizer for method {method!r}, task {task!r}"
    if train["optimizer"] == "adamw":
        if train["momentum"] != 0:
            raise ConfigError(
                f"train.momentum for method {method!r}, task {task!r}: applies to optimizer sgd "
                f"(AdamW's momentum is betas[0]); remove it or set train.optimizer: sgd"
            )
        return
    if family not in IMAGE_FAMILIES:
        raise ConfigError(
            f"{where}: sgd applies to the image families; causal LMs train with AdamW (on several GPUs "
            "DeepSpeed's): set it to adamw"
        )
    if train["carry_optimizer"]:
        raise ConfigError(f"{where}: carry_optimizer continues AdamW's moments; with sgd set carry_optimizer: false")


def _check_compile(family: str, train: dict, method: str, task: str) -> None:
    if train["compile_mode"] == "default":
        return
    where = f"train.compile_mode for method {method!r}, task {task!r}"
    if not train["compile"]:
        raise ConfigError(f"{where}: {train['compile_mode']} is a mode of the compiled step; set train.compile: true")
    if family not in IMAGE_FAMILIES:
        raise ConfigError(
            f"{where}: CUDA graphs replay the image families' steps; causal LMs train under DeepSpeed, "
            "whose step launches outside any graph: set it to default"
        )


IMAGE_FAMILIES = ("clip", "blip")  # classify images by class prompts (data kinds mini, mtil, xtail)


def _check_family_data(cfg: dict) -> None:
    if cfg["model"]["family"] != "blip":
        return
    if cfg["data"]["kind"] == "trace":
        raise ConfigError(
            "config key data.kind: 'trace' is text generation; a blip model classifies images: "
            "use data.kind mini, mtil or xtail"
        )
    if cfg["heldout_tasks"]:
        raise ConfigError(
            "config key heldout_tasks: held-out evaluation runs CLIP models only (model.family: clip); "
            "set heldout_tasks: [] for a blip model"
        )


def placement_vocabulary(family: str):
    """The placement tokens a model family understands (the family objects' ``vocabulary``, read
    here from their light targets modules: every job imports this module, and the code version
    of a job is its import closure, so validation must not import the families' training code)."""
    if family == "clip":
        from codyra.clip.targets import CLIP_VOCABULARY

        return CLIP_VOCABULARY
    if family == "blip":
        from codyra.blip.targets import BLIP_VOCABULARY

        return BLIP_VOCABULARY
    from codyra.llm.targets import LM_VOCABULARY

    return LM_VOCABULARY


def known_task_names(kind: str) -> tuple[str, ...] | None:
    """Task names a data kind provides (None: any, e.g. TRACE task folders)."""
    if kind == "mini":
        from codyra.data.scenes import TASK_NAMES

        return TASK_NAMES
    if kind in ("mtil", "xtail"):
        from codyra.data.catalog import MTIL_DATASETS, XTAIL_DATASETS

        return MTIL_DATASETS if kind == "mtil" else XTAIL_DATASETS
    return None


def known_heldout_names(kind: str) -> tuple[str, ...]:
    """Names a data kind can evaluate as held-out tasks (none for TRACE)."""
    if kind in ("mtil", "xtail"):
        from codyra.data.catalog import HELDOUT_DATASETS

        return HELDOUT_DATASETS[kind]
    return known_task_names(kind) if kind == "mini" else ()


def single_task_config(cfg: dict, task: str) -> dict:
    """The validated config of the single-task runs on ``task``: ``task`` its one task (with its
    per-task settings), the reference tasks held out, the
    studies' runs its methods, theta_0 the benchmark's own."""
    from codyra.experiment.pretraining import own_pretraining
    from codyra.experiment.single_task import single_task_benchmark, studies, study_runs, targets

    names = [n for n, s in studies(cfg).items() if s["task"] == task]
    if not names:
        raise ConfigError(f"no single-task study trains {task!r}; studies train: {', '.join(targets(cfg))}")
    derived = copy.deepcopy(cfg)
    methods = list(dict.fromkeys(m for n in names for m, _ in study_runs(derived, n)))
    weights = own_pretraining(cfg)
    derived.update(
        benchmark=single_task_benchmark(cfg, task),
        tasks=[task],
        task_settings={name: s for name, s in derived["task_settings"].items() if name == task},
        heldout_tasks=list(cfg["single_task"]["reference_tasks"]),
        methods=methods,
        ablations={},
        single_task={},
    )
    if weights is not None:  # the mini's own theta_0: the benchmark's, not pretrained again
        derived["model"]["pretrained"] = weights
    removals = []  # every study's: one probe job per run computes them all (its files are the same for every task)
    for study in studies(cfg).values():
        removals += [copy.deepcopy(p) for p in study.get("remove_modules", []) if p not in removals]
    derived["analysis"] = {
        **derived["analysis"],
        "interpolation_alphas": [0.0, 1.0],  # no interpolation probe: theta_0 and theta_1 are the files
        "remove_towers": [],
        "remove_modules": removals,
    }
    try:
        return validate_config(derived)
    except ConfigError as err:
        raise ConfigError(f"config key single_task (the runs on {task}): {err}") from None


def check_single_task(cfg: dict) -> None:
    """Semantics of config key single_task (its structure is the schema's)."""
    from codyra.adapters.targets import parse_placement
    from codyra.experiment.single_task import studies, study_runs, targets

    block = cfg.get("single_task") or {}
    if not studies(cfg):
        if block.get("reference_tasks"):
            raise ConfigError("config key single_task.reference_tasks: set, but single_task.studies is empty")
        return
    kind = cfg["data"]["kind"]
    if cfg["model"]["family"] != "clip":
        raise ConfigError(
            "config key single_task: the single-task probes evaluate retention on held-out CLIP tasks; "
            f"model.family {cfg['model']['family']!r} has none: remove single_task"
        )
    references = block.get("reference_tasks") or []
    if not references:
        raise ConfigError(
            "config key single_task.reference_tasks: empty; Forgetting is measured on reference tasks "
            f"(held-out datasets of {kind}: {', '.join(known_heldout_names(kind))})"
        )
    for k, name in enumerate(references):
        if name not in known_heldout_names(kind):
            raise ConfigError(
                f"config key single_task.reference_tasks[{k}]: {name!r} is not a held-out dataset of {kind}; "
                f"choose from {', '.join(known_heldout_names(kind))}"
            )
    known = known_task_names(kind)
    vocabulary = placement_vocabulary(cfg["model"]["family"])
    for name, study in studies(cfg).items():
        where = f"config key single_task.studies.{name}"
        if known is not None and study["task"] not in known:
            raise ConfigError(
                f"{where}.task: {study['task']!r} is not a dataset of {kind}; choose from {', '.join(known)}"
            )
        if study["task"] in references:
            raise ConfigError(f"{where}.task: {study['task']!r} is a reference task; a reference is never trained on")
        for m in study.get("methods", []):
            if m not in cfg["method_configs"]:
                raise ConfigError(f"{where}.methods: {m!r} is not an entry of method_configs")
        runs = study_runs(copy.deepcopy(cfg), name)
        if not runs:
            raise ConfigError(f"{where}: no runs; list methods and/or sweeps")
        if pivot := study.get("pivot"):
            varied = {o for s in study.get("sweeps", []) for o in (*(s.get("vary") or {}), *(s.get("zip") or {}))}
            for axis in ("rows", "columns"):
                if pivot[axis] not in varied:
                    raise ConfigError(
                        f"{where}.pivot.{axis}: {pivot[axis]!r} is not an option its sweeps vary "
                        f"({', '.join(sorted(varied))})"
                    )
        for k, placement in enumerate(study.get("remove_modules", [])):
            try:
                parse_placement(placement, vocabulary)
            except ValueError as err:
                raise ConfigError(f"{where}.remove_modules[{k}]: {err}") from None
    for name, study in studies(cfg).items():
        if study.get("summary") in studies(cfg):
            raise ConfigError(
                f"config key single_task.studies.{name}.summary: {study['summary']!r} is a study's table; "
                "name the summary table otherwise"
            )
    for task in targets(cfg):
        single_task_config(cfg, task)
