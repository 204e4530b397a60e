"""``iterion runner``: the queue's claim loop (loop.py) and the clone per claim (clone.py)."""
