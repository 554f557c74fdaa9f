"""The TinyTE paper's tasks: superglue (5 sub-tasks + multitask), cnndm, alpaca. Offline, fast."""

import dataclasses
import json
import math
import random

import pytest
import torch
from omegaconf import OmegaConf

from conftest import run_train, smoke
from embexp import EmbexpError
from embexp.featurize import Featurizer
from embexp.methods import build_method
from embexp.models import load_backbone
from embexp.run.predict import choice_logliks
from embexp.tasks import TASKS, build_task
from embexp.tasks.alpaca import AlpacaConfig, AlpacaTask
from embexp.tasks.cnndm import CnnDmConfig, CnnDmTask, rouge_scores, split_sentences
from embexp.tasks.superglue import SUBSETS, SuperGlueConfig, SuperGlueTask, macro_f1

# Field names and types exactly as datasets.load_dataset("aps/super_glue", <subset>) returns them
# (checked against the real rows in ../shared/data/super_glue/*/validation.jsonl).
SG_FIELDS = {
    "boolq": {"question": str, "passage": str, "idx": int, "label": int},
    "cb": {"premise": str, "hypothesis": str, "idx": int, "label": int},
    "copa": {"premise": str, "choice1": str, "choice2": str, "question": str, "idx": int, "label": int},
    "rte": {"premise": str, "hypothesis": str, "idx": int, "label": int},
    "wic": {"word": str, "sentence1": str, "sentence2": str, "start1": int, "start2": int, "end1": int, "end2": int,
            "idx": int, "label": int},
}
N_CLASSES = {"boolq": 2, "cb": 3, "copa": 2, "rte": 2, "wic": 2}


def make(cls, config_cls, **kw):
    return cls(OmegaConf.merge(OmegaConf.structured(config_cls), kw))


def sg(subset="boolq", **kw):
    return make(SuperGlueTask, SuperGlueConfig, subset=subset, **kw)


def fixture(task, split="validation", n=48, seed=0):
    return task.fixture_rows(split, n, random.Random(seed))


def test_registered_with_help_and_configs_compose():
    for name, cls in [("superglue", SuperGlueTask), ("cnndm", CnnDmTask), ("alpaca", AlpacaTask)]:
        assert TASKS[name] is cls
        for fld in dataclasses.fields(cls.Config):
            assert fld.metadata.get("help"), f"{name}.{fld.name} has no help text"
    cfg = smoke("task=cnndm")
    assert cfg.task.eval_split == "test" and cfg.task.name == "cnndm"
    assert smoke("task=alpaca").task.eval_split == "heldout"
    assert type(build_task(smoke("task=superglue", "task.subset=all").task)) is SuperGlueTask
    from embexp.core.config import validate

    with pytest.raises(EmbexpError, match="boolq, cb, copa, rte, wic, all"):  # the schema's domain, at composition
        validate(smoke("task=superglue", "task.subset=multirc"))


# ---- SuperGLUE -----------------------------------------------------------------------------------
@pytest.mark.parametrize("subset", SUBSETS)
def test_superglue_fixture_schema_and_signal(subset):
    task = sg(subset)
    rows = fixture(task)
    for r in rows:
        assert {k: type(v) for k, v in r.items()} == SG_FIELDS[subset]
        assert 0 <= r["label"] < N_CLASSES[subset]
    assert len({r["label"] for r in rows}) == N_CLASSES[subset]
    assert all(r["label"] == -1 for r in fixture(task, "test"))
    for r in rows:  # the label is decided by the words
        if subset == "boolq":
            assert (r["question"].split()[-1] in r["passage"].split(" -- ")[1]) == (r["label"] == 1)
        elif subset == "rte":
            assert (r["hypothesis"].split()[-1].rstrip(".") in r["premise"]) == (r["label"] == 0)
        elif subset == "wic":
            assert r["sentence1"][r["start1"]:r["end1"]] == r["word"] == r["sentence2"][r["start2"]:r["end2"]]
        ex = task.format(r)
        assert ex.target == ex.choices[r["label"]] and ex.meta["subset"] == subset


