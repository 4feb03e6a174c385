"""Judge backends by name: what ``--judge NAME`` and ``evaluate(judge="NAME")`` can reach.

Two sources, first match wins:

1. names registered in this process with :func:`register_judge` -- the built-ins ``openai`` and
   ``offline`` are registered this way, when this module is imported;
2. the entry-point group ``judge_eval.judges`` (:data:`ENTRY_POINT_GROUP`) of installed
   distributions: ``[project.entry-points."judge_eval.judges"] mine = "my_pkg:factory"``, loaded
   on first use (a name taken by 1. is ignored).

A factory takes the :class:`JudgeSettings` of the run and returns either a
:class:`~judge_eval.judge.core.Transport` -- then the judge core wraps it with the run's cache,
prompts, decoding parameters and ``--judge-id`` (:func:`create_judge`), so the plugin gets
caching, parsing, the repair and the checks for free -- or a complete
:class:`~judge_eval.judge.protocol.Judge`, used as it is. See ``docs/plugins.md``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from judge_eval.cache import CacheMode, ResponseCache
from judge_eval.errors import ConfigError
from judge_eval.judge.core import Decoding, JudgeCore, Transport
from judge_eval.judge.prompts import Prompt, select_prompts
from judge_eval.judge.protocol import Judge

__all__ = [
    "ENTRY_POINT_GROUP",
    "JudgeFactory",
    "JudgeSettings",
    "create_judge",
    "judge_factory",
    "judge_names",
    "register_judge",
    "unregister_judge",
]

#: the entry-point group plugins register their factories in
ENTRY_POINT_GROUP = "judge_eval.judges"


@dataclass
class JudgeSettings:
    """What a run asks of its judge; a factory takes what applies to it.

    ``model``, ``base_url``: the backend's model and endpoint (None: the backend's default or
    environment). ``temperature``, ``seed``: decoding (:meth:`decoding`). ``timeout``: seconds
    per request; ``concurrency``: requests in flight. ``judge_id``: ``--judge-id``
    (:meth:`namespace`). ``prompts``: the selected prompt of each task. ``cache``,
    ``cache_mode``: the response cache (:meth:`open_cache`; a path or a :class:`ResponseCache`).
    ``reasoning_effort``: for reasoning models (``--reasoning-effort``). ``api_version``: Azure's
    ``api-version`` (``--api-version``: the openai judge then uses Azure's deployment URLs).
    """

    model: str | None = None
    base_url: str | None = None
    temperature: float = 0.0
    seed: int | None = 0
    timeout: float = 60.0
    concurrency: int = 32
    judge_id: str | None = None
    prompts: Mapping[str, Prompt] = field(default_factory=select_prompts)
    cache: str | os.PathLike[str] | ResponseCache | Any | None = None
    cache_mode: CacheMode = "use"
    reasoning_effort: str | None = None
    api_version: str | None = None
    _opened: Any = field(default=None, init=False, repr=False)

    def open_cache(self) -> ResponseCache | None:
        """The response cache, opened and checked on the first call (so a judge that uses no
        cache never creates the file); None with ``cache_mode="off"`` or no cache."""
        if self.cache_mode == "off" or self.cache is None:
            return None
        if self._opened is None:
            cache = self.cache
            opened = cache if not isinstance(cache, (str, os.PathLike)) else ResponseCache(
                Path(cache), mode=self.cache_mode
            )
            check = getattr(opened, "check", None)
            if check is not None:
                check()
            self._opened = opened
        return self._opened

    def namespace(self) -> str | None:
        """``judge_id`` stripped; ConfigError (``--judge-id``) when it is blank."""
        if self.judge_id is not None and not self.judge_id.strip():
            raise ConfigError("the judge identity must not be empty", option="--judge-id")
        return self.judge_id.strip() if self.judge_id else None

    def decoding(self) -> Decoding:
        return Decoding(temperature=self.temperature, seed=self.seed)


#: A factory: the run's settings -> a Transport (wrapped in the judge core) or a complete Judge.
JudgeFactory = Callable[[JudgeSettings], Transport | Judge]

_lock = threading.Lock()
_registered: dict[str, JudgeFactory] = {}


def register_judge(name: str, factory: JudgeFactory, *, replace: bool = False) -> None:
    """Make ``factory`` the judge ``name`` (``--judge NAME``, ``evaluate(judge=NAME)``).

    A name already registered raises ValueError unless ``replace=True``. Entry points of the same
    name are shadowed."""
    if not isinstance(name, str) or not name.strip() or name != name.strip():
        raise ValueError(f"a judge name must be a non-empty string without surrounding space, got {name!r}")
    if not callable(factory):
        raise TypeError(f"the factory of judge {name!r} is not callable: {factory!r}")
    with _lock:
        if name in _registered and not replace:
            raise ValueError(f"a judge named {name!r} is already registered (pass replace=True to replace it)")
        _registered[name] = factory


def unregister_judge(name: str) -> None:
    """Forget a judge registered with :func:`register_judge` (a no-op for unknown names)."""
    with _lock:
        _registered.pop(name, None)


def _entry_points() -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def judge_names() -> list[str]:
    """Every judge name that can be used, sorted: registered ones and installed plugins."""
    with _lock:
        names = set(_registered)
    return sorted(names | set(_entry_points()))


def judge_factory(name: str) -> JudgeFactory:
    """The factory of judge ``name``; ConfigError (``--judge``) naming the known judges when
    there is none, or when a plugin's entry point cannot be loaded."""
    with _lock:
        factory = _registered.get(name)
    if factory is not None:
        return factory
    ep = _entry_points().get(name)
    if ep is None:
        raise ConfigError(f"unknown judge {name!r}; known judges: {', '.join(judge_names())}", option="--judge")
    try:
        loaded = ep.load()
    except Exception as exc:  # a broken plugin is a setup problem of the user's, not our bug
        raise ConfigError(f"the judge plugin {name!r} ({ep.value}) cannot be loaded: {type(exc).__name__}: {exc}",
                          option="--judge") from None
    if not callable(loaded):
        raise ConfigError(f"the judge plugin {name!r} ({ep.value}) is not a factory (not callable)", option="--judge")
    return loaded


def create_judge(name: str, settings: JudgeSettings | None = None) -> Judge:
    """The judge ``name`` for ``settings``: the factory's Judge, or its Transport wrapped in the
    judge core (with the settings' cache, prompts, decoding and namespace)."""
    settings = settings if settings is not None else JudgeSettings()
    made = judge_factory(name)(settings)
    if callable(getattr(made, "decompose", None)) and callable(getattr(made, "judge_chunk", None)):
        return made  # type: ignore[return-value]
    if not (isinstance(getattr(made, "identity", None), str) and callable(getattr(made, "complete", None))):
        raise TypeError(f"the factory of judge {name!r} returned {made!r}: neither a Judge (decompose, judge_chunk) "
                        "nor a Transport (identity, complete)")
    return JudgeCore(
        made,  # type: ignore[arg-type]
        cache=settings.open_cache(),
        prompts=settings.prompts,
        decoding=settings.decoding(),
        namespace=settings.namespace(),
    )


# ----------------------------------------------------------------------------- built-ins


def _openai(settings: JudgeSettings) -> Transport:
    """Any OpenAI-compatible endpoint: ``model`` (or ``$JUDGE_EVAL_MODEL``), ``base_url`` (or
    ``$OPENAI_BASE_URL``) and ``$OPENAI_API_KEY``. With ``api_version``: Azure OpenAI's classic
    deployment URLs (``model`` is the deployment, ``base_url`` or ``$AZURE_OPENAI_ENDPOINT`` the
    resource endpoint; the key from ``$AZURE_OPENAI_API_KEY``, or an Entra ID token from
    ``$AZURE_OPENAI_AD_TOKEN``)."""
    base_url = settings.base_url
    if settings.api_version:
        return _openai_transport(settings, base_url=base_url, azure=True, api_version=settings.api_version)
    if not (base_url or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY")):
        raise ConfigError(
            "no judge endpoint is configured. Set OPENAI_API_KEY (and OPENAI_BASE_URL for a "
            "non-OpenAI server such as vLLM, Ollama or llama.cpp), or pass --base-url URL "
            "--model NAME; or use the deterministic, approximate offline judge with "
            "--judge offline."
        )
    return _openai_transport(settings, base_url=base_url)


def _openai_transport(settings: JudgeSettings, **endpoint: Any) -> Transport:
    model = settings.model or os.environ.get("JUDGE_EVAL_MODEL")
    if not model:
        what = "an Azure deployment" if endpoint.get("azure") else "a model"
        raise ConfigError(f"the openai judge needs {what}: pass --model NAME (or set JUDGE_EVAL_MODEL)")
    from judge_eval.judge.openai_judge import OpenAITransport

    return OpenAITransport(
        model,
        cache=settings.open_cache(),
        timeout=settings.timeout,
        concurrency=settings.concurrency,
        namespace=settings.namespace(),
        reasoning_effort=settings.reasoning_effort,
        **endpoint,
    )


def _offline(settings: JudgeSettings) -> Judge:
    """The deterministic lexical approximation: no network, no cache, a fixed identity."""
    from judge_eval.judge.offline import OfflineJudge, OfflineTransport

    if settings.namespace() is not None:
        raise ConfigError(f"the offline judge's identity is fixed ({OfflineTransport.identity}): it has no endpoint "
                          "and no cache to name; drop --judge-id", option="--judge-id")

    return OfflineJudge(prompts=settings.prompts)


register_judge("openai", _openai)
register_judge("offline", _offline)
