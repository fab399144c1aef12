"""The cluster preflight: every process runs the doctor, process 0 compares and reports; --deep runs the collectives.
May import _doctor and everything below it; nothing imports it but __main__ (jax only in the courier child)."""
