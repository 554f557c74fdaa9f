"""The module checks of ``python -m embexp.xcheck`` for the embedding-layer methods: PETE (HMUNACHI/pete), K-Token
merging (shsjxzh/K-Token-Merging) and PEMA (mlsw/partial-embedding-matrix-adaptation), each against embexp's
module with the same weights (the Tiny-Attention checks and the helpers: ``embexp.xcheck.methods``)."""

from __future__ import annotations

import copy
import math
import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn

from embexp.xcheck.methods import AuthorsCodeError, Row, embexp_method, load_file, load_package, max_diff

# ---- PETE (HMUNACHI/pete) -------------------------------------------------------------------------------
V, D_PETE, SEQ = 30522, 512, 128  # BERT's uncased vocabulary, the paper's d, the authors' max_seq_len


def pete_authors(root: Path, build: Path):
    """The authors' ``src/pete.py`` over their C++ extension, built into ``build`` once (the flags that differ from
    their setup.py and why: docs/xcheck.md; their chebyshev_kernel.cpp puts ``#pragma omp parallel for`` before a
    macro, which g++ refuses with ``-fopenmp``)."""
    if "_polynomial_embeddings_C" not in sys.modules:
        from torch.utils import cpp_extension

        src = root / "polynomial_embeddings"
        files = [src / "index.cpp"] + [src / f"{k}_kernel.cpp" for k in
                                        ("chebyshev", "fourier", "legendre", "hermite", "laguerre")]
        build.mkdir(parents=True, exist_ok=True)
        try:
            sys.modules["_polynomial_embeddings_C"] = cpp_extension.load(
                name="_polynomial_embeddings_C", sources=[str(f) for f in files], extra_cflags=["-O3"],
                build_directory=str(build))
        except (RuntimeError, OSError) as e:  # no compiler, no ninja, a failed build
            last = (str(e).strip().splitlines() or ["?"])[-1]
            raise AuthorsCodeError(f"building the authors' PETE kernel from {src} into {build} failed ({last}); it "
                                   "needs a C++ compiler and ninja, or leave PETE out with only=") from e
    load_package("polynomial_embeddings", root / "polynomial_embeddings")
    state = torch.random.get_rng_state()
    mod = load_file("authors_pete", root / "src" / "pete.py")  # its import seeds torch and numpy with 0
    torch.random.set_rng_state(state)
    return mod


def formula(ids: np.ndarray, d: int, denominator: int) -> np.ndarray:
    """T(p) in float64: x = 2p/D - 1, T_i = sin((i//2+1) pi x) (even i), cos(...) (odd i)."""
    x = 2.0 * ids.astype(np.float64) / denominator - 1.0
    k = np.arange(d) // 2 + 1
    arg = np.pi * x[:, None] * k[None, :]
    return np.where(np.arange(d) % 2 == 0, np.sin(arg), np.cos(arg))


