"""The offline judge: a deterministic, lexical **approximation** of an LLM judge.

No network, no model download, no randomness: the same inputs always give the same verdicts. It
exists so the tool runs anywhere (demos, CI, smoke tests). Its numbers are an approximation of
what an LLM judge would say, and every report labels them so (``approximate = True``,
``identity = "offline:v2"``). Change any rule below and the identity's version must change.

Text processing (shared by both calls):

- **tokens**: maximal runs of letters/digits, joined by ``- _ / . : , '`` between letters/digits,
  with an optional trailing ``%`` (``HL-FLX-02``, ``3.5%``, ``1,000``, ``don't``), on NFKC text.
- **exact tokens** (numbers and codes): tokens containing a digit (``2%``, ``2024``,
  ``HL-FLX-02``), or hyphen/underscore tokens with >= 2 capitals and no lower-case letter
  (``HL-FLX``); compared case-folded. A chunk's exact tokens also include the parts of each one
  split on ``- _ / :`` and each with its ``%`` removed, so ``2020`` is found in ``2020-2022`` and
  ``2`` in ``2%``, but ``2%`` is not found in ``2``, ``12%`` or ``3%``.
- **content words**: the exact tokens, plus every other token split on its joiners into words,
  case-folded, words of one character and stopwords (:data:`STOPWORDS`: articles, pronouns,
  auxiliaries, prepositions, question words) dropped, then stemmed (:func:`stem`). Negations
  (``not``, ``no``, ``never``, ``nor``, ``without``) are content words; ``n't`` becomes ``not``.
- **sentences** (:func:`sentence_spans`): ends at ``.``, ``!`` or ``?`` (plus closing quotes or
  brackets) followed by whitespace and a character that is not lower-case, unless the word before
  the period is an abbreviation (:data:`ABBREVIATIONS`), a single letter or a list number at the
  start of a line (``1.``); and at a line break, except a hard wrap (the line ends with a
  lower-case letter or ``,`` and the next starts with a lower-case letter).

decompose(reference):
  1. split into sentences; strip list markers (``-``, ``*``, ``•``, ``1.``, ``1)``);
  2. split a sentence into clauses at ``;`` and at ``, and`` / ``, but`` (the conjunction is
     dropped) when the clause before has >= 3 content words and all the text after has >= 3
     (:data:`MIN_CLAUSE_CONTENT`);
  3. strip whitespace and ``,;:`` at the ends; drop fragments without content words; drop
     repeats (same text after case-folding and whitespace collapsing).
  No pronoun resolution: a statement like "It is waived for students." stays as it is.

judge_chunk(question, statements, chunk):
  - statement *s* is **supported** iff it has content words, the share of its distinct content
    words found among the chunk's content words (with the parts of its exact tokens) is
    >= 0.6 (:data:`SUPPORT_SHARE`), and every exact token of *s* is an exact token of the chunk
    (with parts, as above);
  - evidence for a supported statement = the chunk sentence (a verbatim substring of the chunk)
    sharing the most distinct content words with *s* (first such sentence on ties), so it always
    passes :func:`judge_eval.judge.evidence.verify`;
  - grade = 3 if it supports >= half of the statements (and at least one); 2 if it supports at
    least one; 1 if it supports none but shares content words with the question (>= 2 distinct
    words, or >= 30% of the question's distinct content words); else 0.

Known limitations (it is lexical): paraphrases and synonyms are not recognised ("costs nothing"
does not support "is free"); negation and word order are mostly ignored ("is not free" can be
supported by "is free" when enough other words match); no pronoun resolution; English stopwords
and suffixes only.
"""

from __future__ import annotations

import re
import unicodedata
from itertools import pairwise
from typing import NamedTuple

from judge_eval.judge.core import Completion, CompletionRequest, JudgeCore
from judge_eval.judge.prompts import PromptSelection
from judge_eval.judge.protocol import ChunkVerdict, Statements, Support

__all__ = [
    "ABBREVIATIONS",
    "MIN_CLAUSE_CONTENT",
    "OfflineJudge",
    "OfflineTransport",
    "STOPWORDS",
    "SUPPORT_SHARE",
    "content_words",
    "decompose_text",
    "exact_tokens",
    "judge_text",
    "sentence_spans",
    "stem",
]

#: share of a statement's distinct content words that must appear in the chunk
SUPPORT_SHARE = 0.6
#: content words each side of a clause split needs
MIN_CLAUSE_CONTENT = 3
#: question-overlap needed for grade 1: this many distinct words, or this share of the question's
QUESTION_MIN_WORDS = 2
QUESTION_MIN_SHARE = 0.3

