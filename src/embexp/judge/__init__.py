"""Judge-scored generations: an LLM or NLI model gives each output a verdict (docs/judge.md).

    from embexp.judge import build_judge, aggregate
    judge = build_judge(cfg.judge, device, cache_path=run_dir / "judge_cache.jsonl")
    verdicts = judge.score("instruct", [{"question": q, "answer": a}, ...])   # 1..10 each
    aggregate("instruct", verdicts)                                           # {"judge_instruct": mean, ...}

Kinds (``KINDS``) and their items:

- ``instruct``: ``{"question", "answer"}`` -> a rating 1-10: MT-bench's single-answer grading prompt
  (Zheng et al. 2023, FastChat ``judge_prompts.jsonl`` "single-v1", verbatim), the TinyTE paper's
  Figure 3 "Instruct Score" (the paper's judge: gpt-4o-2024-08-06).
- ``harmbench``: ``{"behavior", "generation"}`` -> 1.0 when the attack succeeded (the classifier
  answers "Yes"), else 0.0: HarmBench's ``LLAMA2_CLS_PROMPT`` for ``cais/HarmBench-Llama-2-13b-cls``
  (verbatim), the TinyTE paper's Table 6 ASR.
- ``nli``: ``{"premise", "hypothesis"}`` -> 1.0 when the premise (the reference) entails the
  hypothesis (the output), else 0.0: Honovich et al. 2022 (TRUE), the TinyTE paper's Table 9/10 rows.
  A T5 TRUE model (``google/t5_xxl_true_nli_mixture``) reads ``"premise: {p} hypothesis: {h}"`` and
  answers "1"/"0"; a sequence-classification NLI model (e.g. ``roberta-large-mnli``) says entailed when
  its argmax is the label whose name contains "entail"; a causal LM answers our yes/no prompt.

Backends (``judge.backend``):

- ``transformers`` (default): the judge is loaded frozen in eval mode and scores batches. A causal or
  seq2seq judge's verdict is the allowed answer with the highest log-likelihood after the prompt
  (instruct: ``"1]]"`` .. ``"10]]"`` after ``"Rating: [["``; harmbench ``" Yes"``/``" No"``; nli
  ``" yes"``/``" no"`` or TRUE's ``"1"``/``"0"``): greedy decoding constrained to the valid answers, so
  even a small judge always gives a parsable verdict (ours; MT-bench lets the judge write an
  explanation first and parses ``[[rating]]``).
- ``vllm``: generate (greedy, ``judge.max_new_tokens``) and parse, as MT-bench and HarmBench do.
- ``openai``: the same through the OpenAI API (``judge.model`` = e.g. ``gpt-4o-2024-08-06``;
  needs the ``openai`` package and ``OPENAI_API_KEY``). An answer that does not parse is NaN,
  counted (``judge_unparsed``) and left out of the mean.

Every prompt is cut to ``judge.max_input_tokens`` tokens of the judge's tokenizer by cutting the
end of the judged text (answer, generation, hypothesis) first, then of the other text; the
instructions are never cut. Verdicts are cached in a JSONL file, one line per verdict keyed by the
sha256 of (judge model, backend, kind, full prompt text), appended once per batch, so a killed run
keeps what it scored and a re-score costs no judge call (``Judge.calls``).

Modules: ``prompts`` (kinds, prompts, allowed answers, parsing, truncation), ``cache`` (the verdict
cache), ``backends`` (transformers, vllm, openai), ``scoring`` (:class:`Judge`, :func:`aggregate`, a
run's :func:`check` and :func:`score_run`), ``rescore`` (``python -m embexp.judge``: re-score a
finished run). This package's namespace holds what the rest of embexp and its users call: the judge, its
aggregation, a run's check and scoring, the re-score and its entry point, the kinds and their metrics.
"""

from embexp.judge.prompts import HARMBENCH_PROMPT, INSTRUCT_CHOICES, KINDS, METRIC, parse
from embexp.judge.rescore import entry, rescore
from embexp.judge.scoring import Judge, aggregate, build_judge, check, score_run

__all__ = ["HARMBENCH_PROMPT", "INSTRUCT_CHOICES", "KINDS", "METRIC", "Judge", "aggregate", "build_judge", "check",
           "entry", "parse", "rescore", "score_run"]
