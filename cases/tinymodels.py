"""Tiny randomly initialised models built from configs, shared by the cases.

Nothing is downloaded: every model here is built from a config and, where a case needs files,
written with ``save_pretrained``. Heavy imports stay inside the functions so that collecting the
cases needs neither torch nor transformers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# failures.md §4 and §5: a 2-layer Llama small enough to build in well under a second on a CPU.
LLAMA = {"vocab_size": 128, "hidden_size": 64, "intermediate_size": 128,
         "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 2}


def llama(seed: int = 0, **overrides: Any) -> Any:
    """A ``LlamaForCausalLM`` with random weights, on the CPU, in float32."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(**{**LLAMA, **overrides}))


def save_llama(path: Path, seed: int = 0) -> Path:
    llama(seed).save_pretrained(path)
    return path


def save_perturbed_llamas(root: Path, count: int) -> list[Path]:
    """A base model and ``count - 1`` fine-tune-like copies: same shapes, nudged weights."""
    import torch

    paths = []
    for index in range(count):
        model = llama(seed=0)
        if index:
            torch.manual_seed(index)
            with torch.no_grad():
                for param in model.parameters():
                    param.add_(torch.randn_like(param) * 0.01)
        path = root / f"model-{index}"
        model.save_pretrained(path)
        paths.append(path)
    return paths
