"""The cluster preflight: every process of a job runs the doctor, process 0 compares their records and reports.
May import _doctor and everything below it; nothing imports it but __main__ (jax only in the courier child)."""
