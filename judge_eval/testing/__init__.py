"""Testing helpers shipped with the package (nothing beyond judge-eval's own dependencies).

:mod:`judge_eval.testing.scripted_server` is a scripted OpenAI-compatible chat-completions
server on 127.0.0.1 that answers judge_eval's own prompts from a table and injects faults, so
the judge client can be tested through the real ``openai`` client and real HTTP.
"""

from __future__ import annotations

from judge_eval.testing.scripted_server import (
    ChunkScript,
    Fault,
    Scenario,
    ScriptedServer,
    body_key,
    messages_key,
)

__all__ = ["ChunkScript", "Fault", "ScriptedServer", "Scenario", "body_key", "messages_key"]
