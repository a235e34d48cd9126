"""Automatic differentiation of pipelines (Li et al. 2018); see docs/autodiff.md."""
