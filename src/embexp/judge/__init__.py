"""Judge-scored generations: an LLM or NLI model gives each output a verdict (docs/judge.md).

    from embexp.judge import build_judge, aggregate
    judge = build_judge(cfg.judge, device, cache_path=run_dir / "judge_cache.jsonl")
    verdicts = judge.score("instruct", [{"question": q, "answer": a}, ...])   # 1..10 each
    aggregate("instruct", verdicts)                                           # {"judge_instruct": mean, ...}

The kinds (``KINDS``: ``instruct``, MT-bench's rating 1-10; ``harmbench``, 1.0 when HarmBench's classifier
says the attack succeeded; ``nli``, 1.0 when TRUE's premise entails the hypothesis), their verbatim prompts,
the backends (``judge.backend``: transformers, vllm, openai), the truncation and the verdict cache:
docs/judge.md. The modules and what this namespace re-exports: docs/architecture.md.
"""

from embexp.judge.prompts import HARMBENCH_PROMPT, INSTRUCT_CHOICES, KINDS, METRIC, parse
from embexp.judge.rescore import entry, rescore
from embexp.judge.scoring import Judge, aggregate, build_judge, check, score_run

__all__ = ["HARMBENCH_PROMPT", "INSTRUCT_CHOICES", "KINDS", "METRIC", "Judge", "aggregate", "build_judge", "check",
           "entry", "parse", "rescore", "score_run"]
