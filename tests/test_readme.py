"""The README cannot drift from the tool: its command table names every option, and the tour's
metrics output is what the command prints today."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from judge_eval.cli import main

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _commands(group: click.Group, prefix: str = "judge-eval"):
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            if any(isinstance(p, click.Option) and p.name != "help" for p in cmd.params):
                yield f"{prefix} {name}", cmd  # a group that runs on its own (judge-eval audit --config)
            yield from _commands(cmd, f"{prefix} {name}")
        else:
            yield f"{prefix} {name}", cmd


def _synopsis(command: str) -> str:
    head = command.rsplit(" ", 1)[0] if command.startswith("judge-eval cache") else command
    rows = [line for line in README.splitlines() if line.startswith(f"| `{head} ")]
    assert rows, f"the README's command table has no row for {head}"
    return rows[0]


@pytest.mark.parametrize("command", [c for c, _ in _commands(main)])
def test_the_readme_command_table_names_every_option(command: str) -> None:
    cmd = dict(_commands(main))[command]
    row = _synopsis(command)
    for param in cmd.params:
        if not isinstance(param, click.Option) or param.name == "help":
            continue
        if param.name == "yes":  # the confirmation flag of `cache clear`
            continue
        names = [n for n in param.opts + param.secondary_opts]
        assert any(re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", row) for n in names), \
            f"{command}: {names} missing from the README's command table"


def test_the_tours_metrics_table_is_what_the_command_prints() -> None:
    block = README.split("$ judge-eval metrics", 1)[1].split("```", 1)[0]
    expected = block.split("-k 1,3,5,10\n", 1)[1]
    args = ["metrics", "--qrels", str(ROOT / "fixtures/clapnq/qrels.txt")]
    for name in ("bm25", "dense", "hybrid"):
        args += ["--run", f"{name}={ROOT / 'fixtures/clapnq/runs' / (name + '.trec')}"]
    result = CliRunner().invoke(main, [*args, "-k", "1,3,5,10"], catch_exceptions=False)
    assert result.exit_code == 0
    assert result.output == expected
