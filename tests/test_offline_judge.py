"""The offline judge: deterministic lexical rules (an approximation of an LLM judge)."""

from __future__ import annotations

import asyncio
import random

import pytest

from judge_eval.judge.evidence import verify
from judge_eval.judge.offline import (
    OfflineJudge,
    content_words,
    exact_tokens,
    sentence_spans,
    stem,
)
from judge_eval.judge.protocol import ChunkVerdict, JudgeResponse, Statements

QUESTION = "What fees does the Flex Home Loan charge?"
CHUNK = (
    "Flex Home Loan (product code HL-FLX-02)\n"
    "The Flex Home Loan charges an arrangement fee of 2% of the loan amount. "
    "Overpayments of up to 10% a year are free; above that, an early repayment charge applies."
)


def decompose(reference: str) -> list[str]:
    r = asyncio.run(OfflineJudge().decompose(reference))
    assert isinstance(r, JudgeResponse) and isinstance(r.value, Statements)
    return r.value.statements


def judge(statements: list[str], chunk: str = CHUNK, question: str = QUESTION) -> ChunkVerdict:
    r = asyncio.run(OfflineJudge().judge_chunk(question, statements, chunk))
    assert isinstance(r, JudgeResponse) and isinstance(r.value, ChunkVerdict)
    return r.value


def test_identity_and_accounting():
    j = OfflineJudge()
    assert j.identity == "offline:v2"
    assert j.approximate is True
    r1 = asyncio.run(j.decompose("The fee is 2%."))
    r2 = asyncio.run(j.judge_chunk("q?", ["The fee is 2%."], "The fee is 2%."))
    for r in (r1, r2):
        assert r.calls == 0 and r.cache_hit is False
        assert r.usage.total_tokens == 0


def test_stem_rules():
    pairs = {
        "fees": "fee", "fee": "fee", "charges": "charg", "charged": "charg", "charging": "charg",
        "charge": "charg", "policies": "policy", "applied": "apply", "applies": "apply",
        "stopped": "stop", "monthly": "month", "status": "status", "analysis": "analysis",
        "class": "class", "classes": "class",
    }
    assert {w: stem(w) for w in pairs} == pairs


def test_content_words_and_exact_tokens():
    assert content_words("What is the monthly fee for the HL-FLX-02 loan?") == {
        "month", "fee", "hl-flx-02", "loan"
    }
    assert "not" in content_words("It doesn't apply.")
    assert exact_tokens("Fee: 2% (was 3.5%) for HL-FLX-02 and HL-FLX from 2020-2022.") == {
        "2%", "3.5%", "hl-flx-02", "hl-flx", "2020-2022"
    }
    parts = exact_tokens("HL-FLX-02 costs 2% in 2020-2022", with_parts=True)
    assert {"hl-flx-02", "hl", "flx", "02", "2%", "2", "2020", "2022"} <= parts
    assert exact_tokens("12%", with_parts=True) == {"12%", "12"}  # no "2%" or "2" inside


def test_sentence_spans_are_verbatim_and_respect_abbreviations():
    text = "Dr. Smith approved it in Jan. 2024. The fee is 2.5%!  Is it? yes.\nA title\nNext line"
    spans = sentence_spans(text)
    assert [text[s:e] for s, e in spans] == [
        "Dr. Smith approved it in Jan. 2024.",
        "The fee is 2.5%!",
        "Is it? yes.",
        "A title",
        "Next line",
    ]
    # a hard-wrapped line (lower-case on both sides) is not a sentence end
    wrapped = "The fee is charged\nonce a year. Then it stops."
    assert [wrapped[s:e] for s, e in sentence_spans(wrapped)] == [
        "The fee is charged\nonce a year.",
        "Then it stops.",
    ]


def test_decompose_sentences_and_clauses():
    ref = (
        "The Flex Home Loan (HL-FLX-02) has an arrangement fee of 2% of the loan amount; "
        "overpayments of up to 10% a year are free, and larger overpayments incur an early "
        "repayment charge. The fee is waived, but only once. It is."
    )
    assert decompose(ref) == [
        "The Flex Home Loan (HL-FLX-02) has an arrangement fee of 2% of the loan amount",
        "overpayments of up to 10% a year are free",
        "larger overpayments incur an early repayment charge.",
        # ", but" not split: "only once" has < 3 content words; "It is." has none: dropped
        "The fee is waived, but only once.",
    ]