def test_superglue_prompts_are_lm_eval_verbatim():
    rows = {
        "boolq": {"question": "is the sky blue", "passage": "Sky -- The sky is blue.", "idx": 0, "label": 1},
        "cb": {"premise": "It rained.", "hypothesis": "the ground is wet", "idx": 0, "label": 2},
        "copa": {"premise": "The man turned on the faucet.", "choice1": "The toilet filled with water.",
                 "choice2": "Water flowed from the spout.", "question": "effect", "idx": 0, "label": 1},
        "rte": {"premise": "Cats purr.", "hypothesis": "Cats make sounds.", "idx": 0, "label": 0},
        "wic": {"word": "bank", "sentence1": "We sat by the bank.", "sentence2": "The bank was closed.",
                "start1": 14, "start2": 4, "end1": 18, "end2": 8, "idx": 0, "label": 0},
    }
    want = {
        "boolq": ("Sky -- The sky is blue.\nQuestion: is the sky blue?\nAnswer:", (" no", " yes")),
        "cb": ("It rained.\nQuestion: the ground is wet. True, False, or Neither?\nAnswer:",
               (" True", " False", " Neither")),
        "copa": ("The man turned on the faucet therefore",
                 ("  the toilet filled with water.", "  water flowed from the spout.")),
        "rte": ("Cats purr.\nQuestion: Cats make sounds. True or False?\nAnswer:", (" True", " False")),
        "wic": ("Sentence 1: We sat by the bank.\nSentence 2: The bank was closed.\nQuestion: Is the word 'bank' "
                "used in the same way in the two sentences above?\nAnswer:", (" no", " yes")),
    }
    for s in SUBSETS:
        ex = sg(s).format(rows[s])
        assert (ex.prompt, ex.choices) == want[s], s
        assert ex.target == want[s][1][rows[s]["label"]]
    cause = sg("copa").format({**rows["copa"], "question": "cause", "premise": " The man turned on the faucet. "})
    assert cause.prompt == "The man turned on the faucet because"
    multi = sg("all")
    for s in SUBSETS:
        ex = multi.format({**rows[s], "subset": s})
        assert ex.prompt == f"{s}: " + want[s][0] and ex.choices == want[s][1] and ex.meta["subset"] == s


def test_superglue_multitask_rows_caps_and_scores():
    task = sg("all", source="fixture", fixture_size=10, select_size=4, max_eval_samples=4)  # holds out <= 10
    exs = task.examples("eval")
    assert [e.meta["subset"] for e in exs] == [s for s in SUBSETS for _ in range(4)]
    assert all(e.prompt.startswith(e.meta["subset"] + ": ") for e in exs)
    assert len(task.examples("train")) == 50  # every sub-task's fixture_size rows
    gold = [e.label for e in exs]
    pred = list(gold)
    pred[0] = 1 - gold[0]      # one boolq error: boolq 75
    pred[4:8] = [-1] * 4       # cb all invalid: cb 0
    m = task.score_labels(gold, pred)
    assert m["boolq_accuracy"] == 75 and m["cb_accuracy"] == 0 and m["copa_accuracy"] == 100
    assert m["cb_f1"] == 0 and math.isclose(m["accuracy"], (75 + 0 + 300) / 5)
    assert math.isclose(m["pooled_accuracy"], 100 * 15 / 20)
    with pytest.raises(EmbexpError, match="sub-task of every row"):
        task.score_labels(gold[:3], pred[:3])
    assert task.score_labels(gold[:2], pred[:2], subsets=["rte", "rte"]) == {"rte_accuracy": 50.0, "accuracy": 50.0,
                                                                              "pooled_accuracy": 50.0}


