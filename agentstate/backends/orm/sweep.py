"""Sweep on the ORM (to be written)."""


class SweepOperations:
    def expire_pauses(self, size):
        raise NotImplementedError

    def expire_approval_requests(self, size, approval_ttl):
        raise NotImplementedError

    def purge_pauses(self, size, retention):
        raise NotImplementedError