def test_decompose_list_markers_duplicates_and_empty():
    ref = "- The fee is 2%.\n- Overpayments are free.\n1. The fee is 2%.\n2) Larger ones cost 1%."
    assert decompose(ref) == ["The fee is 2%.", "Overpayments are free.", "Larger ones cost 1%."]
    assert decompose("") == []
    assert decompose("   \n ") == []
    assert decompose("It is what it is.") == []


def test_supported_statements_and_grade_3():
    st = [
        "The Flex Home Loan has an arrangement fee of 2% of the loan amount.",
        "Overpayments of up to 10% a year are free.",
    ]
    v = judge(st)
    assert [s.statement for s in v.supports] == [1, 2]
    assert v.supports[0].evidence == "The Flex Home Loan charges an arrangement fee of 2% of the loan amount."
    assert v.grade == 3


def test_numbers_must_match_exactly():
    v = judge(["The Flex Home Loan has an arrangement fee of 3% of the loan amount."])
    assert v.supports == []
    v = judge(["The Flex Home Loan has an arrangement fee of 2% of the loan amount."])
    assert len(v.supports) == 1
    # a code must match too
    assert judge(["The product code of the Flex Home Loan is HL-FLX-03."]).supports == []
    assert len(judge(["The product code of the Flex Home Loan is HL-FLX-02."]).supports) == 1
    # "2%" is not found inside "12%"
    assert judge(["The fee is 2% of the amount."], chunk="The fee is 12% of the amount.").supports == []


def test_paraphrase_is_not_supported_known_limitation():
    # An LLM judge would accept this; the lexical approximation does not (documented limitation).
    v = judge(["Paying back extra money early costs nothing up to a tenth of the borrowing each year."])
    assert v.supports == []


def test_support_share_threshold():
    chunk = "alpha beta gamma appear here."
    # content words: alpha beta gamma delta epsilon -> 3/5 = 0.6 -> supported
    assert len(judge(["alpha beta gamma delta epsilon"], chunk=chunk, question="x").supports) == 1
    # 3/6 = 0.5 -> not supported
    assert judge(["alpha beta gamma delta epsilon zeta"], chunk=chunk, question="x").supports == []


def test_grades_2_1_0():
    st = [
        "The Flex Home Loan has an arrangement fee of 2% of the loan amount.",
        "Interest is fixed for 5 years.",
        "The maximum loan is 500000 pounds.",
    ]
    assert judge(st).grade == 2  # supports 1 of 3 (< half)
    assert judge(st[:2]).grade == 3  # 1 of 2 = half
    on_topic = "Our savings accounts have no fees. Loans are reviewed yearly."
    v = judge(st, chunk=on_topic)
    assert v.supports == [] and v.grade == 1  # shares "fee" and "loan" with the question
    assert judge(st, chunk="The weather in Lisbon is sunny in June.").grade == 0
    assert judge([], chunk=CHUNK).grade == 1  # no statements: at most on topic
    assert judge(st, chunk="").grade == 0


def test_deterministic():
    st = decompose("The fee is 2% of the loan amount. Overpayments up to 10% a year are free.")
    a = asyncio.run(OfflineJudge().judge_chunk(QUESTION, st, CHUNK, sample=0)).value
    b = asyncio.run(OfflineJudge().judge_chunk(QUESTION, st, CHUNK, sample=3)).value
    c = judge(st)
    assert a == b == c
    assert decompose("A b c d. E f g h.") == decompose("A b c d. E f g h.")


WORDS = (
    "loan fee rate account card transfer branch savings interest balance payment mortgage "
    "customer limit online mobile overdraft statement deposit credit debit charge yearly"
).split()


def _random_text(rng: random.Random) -> str:
    sentences = []
    for _ in range(rng.randint(1, 6)):
        words = rng.sample(WORDS, rng.randint(3, 9))
        if rng.random() < 0.5:
            words.insert(rng.randint(0, len(words)), rng.choice(["2%", "10", "HL-FLX-02", "3.5%", "2024"]))
        sep = rng.choice([" ", "  ", "\n", " \u2026 ", ", "])
        sentences.append(words[0].capitalize() + " " + sep.join(words[1:]) + rng.choice([".", "!", "?", ""]))
    return rng.choice([" ", "\n", "\n\n"]).join(sentences)