def test_cb_macro_f1_by_hand():
    gold = [0, 0, 1, 1, 2, 2]
    pred = [0, 1, 1, 1, 2, -1]
    # class 0: tp1 fp0 fn1 -> 2/3; class 1: tp2 fp1 fn0 -> 4/5; class 2: tp1 fp0 fn1 -> 2/3
    want = 100 * (2 / 3 + 4 / 5 + 2 / 3) / 3
    assert math.isclose(macro_f1(gold, pred, 3), want)
    m = sg("cb").score_labels(gold, pred)
    assert math.isclose(m["f1"], want) and math.isclose(m["accuracy"], 100 * 4 / 6)
    assert set(sg("rte").score_labels(gold, pred)) == {"accuracy"}


@pytest.fixture(scope="module")
def tiny_decoder():
    cfg = smoke("method=zero_shot", "model=tiny_llama", "task=superglue")
    torch.manual_seed(0)
    backbone = load_backbone(cfg.model)
    method = build_method(cfg.method, backbone)
    return backbone, method, Featurizer(backbone.tokenizer, True, max_source_tokens=4096)


@torch.no_grad()
def hand_logliks(model, tok, prompt, choices):
    """lm-eval's loglikelihood: encode context and context+continuation, the continuation tokens are
    the tail beyond the context's length; one forward pass over the whole, summed log-softmax."""
    out = []
    for c in choices:
        ctx, whole = tok(prompt)["input_ids"], tok(prompt + c)["input_ids"]
        cont = whole[len(ctx):]
        logp = torch.log_softmax(model(input_ids=torch.tensor([whole])).logits[0].float(), -1)
        out.append(sum(float(logp[len(ctx) - 1 + j, t]) for j, t in enumerate(cont)))
    return out


@pytest.mark.parametrize("subset", SUBSETS)
def test_loglik_scorer_matches_hand_computation(tiny_decoder, subset):
    backbone, method, encoder = tiny_decoder
    exs = [sg(subset).format(r) for r in fixture(sg(subset), n=4, seed=1)]
    scores = choice_logliks(method, encoder, exs, batch_size=4, device=torch.device("cpu"), progress=False)
    for ex, got in zip(exs, scores):
        want = hand_logliks(backbone.model, backbone.tokenizer, ex.prompt, ex.choices)
        assert len(got) == len(ex.choices)
        assert got == pytest.approx(want, abs=2e-3)
        assert max(range(len(got)), key=got.__getitem__) == max(range(len(want)), key=want.__getitem__)


@pytest.mark.slow
def test_loglik_scorer_matches_hand_computation_real_bpe():
    """The same check on SmolLM2 (a real BPE tokenizer: COPA's double space and word-initial pieces)."""
    cfg = smoke("method=zero_shot", "model=smollm2", "task=superglue", "model.source=smollm2")
    backbone = load_backbone(cfg.model)
    method = build_method(cfg.method, backbone)
    encoder = Featurizer(backbone.tokenizer, True, max_source_tokens=4096)
    for subset in SUBSETS:
        exs = [sg(subset).format(r) for r in fixture(sg(subset), n=3, seed=2)]
        scores = choice_logliks(method, encoder, exs, batch_size=4, device=torch.device("cpu"), progress=False)
        for ex, got in zip(exs, scores):
            assert got == pytest.approx(hand_logliks(backbone.model, backbone.tokenizer, ex.prompt,
                                                     ex.choices), abs=2e-3)


def test_superglue_multitask_smoke_run(tmp_path):
    cfg = smoke("method=tinyte_full", "model=tiny_llama", "task=superglue", "task.subset=all",
                "task.max_eval_samples=2", "task.max_new_tokens=4")
    m = run_train(cfg, tmp_path / "run")["metrics"]
    for prefix in ("em_", "ll_"):
        for s in SUBSETS:
            assert 0 <= m[f"{prefix}{s}_accuracy"] <= 100
        assert math.isclose(m[f"{prefix}accuracy"], sum(m[f"{prefix}{s}_accuracy"] for s in SUBSETS) / 5)
        assert f"{prefix}cb_f1" in m


