"""Tiny-Attention adapters (Zhao et al., "Tiny-Attention Adapter").

In every layer, between the attention sublayer and the FFN, M independent modules

    LayerNorm(d) -> Linear(d, 3D) -> q, k, v -> softmax(q k^T / sqrt(D)) v -> Linear(D, d)

change the hidden state, placed through ``models.after_attention`` (extension point 2). Parameters
are stored stacked, ``[L, M, ...]`` (L = module sets, M = modules per layer), so a layer's M
modules run as one batched computation. How the modules combine, their placement, masks, the KV
cache, parameter averaging and the warm start, with what is ours: docs/methods_tinyattn.md.
"""

from __future__ import annotations

import inspect
import json
import math
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from embexp import EmbexpError
from embexp.core.config import option
from embexp.methods.base import Comparison, Method, MethodConfig
from embexp.methods.registry import register_method
from embexp.models import after_attention, attention_sites

PLACEMENTS = ("sequential", "parallel")
LAYER_MODULES = ("shared", "per_depth")
COMBINES = ("sequential", "paper", "mean")
INITS = ("paper", "normal")
AVERAGE_NORMS = ("mean", "init_from")
# name -> shape after [L, M]; "mha_*" only with mha_proj=true (the authors' nn.MultiheadAttention)
TENSORS = ("ln_weight", "ln_bias", "qkv_weight", "qkv_bias", "out_weight", "out_bias")
MHA_TENSORS = ("mha_in_weight", "mha_in_bias", "mha_out_weight", "mha_out_bias")


