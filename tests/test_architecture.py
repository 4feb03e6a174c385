"""The stages of docs/design.md, enforced: no module imports from a higher stage, and the import
graph has no cycle. Every import counts, also one inside a function or under TYPE_CHECKING."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import judge_eval

ROOT = Path(judge_eval.__file__).resolve().parent

#: module (or package prefix) -> stage; a module may import only from its own stage or lower.
#: Longest prefix wins. Keep in step with the table in docs/design.md.
STAGES: dict[str, int] = {
    "judge_eval.errors": 0,
    "judge_eval.usage": 0,
    "judge_eval._jsonpath": 0,
    "judge_eval.atomic": 0,
    "judge_eval.sqlite_tx": 0,
    "judge_eval.version": 0,
    "judge_eval.data": 1,
    "judge_eval.prompts": 2,
    "judge_eval.judge.protocol": 2,
    "judge_eval.judge.parsing": 2,
    "judge_eval.judge.prompts": 2,
    "judge_eval.cache": 1,  # only stage 0 (errors, usage, atomic): the cache knows no judge module
    "judge_eval.judge.core": 4,  # the one judge path: cache, prompts, transport, repair
    "judge_eval.judge.registry": 4,  # judge names -> factories (built-ins, plugins)
    "judge_eval.judge": 4,
    "judge_eval.plan": 5,
    "judge_eval.run": 6,
    "judge_eval.grid": 7,
    "judge_eval.metrics": 8,
    "judge_eval.results": 9,
    "judge_eval.report": 10,
    "judge_eval.evaluation": 11,
    "judge_eval.labelled": 11,
    "judge_eval.compare": 11,
    "judge_eval.audit": 11,  # nightly audits: may import everything below (evaluation, compare, report)
    "judge_eval.agree": 11,
    "judge_eval.labels": 11,
    "judge_eval.cli": 12,
    "judge_eval.testing": 12,
    "judge_eval": 12,  # the package's __init__: the public API re-exports everything
}


def stage(module: str) -> int:
    best = max((p for p in STAGES if module == p or module.startswith(p + ".")), key=len)
    return STAGES[best]


def modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def imports_of(name: str, path: Path) -> set[str]:
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("judge_eval")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            if target.startswith("judge_eval"):
                found.add(target)
                # `from judge_eval.x import y` where y is a submodule
                for a in node.names:
                    if f"{target}.{a.name}" in modules():
                        found.add(f"{target}.{a.name}")
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    lazy = {}
    src = (ROOT / "__init__.py").read_text(encoding="utf-8")
    if "_LAZY" in src:  # the public API's lazy re-exports are imports of the package too
        lazy = {v for v in judge_eval._LAZY.values()}  # type: ignore[attr-defined]
    g = {name: {m for m in imports_of(name, path) if m in mods and m != name} for name, path in mods.items()}
    g["judge_eval"] |= set(lazy)
    return g


def test_every_module_imports() -> None:
    for info in pkgutil.walk_packages(judge_eval.__path__, "judge_eval."):
        importlib.import_module(info.name)


def upward(g: dict[str, set[str]]) -> list[str]:
    return [f"{m} (stage {stage(m)}) imports {d} (stage {stage(d)})"
            for m, deps in g.items() for d in sorted(deps) if stage(d) > stage(m)]


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    state: dict[str, int] = {}
    found: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in sorted(g.get(node, ())):
            if dep.startswith(node + ".") or node == "judge_eval":
                continue  # a package importing its own submodules is not a cycle
            if state.get(dep) == 1:
                found.append(path[path.index(dep):] + [dep])
            elif dep not in state:
                visit(dep, [*path, dep])
        state[node] = 2

    for node in sorted(g):
        if node not in state:
            visit(node, [node])
    return found


def test_no_module_imports_from_a_higher_stage() -> None:
    assert upward(graph()) == []


def test_the_import_graph_has_no_cycle() -> None:
    assert cycles(graph()) == []


def test_the_checks_catch_what_they_should() -> None:
    g = graph()
    # imports inside functions and under TYPE_CHECKING are seen
    assert "judge_eval.grid" in g["judge_eval.metrics.judged"]
    assert "judge_eval.results" in g["judge_eval.report.folder"]
    # a made-up upward import and a made-up cycle are reported
    assert upward({"judge_eval.cache": {"judge_eval.judge.openai_judge"}})
    assert cycles({"judge_eval.a": {"judge_eval.b"}, "judge_eval.b": {"judge_eval.a"}}) == [
        ["judge_eval.a", "judge_eval.b", "judge_eval.a"]]