STOPWORDS: frozenset[str] = frozenset(
    """
    a an the and or but if then than so as of in on at to from by for with about into onto over
    under after before between through during up down out off again further once here there
    above below upon within across per via also only just very too quite really such same own
    other others another each every any all both few more most much many some several
    it its itself this that these those i me my mine myself we us our ours ourselves you your
    yours yourself yourselves he him his himself she her hers herself they them their theirs
    themselves one ones
    what which who whom whose when where why how whether
    is are was were be been being am do does did doing done have has had having
    can could would should will shall may might must ought
    don doesn didn isn aren wasn weren hasn haven hadn won wouldn shouldn couldn cannot ll re ve
    etc eg ie
    """.split()
)

_NEGATIONS = frozenset({"not", "no", "never", "nor", "without"})

ABBREVIATIONS: frozenset[str] = frozenset(
    """
    mr mrs ms dr prof sr jr st vs etc eg ie cf approx incl excl fig figs vol ca al inc ltd
    corp dept jan feb mar apr jun jul aug sep sept oct nov dec
    """.split()
)

_CURRENCY = "$\u20ac\u00a3\u00a5"  # $ € £ ¥
_TOKEN = re.compile(r"[" + _CURRENCY + r"]?[^\W_]+(?:[-_/.:,'\u2019][^\W_]+)*%?")
_JOINERS = re.compile(r"[-_/.:,'\u2019]")
_CODE_PARTS = re.compile(r"[-_/:]")
_SENT_END = re.compile(r"[.!?]+[\"'\u2019\u201d)\]]*(?=\s)")
_LIST_MARKER = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+")
_CLAUSE_SEP = re.compile(r";|,\s+(?:and|but)\s+", re.I)
_WS = re.compile(r"\s+")


def stem(word: str) -> str:
    """A light suffix stripper (lower-case input), applied in this order:

    1. ``-ies``/``-ied`` -> ``-y`` when the word is longer than 4 letters, and stop there
       (policies -> policy, applied -> apply); else ``-sses`` -> ``-ss``; else a final ``-s``
       is dropped when the word is longer than 3 letters and does not end in ``-ss``, ``-us``
       or ``-is`` (fees -> fee);
    2. the first of ``-ing``, ``-ed`` (leaving >= 3 letters) or ``-ly`` (leaving >= 4) is
       dropped, and then a doubled final consonant other than l, s, z is undoubled
       (stopped -> stop, monthly -> month);
    3. ``-ism`` or ``-ist`` is dropped when >= 5 letters remain, and nothing else is done
       (impressionism, impressionists -> impression; artist, list stay);
    4. else a final ``-e`` is dropped when >= 3 letters remain (charge -> charg, fee stays).
    """
    w = word
    if len(w) > 4 and (w.endswith("ies") or w.endswith("ied")):
        return w[:-3] + "y"
    if w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("s") and len(w) > 3 and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    for suffix, keep in (("ing", 3), ("ed", 3), ("ly", 4)):
        if w.endswith(suffix) and len(w) - len(suffix) >= keep:
            w = w[: -len(suffix)]
            if len(w) >= 2 and w[-1] == w[-2] and w[-1] not in "aeiouylsz":
                w = w[:-1]
            break
    for suffix in ("ism", "ist"):  # impressionism, impressionist -> impression
        if w.endswith(suffix) and len(w) - len(suffix) >= 5:
            return w[: -len(suffix)]
    if w.endswith("e") and len(w) >= 4:
        w = w[:-1]
    return w


def _is_exact(token: str) -> bool:
    if any(ch.isdigit() for ch in token):
        return True
    return (
        ("-" in token or "_" in token)
        and sum(ch.isupper() for ch in token) >= 2
        and not any(ch.islower() for ch in token)
    )


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(unicodedata.normalize("NFKC", text))


def _content_list(text: str) -> list[str]:
    """Content words in order, with repeats (used to count words of a clause)."""
    out: list[str] = []
    for tok in _tokens(text):
        if _is_exact(tok):
            out.append(tok.casefold())
            continue
        parts = [p.casefold() for p in _JOINERS.split(tok)]
        if len(parts) >= 2 and parts[-1] == "t" and parts[-2].endswith("n"):
            out.append("not")  # doesn't, isn't, won't, can't
        for p in parts:
            if p in _NEGATIONS:
                out.append(p)
            elif len(p) >= 2 and p not in STOPWORDS and p != "t":
                out.append(stem(p))
    return out


