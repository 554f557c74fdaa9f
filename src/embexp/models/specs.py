"""Architecture fields of the real models, copied from each hub repo's config.json: parameter counts offline
(``python -m embexp.analyze params``, on the ``meta`` device, with the real method objects attached) and real
shapes with random weights (``model.init=random``, ``models/random_weights.py``), without the hub.

Only the fields that change parameter shapes are kept (plus those the classes need to build);
everything else takes the transformers default of the family. The key is the model config name
(conf/model/<name>.yaml); ``family`` is the transformers model type.
"""

from __future__ import annotations

SPECS: dict[str, dict] = {
    # google/gemma-2-2b-it: 2,614,341,888 parameters (tied embeddings)
    "gemma2": dict(family="gemma2", kind="decoder", config=dict(
        hidden_size=2304, intermediate_size=9216, num_hidden_layers=26, num_attention_heads=8,
        num_key_value_heads=4, head_dim=256, vocab_size=256000, tie_word_embeddings=True)),
    # Qwen/Qwen2.5-7B-Instruct: 7,615,616,512 parameters (q/k/v biases, untied head)
    "qwen25": dict(family="qwen2", kind="decoder", config=dict(
        hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
        num_key_value_heads=4, vocab_size=152064, tie_word_embeddings=False)),
    # meta-llama/Llama-3.1-8B-Instruct: 8,030,261,248 parameters
    "llama31": dict(family="llama", kind="decoder", config=dict(
        hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=False)),
    # meta-llama/Llama-2-7b-hf: 6,738,415,616 parameters
    "llama2": dict(family="llama", kind="decoder", config=dict(
        hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=32, vocab_size=32000, tie_word_embeddings=False)),
    # EleutherAI/gpt-j-6b (model=gptj; TinyTE Table 8): 6,050,882,784 parameters built here (untied head with a bias)
    "gptj": dict(family="gptj", kind="decoder", config=dict(
        n_embd=4096, n_layer=28, n_head=16, rotary_dim=64, n_positions=2048, vocab_size=50400,
        tie_word_embeddings=False)),
    # Qwen/Qwen2.5-0.5B (model=qwen25_05b; TinyTE Table 8, the K-Token paper's backbone): 494,032,768 parameters (tied)
    "qwen25_05b": dict(family="qwen2", kind="decoder", config=dict(
        hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
        num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True)),
    # HuggingFaceTB/SmolLM2-135M-Instruct (model=smollm2): 134,515,008 parameters (tied)
    "smollm2": dict(family="llama", kind="decoder", config=dict(
        hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
        num_key_value_heads=3, vocab_size=49152, tie_word_embeddings=True)),
    # FacebookAI/roberta-large (encoder, sequence-classification head)
    "roberta": dict(family="roberta", kind="encoder", config=dict(
        hidden_size=1024, intermediate_size=4096, num_hidden_layers=24, num_attention_heads=16,
        vocab_size=50265, max_position_embeddings=514, type_vocab_size=1, pad_token_id=1)),
    # FacebookAI/roberta-base (model=roberta_base; the paper's Fig. 4 / Table 2)
    "roberta_base": dict(family="roberta", kind="encoder", config=dict(
        hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
        vocab_size=50265, max_position_embeddings=514, type_vocab_size=1, pad_token_id=1)),
    # albert/albert-xxlarge-v2 (model=albert_xxlarge; one layer shared by 12 calls; the Tiny-Attention FewGLUE table)
    "albert_xxlarge": dict(family="albert", kind="encoder", config=dict(
        embedding_size=128, hidden_size=4096, intermediate_size=16384, num_hidden_layers=12,
        num_attention_heads=64, num_hidden_groups=1, inner_group_num=1, vocab_size=30000,
        max_position_embeddings=512, type_vocab_size=2, pad_token_id=0)),
    # microsoft/deberta-v3-base (encoder, sequence-classification head)
    "deberta": dict(family="deberta-v2", kind="encoder", config=dict(
        hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
        vocab_size=128100, max_position_embeddings=512, type_vocab_size=0, relative_attention=True,
        position_buckets=256, max_relative_positions=-1, pos_att_type=["p2c", "c2p"],
        position_biased_input=False, norm_rel_ebd="layer_norm", share_att_key=True, pad_token_id=0)),
    # sentence-transformers/all-MiniLM-L6-v2 (model=minilm; BERT encoder)
    "minilm": dict(family="bert", kind="encoder", config=dict(
        hidden_size=384, intermediate_size=1536, num_hidden_layers=6, num_attention_heads=12,
        vocab_size=30522, max_position_embeddings=512, type_vocab_size=2, pad_token_id=0)),
}


def architecture(name: str, **overrides):
    """The transformers config of the stored architecture ``name`` (``overrides`` replace its fields)."""
    import transformers as tf

    spec = SPECS[name]
    return tf.AutoConfig.for_model(spec["family"], **{**spec["config"], **overrides})
