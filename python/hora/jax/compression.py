"""Compression of what allreduce sends (``hvd.Compression``, as
``hora.torch``'s and ``hora.tensorflow``'s): ``compress(x) -> (sent, ctx)``
and ``decompress(sent, ctx) -> x``, both JAX operations (usable inside
``jax.jit``). Only floating-point arrays are compressed; others pass through.

* ``Compression.none``: sent as they are.
* ``Compression.fp16``: floating arrays travel as float16 (bfloat16 ones
  too, whose range float16's is smaller than: as Horovod's compressor).
* ``Compression.bf16``: floating arrays travel as bfloat16 (float32's range).
"""

import jax.numpy as jnp


class Compressor:
    """Compresses an array for the wire and restores it."""

    @staticmethod
    def compress(x):
        """(the array sent, the context for ``decompress``)."""
        raise NotImplementedError

    @staticmethod
    def decompress(x, ctx):
        """The array ``compress`` took, from what was received."""
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Sends arrays as they are."""

    @staticmethod
    def compress(x):
        return x, None

    @staticmethod
    def decompress(x, ctx):
        return x


def _cast_to(wire):
    class _Cast(Compressor):
        @staticmethod
        def compress(x):
            if jnp.issubdtype(x.dtype, jnp.floating) and x.dtype != wire:
                return x.astype(wire), x.dtype
            return x, None

        @staticmethod
        def decompress(x, ctx):
            return x if ctx is None else x.astype(ctx)

    return _Cast


class FP16Compressor(_cast_to(jnp.float16)):
    """Floating-point arrays travel as float16."""


class BF16Compressor(_cast_to(jnp.bfloat16)):
    """Floating-point arrays travel as bfloat16."""


class Compression:
    """The compressors: ``Compression.none``, ``.fp16``, ``.bf16``."""

    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor
