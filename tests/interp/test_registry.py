"""The one registry mechanism (interp.registry): every kind of plug-in is a ``Registry`` with the
same declare / list / validate / require; a run records only the plugins whose entries its
training used, so a command needs a plugin only when it uses it."""

import json
from pathlib import Path

import pytest

from interp.registry import REGISTRIES, Registry, declaring_from, plugins_of

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


def _registry() -> Registry:
    return Registry(
        "widget",
        field="Config.widget",
        entry="Widget",
        pattern=r"^[a-z]+$",
        pattern_says="lower case letters",
        hint="(a plugin's widget needs --plugin FILE)",
    )


def test_declare_list_require_and_the_one_line_refusals():
    """Cost: milliseconds."""
    reg = _registry()
    a, b = object(), object()
    assert reg.declare("beta", a) is a and reg.declare("alpha", b) is b
    assert reg.names() == ("beta", "alpha")  # declaration order
    assert reg.require("alpha") is b and reg.require_all(["beta", "alpha"]) == [a, b]
    assert reg.declare("beta", a) is a  # the same entry again (a module imported twice)
    with pytest.raises(ValueError) as err:
        reg.declare("beta", object())
    assert str(err.value) == (
        "Widget.name='beta' is invalid: already registered (pass replace=True to replace it)"
    )
    c = reg.declare("beta", object(), replace=True)
    assert reg.require("beta") is c
    with pytest.raises(ValueError) as err:
        reg.require("gamma")
    assert str(err.value) == (
        "Config.widget='gamma' is invalid: registered widgets are ['beta', 'alpha'] "
        "(a plugin's widget needs --plugin FILE)"
    )
    with pytest.raises(ValueError, match=r"^Config\.widget=\['x'\] is invalid"):
        reg.require(["x"])  # unhashable: the same refusal, not a TypeError
    for bad in ("Bad", "", None, "two words"):
        with pytest.raises(ValueError, match=r"^Widget\.name=.* is invalid: lower case letters$"):
            reg.declare(bad, object())
    reg.withdraw("alpha")
    reg.withdraw("alpha")  # withdrawing what is not there does nothing
    assert reg.names() == ("beta",)


def test_origin_names_the_plugin_whose_import_declared_an_entry():
    """Cost: milliseconds."""
    reg = _registry()
    reg.declare("own", 1)
    with declaring_from("/plugins/a.py"):
        reg.declare("first", 2)
        with declaring_from("pkg.mod"):
            reg.declare("inner", 3)
        reg.declare("second", 4)
    assert [reg.origin(n) for n in reg] == [None, "/plugins/a.py", "pkg.mod", "/plugins/a.py"]
    reg.declare("first", 5, replace=True)  # declared again by the package: no longer a plugin's
    assert reg.origin("first") is None
    used = {"widget": ["second", "inner", "own"], "no such kind": ["x"]}
    assert plugins_of(used) == ["/plugins/a.py", "pkg.mod"]
    assert plugins_of({"widget": None}) == ["pkg.mod", "/plugins/a.py"]  # every entry


def test_every_kind_of_plug_in_is_one_registry():
    """Each public registry is the Registry of its kind. Cost: imports only."""
    import interp.experiments as experiments
    import phenomenology.models as models
    from interp.analysis.measures import MEASURES
    from interp.data.tasks import TASKS
    from interp.io import plugins
    from interp.io.rundir import RUN_KINDS
    from interp.model.positional import POSITIONAL_ENCODINGS
    from interp.viz.sections import SECTIONS

    expected = {
        "task": TASKS,
        "positional encoding": POSITIONAL_ENCODINGS,
        "run kind": RUN_KINDS,
        "plugin": plugins._LOADED,
        "measure": MEASURES,
        "model": models._REGISTRY,
        "section": SECTIONS,
        "experiment": experiments.EXPERIMENTS,
    }
    for kind, registry in expected.items():
        assert REGISTRIES[kind] is registry and isinstance(registry, Registry), kind
    import interp.viz.report  # noqa: F401  registers the report's sections

    experiments.load_catalogue()  # the checkout's own experiments (demo among them)

    for kind, field, known in [
        ("task", "TaskConfig.task", "standard"),
        ("measure", "measure", "ila1"),
        ("model", "model", "nested-logit"),
        ("section", "section", "transition"),
        ("experiment", "experiment", "demo"),
        ("positional encoding", "positional", "rope"),
    ]:
        with pytest.raises(ValueError) as err:
            REGISTRIES[kind].require("nope")
        line = str(err.value)
        assert "\n" not in line and line.startswith(f"{field}='nope' is invalid: registered")
        assert repr(known) in line  # the allowed names are listed


@pytest.fixture
def clean_registries():
    saved = {kind: (dict(r), dict(r._origins)) for kind, r in REGISTRIES.items()}
    yield
    for kind, (entries, origins) in saved.items():
        REGISTRIES[kind].clear()
        REGISTRIES[kind].update(entries)
        REGISTRIES[kind]._origins.clear()
        REGISTRIES[kind]._origins.update(origins)


def test_a_run_records_only_the_plugins_its_training_used(tmp_path, clean_registries):
    """Trained with a measure, a figure section and a dynamics model loaded, a run records only the
    measure's plugin (its column is in metrics.csv); a command opening the run then needs that
    one only. Cost: a 20-step tiny run, a few seconds."""
    from interp.analysis.measures import MEASURES
    from interp.cli import _check_recorded_plugins, main
    from interp.io import plugins

    plugins._LOADED.clear()  # what other tests loaded is not this run's
    measure, section, model = (
        str((FIXTURES / f).resolve())
        for f in ("extra_measure.py", "extra_section.py", "extra_model.py")
    )
    for name in ("query_resid_rms", "query_self_l2"):
        MEASURES.withdraw(name)  # so that the fixture declares them afresh
    run = tmp_path / "run"
    argv = ["train", "--preset", "tiny", "--set", "steps=20", "--set", "eval_every=10", "--quiet"]
    loads = ["--plugin", measure, "--plugin", section, "--plugin", model]
    assert main([*loads, *argv, "--out", str(run)]) == 0
    config = json.loads((run / "config.json").read_text())
    assert config["plugins"] == [measure]
    plugins._LOADED.pop(section)
    plugins._LOADED.pop(model)
    _check_recorded_plugins(str(run))  # the section and the model are not the run's
    plugins._LOADED.pop(measure)  # the measure's plugin is: asked for by name
    with pytest.raises(ValueError, match=f"field plugins: .*--plugin {measure}$"):
        _check_recorded_plugins(str(run))
