"""Baselines that need no adapter library: zero-shot, head-only, full fine-tuning, embedding tuning,
repeat the question."""

from __future__ import annotations

from embexp import EmbexpError
from embexp.methods.base import Comparison, Method
from embexp.methods.registry import register_method


class ExportsBackbone:
    """A method whose trained tensors are the backbone's own (or none): its export is the backbone."""

    def export(self):
        return self.model


@register_method("zero_shot")
class ZeroShot(ExportsBackbone, Method):
    """The backbone as it is: no training. Encoders keep their random head (a chance baseline)."""

    label = "Base model"
    trains = False
    comparison = Comparison(rank=0, kinds=("decoder",))  # on an encoder a random head: head_only is the floor there


@register_method("head_only")
class HeadOnly(ExportsBackbone, Method):
    """Encoders: the task head alone is trained on the frozen backbone (a linear probe for BERT-style
    heads); the floor an encoder method must beat for the same steps."""

    label = "Head only"
    model_kinds = ("encoder",)
    comparison = Comparison(rank=0, lr=1e-3)

    def __init__(self, cfg, backbone):
        super().__init__(cfg, backbone)
        if not cfg.train_head:
            raise EmbexpError("method head_only trains an encoder's task head: it needs method.train_head=true")
        self.mark_trainable()


@register_method("full_ft")
class FullFineTuning(ExportsBackbone, Method):
    """Every backbone parameter is trained (tied weights counted once)."""

    label = "Full FT"
    model_kinds = ("decoder", "encoder", "scratch")
    trains_embedding_matrix = True
    comparison = Comparison(rank=10, lr=2e-5)

    def method_tensors(self):
        head = {id(p) for p in self._head.values()}
        return {f"model.{n}": p for n, p in self.model.named_parameters() if id(p) not in head}


@register_method("emb_tuning")
class EmbeddingTuning(ExportsBackbone, Method):
    """Only the input embedding matrix is trained (with tied embeddings the output head moves too)."""

    label = "Emb. Tuning"
    trains_embedding_matrix = True
    comparison = Comparison(rank=20, lr=1e-4)

    def method_tensors(self):
        return {"embedding": self.model.get_input_embeddings().weight}


@register_method("repeat_prompt")
class RepeatPrompt(Method):
    """"Repeating the question" (TinyTE Table 8): no training; the evaluation's generations are the question.

    Each example's generation is ``Example.meta["question"]`` where the task sets it (Alpaca: the
    instruction, plus a blank line and the input when there is one), else the prompt text the task
    built (template included; ours). Scored by the task like any generation (Alpaca: ROUGE-L against
    the reference output). The backbone is loaded and left untouched (its forward and generate are
    the backbone's), so the contract's checks hold; only generation tasks accept it.
    """

    label = "Repeating the question"
    model_kinds = ("decoder",)  # it answers generation tasks
    trains = False
    export_blocker = "its evaluation outputs are the questions, not a model's generations"

    def given_generations(self, examples) -> list[str]:
        return [question(ex) for ex in examples]


def question(example) -> str:
    """The text repeat_prompt returns: ``meta["question"]`` when the task sets a non-empty one, else the prompt."""
    q = (getattr(example, "meta", None) or {}).get("question")
    return q if isinstance(q, str) and q else example.prompt
