-- Undo 0004: no feed column, no NOTIFY.

DROP TRIGGER agentstate_event_notify ON agentstate_event;
DROP FUNCTION agentstate_event_notify();
DROP TRIGGER agentstate_event_drawn ON agentstate_event;
DROP FUNCTION agentstate_event_drawn();
ALTER TABLE agentstate_event DROP COLUMN next_xid;