# ---- CNN/DailyMail ---------------------------------------------------------------------------------
def test_cnndm_fixture_prompt_truncation_and_length():
    task = make(CnnDmTask, CnnDmConfig, max_article_words=5)
    rows = fixture(task)
    assert all({k: type(v) for k, v in r.items()} == {"article": str, "highlights": str, "id": str} for r in rows)
    assert len({r["id"] for r in rows}) == len(rows)
    row = {"article": "One two three four five six seven.", "highlights": "Six words .\nSecond line .", "id": "x"}
    ex = task.format(row)
    assert ex.prompt == "Article: One two three four five\nSummary:"
    assert ex.target == " Six words .\nSecond line ."
    assert ex.meta == {"id": "x", "input_words": 7, "truncated": True}
    full = make(CnnDmTask, CnnDmConfig).format(row)
    assert full.prompt == "Article: One two three four five six seven.\nSummary:" and not full.meta["truncated"]


def test_rouge_by_hand():
    # LCS("the cat sat on the mat", "the cat on the mat") = 5: P = 1, R = 5/6, F = 10/11
    m = rouge_scores(["the cat sat on the mat"], ["the cat on the mat"])
    assert math.isclose(m["rougeL"], 100 * 10 / 11)
    assert math.isclose(m["rouge1"], 100 * 10 / 11)
    assert math.isclose(m["rouge2"], 100 * 2 * (3 / 4) * (3 / 5) / (3 / 4 + 3 / 5))  # bigrams: 3 of 4 / 3 of 5
    assert rouge_scores(["the dogs were running"], ["the dog was run"], stemmer=True)["rougeL"] > \
        rouge_scores(["the dogs were running"], ["the dog was run"], stemmer=False)["rougeL"]
    two = rouge_scores(["a b", "a b"], ["a b", "c d"])
    assert two["rougeL"] == 50 and math.isclose(two["rougeL_stderr"], 50)  # sd 70.71 / sqrt(2)


SUMMARY_REF = ("Harry Kane scored twice as Tottenham beat Arsenal 2-1 on Saturday .\n"
               "The striker now has 21 league goals this season .\nMauricio Pochettino praised his side's spirit .")
SUMMARY_HYP = ("Tottenham beat Arsenal 2-1 on Saturday. Pochettino praised the spirit of his side. "
               "Kane, who scored twice, has 21 goals in the league this season.")


def test_rouge_lsum_is_rouge_scores_own_on_newline_split_sentences():
    """rougeLsum = rouge-score's rougeLsum fed one sentence per line (both sides split the same way)."""
    from rouge_score import rouge_scorer

    ref_sents = ["Harry Kane scored twice as Tottenham beat Arsenal 2-1 on Saturday .",
                 "The striker now has 21 league goals this season .", "Mauricio Pochettino praised his side's spirit ."]
    hyp_sents = ["Tottenham beat Arsenal 2-1 on Saturday.", "Pochettino praised the spirit of his side.",
                 "Kane, who scored twice, has 21 goals in the league this season."]
    assert split_sentences(SUMMARY_REF) == ref_sents and split_sentences(SUMMARY_HYP) == hyp_sents
    for stem in (True, False):
        own = rouge_scorer.RougeScorer(["rougeLsum", "rougeL"], use_stemmer=stem).score("\n".join(ref_sents),
                                                                                        "\n".join(hyp_sents))
        m = rouge_scores([SUMMARY_REF], [SUMMARY_HYP], stemmer=stem)
        assert m["rougeLsum"] == pytest.approx(100 * own["rougeLsum"].fmeasure, abs=1e-9)
        assert m["rougeL"] == pytest.approx(100 * own["rougeL"].fmeasure, abs=1e-9)
        assert m["rougeLsum"] > m["rougeL"] + 10  # summary-level LCS: sentences may match in any order
    two = rouge_scores([SUMMARY_REF, "A b ."], [SUMMARY_HYP, "A b."])
    assert two["rougeLsum_stderr"] > 0 and set(two) >= {"rouge1", "rouge2", "rougeL", "rougeLsum", "rougeL_stderr"}


