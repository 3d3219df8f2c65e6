#!/usr/bin/env bash
# The GPU cases on a host with its own PyTorch and no network (matrices/gpu-host.yaml), in two
# halves: what needs the network runs here, what needs the GPU runs there. The environments are
# split into two parts so that each part's wheels and the tree fit a 64 MiB carry.
#
#   bash bench/gpu_host.sh prepare BASE_FREEZE PYTHON_X.Y [FIND_LINKS...]
#       here, with network: .whl/1 and .whl/2, the wheels each part's overlays add on top of the
#       host's packages (BASE_FREEZE: `python3 -m pip list --format=freeze` run on the host;
#       PYTHON_X.Y: its Python), and .whl/harness, the harness's own dependencies the host lacks;
#       prints each part's carry (the tree, .whl/harness, .whl/N) and fails if one is over 64 MiB
#   bash bench/gpu_host.sh run PART [HARNESS_RUN_ARGS...]
#       there, with no network: install .whl/harness into .hostpkgs/, then `harness run -m
#       matrices/gpu-host.yaml --offline --find-links .whl/PART` over that part's environments
#       (GPU slots from the probe); the record and report land in reports/ (or $OUT/reports).
set -euo pipefail
cd "$(dirname "$0")/.."
WHEELS=.whl
LIMIT_MIB=64
part_envs() {  # the environments of part $1
  case "$1" in
    1) echo host-probes host-mergekit 'host-ktransformers-*' ;;
    2) echo 'host-transformerlens-*' ;;
    *) echo "bench/gpu_host.sh: no part '$1' (1 or 2)" >&2; exit 2 ;;
  esac
}
case "${1:-}" in
  prepare)
    freeze=$2 python=$3; shift 3
    links=(); for d in "$@"; do links+=(--find-links "$d"); done
    rm -rf "$WHEELS"
    for part in 1 2; do
      envs=(); for e in $(part_envs "$part"); do envs+=(--env "$e"); done
      python3 -m harness wheelhouse "$WHEELS/$part" -m matrices/gpu-host.yaml "${envs[@]}" \
        --base-packages "$freeze" --python "$python" "${links[@]}"
    done
    # The harness's own dependencies that the host's python3 does not hold (uv is a binary).
    mapfile -t lacking < <(python3 - "$freeze" <<'EOF'
import re, sys, tomllib
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
held = {norm(line.split("==")[0]) for line in open(sys.argv[1]) if "==" in line}
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
for dep in deps:
    if norm(re.match(r"[A-Za-z0-9_.-]+", dep).group()) not in held:
        print(dep)
EOF
)
    if [ "${#lacking[@]}" -gt 0 ]; then
      python3 -m pip download --quiet --only-binary=:all: --python-version "$python" \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --dest "$WHEELS/harness" "${lacking[@]}"
    fi
    mkdir -p "$WHEELS/harness"
    files() { du -cb --files0-from=- | tail -1 | cut -f1; }  # the bytes of the files named
    tree=$(git ls-files -z | files)
    over=0
    for part in 1 2; do  # the files alone: a folder's own size is not carried
      bytes=$(( tree + $(find "$WHEELS/harness" "$WHEELS/$part" -type f -print0 | files) ))
      mib=$(( (bytes + 1048575) / 1048576 ))
      echo "part $part: carry $mib MiB (the tree, $WHEELS/harness, $WHEELS/$part; limit $LIMIT_MIB MiB)"
      [ "$mib" -le "$LIMIT_MIB" ] || over=1
    done
    [ "$over" -eq 0 ] || { echo "bench/gpu_host.sh: a part's carry is over $LIMIT_MIB MiB" >&2; exit 1; }
    ;;
  run)
    part=${2:?bench/gpu_host.sh run PART: 1 or 2}; shift 2
    only=(); for e in $(part_envs "$part"); do only+=(--only "env=$e"); done
    python3 -m pip install --quiet --no-index --find-links "$WHEELS/harness" --target .hostpkgs \
      "$WHEELS"/harness/*.whl
    # The host's python3 may itself be a virtualenv's (an image's): it is still the host.
    HARNESS_HOST_PYTHON=$(command -v python3)
    export HARNESS_HOST_PYTHON PYTHONPATH="$PWD/.hostpkgs:$PWD" PATH="$PWD/.hostpkgs/bin:$PATH"
    reports="${OUT:-.}/reports"
    python3 -m harness doctor
    run_id="gpu-host-$part-$(date -u +%Y%m%dT%H%M%S)"
    python3 -m harness --reports "$reports" run -m matrices/gpu-host.yaml --offline \
      --find-links "$WHEELS/$part" "${only[@]}" --run-id "$run_id" "$@" || true  # 1: a finding
    # One line per cell: its id, outcome and reason (the last attempt of each).
    python3 - "$reports/runs/$run_id/results.jsonl" <<'EOF'
import json, sys
cells = {}
for line in open(sys.argv[1]):
    cell = json.loads(line)
    cells[cell["cell_id"]] = cell
for cell in cells.values():
    print(cell["cell_id"], cell["outcome"], " ".join(cell.get("reason", "").split())[:160])
EOF
    ;;
  *) sed -n '2,14p' "$0"; exit 2 ;;
esac
