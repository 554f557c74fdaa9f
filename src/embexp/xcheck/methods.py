"""The module checks of ``python -m embexp.xcheck``: the helpers, the rows and Tiny-Attention (cindermond/tiny-attn)
against embexp's module (PETE, K-Token merging and PEMA: ``embexp.xcheck.embeddings``).

Nothing of the authors' is copied here except what cannot be imported: train_ada.py's averaging loop (inside
``train()``), repeated line for line. How their code runs (by file path, with the same weights, the shims of
what a newer transformers removed, 4.19.2's initialisation replayed) and the kinds of :class:`Row`: docs/xcheck.md.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import torch
from torch import nn

from embexp import EmbexpError


@dataclass
class Row:
    method: str
    what: str
    value: float  # the measured figure (``metric``); kind=count: the authors' count
    kind: str = "tol"  # tol: a max |Δ| or a count difference within tol | count: equal counts | choice: shown
    tol: float = 0.0
    ours: float | None = None  # kind=count: embexp's count
    note: str = ""
    metric: str = "max |Δ|"

    @property
    def ok(self) -> bool:
        if self.kind == "count":
            return self.value == self.ours
        return self.kind == "choice" or (math.isfinite(self.value) and self.value <= self.tol)

    @property
    def verdict(self) -> str:
        """ok / FAIL for a checked row; "choice" for a documented difference (never a failure)."""
        return "choice" if self.kind == "choice" else ("ok" if self.ok else "FAIL")


# ---- loading the authors' code -----------------------------------------------------------------------
class AuthorsCodeError(EmbexpError):
    """The authors' code cannot be loaded here (a missing package, no C++ compiler): one line, not a traceback."""


def _load(name: str, spec, where: Path):
    if name in sys.modules:
        return sys.modules[name]
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except ImportError as e:
        del sys.modules[name]
        raise AuthorsCodeError(f"importing the authors' {where} needs {e.name or e}: install it, or leave the "
                               "method out with only=") from e
    return mod


def load_package(name: str, folder: Path):
    """Import the package in ``folder`` under ``name`` (its own submodules import each other by that name)."""
    return _load(name, importlib.util.spec_from_file_location(name, folder / "__init__.py",
                                                              submodule_search_locations=[str(folder)]), folder)


def load_file(name: str, path: Path):
    """Import one module of the authors' from its file, under ``name``."""
    return _load(name, importlib.util.spec_from_file_location(name, path), path)


def _extended_attention_mask(self, attention_mask, input_shape, device=None):
    """transformers 4.19.2's ``ModuleUtilsMixin.get_extended_attention_mask`` for an encoder's 2D mask
    (modeling_utils.py L681-728: ``(1 - mask[:, None, None, :]) * -10000``), removed in 5.x."""
    ext = attention_mask[:, None, None, :].to(self.dtype)
    return (1.0 - ext) * -10000.0


def shim_transformers() -> None:
    """Put back what the authors import and the installed transformers removed."""
    import transformers.modeling_utils as mu
    import transformers.pytorch_utils as pu

    if not hasattr(mu, "apply_chunking_to_forward"):  # moved to pytorch_utils in 4.x, gone from modeling_utils in 5
        mu.apply_chunking_to_forward = pu.apply_chunking_to_forward
    if not hasattr(mu.PreTrainedModel, "get_extended_attention_mask"):
        mu.PreTrainedModel.get_extended_attention_mask = _extended_attention_mask


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.detach().double() - b.detach().double()).abs().max())


# ---- embexp side ---------------------------------------------------------------------------------------
def embexp_method(*overrides: str):
    """(config, backbone, method) as ``python -m embexp.train`` builds them, offline (``debug=smoke``), seed 0."""
    from embexp.core.cli import compose_train
    from embexp.methods import build_method
    from embexp.models import load_backbone

    cfg = compose_train(["debug=smoke", *overrides])
    torch.manual_seed(0)
    bb = load_backbone(cfg.model, num_labels=0 if cfg.model.kind == "decoder" else 2)
    return cfg, bb, build_method(cfg.method, bb)


# ---- Tiny-Attention (cindermond/tiny-attn) --------------------------------------------------------------
# the keyword arguments the authors' run scripts give their classes (train_ada.py / train_rewriter.py defaults)
TA_ARGS = dict(output_nlayers=0, is_rewriter=False, rewriter_nhead=4, rewriter_d_hid=512, rewriter_dropout=0.1,
               rewriter_nlayers=1, n_labels=2, attention_head=1)


def _ta_class(root: Path, name: str):
    shim_transformers()
    load_package("rewriter", root / "rewriter")
    return getattr(importlib.import_module(f"rewriter.model.{name}"), name)


