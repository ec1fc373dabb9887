"""Packing is one feature package: its pure core (every module of ``vq.packing`` but
``vq.packing.cases``) is named in the pure-layers contract of pyproject.toml module by
module, so a new pure module cannot slip past it; its use cases live in
``vq.packing.cases`` (the services' layer), none in ``vq.services``."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).parent.parent.parent
PACKING = ROOT / "src" / "vq" / "packing"


def _contracts() -> list[dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts: list[dict[str, object]] = config["tool"]["importlinter"]["contracts"]
    return contracts


def test_every_pure_packing_module_is_in_the_pure_layers_contract() -> None:
    (pure,) = [c for c in _contracts() if str(c["name"]).startswith("Pure layers")]
    named = set(pure["source_modules"])  # type: ignore[call-overload]
    core = {f"vq.packing.{path.stem}" for path in PACKING.glob("*.py") if path.stem != "__init__"}
    assert core and core <= named
    assert "vq.packing.cases" in pure["forbidden_modules"]  # type: ignore[operator]


def test_the_use_cases_sit_in_the_layer_of_the_services() -> None:
    (layers,) = [c for c in _contracts() if c["type"] == "layers"]
    (services_layer,) = [
        layer
        for layer in layers["layers"]  # type: ignore[attr-defined]
        if "vq.services" in layer.replace(":", " ").split()
    ]
    assert "vq.packing.cases" in services_layer.replace(":", " ").split()
    services = ROOT / "src" / "vq" / "services"
    assert not sorted(services.glob("pack_*.py")) and not (services / "submit_pack.py").exists()
