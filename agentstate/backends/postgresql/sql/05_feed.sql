-- The event feed: what lets a follower hand out events exactly once in id
-- order (agentstate.backends.feed), and the NOTIFY that wakes waiters.

-- Before an event row is inserted: its transaction's id is assigned first,
-- then the row's id is drawn, then next_xid is read from a fresh snapshot:
-- every transaction that drew a lower id before has an xid below it. A
-- reader hands the event out once pg_snapshot_xmin of its snapshot has
-- reached next_xid (no such transaction is still in flight).
CREATE FUNCTION agentstate_event_drawn() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_current_xact_id();
    NEW.id := nextval('agentstate_event_id_seq');
    NEW.next_xid := pg_snapshot_xmax(pg_current_snapshot());
    RETURN NEW;
END $$;

CREATE TRIGGER agentstate_event_drawn BEFORE INSERT ON agentstate_event
FOR EACH ROW EXECUTE FUNCTION agentstate_event_drawn();

-- One NOTIFY per event, in the event's own transaction: sent on commit, and
-- never for a change rolled back. The payload names the event and its run.
CREATE FUNCTION agentstate_event_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('agentstate_events', json_build_object(
        'id', e.id, 'kind', e.kind, 'object_type', e.object_type, 'object_id', e.object_id,
        'run_id', CASE WHEN e.object_type = 'run' THEN e.object_id
                       ELSE e.details ->> 'run_id' END)::text)
    FROM new_events e;
    RETURN NULL;
END $$;

CREATE TRIGGER agentstate_event_notify AFTER INSERT ON agentstate_event
REFERENCING NEW TABLE AS new_events
FOR EACH STATEMENT EXECUTE FUNCTION agentstate_event_notify();
