"""The nested-logit phenomenological model: loss landscape, gradients and trajectories.

Three scalars stand for the whole induction circuit [docs/science.md section 4, reconstruction]:

- ``beta1``: strength of the layer-1 previous-token head, ``s1 = sigmoid(beta1)``
  (the model's ILA1);
- ``alpha``: how sharply the layer-2 query picks the label tokens of its own class,
  ``p = B e^(alpha s1) / (B e^(alpha s1) + N - B)`` (attention on the correct labels, the model's
  TILA2);
- ``xi``: how much the classifier trusts the attended label, giving logits ``z_c = xi p`` for the
  correct label, ``z_o = xi (1 - p) / (n - 1)`` for each of the ``n - 1 = N/B - 1`` other context
  labels and ``0`` for the ``L - n`` absent labels.

The loss of one sequence is the cross-entropy of those logits,
``loss = -z_c + log(e^z_c + (n - 1) e^z_o + (L - n))``.

The equations are a reconstruction (the paper describes the model but does not publish this exact
form); they have the published properties, which the tests check: at the origin
``d loss / d xi = 1/L - 1/n`` (negative iff ``L > n``, so ``xi`` grows first and the accuracy moves
from ``1/L`` to ``1/n``); at ``L = n`` the origin is a critical point; ``d loss / d alpha = 0`` when
``xi = 0`` and ``d loss / d beta1 = 0`` when ``alpha = 0``, so the three switch on in the order
``xi -> alpha -> beta1``; gradient descent from a small start (``xi = alpha = 0``, ``beta1 << 0``,
i.e. a weak previous-token head) has a long plateau near ``log n`` and then a cliff.

The form is pluggable: every function that needs the loss accepts ``loss_fn(beta1, alpha, xi, L, N,
B) -> float``; its gradient is then taken by central finite differences. The derived columns ``s1``,
``p`` and ``cla`` always use the definitions above; ``acc`` is ``exp(-loss)``, the probability the
model gives to the correct label, which for the default form equals ``softmax(z)_c``.

Trajectories are returned as pandas DataFrames with columns
``t, beta1, alpha, xi, s1, p, loss, acc, cla`` (discrete descent adds ``step``); model time ``t`` is
``step * lr`` for gradient descent.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from interp.analysis.cliff import Cliff, cliff_window_drop, detect_cliff
from interp.io.errors import DidNotConverge

__all__ = [
    "MAX_FLOW_EVALS",
    "PARAM_NAMES",
    "FlowDidNotConverge",
    "Cliff",
    "LossFn",
    "check_task",
    "cliff_window_drop",
    "detect_cliff",
    "flow",
    "gradient",
    "gradient_descent",
    "gradient_flow",
    "landscape_grid",
    "loss",
    "quantities",
    "trajectory_frame",
]

PARAM_NAMES = ("beta1", "alpha", "xi")

LossFn = Callable[[float, float, float, float, int, int], float]
"""A user loss form ``loss_fn(beta1, alpha, xi, L, N, B) -> float``."""

# Central finite-difference step for user loss forms: ~ cube root of float64 eps, the step that
# balances truncation and rounding error for a central difference.
_FD_STEP = 6e-6
# The most gradient evaluations one integration may take. The fits of real curves take at most
# about 1,200 (a 100-point cliff curve, its bootstrap and the forecast bank); a flat or
# meaningless curve drives the solver into stiff regions where it never finishes.
MAX_FLOW_EVALS = 20_000


class FlowDidNotConverge(DidNotConverge):
    """:func:`gradient_flow` took more than its budget of gradient evaluations."""


def check_task(L: float, N: int, B: int) -> int:
    """Validates ``(L, N, B)`` and returns the number of distinct context labels ``n = N // B``.

    ``L`` may be any real number ``>= n`` (the model is smooth in ``L``, which lets predictions
    approach ``L = n`` continuously); ``N`` and ``B`` are integers.

    Raises:
        ValueError: naming the offending parameter and its allowed values.
    """
    if int(N) != N or N < 2:
        raise ValueError(f"N must be an integer >= 2, got {N!r}")
    if int(B) != B or B < 1 or B >= N or N % B != 0:
        raise ValueError(f"B must be an integer with 1 <= B < N and B dividing N={N}, got {B!r}")
    n = int(N) // int(B)
    if not np.isfinite(L) or L < n:
        raise ValueError(
            f"L must be >= n = N/B = {n} (the labels in a context are distinct), got {L!r}"
        )
    return n


def _parts(beta1, alpha, xi, L, N, B):
    """Vectorised nested-logit pieces: ``s1, p, loss, acc, cla`` (numpy broadcasting)."""
    n = N // B
    beta1, alpha, xi = (np.asarray(v, dtype=float) for v in (beta1, alpha, xi))
    s1 = 0.5 * (1.0 + np.tanh(0.5 * beta1))  # overflow-free sigmoid
    u = alpha * s1
    # p = B e^u / (B e^u + N - B) = sigmoid(u + log(B / (N - B)))
    p = 0.5 * (1.0 + np.tanh(0.5 * (u + math.log(B / (N - B)))))
    zc = xi * p
    zo = xi * (1.0 - p) / (n - 1)
    m = np.maximum(np.maximum(zc, zo), 0.0)  # log-sum-exp shift
    ec, eo, ea = np.exp(zc - m), np.exp(zo - m), np.exp(-m)
    Z = ec + (n - 1) * eo + (L - n) * ea
    loss_ = m + np.log(Z) - zc
    cla = (ec + (n - 1) * eo) / Z
    return s1, p, loss_, np.exp(-loss_), cla


def loss(beta1, alpha, xi, *, L: float, N: int, B: int) -> np.ndarray | float:
    """Nested-logit loss [docs/science.md section 4, reconstruction]; broadcasts over arrays.

    Args:
        beta1: layer-1 strength (``s1 = sigmoid(beta1)``).
        alpha: layer-2 inverse temperature on the item-query match.
        xi: classifier gain on the attended label.
        L: number of labels (real, ``>= n``).
        N: context pairs.
        B: burstiness (copies of each context class); ``n = N / B``.

    Returns:
        ``-z_c + log(e^z_c + (n-1) e^z_o + (L-n))``, a float for scalar input.
    """
    check_task(L, N, B)
    out = _parts(beta1, alpha, xi, L, N, B)[2]
    return float(out) if np.ndim(out) == 0 else out


def quantities(
    beta1, alpha, xi, *, L: float, N: int, B: int, loss_fn: LossFn | None = None
) -> dict[str, np.ndarray]:
    """Derived quantities of the model at given parameters (arrays broadcast).

    Args:
        beta1, alpha, xi: model parameters (scalars or arrays).
        L, N, B: task (see :func:`loss`).
        loss_fn: optional user loss form; replaces ``loss`` and ``acc = exp(-loss)``.

    Returns:
        dict with ``s1`` (model ILA1), ``p`` (model TILA2), ``loss``, ``acc`` (probability of the
        correct label) and ``cla`` (probability mass on labels present in the context).
    """
    check_task(L, N, B)
    s1, p, loss_, acc, cla = _parts(beta1, alpha, xi, L, N, B)
    if loss_fn is not None:
        vec = np.vectorize(lambda a, b, c: float(loss_fn(a, b, c, L, N, B)), otypes=[float])
        loss_ = vec(beta1, alpha, xi)
        acc = np.exp(-loss_)
    return {"s1": s1, "p": p, "loss": loss_, "acc": acc, "cla": cla}


def _grad_scalar(b1: float, a: float, xi: float, L: float, N: int, B: int, n: int):
    """Analytic gradient ``(d/d beta1, d/d alpha, d/d xi)`` with plain floats (fast path).

    With ``q_c, q_o`` the softmax probabilities of the correct and of one other context label:
    ``dl/dxi = (q_c - 1) p + q_o (1 - p)``, ``dl/dp = xi (q_c - 1 - q_o)``,
    ``dp/du = p (1 - p)`` with ``u = alpha s1``, ``du/dalpha = s1``,
    ``du/dbeta1 = alpha s1 (1 - s1)``.
    """
    s1 = 1.0 / (1.0 + math.exp(-b1)) if b1 >= 0 else math.exp(b1) / (1.0 + math.exp(b1))
    e = B * math.exp(min(a * s1, 700.0))
    p = e / (e + (N - B))
    zc = xi * p
    zo = xi * (1.0 - p) / (n - 1)
    m = max(zc, zo, 0.0)
    ec = math.exp(zc - m)
    eo = math.exp(zo - m)
    Z = ec + (n - 1) * eo + (L - n) * math.exp(-m)
    qc = ec / Z
    qo = eo / Z
    gu = xi * (qc - 1.0 - qo) * p * (1.0 - p)
    return gu * a * s1 * (1.0 - s1), gu * s1, (qc - 1.0) * p + qo * (1.0 - p)


def _grad_fd(b1: float, a: float, xi: float, L: float, N: int, B: int, loss_fn: LossFn):
    """Central finite-difference gradient of a user loss form."""
    x = [b1, a, xi]
    g = []
    for i in range(3):
        h = _FD_STEP * max(1.0, abs(x[i]))
        xp, xm = list(x), list(x)
        xp[i] += h
        xm[i] -= h
        g.append((float(loss_fn(*xp, L, N, B)) - float(loss_fn(*xm, L, N, B))) / (2 * h))
    return g[0], g[1], g[2]


def gradient(
    beta1: float,
    alpha: float,
    xi: float,
    *,
    L: float,
    N: int,
    B: int,
    loss_fn: LossFn | None = None,
) -> np.ndarray:
    """Gradient of the loss with respect to ``(beta1, alpha, xi)``.

    Args:
        beta1, alpha, xi: the point (scalars).
        L, N, B: task (see :func:`loss`).
        loss_fn: optional user loss form, differentiated by central finite differences; the
            default form uses the analytic gradient.

    Returns:
        array ``[d/d beta1, d/d alpha, d/d xi]``.
    """
    n = check_task(L, N, B)
    if loss_fn is None:
        return np.array(_grad_scalar(float(beta1), float(alpha), float(xi), L, N, B, n))
    return np.array(_grad_fd(float(beta1), float(alpha), float(xi), L, N, B, loss_fn))


def _start(
    start: Sequence[float] | Mapping[str, float], names: Sequence[str] = PARAM_NAMES
) -> tuple[float, ...]:
    """The start as a tuple in the order of ``names`` (any number of parameters)."""
    names = tuple(names)
    if isinstance(start, Mapping):
        missing = [k for k in names if k not in start]
        if missing:
            raise ValueError(f"start must have keys {names}, missing {missing}")
        vals = [start[k] for k in names]
    else:
        vals = list(start)
        if len(vals) != len(names):
            raise ValueError(f"start must be ({', '.join(names)}), got {start!r}")
    out = tuple(float(v) for v in vals)
    if not all(math.isfinite(v) for v in out):
        raise ValueError(f"start must be finite, got {start!r}")
    return out


def trajectory_frame(
    t, params: np.ndarray, *, L: float, N: int, B: int, loss_fn: LossFn | None = None
) -> pd.DataFrame:
    """Builds the standard trajectory DataFrame from times and parameters ``[time, 3]``."""
    params = np.asarray(params, dtype=float).reshape(-1, len(PARAM_NAMES))
    b1, a, xi = params.T
    q = quantities(b1, a, xi, L=L, N=N, B=B, loss_fn=loss_fn)
    return pd.DataFrame(
        {"t": np.asarray(t, dtype=float), "beta1": b1, "alpha": a, "xi": xi}
        | {k: q[k] for k in ("s1", "p", "loss", "acc", "cla")}
    )


def gradient_descent(
    start: Sequence[float] | Mapping[str, float],
    *,
    L: float,
    N: int,
    B: int,
    lr: float,
    steps: int,
    record_every: int = 1,
    loss_fn: LossFn | None = None,
) -> pd.DataFrame:
    """Discrete gradient descent ``theta <- theta - lr * grad`` on the nested-logit loss.

    Args:
        start: ``(beta1, alpha, xi)`` or a mapping with those keys.
        L, N, B: task (see :func:`loss`).
        lr: learning rate (> 0).
        steps: number of updates; rows are recorded at steps ``0, record_every, ...`` and at
            ``steps``.
        record_every: recording stride.
        loss_fn: optional user loss form (finite-difference gradients, much slower).

    Returns:
        DataFrame with columns ``step, t, beta1, alpha, xi, s1, p, loss, acc, cla`` where
        ``t = step * lr`` is model time.
    """
    n = check_task(L, N, B)
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr!r}")
    if int(steps) != steps or steps < 0:
        raise ValueError(f"steps must be an integer >= 0, got {steps!r}")
    if int(record_every) != record_every or record_every < 1:
        raise ValueError(f"record_every must be an integer >= 1, got {record_every!r}")
    b1, a, xi = _start(start)
    N, B = int(N), int(B)
    rec_steps, rec = [], []
    # A tight loop over plain floats: ~1 us per step, faster than numpy for three scalars.
    grad = (
        (lambda x, y, z: _grad_scalar(x, y, z, L, N, B, n))
        if loss_fn is None
        else (lambda x, y, z: _grad_fd(x, y, z, L, N, B, loss_fn))
    )
    for k in range(int(steps)):
        if k % record_every == 0:
            rec_steps.append(k)
            rec.append((b1, a, xi))
        g1, ga, gx = grad(b1, a, xi)
        b1 -= lr * g1
        a -= lr * ga
        xi -= lr * gx
    rec_steps.append(int(steps))
    rec.append((b1, a, xi))
    steps_arr = np.asarray(rec_steps)
    df = trajectory_frame(steps_arr * lr, np.asarray(rec), L=L, N=N, B=B, loss_fn=loss_fn)
    df.insert(0, "step", steps_arr)
    return df


def gradient_flow(
    start: Sequence[float] | Mapping[str, float],
    *,
    L: float,
    N: int,
    B: int,
    t_max: float | None = None,
    t_eval: Sequence[float] | np.ndarray | None = None,
    n_points: int = 1000,
    method: str = "LSODA",
    rtol: float = 1e-7,
    atol: float = 1e-9,
    loss_fn: LossFn | None = None,
    max_evals: int | None = None,
) -> pd.DataFrame:
    """Gradient flow ``d theta / dt = -grad loss`` integrated with ``scipy.integrate.solve_ivp``.

    Args:
        start: ``(beta1, alpha, xi)`` or a mapping with those keys.
        L, N, B: task (see :func:`loss`).
        t_max: end of the integration (model time); required unless ``t_eval`` is given.
        t_eval: increasing times (>= 0) at which to report; default ``n_points`` evenly spaced
            times from 0 to ``t_max``.
        n_points: number of report times when ``t_eval`` is None.
        method: any ``solve_ivp`` method; LSODA copes with the stiff cliff.
        rtol, atol: solver tolerances.
        loss_fn: optional user loss form (finite-difference gradients).
        max_evals: the most gradient evaluations the solver may take (default
            :data:`MAX_FLOW_EVALS`).

    Returns:
        DataFrame with columns ``t, beta1, alpha, xi, s1, p, loss, acc, cla``.

    Raises:
        FlowDidNotConverge: the solver needed more than ``max_evals`` evaluations.
    """
    n = check_task(L, N, B)
    y0 = np.array(_start(start))
    if t_eval is None:
        if t_max is None or not t_max > 0:
            raise ValueError(f"t_max must be > 0 when t_eval is None, got {t_max!r}")
        t_eval = np.linspace(0.0, float(t_max), int(n_points))
    t_eval = np.asarray(t_eval, dtype=float)
    if t_eval.ndim != 1 or t_eval.size == 0 or t_eval[0] < 0 or np.any(np.diff(t_eval) < 0):
        raise ValueError("t_eval must be a non-empty, non-decreasing 1-D array of times >= 0")
    N, B = int(N), int(B)
    evals, max_evals = [0], MAX_FLOW_EVALS if max_evals is None else int(max_evals)

    def rhs(_t, y):
        evals[0] += 1
        if evals[0] > max_evals:
            raise FlowDidNotConverge(
                f"gradient_flow did not converge within {max_evals} gradient evaluations"
            )
        if loss_fn is None:
            g = _grad_scalar(y[0], y[1], y[2], L, N, B, n)
        else:
            g = _grad_fd(y[0], y[1], y[2], L, N, B, loss_fn)
        return [-g[0], -g[1], -g[2]]

    t_end = float(t_eval[-1])
    if t_end == 0.0:
        params = np.repeat(y0[None], t_eval.size, axis=0)
    else:
        from scipy.integrate import solve_ivp  # here: 0.3 s to import

        sol = solve_ivp(rhs, (0.0, t_end), y0, method=method, t_eval=t_eval, rtol=rtol, atol=atol)
        if not sol.success:
            raise RuntimeError(f"gradient_flow: solver failed: {sol.message}")
        params = sol.y.T
    return trajectory_frame(t_eval, params, L=L, N=N, B=B, loss_fn=loss_fn)


def flow(
    loss: Callable[[Mapping[str, float], Mapping[str, float]], float],
    start: Mapping[str, float],
    *,
    t_eval: Sequence[float] | np.ndarray,
    task: Mapping[str, float] | None = None,
    quantities: Callable[[Mapping[str, np.ndarray], Mapping[str, float]], Mapping] | None = None,
    method: str = "LSODA",
    rtol: float = 1e-7,
    atol: float = 1e-9,
) -> pd.DataFrame:
    """Gradient flow of any loss over any number of named parameters.

    The model-agnostic form of :func:`gradient_flow` (which is the nested-logit case, with its
    analytic gradient): ``d theta / dt = -grad loss(theta)``, the gradient by central finite
    differences.

    Args:
        loss: ``loss(params, task) -> float`` with ``params`` a ``{name: float}`` mapping.
        start: ``{name: value}``: the parameters (their order is kept) and their start.
        t_eval: increasing model times (>= 0) at which to report.
        task: passed to ``loss`` and ``quantities`` unchanged (e.g. ``{"L": 32, "N": 8, "B": 2}``).
        quantities: ``quantities(params, task) -> {name: array}`` with ``params`` a mapping of
            arrays over time; default: ``{"loss": ...}`` from ``loss`` at each time.
        method, rtol, atol: ``solve_ivp`` settings.

    Returns:
        DataFrame with ``t``, one column per parameter, then one per quantity.

    Raises:
        RuntimeError: the solver failed.
    """
    names = tuple(start)
    if not names:
        raise ValueError("start must name at least one parameter")
    y0 = np.array(_start(start, names))
    task = dict(task or {})
    t_eval = np.asarray(t_eval, dtype=float)
    if t_eval.ndim != 1 or t_eval.size == 0 or t_eval[0] < 0 or np.any(np.diff(t_eval) < 0):
        raise ValueError("t_eval must be a non-empty, non-decreasing 1-D array of times >= 0")

    def f(y) -> float:
        return float(loss(dict(zip(names, (float(v) for v in y))), task))

    def rhs(_t, y):
        g = np.empty(len(y))
        for i in range(len(y)):
            h = _FD_STEP * max(1.0, abs(y[i]))
            yp, ym = y.copy(), y.copy()
            yp[i] += h
            ym[i] -= h
            g[i] = (f(yp) - f(ym)) / (2 * h)
        return -g

    t_end = float(t_eval[-1])
    if t_end == 0.0:
        params = np.repeat(y0[None], t_eval.size, axis=0)
    else:
        from scipy.integrate import solve_ivp  # here: 0.3 s to import

        sol = solve_ivp(rhs, (0.0, t_end), y0, method=method, t_eval=t_eval, rtol=rtol, atol=atol)
        if not sol.success:
            raise RuntimeError(f"flow: solver failed: {sol.message}")
        params = sol.y.T
    params = np.asarray(params, dtype=float).reshape(-1, len(names))
    cols = {name: params[:, i] for i, name in enumerate(names)}
    if quantities is None:
        q = {"loss": np.array([f(row) for row in params])}
    else:
        q = {
            k: np.broadcast_to(np.asarray(v, dtype=float), t_eval.shape)
            for k, v in quantities(cols, task).items()
        }
    return pd.DataFrame({"t": t_eval} | cols | dict(q))


def landscape_grid(
    param_x: str,
    param_y: str,
    ranges: Mapping[str, tuple[float, float]],
    fixed: Mapping[str, float],
    L: float,
    N: int,
    B: int,
    *,
    n_points: int = 101,
    quantity: str = "loss",
    loss_fn: LossFn | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Loss (or another derived quantity) on a 2-D grid of two parameters, the third fixed.

    Args:
        param_x, param_y: two different names out of ``beta1, alpha, xi``.
        ranges: ``{param_x: (lo, hi), param_y: (lo, hi)}``.
        fixed: value of the remaining parameter, ``{name: value}``.
        L, N, B: task (see :func:`loss`).
        n_points: grid points per axis.
        quantity: one of ``loss, acc, s1, p, cla``.
        loss_fn: optional user loss form.

    Returns:
        ``(xs [n_points], ys [n_points], Z [n_points(y), n_points(x)])`` (plotly's orientation:
        ``Z[i, j]`` is at ``(xs[j], ys[i])``).
    """
    check_task(L, N, B)
    if param_x not in PARAM_NAMES or param_y not in PARAM_NAMES or param_x == param_y:
        raise ValueError(f"param_x, param_y must be two different names from {PARAM_NAMES}")
    if quantity not in ("loss", "acc", "s1", "p", "cla"):
        raise ValueError(f"quantity must be one of loss, acc, s1, p, cla; got {quantity!r}")
    (third,) = [k for k in PARAM_NAMES if k not in (param_x, param_y)]
    if third not in fixed:
        raise ValueError(f"fixed must give a value for {third!r}")
    xs = np.linspace(*ranges[param_x], int(n_points))
    ys = np.linspace(*ranges[param_y], int(n_points))
    X, Y = np.meshgrid(xs, ys)
    args = {param_x: X, param_y: Y, third: np.full_like(X, float(fixed[third]))}
    q = quantities(args["beta1"], args["alpha"], args["xi"], L=L, N=N, B=B, loss_fn=loss_fn)
    return xs, ys, np.asarray(q[quantity])
