from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture(autouse=True)
def _no_ambient_judge_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Tests never see the developer's endpoint, key or cache."""
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "JUDGE_EVAL_MODEL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("JUDGE_EVAL_CACHE", str(tmp_path / "default-cache.sqlite"))
