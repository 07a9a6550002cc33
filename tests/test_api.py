"""The package's top level: ``import interp`` stays light and re-exports the main user API."""

import subprocess
import sys
from pathlib import Path

import interp

ROOT = Path(__file__).resolve().parents[1]


def test_top_level_names_are_the_defining_modules_objects():
    from interp.analysis.measures import register_measure
    from interp.config.train_config import TrainConfig
    from interp.data.task import TaskConfig
    from interp.io.rundir import load_run
    from interp.model.network import InductionNet, ModelConfig
    from interp.model.positional import register_positional

    assert interp.TaskConfig is TaskConfig
    assert interp.ModelConfig is ModelConfig
    assert interp.InductionNet is InductionNet
    assert interp.TrainConfig is TrainConfig
    assert interp.load_run is load_run
    assert interp.register_measure is register_measure
    assert interp.register_positional is register_positional
    assert {"TaskConfig", "ModelConfig", "InductionNet", "TrainConfig", "load_run"} <= set(
        interp.__all__
    )


def test_import_interp_imports_neither_torch_nor_a_stage():
    code = (
        "import sys, interp; "
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('interp.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_every_stage_is_a_documented_package():
    stages = sorted(p.parent.name for p in (ROOT / "interp").glob("*/__init__.py"))
    assert stages == [
        "analysis",
        "cli",
        "config",
        "data",
        "experiments",
        "io",
        "model",
        "registry",
        "train",
        "viz",
    ]
    for stage in stages:
        module = __import__(f"interp.{stage}", fromlist=["_"])
        assert module.__doc__ and len(module.__doc__.split()) > 20, stage
    flat = sorted(p.name for p in (ROOT / "interp").glob("*.py"))
    assert flat == ["__init__.py"]