def _ta_embexp(*args: str, seed: int = 1):
    """An embexp tinyattn method on tiny RoBERTa with every adapter tensor moved off its init (so all matter)."""
    cfg, bb, m = embexp_method("model=tiny_roberta", "method=tinyattn", "task=glue", "method.init_scale=1.0", *args)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for t in m.method_tensors().values():
            t.add_(torch.randn(t.shape, generator=g) * 0.3)
    return cfg, bb, m.eval()


def _ta_authors(root: Path, name: str, bb, D: int, **kw):
    """The authors' RobertaForSC / RobertaForSCAda with the embexp backbone's weights (eval mode)."""
    model = _ta_class(root, name)(bb.model.config, **TA_ARGS, attention_emd=D, **kw)
    missing, unexpected = model.roberta.load_state_dict(bb.model.roberta.state_dict(), strict=False)
    if unexpected or not all("tiny_attn" in k for k in missing):
        raise RuntimeError(f"the authors' {name} does not hold the tiny RoBERTa's weights: {unexpected or missing}")
    return model.eval()


@torch.no_grad()
def _ta_copy(model, m) -> None:
    """embexp's module k of layer i into the authors' TinyAttention k of layer i (RobertaForSCAda: 4 per layer)
    of ``model`` (without mha_proj: identity MHA projections)."""
    D = m.cfg.head_dim
    for i, layer in enumerate(model.roberta.encoder.layer):
        mods = layer.tiny_attn if isinstance(layer.tiny_attn, nn.ModuleList) else [layer.tiny_attn]
        for k, mod in enumerate(mods):
            pairs = ((mod.norm.weight, m.ln_weight), (mod.norm.bias, m.ln_bias), (mod.linear1.weight, m.qkv_weight),
                     (mod.linear1.bias, m.qkv_bias), (mod.linear2.weight, m.out_weight), (mod.linear2.bias, m.out_bias))
            for dst, src in pairs:
                dst.copy_(src[i, k])
            a = mod.attention
            if m.cfg.mha_proj:
                a.in_proj_weight.copy_(m.mha_in_weight[i, k].reshape(3 * D, D))
                a.in_proj_bias.copy_(m.mha_in_bias[i, k].reshape(3 * D))
                a.out_proj.weight.copy_(m.mha_out_weight[i, k])
                a.out_proj.bias.copy_(m.mha_out_bias[i, k])
            else:
                a.in_proj_weight.copy_(torch.eye(D).repeat(3, 1))
                a.in_proj_bias.zero_()
                a.out_proj.weight.copy_(torch.eye(D))
                a.out_proj.bias.zero_()


def _ta_diff(m, model, bb) -> float:
    """max |Δ| of the last hidden states (the encoder's output, before the head) of embexp's ``m`` and the authors'
    ``model`` on two rows of ``bb``'s ids."""
    from embexp.featurize import collate

    rows = [list(range(10, 21)), list(range(30, 37))]  # right-padded, as the authors' encoder batches
    batch = collate([{"input_ids": r} for r in rows], bb.tokenizer.pad_token_id, left=False)
    out = {}

    def keep(mod, args, output):  # returns None: the output stays as it is
        out["h"] = output[0]

    hook = m.backbone_model.base_model.encoder.register_forward_hook(keep)
    with torch.no_grad():
        m(**batch)
        theirs = model.roberta(batch["input_ids"], batch["attention_mask"])[0]
    hook.remove()
    return max_diff(out["h"], theirs)


def _ta_pair(root: Path, label: str, args: tuple, name: str, **kw) -> Row:
    _, bb, m = _ta_embexp(*args)
    model = _ta_authors(root, name, bb, m.cfg.head_dim, **kw)
    _ta_copy(model, m)
    return Row("Tiny-Attention", label, _ta_diff(m, model, bb), tol=1e-5,
               note=f"last hidden state, tiny RoBERTa, against the authors' {name}"
                    + (f" (structure={kw['structure']})" if kw else ""))


def ta_modules(root: Path) -> list[Row]:
    mha = "method.mha_proj=true"
    return [
        _ta_pair(root, "1H", (mha,), "RobertaForSC", structure="m0"),
        _ta_pair(root, "1H, mha_proj=false (embexp default)", (), "RobertaForSC", structure="m0"),
        _ta_pair(root, "1H4D", (mha, "method.head_dim=4"), "RobertaForSC", structure="m0"),
        _ta_pair(root, "4H sequential", (mha, "method.heads=4", "method.average=false"), "RobertaForSCAda"),
        _ta_pair(root, "1H parallel", (mha, "method.placement=parallel"), "RobertaForSC", structure="s0"),
    ]


