"""Prompts as versioned objects: a template file, the answer model it asks for, and its checks.

The templates live in the top-level ``prompts/`` folder of the repository, shipped as the package
``judge_eval.prompts`` (``package-dir`` mapping in ``pyproject.toml``), one file per version:
``<name>.v<version>.md``. A file has a front matter (``name``, ``version``) and two sections,
``[system]`` and ``[user]``. Placeholders are ``$name`` (:class:`string.Template`), so JSON braces
in the instructions need no escaping.

A :class:`Prompt` is one version of one *task*. The task (``decompose`` or ``judge_chunk``, see
:data:`TASKS`) says what the prompt takes (``reference``; or ``question``, ``statements``,
``chunk``), how those inputs become template values (data is fenced with :func:`quote_data`,
statements are numbered ``[1] ...``) and back again (:meth:`Prompt.parse`, so a test server
recognises a prompt through the same object that rendered it), which pydantic model the answer
must validate against, and which checks a valid answer must also pass (``judge_chunk``: every
statement number is in ``1..len(statements)``). A check raises
:class:`~judge_eval.judge.parsing.InvalidOutput`; the judge core then sends its one repair.

The id ``name@version`` is part of every cache key: edit a template, add a version, and old
answers are no longer reused for it. Several versions live side by side; :func:`select_prompts`
picks one per task (:data:`DEFAULT_VERSIONS` unless told otherwise).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from string import Template
from typing import Any

from pydantic import BaseModel

from judge_eval.errors import ConfigError
from judge_eval.judge.parsing import InvalidOutput, parse_answer, strict_json_schema
from judge_eval.judge.protocol import ChunkVerdict, ChunkVerdicts, Statements

__all__ = [
    "DEFAULT_VERSIONS",
    "TASKS",
    "Check",
    "Prompt",
    "PromptSelection",
    "Task",
    "all_prompts",
    "available_prompts",
    "format_chunks",
    "format_statements",
    "load_prompt",
    "quote_data",
    "recognise",
    "render_decompose",
    "render_judge_chunk",
    "select_prompts",
    "statement_numbers_in_range",
    "unquote_data",
]

#: The package that holds the template files (the top-level ``prompts/`` folder).
PROMPTS_PACKAGE = "judge_eval.prompts"

#: The version of each task used unless another is selected. Changing one changes every cache
#: key and every number of a default run: do it on purpose, in a release note.
DEFAULT_VERSIONS: dict[str, str] = {"decompose": "1", "judge_chunk": "1", "judge_chunks": "1"}

#: The tasks every judge uses; the others (``judge_chunks``: listwise judging, only with
#: ``--listwise B``) are in :func:`select_prompts` only when selected.
CORE_TASKS: tuple[str, ...] = ("decompose", "judge_chunk")

_FRONT = re.compile(r"\A---\n(?P<head>.*?)\n---\n(?P<body>.*)\Z", re.S)
_SECTION = re.compile(r"^\[(system|user)\]\n", re.M)
_FILE = re.compile(r"\A(?P<name>[a-z][a-z0-9_]*)\.v(?P<version>[0-9A-Za-z][0-9A-Za-z_.-]*)\.md\Z")
_NUMBERED = re.compile(r"\[(?P<n>\d+)\] ?(?P<text>.*)\Z", re.S)

#: A check on a parsed answer, given the task's inputs: raises InvalidOutput when it fails.
Check = Callable[[Any, Mapping[str, Any]], None]


# ----------------------------------------------------------------------------- data in prompts


def quote_data(text: str, tag: str) -> str:
    """Make ``text`` safe to place between ``<tag>`` delimiters: an occurrence of the closing
    (or opening) tag inside the data would end the data block early, so it is defused by
    inserting a space (``</tag>`` -> ``</ tag>``)."""
    return text.replace(f"</{tag}>", f"</ {tag}>").replace(f"<{tag}>", f"< {tag}>")


def unquote_data(text: str, tag: str) -> str:
    """Inverse of :func:`quote_data`, up to data that already contained ``</ tag>`` (which comes
    back as ``</tag>``; quoting it again gives the same prompt text)."""
    return text.replace(f"</ {tag}>", f"</{tag}>").replace(f"< {tag}>", f"<{tag}>")


def format_statements(statements: list[str]) -> str:
    """Statements numbered from 1, one per line: ``[1] text``."""
    return "\n".join(f"[{i}] {s}" for i, s in enumerate(statements, start=1))


def _parse_statements(block: str) -> list[str] | None:
    """Inverse of the ``statements`` value: ``(none)`` or ``[n] text`` lines numbered from 1
    (a line that does not start the next number continues the statement before it)."""
    if block.strip() == "(none)":
        return []
    statements: list[str] = []
    for line in block.split("\n"):
        m = _NUMBERED.match(line)
        if m and int(m.group("n")) == len(statements) + 1:
            statements.append(m.group("text"))
        elif statements:  # a statement with a line break in it
            statements[-1] += "\n" + line
        else:
            return None
    return statements


# ----------------------------------------------------------------------------- tasks


def statement_numbers_in_range(value: ChunkVerdict, inputs: Mapping[str, Any]) -> None:
    """A judge_chunk check: every support claim names a statement of the prompt (1..m)."""
    m = len(inputs["statements"])
    wrong = sorted({s.statement for s in value.supports if not 1 <= s.statement <= m})
    if wrong:
        allowed = f"1..{m}" if m else "none (there are no statements)"
        raise InvalidOutput(f"supports names statement(s) {wrong}; valid numbers are {allowed}")


def _encode_decompose(reference: str) -> dict[str, str]:
    return {"reference": quote_data(reference, "reference")}


def _decode_decompose(values: Mapping[str, str]) -> dict[str, Any] | None:
    return {"reference": unquote_data(values["reference"], "reference")}


def _encode_judge_chunk(question: str, statements: list[str], chunk: str) -> dict[str, str]:
    return {
        "question": question,
        "statements": format_statements(statements) if statements else "(none)",
        "chunk": quote_data(chunk, "chunk"),
    }


_LISTED_CHUNK = re.compile(r'<chunk id="(?P<n>\d+)">\n(?P<text>.*?)\n</chunk>', re.S)


def format_chunks(chunks: list[str]) -> str:
    """Chunks numbered from 1, each between ``<chunk id="n">`` and ``</chunk>`` (data quoted, so a
    ``</chunk>`` inside a chunk cannot end it), separated by blank lines."""
    return "\n\n".join(f'<chunk id="{i}">\n{quote_data(c, "chunk")}\n</chunk>' for i, c in enumerate(chunks, start=1))


def _parse_chunks(block: str) -> list[str] | None:
    """Inverse of :func:`format_chunks`; None unless the block is exactly such chunks."""
    chunks: list[str] = []
    pos = 0
    for m in _LISTED_CHUNK.finditer(block):
        gap = block[pos : m.start()]
        if gap != ("\n\n" if chunks else "") or int(m.group("n")) != len(chunks) + 1:
            return None
        chunks.append(unquote_data(m.group("text"), "chunk"))
        pos = m.end()
    return chunks if chunks and pos == len(block) else None


def _encode_judge_chunks(question: str, statements: list[str], chunks: list[str]) -> dict[str, str]:
    return {
        "question": question,
        "statements": format_statements(statements) if statements else "(none)",
        "chunks": format_chunks(list(chunks)),
    }


def _decode_judge_chunks(values: Mapping[str, str]) -> dict[str, Any] | None:
    statements = _parse_statements(values["statements"])
    chunks = _parse_chunks(values["chunks"])
    if statements is None or chunks is None:
        return None
    return {"question": values["question"], "statements": statements, "chunks": chunks}


def _decode_judge_chunk(values: Mapping[str, str]) -> dict[str, Any] | None:
    statements = _parse_statements(values["statements"])
    if statements is None:
        return None
    return {"question": values["question"], "statements": statements, "chunk": unquote_data(values["chunk"], "chunk")}


@dataclass(frozen=True)
class Task:
    """What every version of a prompt name asks for: ``inputs`` (the keyword arguments of
    :meth:`Prompt.render`), how they become template ``placeholders`` (``encode``) and back
    (``decode``), the answer ``output`` model (``schema_name`` names its JSON schema) and the
    ``checks`` a parsed answer must pass."""

    name: str
    inputs: tuple[str, ...]
    placeholders: frozenset[str]
    output: type[BaseModel]
    schema_name: str
    encode: Callable[..., dict[str, str]]
    decode: Callable[[Mapping[str, str]], dict[str, Any] | None]
    checks: tuple[Check, ...] = ()


TASKS: dict[str, Task] = {
    "decompose": Task(
        "decompose", ("reference",), frozenset({"reference"}), Statements, "statements",
        _encode_decompose, _decode_decompose,
    ),
    "judge_chunk": Task(
        "judge_chunk", ("question", "statements", "chunk"), frozenset({"question", "statements", "chunk"}),
        ChunkVerdict, "chunk_verdict", _encode_judge_chunk, _decode_judge_chunk, (statement_numbers_in_range,),
    ),
    # listwise: several chunks of one question in one call; each listed verdict is checked on its
    # own by the judge core (a verdict that fails falls back to judging its chunk alone)
    "judge_chunks": Task(
        "judge_chunks", ("question", "statements", "chunks"), frozenset({"question", "statements", "chunks"}),
        ChunkVerdicts, "chunk_verdicts", _encode_judge_chunks, _decode_judge_chunks,
    ),
}


# ----------------------------------------------------------------------------- templates


@cache
def _schema_of(output: type[BaseModel]) -> dict[str, Any]:
    return strict_json_schema(output)


@cache
def _template_regex(template: str) -> re.Pattern[str]:
    """A regex that matches exactly the texts ``Template(template)`` renders, one group per
    placeholder (non-greedy; a repeated placeholder must repeat its first value)."""
    parts: list[str] = []
    seen: set[str] = set()
    pos = 0
    for m in Template.pattern.finditer(template):
        parts.append(re.escape(template[pos : m.start()]))
        pos = m.end()
        if m.group("escaped") is not None:
            parts.append(re.escape("$"))
            continue
        name = m.group("named") or m.group("braced")
        if name is None:
            raise ValueError(f"invalid placeholder at {m.start()} in template: {template[m.start():m.start() + 20]!r}")
        parts.append(f"(?P={name})" if name in seen else f"(?P<{name}>.*?)")
        seen.add(name)
    parts.append(re.escape(template[pos:]))
    return re.compile("".join(parts), re.S)


def _placeholders(template: Template) -> set[str]:
    return {m.group("named") or m.group("braced") for m in Template.pattern.finditer(template.template)} - {None}


def _text(content: Any) -> str | None:
    """A message's content as text (a string, or the text parts of a content list)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return None


