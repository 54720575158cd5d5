-- Undo 0004: no feed lock, no NOTIFY.

DROP TRIGGER agentstate_event_notify ON agentstate_event;
DROP FUNCTION agentstate_event_notify();
DROP FUNCTION agentstate_feed_bound();
DROP TRIGGER agentstate_event_drawn ON agentstate_event;
DROP FUNCTION agentstate_event_drawn();
