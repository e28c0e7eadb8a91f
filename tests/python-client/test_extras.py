"""The framework adapters are optional extras: this venv has neither framework, and the package with its
`approval_resume.adapters` still imports; an adapter's module says which extra to install, from the repository (no
package named approval-resume is published: a hint naming one would fail, or install someone else's)."""

import importlib
import sys

import pytest


def test_the_package_and_its_adapters_import_without_any_framework() -> None:
    adapters = importlib.import_module("approval_resume.adapters")
    assert {"WorkerStep", "idempotency_key", "wait_until_decided"} <= set(adapters.__all__)
    assert adapters.idempotency_key("run-1", "call_1") == "run-1:call_1"
    assert "agents" not in sys.modules and "pydantic_ai" not in sys.modules and "langgraph" not in sys.modules


@pytest.mark.parametrize(
    ("module", "extra"),
    [
        ("approval_resume.adapters.openai_agents", "openai-agents"),
        ("approval_resume.adapters.pydantic_ai", "pydantic-ai"),
        ("approval_resume.adapters.langgraph", "langgraph"),
    ],
)
def test_an_adapter_without_its_framework_names_its_extra_from_the_repository(module: str, extra: str) -> None:
    with pytest.raises(ImportError) as missing:
        importlib.import_module(module)
    assert f'pip install "<checkout>/clients/python[{extra}]"' in str(missing.value)
    assert 'pip install "approval-resume' not in str(missing.value)