@dataclass(frozen=True)
class Prompt:
    """One version of one task's prompt (see the module docstring).

    ``system`` and ``user`` are the two templates; ``output`` the pydantic model the answer must
    validate against, ``checks`` what a valid answer must also pass. :meth:`render` makes the chat
    messages from the task's inputs, :meth:`parse` gives the inputs back from such messages,
    :meth:`parse_answer` and :meth:`validate` turn a reply (or a stored answer) into a checked
    ``output``."""

    name: str
    version: str
    system: Template
    user: Template
    task: Task = field(repr=False, compare=False)

    @property
    def id(self) -> str:
        """``name@version``, as recorded in caches and summaries."""
        return f"{self.name}@{self.version}"

    @property
    def output(self) -> type[BaseModel]:
        return self.task.output

    @property
    def checks(self) -> tuple[Check, ...]:
        return self.task.checks

    @property
    def schema_name(self) -> str:
        return self.task.schema_name

    @property
    def schema(self) -> dict[str, Any]:
        """The strict JSON schema of :attr:`output` (:func:`~judge_eval.judge.parsing.strict_json_schema`),
        computed once per answer model: the same object every time, so do not modify it."""
        return _schema_of(self.output)

    @property
    def template(self) -> str:
        """Both sections as they appear in the template file."""
        return f"[system]\n{self.system.template}\n[user]\n{self.user.template}"

    def values(self, **inputs: Any) -> dict[str, str]:
        """The template values for the task's inputs (data quoted, statements numbered)."""
        missing = [n for n in self.task.inputs if n not in inputs]
        extra = [n for n in inputs if n not in self.task.inputs]
        if missing or extra:
            raise TypeError(f"{self.id} takes {', '.join(self.task.inputs)}; missing {missing}, unexpected {extra}")
        return self.task.encode(**inputs)

    def render(self, **inputs: Any) -> list[dict[str, str]]:
        """The chat messages (system, user) for the task's inputs."""
        values = self.values(**inputs)
        return [
            {"role": "system", "content": self.system.substitute(values)},
            {"role": "user", "content": self.user.substitute(values)},
        ]

    def parse(self, messages: Any) -> dict[str, Any] | None:
        """The task's inputs if ``messages`` start with this prompt as :meth:`render` makes it
        (a system and a user message; later turns, such as a repair, are ignored); else None."""
        if not isinstance(messages, list) or len(messages) < 2:
            return None
        first, second = messages[0], messages[1]
        if not (isinstance(first, dict) and isinstance(second, dict)):
            return None
        if first.get("role") != "system" or second.get("role") != "user":
            return None
        values: dict[str, str] = {}
        for template, message in ((self.system, first), (self.user, second)):
            text = _text(message.get("content"))
            m = _template_regex(template.template).fullmatch(text) if text is not None else None
            if m is None:
                return None
            for k, v in m.groupdict().items():
                if values.setdefault(k, v) != v:
                    return None
        return self.task.decode(values)

    def check(self, value: Any, inputs: Mapping[str, Any]) -> None:
        """Run every check on a parsed answer (raises InvalidOutput)."""
        for check in self.checks:
            check(value, inputs)

    def parse_answer(self, text: str | None, inputs: Mapping[str, Any], *, truncated: bool = False) -> Any:
        """A model's reply as a checked :attr:`output` (raises InvalidOutput)."""
        value = parse_answer(text, self.output, truncated=truncated)
        self.check(value, inputs)
        return value

    def validate(self, data: Any, inputs: Mapping[str, Any]) -> Any:
        """A JSON answer (a stored row, a transport's structured reply) as a checked
        :attr:`output`; raises InvalidOutput when it does not validate or fails a check."""
        try:
            value = self.output.model_validate(data)
        except ValueError as exc:
            raise InvalidOutput(f"the answer does not match the schema: {exc}") from None
        self.check(value, inputs)
        return value


