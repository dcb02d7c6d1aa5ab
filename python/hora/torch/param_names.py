"""Which names and groups ``DistributedOptimizer`` gives its parameters
(Horovod's rules; :mod:`hora.torch.optimizer` uses them)."""


def noname(group, index):
    """Horovod's name of the ``index``-th parameter of parameter group
    ``group`` where no ``named_parameters`` was given."""
    return "allreduce.noname.%d.%d" % (group, index)


def parameter_names(param_groups, named_parameters):
    """``({param: name}, named)``: from ``named_parameters`` (a sequence of
    (name, parameter) tuples, which must hold every parameter of
    ``param_groups``, each name once), else by position."""
    if named_parameters is None:
        return {p: noname(gi, pi) for gi, g in enumerate(param_groups)
                for pi, p in enumerate(g["params"])}, False
    named = list(named_parameters)
    if any(not isinstance(x, tuple) or len(x) != 2 for x in named):
        raise ValueError("named_parameters should be a sequence of (name, parameter) "
                         "tuples, usually from model.named_parameters()")
    names = [n for n, _ in named]
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        raise ValueError("parameter names in named_parameters must be unique; "
                         "duplicates: %s" % ", ".join(dups))
    named_ids = {id(p) for _, p in named}
    all_params = [p for g in param_groups for p in g["params"]]
    unnamed = [i for i, p in enumerate(all_params) if id(p) not in named_ids]
    if unnamed:
        raise ValueError("named_parameters was given but the optimizer's parameters at "
                         "positions %s are not in it" % unnamed)
    return {p: n for n, p in named}, True


def plan_groups(groups, updated):
    """The grouped allreduces' members: ``groups`` an int n (``updated``,
    the parameters that need a gradient, split into n runs of consecutive
    ones; 0: none) or a list of lists of them (empty lists dropped)."""
    if groups is None or (isinstance(groups, int) and groups == 0):
        return []
    if isinstance(groups, int):
        if groups < 0:
            raise ValueError("groups must be a non-negative int or a list of lists of "
                             "parameters")
        d, r = divmod(len(updated), groups)
        runs = [updated[i * d + min(i, r):(i + 1) * d + min(i + 1, r)] for i in range(groups)]
        return [tuple(g) for g in runs if g]
    seen, out, known = set(), [], set(updated)
    for g in groups:
        g = tuple(g)
        for p in g:
            if p not in known:
                raise ValueError("groups: a parameter is not one this optimizer updates")
            if p in seen:
                raise ValueError("groups: a parameter appears in more than one group")
            seen.add(p)
        if g:
            out.append(g)
    return out
