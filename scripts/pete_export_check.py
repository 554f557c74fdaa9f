"""Check a finished run's export against the run itself: ``python scripts/pete_export_check.py RUN_DIR [N]``.

Rebuilds the trained method from RUN_DIR (config.yaml + adapter.safetensors, as embexp.eval does),
embeds the first N STS-B validation sentences of the run's eval split with it, embeds them again
with RUN_DIR/export loaded by plain transformers in a fresh process that never imports embexp
(AutoModel + AutoTokenizer, masked mean pooling), and prints the largest absolute difference.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

import conftest  # noqa: E402,F401  (registers the schemas; offline environment)
from embexp.pipeline import build  # noqa: E402
from embexp.sentence import embed_texts  # noqa: E402

PLAIN = r"""
import json, sys, torch
from transformers import AutoModel, AutoTokenizer
path, max_len = sys.argv[1], int(sys.argv[2])
texts = json.loads(sys.stdin.read())
tok, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()
out = []
for i in range(0, len(texts), 16):
    enc = tok(texts[i:i + 16], padding=True, truncation=True, max_length=max_len, return_tensors="pt")
    with torch.no_grad():
        h = model(**enc).last_hidden_state
    m = enc["attention_mask"].unsqueeze(-1).float()
    out += ((h * m).sum(1) / m.sum(1)).tolist()
assert "embexp" not in sys.modules
print(json.dumps(out))
"""


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: python scripts/pete_export_check.py RUN_DIR [N]")
    run, n = Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 64
    if not (run / "export" / "config.json").is_file():
        sys.exit(f"embexp: error: {run} has no export/ (train with export=true)")
    cfg = OmegaConf.load(run / "config.yaml")
    c = build(cfg, torch.device("cpu"))
    c.method.load_trainable_state(load_file(run / "adapter.safetensors"))
    texts = [t for ex in c.task.examples("eval")[:n] for t in ex.text][:n]
    want = embed_texts(c.method, c.featurizer, texts, 16, "cpu")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, "-c", PLAIN, str(run / "export"), str(c.featurizer.max_source_tokens)],
                       input=json.dumps(texts), capture_output=True, text=True, env=env, check=True)
    got = torch.tensor(json.loads(r.stdout.strip().splitlines()[-1]))
    print(f"{len(texts)} sentences, embedding dim {got.shape[1]}: largest |export - trained| = {(got - want).abs().max().item():.2e}")


if __name__ == "__main__":
    main()
