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
    (one group of all by default)."""
    if lists is not None:
        where = {id(v): i for i, v in entries}
        out = []
        for group in lists:
            members = [where.pop(id(v)) for v in group if id(v) in where]
            if members:
                out.append(members)
        return out + [[i] for i, v in entries if id(v) in where]
    n = max(1, min(int(num_groups or 1), len(entries) or 1))
    return [[i for i, _ in entries[k::n]] for k in range(n) if entries[k::n]]


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

    def __contains__(self, variable):
        if id(variable) in self._ids:
            return True
        return any(w is variable for layer in self._layers for w in layer.trainable_weights)
