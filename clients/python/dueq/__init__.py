"""dueq: the Python client of dueq, a replicated store of tasks that come due.

    import dueq
    with dueq.Client(["10.0.0.1:7700", "10.0.0.2:7700"]) as c:
        c.put("tokens", "user42", {"token": "a1"}, time=expiry_ms)
        with c.take("tokens", timeout_ms=5000) as tasks:
            for t in tasks:
                t.set_result({"token": refresh(t.payload)}, time=new_expiry_ms)
"""
from .client import Client, SAFE_TO_RESEND
from .errors import Bury, Error, NOT_APPLIED, UNKNOWN
from .task import Task, Taken
from .worker import Result, Worker

__all__ = ["Client", "Error", "Bury", "NOT_APPLIED", "UNKNOWN", "Task", "Taken", "Worker",
           "Result", "SAFE_TO_RESEND"]
__version__ = "0.1.0"
