#!/usr/bin/env bash
# The GPU cases on a host with its own PyTorch and no network (matrices/gpu-host.yaml), in two
# halves: what needs the network runs here, what needs the GPU runs there.
#
#   bash bench/gpu_host.sh prepare BASE_FREEZE PYTHON_X.Y [FIND_LINKS...]
#       here, with network: the wheelhouse the overlays add on top of the host's packages
#       (BASE_FREEZE: `python3 -m pip list --format=freeze` run on the host; PYTHON_X.Y: its Python),
#       plus what the harness itself needs and the host may lack; into .whl/
#   bash bench/gpu_host.sh run [HARNESS_RUN_ARGS...]
#       there, with no network: install the harness's missing pieces from .whl/ into .hostpkgs/,
#       then `harness run -m matrices/gpu-host.yaml --offline --find-links .whl` (GPU slots from
#       the probe); the table and logs land in reports/ (or $OUT/reports when $OUT is set).
set -euo pipefail
cd "$(dirname "$0")/.."
WHEELS=.whl
case "${1:-}" in
  prepare)
    freeze=$2 python=$3; shift 3
    links=(); for d in "$@"; do links+=(--find-links "$d"); done
    python3 -m harness wheelhouse "$WHEELS" -m matrices/gpu-host.yaml --base-packages "$freeze" \
      --python "$python" "${links[@]}"
    # The harness's own dependencies that a GPU host's python3 may not have (uv is a binary).
    python3 -m pip download --quiet --only-binary=:all: --python-version "$python" \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --dest "$WHEELS" \
      uv packaging tabulate orjson
    du -sh "$WHEELS"
    ;;
  run)
    shift
    python3 -m pip install --quiet --no-index --find-links "$WHEELS" --target .hostpkgs \
      uv packaging tabulate orjson
    export PYTHONPATH="$PWD/.hostpkgs:$PWD" PATH="$PWD/.hostpkgs/bin:$PATH"
    reports="${OUT:-.}/reports"
    python3 -m harness doctor
    python3 -m harness --reports "$reports" run -m matrices/gpu-host.yaml --offline \
      --find-links "$WHEELS" "$@" || true   # exit 1 is a finding (a FAIL or ERROR cell)
    ;;
  *) sed -n '2,15p' "$0"; exit 2 ;;
esac