def content_words(text: str) -> frozenset[str]:
    """The distinct content words of ``text`` (see the module docstring)."""
    return frozenset(_content_list(text))


def exact_tokens(text: str, *, with_parts: bool = False) -> frozenset[str]:
    """Numbers and codes of ``text``, case-folded. ``with_parts`` (used for chunks) adds each
    token's parts split on ``- _ / :`` and each without a trailing ``%``."""
    out: set[str] = set()
    for tok in _tokens(text):
        if not _is_exact(tok):
            continue
        t = tok.casefold()
        out.add(t)
        if with_parts:
            for piece in [t, *_CODE_PARTS.split(t)]:
                if piece:
                    out.add(piece)
                    out.add(piece.rstrip("%"))
                    out.add(piece.lstrip(_CURRENCY))
    out.discard("")
    return frozenset(out)


def _is_abbreviation_end(text: str, dot: int) -> bool:
    """Whether the period at ``text[dot]`` ends an abbreviation, an initial, or a list number
    at the start of a line (``1.``)."""
    line_start = text.rfind("\n", 0, dot) + 1
    if re.fullmatch(r"\s*\d+", text[line_start:dot]):
        return True
    m = re.search(r"([^\W\d_]+)$", text[:dot])
    if m is None:
        return False
    word = m.group(1)
    return len(word) == 1 or word.casefold() in ABBREVIATIONS


