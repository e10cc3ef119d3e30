#!/usr/bin/env python3
"""Write a tiny, randomly initialised, fully local Qwen3-Omni (MoE) model directory.

For the real streaming runs: vllm-omni 0.30.0 on vLLM 0.30.0's CPU engines serving Qwen3-Omni's
three stages (a MoE thinker with audio and vision encoders -> a MoE talker with its code
predictor -> code2wav), with `async_chunk: true` as vllm-omni's own qwen3_omni_moe.yaml. Nothing
is downloaded: the tokenizer is the small byte-level BPE of make_tiny_model.py, laid out on
Qwen3-Omni's ids; the processor is transformers' Qwen3OmniMoeProcessor over Qwen2-VL's image and
video processors and Whisper's feature extractor; the weights are random (fixed seed).

What is kept real (transformers and vllm-omni rely on it):
  * the thinker vocabulary (152064 rows) and Qwen3-Omni's special token ids: 151643..151668
    (Qwen3's), <|audio_start|> 151669, <|audio_end|> 151670, <tts_pad> 151671, <tts_text_bos>
    151672, <tts_text_eod> 151673, <tts_text_bos_single> 151674, <|audio_pad|> 151675;
  * the role tokens vllm-omni's talker reads right after <|im_start|>: "system" 8948, "user" 872,
    "assistant" 77091 (Qwen3OmniMoeConfig's system/user/assistant_token_id);
  * the talker's codec vocabulary (3072; codes < 2048, specials pad 2148, bos 2149, eos 2150 -
    vllm-omni's stop token - nothink 2155, think bos/eos 2156/2157), the speakers (chelsie 2301,
    ethan 2302, aiden 2303), 16 code groups (code2wav hard-codes 16), code2wav's upsampling
    (8*5*4*3 * 2*2 = 1920 samples per frame, 24 kHz);
  * weight names in the hub checkpoint's layout (`thinker.`, `talker.`, `code2wav.`; one tensor
    per expert, `mlp.experts.<e>.{gate,up,down}_proj.weight`), config.json model_type
    "qwen3_omni_moe", architectures Qwen3OmniMoeForConditionalGeneration.

Everything else is tiny: widths 64 (thinker hidden 64 by default, `--thinker-hidden`), 4 experts
(2 per token) in the thinker and the talker, 2 thinker layers with the talker reading layer 1.

Deterministic: same arguments -> byte-identical files. Idempotent, checked and locked as
make_tiny_model.py (OUT_DIR/tiny_model_stamp.json: sizes and SHA-256). Bump VERSION whenever the output changes.

Usage: make_tiny_qwen3_omni.py OUT_DIR [--thinker-hidden N] [--seed S]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tiny_model as base  # noqa: E402

VERSION = 2  # 2: the talker's MoE experts initialised (they were left as allocated)
STAMP = base.STAMP

THINKER_VOCAB_SIZE = 152064
FIRST_SPECIAL_ID = 151643
SPECIAL_TOKENS = [  # (content, special) from 151643, as in Qwen3-Omni's tokenizer
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
    ("<|object_ref_start|>", True), ("<|object_ref_end|>", True), ("<|box_start|>", True),
    ("<|box_end|>", True), ("<|quad_start|>", True), ("<|quad_end|>", True),
    ("<|vision_start|>", True), ("<|vision_end|>", True), ("<|vision_pad|>", True),  # 151652-151654
    ("<|image_pad|>", True), ("<|video_pad|>", True),  # 151655, 151656
    ("<tool_call>", False), ("</tool_call>", False), ("<|fim_prefix|>", True), ("<|fim_middle|>", True),
    ("<|fim_suffix|>", True), ("<|fim_pad|>", True), ("<|repo_name|>", True), ("<|file_sep|>", True),
    ("<tool_response>", False), ("</tool_response>", False), ("<think>", False), ("</think>", False),
    ("<|audio_start|>", True), ("<|audio_end|>", True),  # 151669, 151670
    ("<tts_pad>", True), ("<tts_text_bos>", True), ("<tts_text_eod>", True), ("<tts_text_bos_single>", True),
    ("<|audio_pad|>", True),  # 151675
]
ROLE_IDS = {"user": 872, "system": 8948, "assistant": 77091}
NAMED_SPECIAL_TOKENS = {
    "image_token": "<|image_pad|>",
    "audio_token": "<|audio_pad|>",
    "video_token": "<|video_pad|>",
    "vision_bos_token": "<|vision_start|>",
    "vision_eos_token": "<|vision_end|>",
    "audio_bos_token": "<|audio_start|>",
    "audio_eos_token": "<|audio_end|>",
}
# Talker codec ids (the real talker_config's) and speakers.
TALKER_VOCAB_SIZE = 3072
CODEBOOK_SIZE = 2048
CODEC = {"codec_pad_id": 2148, "codec_bos_id": 2149, "codec_eos_token_id": 2150, "codec_nothink_id": 2155,
         "codec_think_bos_id": 2156, "codec_think_eos_id": 2157}
SPEAKERS = {"chelsie": 2301, "ethan": 2302, "aiden": 2303}
NUM_CODE_GROUPS = 16

CHAT_TEMPLATE = (
    "{%- for message in messages %}{%- if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{%- endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{%- if message['content'] is string %}{{ message['content'] }}{%- else %}"
    "{%- for content in message['content'] %}"
    "{%- if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{%- elif content['type'] == 'audio' or 'audio' in content or 'audio_url' in content %}"
    "<|audio_start|><|audio_pad|><|audio_end|>"
    "{%- elif content['type'] == 'video' or 'video' in content %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{%- elif 'text' in content %}{{ content['text'] }}{%- endif %}{%- endfor %}{%- endif %}"
    "<|im_end|>\n{%- endfor %}{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
)


def build_tokenizer():
    """make_tiny_model's BPE on Qwen3-Omni's ids, the role words on their real ids."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import AddedToken
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX, Qwen2Tokenizer

    bpe = Tokenizer(models.BPE())
    bpe.normalizer = normalizers.NFC()
    bpe.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=base.BPE_VOCAB_SIZE, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    # the role words as whole tokens: every chat turn starts with one
    corpus = base._corpus() + ["system user assistant\n"] * 200
    bpe.train_from_iterator(corpus, trainer=trainer)
    model = json.loads(bpe.to_str())["model"]
    trained = dict(model["vocab"])
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    if sorted(trained.values()) != list(range(len(trained))):
        raise RuntimeError("trained BPE ids are not contiguous")
    by_id = {i: t for t, i in trained.items()}
    ids = {i: f"<filler{i}>" for i in range(len(trained), FIRST_SPECIAL_ID)}
    ids.update(by_id)
    for word, want in ROLE_IDS.items():
        if word not in trained:
            raise RuntimeError(f"the BPE has no single token for {word!r}")
        have = trained[word]
        ids[have], ids[want] = ids[want], word  # swap: the role word lands on its real id
    vocab = {t: i for i, t in ids.items()}
    for i, (content, _) in enumerate(SPECIAL_TOKENS):
        vocab[content] = FIRST_SPECIAL_ID + i
    for i in range(FIRST_SPECIAL_ID + len(SPECIAL_TOKENS), THINKER_VOCAB_SIZE):
        vocab[f"<filler{i}>"] = i
    if len(vocab) != THINKER_VOCAB_SIZE or sorted(vocab.values()) != list(range(THINKER_VOCAB_SIZE)):
        raise RuntimeError("token collision while building the vocabulary")
    tok = Qwen2Tokenizer(
        vocab=vocab, merges=merges, unk_token=None, bos_token=None, eos_token="<|im_end|>",
        pad_token="<|endoftext|>", model_specific_special_tokens=NAMED_SPECIAL_TOKENS,
        model_max_length=65536, errors="replace", split_special_tokens=False, clean_up_tokenization_spaces=False,
    )
    tok.add_tokens([AddedToken(t, special=s, normalized=False) for t, s in SPECIAL_TOKENS])
    for i, (content, _) in enumerate(SPECIAL_TOKENS):
        if tok.convert_tokens_to_ids(content) != FIRST_SPECIAL_ID + i:
            raise RuntimeError(f"{content} did not get id {FIRST_SPECIAL_ID + i}")
    probe = tok.encode("<|im_start|>system\nx<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    for word, want in ROLE_IDS.items():
        if want not in probe:
            raise RuntimeError(f"{word!r} does not encode to {want} after <|im_start|>: {probe}")
    if len(tok) != THINKER_VOCAB_SIZE:
        raise RuntimeError(f"tokenizer has {len(tok)} tokens, want {THINKER_VOCAB_SIZE}")
    return tok


def build_processor(tokenizer):
    from transformers import Qwen2VLImageProcessor, Qwen2VLVideoProcessor, Qwen3OmniMoeProcessor, WhisperFeatureExtractor

    mean, std = [0.5, 0.5, 0.5], [0.5, 0.5, 0.5]
    pixels = dict(min_pixels=4096, max_pixels=1048576, patch_size=16, temporal_patch_size=2, merge_size=2)
    feature_extractor = WhisperFeatureExtractor(
        feature_size=128, sampling_rate=16000, hop_length=160, chunk_length=300, n_fft=400, padding_value=0.0,
        padding_side="right", return_attention_mask=True, dither=0.0)
    return Qwen3OmniMoeProcessor(
        image_processor=Qwen2VLImageProcessor(image_mean=mean, image_std=std, **pixels),
        video_processor=Qwen2VLVideoProcessor(image_mean=mean, image_std=std, **pixels),
        feature_extractor=feature_extractor, tokenizer=tokenizer, chat_template=CHAT_TEMPLATE)


def build_config(h: int):
    from transformers import Qwen3OmniMoeConfig

    if h % 32:
        raise SystemExit("--thinker-hidden must be a multiple of 32")
    head_dim = 32
    small = 64

    def rope(hd):
        return {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": base._mrope_section(hd),
                "interleaved": True, "mrope_interleaved": True}

    thinker_layers = 2
    accept_layer = 1
    cfg = Qwen3OmniMoeConfig(
        thinker_config=dict(
            audio_config=dict(d_model=32, encoder_layers=1, encoder_attention_heads=2, encoder_ffn_dim=64,
                              num_mel_bins=128, max_source_positions=1500, n_window=50, n_window_infer=800,
                              output_dim=h, conv_chunksize=500, downsample_hidden_size=32),
            vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, in_channels=3,
                               patch_size=16, spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=h,
                               num_position_embeddings=2304, deepstack_visual_indexes=[0], image_size=768,
                               apply_vit_abs_pos_embed=True),
            text_config=dict(vocab_size=THINKER_VOCAB_SIZE, hidden_size=h, intermediate_size=2 * small,
                             num_hidden_layers=thinker_layers, num_attention_heads=max(2, h // 64 * 2),
                             num_key_value_heads=1, head_dim=head_dim, max_position_embeddings=32768,
                             rms_norm_eps=1e-6, rope_parameters=rope(head_dim), moe_intermediate_size=32,
                             num_experts=4, num_experts_per_tok=2, norm_topk_prob=True, decoder_sparse_step=1,
                             mlp_only_layers=[]),
            audio_token_id=151675, image_token_id=151655, video_token_id=151656, audio_start_token_id=151669,
            position_id_per_seconds=13, user_token_id=ROLE_IDS["user"], seconds_per_chunk=2,
            audio_end_token_id=151670,
        ),
        talker_config=dict(
            text_config=dict(vocab_size=TALKER_VOCAB_SIZE, hidden_size=small, intermediate_size=2 * small,
                             num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, head_dim=32,
                             max_position_embeddings=32768, rms_norm_eps=1e-6, rope_parameters=rope(32),
                             moe_intermediate_size=32, shared_expert_intermediate_size=small, num_experts=4,
                             num_experts_per_tok=2, norm_topk_prob=False, decoder_sparse_step=1, mlp_only_layers=[]),
            code_predictor_config=dict(vocab_size=CODEBOOK_SIZE, hidden_size=small, intermediate_size=2 * small,
                                       num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1, head_dim=32,
                                       max_position_embeddings=32768, rms_norm_eps=1e-6,
                                       rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
                                       num_code_groups=NUM_CODE_GROUPS),
            num_code_groups=NUM_CODE_GROUPS, thinker_hidden_size=h, accept_hidden_layer=accept_layer,
            speaker_id=dict(SPEAKERS), audio_token_id=151675, image_token_id=151655, video_token_id=151656,
            vision_start_token_id=151652, audio_start_token_id=151669, position_id_per_seconds=13,
            spatial_merge_size=2, seconds_per_chunk=2, audio_end_token_id=151670, **CODEC,
        ),
        code2wav_config=dict(codebook_size=CODEBOOK_SIZE, hidden_size=32, num_attention_heads=2, num_key_value_heads=2,
                             intermediate_size=64, num_hidden_layers=1, num_quantizers=NUM_CODE_GROUPS,
                             upsample_rates=[8, 5, 4, 3], upsampling_ratios=[2, 2], decoder_dim=64,
                             sliding_window=72, max_position_embeddings=8000,
                             rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        enable_audio_output=True,
        system_token_id=ROLE_IDS["system"], user_token_id=ROLE_IDS["user"], assistant_token_id=ROLE_IDS["assistant"],
    )
    cfg.architectures = ["Qwen3OmniMoeForConditionalGeneration"]
    cfg.dtype = "bfloat16"
    return cfg


_FUSED = re.compile(r"^(.*\.mlp\.experts)\.(gate_up_proj|down_proj)$")


def hub_layout(name: str, t):
    """(name, tensor) pairs in the hub checkpoint's layout: transformers 5 keeps a MoE layer's
    experts fused ([E, 2I, H] gate_up, [E, H, I] down); the published checkpoints, and vLLM's
    loader, have one weight per expert and projection."""
    m = _FUSED.match(name)
    if not m:
        return [(name, t)]
    prefix, kind = m.groups()
    out = []
    for e in range(t.shape[0]):
        if kind == "gate_up_proj":
            gate, up = t[e].chunk(2, dim=0)
            out += [(f"{prefix}.{e}.gate_proj.weight", gate), (f"{prefix}.{e}.up_proj.weight", up)]
        else:
            out.append((f"{prefix}.{e}.down_proj.weight", t[e]))
    return out


def build_weights(cfg, seed: int):
    import torch
    from transformers import Qwen3OmniMoeForConditionalGeneration

    torch.manual_seed(seed)
    model = Qwen3OmniMoeForConditionalGeneration(cfg)
    # transformers leaves the talker's MoE expert weights as allocated (uninitialised memory:
    # they differed between two builds); they are drawn here from a generator of their own, in
    # name order, so the model is the same bytes every time it is made.
    gen = torch.Generator().manual_seed(seed + 1)
    std = float(getattr(cfg, "initializer_range", 0.02))
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if name.startswith("talker.") and ".mlp.experts." in name:
                p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float32).mul_(std).to(p.dtype))
    tensors = {}
    for name, t in model.state_dict().items():
        for n, v in hub_layout(name, t.detach()):
            # code2wav stays float32 as transformers runs it; everything else bfloat16 as published
            dtype = torch.float32 if n.startswith("code2wav.") else torch.bfloat16
            tensors[n] = v.to(dtype).contiguous()
    del model
    return dict(sorted(tensors.items()))


