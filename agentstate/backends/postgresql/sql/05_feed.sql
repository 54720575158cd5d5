-- The event feed: what lets a follower hand out events exactly once in id
-- order (agentstate.backends.feed), and the NOTIFY that wakes waiters.
--
-- agentstate_event_drawn: before a transaction draws its first event id, it
-- reads the sequence's last value V and takes a shared advisory lock keyed
-- by V (modulo 2^31), held until it commits or rolls back; only then is the
-- id drawn (the identity's own draw is replaced), so every id it writes is
-- above V. agentstate_feed_bound: the sequence's last value first, then the
-- locks held: ids below the answer are settled (none below it can still
-- appear), as of any snapshot taken after it; the feed reads its page in the
-- next statement. The same row trigger then sends one NOTIFY per event, in
-- the event's own transaction (sent on commit; never for a change rolled back,
-- nor for an insert that fails after it: its statement's work is undone, the
-- notification with it). One row trigger for both, where a statement trigger
-- of its own for the NOTIFY cost a trigger call and a read of the statement's
-- transition table per insert (about 6 us of the server's CPU per event).
--
-- Only while some process listens. A transaction that sent a NOTIFY holds one
-- lock of the whole cluster from its commit's start to its end, its WAL flush
-- included, so the commits of every writer of events would wait in line for
-- each other. A listener holds the advisory lock agentstate_listening() shared
-- for as long as it listens (agentstate.services.wakeups); an event's trigger
-- that can take it alone, for an instant, knows that none listens, and sends
-- nothing. A listener that has just come cannot have heard the events whose
-- trigger ran before it: it waits for their transactions to end
-- (agentstate_feed_bound), then has every waiter look again.

-- The advisory lock class of listening ("agls"), with key 0.
CREATE FUNCTION agentstate_listening() RETURNS integer
LANGUAGE sql IMMUTABLE AS $$ SELECT 1634167923 $$;

CREATE FUNCTION agentstate_event_drawn() RETURNS trigger
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

CREATE TRIGGER agentstate_event_drawn BEFORE INSERT ON agentstate_event
FOR EACH ROW EXECUTE FUNCTION agentstate_event_drawn();

CREATE FUNCTION agentstate_feed_bound() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    drawn bigint;
    held bigint;
BEGIN
    SELECT last_value INTO drawn FROM agentstate_event_id_seq;
    SELECT min(drawn - ((drawn - l.objid::bigint) % 2147483648 + 2147483648) % 2147483648)
    INTO held
    FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.classid = 1634038643 AND l.objsubid = 2
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database());
    RETURN least(drawn, held) + 1;
END $$;
