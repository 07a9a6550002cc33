"""The test run checks jaxtyping's shape annotations at run time (pyproject's pytest addopts)."""

import jaxtyping
import pytest
import torch

from interp.analysis.probes import masked_attention_score
from interp.model.positional import apply_rotary


def test_a_batch_that_contradicts_its_annotation_is_refused():
    pattern = torch.full((2, 1, 5, 5), 0.2)  # [batch=2, head, query_pos, key_pos]
    mask = torch.ones(2, 5, 5, dtype=torch.bool)
    assert masked_attention_score(pattern, mask).shape == (1,)
    with pytest.raises(jaxtyping.TypeCheckError, match="batch"):
        masked_attention_score(pattern, torch.ones(3, 5, 5, dtype=torch.bool))


def test_a_wrong_dtype_is_refused_too():
    x = torch.ones(1, 4, 1, 6)
    with pytest.raises(jaxtyping.TypeCheckError):
        apply_rotary(x, torch.arange(4)[None], torch.arange(3))  # int freqs: Float expected
