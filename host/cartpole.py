"""CartPole-v1: a vectorised training environment and the gymnasium evaluation.

Training runs every member of the population in lockstep in :class:`VecCartPole`, the
cart-pole equations of Barto, Sutton and Anderson (1983) with gymnasium's CartPole-v1
constants (Euler step 0.02 s, force 10 N, failure at |x| > 2.4 or |theta| > 12 deg,
reward 1 per step, at most 500 steps). All members of one ES step start from the same
state, drawn from the step's host generator, so the two members of an antithetic pair
are compared on equal terms. ``tests/test_cartpole.py`` checks these dynamics against
gymnasium's own environment.

The reported metric is measured on the real ``gymnasium.make("CartPole-v1")``: the mean
return of the central (unperturbed) policy over 100 episodes seeded 0..99.

Observations become int8 by ``x = sat(rint(obs * SCALE), -127, 127)``, SCALE =
(50, 40, 600, 40): cart position, cart velocity, pole angle, pole angular velocity.
The action is the first index of the larger of the two logits.
"""

from __future__ import annotations

import math

import numpy as np

from .tasks import Task, TaskError, step_rng

SCALE = np.array([50.0, 40.0, 600.0, 40.0])
MAX_STEPS = 500
SOLVED = 475.0
EVAL_EPISODES = 100

GRAVITY = 9.8
MASS_CART = 1.0
MASS_POLE = 0.1
TOTAL_MASS = MASS_CART + MASS_POLE
HALF_LENGTH = 0.5
POLEMASS_LENGTH = MASS_POLE * HALF_LENGTH
FORCE = 10.0
DT = 0.02
THETA_LIMIT = 12 * 2 * math.pi / 360
X_LIMIT = 2.4


def quantize_obs(obs: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(np.asarray(obs) * SCALE), -127, 127).astype(np.int8)


class VecCartPole:
    """Many cart-poles stepped together; states (n, 4) float64."""

    def __init__(self, state: np.ndarray):
        self.state = np.array(state, dtype=np.float64)

    def step(self, action: np.ndarray) -> np.ndarray:
        """Advance every pole by one step; returns the ``terminated`` flags."""
        x, x_dot, theta, theta_dot = self.state.T
        force = np.where(action == 1, FORCE, -FORCE)
        cos, sin = np.cos(theta), np.sin(theta)
        temp = (force + POLEMASS_LENGTH * theta_dot**2 * sin) / TOTAL_MASS
        theta_acc = (GRAVITY * sin - cos * temp) / (
            HALF_LENGTH * (4.0 / 3.0 - MASS_POLE * cos**2 / TOTAL_MASS)
        )
        x_acc = temp - POLEMASS_LENGTH * theta_acc * cos / TOTAL_MASS
        x = x + DT * x_dot
        x_dot = x_dot + DT * x_acc
        theta = theta + DT * theta_dot
        theta_dot = theta_dot + DT * theta_acc
        self.state = np.stack([x, x_dot, theta, theta_dot], axis=1)
        return (x < -X_LIMIT) | (x > X_LIMIT) | (theta < -THETA_LIMIT) | (theta > THETA_LIMIT)


def rollout_returns(policy, starts: np.ndarray) -> np.ndarray:
    """Returns of ``len(starts)`` episodes run in lockstep.

    ``policy(obs_int8 (n, 4)) -> actions (n,)``; an episode ends at failure (its
    last step still earns 1) or after MAX_STEPS.
    """
    env = VecCartPole(starts)
    n = len(starts)
    ret = np.zeros(n, dtype=np.int64)
    alive = np.ones(n, dtype=bool)
    for _ in range(MAX_STEPS):
        act = policy(quantize_obs(env.state))
        term = env.step(act)
        ret += alive
        alive &= ~term
        if not alive.any():
            break
    return ret


class CartPoleTask(Task):
    """Balance CartPole-v1; score = episode return, metric = mean of 100 real episodes."""

    def __init__(self):
        super().__init__(
            "cartpole",
            4,
            2,
            "mean_return",
            defaults=dict(
                steps=100,
                population=64,
                hidden=(16,),
                batch=1,
                eval_every=1,
                latent_shift=1,  # spec 12: one vote moves a weight off 0
                sigma_shift=0,  # spec 12: noise of one level
            ),
        )
        try:
            import gymnasium  # noqa: F401
        except ImportError as e:  # pragma: no cover - installed by ./run
            raise TaskError("the cartpole task needs gymnasium (pip install pentegg[train])") from e

    def scorer(self, cfg, step: int, batch: int):
        """Every member plays ``batch`` episodes from the step's start states."""
        starts = step_rng(cfg.seed, step).uniform(-0.05, 0.05, (batch, 4))
        n = cfg.population

        def evaluate(forward):
            def policy(obs):  # obs (n*batch, 4) -> actions
                logits = forward(obs.reshape(n, batch, 4))
                return logits.argmax(axis=2).reshape(-1)

            ret = rollout_returns(policy, np.tile(starts, (n, 1)))
            return ret.reshape(n, batch).sum(axis=1)

        return evaluate

    def metric(self, state) -> float:
        return float(self.eval_returns(state).mean())

    def eval_returns(self, state, episodes: int = EVAL_EPISODES) -> np.ndarray:
        """Returns of the central policy on the real gymnasium environment, seeds 0..n-1."""
        import gymnasium as gym

        from .golden import predict

        envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * episodes)
        try:
            obs, _ = envs.reset(seed=list(range(episodes)))
            ret = np.zeros(episodes, dtype=np.int64)
            alive = np.ones(episodes, dtype=bool)
            while alive.any():
                act = predict(state, quantize_obs(obs))
                obs, rew, term, trunc, _ = envs.step(act)
                ret += (rew.astype(np.int64)) * alive
                alive &= ~(term | trunc)
            return ret
        finally:
            envs.close()

    def solved(self, value: float) -> bool:
        return value >= SOLVED

    def score_bound(self, batch: int) -> int:
        return MAX_STEPS * batch  # a return of at most MAX_STEPS per episode
