"""The engine every check runs on: readers give facts, rules give findings, refining rules work on them (engine.py).
May import only the foundation (_record); it knows no check of its own."""

from jax_rocm7_plugin._engine.engine import EngineError, Rule, RuleSet, Stop, iterate, plan, run

__all__ = ["EngineError", "Rule", "RuleSet", "Stop", "iterate", "plan", "run"]
