"""The training study's workloads: models, their input sizes, synthetic data.

Imported by worker.py and the tests; nothing to run on its own.

Models are torchvision's (random weights, no download) with a 10-class head,
plus "tiny" (a few hundred parameters, for the correctness tests only).
Input images are square, 3 channels:

    model         input   why
    resnet18      32x32   a CIFAR-sized image; the model accepts much smaller
    resnet50      32x32   (adaptive pooling), but below 32 the last stages
    mobilenet_v2  32x32   work on 1x1 maps and the workload stops being one
    alexnet       63x63   the smallest it accepts: its three 3x3/2 max-pools
                          need a 3x3 map, which the 11x11/4 stem gives from 63
    tiny          8x8     correctness tests only

test_train_study.py checks that alexnet fails at 62 and runs at 63.
Each rank's data is one fixed batch (as in Horovod's synthetic benchmark: no
data loading is timed) drawn from a generator seeded with seed*1000 + rank, so
ranks see different data and have different gradients.
"""

import torch
import torch.nn as nn

NUM_CLASSES = 10

# Square input side per model (see the table above).
INPUT_SIZE = {
    "resnet18": 32,
    "resnet50": 32,
    "mobilenet_v2": 32,
    "alexnet": 63,
    "tiny": 8,
}

MODELS = ("resnet18", "resnet50", "mobilenet_v2", "alexnet")


def _tiny():
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(4, NUM_CLASSES))


def build_model(name, seed=0):
    """The model `name` with weights drawn from `seed` (the same on every rank)."""
    if name not in INPUT_SIZE:
        raise ValueError("unknown model %r: expected one of %s" % (name, ", ".join(INPUT_SIZE)))
    torch.manual_seed(seed)
    if name == "tiny":
        return _tiny()
    import torchvision.models as tv_models
    return getattr(tv_models, name)(num_classes=NUM_CLASSES)


def synthetic_batch(rank, batch, image_size, seed=0):
    """(images, labels) of one rank: a fixed batch from seed*1000 + rank."""
    gen = torch.Generator().manual_seed(seed * 1000 + rank)
    images = torch.randn(batch, 3, image_size, image_size, generator=gen)
    labels = torch.randint(0, NUM_CLASSES, (batch,), generator=gen)
    return images, labels


def trainable(model):
    """The parameters that get gradients, in a fixed order."""
    return [p for p in model.parameters() if p.requires_grad]


def param_count(model):
    return sum(p.numel() for p in trainable(model))


def gradient_bytes(model):
    """Bytes of gradient each rank exchanges per step (float32 parameters)."""
    return sum(p.numel() * p.element_size() for p in trainable(model))