# ----------------------------------------------------------------------------- loading


def _read(filename: str) -> str:
    return resources.files(PROMPTS_PACKAGE).joinpath(filename).read_text("utf-8")


@cache
def available_prompts() -> dict[str, tuple[str, ...]]:
    """Every task's shipped versions: ``{"decompose": ("1",), "judge_chunk": ("1", "2")}``."""
    found: dict[str, list[str]] = {name: [] for name in TASKS}
    for entry in resources.files(PROMPTS_PACKAGE).iterdir():
        m = _FILE.match(entry.name)
        if m and m.group("name") in found:
            found[m.group("name")].append(m.group("version"))
    return {name: tuple(sorted(v, key=lambda s: (len(s), s))) for name, v in found.items()}


def _known() -> str:
    return ", ".join(f"{n}@{v}" for n, versions in available_prompts().items() for v in versions)


@cache
def _load(name: str, version: str) -> Prompt:
    task = TASKS.get(name)
    if task is None or version not in available_prompts().get(name, ()):
        raise ConfigError(f"no prompt {name}@{version}; shipped prompts: {_known()}", option="--prompt")
    filename = f"{name}.v{version}.md"
    text = _read(filename)
    m = _FRONT.match(text)
    if m is None:
        raise ValueError(f"prompt file {filename}: missing front matter")
    head = dict(line.split(":", 1) for line in m.group("head").splitlines() if ":" in line)
    head = {k.strip(): v.strip() for k, v in head.items()}
    if (head.get("name"), head.get("version")) != (name, version):
        raise ValueError(f"prompt file {filename}: front matter says {head.get('name')}@{head.get('version')}")
    parts = _SECTION.split(m.group("body"))
    sections = {parts[i]: parts[i + 1].rstrip("\n") for i in range(1, len(parts) - 1, 2)}
    prompt = Prompt(name=name, version=version, system=Template(sections["system"]), user=Template(sections["user"]),
                    task=task)
    used = _placeholders(prompt.system) | _placeholders(prompt.user)
    if used != task.placeholders:
        raise ValueError(
            f"prompt file {filename}: placeholders {sorted(used)}, the task has {sorted(task.placeholders)}"
        )
    return prompt


def load_prompt(name: str, version: str | None = None) -> Prompt:
    """The prompt ``name`` (``"judge_chunk"``, or ``"judge_chunk@2"``) at ``version`` (default:
    :data:`DEFAULT_VERSIONS`). An unknown name or version is a ConfigError listing what ships."""
    if "@" in name:
        name, _, at = name.partition("@")
        if version is not None and version != at:
            raise ConfigError(f"{name}@{at} asked for at version {version}", option="--prompt")
        version = at
    if name not in TASKS:
        raise ConfigError(f"no prompt named {name!r}; shipped prompts: {_known()}", option="--prompt")
    return _load(name, version if version is not None else DEFAULT_VERSIONS[name])


#: What :func:`select_prompts` accepts: ``{"judge_chunk": "2"}`` (or ``"judge_chunk@2"``, or a
#: Prompt, as the value), or ids ``["judge_chunk@2"]``; None for the defaults.
PromptSelection = Mapping[str, str | Prompt] | Iterable[str | Prompt] | None


def select_prompts(selection: PromptSelection = None) -> dict[str, Prompt]:
    """One prompt per task of :data:`CORE_TASKS` (in that order), plus any other task selected:
    the selected version, else the default.

    Raises ConfigError (``--prompt``) for an unknown task or version, a malformed id, or two
    different versions of one task."""
    chosen: dict[str, Prompt] = {}

    def take(prompt: Prompt) -> None:
        if chosen.setdefault(prompt.name, prompt) is not prompt and chosen[prompt.name].id != prompt.id:
            raise ConfigError(f"two versions of {prompt.name} selected: {chosen[prompt.name].id} and {prompt.id}",
                              option="--prompt")

    if isinstance(selection, Mapping):
        for name, value in selection.items():
            if isinstance(value, Prompt):
                prompt = value
            else:
                value = str(value)
                prompt = load_prompt(value) if "@" in value else load_prompt(str(name), value)
            if prompt.name != name:
                raise ConfigError(f"{name}: {prompt.id} is a prompt of another task", option="--prompt")
            take(prompt)
    elif selection is not None:
        if isinstance(selection, (str, Prompt)):
            selection = [selection]
        for item in selection:
            if isinstance(item, Prompt):
                take(item)
            elif "@" not in str(item):
                raise ConfigError(f"{item!r}: give NAME@VERSION, e.g. judge_chunk@2; shipped prompts: {_known()}",
                                  option="--prompt")
            else:
                take(load_prompt(str(item)))
    names = [*CORE_TASKS, *(n for n in TASKS if n in chosen and n not in CORE_TASKS)]
    return {name: chosen.get(name) or load_prompt(name) for name in names}


def all_prompts() -> list[Prompt]:
    """Every shipped version of every task."""
    return [load_prompt(name, v) for name, versions in available_prompts().items() for v in versions]


def recognise(messages: Any) -> tuple[Prompt, dict[str, Any]] | None:
    """Which shipped prompt rendered ``messages``, and its inputs (see :meth:`Prompt.parse`)."""
    for prompt in all_prompts():
        inputs = prompt.parse(messages)
        if inputs is not None:
            return prompt, inputs
    return None


def render_decompose(reference: str) -> list[dict[str, str]]:
    """The default decompose prompt's messages."""
    return load_prompt("decompose").render(reference=reference)


def render_judge_chunk(question: str, statements: list[str], chunk: str) -> list[dict[str, str]]:
    """The default judge_chunk prompt's messages."""
    return load_prompt("judge_chunk").render(question=question, statements=statements, chunk=chunk)
