"""One NextOfferPolicy, and the controller's policy lookup has no fallbacks of its own."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import launcher
from launcher.controller.recovery import recovery_policy
from launcher.errors import UnknownNameError
from launcher.policies.recovery import DeadlineAwareRecoveryPolicy, NextOfferPolicy

PKG = Path(launcher.__file__).parent


def _classes_named(name: str) -> list[str]:
    hits = []
    for path in PKG.rglob("*.py"):
        tree = ast.parse(path.read_text())
        hits += [str(path.relative_to(PKG)) for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name]
    return hits


def test_exactly_one_next_offer_policy_class():
    assert _classes_named("NextOfferPolicy") == ["policies/recovery.py"]


def test_controller_recovery_has_no_import_error_fallback():
    tree = ast.parse((PKG / "controller" / "recovery.py").read_text())
    handlers = [h for h in ast.walk(tree) if isinstance(h, ast.ExceptHandler)]
    caught = [ast.unparse(h.type) for h in handlers if h.type is not None]
    assert "ImportError" not in " ".join(caught)


def test_controller_gets_the_registry_policies():
    assert isinstance(recovery_policy(None, has_deadline=False), NextOfferPolicy)
    assert isinstance(recovery_policy(None, has_deadline=True), DeadlineAwareRecoveryPolicy)
    assert isinstance(recovery_policy("next-offer"), NextOfferPolicy)
    with pytest.raises(UnknownNameError):
        recovery_policy("next_offer")