@dataclass
class TinyAttnConfig(MethodConfig):
    heads: int = option(1, "M: independent tiny-attention modules per layer, combined as method.combine says (paper: 1 "
                        "= Tiny-Attn-1H, 4 = Tiny-Attn-4H).", ge=1)
    combine: str = option("sequential", "How a layer's M modules combine (M > 1). sequential (authors' code, "
                          "RobertaLayerAda; the tables' setting): one after another, h = h + t_m(h)/M, each module "
                          "reading the state the modules before it changed. paper: the paper's Eq. 1a/2, every module "
                          "reads the same state and their outputs are summed through one output projection, sum_m (O_m "
                          "z_m + b_m); parameter averaging then keeps the mean of the attention parameters and the SUM "
                          "of the output projections (App. A, Eq. 8: M times the mean), and a warm start from a "
                          "1-module run divides its output projection by M (ours: the M-module model starts as the "
                          "1-module one). mean: every module reads the same state, the mean of their outputs (ours; "
                          "embexp's earlier combination). The three agree for M = 1.", choices=COMBINES)
    head_dim: int = option(1, "D: per-head dimension of each module's query, key and value (paper: 1; 4 = "
                              "Tiny-Attn-1H4D).", ge=1)
    placement: str = option("sequential", "sequential: the modules read the hidden state after the attention sublayer "
                            "(paper's main setting); parallel: they read the layer's input, in parallel with the "
                            "attention sublayer (paper's Fig. 3). Either way their output is added after the attention "
                            "sublayer, before the FFN (for parallel on post-norm encoders that is after the sublayer's "
                            "LayerNorm: ours).", choices=PLACEMENTS)
    layer_modules: str = option("shared", "Where one layer module runs at several depths (ALBERT's shared layer, "
                                "called num_hidden_layers times): shared = one adapter module set inside that layer, "
                                "used at every depth, as the authors' ALBERT code (AlbertLayerBL) has it; per_depth = "
                                "a separate module set per depth (num_hidden_layers times the parameters; ours). Every "
                                "other family runs each layer once, where the two are the same.", choices=LAYER_MODULES)
    init_scale: float = option(0.01, "init=paper: the output projection Linear(D, d) starts at PyTorch's default init "
                               "times this (the paper: 0.01, i.e. U(-0.01/sqrt(D), 0.01/sqrt(D)) for weight and bias; "
                               "the authors' __init__ multiplies by 0.01 too, which their from_pretrained then undoes: "
                               "init=normal); 0 makes the method an exact identity at start.", ge=0)
    init: str = option(
        "paper", "How the modules start. paper: Linear(d, 3D), Linear(D, d) and the LayerNorm as torch "
        "initialises them, the output projection times init_scale (the paper's text; the authors' __init__ "
        "has the same x0.01). normal: as the authors' code runs: their from_pretrained (transformers "
        "4.19.2) re-initialises every module missing from the checkpoint with the backbone's _init_weights, "
        "which undoes the x0.01: both Linears (and with mha_proj the MHA out-projection) N(0, "
        "initializer_range) (0.02 on RoBERTa), biases 0 (docs/xcheck.md).", choices=INITS)
    dropout: float = option(0.1, "Dropout on the adapter's attention probabilities while training (authors' code: "
                            "nn.MultiheadAttention dropout 0.1; the paper does not say).", ge=0, lt=1)
    layer_norm_eps: float = option(
        1e-5, "eps of the adapter's LayerNorm (authors' code: nn.LayerNorm default 1e-5).", gt=0)
    mha_proj: bool = option(False, "Also give each module the extra in/out projections of torch's "
                            "nn.MultiheadAttention inside it (3D^2+3D + D^2+D parameters), as the authors' code does; "
                            "false = without them (the rest of the module, LayerNorm and biases included, is the "
                            "authors' code; the paper's Eq. 3-4 have neither LayerNorm nor biases).")
    average: bool = option(True, "Parameter averaging (paper §2.2): evaluate and save the mean of the M modules of "
                           "each layer as one module (combine=paper: the output projections summed, App. A Eq. 8); "
                           "false keeps the M modules (paper Table 11 ablation).")
    init_from: str = option("", "Warm start (paper App. B.1, Tiny-Attn-4H): a finished tinyattn run directory on the "
                            "same model whose adapter has 1 module per layer (or M): every module starts from it plus "
                            "N(0, init_noise^2) noise, the encoder head is copied unchanged (ours). '' = fresh init.")
    average_norm: str = option(
        "mean", "The LayerNorm of the averaged model (average=true, M > 1). mean: the mean of the M "
        "modules' LayerNorms, as every other tensor (the paper averages all parameters). init_from: "
        "the warm-start run's LayerNorm (method.init_from, without the noise), as the authors' "
        "train_ada.py evaluates its averaged model, a copy of the 1H model whose LayerNorm (and "
        "head: not reproduced) stay the 1H checkpoint's (docs/xcheck.md).", choices=AVERAGE_NORMS)
    init_noise: float = option(1e-6, "Std of the noise added to each copied adapter tensor on warm start (paper: 1e-6; "
                               "the authors' code perturbs only Linear(d, 3D)).", ge=0)
    train_backbone: list = option([], "Backbone parameters trained as well, each given by its name in the transformers "
                                  "model's named_parameters() or a prefix of it ending at a dot boundary. [] (default) "
                                  "= the backbone stays frozen, as the paper says ('pretrained parameters are all kept "
                                  "frozen'). The authors' FewGLUE script (train_few_shot.py) freezes only ALBERT's "
                                  "embeddings and its shared layer, so it also trains "
                                  "[albert.encoder.embedding_hidden_mapping_in, predictions.dense, "
                                  "predictions.LayerNorm, predictions.bias] (the Table 1 experiment files use that "
                                  "list). Saved with the adapter as backbone.<name>.")
    frozen_dropout: bool = option(False, "Keep the frozen backbone's own dropout active while training. false "
                                  "(authors' code): the backbone runs in eval mode; the adapters' attention dropout "
                                  "and the encoder head's dropout stay active.")


