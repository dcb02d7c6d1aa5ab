"""A Horovod training script with one line changed (the import): the drop-in
check of issue 25, run by tests/python/horovod_script_test.sh under horarun,
mpirun and srun-style variables.

It uses what Horovod users use: DistributedOptimizer with named parameters,
broadcast_parameters / broadcast_optimizer_state (model=), a sparse
embedding (sparse_as_dense, as Horovod's docs advise with join), metric
averaging with allreduce, uneven data per rank with join, and the last
joiner's weights broadcast to all. Exits non-zero unless accuracy improves
and every rank ends with the same weights.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

import hora.torch as hvd  # was: import horovod.torch as hvd

hvd.init()
torch.manual_seed(1234)

VOCAB, CLASSES = 50, 4


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 16, sparse=True)
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, CLASSES)

    def forward(self, tokens):
        h = self.embed(tokens).mean(1)
        return self.fc2(F.relu(self.fc1(h)))


def make_data(seed, n):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, CLASSES, (n,), generator=g)
    # Tokens of an example's class (token % CLASSES == label), plus noise.
    tokens = torch.randint(0, VOCAB // CLASSES, (n, 6), generator=g) * CLASSES + labels[:, None]
    noise = torch.randint(0, VOCAB, (n, 6), generator=g)
    keep = torch.rand(n, 6, generator=g) < 0.6
    return torch.where(keep, tokens, noise), labels


model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05 * hvd.size(), momentum=0.9)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                     sparse_as_dense=True)
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0, model=model)

# Uneven shards: rank r has 20 + 3r batches of 16.
tokens, labels = make_data(100 + hvd.rank(), 16 * (20 + 3 * hvd.rank()))
test_tokens, test_labels = make_data(7, 512)


def accuracy():
    with torch.no_grad():
        acc = (model(test_tokens).argmax(1) == test_labels).float().mean()
    return hvd.allreduce(acc, name="avg_accuracy").item()  # metric averaging


before = accuracy()
for epoch in range(3):
    model.train()
    for i in range(0, len(tokens), 16):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(tokens[i:i + 16]), labels[i:i + 16])
        loss.backward()
        optimizer.step()
    last = hvd.join()  # ranks with less data wait here, contributing zeros
    hvd.broadcast_parameters(model.state_dict(), root_rank=last)
    avg_loss = hvd.allreduce(loss.detach(), name="avg_loss").item()
    if hvd.rank() == 0:
        print("epoch %d: loss %.4f" % (epoch, avg_loss))
after = accuracy()

checksum = sum(float(p.detach().double().sum()) for p in model.parameters())
every = hvd.allgather_object(checksum)
same = all(c == every[0] for c in every)
if hvd.rank() == 0:
    print("accuracy %.3f -> %.3f, weights identical on %d ranks: %s"
          % (before, after, hvd.size(), same))
assert same, every
assert after > before + 0.2, (before, after)
print("rank %d: OK" % hvd.rank())
