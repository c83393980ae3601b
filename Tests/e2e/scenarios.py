"""The registry of end-to-end scenarios: every topic module marks its scenarios with `@scenario`
and they run in the order they were registered (run_e2e.py imports the topic modules in order)."""

SCENARIOS = []


def scenario(fn):
    SCENARIOS.append(fn)
    return fn


def time_limit(seconds):
    """A scenario that may take longer than run_e2e.py's default limit."""
    def mark(fn):
        fn.time_limit = seconds
        return fn
    return mark
