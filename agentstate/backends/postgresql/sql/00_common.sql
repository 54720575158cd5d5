-- What every part uses: refusals and the event log.

-- Refuse: undo what the call wrote and name the refusal (an exception class
-- of agentstate.exceptions) with the facts of the case. Declared to return
-- jsonb so that a function can end with RETURN agentstate_refuse(...).
CREATE FUNCTION agentstate_refuse(p_name text, p_facts jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'AS001', MESSAGE = p_name, DETAIL = p_facts::text;
END $$;

-- Append one event (agentstate_event) and answer it as JSON, for the
-- signals that Python sends after commit, with "delivery_ids": the ids of the
-- webhook deliveries the outbox trigger wrote for it, to send after commit.
-- They are read only when the outbox wrote deliveries in this transaction
-- (agentstate.outbox, set by the trigger): an event's deliveries are written by
-- the trigger of its own insert and nowhere else. Otherwise the key is left out
-- (none: Python reads it so), which saves a statement and a copy of the answer
-- (about 60,000 instructions in the server an event).
CREATE FUNCTION agentstate_record(
    p_kind text, p_object_type text, p_object_id text, p_user_id bigint, p_actor text,
    p_created_by_id bigint, p_owner text, p_details jsonb
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    recorded jsonb;
BEGIN
    INSERT INTO agentstate_event
        (kind, actor, user_id, object_type, object_id, created_by_id, owner, details, created_at)
    VALUES (p_kind, p_actor, p_user_id, p_object_type, p_object_id, p_created_by_id,
            coalesce(p_owner, ''), coalesce(p_details, '{}'), now())
    RETURNING to_jsonb(agentstate_event.*) INTO recorded;
    IF current_setting('agentstate.outbox', true) IS DISTINCT FROM 'written' THEN
        RETURN recorded;
    END IF;
    RETURN recorded || jsonb_build_object('delivery_ids', (
        SELECT coalesce(jsonb_agg(d.id), '[]') FROM agentstate_delivery d
        WHERE d.event_id = (recorded ->> 'id')::bigint));
END $$;

-- The webhook outbox: every event inserted, however (agentstate_record, the
-- sweep's set-based inserts), gets one delivery per active webhook that wants
-- its kind (kinds empty: every kind), in the event's own transaction. With no
-- active webhook, no insert is started (its start-up, the deliveries' table and
-- indexes opened, cost more than the look). An insert run marks the transaction
-- (agentstate.outbox, undone with a savepoint rolled back), so that
-- agentstate_record reads the deliveries back only then.
CREATE FUNCTION agentstate_outbox() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    done boolean;
BEGIN
    IF EXISTS (SELECT FROM agentstate_webhook w WHERE w.active) THEN
        INSERT INTO agentstate_delivery
            (webhook_id, event_id, status, attempts, next_attempt_at, created_at)
        SELECT w.id, e.id, 'pending', 0, now(), now()
        FROM new_events e
        JOIN agentstate_webhook w ON w.active AND (w.kinds = '[]'::jsonb OR w.kinds ? e.kind);
        done := set_config('agentstate.outbox', 'written', true) IS NULL;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER agentstate_outbox AFTER INSERT ON agentstate_event
REFERENCING NEW TABLE AS new_events
FOR EACH STATEMENT EXECUTE FUNCTION agentstate_outbox();
