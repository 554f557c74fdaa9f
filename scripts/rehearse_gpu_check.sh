#!/usr/bin/env bash
# A rehearsal of the prepared GPU check on this CPU, under the GPU node's conditions: a fresh venv
# holding only the PyTorch GPU image's packages, embexp's other needs from a wheelhouse through pip --no-index,
# no hub cache, and the papers' shapes shrunk so that a CPU runs them in about two minutes.
#
#   bash scripts/rehearse_gpu_check.sh OUT        (tests/test_gpu_check_script.py runs it: make test-slow)
#
# Needs PyPI once, for the image venv (kept in REHEARSAL_VENV, default ~/.cache/embexp/image-venv; FRESH=1
# makes it anew) and for the wheelhouse (REHEARSAL_WHEELS, default ~/.cache/embexp/rehearsal-wheels).
set -euo pipefail
out=${1:?usage: bash scripts/rehearse_gpu_check.sh OUT}
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${REHEARSAL_VENV:-$HOME/.cache/embexp/image-venv}
wheels=${REHEARSAL_WHEELS:-$HOME/.cache/embexp/rehearsal-wheels}
torch=${TORCH:-torch==2.13.0}
# the versions this project's GPU machines' image was seen with (2026-11); IMAGE_PINS= takes the newest
pins=${IMAGE_PINS-transformers==5.17.0 accelerate==1.15.0 tokenizers==0.23.2 huggingface_hub==1.33.0 safetensors==0.8.0}
if [[ -n "${FRESH:-}" || ! -x "$venv/bin/python" ]]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "$torch"
  "$venv/bin/pip" install -q transformers accelerate peft numpy scipy scikit-learn pandas pyarrow matplotlib \
    safetensors tokenizers sentencepiece sacrebleu tqdm pyyaml $pins
fi
if "$venv/bin/python" -c "import omegaconf" 2>/dev/null; then
  echo "rehearse: $venv holds omegaconf: not the image's package list (FRESH=1 makes it anew)" >&2
  exit 1
fi
pyver=$("$venv/bin/python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
rm -rf "$wheels"
"$venv/bin/python" "$root/scripts/wheelhouse.py" --out "$wheels" --python-version "$pyver"
# the node: no hub cache, no network for the hub, the wheelhouse only
export HF_HOME=$(mktemp -d) EMBEXP_CACHE=$(mktemp -d)
shrink='spec={num_hidden_layers: 2, hidden_size: 64, intermediate_size: 128, num_attention_heads: 4, num_key_value_heads: 2}'
PYTHON="$venv/bin/python" WHEELHOUSE="$wheels" bash "$root/scripts/gpu_check.sh" "$out" device=cpu reduced=false \
  weights=random "$shrink" batch_size=2 seq_len=32 steps=2 repeats=1 gen_tokens=4 "${@:2}"
