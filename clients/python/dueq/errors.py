"""What a call's failure means for the op: docs/protocol.md §4."""

# Codes whose op was certainly not applied; anything else (timeout, internal, a broken
# connection after the request was written) leaves the outcome unknown.
NOT_APPLIED_CODES = frozenset({
    "bad_request", "not_found", "exists", "lease_mismatch", "not_leader", "no_quorum",
    "too_large", "unavailable", "unauthorized", "wrong_shard", "store_full", "moving",
})

NOT_APPLIED = "not_applied"
UNKNOWN = "unknown"


class Error(Exception):
    """An op that did not succeed: the server's code and message (or the client's own,
    with the same vocabulary), the leader it named, and whether the op may have been
    applied (`outcome`: NOT_APPLIED or UNKNOWN)."""

    def __init__(self, code, message, leader="", outcome=None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.leader = leader or ""
        self.outcome = outcome or (NOT_APPLIED if code in NOT_APPLIED_CODES else UNKNOWN)

    @property
    def not_applied(self):
        return self.outcome == NOT_APPLIED


class Bury(Exception):
    """Raised by a Worker's handler: bury the task instead of releasing it for a retry."""
