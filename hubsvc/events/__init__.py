"""Events: their shape (shape.py) and the bus that wakes consumers of the log (bus.py).

The log itself is SQL, in store/events.py and store/log.py; publishing is services/publish.py.
"""