def ta_counts(root: Path) -> list[Row]:
    """Adapter parameters (the head aside) of 1H and 4H with the authors' MHA, on tiny RoBERTa."""
    rows = []
    for label, args, name, heads in (("1H", (), "RobertaForSC", 1), ("4H", ("method.heads=4",), "RobertaForSCAda", 4)):
        _, bb, m = _ta_embexp("method.mha_proj=true", *args)
        kw = {"structure": "m0"} if heads == 1 else {}
        model = _ta_authors(root, name, bb, 1, **kw)
        theirs = sum(p.numel() for n, p in model.named_parameters() if "tiny_attn" in n)
        rows.append(Row("Tiny-Attention", f"{label} adapter parameters", float(theirs), kind="count",
                        ours=float(m.n_trainable(include_head=False)), metric="parameters",
                        note=f"tiny RoBERTa (d=64, 2 layers); the authors' {name} tiny_attn.* against "
                             "embexp's method tensors with method.mha_proj=true"))
    return rows


@torch.no_grad()
def _ta_average_as_train_ada(model, model_temp) -> None:
    """The authors' evaluation of the averaged 4H model, rewriter/run/train_ada.py @03eee7e L173-184 (inside
    ``train()``, so not importable): every Linear and MHA tensor of ``model_temp`` (the 1H model loaded from the
    warm-start checkpoint) becomes the mean of the 4 modules; its LayerNorm and classifier are not touched."""
    from torch.nn.parameter import Parameter

    for lay, ref in zip(model.roberta.encoder.layer, model_temp.roberta.encoder.layer):
        t = lay.tiny_attn
        for path in ("linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias", "attention.in_proj_weight",
                     "attention.in_proj_bias", "attention.out_proj.weight", "attention.out_proj.bias"):
            mod_path, leaf = path.rsplit(".", 1)
            dst = ref.tiny_attn.get_submodule(mod_path)
            parts = [getattr(t[k].get_submodule(mod_path), leaf) for k in range(4)]
            setattr(dst, leaf, Parameter((parts[0] + parts[1] + parts[2] + parts[3]) / 4))


def ta_averaged(root: Path) -> list[Row]:
    """The averaged 4H model against the authors' (a 1H model with the 4 modules' mean, LayerNorm kept from the
    1H checkpoint): embexp's method.average_norm=init_from equals it, the default (mean of every tensor) is a
    documented choice."""
    from embexp.run.adapter import save_adapter

    mha = "method.mha_proj=true"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cfg1, bb1, one = _ta_embexp(mha, seed=3)
        save_adapter(cfg1, SimpleNamespace(method=one, backbone=bb1), Path(tmp))  # the run that init_from reads
        for norm in ("init_from", "mean"):
            _, bb, four = _ta_embexp(mha, "method.heads=4", f"method.init_from={tmp}", f"method.average_norm={norm}")
            ada = _ta_authors(root, "RobertaForSCAda", bb, 1)
            temp = _ta_authors(root, "RobertaForSC", bb, 1, structure="m0")
            _ta_copy(temp, one)  # model_temp.load_state_dict(1H checkpoint)
            _ta_copy(ada, four)
            _ta_average_as_train_ada(ada, temp)
            diff = _ta_diff(four, temp, bb)
            note = ("last hidden state of the averaged model (eval), against train_ada.py's averaged model_temp; "
                    "4 modules that differ (LayerNorm included)")
            if norm == "init_from":
                rows.append(Row("Tiny-Attention", "4H averaged, method.average_norm=init_from", diff, tol=1e-5,
                                note=note))
            else:
                rows.append(Row("Tiny-Attention", "4H averaged, average_norm=mean (default): LayerNorm averaged too",
                                diff, kind="choice", note=note + "; the paper averages every parameter (App. A)"))
    return rows


# transformers 4.19.2's from_pretrained (the authors' pin; docs/xcheck.md), its modeling_utils.py: no_init_weights()
# L2020-2024, then _init_weights on every module with a key the checkpoint lacks L2147-2153
# (retrieve_modules_from_names L2291-2310).
def _init_weights_419(module: nn.Module, std: float) -> None:
    """RobertaPreTrainedModel._init_weights, transformers 4.19.2 modeling_roberta.py L592-606."""
    if isinstance(module, nn.Linear):
        module.weight.data.normal_(mean=0.0, std=std)
        if module.bias is not None:
            module.bias.data.zero_()
    elif isinstance(module, nn.Embedding):
        module.weight.data.normal_(mean=0.0, std=std)
        if module.padding_idx is not None:
            module.weight.data[module.padding_idx].zero_()
    elif isinstance(module, nn.LayerNorm):
        module.bias.data.zero_()
        module.weight.data.fill_(1.0)


