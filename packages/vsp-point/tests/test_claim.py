"""The quick claim test: what the quick profile measured, stated margins."""

import pytest


@pytest.mark.claim
def test_claim_quick():
    pytest.fail("vsp-point is a scaffold: run the quick profile and assert what it measured")
