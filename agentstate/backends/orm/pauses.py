"""Pauses on the ORM (to be written)."""


class PauseOperations:
    def put_pause(self, chat_id, tool_call_id, owner, payload, ttl, question_id, reach, by):
        raise NotImplementedError

    def claim(self, chat_id, tool_call_id, owner, question_id, by):
        raise NotImplementedError

    def resolve(self, chat_id, tool_call_id, reach, by):
        raise NotImplementedError

    def cancel(self, chat_id, tool_call_id, reach, by):
        raise NotImplementedError
