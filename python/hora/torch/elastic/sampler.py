"""``ElasticSampler``: a dataset sharded over the ranks, which remembers how
much of the epoch was processed and reshards the rest after a reset.

As Horovod's: the epoch's order is ``range(len(dataset))``, shuffled by
``random.Random(seed + epoch)`` (so every rank has the same order, and a
Horovod job's order is reproduced); the first ``processed_num`` of it are
done; the rest is padded by repeating its head to a multiple of the world
size, and rank r takes every ``size()``-th index from r.
"""

import math
import random

import torch.utils.data

from hora.common import basics


class ElasticSampler(torch.utils.data.Sampler):
    """Reads ``rank()`` and ``size()`` now and at every ``reset()``: call
    ``hvd.init()`` first."""

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_num = 0
        self.reset()

    def set_epoch(self, epoch):
        """Starts epoch ``epoch`` from its beginning."""
        self.epoch = epoch
        self.processed_num = 0
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Counts a batch of ``batch_size`` as processed on every rank
        (``batch_idx`` is not used, as in Horovod)."""
        self.processed_num += batch_size * self.num_replicas

    def state_dict(self):
        return {"epoch": self.epoch, "processed_num": self.processed_num}

    def load_state_dict(self, state_dict):
        self.epoch = state_dict["epoch"]
        self.processed_num = state_dict["processed_num"]
        self.reset()

    def reset(self):
        """Reshards what is left of the epoch over the current world."""
        self.num_replicas = basics.size()
        self.rank = basics.rank()
        order = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        self.remaining_indices = order[self.processed_num:]
        self.num_samples = int(math.ceil(len(self.remaining_indices) / self.num_replicas))
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        indices = list(self.remaining_indices)
        indices += indices[:self.total_size - len(indices)]
        if len(indices) != self.total_size:
            raise RuntimeError("ElasticSampler: %d indices left cannot be padded to %d"
                               % (len(self.remaining_indices), self.total_size))
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples
