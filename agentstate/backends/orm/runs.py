"""Runs on the ORM (to be written)."""


class RunOperations:
    def create_run(self, run_id, context, created_by_id):
        raise NotImplementedError

    def run(self, run_id, reach):
        raise NotImplementedError

    def update_run(self, run_id, context, reach):
        raise NotImplementedError

    def add_usage(self, run_id, increments, reach):
        raise NotImplementedError

    def records(self, run_id, reach):
        raise NotImplementedError

    def is_tool_approved(self, run_id, tool_name, call_id, reach):
        raise NotImplementedError

    def record_decision(self, run_id, tool_name, call_id, approve, always, reason, reach, by):
        raise NotImplementedError

    def rebuild_approvals(self, run_id, records, reach, by):
        raise NotImplementedError

    def request_approval(self, run_id, tool_name, call_id, arguments, reach, by):
        raise NotImplementedError

    def decide(self, request_id, approve, always, reason, approval_ttl, by):
        raise NotImplementedError
