"""A job's processes compared: each one's record, the rules that compare them, and the check at backend start.
May import _pipeline and everything below it; the loader (at backend start) and _cluster (the preflight) import it."""
