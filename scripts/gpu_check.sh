#!/usr/bin/env bash
# The prepared GPU check: python -m embexp.doctor on a machine that has only a PyTorch GPU image's
# Python and a copy of this repository with its wheelhouse (make wheelhouse): no internet, no hub, no venv.
#
#   bash scripts/gpu_check.sh OUT [doctor key=value ...]      e.g. bash scripts/gpu_check.sh docs/gpu/h100
#
# Installs the wheels into a temporary folder (pip --no-index --target; the image's own packages untouched),
# runs the check (without the offline-model packages: the papers' real shapes with random weights) and writes
# report.md, report.json, nvidia-smi.txt and pip-freeze.txt into OUT. Exit status: the doctor's (0 every check
# passed, 3 one failed, 1 bad input). PYTHON (default python3) and WHEELHOUSE (default wheelhouse/) can be set.
# A rehearsal on a CPU under the same conditions: bash scripts/rehearse_gpu_check.sh.
set -euo pipefail
out=${1:?usage: bash scripts/gpu_check.sh OUT [doctor key=value ...]}
shift
root=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
wheels=${WHEELHOUSE:-$root/wheelhouse}
if ! compgen -G "$wheels/*.whl" > /dev/null; then
  echo "gpu_check: no wheels in $wheels (make wheelhouse writes them, on a machine with internet)" >&2
  exit 1
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
site=$(mktemp -d "${TMPDIR:-/tmp}/embexp-site.XXXXXX")
trap 'rm -rf "$site"' EXIT
start=$(date +%s)
"$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "$wheels"/*.whl
echo "gpu_check: $(ls "$wheels"/*.whl | wc -l) wheels ($(du -sh "$wheels" | cut -f1)) installed into $site in $(( $(date +%s) - start )) s"
export PYTHONPATH="$site:$root/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
"$py" -m pip list --format=freeze > "$out/pip-freeze.txt" 2>/dev/null || true
(nvidia-smi 2>&1 || echo "nvidia-smi: not found") > "$out/nvidia-smi.txt"
cd "$root"
set +e
"$py" -m embexp.doctor out="$out" progress=true "$@"
rc=$?
set -e
echo "gpu_check: exit $rc after $(( $(date +%s) - start )) s; report in $out"
exit $rc
