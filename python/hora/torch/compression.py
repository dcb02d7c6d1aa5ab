"""Gradient compression for allreduce (Horovod's ``hvd.Compression``).

A compressor has ``compress(tensor) -> (compressed, ctx)`` and
``decompress(compressed, ctx) -> tensor``. The compressed tensor is what
travels; ``decompress`` restores the original dtype. Only floating-point
tensors are compressed; others pass through unchanged.

* ``Compression.none`` -- no compression.
* ``Compression.fp16`` -- floating tensors travel as float16.
* ``Compression.bf16`` -- floating tensors travel as bfloat16 (float32's range).
"""

import torch


class Compressor:
    """Interface for compressing and decompressing a tensor."""

    @staticmethod
    def compress(tensor):
        """Returns (compressed tensor, context for decompress)."""
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        """Returns the tensor restored from ``compress``'s output."""
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Passes tensors through unchanged."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


def _cast_compressor(wire_dtype):
    class _Cast(Compressor):
        @staticmethod
        def compress(tensor):
            if tensor.dtype.is_floating_point and tensor.dtype != wire_dtype:
                return tensor.type(wire_dtype), tensor.dtype
            return tensor, None

        @staticmethod
        def decompress(tensor, ctx):
            return tensor if ctx is None else tensor.type(ctx)

    return _Cast


class FP16Compressor(_cast_compressor(torch.float16)):
    """Floating-point tensors travel as float16."""


class BF16Compressor(_cast_compressor(torch.bfloat16)):
    """Floating-point tensors travel as bfloat16."""


class Compression:
    """The available compressors (``hvd.Compression.none`` / ``.fp16`` / ``.bf16``)."""

    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor
