"""The target returns a return-conditioned agent starts each episode from.

PEDA conditions MODT and MORvS at evaluation on ``g0 = w * R(w)``: the preference times the return
that a linear regression of return on preference, fitted on the reference data's trajectories,
predicts at that preference (:func:`regression_targets`). A family may start its agents from other
targets by defining ``initial_targets`` in its module (:mod:`morl.families.base`); agents that are
not return-conditioned ignore them.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def fit_return_regression(traj_preferences: np.ndarray, traj_returns: np.ndarray) -> np.ndarray:
    """Least-squares fit of each objective's return on the preference (with intercept), in float64.

    Returns ``coef`` of shape ``(n_obj, n_obj + 1)``: ``R_i(w) = coef[i, :-1] . w + coef[i, -1]``.

    Preferences lie on the simplex, so the columns of ``[w, 1]`` are collinear: only a slope along
    the simplex is identifiable, and a plain least-squares fit of ``[w, 1]`` is ill-conditioned (on
    float32 preferences, which sum to 1 only to ~1e-7, it fits that rounding and returns
    coefficients of 1e7 and more that cancel). The fit therefore centres the data (as
    scikit-learn's ``LinearRegression``, which PEDA uses, does), removes the all-ones direction from
    the centred preferences, and takes the minimum-norm slope: it is orthogonal to ``(1, ..., 1)``,
    and the intercept is the mean return less the slope at the mean preference. On the simplex the
    predictions are those of any exact least-squares fit; a direction the data do not vary along (one
    trajectory, one preference) gets slope 0, so the prediction there is the mean return.
    """
    W = np.asarray(traj_preferences, np.float64)
    R = np.asarray(traj_returns, np.float64)
    if W.ndim != 2 or R.ndim != 2 or len(W) != len(R) or not len(W):
        raise ValueError(f"preferences {W.shape} and returns {R.shape}: need (n, n_obj) each, n >= 1")
    w_mean, r_mean = W.mean(axis=0), R.mean(axis=0)
    centred = W - w_mean
    centred -= centred.mean(axis=1, keepdims=True)  # the component along (1, ..., 1) is rounding only
    slope, *_ = np.linalg.lstsq(centred, R - r_mean, rcond=None)  # (n_obj, n_obj): column i is R_i's
    intercept = r_mean - w_mean @ slope
    return np.hstack([slope.T, intercept[:, None]])


def initial_targets(coef: np.ndarray, preferences: np.ndarray) -> np.ndarray:
    """``g0 = w * R(w)`` elementwise, with ``R`` from :func:`fit_return_regression`."""
    W = np.asarray(preferences, np.float64)
    predicted = W @ coef[:, :-1].T + coef[:, -1]
    return W * predicted


def regression_targets(
    preferences: np.ndarray, traj_preferences: np.ndarray, traj_returns: np.ndarray
) -> tuple[np.ndarray, dict[str, Any]]:
    """PEDA's targets, :func:`initial_targets` of the regression :func:`fit_return_regression` fits on
    the trajectories, and the evaluation's record of them (the regression's coefficients)."""
    coef = fit_return_regression(traj_preferences, traj_returns)
    return initial_targets(coef, preferences), {"target_regression": coef.tolist()}
