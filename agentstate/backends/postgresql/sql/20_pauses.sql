-- Paused runs: put_pause, claim, resolve, cancel.
--
-- A pause is the row of (chat_id, tool_call_id). Every function locks it
-- first (FOR UPDATE) and then reads its status: concurrent callers queue on
-- the lock, and each statement sees what committed before it started (READ
-- COMMITTED), so the first claim's change is what the others find. Expiry is
-- the database clock's (now()). Events name a pause chat_id#tool_call_id
-- (PausedRun.object_id). A reach is whose pauses a caller may change:
-- p_reach_name NULL is every pause, else those created by p_reach_user or
-- owned by p_reach_name; any other is refused as not found.

-- A time as event details hold it: PostgreSQL's JSON form of the time in UTC
-- (microseconds without trailing zeros), whatever the session's time zone;
-- agentstate.events.json_time writes the same. STABLE, as to_jsonb is, so that
-- the planner inlines it (an IMMUTABLE function calling a STABLE one is called).
CREATE FUNCTION agentstate_json_time(p_time timestamptz) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT (to_jsonb(p_time AT TIME ZONE 'UTC') #>> '{}') || '+00:00'
$$;

CREATE FUNCTION agentstate_pause_reached(
    p_created_by bigint, p_owner text, p_reach_user bigint, p_reach_name text
) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT p_reach_name IS NULL OR p_owner = p_reach_name
           OR coalesce(p_created_by = p_reach_user, false)
$$;

-- The pause's row, locked; a missing one or one outside the reach: refused.
CREATE FUNCTION agentstate_reached_pause(
    p_chat text, p_call text, p_reach_user bigint, p_reach_name text
) RETURNS agentstate_pausedrun
LANGUAGE plpgsql AS $$
DECLARE
    pause agentstate_pausedrun;
BEGIN
    SELECT * INTO pause FROM agentstate_pausedrun
    WHERE chat_id = p_chat AND tool_call_id = p_call FOR UPDATE;
    IF NOT FOUND
       OR NOT agentstate_pause_reached(pause.created_by_id, pause.owner, p_reach_user, p_reach_name)
    THEN
        PERFORM agentstate_refuse('PauseNotFound',
            jsonb_build_object('chat_id', p_chat, 'tool_call_id', p_call));
    END IF;
    RETURN pause;
END $$;

-- The pause and its event as the functions answer them.
CREATE FUNCTION agentstate_pause_changed(
    p_pause agentstate_pausedrun, p_kind text, p_user_id bigint, p_actor text,
    p_details jsonb DEFAULT '{}'
) RETURNS jsonb
LANGUAGE sql AS $$
    SELECT jsonb_build_object(
        'pause', to_jsonb(p_pause),
        'events', jsonb_build_array(agentstate_record(
            p_kind, 'pausedrun', p_pause.chat_id || '#' || p_pause.tool_call_id, p_user_id,
            p_actor, p_pause.created_by_id, p_pause.owner,
            jsonb_build_object('question_id', p_pause.question_id) || p_details)))
$$;

-- Pending under p_question, replacing any earlier pause of the call whatever
-- its status (the event's details name the status replaced). Fifty first puts
-- at once: one inserts, the others wait on its row and then replace it.
CREATE FUNCTION agentstate_put_pause(
    p_chat text, p_call text, p_owner text, p_payload jsonb, p_ttl interval,
    p_question uuid, p_reach_user bigint, p_reach_name text, p_user_id bigint, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    pause agentstate_pausedrun;
    replaced jsonb := '{}';
BEGIN
    LOOP
        SELECT * INTO pause FROM agentstate_pausedrun
        WHERE chat_id = p_chat AND tool_call_id = p_call FOR UPDATE;
        IF FOUND THEN
            IF NOT agentstate_pause_reached(
                pause.created_by_id, pause.owner, p_reach_user, p_reach_name)
            THEN
                RETURN agentstate_refuse('PauseNotFound',
                    jsonb_build_object('chat_id', p_chat, 'tool_call_id', p_call));
            END IF;
            replaced := jsonb_build_object('replaced', pause.status);
            UPDATE agentstate_pausedrun
            SET owner = p_owner, created_by_id = p_user_id, question_id = p_question,
                status = 'pending', payload = nullif(p_payload, 'null'), created_at = now(),
                expires_at = now() + p_ttl, claimed_at = NULL, claimed_by = '',
                resolved_at = NULL
            WHERE id = pause.id
            RETURNING * INTO pause;
            EXIT;
        END IF;
        INSERT INTO agentstate_pausedrun
            (chat_id, tool_call_id, owner, created_by_id, question_id, status, payload,
             created_at, expires_at, claimed_by)
        VALUES (p_chat, p_call, p_owner, p_user_id, p_question, 'pending',
                nullif(p_payload, 'null'), now(), now() + p_ttl, '')
        ON CONFLICT (chat_id, tool_call_id) DO NOTHING
        RETURNING * INTO pause;
        EXIT WHEN FOUND;
        -- a concurrent first put inserted first: its pause is replaced on the next turn
    END LOOP;
    RETURN agentstate_pause_changed(pause, 'pause.created', p_user_id, p_actor,
        jsonb_build_object('expires_at', agentstate_json_time(pause.expires_at)) || replaced);
END $$;

-- p_question: the canonical text of a UUID, or '' (no question).
CREATE FUNCTION agentstate_claim(
    p_chat text, p_call text, p_owner text, p_question text, p_user_id bigint, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    pause agentstate_pausedrun;
BEGIN
    SELECT * INTO pause FROM agentstate_pausedrun
    WHERE chat_id = p_chat AND tool_call_id = p_call FOR UPDATE;
    IF NOT FOUND OR pause.owner <> p_owner THEN
        RETURN agentstate_refuse('PauseNotFound',
            jsonb_build_object('chat_id', p_chat, 'tool_call_id', p_call));
    END IF;
    IF pause.question_id::text <> p_question THEN
        RETURN agentstate_refuse('QuestionSuperseded', '{}');
    END IF;
    IF pause.status = 'claimed' THEN
        RETURN agentstate_refuse('AlreadyClaimed', '{}');
    END IF;
    IF pause.status = 'resolved' THEN
        RETURN agentstate_refuse('AlreadyResolved', '{}');
    END IF;
    IF pause.status <> 'pending' OR pause.expires_at <= now() THEN
        RETURN agentstate_refuse('PauseExpired', '{}');
    END IF;
    UPDATE agentstate_pausedrun SET status = 'claimed', claimed_at = now(), claimed_by = p_actor
    WHERE id = pause.id
    RETURNING * INTO pause;
    RETURN agentstate_pause_changed(pause, 'pause.claimed', p_user_id, p_actor);
END $$;

CREATE FUNCTION agentstate_resolve(
    p_chat text, p_call text, p_reach_user bigint, p_reach_name text, p_user_id bigint,
    p_actor text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    pause agentstate_pausedrun := agentstate_reached_pause(
        p_chat, p_call, p_reach_user, p_reach_name);
BEGIN
    IF pause.status <> 'claimed' THEN  -- a pending pause past its expiry is expired
        RETURN agentstate_refuse('NotClaimed', jsonb_build_object('status',
            CASE WHEN pause.status = 'pending' AND pause.expires_at <= now() THEN 'expired'
                 ELSE pause.status END));
    END IF;
    UPDATE agentstate_pausedrun SET status = 'resolved', resolved_at = now()
    WHERE id = pause.id
    RETURNING * INTO pause;
    RETURN agentstate_pause_changed(pause, 'pause.resolved', p_user_id, p_actor);
END $$;

-- Only a pending pause not yet past its expiry (one past it is expired, swept
-- or not); the answer is the pause as it was.
CREATE FUNCTION agentstate_cancel(
    p_chat text, p_call text, p_reach_user bigint, p_reach_name text, p_user_id bigint,
    p_actor text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    pause agentstate_pausedrun := agentstate_reached_pause(
        p_chat, p_call, p_reach_user, p_reach_name);
BEGIN
    IF pause.status <> 'pending' OR pause.expires_at <= now() THEN
        RETURN agentstate_refuse('NotPending', jsonb_build_object('status',
            CASE WHEN pause.status = 'pending' THEN 'expired' ELSE pause.status END));
    END IF;
    DELETE FROM agentstate_pausedrun WHERE id = pause.id;
    RETURN agentstate_pause_changed(pause, 'pause.cancelled', p_user_id, p_actor);
END $$;
