"""What runs inside `import jax`: `warm` (the last start's plan), `register` (checks, then the backend), `extensions`.
May import the pipeline and everything below it, lazily where a step needs it; this file imports nothing (cheap)."""