def _stamp_args(args) -> dict:
    return {"model": "qwen3_omni_moe", "version": VERSION, "thinker_hidden": args.thinker_hidden, "seed": args.seed}


def _write(tmp: str, args) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch
    from safetensors.torch import save_file

    torch.set_num_threads(1)
    t0 = time.time()
    cfg = build_config(args.thinker_hidden)
    cfg.save_pretrained(tmp)
    tok = build_tokenizer()
    build_processor(tok).save_pretrained(tmp)
    tok.save_pretrained(tmp)
    print(f"[make_tiny_qwen3_omni] config/tokenizer/processor in {time.time() - t0:.1f}s", file=sys.stderr)
    t1 = time.time()
    tensors = build_weights(cfg, args.seed)
    save_file(tensors, os.path.join(tmp, "model.safetensors"), metadata={"format": "pt"})
    n_params = sum(t.numel() for t in tensors.values())
    print(f"[make_tiny_qwen3_omni] {n_params / 1e6:.1f}M parameters written in {time.time() - t1:.1f}s",
          file=sys.stderr)
    files = {}
    for root, _, names in os.walk(tmp):
        for n in names:
            p = os.path.join(root, n)
            os.chmod(p, 0o644)
            with open(p, "rb") as fh:  # checked at each use (make_tiny_model._is_complete)
                digest = hashlib.file_digest(fh, "sha256").hexdigest()
            files[os.path.relpath(p, tmp)] = {"size": os.path.getsize(p), "sha256": digest}
    with open(os.path.join(tmp, STAMP), "w") as f:
        json.dump({"args": _stamp_args(args), "files": dict(sorted(files.items()))}, f, indent=2, sort_keys=True)
        f.write("\n")


def make(out_dir: str, thinker_hidden: int = 64, seed: int = 0) -> str:
    """Create (or reuse) the tiny Qwen3-Omni at out_dir; returns its absolute path."""
    args = argparse.Namespace(thinker_hidden=thinker_hidden, seed=seed)
    return base.make_once(os.path.abspath(out_dir), _stamp_args(args), lambda tmp: _write(tmp, args))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("out_dir")
    p.add_argument("--thinker-hidden", type=int, default=64, help="thinker width (default 64)")
    p.add_argument("--seed", type=int, default=0, help="weight seed (default 0)")
    a = p.parse_args(argv)
    t0 = time.time()
    out = make(a.out_dir, a.thinker_hidden, a.seed)
    print(f"[make_tiny_qwen3_omni] {out} ready ({time.time() - t0:.1f}s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
