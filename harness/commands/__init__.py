"""The CLI's command bodies: arguments to the pipeline, then print. Each is imported only when
its command runs (``harness.cli.COMMANDS``), so ``harness --help`` imports no pipeline module."""