def test_sentence_splitter_keeps_abbreviations_initials_and_lower_case_continuations():
    text = 'The U.S. Army said so. Mr. Smith left! "Why?" he asked. J. R. Tolkien wrote it.\nLine two .\n\nEnd'
    assert split_sentences(text) == ["The U.S. Army said so.", "Mr. Smith left!", '"Why?" he asked.',
                                     "J. R. Tolkien wrote it.", "Line two .", "End"]
    assert (split_sentences("He paid $3.5 million on Jan. 5. It was St. Louis.")
            == ["He paid $3.5 million on Jan. 5.", "It was St. Louis."])
    assert split_sentences("  \n ") == []


# ---- generation: end-of-sequence ids, newline stop -----------------------------------------------
def test_generation_stops_at_every_eos_id_of_the_generation_config():
    """Llama-3.1 and Qwen-2.5 list several ids in generation_config.eos_token_id: each one must stop."""
    from embexp.run.predict import eos_ids, generate

    cfg = smoke("method=zero_shot", "model=tiny_llama", "task=wmt16")
    torch.manual_seed(0)
    backbone = load_backbone(cfg.model)
    method, tok = build_method(cfg.method, backbone), backbone.tokenizer
    encoder, cpu, prompt = (Featurizer(tok, True, max_source_tokens=4096), torch.device("cpu"),
                            "Czech phrase: pes\nEnglish phrase:")
    ids = encoder.prompt_ids(prompt)
    free = method.generate(input_ids=torch.tensor([ids]), max_new_tokens=8, do_sample=False,
                           eos_token_id=None)[0, len(ids):].tolist()
    k = next(i for i in range(1, len(free)) if free[i] not in free[:i] and free[i] != tok.eos_token_id)
    # two ids, the second one generated at step k
    backbone.model.generation_config.eos_token_id = [tok.eos_token_id, free[k]]
    assert eos_ids(method, tok) == [tok.eos_token_id, free[k]]
    assert generate(method, encoder, [prompt], 1, 8, cpu, False) == [tok.decode(free[:k + 1], skip_special_tokens=True)]
    backbone.model.generation_config.eos_token_id = tok.eos_token_id
    assert generate(method, encoder, [prompt], 1, 8, cpu, False) == [tok.decode(free, skip_special_tokens=True)]


class _ScriptedMethod(torch.nn.Module):
    """Generates a fixed continuation token by token, honouring stopping criteria as HF generate does."""

    def __init__(self, tok, text):
        super().__init__()
        self.tok, self.script, self.seen, self.steps = tok, tok(text, add_special_tokens=False)["input_ids"], {}, 0

    def generate(self, input_ids, attention_mask, max_new_tokens, stopping_criteria=(), **kw):
        self.seen = kw
        rows, done, self.steps = input_ids, torch.zeros(len(input_ids), dtype=torch.bool), 0
        for t in self.script[:max_new_tokens]:
            self.steps += 1
            nxt = torch.where(done, torch.tensor(kw["pad_token_id"]), torch.tensor(t))
            rows = torch.cat([rows, nxt[:, None]], 1)
            for crit in stopping_criteria:
                done |= crit(rows, None)
            if done.all():
                break
        return rows


