"""Every default names its source as docs/science.md's tables give it: the ``--set`` field lines
of ``induction-cliff train --help`` (the config classes' docstrings) say ``Source: ...`` with the
table's word, never credit the paper with a value it does not state, and no page or docstring
says that the paper trains 1e5 steps (the paper gives no length; 1e5 is the toolkit's default)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from interp.train.overrides import settable_fields

ROOT = Path(__file__).resolve().parents[1]
SCIENCE = ROOT / "docs" / "science.md"
# The words science.md's tables use for a default's source (section 5).
SOURCES = ("paper", "author's code", "third-party script", "toolkit")
TABLE_TITLE = re.compile(r"^`(TaskConfig|ModelConfig|TrainConfig)` \(`interp/")
SOURCE_MARK = re.compile(r"Source: (paper|author's code|third-party script|toolkit)\b")
# A field line crediting a value to the paper: "(the paper: 1e-6)", "(the paper)", "Paper: 63."
PAPER_CREDIT = re.compile(r"\(the paper(?::|\))|\bPaper: |\bthe paper's default\b")
# "paper" followed, within a sentence, by the training length 1e5 (the toolkit's default), where
# nothing between says that the paper gives no length or that 1e5 is the toolkit's.
PAPER_LENGTH = re.compile(
    r"\b[Pp]aper's (?:training )?length\b|\b[Pp]aper(?![-_])"
    r"(?:(?!toolkit|no length|gives no|gives none|not give|not state|not say|\.\s)[^;]){0,80}?"
    r"(?<![\d.])(?:1e5|1\.0e5|10\^5|10\*\*5|100[_,]?000)(?!\d)"
)
SCANNED = ("interp", "experiments", "docs")


def science_sources(text: str) -> dict[str, str]:
    """``field -> source word`` of every row of science.md's ``TaskConfig``, ``ModelConfig`` and
    ``TrainConfig`` tables (a row naming several fields gives each the same source)."""
    out: dict[str, str] = {}
    in_table = False
    for line in text.splitlines():
        if TABLE_TITLE.match(line):
            in_table = True
            continue
        if not in_table:
            continue
        if not line.startswith("|"):
            if out and line.strip():
                in_table = False
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if cells[0] in ("field", "---"):
            continue
        assert len(cells) == 3, (
            f"science.md: a default's row is not | field | default | source |: {line}"
        )
        word = next((s for s in SOURCES if cells[2].startswith(s)), None)
        assert word, f"science.md: {cells[0]}'s source does not start with one of {SOURCES}"
        for name in re.findall(r"`(\w+)`", cells[0]):
            out[name] = word
    return out


def credits_paper(doc: str) -> bool:
    return bool(PAPER_CREDIT.search(doc))


def paper_length_claims(text: str) -> list[str]:
    """Where ``text`` says the paper's training length is 1e5 (markdown table rows, which hold
    data, are skipped; a sentence split over lines or over Python string pieces is joined, while
    a blank line, a heading or a list item ends one)."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("|")]
    joined = re.sub(r'"\s*\n\s*f?"', "", "\n".join(lines))
    joined = re.sub(r"\n\s*(?:\n|[-*] |#+ |\d+\. )", ". ", joined)
    joined = re.sub(r"\s*\n\s*(?:#\s*)?", " ", joined)
    return [m.group(0) for m in PAPER_LENGTH.finditer(joined)]


SCIENCE_SOURCES = science_sources(SCIENCE.read_text(encoding="utf-8"))
FIELDS = {f.key: f for f in settable_fields()}


def test_science_md_gives_a_source_for_the_defaults():
    assert len(SCIENCE_SOURCES) >= 40
    assert SCIENCE_SOURCES["D"] == "paper"
    assert SCIENCE_SOURCES["lr"] == "author's code"
    assert SCIENCE_SOURCES["steps"] == "toolkit"
    assert SCIENCE_SOURCES["num_threads"] == SCIENCE_SOURCES["device"] == "toolkit"
    assert set(SCIENCE_SOURCES) <= set(FIELDS), "science.md names a field --set does not know"


@pytest.mark.parametrize("key", sorted(SCIENCE_SOURCES))
def test_each_field_line_names_the_source_science_md_gives(key):
    doc, source = FIELDS[key].doc, SCIENCE_SOURCES[key]
    named = SOURCE_MARK.findall(doc)
    assert named == [source], f"--help of {key} says Source: {named}, science.md says {source!r}"
    if source != "paper":
        assert not credits_paper(doc), f"--help of {key} credits the paper; its source: {source}"


def test_a_line_crediting_the_paper_wrongly_is_caught():
    assert credits_paper("weight decay (the paper: 1e-6), in the form ...")
    assert credits_paper("content dimensions. Paper: 63.")
    assert credits_paper("one of ``none`` (the paper), ``sqrt``")
    assert not credits_paper("(the author's code; the paper does not state it)")
    assert science_sources(
        "`TrainConfig` (`interp/x.py`):\n\n| field | default | source |\n| --- | --- | --- |\n"
        "| `a`, `b` | 1 | toolkit (why) |\n| `c` | 2 | author's code |\n\nprose `| x | y | z |`\n"
    ) == {"a": "toolkit", "b": "toolkit", "c": "author's code"}


def test_no_file_says_the_paper_trains_1e5_steps():
    found = []
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in (".py", ".md") and path.is_file():
                for claim in paper_length_claims(path.read_text(encoding="utf-8")):
                    found.append(f"{path.relative_to(ROOT)}: {claim!r}")
    assert not found, "the paper gives no training length (1e5 is the toolkit's):\n" + "\n".join(
        found
    )


@pytest.mark.parametrize(
    "text",
    [
        "where the paper trains 1e5.",
        "(about 18k lr-0.01 steps of the paper's 1e5)",
        'deviations=("Plain SGD at lr 0.03 (the paper: lr 0.01 for "\n            "1e5 steps)",)',
        "(default: the paper's SGD, 1e5 steps)",
        "the paper's protocol (six seeds of 100_000 steps)",
        "35000 steps (about 1.05e5 lr-0.01 steps, the paper's length)",
    ],
)
def test_a_claim_of_the_papers_length_is_caught(text):
    assert paper_length_claims(text)


@pytest.mark.parametrize(
    "text",
    [
        "1e5 steps (the toolkit's default; the paper gives no length)",
        "steps: 1e5 is the toolkit's default (the paper does not give the training length).",
        "six paper-fig3 seeds of 1e5 steps",
        "| paper protocol, 6 x 1e5 steps | 44.5 |",
        "the paper's lr 0.01. Runs of 1e5 steps",
        "## Deviations from the paper\n\n- Plain SGD for 1e5 steps (the toolkit's default).",
        "p_C 0 (the toolkit's: the paper does not state it), 1e5 steps (the toolkit's)",
    ],
)
def test_a_length_said_as_the_toolkits_passes(text):
    assert not paper_length_claims(text)
