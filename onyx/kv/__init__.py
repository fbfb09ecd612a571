"""The paged KV cache.

- `pool.py`: `PagedKVPool`, fixed-size blocks shared by every sequence (reference counts, a
  prefix cache of finished prompts, copy-on-write);
- `sequence.py`: `PagedSequence` (a block table and a length: O(1) rollback, fork, free) and
  `PagedLayerCache`, the per-layer cache object mlx-lm's attention calls;
- `views.py`: the contiguous working views attention reads, one slot per live sequence;
- `ragged.py`: the layout of a batched step, many sequences' rows in one forward.
"""
import onyx.cpu  # noqa: F401,I001 - OpenBLAS preloaded before MLX (Linux)
