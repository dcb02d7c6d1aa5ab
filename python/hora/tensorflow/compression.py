"""Gradient compression for TensorFlow allreduce (Horovod's ``hvd.Compression``):
``Compression.none``, and ``Compression.fp16`` (floating tensors travel as
float16 and come back in their own dtype)."""

import tensorflow as tf


class NoneCompressor:
    """Passes tensors through unchanged."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor:
    """Floating-point tensors travel as float16."""

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating and tensor.dtype != tf.float16:
            return tf.cast(tensor, tf.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor if ctx is None else tf.cast(tensor, ctx)


class Compression:
    """The available compressors (``hvd.Compression.none`` / ``.fp16``)."""

    none = NoneCompressor
    fp16 = FP16Compressor
