"""Least-squares fit of a Link (alpha, beta, gamma) to measured allreduce times.

Every formula in costs.py is linear in alpha, beta and gamma, so a point
(algorithm, n ranks, m bytes, measured t) gives one row
[A, B, C] . [alpha, beta, gamma] = t, with A, B, C read off the formula by
evaluating it on the unit links (1,0,0), (0,1,0), (0,0,1). The rows are
weighted by 1/t, so the fit minimises relative error (otherwise the largest
messages decide everything). Non-negative least squares gives a start; a
robust fit (soft-L1 loss on the relative residuals, scipy least_squares)
then keeps a few points disturbed by other processes on the machine from
pulling the parameters.

A point measured through the engine (hora-engine-bench --tensors 1, "via":
"engine") also holds one engine cycle, the bit-vector AND allreduce
(control.fast_cycle), which is linear in alpha and beta too and is added to
its row.

gamma is nearly collinear with beta in allreduce timings (the ring's
coefficients are 2:1 for every n), so calibrate.py measures it on its own
(the reduction kernel) and passes it here as fixed; fit() then solves for
alpha and beta only. Used by calibrate.py and validate.py; tested by
test_model.py.
"""

import numpy as np
from scipy.optimize import least_squares, nnls

import control
import costs

UNIT = (costs.Link(1.0, 0.0, 0.0), costs.Link(0.0, 1.0, 0.0), costs.Link(0.0, 0.0, 1.0))


def predict(link, algo, n, m, via="bench"):
    t = costs.FLAT[algo](n, m, link)
    if via == "engine":
        t += control.fast_cycle(n, link, control.ControlParams())
    return t


def coefficients(algo, n, m, via="bench"):
    """(A, B, C): time = A alpha + B beta + C gamma on one kind of link."""
    return tuple(predict(u, algo, n, m, via) for u in UNIT)


def fit(points, gamma=None, robust=True):
    """points: [{"algo", "n", "m", "t"}] (t in seconds, > 0).
    Returns {"alpha", "beta", "gamma", "points", "mean_abs_rel_err",
    "max_abs_rel_err"}; each point gains "pred" and "rel_err"."""
    if not points:
        raise ValueError("no points to fit")
    rows, ys = [], []
    for p in points:
        if p["t"] <= 0:
            raise ValueError("non-positive time in point %r" % (p,))
        a, b, c = coefficients(p["algo"], p["n"], p["m"], p.get("via", "bench"))
        w = 1.0 / p["t"]
        if gamma is None:
            rows.append([a * w, b * w, c * w])
            ys.append(1.0)
        else:
            rows.append([a * w, b * w])
            ys.append((p["t"] - c * gamma) * w)
    # Scale the columns to order one so nnls is well conditioned.
    A = np.array(rows)
    scale = A.max(axis=0)
    scale[scale == 0] = 1.0
    As, y = A / scale, np.array(ys)
    x0, _ = nnls(As, y)
    if robust and len(ys) > As.shape[1]:
        x0 = least_squares(lambda v: As @ v - y, np.maximum(x0, 1e-9), bounds=(0, np.inf),
                           loss="soft_l1", f_scale=0.1).x
    x = x0 / scale
    g = float(x[2]) if gamma is None else float(gamma)
    link = costs.Link(float(x[0]), float(x[1]), g)
    out = []
    for p in points:
        q = dict(p)
        q["pred"] = predict(link, p["algo"], p["n"], p["m"], p.get("via", "bench"))
        q["rel_err"] = (q["pred"] - p["t"]) / p["t"]
        out.append(q)
    errs = np.abs([q["rel_err"] for q in out])
    return {"alpha": link.alpha, "beta": link.beta, "gamma": link.gamma, "points": out,
            "mean_abs_rel_err": float(errs.mean()), "max_abs_rel_err": float(errs.max())}


def fit_control(rows):
    """Control-plane constants from hora-engine-bench rows (np, tensors,
    cache, step_p50_us, slow_cycles, coord_bytes; cache on and off per np):
    - request / response bytes per tensor: least squares on rank 0's
      coordinator bytes, (n-1)(8 S + T q) + 8 S + T s with S slow cycles;
    - per_request_s (c) and per_tensor_s (r): a robust non-negative fit
      (soft-L1) of the step time the cache saves, off - on = T r + n T c
      (the coordinator decodes n T requests; every rank handles its own T),
      over every np (the soft-L1 loss limits what the scheduling noise of
      more ranks than cores does to the fit);
    - engine_per_tensor_s (e): the cached step time per tensor at the
      smallest np (meaningful for tiny tensors, whose data costs nothing)."""
    A, y, D, d = [], [], [], []
    for off in (r for r in rows if r["cache"] == "off"):
        n, T, S = off["np"], off["tensors"], off["slow_cycles"]
        A.append([(n - 1) * T, T])
        y.append(off["coord_bytes"] - 8 * S * n)
        on = [r for r in rows if r["cache"] == "on" and r["np"] == n]
        if on:
            D.append([T, n * T])
            d.append((off["step_p50_us"] - on[0]["step_p50_us"]) * 1e-6)
    if not A:
        raise ValueError("no cache-off rows to fit the control plane to")
    if len({a[0] for a in A}) >= 2:
        (q, s), *_ = np.linalg.lstsq(np.array(A, float), np.array(y, float), rcond=None)
    else:  # one np: requests and responses alike
        q = s = y[0] / (A[0][0] + A[0][1])
    ons = sorted((r for r in rows if r["cache"] == "on"), key=lambda r: r["np"])
    e = ons[0]["step_p50_us"] * 1e-6 / ons[0]["tensors"] if ons else None
    out = {"request_bytes": float(q), "response_bytes": float(s), "per_request_s": None,
           "engine_per_tensor_s": e,
           "per_tensor_s": None, "saved_s_by_np": dict(zip((r[1] // r[0] for r in D), d))}
    use = list(range(len(D)))
    if len(use) >= 2:
        M = np.array([D[i] for i in use], float) * 1e6
        v = np.array([d[i] for i in use], float) * 1e6
        x0, _ = nnls(M, v)
        x = least_squares(lambda p: M @ p - v, np.maximum(x0, 1e-6), bounds=(0, np.inf),
                          loss="soft_l1", f_scale=max(1.0, 0.1 * float(np.median(np.abs(v))))).x
        out.update(per_tensor_s=float(x[0]), per_request_s=float(x[1]),
                   fitted_on_np=[D[i][1] // D[i][0] for i in use])
    return out


def link_of(params):
    return costs.Link(params["alpha"], params["beta"], params["gamma"])
