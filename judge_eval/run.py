"""Run the planned judge work (:mod:`judge_eval.plan`) through a judge, with bounded concurrency.

Tasks run as soon as their reference is decomposed, at most ``concurrency`` at a time. Budgets
(``max_calls``, ``max_tokens``, ``max_cost``) are checked before each task starts: once one is
reached no new call is scheduled, in-flight calls finish, and the remaining tasks are reported as
skipped (reason ``budget``) and the result is marked partial. A task whose judge call fails after
its retries is an error with its cause; it is never turned into a default answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import sys
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from judge_eval.cache import while_waiting
from judge_eval.errors import FATAL_CAUSES, ConfigError, JudgeCallError, JudgeUnavailableError
from judge_eval.judge.evidence import VerifiedVerdict, verify
from judge_eval.judge.protocol import ChunkVerdict, Judge, Usage
from judge_eval.plan import ChunkTask, JointTask, Plan


@dataclass(frozen=True)
class Pricing:
    """Price in USD per million tokens (prompt and completion), used for cost accounting."""

    input_per_million: float = 0.0
    output_per_million: float = 0.0

    def __post_init__(self) -> None:
        for option, value in (("--price-in", self.input_per_million), ("--price-out", self.output_per_million)):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ConfigError(f"must be a finite number >= 0 (USD per million tokens), got {value!r}",
                                  option=option)

    def cost(self, usage: Usage) -> float:
        """USD for ``usage``; reasoning tokens are billed as completion tokens and are already a
        part of ``completion_tokens``, so they are not added again."""
        return (
            usage.prompt_tokens * self.input_per_million
            + usage.completion_tokens * self.output_per_million
        ) / 1e6

    def batch_cost(self, usage: Usage) -> float:
        """USD for ``usage`` answered through a batch: :data:`BATCH_PRICE_FACTOR` of :meth:`cost`."""
        return self.cost(usage) * BATCH_PRICE_FACTOR


#: what a batch request costs compared with the same synchronous request (OpenAI's Batch API:
#: half the price)
BATCH_PRICE_FACTOR = 0.5


@dataclass(frozen=True)
class Budget:
    """Limits on new work; ``None`` means unlimited, 0 means no judge call at all."""

    max_calls: int | None = None
    max_tokens: int | None = None
    max_cost: float | None = None

    def __post_init__(self) -> None:
        for option, value, integer in (("--max-calls", self.max_calls, True), ("--max-tokens", self.max_tokens, True),
                                       ("--max-cost", self.max_cost, False)):
            if value is None:
                continue
            ok = (isinstance(value, int) and not isinstance(value, bool)) if integer else (
                isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value))
            if not ok or value < 0:
                kind = "an integer" if integer else "a finite number"
                raise ConfigError(f"must be {kind} >= 0, got {value!r}", option=option)




@dataclass(frozen=True)
class ErrorTolerance:
    """How many failed judge tasks a run tolerates before it counts as failed (``--max-errors``).

    ``share``: failed / all tasks may be at most this (0 <= share <= 1); ``count``: at most this
    many failed tasks. Budget-skipped tasks are not errors (a budget has its own signal).
    """

    share: float | None = 0.05
    count: int | None = None

    @classmethod
    def parse(cls, text: str) -> ErrorTolerance:
        """``"5%"`` or ``"0.05"`` -> a share; ``"0"``, ``"10"`` -> a count (a whole number)."""
        raw = str(text).strip()
        try:
            if raw.endswith("%"):
                value = float(raw[:-1]) / 100
                is_share = True
            elif raw.isdigit():
                return cls(share=None, count=int(raw))
            else:
                value = float(raw)
                is_share = True
        except ValueError:
            value, is_share = math.nan, True
        if not (is_share and math.isfinite(value) and 0 <= value <= 1):
            raise ConfigError(f"{text!r} is neither a share (0.05 or 5%, at most 100%) nor a whole number "
                              "of failed tasks (e.g. 10)", option="--max-errors")
        return cls(share=value, count=None)

    def exceeded(self, errors: int, tasks: int) -> bool:
        """True when ``errors`` failed tasks out of ``tasks`` are more than tolerated."""
        if self.count is not None:
            return errors > self.count
        return tasks > 0 and errors / tasks > (self.share if self.share is not None else 1.0)

    def __str__(self) -> str:
        if self.count is not None:
            return f"{self.count} failed task{'s' * (self.count != 1)}"
        return f"{(self.share or 0) * 100:g}% of the tasks"


@dataclass
class Accounting:
    """What the judge work cost. ``calls`` are requests actually sent to the model (retries and
    repair requests included; a request answered through a batch counts once, and also in
    ``batch_calls``); ``cache_hits`` are tasks answered from the cache without a call;
    ``saved_tokens`` are the tokens those hits would have cost. ``usage`` includes the reasoning
    tokens of reasoning models (``usage.reasoning_tokens``, a part of the completion tokens);
    ``cost`` prices batch requests at :data:`BATCH_PRICE_FACTOR`. ``batches``: the provider ids
    of the batches this run collected."""

    tasks: int = 0
    done: int = 0
    calls: int = 0
    cache_hits: int = 0
    errors: int = 0
    skipped: int = 0
    unverified_evidence: int = 0
    invalid_statement: int = 0
    usage: Usage = field(default_factory=Usage)
    saved_usage: Usage = field(default_factory=Usage)
    cost: float = 0.0
    error_causes: Counter = field(default_factory=Counter)
    batch_calls: int = 0
    batches: list[str] = field(default_factory=list)

    @property
    def partial(self) -> bool:
        """True when a budget stopped the work before every task ran."""
        return self.skipped > 0

    def as_dict(self) -> dict:
        return {
            "tasks": self.tasks,
            "done": self.done,
            "calls": self.calls,
            "cache_hits": self.cache_hits,
            "errors": self.errors,
            "error_causes": dict(self.error_causes),
            "skipped": self.skipped,
            "partial": self.partial,
            "unverified_evidence": self.unverified_evidence,
            "invalid_statement": self.invalid_statement,
            "prompt_tokens": self.usage.prompt_tokens,
            "completion_tokens": self.usage.completion_tokens,
            "total_tokens": self.usage.total_tokens,
            "reasoning_tokens": self.usage.reasoning_tokens,
            "cached_prompt_tokens": self.usage.cached_tokens,
            "saved_tokens": self.saved_usage.total_tokens,
            "batch_calls": self.batch_calls,
            "batches": list(self.batches),
            "cost_usd": round(self.cost, 6),
        }


@dataclass(frozen=True)
class Failure:
    """Why a task has no answer: ``cause`` is e.g. ``timeout``, ``invalid_output``,
    ``budget`` (skipped), ``no_statements_task`` (its decomposition failed)."""

    cause: str
    message: str


@dataclass(repr=False)
class JudgeOutcome:
    """Everything the judge produced, keyed by task."""

    statements: dict[str, list[str] | Failure] = field(default_factory=dict)
    verdicts: dict[ChunkTask, VerifiedVerdict | Failure] = field(default_factory=dict)
    raw_verdicts: dict[ChunkTask, list[ChunkVerdict]] = field(default_factory=dict)
    joint: dict[JointTask, VerifiedVerdict | Failure] = field(default_factory=dict)
    accounting: Accounting = field(default_factory=Accounting)

    def __repr__(self) -> str:
        # Counts, not contents: asyncio.run() formats the repr of its finished task (and so of
        # this result) when it restores the SIGINT handler; a full repr of 200,000 verdicts took
        # seconds and hundreds of MB.
        return (f"JudgeOutcome(statements={len(self.statements)}, verdicts={len(self.verdicts)}, "
                f"joint={len(self.joint)}, calls={self.accounting.calls})")


def vote(verdicts: Sequence[VerifiedVerdict]) -> VerifiedVerdict:
    """Majority vote over samples of one task.

    A statement counts as supported when more than half of the samples support it with verified
    evidence (the evidence quoted is the first sample's that supported it); the grade is the
    lower median of the samples' grades; the reason is the first sample's. Rejected claims and
    their counts are summed over samples. One sample is returned unchanged.
    """
    if len(verdicts) == 1:
        return verdicts[0]
    n = len(verdicts)
    counts: Counter[int] = Counter(i for v in verdicts for i in v.supported)
    supported = frozenset(i for i, c in counts.items() if c * 2 > n)
    evidence: dict[int, str] = {}
    for v in verdicts:
        for i, quote in v.evidence.items():
            if i in supported and i not in evidence:
                evidence[i] = quote
    grades = sorted(v.grade for v in verdicts)
    return replace(
        verdicts[0],
        supported=supported,
        grade=grades[(n - 1) // 2],
        evidence=evidence,
        fuzzy=frozenset(i for i in supported if any(i in v.fuzzy for v in verdicts)),
        unverified=sum(v.unverified for v in verdicts),
        invalid_statement=sum(v.invalid_statement for v in verdicts),
        duplicates=sum(v.duplicates for v in verdicts),
        rejected=tuple(r for v in verdicts for r in v.rejected),
    )


class _Progress:
    """A tqdm bar on stderr (done/total, cache hits, errors, tokens); silent when disabled."""

    def __init__(self, total: int, enabled: bool, acct: Accounting) -> None:
        self.acct = acct
        self.bar = None
        if enabled and total:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc="judging", unit="task", file=sys.stderr, leave=True)

    def update(self) -> None:
        if self.bar is not None:
            a = self.acct
            self.bar.set_postfix(
                hits=a.cache_hits, errors=a.errors, tokens=a.usage.total_tokens, refresh=False
            )
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class Runner:
    """Runs a :class:`~judge_eval.plan.Plan` through a judge. Use :meth:`run` (async) or :func:`run_plan`."""

    def __init__(
        self,
        judge: Judge,
        *,
        concurrency: int = 32,
        samples: int = 1,
        budget: Budget = Budget(),
        pricing: Pricing = Pricing(),
        progress: bool = False,
        batch: Any = None,
        listwise: int = 1,
    ) -> None:
        for option, value in (("--samples", samples), ("--concurrency", concurrency), ("--listwise", listwise)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"must be an integer >= 1, got {value!r}", option=option)
        self.judge = judge
        self.concurrency = concurrency
        self.samples = samples
        self.budget = budget
        self.pricing = pricing
        self.progress = progress
        #: a batch mode (judge_eval.judge.batch.OpenAIBatch): answers the plan's tasks in bulk
        #: before the synchronous pass, which then asks only what the batch did not answer
        self.batch = batch
        #: chunks of one question judged in one call (judges with ``judge_chunks``; 1: one each)
        self.listwise = listwise

    # -- budget --------------------------------------------------------------------------
    def _budget_reached(self, acct: Accounting) -> bool:
        b = self.budget
        return (
            (b.max_calls is not None and acct.calls >= b.max_calls)
            or (b.max_tokens is not None and acct.usage.total_tokens >= b.max_tokens)
            or (b.max_cost is not None and acct.cost >= b.max_cost)
        )

    def _account(self, acct: Accounting, calls: int, usage: Usage, saved: Usage | None = None) -> None:
        """Add what one task spent (failed tasks spend too) and what a cache hit saved."""
        acct.calls += calls
        acct.usage = acct.usage + usage
        if saved is not None:
            acct.saved_usage = acct.saved_usage + saved
        acct.cost += self.pricing.cost(usage)

    # -- running -------------------------------------------------------------------------
    async def _prefetch(self, plan: Plan, acct: Accounting) -> None:
        """Batch mode: the decompositions through one batch, then the chunk tasks of the
        references decomposed; what the batches spent goes into ``acct`` (at the batch price)."""
        from judge_eval.judge.batch import BatchReport, TaskSpec

        batch = self.batch
        report = BatchReport()
        report += await batch.run(batch_specs(plan, self.samples))
        statements = {}
        for reference in plan.references:
            value = batch.cached(TaskSpec("decompose", {"reference": reference}))
            if value is not None:
                statements[reference] = value.statements
        report += await batch.run(batch_specs(plan, self.samples, statements))
        acct.calls += report.calls + report.sync_calls
        acct.batch_calls += report.calls
        acct.batches += report.batches
        acct.usage = acct.usage + report.usage + report.sync_usage
        acct.cost += self.pricing.batch_cost(report.usage) + self.pricing.cost(report.sync_usage)

    async def run(self, plan: Plan) -> JudgeOutcome:
        """Decompose every reference of the plan, then judge every task, each exactly once."""
        references = plan.references
        chunk_tasks, joint_tasks = plan.chunk_tasks, plan.joint_tasks
        by_reference: dict[str, list[ChunkTask | JointTask]] = {r: [] for r in references}
        tasks: list[ChunkTask | JointTask] = [*chunk_tasks, *joint_tasks]
        for t in tasks:
            by_reference[t.reference].append(t)

        out = JudgeOutcome()
        acct = out.accounting
        acct.tasks = len(references) + len(chunk_tasks) + len(joint_tasks)
        gate = asyncio.Semaphore(self.concurrency)
        if self.batch is not None:
            await self._prefetch(plan, acct)
        bar = _Progress(acct.tasks, self.progress, acct)

        fatal: list[JudgeCallError] = []

        @contextlib.asynccontextmanager
        async def outside_gate() -> AsyncIterator[None]:
            gate.release()  # waiting for another process's answer: let other tasks run meanwhile
            try:
                yield
            finally:
                await gate.acquire()

        async def call(make, tasks: int = 1):
            """Run one judge call (for ``tasks`` tasks) under the gate, or return a Failure
            (budget / error). While the call waits for an answer another process is asking for
            (a claim in the shared cache), it gives its place in the gate to the next task."""
            async with gate:
                if fatal:
                    acct.skipped += tasks
                    return Failure("aborted", f"not run: the judge endpoint failed ({fatal[0].cause})")
                if self._budget_reached(acct):
                    acct.skipped += tasks
                    return Failure("budget", "not run: a --max-calls/--max-tokens/--max-cost budget was reached")
                waiting = while_waiting.set(outside_gate)
                try:
                    resp = await make()
                except JudgeCallError as exc:
                    acct.errors += tasks
                    acct.error_causes[exc.cause] += tasks
                    self._account(acct, exc.calls, exc.usage or Usage())
                    if exc.cause in FATAL_CAUSES:
                        fatal.append(exc)
                    return Failure(exc.cause, exc.message)
                finally:
                    while_waiting.reset(waiting)
                for one in resp if isinstance(resp, list) else [resp]:
                    self._account(acct, one.calls, one.usage, one.saved_usage)
                    if one.cache_hit:
                        acct.cache_hits += 1
                return resp

        async def judge_one(task: ChunkTask | JointTask, statements: list[str]) -> None:
            text = task.chunk if isinstance(task, ChunkTask) else task.context
            verified: list[VerifiedVerdict] = []
            raw: list[ChunkVerdict] = []
            result: VerifiedVerdict | Failure | None = None
            for sample in range(self.samples):
                resp = await call(
                    lambda sample=sample: self.judge.judge_chunk(task.question, statements, text, sample=sample)
                )
                if isinstance(resp, Failure):
                    result = resp
                    break
                raw.append(resp.value)
                verified.append(verify(resp.value, text, len(statements)))
            finish(task, statements, raw, verified, result)

        async def judge_listwise(tasks: list[ChunkTask], statements: list[str]) -> None:
            """The chunks of one question: per sample, those in the cache first (no call), then
            the others in calls of up to ``listwise`` chunks, at once; the evidence check and the
            vote per chunk, as for a chunk judged alone."""
            judge_chunks = self.judge.judge_chunks  # type: ignore[attr-defined]
            cached = getattr(self.judge, "cached_chunks", None)
            question, texts, n = tasks[0].question, [t.chunk for t in tasks], len(tasks)
            raws: list[list[ChunkVerdict]] = [[] for _ in tasks]
            verified: list[list[VerifiedVerdict]] = [[] for _ in tasks]
            failures: list[Failure | None] = [None] * n
            for sample in range(self.samples):
                todo = [i for i in range(n) if failures[i] is None]
                hits = cached(question, statements, [texts[i] for i in todo], sample) if cached else [None] * len(todo)
                answers: dict[int, Any] = {}
                for i, hit in zip(todo, hits, strict=True):
                    if hit is not None:
                        answers[i] = hit
                        self._account(acct, 0, Usage(), hit.saved_usage)
                        acct.cache_hits += 1
                misses = [i for i in todo if i not in answers]

                async def ask(group: list[int], sample: int = sample, answers: dict[int, Any] = answers) -> None:
                    resp = await call(lambda: judge_chunks(question, statements, [texts[i] for i in group],
                                                           sample=sample), len(group))
                    for k, i in enumerate(group):
                        if isinstance(resp, Failure):
                            failures[i] = resp
                        else:
                            answers[i] = resp[k]

                await asyncio.gather(*(ask(misses[k : k + self.listwise])
                                       for k in range(0, len(misses), self.listwise)))
                for i, one in answers.items():
                    raws[i].append(one.value)
                    verified[i].append(verify(one.value, texts[i], len(statements)))
            for i, task in enumerate(tasks):
                finish(task, statements, raws[i], verified[i], failures[i])

        def finish(task: ChunkTask | JointTask, statements: list[str], raw: list[ChunkVerdict],
                   verified: list[VerifiedVerdict], result: VerifiedVerdict | Failure | None) -> None:
            if result is None:
                result = vote(verified)
                acct.unverified_evidence += result.unverified
                acct.invalid_statement += result.invalid_statement
                acct.done += 1
            if isinstance(task, ChunkTask):
                out.verdicts[task] = result
                out.raw_verdicts[task] = raw
            else:
                out.joint[task] = result
            bar.update()

        async def reference_pipeline(reference: str) -> None:
            resp = await call(lambda: self.judge.decompose(reference))
            if isinstance(resp, Failure):
                out.statements[reference] = resp
                bar.update()
                # The tasks that needed these statements cannot run: skipped with the budget,
                # else errors of their own (cause decompose_failed), so done + errors + skipped
                # always adds up to the number of tasks.
                skipped = resp.cause in ("budget", "aborted")
                failed = Failure(
                    resp.cause if skipped else "decompose_failed",
                    f"the reference answer could not be decomposed ({resp.cause})",
                )
                for t in by_reference[reference]:
                    if isinstance(t, ChunkTask):
                        out.verdicts[t] = failed
                    else:
                        out.joint[t] = failed
                    if skipped:
                        acct.skipped += 1
                    else:
                        acct.errors += 1
                        acct.error_causes["decompose_failed"] += 1
                    bar.update()
                return
            statements = resp.value.statements
            out.statements[reference] = statements
            acct.done += 1
            bar.update()
            mine = by_reference[reference]
            if self.listwise > 1 and hasattr(self.judge, "judge_chunks"):
                groups: dict[str, list[ChunkTask]] = {}
                for t in mine:
                    if isinstance(t, ChunkTask):
                        groups.setdefault(t.question, []).append(t)
                await asyncio.gather(*(judge_listwise(g, statements) for g in groups.values()),
                                     *(judge_one(t, statements) for t in mine if not isinstance(t, ChunkTask)))
            else:
                await asyncio.gather(*(judge_one(t, statements) for t in mine))

        # A bounded pool of workers, each taking the next reference: a task per reference (and
        # then per chunk) all at once held every coroutine in memory together (10,000 questions x
        # 20 chunks: about 1 GB), and the gate would let only `concurrency` of them run anyway.
        pending = iter(references)

        async def worker() -> None:
            for reference in pending:
                await reference_pipeline(reference)

        try:
            await asyncio.gather(*(worker() for _ in range(min(len(references), 2 * self.concurrency))))
        finally:
            bar.close()
        if fatal:
            exc = fatal[0]
            raise JudgeUnavailableError(
                exc.cause,
                f"the judge refused the run or could not be reached ({exc.cause}): {exc.message.rstrip('.')} "
                f"-- stopped after {acct.calls} call{'s' * (acct.calls != 1)}, {acct.tasks - acct.done} of "
                f"{acct.tasks} tasks not judged. Check the base URL, the model name and OPENAI_API_KEY.",
                accounting=acct.as_dict(),
            )
        return out


def batch_specs(plan: Plan, samples: int = 1, statements: dict[str, list[str]] | None = None) -> list[Any]:
    """The judge tasks of ``plan`` as batch task specs (judge_eval.judge.batch.TaskSpec), as the
    runner asks them: without ``statements``, one decomposition per reference; with them, every
    sample of every chunk and joint task whose reference has statements."""
    from judge_eval.judge.batch import TaskSpec

    if statements is None:
        return [TaskSpec("decompose", {"reference": r}) for r in plan.references]
    specs = []
    tasks: list[ChunkTask | JointTask] = [*plan.chunk_tasks, *plan.joint_tasks]
    for t in tasks:
        if t.reference not in statements:
            continue
        text = t.chunk if isinstance(t, ChunkTask) else t.context
        for sample in range(samples):
            inputs = {"question": t.question, "statements": list(statements[t.reference]), "chunk": text}
            specs.append(TaskSpec("judge_chunk", inputs, sample))
    return specs


def run_plan(runner: Runner, plan: Plan) -> JudgeOutcome:
    """Synchronous wrapper around :meth:`Runner.run`: the run in an event loop of its own, whose
    HTTP connections the judge closes before the loop ends (connections belong to one loop; the
    judge opens new ones in the next)."""

    async def run_and_close() -> JudgeOutcome:
        try:
            return await runner.run(plan)
        finally:
            close = getattr(runner.judge, "aclose", None)
            if close is not None:
                await close()

    # Fewer young-generation collections while the verdicts pile up: with the default threshold
    # (700 allocations) the collector took a third of reading 210,000 cached answers (33 s ->
    # 22 s; bench/bench_judged_scale.py). Cycles are still collected; the caller's thresholds
    # are put back when the run ends.
    thresholds = gc.get_threshold()
    gc.set_threshold(max(thresholds[0], 50_000), max(thresholds[1], 20), max(thresholds[2], 20))
    try:
        return asyncio.run(run_and_close())
    finally:
        gc.set_threshold(*thresholds)
