"""The docs' served-types page is the registry's: regenerated, it is the committed page."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackflow.localcloud.reference import PAGE, page

pytestmark = pytest.mark.unit


def test_the_committed_served_types_page_matches_the_registry() -> None:
    committed = (Path(__file__).resolve().parents[2] / PAGE).read_text()
    assert committed == page(), f"{PAGE} is stale: run scripts/served_types.py --write"


def test_the_page_names_every_type_with_what_it_serves() -> None:
    text = page()
    assert "| `aws:sqs/queue:Queue` | sqs | " in text
    assert "`visibilityTimeoutSeconds`" in text and "| in place |" in text
    assert "| `aws:iam/getPolicyDocument:getPolicyDocument` | iam_documents |" in text
