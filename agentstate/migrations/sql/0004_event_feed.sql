-- 0004: the event feed (agentstate_event.next_xid, set when an event's id is
-- drawn) and a NOTIFY per event, sent on commit.

ALTER TABLE agentstate_event ADD COLUMN next_xid xid8;

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
