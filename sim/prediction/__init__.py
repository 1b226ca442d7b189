"""Prediction: the predictors beyond one engine run (flow models, replicas, budget, sweeps)."""