def test_evidence_always_passes_verify():
    rng = random.Random(20240501)
    n_supports = 0
    for _ in range(300):
        chunk = _random_text(rng)
        statements = [
            " ".join(rng.sample(WORDS, rng.randint(2, 6)))
            + rng.choice(["", " 2%", " 10", " HL-FLX-02"])
            for _ in range(rng.randint(1, 5))
        ]
        # also statements copied from the chunk, which must be supported
        statements += [chunk[s:e] for s, e in sentence_spans(chunk)][:2]
        v = judge(statements, chunk=chunk, question="What about the loan fee?")
        vv = verify(v, chunk, len(statements))
        assert vv.unverified == 0 and vv.invalid_statement == 0 and vv.duplicates == 0
        assert vv.supported == {s.statement - 1 for s in v.supports}
        assert vv.fuzzy == frozenset()
        n_supports += len(v.supports)
    assert n_supports > 300  # the check is not vacuous


# --- offline:v2 fixes, each from a small real-looking case ----------------------------------------


def _supported(question: str, statement: str, chunk: str) -> list[str]:
    """The evidence quotes the offline judge gives for one statement (empty: not supported)."""
    from judge_eval.judge.offline import judge_text

    return [s.evidence for s in judge_text(question, [statement], chunk).supports]


def test_support_is_decided_on_the_quoted_evidence_not_the_whole_chunk() -> None:
    statement = "The foreclosure charge on floating-rate home loans is 2%."
    # the statement's words are spread over the first and third sentence: no quote carries them
    # (the whole chunk has 5 of its 7 content words, which offline:v1 counted as support)
    chunk = ("The foreclosure charge is 2% of the principal. Branches open at 9:30 am. "
             "Home loans taken by individuals qualify.")
    assert _supported("Foreclosure charge?", statement, chunk) == []
    # two adjacent sentences together do carry it, and the quote is exactly those two
    chunk = "The foreclosure charge is 2% of the principal. It applies to floating-rate home loans."
    assert _supported("Foreclosure charge?", statement, chunk) == [chunk]
    # one sentence carries it: the quote is that sentence, not a pair
    chunk = "Branches open at 9:30 am. Floating-rate home loans carry a foreclosure charge of 2%. Call us."
    assert _supported("Foreclosure charge?", statement, chunk) == [
        "Floating-rate home loans carry a foreclosure charge of 2%."]


@pytest.mark.parametrize(("answer", "chunk", "supported"), [
    ("No.", "The annual fee is not waived for students.", True),
    ("No.", "Students get the annual fee waived.", False),
    ("No.", "No annual fee applies to premium cards.", False),  # a "no" about something else
    ("Yes.", "Students get the annual fee waived.", True),
    ("Yes.", "The annual fee is not waived for students.", False),
    ("Yes", "Yes, we answer every call within a day.", False),  # a "yes" about something else
])
def test_a_bare_yes_or_no_needs_the_questions_claim_with_that_polarity(answer, chunk, supported) -> None:
    assert bool(_supported("Is the annual fee waived for students?", answer, chunk)) is supported


def test_a_leading_yes_or_no_is_not_a_word_to_match() -> None:
    # "No, ..." with the claim after it: the claim decides, not a stray "no" in the chunk
    assert _supported("Is the card free abroad?", "No, the card is not free abroad.",
                      "The card is not free abroad.") == ["The card is not free abroad."]


def test_currency_amounts_are_not_matched_by_bare_numbers() -> None:
    chunk = "Payments are processed within 20 minutes. The late fee is charged once."
    assert _supported("What is the late fee?", "The late fee is $20.", chunk) == []
    assert _supported("What is the late fee?", "The late fee is $20.", "The late fee is $20 per month.") == [
        "The late fee is $20 per month."]
    assert _supported("What is the late fee?", "The late fee is £20.", "The late fee is $20 per month.") == []


def test_morphological_variants_share_a_stem() -> None:
    from judge_eval.judge.offline import stem

    assert stem("impressionist") == stem("impressionism") == stem("impressionists") == "impression"
    assert stem("artist") == "artist" and stem("list") == "list"  # too short to strip
    assert _supported("Which movement?", "Monet was an impressionist painter.",
                      "Monet was a founder of French Impressionism painting.") != []
