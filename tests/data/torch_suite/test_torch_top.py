"""A test module that imports torch at the top, as most libraries' tests do: it collects only
inside an environment that has torch (the harness collects there, not in its own Python)."""

import numpy
import torch


def test_sum() -> None:
    assert torch.ones(3).sum().item() == 3


def test_from_numpy() -> None:
    # torch < 2.3 was built against numpy 1: with numpy 2 this is "Numpy is not available".
    assert torch.from_numpy(numpy.arange(3)).tolist() == [0, 1, 2]


if hasattr(torch, "compiler"):  # torch >= 2.1: the test exists only there

    def test_compiler_namespace() -> None:
        assert callable(torch.compiler.reset)
