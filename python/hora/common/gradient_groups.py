"""How one step's gradients are split into the fused groups they are
reduced in, and which are left local: Horovod's ``num_groups``,
``groups=`` and local variables (``register_local_source``,
``register_local_var``, the ``Partial*`` wrappers), shared by
``hora.tensorflow`` and ``hora.keras``.

Variables are told apart by identity (Horovod matches TensorFlow variables
by name; Keras 3 names every Dense layer's kernel "kernel").
"""


def check_groups(groups, what):
    """Horovod's ``groups=``: None, a positive number of groups, or a list of
    lists of variables. Returns ``(num_groups, lists)``; ValueError otherwise."""
    if groups is None:
        return 0, None
    if isinstance(groups, int) and not isinstance(groups, bool):
        if groups > 0:
            return groups, None
    elif isinstance(groups, (list, tuple)) and all(isinstance(g, (list, tuple))
                                                   for g in groups):
        return 0, [list(g) for g in groups]
    raise ValueError("%s: groups= takes a positive number of groups or a list of lists of "
                     "variables, got %r" % (what, groups))


def split(entries, num_groups=0, lists=None):
    """The groups of ``entries``, a list of ``(index, variable)`` of the
    gradients to reduce, as lists of indices. With ``lists`` (Horovod's
    ``groups=`` lists), the gradients of each list's variables are one group
    and every other gradient a group of its own; else ``num_groups`` shares
    (one group of all by default). Each group's indices ascend and groups
    come in the order of their first: a list's order, which may differ by
    rank (one built from a set), pairs no gradient with another variable's.
    A variable given twice (a repeated source) is in its group twice."""
    if lists is not None:
        where = {}
        for i, v in entries:
            where.setdefault(id(v), []).append(i)
        out = []
        for group in lists:
            members = sorted(i for v in group for i in where.pop(id(v), []))
            if members:
                out.append(members)
        out += [[i] for ids in where.values() for i in ids]
        return sorted(out)
    n = max(1, min(int(num_groups or 1), len(entries) or 1))
    return [[i for i, _ in entries[k::n]] for k in range(n) if entries[k::n]]


def group_name(name, members):
    """A group's collective name: by its first gradient's position, so that
    a rank whose gradients differ (a None gradient) meets no other group
    under its name (a stall report names what is missing) rather than
    another variable's."""
    return "%s.%d" % (name, members[0])


def local_layers_checked(local_layers, what):
    """``local_layers`` (a Keras layer, or a collection of them; None: none)
    as a list of layers, for the ``Partial*`` wrappers; ValueError naming
    what is not a layer."""
    import keras

    if local_layers is None:
        return []
    if isinstance(local_layers, keras.layers.Layer):
        return [local_layers]
    local_layers = list(local_layers)
    wrong = [type(x).__name__ for x in local_layers if not isinstance(x, keras.layers.Layer)]
    if wrong:
        raise ValueError("%s: local_layers must be Keras layers, got %s" % (what, ", ".join(wrong)))
    return local_layers


class LocalVariables:
    """The variables whose gradients stay on their rank (not reduced), and
    whether those gradients are divided by the number of ranks reducing the
    others (Horovod's ``scale_local_gradients``, True by default: the local
    gradient then weighs as a reduced average would)."""

    def __init__(self, scale=True):
        self.scale = bool(scale)
        self._ids = {}
        self._layers = []

    def add(self, variable):
        self._ids[id(variable)] = variable  # (held: the id stays this variable's)

    def add_layer(self, layer):
        """Every trainable variable ``layer`` has when gradients are reduced
        (a layer built after it is added counts too)."""
        self._layers.append(layer)

    def ids(self):
        """The ids of the local variables now (the layers' included): one
        look per reduction."""
        out = set(self._ids)
        for layer in self._layers:
            out.update(id(w) for w in layer.trainable_weights)
        return out