def test_stop_at_newline_is_an_explicit_option():
    from embexp.run.predict import generate

    tok = load_backbone(smoke("model=tiny_llama").model).tokenizer
    encoder, cpu = Featurizer(tok, True, max_source_tokens=4096), torch.device("cpu")
    method = _ScriptedMethod(tok, " the dog\nCzech phrase: x")
    assert generate(method, encoder, ["a", "bb"], 2, 32, cpu, False) == [" the dog\nCzech phrase: x"] * 2
    assert method.seen["eos_token_id"] == [tok.eos_token_id] and method.steps == len(method.script)
    assert generate(method, encoder, ["a", "bb"], 2, 32, cpu, False, stop_at_newline=True) == [" the dog"] * 2
    assert method.steps == len(tok(" the dog\n", add_special_tokens=False)["input_ids"])  # stopped at the newline
    for name in ("wmt16", "cnndm", "alpaca"):  # off by default: the paper's numbers need multi-line outputs
        cfg = smoke(f"task={name}")
        assert cfg.task.stop_at_newline is False


# ---- Alpaca --------------------------------------------------------------------------------------
def alpaca(**kw):
    return make(AlpacaTask, AlpacaConfig, source="fixture", **kw)


def test_alpaca_fixture_schema_and_prompt_formats():
    task = alpaca()
    rows = fixture(task)
    for r in rows:
        assert {k: type(v) for k, v in r.items()} == {"instruction": str, "input": str, "output": str, "text": str}
        ex = task.format(r)
        assert ex.prompt + ex.target == r["text"]  # the hub's text field is the Alpaca template + output
    assert any(r["input"] == "" for r in rows) and any(r["input"] for r in rows)
    row = {"instruction": "Add the numbers.", "input": "2 and 3", "output": "5", "text": ""}
    assert task.format(row).prompt == (
        "Below is an instruction that describes a task, paired with an input that provides further context. "
        "Write a response that appropriately completes the request.\n\n### Instruction:\nAdd the numbers.\n\n"
        "### Input:\n2 and 3\n\n### Response:\n")
    assert task.format({**row, "input": ""}).prompt == (
        "Below is an instruction that describes a task. Write a response that appropriately completes the request.\n\n"
        "### Instruction:\nAdd the numbers.\n\n### Response:\n")
    llama = alpaca(prompt_format="llama2_inst")
    ex = llama.format(row)
    assert (ex.prompt, ex.target) == ("[INST] Add the numbers.\n\n2 and 3 [/INST]", " 5")
    assert llama.format({**row, "input": ""}).prompt == "[INST] Add the numbers. [/INST]"
    from embexp.core.config import validate

    with pytest.raises(EmbexpError, match="alpaca, llama2_inst"):  # the schema's domain, at composition
        validate(smoke("task=alpaca", "task.prompt_format=chatml"))


def test_alpaca_heldout_carve_is_disjoint_and_deterministic(tmp_path):
    rows = [{"instruction": f"task {i}", "input": "", "output": str(i), "text": ""} for i in range(50)]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    # no selection carve
    task = make(AlpacaTask, AlpacaConfig, data_dir=str(tmp_path), heldout_size=10, select_split="")
    train, held = task.load("train"), task.load("eval")
    ids = lambda rs: [r["output"] for r in rs]  # noqa: E731
    assert len(held) == 10 and len(train) == 40 and not set(ids(train)) & set(ids(held))
    assert sorted(ids(train) + ids(held), key=int) == [str(i) for i in range(50)]
    assert ids(make(AlpacaTask, AlpacaConfig, data_dir=str(tmp_path), heldout_size=10).load("eval")) == ids(held)
    other = make(AlpacaTask, AlpacaConfig, data_dir=str(tmp_path), heldout_size=10, heldout_seed=1).load("eval")
    assert ids(other) != ids(held)
    capped = make(AlpacaTask, AlpacaConfig, data_dir=str(tmp_path), heldout_size=10, max_eval_samples=3).load("eval")
    assert ids(capped) == ids(held)[:3]
    with pytest.raises(EmbexpError, match="heldout_size=50"):
        make(AlpacaTask, AlpacaConfig, data_dir=str(tmp_path), heldout_size=50).load("eval")
    fx = alpaca(heldout_size=7, fixture_size=20, select_size=5)  # a fixture's carve holds out <= fixture_size
    assert len(fx.load("train")) == 20 and len(fx.load("eval")) == 7
