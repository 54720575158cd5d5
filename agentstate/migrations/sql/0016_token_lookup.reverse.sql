-- 0016, undone: no token function (the lookup is sent as a statement).

DROP FUNCTION agentstate_token(text);