@register_method("tinyattn")
class TinyAttention(Method):
    """Tiny-Attention: M tiny attention modules between the attention sublayer and the FFN of every
    layer (see the module doc). Near the identity at init (the output projection starts at x0.01;
    exact with method.init_scale=0); no plain model holds the modules."""

    Config = TinyAttnConfig
    label = "Tiny-Attention"
    identity_at_init = False  # method.init_scale=0.01 (the default): near, not exact
    comparison = Comparison(rank=70, lr=1e-3)
    export_blocker = ("Tiny-Attention adds attention modules inside every layer, which a plain transformers model "
                      "of the same class does not have")

    @classmethod
    def check_run(cls, cfg) -> None:
        """method.average_norm=init_from needs a warm start; method.init_from names a finished run of this method on
        this model with the same head_dim, mha_proj and placement (its method.json)."""
        super().check_run(cfg)
        m = cfg.method
        if m.average_norm == "init_from" and not m.init_from:
            raise EmbexpError("method.average_norm=init_from takes the averaged model's LayerNorm from the warm-start "
                              "run: set method.init_from=<run_dir> (or method.average_norm=mean)")
        if not m.init_from:
            return
        run_dir = Path(m.init_from)
        if not (run_dir / "method.json").is_file() or not (run_dir / "adapter.safetensors").is_file():
            raise EmbexpError(f"method.init_from='{run_dir}' is not a finished run with a saved adapter "
                              "(needs method.json and adapter.safetensors)")
        meta = json.loads((run_dir / "method.json").read_text())
        for what, got, want in (("method", meta.get("method", {}).get("name"), m.name),
                                ("model", meta.get("model"), cfg.model.name)):
            if got != want:
                raise EmbexpError(f"method.init_from='{run_dir}' is a run of {what} '{got}', not {want}")
        for key in ("head_dim", "mha_proj", "placement"):
            if meta["method"].get(key) != m[key]:
                raise EmbexpError(f"method.init_from='{run_dir}' was trained with method.{key}="
                                  f"{meta['method'].get(key)}, this run has {m[key]}")

    def __init__(self, cfg, backbone):
        super().__init__(cfg, backbone)
        self.d = backbone.hidden_size
        sites = attention_sites(self.backbone_model)[2]
        if cfg.layer_modules == "shared":  # one module set per distinct layer module (ALBERT: one for all depths)
            slot_of: dict[int, int] = {}
            self._slot = [slot_of.setdefault(id(s), len(slot_of)) for s in sites]
        else:
            self._slot = list(range(len(sites)))
        self.n_layers = max(self._slot) + 1  # module sets stored (the L axis of every tensor)
        self._new_tensors(cfg.heads)
        self._reset_parameters()
        self._extra = self._backbone_tensors(list(cfg.train_backbone or []))
        if cfg.init_from:
            self._warm_start(Path(cfg.init_from))
        self._ctx = None  # masks of the current backbone call (set by the entry pre-hook)
        self._kv: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # layer -> cached keys, values (generation)
        self._params_of_forward = None
        self._sig = inspect.signature(self.backbone_model.forward)
        self._hooks = [self.backbone_model.register_forward_pre_hook(self._enter, with_kwargs=True)]
        self._hooks += after_attention(self.backbone_model, self._delta)
        self.train(self.backbone_model.training)  # a new module trains by default; follow the backbone (eval)
        self.mark_trainable()

    # ---- parameters ----------------------------------------------------------------------------
    def _shapes(self, m: int) -> dict[str, tuple]:
        L, d, D = self.n_layers, self.d, self.cfg.head_dim
        s = {"ln_weight": (L, m, d), "ln_bias": (L, m, d), "qkv_weight": (L, m, 3 * D, d), "qkv_bias": (L, m, 3 * D),
             "out_weight": (L, m, d, D), "out_bias": (L, m, d)}
        if self.cfg.mha_proj:
            s.update({"mha_in_weight": (L, m, 3, D, D), "mha_in_bias": (L, m, 3, D), "mha_out_weight": (L, m, D, D),
                      "mha_out_bias": (L, m, D)})
        return s

    def _new_tensors(self, m: int) -> None:
        for name, shape in self._shapes(m).items():
            setattr(self, name, nn.Parameter(torch.zeros(shape, dtype=torch.float32)))

    @torch.no_grad()
    def _reset_parameters(self) -> None:
        """Each module as torch initialises nn.LayerNorm / nn.Linear (uniform +-1/sqrt(fan_in),
        weight and bias), the output projection times ``init_scale`` (the authors' x0.01). These
        tensors live outside the backbone, so its weight init never touches them."""
        d, D = self.d, self.cfg.head_dim
        self.ln_weight.fill_(1.0)
        self.ln_bias.zero_()
        for t, fan_in, scale in ((self.qkv_weight, d, 1.0), (self.qkv_bias, d, 1.0),
                                 (self.out_weight, D, self.cfg.init_scale), (self.out_bias, D, self.cfg.init_scale)):
            bound = 1.0 / math.sqrt(fan_in)
            t.uniform_(-bound, bound).mul_(scale)
        if self.cfg.mha_proj:  # nn.MultiheadAttention._reset_parameters: xavier in_proj, zero biases
            bound = math.sqrt(6.0 / (D + 3 * D))
            self.mha_in_weight.uniform_(-bound, bound)
            self.mha_in_bias.zero_()
            self.mha_out_weight.uniform_(-1.0 / math.sqrt(D), 1.0 / math.sqrt(D))
            self.mha_out_bias.zero_()
        if self.cfg.init == "normal":  # transformers' _init_weights on the Linears from_pretrained found missing
            std = float(getattr(self.backbone_model.config, "initializer_range", 0.02))
            for n in ("qkv", "out") + (("mha_out",) if self.cfg.mha_proj else ()):
                getattr(self, f"{n}_weight").normal_(0.0, std)
                getattr(self, f"{n}_bias").zero_()

    def _backbone_tensors(self, names: list[str]) -> dict[str, nn.Parameter]:
        """method.train_backbone: the named backbone parameters (exact names or dotted prefixes)."""
        params = dict(self.backbone_model.named_parameters())  # tied tensors appear once, under their first name
        out = {}
        for want in names:
            hit = {n: p for n, p in params.items() if n == want or n.startswith(want + ".")}
            if not hit:
                tops = sorted({n.split(".")[0] for n in params})
                raise EmbexpError(f"method.train_backbone: '{want}' names no parameter of this "
                                  f"{type(self.backbone_model).__name__} "
                                  f"(its top-level modules: {', '.join(tops)}; e.g. {next(iter(params))})")
            out.update(hit)
        return out

    def trainable_tensors(self) -> dict[str, nn.Parameter]:
        out = super().trainable_tensors()
        out.update({f"backbone.{n}": p for n, p in self._extra.items()})
        return out

    def tensor_names(self) -> tuple[str, ...]:
        return TENSORS + (MHA_TENSORS if self.cfg.mha_proj else ())

    def method_tensors(self):
        return {n: getattr(self, n) for n in self.tensor_names()}

    @property
    def modules_per_layer(self) -> int:
        return self.ln_weight.shape[1]

    def _weights(self) -> dict[str, torch.Tensor]:
        """The tensors a forward uses: in evaluation with ``average=true``, the mean over the M axis."""
        w = self.method_tensors()
        if self.cfg.average and not self.training and self.modules_per_layer > 1:
            return {n: self._collapse(n, t) for n, t in w.items()}
        return w

    def _collapse(self, name: str, t: torch.Tensor) -> torch.Tensor:
        """Parameter averaging of one tensor over the M axis: the mean (paper Eq. 5, the authors'
        code); with combine=paper the output projection is summed instead (Eq. 6-8: M times the mean)."""
        if self.cfg.combine == "paper" and name in ("out_weight", "out_bias"):
            return t.sum(dim=1, keepdim=True)
        if self.cfg.average_norm == "init_from" and name in ("ln_weight", "ln_bias"):
            return getattr(self, f"init_{name}").to(t.dtype)  # the warm-start run's LayerNorm (the authors')
        return t.mean(dim=1, keepdim=True)

    @torch.no_grad()
    def average_modules(self) -> None:
        """Replace the M modules of each layer by their parameter mean (one module per layer)."""
        for n in self.tensor_names():
            t = getattr(self, n)
            setattr(self, n, nn.Parameter(self._collapse(n, t).contiguous(), requires_grad=t.requires_grad))

    def finalize(self) -> None:
        if self.cfg.average and self.modules_per_layer > 1:
            self.average_modules()

    def load_trainable_state(self, state: dict[str, torch.Tensor]) -> None:
        saved_m = state["ln_weight"].shape[1] if "ln_weight" in state and state["ln_weight"].dim() == 3 else None
        if saved_m == 1 and self.modules_per_layer > 1:
            if not self.cfg.average:
                raise EmbexpError("the adapter holds averaged modules (1 per layer) but method.average=false asks for "
                                  f"the {self.modules_per_layer}-module model")
            self.average_modules()
        super().load_trainable_state(state)

    def log_values(self) -> dict[str, float]:
        per_module = sum(math.prod(s[2:]) for s in self._shapes(1).values()) * self.n_layers
        return {"modules_per_layer": float(self.modules_per_layer), "params_per_module_set": float(per_module)}

    # ---- warm start ----------------------------------------------------------------------------
    def _warm_start(self, run_dir: Path) -> None:
        from safetensors.torch import load_file

        state = load_file(run_dir / "adapter.safetensors")  # its method.json: checked by check_run
        m = self.modules_per_layer
        src_m = state["ln_weight"].shape[1]
        if src_m not in (1, m):
            raise EmbexpError(f"method.init_from='{run_dir}' has {src_m} modules per layer; warm start needs 1 or {m}")
        for n in ("ln_weight", "ln_bias"):  # average_norm=init_from: [L, 1, d], the run's own (mean of its modules)
            self.register_buffer(f"init_{n}", state[n].float().mean(1, keepdim=True), persistent=False)
        g = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for n in self.tensor_names():
                src, own = state[n], getattr(self, n)
                if src.shape[0] != own.shape[0] or src.shape[2:] != own.shape[2:]:
                    raise EmbexpError(f"method.init_from='{run_dir}': tensor {n} has shape {tuple(src.shape)}, "
                                      f"expected {(own.shape[0], src_m, *own.shape[2:])}")
                noise = torch.randn(own.shape, generator=g) * self.cfg.init_noise
                src = src.to(own.dtype)
                if self.cfg.combine == "paper" and src_m == 1 and n in ("out_weight", "out_bias"):
                    src = src / m  # undo Eq. 8's sum: the M summed modules start as the 1-module model
                own.copy_(src.expand_as(own) + noise)
            for n, p in self._head.items():
                key = f"head.{n}"
                if key not in state or state[key].shape != p.shape:
                    raise EmbexpError(f"method.init_from='{run_dir}': its task head does not match this task's "
                                      f"({key} missing or of another shape)")
                p.copy_(state[key].to(p.device, p.dtype))
            for n, p in self._extra.items():  # method.train_backbone: copied unchanged, like the head
                key = f"backbone.{n}"
                if key not in state or state[key].shape != p.shape:
                    raise EmbexpError(f"method.init_from='{run_dir}': it did not train backbone tensor {n} "
                                      "(method.train_backbone differs)")
                p.copy_(state[key].to(p.device, p.dtype))

    # ---- forward -------------------------------------------------------------------------------
    def train(self, mode: bool = True):
        super().train(mode)
        if mode and not self.cfg.frozen_dropout:
            self.backbone_model.base_model.eval()  # the frozen layers without dropout (head keeps its own)
        return self

    def _enter(self, module, args, kwargs):
        """Pre-hook on the transformers model: the masks of this call, from its 2D attention mask."""
        bound = self._sig.bind_partial(*args, **kwargs).arguments
        extra = bound.get("kwargs", {})
        get = lambda k: bound.get(k, extra.get(k))  # noqa: E731
        x = get("input_ids")
        x = get("inputs_embeds") if x is None else x
        b, t = x.shape[0], x.shape[1]
        # the KV cache: `cache` from transformers 5.24 on, `past_key_values` before (still accepted, renamed)
        cache = (get("cache") if get("cache") is not None else get("past_key_values")) if self.is_decoder else None
        past = int(cache.get_seq_length()) if cache is not None and hasattr(cache, "get_seq_length") else 0
        mask = get("attention_mask")
        dev = x.device
        if mask is None:
            keys = torch.ones(b, past + t, dtype=torch.bool, device=dev)
        elif mask.dim() == 2 and mask.shape == (b, past + t):
            keys = mask.to(dev).bool()
        else:
            raise EmbexpError(f"method {self.cfg.name} needs a 2D attention mask [batch, past + new tokens] = "
                              f"[{b}, {past + t}] at the model's entry; got shape {tuple(mask.shape)}")
        allowed = keys[:, None, None, :]  # [B, 1, 1, S]
        if self.is_decoder:
            q_pos = past + torch.arange(t, device=dev)
            allowed = allowed & (torch.arange(past + t, device=dev)[None, :] <= q_pos[:, None])
        if past == 0:
            self._kv = {}
        self._ctx = {"allowed": allowed, "past": past,
                     "store": self.is_decoder and cache is not None and not torch.is_grad_enabled()}
        self._params_of_forward = self._weights()

    def _delta(self, h: torch.Tensor, call) -> torch.Tensor:
        ctx, w, call_i = self._ctx, self._params_of_forward, call.index
        i = self._slot[call_i]  # the module set of this layer call
        if ctx is None or w is None:
            raise EmbexpError(f"method {self.cfg.name}: a layer ran without the model's forward (call the model, not "
                              "its layers)")
        x = (call.layer_input if self.cfg.placement == "parallel" else h).float()
        b, t, d = x.shape
        D, m = self.cfg.head_dim, w["ln_weight"].shape[1]
        past, cached = ctx["past"], None
        if past:
            cached = self._kv.get(call_i)
            if cached is not None and cached[0].shape[2] > past and cached[0].shape[0] == b:
                cached = (cached[0][:, :, :past], cached[1][:, :, :past])  # the backbone's cache was cropped back
            if cached is None or cached[0].shape[2] != past or cached[0].shape[0] != b:
                have = None if cached is None else tuple(cached[0].shape)
                raise EmbexpError(f"method {self.cfg.name}: the backbone continues a KV cache of {past} positions that "
                                  f"the adapter did not see (layer {call_i}: cached {have}); beam search and cache "
                                  "reordering are not supported")
        if self.cfg.combine == "sequential" and m > 1:
            # the authors' RobertaLayerAda: for t in modules: h = h + t(h) / M, each module reading the state
            # the modules before it changed
            delta, ks, vs = 0.0, [], []
            for j in range(m):
                sel = slice(j, j + 1)
                o, k, v = self._attend(x + delta, w, i, sel,
                                       None if cached is None else (cached[0][:, sel], cached[1][:, sel]))
                wo = w["out_weight"][i, j]  # [d, D]
                delta = delta + F.linear(o[:, 0], wo, w["out_bias"][i, j]) / m
                ks.append(k), vs.append(v)
            k, v = torch.cat(ks, 1), torch.cat(vs, 1)
        else:
            o, k, v = self._attend(x, w, i, slice(None), cached)
            # mean: (1/M) sum_m (O_m o_m + b_m); paper (Eq. 1a/2): sum_m (O_m o_m + b_m), i.e. O [o_1; ...; o_M]
            # with the bias sum_m b_m. Either way one [M·D -> d] matmul
            scale = 1.0 / m if self.cfg.combine == "mean" else 1.0
            wo = w["out_weight"][i].permute(1, 0, 2).reshape(d, m * D) * scale
            delta = F.linear(o.permute(0, 2, 1, 3).reshape(b, t, m * D), wo, w["out_bias"][i].sum(0) * scale)
        if ctx["store"]:
            self._kv[call_i] = (k, v)
        return delta

    def _attend(self, x: torch.Tensor, w: dict, i: int, sel: slice, cached):
        """Modules ``sel`` of module set ``i`` on the states x [B, T, d]: their attention outputs
        [B, M', T, D] (after the MHA out-projection with ``mha_proj``) and their keys and values
        [B, M', past + T, D] (with the cached ones in front)."""
        b, t, d = x.shape
        D = self.cfg.head_dim
        xn = F.layer_norm(x, (d,), eps=self.cfg.layer_norm_eps)
        ln_w, ln_b, qw, qb = (w[n][i, sel] for n in ("ln_weight", "ln_bias", "qkv_weight", "qkv_bias"))
        m = ln_w.shape[0]
        # LayerNorm's affine folded into Linear(d, 3D): one [d -> 3·D·M] matmul for the M modules
        wq = qw * ln_w[:, None, :]  # [M, 3D, d]
        bq = torch.einsum("mkd,md->mk", qw, ln_b) + qb  # [M, 3D]
        qkv = F.linear(xn, wq.reshape(m * 3 * D, d), bq.reshape(-1)).view(b, t, m, 3, D)
        if self.cfg.mha_proj:  # q' = W_in q + b_in per q/k/v (torch's MultiheadAttention in-projection)
            qkv = torch.einsum("btmjd,mjed->btmje", qkv, w["mha_in_weight"][i, sel]) + w["mha_in_bias"][i, sel]
        q, k, v = qkv.permute(3, 0, 2, 1, 4).unbind(0)  # each [B, M, T, D]
        if cached is not None:
            k, v = torch.cat([cached[0], k], 2), torch.cat([cached[1], v], 2)
        # softmax(q k^T / sqrt(D)) v over the allowed keys (a row with none gives 0), dropout on the probabilities
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=self._ctx["allowed"], scale=1.0 / math.sqrt(D),
                                           dropout_p=self.cfg.dropout if self.training else 0.0)  # [B, M, T, D]
        if self.cfg.mha_proj:
            o = (torch.einsum("bmtd,med->bmte", o, w["mha_out_weight"][i, sel])
                 + w["mha_out_bias"][i, sel][None, :, None, :])
        return o, k, v

    @contextmanager
    def generating(self, kw: dict):
        beams = kw.get("num_beams") or getattr(self.backbone_model.generation_config, "num_beams", 1) or 1
        if beams > 1:
            raise EmbexpError(f"method {self.cfg.name} generates greedily or by sampling; num_beams={beams} is not "
                              "supported (the adapter's KV cache does not follow beam reordering)")
        try:
            yield
        finally:
            self._kv = {}
