"""docs/contributing.md: its worked examples are the fixture files the tests execute."""

import re
from pathlib import Path

ROOT = Path(__file__).parents[1]
DOC = ROOT / "docs" / "contributing.md"


def _section(heading: str) -> str:
    text = DOC.read_text()
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end != -1 else len(text)]


def test_the_page_has_the_three_sections():
    text = DOC.read_text()
    for heading in (
        "## Add a progress measure",
        "## Add a positional encoding",
        "## Add a dynamics model",
    ):
        assert heading in text


def test_the_measure_example_quotes_the_executed_fixture_exactly():
    blocks = re.findall(r"```python\n(.*?)```", _section("## Add a progress measure"), re.S)
    fixture = (ROOT / "tests" / "fixtures" / "extra_measure.py").read_text()
    assert blocks and blocks[0] == fixture


def test_the_task_example_quotes_the_executed_fixture_exactly():
    blocks = re.findall(r"```python\n(.*?)```", _section("## Add a task"), re.S)
    fixture = (ROOT / "tests" / "fixtures" / "extra_task.py").read_text()
    assert blocks and blocks[0] == fixture


def test_the_section_example_quotes_the_executed_fixture_exactly():
    blocks = re.findall(r"```python\n(.*?)```", _section("## Add a figure or report section"), re.S)
    fixture = (ROOT / "tests" / "fixtures" / "extra_section.py").read_text()
    assert blocks and blocks[0] == fixture
