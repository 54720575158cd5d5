-- 0022: an event's trigger sends its NOTIFY only while some process listens
-- (holds the advisory lock agentstate_listening() shared): a transaction that sent
-- a NOTIFY holds a lock of the whole cluster through its commit, WAL flush included,
-- so every writer of events committed in turn.

CREATE OR REPLACE FUNCTION agentstate_listening() RETURNS integer
LANGUAGE sql IMMUTABLE AS $$ SELECT 1634167923 $$;

CREATE OR REPLACE FUNCTION agentstate_event_drawn() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    drawn bigint;
    done boolean;
BEGIN
    -- Each step an assignment, which PL/pgSQL evaluates as a simple expression,
    -- where a SELECT or a PERFORM runs a statement through the executor; the
    -- sequence's last value by pg_sequence_last_value (NULL before its first
    -- draw, when the first id drawn is 1: every id is above 0).
    IF coalesce(current_setting('agentstate.feed_lock', true), '') = '' THEN
        drawn := coalesce(pg_sequence_last_value('agentstate_event_id_seq'), 0);
        done := pg_advisory_xact_lock_shared(1634038643, (drawn % 2147483648)::integer) IS NULL;
        done := set_config('agentstate.feed_lock', drawn::text, true) IS NULL;
    END IF;
    NEW.id := nextval('agentstate_event_id_seq');
    IF pg_try_advisory_lock(agentstate_listening(), 0) THEN
        -- nobody listens
        done := pg_advisory_unlock(agentstate_listening(), 0);
        RETURN NEW;
    END IF;
    -- a listener holds it (or another writer checks at this instant: a NOTIFY
    -- for nothing)
    done := pg_notify('agentstate_events', json_build_object(
        'id', NEW.id, 'kind', NEW.kind, 'object_type', NEW.object_type,
        'object_id', NEW.object_id,
        'run_id', CASE WHEN NEW.object_type = 'run' THEN NEW.object_id
                       ELSE NEW.details ->> 'run_id' END)::text) IS NULL;
    RETURN NEW;
END $$;