def from_pretrained_419(cls, bb, D: int, seed: int = 0, **kw):
    """The authors' ``cls.from_pretrained(<the tiny RoBERTa>)`` under transformers 4.19.2: (model right after
    ``__init__``, model after the fast init of the missing modules)."""
    import copy

    import transformers.modeling_utils as mu

    saved = mu.PreTrainedModel.initialize_weights  # what 5.x's post_init runs; no_init_weights() skipped 4.19.2's
    mu.PreTrainedModel.initialize_weights = lambda self: None
    try:
        torch.manual_seed(seed)
        model = cls(bb.model.config, **TA_ARGS, attention_emd=D, **kw)
    finally:
        mu.PreTrainedModel.initialize_weights = saved
    fresh = copy.deepcopy(model)
    loaded = {f"roberta.{k}" for k in bb.model.roberta.state_dict()}
    model.roberta.load_state_dict(bb.model.roberta.state_dict(), strict=False)
    missing = [k for k in model.state_dict() if k not in loaded and "position_ids" not in k]
    module_keys = {".".join(k.split(".")[:-1]) for k in missing}
    for name, module in model.named_modules():
        if name in module_keys:
            _init_weights_419(module, bb.model.config.initializer_range)
    return fresh, model


def _adapter_stats(tensors: list[torch.Tensor]) -> tuple[float, float]:
    """(std of the weights, max |bias|) over [(weight, bias), ...] pairs."""
    w = torch.cat([t.detach().flatten() for t in tensors[0::2]])
    b = torch.cat([t.detach().flatten() for t in tensors[1::2]])
    return float(w.std()), float(b.abs().max())


def ta_init(root: Path) -> list[Row]:
    """How the modules start: the authors' __init__ (linear2 x0.01) against what their from_pretrained leaves
    (4.19.2: N(0, initializer_range) Linears, zero biases), and embexp's method.init=paper|normal."""
    D = 4  # more weights for the statistics (the same init rules as D=1)
    cls = _ta_class(root, "RobertaForSC")
    args = ("model=tiny_roberta", "method=tinyattn", "task=glue", f"method.head_dim={D}", "method.mha_proj=true")
    _, bb, paper = embexp_method(*args)
    _, _, normal = embexp_method(*args, "method.init=normal")
    fresh, loaded = from_pretrained_419(cls, bb, D, structure="m0")

    def authors(model, names):
        return [getattr(lay.tiny_attn.get_submodule(n), a) for lay in model.roberta.encoder.layer for n in names
                for a in ("weight", "bias")]

    lin2_init = max(float(t.detach().abs().max()) for t in authors(fresh, ["linear2"]))
    bound = 0.01 / math.sqrt(D)
    lin2_paper = max(float(paper.out_weight.detach().abs().max()), float(paper.out_bias.detach().abs().max()))
    rows = [Row("Tiny-Attention", "init=paper (default): linear2 as the authors' __init__ leaves it",
                max(lin2_init, lin2_paper),
                kind="tol", tol=bound, metric="max |linear2|",
                note=f"the authors' __init__ (x0.01): max |w|, |b| {lin2_init:.2e}; embexp init=paper "
                     f"{lin2_paper:.2e}; both within U(+-0.01/sqrt(D)) = {bound:.2e} (D={D})")]
    names = ["linear1", "linear2", "attention.out_proj"]
    std_a, bias_a = _adapter_stats(authors(loaded, names))
    std_e, bias_e = _adapter_stats([normal.qkv_weight, normal.qkv_bias, normal.out_weight, normal.out_bias,
                                    normal.mha_out_weight, normal.mha_out_bias])
    std = bb.model.config.initializer_range
    rows.append(Row("Tiny-Attention", "init=normal: the Linears as the authors' from_pretrained (4.19.2) leaves them",
                    abs(std_a - std_e), tol=0.1 * std, metric="|Δ std|",
                    note=f"weight std authors {std_a:.4f}, embexp {std_e:.4f} (initializer_range {std}); max |bias| "
                         f"authors {bias_a:g}, embexp {bias_e:g}; linear1, linear2, MHA out_proj; tolerance: 10% "
                         "of the std (independent draws)"))
    std_p, _ = _adapter_stats([paper.out_weight, paper.out_bias])
    std_a2, _ = _adapter_stats(authors(loaded, ["linear2"]))
    rows.append(Row("Tiny-Attention", "init=paper (default) against the authors' code as it runs", abs(std_a2 - std_p),
                    kind="choice", metric="|Δ std|",
                    note=f"linear2 weight std: authors after from_pretrained {std_a2:.4f}, embexp init=paper "
                         f"{std_p:.4f}: from_pretrained re-draws the x0.01 output projection; embexp follows the "
                         "paper's text (init=normal is the code as it runs)"))
    if bias_a != 0 or bias_e != 0:
        rows.append(Row("Tiny-Attention", "init=normal biases", max(bias_a, bias_e), tol=0.0))
    return rows


def ta_all(root: Path) -> list[Row]:
    return ta_modules(root) + ta_averaged(root) + ta_init(root) + ta_counts(root)