def kernel_arithmetic(ids: np.ndarray, d: int, seq: int, cuda: bool) -> np.ndarray:
    """The float arithmetic of the authors' Fourier kernel, repeated in numpy: ``x = 2.0 * (p / 127.0f) - 1.0``
    stored as a float, then ``sin(freq * x * pi)``, all in float in fourier_kernel.cpp, in double after the float
    product ``freq * x`` in fourier_kernel.cu (``cuda``; docs/xcheck.md says how this repetition is checked)."""
    x = (2.0 * (ids.astype(np.float32) / np.float32(seq - 1)).astype(np.float64) - 1.0).astype(np.float32)
    prod = x[:, None] * (np.arange(d) // 2 + 1).astype(np.float32)[None, :]  # float * float: a float
    arg = prod.astype(np.float64) * np.pi if cuda else prod * np.float32(np.pi)
    return np.where(np.arange(d) % 2 == 0, np.sin(arg), np.cos(arg)).astype(np.float32)


def pete_checks(root: Path, build: Path) -> list[Row]:
    from embexp.core.cli import compose_train
    from embexp.methods.pete import PETEEmbedding

    mod = pete_authors(root, build)
    ids = torch.arange(V)
    want = formula(ids.numpy(), D_PETE, SEQ - 1)
    cfg = compose_train(["debug=smoke", "model=scratch_encoder", "method=pete", "task=nli_pairs", "method.variant=code",
                         "method.norm=seq_len"])
    torch.manual_seed(0)
    ours = PETEEmbedding(cfg.method, V, D_PETE)
    kernel = mod.PolynomialBlock(SEQ, D_PETE)
    with torch.no_grad():
        theirs = kernel(ids[None])[0].double().numpy()
        mine = ours.features(ids).double().numpy()
    low = slice(0, SEQ)  # ids 0..127: x in [-1, 1]
    outside = float(np.mean(np.abs(2.0 * np.arange(V) / (SEQ - 1) - 1.0) > 1.0))
    rows = [
        Row("PETE", "features, method.norm=seq_len, against the code's formula", float(np.abs(mine - want).max()),
            tol=1e-6, note=f"all {V:,} BERT ids, d={D_PETE}, x = 2p/127 - 1; the formula in float64"),
        Row("PETE", "the authors' fp32 kernel against the same formula", float(np.abs(theirs - want).max()),
            kind="choice",
            note=f"their fourier_kernel.cpp, all in float (the CPU build; a GPU build uses the .cu): ids 0-127 "
                 f"(|x| <= 1) "
                 f"{np.abs(theirs[low] - want[low]).max():.1e}; {outside:.1%} of the ids have |x| > 1, where fp32 "
                 "k*pi*x (up to ~4e5 rad) loses the phase; embexp computes the formula exactly (integer range "
                 "reduction)"),
    ]
    cpu = kernel_arithmetic(ids.numpy(), D_PETE, SEQ, cuda=False)
    cuda = kernel_arithmetic(ids.numpy(), D_PETE, SEQ, cuda=True)
    rows.append(Row("PETE", "the authors' CUDA kernel's arithmetic against the formula (repeated in numpy)",
                    float(np.abs(cuda - want).max()), kind="choice",
                    note=f"fourier_kernel.cu's float/double steps (no GPU here to run it); the same repetition of "
                         f"the CPU kernel's steps is {np.abs(cpu - theirs).max():.1e} from their compiled CPU kernel"))
    del cpu, cuda
    model = mod.PETE(V, D_PETE, 0, 2, SEQ).eval()  # 0 layers: forward returns the embedding itself
    with torch.no_grad():
        model.mlp.weight.normal_(0, 0.05)
        model.norm.weight.uniform_(0.5, 1.5)
        ours.linear.load_state_dict(model.mlp.state_dict())
        ours.norm.weight.copy_(model.norm.weight)
        full = max_diff(model(ids[None])[0][0], ours(ids))
        model.expansion.forward = lambda input_ids: ours.features(input_ids)  # their refinement on exact features
        refine = max_diff(model(ids[None])[0][0], ours(ids))
    n_theirs = sum(p.numel() for p in (*model.mlp.parameters(), *model.norm.parameters()))
    n_ours = sum(p.numel() for p in ours.parameters())
    rows += [
        Row("PETE", "refinement RMSNorm(Linear(T) + T), method.variant=code", refine, tol=1e-5,
            note="the authors' PETE.forward (0 layers) with their expansion replaced by embexp's features, the same "
                 "Linear and RMSNorm weights; all ids"),
        Row("PETE", "E(p) with the authors' kernel against embexp (variant=code norm=seq_len)", full, kind="choice",
            note="their PETE.forward as it is: the kernel's fp32 error, through the refinement"),
        Row("PETE", "embedding parameters (variant=code)", float(n_theirs), kind="count", ours=float(n_ours),
            metric="parameters", note=f"the authors' mlp + norm against embexp's PETEEmbedding, d={D_PETE}"),
    ]
    return rows


# ---- K-Token merging (shsjxzh/K-Token-Merging) ------------------------------------------------------------
PROMPTS = ["Is node 3 a child of node 1?", "hi", "The quick brown fox jumps"]


def _ktoken_embexp(k: int, *args: str):
    return embexp_method("model=tiny_qwen2", "method=ktoken", "task=glue", "method.inner=none", f"method.k={k}",
                         *args)


def ktoken_checks(root: Path) -> list[Row]:
    ktm = load_package("k_token_merging", root / "src" / "k_token_merging")
    rows = []
    for k in (2, 3, 4):
        _, bb, m = _ktoken_embexp(k, "method.zero_init=false")
        d = bb.hidden_size
        torch.manual_seed(k)
        enc = ktm.AverageInitializedEncoder(d, k).eval()
        m.encoder.load_state_dict(enc.state_dict())
        x = torch.randn(16, k * d)
        with torch.no_grad():
            diff = max_diff(m.encoder(x), enc(x))
        rows.append(Row("K-Token", f"encoder K={k}: mean + MLP", diff, tol=1e-6,
                        note=f"the authors' AverageInitializedEncoder(d={d}), its weights in embexp's MergingEncoder; "
                             "16 random blocks"))
        rows.append(Row("K-Token", f"encoder K={k} parameters", float(sum(p.numel() for p in enc.parameters())),
                        kind="count", ours=float(sum(p.numel() for p in m.encoder.parameters())), metric="parameters",
                        note=f"d={d} (tiny Qwen2); Qwen2.5-0.5B (d=896) scales as d^2"))
    # zero_init (default, the paper): the merged embedding starts at its block mean; the authors' default init
    _, bb, m = _ktoken_embexp(2)
    torch.manual_seed(0)
    enc = ktm.AverageInitializedEncoder(bb.hidden_size, 2).eval()
    x = bb.model.get_input_embeddings().weight[torch.randint(0, 256, (16, 2))].reshape(16, -1).detach()
    with torch.no_grad():
        mean = x.view(16, 2, -1).mean(1)
        rows.append(Row("K-Token", "method.zero_init=true (default): merged = block mean at the start",
                        max_diff(m.encoder(x), mean), tol=0.0, note="16 blocks of the tiny model's embeddings"))
        rows.append(Row("K-Token", "the authors' default init: merged minus block mean", max_diff(enc(x), mean),
                        kind="choice", note=f"block mean max |.| {float(mean.abs().max()):.2e}: the MLP's output "
                                            "outweighs it on a small table; the paper says 'initialized close to "
                                            "zero' (method.zero_init=false is the code)"))
    rows += _ktoken_layout(ktm, 3)
    return rows


def _ktoken_layout(ktm, k: int) -> list[Row]:
    """The prompt layout: embexp's prefix() against the authors' build_prefill_embeddings (the same encoder)."""
    _, bb, m = _ktoken_embexp(k, "method.zero_init=false")
    m.eval()
    tok, d = bb.tokenizer, bb.hidden_size
    table = bb.model.get_input_embeddings().weight.detach()

    def authors(prompts):
        return ktm.build_prefill_embeddings(prompts, tok, table, m.encoder, k, d, m.pad_id, "cpu")

    side = tok.padding_side
    tok.padding_side = "left"
    enc = tok(PROMPTS, return_tensors="pt", padding=True)
    tok.padding_side = side
    with torch.no_grad():
        ours, mask = m.prefix(enc["input_ids"], enc["attention_mask"])
        batched = authors(PROMPTS)
    alone = batch = 0.0
    for i, p in enumerate(PROMPTS):
        with torch.no_grad():
            one = authors([p])[0]
        mine = ours[i][mask[i].bool()]
        alone = max(alone, max_diff(mine, one))
        batch = max(batch, max_diff(mine, batched[i][-len(mine):]))
    lens = [int(n) for n in enc["attention_mask"].sum(1)]
    return [
        Row("K-Token", f"prompt layout K={k}: each row against the authors' batch of one", alone, tol=1e-6,
            note=f"{len(PROMPTS)} prompts of {lens} tokens (tiny Qwen2's byte tokenizer), left-padded; embexp's "
                 "prefix() against build_prefill_embeddings([prompt]), the space token padding each to a multiple "
                 "of K"),
        Row("K-Token", f"prompt layout K={k}: the same rows in the authors' batch", batch, kind="choice",
            note="the authors merge the batch's left padding with the row's tokens (a row depends on its batch); "
                 "embexp pads each row to a multiple of K alone and masks the blocks left of it"),
    ]


# ---- PEMA (mlsw/partial-embedding-matrix-adaptation) ------------------------------------------------------
ROWS = [[2, 40, 41, 42, 3], [2, 50, 51, 40, 60, 61, 3], [2, 70, 3]]  # tiny BERT ids ([CLS] .. [SEP]); pad 0


def _step(model, emb_weight, ids, mask, labels) -> None:
    """One AdamW step (lr 0.1, no weight decay) on the embedding weight alone: cross-entropy of the head."""
    opt = torch.optim.AdamW([emb_weight], lr=0.1, weight_decay=0.0)
    loss = nn.functional.cross_entropy(model(input_ids=ids, attention_mask=mask).logits, labels)
    loss.backward()
    opt.step()


def pema_checks(root: Path) -> list[Row]:
    import datasets

    datasets.disable_progress_bars()
    pema = load_package("partial_embedding_matrix_adaptation", root / "src" / "partial_embedding_matrix_adaptation")
    from partial_embedding_matrix_adaptation.data.token_counter import TokenCounter

    _, bb, m = embexp_method("model=tiny_bert", "method=pema", "task=glue", "method.inner=emb_tuning",
                             "method.keep_special=false")
    pad = bb.tokenizer.pad_token_id
    n = max(map(len, ROWS))
    ids = torch.tensor([r + [pad] * (n - len(r)) for r in ROWS])
    mask = (ids != pad).long()
    labels = torch.tensor([0, 1, 1])
    authors_model = copy.deepcopy(bb.model).eval()
    # the authors: count the (padded) dataset's input_ids, keep the ids that occur, remap the data, train, restore
    data = datasets.Dataset.from_dict({"input_ids": ids.tolist()})
    counts = TokenCounter().count(dataset=data, vocabulary_size=len(bb.tokenizer), columns=["input_ids"])
    selected = np.flatnonzero(counts)
    token_map = np.full_like(counts, -1)
    token_map[selected] = np.arange(len(selected))
    emb = authors_model.get_input_embeddings()
    ctx = pema.EmbeddingPruner().prepare(authors_model, emb, torch.from_numpy(selected))
    n_theirs = emb.weight.numel()
    _step(authors_model, emb.weight, torch.from_numpy(token_map)[ids], mask, labels)
    pema.EmbeddingPruner().restore(ctx)
    # embexp: setup on the rows (unpadded: pad is kept anyway), the same step on the partial matrix, merged back
    m.setup({"train": ROWS})
    m.eval()
    part = m.model.get_input_embeddings().weight
    n_ours = part.numel()
    _step(m, part, ids, mask, labels)
    kept_sym = len(set(selected.tolist()) ^ set(m.kept_ids.tolist()))
    moved = max_diff(emb.weight, m.store.full())  # the authors' restored matrix against the original rows
    step = max_diff(m.merged_weight(), emb.weight) if moved > 0 else math.nan  # a step that moved nothing fails
    rows = [
        Row("PEMA", "kept ids (keep_special=false)", float(kept_sym), tol=0.0, metric="ids kept by one side only",
            note=f"{len(selected)} ids kept of {len(counts)}: the authors' TokenCounter on the padded rows (pad "
                 "counted), embexp's count of the rows plus pad"),
        Row("PEMA", "trainable embedding parameters", float(n_theirs), kind="count", ours=float(n_ours),
            metric="parameters", note="the authors' reduced matrix against embexp's partial matrix"),
        Row("PEMA", "one AdamW step, merged back into the full matrix", step, tol=1e-6,
            note=f"lr 0.1, tiny BERT's head cross-entropy, embedding only; the authors' restore() against embexp's "
                 f"merged_weight(), every row (the step moved the kept rows by up to {moved:.2f})"),
    ]
    _, bb2, m2 = embexp_method("model=tiny_bert", "method=pema", "task=glue", "method.inner=emb_tuning")
    m2.setup({"train": ROWS})
    rows.append(Row("PEMA", "keep_special=true (default): extra rows kept", float(len(m2.kept_ids) - len(selected)),
                    kind="choice", metric="rows",
                    note=f"special ids {bb2.special_ids()} kept even when absent from the counted rows; they get no "
                         "gradient, so with weight decay 0 the merged matrix is the same"))
    return rows
