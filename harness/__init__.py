"""Cross-hardware compatibility test-matrix harness for the ML stack."""

from __future__ import annotations

__version__ = "0.1.0"