def _line_breaks(text: str) -> list[tuple[int, int]]:
    """(end of line, start of next line) for line breaks that end a sentence."""
    out = []
    for m in re.finditer(r"[ \t]*\n\s*", text):
        before = text[: m.start()].rstrip()
        after = text[m.end() : m.end() + 1]
        hard_wrap = bool(before) and (before[-1].islower() or before[-1] == ",") and after.islower()
        if not hard_wrap:
            out.append((m.start(), m.end()))
    return out


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` offsets of the sentences of ``text`` (see the module docstring): each
    ``text[start:end]`` is a verbatim, stripped, non-empty substring."""
    cuts: list[tuple[int, int]] = list(_line_breaks(text))
    for m in _SENT_END.finditer(text):
        nxt = re.match(r"\s+(\S)", text[m.end() :])
        if nxt is None or nxt.group(1).islower():
            continue
        punct = m.group().rstrip("\"'\u2019\u201d)]")
        if punct == "." and _is_abbreviation_end(text, m.start()):
            continue
        cuts.append((m.end(), m.end()))
    spans: list[tuple[int, int]] = []
    start = 0
    for end, resume in sorted(cuts) + [(len(text), len(text))]:
        if end < start:
            continue
        seg = text[start:end]
        lead = len(seg) - len(seg.lstrip())
        seg_stripped = seg.strip()
        if seg_stripped:
            spans.append((start + lead, start + lead + len(seg_stripped)))
        start = max(resume, end)
    return spans


def _split_clauses(sentence: str) -> list[str]:
    out: list[str] = []
    start = 0
    for m in _CLAUSE_SEP.finditer(sentence):
        left, right = sentence[start : m.start()], sentence[m.end() :]
        if len(_content_list(left)) >= MIN_CLAUSE_CONTENT and len(_content_list(right)) >= MIN_CLAUSE_CONTENT:
            out.append(left)
            start = m.end()
    out.append(sentence[start:])
    return out


def decompose_text(reference: str) -> list[str]:
    """The offline decomposition of ``reference`` into statements (module docstring, steps 1-3)."""
    statements: list[str] = []
    seen: set[str] = set()
    for start, end in sentence_spans(reference):
        sentence = _LIST_MARKER.sub("", reference[start:end])
        for clause in _split_clauses(sentence):
            text = _WS.sub(" ", clause).strip().strip(",;:").strip()
            key = text.casefold()
            if not content_words(text) or key in seen:
                continue
            seen.add(key)
            statements.append(text)
    return statements


_POLARITY = frozenset({"yes", "no"})


class _Span(NamedTuple):
    """A candidate evidence span of a chunk: offsets, content words (with the parts of exact
    tokens), exact tokens, and whether it is a single sentence."""

    start: int
    end: int
    words: frozenset[str]
    exact: frozenset[str]
    single: bool


def _evidence_spans(chunk: str) -> list[_Span]:
    """Candidate evidence: every sentence of the chunk, then every two adjacent sentences (as
    one verbatim substring), in that order."""
    sentences = sentence_spans(chunk)
    pairs = [(a[0], b[1]) for a, b in pairwise(sentences)]
    out = []
    for i, (start, end) in enumerate(sentences + pairs):
        exact = exact_tokens(chunk[start:end], with_parts=True)
        out.append(_Span(start, end, content_words(chunk[start:end]) | exact, exact, i < len(sentences)))
    return out


def _support_span(words: frozenset[str], exact: frozenset[str], spans: list[_Span]) -> _Span | None:
    """The span that carries a statement: share of its content words >= SUPPORT_SHARE and every
    exact token present; the single sentence with the largest share (first on ties), else the
    pair of adjacent sentences with the largest share."""
    for group in ([sp for sp in spans if sp.single], [sp for sp in spans if not sp.single]):
        best, best_share = None, -1.0
        for sp in group:
            share = len(words & sp.words) / len(words)
            if share >= SUPPORT_SHARE and exact <= sp.exact and share > best_share:
                best, best_share = sp, share
        if best is not None:
            return best
    return None


def _answer_span(question: str, negative: bool, spans: list[_Span]) -> _Span | None:
    """For a bare "Yes." / "No." statement: the first sentence that states the question's
    proposition (>= SUPPORT_SHARE of the question's content words) with the same polarity
    (a negation word in it for "no", none for "yes")."""
    q_words = content_words(question) - _POLARITY
    if not q_words:
        return None
    for sp in spans:
        if sp.single and len(q_words & sp.words) / len(q_words) >= SUPPORT_SHARE \
                and bool(sp.words & _NEGATIONS) == negative:
            return sp
    return None


def judge_text(question: str, statements: list[str], chunk: str) -> ChunkVerdict:
    """The offline verdict for one chunk (module docstring, ``judge_chunk`` rules)."""
    spans = _evidence_spans(chunk)
    supports: list[Support] = []
    for number, statement in enumerate(statements, start=1):
        ordered = _content_list(statement)
        words = frozenset(ordered)
        if not words:
            continue
        if words <= _POLARITY | _NEGATIONS and words & _POLARITY:
            span = _answer_span(question, "no" in words, spans)
        else:
            if ordered[0] in _POLARITY and len(words) > 1:
                words = words - {ordered[0]}  # "No, the card is not free": the rest carries the claim
            span = _support_span(words, exact_tokens(statement), spans)
        if span is not None:
            supports.append(Support(statement=number, evidence=chunk[span.start:span.end]))
    n = len(supports)
    if n >= 1 and 2 * n >= len(statements):
        grade = 3
    elif n >= 1:
        grade = 2
    else:
        q = content_words(question)
        chunk_words = content_words(chunk) | exact_tokens(chunk, with_parts=True)
        shared = len(q & chunk_words)
        grade = 1 if q and (shared >= QUESTION_MIN_WORDS or shared / len(q) >= QUESTION_MIN_SHARE) else 0
    reason = f"offline lexical approximation: supports {n} of {len(statements)} statements"
    return ChunkVerdict(supports=supports, grade=grade, reason=reason)


class OfflineTransport:
    """The offline rules as a :class:`~judge_eval.judge.core.Transport`: reads the task's inputs
    (not the rendered prompt), sends nothing (``calls = 0``, no tokens) and answers with the
    structured verdict of :func:`decompose_text` / :func:`judge_text`."""

    identity: str = "offline:v2"

    def __repr__(self) -> str:
        return "OfflineTransport()"

    async def complete(self, request: CompletionRequest) -> Completion:
        inputs = request.inputs
        if request.prompt.name == "decompose":
            data = Statements(statements=decompose_text(inputs["reference"])).model_dump()
        elif request.prompt.name == "judge_chunk":
            data = judge_text(inputs["question"], inputs["statements"], inputs["chunk"]).model_dump()
        else:
            raise ValueError(f"the offline judge has no rules for prompt {request.prompt.id}")
        return Completion(data=data, calls=0)


class OfflineJudge(JudgeCore):
    """The :class:`judge_eval.judge.protocol.Judge` that needs nothing: lexical rules, no network,
    no model, deterministic (``sample`` is ignored: every sample is the same). An
    **approximation** of an LLM judge; the rules are in this module's docstring. It runs through
    the judge core like any judge (the answer is validated and the prompt's checks apply) but
    without a cache: it is deterministic and free. Responses report ``calls = 0`` and no token
    usage."""

    approximate: bool = True

    def __init__(self, *, prompts: PromptSelection = None) -> None:
        super().__init__(OfflineTransport(), cache=None, prompts=prompts)
