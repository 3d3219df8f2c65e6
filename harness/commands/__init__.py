"""The bodies of the CLI's commands: read the parsed arguments, call the pipeline, print.

Each module is imported only when its command runs (``harness.cli`` names them), so that
``harness --help`` imports no pipeline module. Policy (what to prune, how to shard, what a
baseline holds) lives in the stages; a command only connects arguments to it.
"""
