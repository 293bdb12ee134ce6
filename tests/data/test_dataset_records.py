"""The dataset records (codyra.data.datasets): discovered from their modules, consistent with the
protocols' lists, and enough on their own to add a dataset."""

import subprocess
import sys
import textwrap

import pytest

from codyra.data import catalog
from codyra.data.catalog import MTIL, PROTOCOLS, RECORDS, XTAIL, check_records, requirement
from codyra.data.datasets import Dataset, Expected, TorchvisionLayout, discover
from codyra.data.sources import load_splits
from codyra.data.templates import templates
from codyra.rehearsal.datasets import write_image

# A dataset of its own module: two classes of one image each, in "toy/<class>/<n>.jpg".
TOY_MODULE = """
from codyra.data.datasets import MTIL, Dataset, Expected, TorchvisionLayout


def read(request):
    from codyra.data import sources

    root = request.root
    train = sources.files(root, [root / "toy/a/1.jpg", root / "toy/b/1.jpg"], [0, 1])
    test = sources.files(root, [root / "toy/a/2.jpg", root / "toy/b/2.jpg"], [0, 1])
    return sources.DatasetSplits(("a", "b"), train, test)


DATASET = Dataset(
    name={name!r},
    layout=TorchvisionLayout("toy", ("toy/",), "write it"),
    expected={{MTIL: Expected(2, 2, 2)}},
    templates={{MTIL: ("a toy {{}}.",)}},
    reader=read,
)
"""


@pytest.fixture
def package(tmp_path, monkeypatch):
    """Writes a package of dataset modules under tmp_path and returns its name."""
    monkeypatch.syspath_prepend(str(tmp_path))
    written = []

    def write(modules: dict[str, str]) -> str:
        name = f"toy_datasets_{len(written)}"
        folder = tmp_path / name
        folder.mkdir()
        (folder / "__init__.py").write_text("")
        for module, source in modules.items():
            (folder / f"{module}.py").write_text(textwrap.dedent(source))
        written.append(name)
        return name

    yield write
    for module in [m for m in sys.modules if m.split(".")[0] in written]:
        del sys.modules[module]


def test_every_record_is_discovered_and_read_by_a_protocol():
    assert discover() == RECORDS
    listed = {
        name for protocol in PROTOCOLS for name in catalog.DATASETS[protocol] + catalog.HELDOUT_DATASETS[protocol]
    }
    assert set(RECORDS) == listed
    assert all(name == record.name for name, record in RECORDS.items())


def test_every_listed_dataset_has_a_record_with_sizes_and_templates_for_its_protocol():
    check_records(RECORDS)
    for protocol in PROTOCOLS:
        for name in catalog.DATASETS[protocol] + catalog.HELDOUT_DATASETS[protocol]:
            assert isinstance(RECORDS[name].expected[protocol], Expected)
            assert templates(name, protocol)


def test_xtail_reads_coop_split_files_only_where_a_record_names_one():
    without_split = {name for name in catalog.XTAIL_DATASETS if RECORDS[name].coop is None}
    assert without_split == {"Aircraft", "MNIST"}


def test_the_catalog_and_templates_import_without_torch():
    code = (
        "import sys\n"
        "import codyra.data.catalog, codyra.data.templates\n"
        "print(sorted(m for m in ('torch', 'torchvision', 'numpy', 'PIL', 'open_clip') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_a_protocol_list_naming_no_record_is_refused_with_the_missing_name():
    with pytest.raises(ValueError, match="xtail lists 'Toy', which no module of codyra.data.datasets declares"):
        check_records(RECORDS, heldout={MTIL: (), XTAIL: ("Toy",)})


def test_a_record_without_a_listing_protocol_s_sizes_or_templates_is_refused(package):
    records = discover(package({"toy": TOY_MODULE.format(name="Toy")}))
    datasets = {MTIL: ("Toy",), XTAIL: ("Toy",)}
    with pytest.raises(ValueError) as error:
        check_records(records, datasets, heldout={MTIL: (), XTAIL: ()})
    assert str(error.value) == (
        "xtail lists 'Toy', whose record has no expected sizes for 'xtail'; "
        "xtail lists 'Toy', whose record has no templates for 'xtail'"
    )


def test_two_modules_declaring_one_name_are_refused(package):
    name = package({"first": TOY_MODULE.format(name="Toy"), "second": TOY_MODULE.format(name="Toy")})
    with pytest.raises(ValueError, match=f"{name}.first and {name}.second both declare the dataset 'Toy'"):
        discover(name)


def test_a_module_without_a_record_is_refused(package):
    name = package({"notes": "TEXT = 'not a dataset'\n"})
    with pytest.raises(TypeError, match=f"{name}.notes declares no DATASET record"):
        discover(name)


def test_a_new_dataset_is_its_module_and_its_name_in_a_protocol_s_list(package, tmp_path, monkeypatch):
    """The module's record is all the catalog, the templates and load_splits read."""
    records = discover(package({"toy": TOY_MODULE.format(name="Toy")}))
    record = records["Toy"]
    assert isinstance(record, Dataset) and record.layout == TorchvisionLayout("toy", ("toy/",), "write it")
    monkeypatch.setitem(catalog.RECORDS, "Toy", record)
    monkeypatch.setitem(catalog.DATASETS, MTIL, (*catalog.MTIL_DATASETS, "Toy"))
    check_records(catalog.RECORDS)

    assert templates("Toy", MTIL) == ("a toy {}.",)
    assert requirement("Toy", MTIL).required == ("toy/",)
    root = tmp_path / "data"
    for path in ("a/1.jpg", "b/1.jpg", "a/2.jpg", "b/2.jpg"):
        write_image(root / "toy" / path)
    splits = load_splits("Toy", MTIL, root)
    assert splits.classnames == ("a", "b")
    assert splits.train.keys == ("toy/a/1.jpg", "toy/b/1.jpg") and splits.test.labels == (0, 1)
    with pytest.raises(ValueError, match="unknown dataset 'Toy' for protocol 'xtail'"):
        load_splits("Toy", XTAIL, root)
