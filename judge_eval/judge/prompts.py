"""Prompt templates: versioned files in ``judge_eval/prompts/``, rendered into chat messages.

A template file has a front matter (``name``, ``version``) and two sections, ``[system]`` and
``[user]``. Placeholders are ``$name`` (:class:`string.Template`), so JSON braces in the
instructions need no escaping. The version is part of every cache key: edit a prompt, bump its
version, and old answers are no longer reused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from string import Template

_FRONT = re.compile(r"\A---\n(?P<head>.*?)\n---\n(?P<body>.*)\Z", re.S)
_SECTION = re.compile(r"^\[(system|user)\]\n", re.M)


@dataclass(frozen=True)
class Prompt:
    name: str
    version: str
    system: Template
    user: Template

    @property
    def id(self) -> str:
        """``name@version``, as recorded in caches and summaries."""
        return f"{self.name}@{self.version}"

    def render(self, **values: str) -> list[dict[str, str]]:
        """The chat messages for these values (every placeholder must be given)."""
        return [
            {"role": "system", "content": self.system.substitute(values)},
            {"role": "user", "content": self.user.substitute(values)},
        ]


@lru_cache(maxsize=None)
def load_prompt(name: str) -> Prompt:
    """Load ``prompts/<name>.md`` shipped inside the package."""
    text = resources.files("judge_eval").joinpath("prompts").joinpath(f"{name}.md").read_text("utf-8")
    m = _FRONT.match(text)
    if m is None:
        raise ValueError(f"prompt {name}: missing front matter")
    head = dict(
        line.split(":", 1) for line in m.group("head").splitlines() if ":" in line
    )
    head = {k.strip(): v.strip() for k, v in head.items()}
    parts = _SECTION.split(m.group("body"))
    sections = {parts[i]: parts[i + 1].rstrip("\n") for i in range(1, len(parts) - 1, 2)}
    return Prompt(
        name=head["name"],
        version=head["version"],
        system=Template(sections["system"]),
        user=Template(sections["user"]),
    )


def quote_data(text: str, tag: str) -> str:
    """Make ``text`` safe to place between ``<tag>`` delimiters: an occurrence of the closing
    (or opening) tag inside the data would end the data block early, so it is defused by
    inserting a space (``</tag>`` -> ``</ tag>``)."""
    return text.replace(f"</{tag}>", f"</ {tag}>").replace(f"<{tag}>", f"< {tag}>")


def render_decompose(reference: str) -> list[dict[str, str]]:
    return load_prompt("decompose").render(reference=quote_data(reference, "reference"))


def format_statements(statements: list[str]) -> str:
    """Statements numbered from 1, one per line: ``[1] text``."""
    return "\n".join(f"[{i}] {s}" for i, s in enumerate(statements, start=1))


def render_judge_chunk(question: str, statements: list[str], chunk: str) -> list[dict[str, str]]:
    return load_prompt("judge_chunk").render(
        question=question,
        statements=format_statements(statements) if statements else "(none)",
        chunk=quote_data(chunk, "chunk"),
    )
