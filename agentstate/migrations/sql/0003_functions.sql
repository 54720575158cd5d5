-- Migration 0003: the PL/pgSQL functions of the first release after 0.1.0,
-- the files of agentstate/backends/postgresql/sql/ as they were then, in name
-- order. Frozen: a later change of a function is a migration of its own with
-- its own file here. agentstate_user_id and agentstate_username name the
-- site's user model: the migration writes them.
-- A function's body may call one defined further down.
SET LOCAL check_function_bodies = off;

-- 00_common.sql

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
    RETURN recorded || jsonb_build_object('delivery_ids', (
        SELECT coalesce(jsonb_agg(d.id), '[]') FROM agentstate_delivery d
        WHERE d.event_id = (recorded ->> 'id')::bigint));
END $$;

-- The webhook outbox: every event inserted, however (agentstate_record, the
-- sweep's set-based inserts), gets one delivery per active webhook that wants
-- its kind (kinds empty: every kind), in the event's own transaction.
CREATE FUNCTION agentstate_outbox() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO agentstate_delivery
        (webhook_id, event_id, status, attempts, next_attempt_at, created_at)
    SELECT w.id, e.id, 'pending', 0, now(), now()
    FROM new_events e
    JOIN agentstate_webhook w ON w.active AND (w.kinds = '[]'::jsonb OR w.kinds ? e.kind);
    RETURN NULL;
END $$;

CREATE TRIGGER agentstate_outbox AFTER INSERT ON agentstate_event
REFERENCING NEW TABLE AS new_events
FOR EACH STATEMENT EXECUTE FUNCTION agentstate_outbox();

-- 10_context.sql

-- Context variables: put, get, push, extend, get_list, pop, delete, delete_scope.
--
-- A scope is (key, owner_id); owner_id NULL is the site's namespace. A list
-- is agentstate_element rows at positions head .. tail - 1 of its variable.
-- Every write locks the variable's row first (FOR UPDATE), so writers of one
-- variable queue there. Each statement of a function sees what committed
-- before it started (READ COMMITTED), so a pop sees the element of a push it
-- waited for. A refusal raises
-- (agentstate_refuse), which undoes what the call wrote.

-- The owner a call names: its id, or its username (agentstate_user_id, made by
-- the installer from the site's user model); neither: the site's namespace.
CREATE FUNCTION agentstate_owner_id(p_owner_id bigint, p_owner_name text) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    found_id bigint;
BEGIN
    IF p_owner_id IS NOT NULL OR p_owner_name IS NULL THEN
        RETURN p_owner_id;
    END IF;
    found_id := agentstate_user_id(p_owner_name);
    IF found_id IS NULL THEN
        PERFORM agentstate_refuse('UnknownOwner', jsonb_build_object('username', p_owner_name));
    END IF;
    RETURN found_id;
END $$;

-- The scope's id, or NULL.
CREATE FUNCTION agentstate_scope_id(p_key text, p_owner bigint) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    found_id bigint;
BEGIN
    IF p_owner IS NULL THEN  -- the partial unique index of the site's keys
        SELECT id INTO found_id FROM agentstate_scope WHERE key = p_key AND owner_id IS NULL;
    ELSE                     -- the unique index (owner_id, key)
        SELECT id INTO found_id FROM agentstate_scope WHERE owner_id = p_owner AND key = p_key;
    END IF;
    RETURN found_id;
END $$;

-- The scope's id, created if needed, its row locked FOR KEY SHARE so that it
-- cannot be deleted before this transaction adds a variable to it.
CREATE FUNCTION agentstate_ensure_scope(p_key text, p_owner bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    found_id bigint;
BEGIN
    LOOP
        SELECT id INTO found_id FROM agentstate_scope
        WHERE id = agentstate_scope_id(p_key, p_owner) FOR KEY SHARE;
        IF found_id IS NOT NULL THEN
            RETURN found_id;
        END IF;
        IF p_owner IS NULL THEN
            INSERT INTO agentstate_scope (key, owner_id, created_at) VALUES (p_key, NULL, now())
            ON CONFLICT (key) WHERE owner_id IS NULL DO NOTHING RETURNING id INTO found_id;
        ELSE
            INSERT INTO agentstate_scope (key, owner_id, created_at) VALUES (p_key, p_owner, now())
            ON CONFLICT (owner_id, key) DO NOTHING RETURNING id INTO found_id;
        END IF;
        IF found_id IS NOT NULL THEN
            RETURN found_id;  -- inserted by this transaction: nobody else can delete it
        END IF;
        -- a concurrent creator won: lock its row on the next turn
    END LOOP;
END $$;

-- A new variable of the scope, or NULL when a concurrent writer made it first.
CREATE FUNCTION agentstate_new_variable(
    p_scope_id bigint, p_name text, p_is_list boolean, p_value jsonb, p_tail bigint, p_actor text
) RETURNS bigint
LANGUAGE sql AS $$
    INSERT INTO agentstate_variable
        (scope_id, name, is_list, value, head, tail, version, updated_at, updated_by)
    VALUES (p_scope_id, p_name, p_is_list, p_value, 0, p_tail, 1, now(), p_actor)
    ON CONFLICT (scope_id, name) DO NOTHING
    RETURNING id
$$;

CREATE FUNCTION agentstate_put(
    p_scope text, p_name text, p_value jsonb, p_if_version bigint, p_owner_id bigint, p_owner_name text, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    who bigint := agentstate_owner_id(p_owner_id, p_owner_name);
    sid bigint := agentstate_ensure_scope(p_scope, who);
    as_list boolean := jsonb_typeof(p_value) = 'array';
    n bigint := CASE WHEN as_list THEN jsonb_array_length(p_value) ELSE 0 END;
    v record;
    vid bigint;
BEGIN
    LOOP
        SELECT id, version, is_list INTO v FROM agentstate_variable
        WHERE scope_id = sid AND name = p_name FOR UPDATE;
        EXIT WHEN FOUND;
        IF p_if_version IS NOT NULL AND p_if_version <> 0 THEN
            RETURN agentstate_refuse('VersionMismatch',
                jsonb_build_object('name', p_name, 'version', 0, 'if_version', p_if_version));
        END IF;
        vid := agentstate_new_variable(
            sid, p_name, as_list, CASE WHEN as_list THEN NULL ELSE p_value END, n, p_actor);
        IF vid IS NOT NULL THEN
            IF as_list THEN
                INSERT INTO agentstate_element (variable_id, position, value)
                SELECT vid, item.ordinality - 1, item.value
                FROM jsonb_array_elements(p_value) WITH ORDINALITY AS item;
            END IF;
            RETURN jsonb_build_object('version', 1);
        END IF;
    END LOOP;
    IF p_if_version IS NOT NULL AND v.version <> p_if_version THEN
        RETURN agentstate_refuse('VersionMismatch',
            jsonb_build_object('name', p_name, 'version', v.version, 'if_version', p_if_version));
    END IF;
    IF v.is_list THEN
        DELETE FROM agentstate_element WHERE variable_id = v.id;
    END IF;
    IF as_list THEN
        INSERT INTO agentstate_element (variable_id, position, value)
        SELECT v.id, item.ordinality - 1, item.value
        FROM jsonb_array_elements(p_value) WITH ORDINALITY AS item;
    END IF;
    UPDATE agentstate_variable
    SET is_list = as_list, value = CASE WHEN as_list THEN NULL ELSE p_value END,
        head = 0, tail = n, version = v.version + 1, updated_at = now(), updated_by = p_actor
    WHERE id = v.id;
    RETURN jsonb_build_object('version', v.version + 1);
END $$;

-- [[name, value], ...] by name: lists whole, in order.
CREATE FUNCTION agentstate_get(p_scope text, p_names text[], p_owner_id bigint, p_owner_name text) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    who bigint := agentstate_owner_id(p_owner_id, p_owner_name);
    sid bigint := agentstate_scope_id(p_scope, who);
BEGIN
    IF sid IS NULL THEN
        RETURN agentstate_refuse('ScopeNotFound', jsonb_build_object('scope', p_scope));
    END IF;
    RETURN jsonb_build_object('values', coalesce((
        SELECT jsonb_agg(jsonb_build_array(v.name, CASE WHEN v.is_list THEN coalesce((
                   SELECT jsonb_agg(e.value ORDER BY e.position) FROM agentstate_element e
                   WHERE e.variable_id = v.id), '[]') ELSE coalesce(v.value, 'null') END)
               ORDER BY v.name)
        FROM agentstate_variable v
        WHERE v.scope_id = sid AND (p_names IS NULL OR v.name = ANY (p_names))
    ), '[]'));
END $$;

-- Append p_values (a non-empty array), each one element, in order, under the
-- variable's lock: push and extend. p_operation names the refused operation.
CREATE FUNCTION agentstate_append(
    p_scope text, p_name text, p_values jsonb, p_owner_id bigint, p_owner_name text, p_actor text,
    p_operation text
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    who bigint := agentstate_owner_id(p_owner_id, p_owner_name);
    sid bigint := agentstate_scope_id(p_scope, who);
    n bigint := jsonb_array_length(p_values);
    v record;
    vid bigint;
    lo bigint;
BEGIN
    LOOP
        SELECT id, is_list, value, head, tail, version INTO v FROM agentstate_variable
        WHERE scope_id = sid AND name = p_name FOR UPDATE;
        EXIT WHEN FOUND;
        -- absent: becomes the values, in a scope made (and kept) for it
        sid := agentstate_ensure_scope(p_scope, who);
        vid := agentstate_new_variable(sid, p_name, true, NULL, n, p_actor);
        IF vid IS NOT NULL THEN
            INSERT INTO agentstate_element (variable_id, position, value)
            SELECT vid, item.ordinality - 1, item.value
            FROM jsonb_array_elements(p_values) WITH ORDINALITY AS item;
            RETURN jsonb_build_object('length', n, 'version', 1);
        END IF;
    END LOOP;
    lo := v.head;
    IF NOT v.is_list THEN
        IF jsonb_typeof(v.value) IS DISTINCT FROM 'string' THEN
            RETURN agentstate_refuse('TypeConflict', jsonb_build_object(
                'name', p_name, 'held', coalesce(jsonb_typeof(v.value), 'null'),
                'operation', p_operation));
        END IF;
        -- a string s becomes [s, values...]
        INSERT INTO agentstate_element (variable_id, position, value) VALUES (v.id, 0, v.value);
        lo := 0;
        v.tail := 1;
    END IF;
    INSERT INTO agentstate_element (variable_id, position, value)
    SELECT v.id, v.tail + item.ordinality - 1, item.value
    FROM jsonb_array_elements(p_values) WITH ORDINALITY AS item;
    UPDATE agentstate_variable
    SET is_list = true, value = NULL, head = lo, tail = v.tail + n,
        version = v.version + 1, updated_at = now(), updated_by = p_actor
    WHERE id = v.id;
    RETURN jsonb_build_object('length', v.tail + n - lo, 'version', v.version + 1);
END $$;

CREATE FUNCTION agentstate_push(
    p_scope text, p_name text, p_value jsonb, p_owner_id bigint, p_owner_name text, p_actor text
) RETURNS jsonb
LANGUAGE sql AS $$
    SELECT agentstate_append(
        p_scope, p_name, jsonb_build_array(p_value), p_owner_id, p_owner_name, p_actor, 'push')
$$;

CREATE FUNCTION agentstate_extend(
    p_scope text, p_name text, p_values jsonb, p_owner_id bigint, p_owner_name text, p_actor text
) RETURNS jsonb
LANGUAGE sql AS $$
    SELECT agentstate_append(
        p_scope, p_name, p_values, p_owner_id, p_owner_name, p_actor, 'extend')
$$;

-- {"values": the last p_last elements (all when NULL) in order, "length": the
-- list's length}: an index range read below the tail, whatever the length. A
-- string reads as a one-element list. STABLE: both reads see one snapshot.
CREATE FUNCTION agentstate_get_list(
    p_scope text, p_name text, p_last bigint, p_owner_id bigint, p_owner_name text
) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    who bigint := agentstate_owner_id(p_owner_id, p_owner_name);
    sid bigint := agentstate_scope_id(p_scope, who);
    v record;
    lo bigint;
BEGIN
    IF sid IS NULL THEN
        RETURN agentstate_refuse('ScopeNotFound', jsonb_build_object('scope', p_scope));
    END IF;
    SELECT id, is_list, value, head, tail INTO v FROM agentstate_variable
    WHERE scope_id = sid AND name = p_name;
    IF NOT FOUND THEN
        RETURN agentstate_refuse('VariableNotFound',
            jsonb_build_object('name', p_name, 'scope', p_scope));
    END IF;
    IF NOT v.is_list THEN
        IF jsonb_typeof(v.value) IS DISTINCT FROM 'string' THEN
            RETURN agentstate_refuse('TypeConflict', jsonb_build_object(
                'name', p_name, 'held', coalesce(jsonb_typeof(v.value), 'null'),
                'operation', 'get_list'));
        END IF;
        RETURN jsonb_build_object('values', jsonb_build_array(v.value), 'length', 1);
    END IF;
    lo := CASE WHEN p_last IS NULL THEN v.head ELSE greatest(v.head, v.tail - p_last) END;
    RETURN jsonb_build_object('values', coalesce((
        SELECT jsonb_agg(e.value ORDER BY e.position) FROM agentstate_element e
        WHERE e.variable_id = v.id AND e.position >= lo AND e.position < v.tail
    ), '[]'), 'length', v.tail - v.head);
END $$;

CREATE FUNCTION agentstate_pop(
    p_scope text, p_name text, p_lifo boolean, p_owner_id bigint, p_owner_name text, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    who bigint := agentstate_owner_id(p_owner_id, p_owner_name);
    sid bigint := agentstate_scope_id(p_scope, who);
    v record;
    taken jsonb;
    rest jsonb;
BEGIN
    IF sid IS NULL THEN
        RETURN agentstate_refuse('ScopeNotFound', jsonb_build_object('scope', p_scope));
    END IF;
    SELECT id, is_list, value, head, tail, version INTO v FROM agentstate_variable
    WHERE scope_id = sid AND name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RETURN agentstate_refuse('VariableNotFound',
            jsonb_build_object('name', p_name, 'scope', p_scope));
    END IF;
    IF NOT v.is_list THEN
        IF jsonb_typeof(v.value) IS DISTINCT FROM 'string' THEN
            RETURN agentstate_refuse('TypeConflict', jsonb_build_object(
                'name', p_name, 'held', coalesce(jsonb_typeof(v.value), 'null'), 'operation', 'pop'));
        END IF;
        DELETE FROM agentstate_variable WHERE id = v.id;
        RETURN jsonb_build_object('value', v.value);
    END IF;
    IF v.tail = v.head THEN
        RETURN agentstate_refuse('TypeConflict', jsonb_build_object(
            'name', p_name, 'held', 'empty array', 'operation', 'pop'));
    END IF;
    IF p_lifo THEN
        v.tail := v.tail - 1;
        DELETE FROM agentstate_element WHERE variable_id = v.id AND position = v.tail
        RETURNING value INTO taken;
    ELSE
        DELETE FROM agentstate_element WHERE variable_id = v.id AND position = v.head
        RETURNING value INTO taken;
        v.head := v.head + 1;
    END IF;
    IF v.tail = v.head THEN  -- emptied: the variable goes
        DELETE FROM agentstate_variable WHERE id = v.id;
        RETURN jsonb_build_object('value', taken);
    END IF;
    IF v.tail - v.head = 1 THEN  -- one string left: the list collapses to it
        SELECT value INTO rest FROM agentstate_element WHERE variable_id = v.id AND position = v.head;
        IF jsonb_typeof(rest) = 'string' THEN
            DELETE FROM agentstate_element WHERE variable_id = v.id;
            UPDATE agentstate_variable
            SET is_list = false, value = rest, head = 0, tail = 0, version = v.version + 1,
                updated_at = now(), updated_by = p_actor
            WHERE id = v.id;
            RETURN jsonb_build_object('value', taken);
        END IF;
    END IF;
    UPDATE agentstate_variable
    SET head = v.head, tail = v.tail, version = v.version + 1, updated_at = now(),
        updated_by = p_actor
    WHERE id = v.id;
    RETURN jsonb_build_object('value', taken);
END $$;

CREATE FUNCTION agentstate_delete(p_scope text, p_name text, p_owner_id bigint, p_owner_name text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    who bigint := agentstate_owner_id(p_owner_id, p_owner_name);
    sid bigint := agentstate_scope_id(p_scope, who);
    vid bigint;
BEGIN
    IF sid IS NULL THEN
        RETURN agentstate_refuse('ScopeNotFound', jsonb_build_object('scope', p_scope));
    END IF;
    SELECT id INTO vid FROM agentstate_variable
    WHERE scope_id = sid AND name = p_name FOR UPDATE;
    IF vid IS NULL THEN
        RETURN agentstate_refuse('VariableNotFound',
            jsonb_build_object('name', p_name, 'scope', p_scope));
    END IF;
    DELETE FROM agentstate_element WHERE variable_id = vid;
    DELETE FROM agentstate_variable WHERE id = vid;
    RETURN '{}';
END $$;

-- The scope's row lo (writers adding a variable hold it FOR KEY SHARE),
-- then its variables (writers of each hold it FOR UPDATE): what they wrote
-- before is deleted with it, what they write after finds no scope.
CREATE FUNCTION agentstate_delete_scope(p_scope text, p_owner_id bigint, p_owner_name text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    who bigint := agentstate_owner_id(p_owner_id, p_owner_name);
    sid bigint;
BEGIN
    SELECT id INTO sid FROM agentstate_scope
    WHERE id = agentstate_scope_id(p_scope, who) FOR UPDATE;
    IF sid IS NULL THEN
        RETURN agentstate_refuse('ScopeNotFound', jsonb_build_object('scope', p_scope));
    END IF;
    PERFORM FROM agentstate_variable WHERE scope_id = sid FOR UPDATE;
    DELETE FROM agentstate_element e USING agentstate_variable v
    WHERE e.variable_id = v.id AND v.scope_id = sid;
    DELETE FROM agentstate_variable WHERE scope_id = sid;
    DELETE FROM agentstate_scope WHERE id = sid;
    RETURN '{}';
END $$;

-- 20_pauses.sql

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
-- agentstate.events.json_time writes the same.
CREATE FUNCTION agentstate_json_time(p_time timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
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
LANGUAGE plpgsql AS $$
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
LANGUAGE plpgsql AS $$
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
LANGUAGE plpgsql AS $$
DECLARE
    pause agentstate_pausedrun := agentstate_reached_pause(
        p_chat, p_call, p_reach_user, p_reach_name);
BEGIN
    IF pause.status <> 'claimed' THEN
        RETURN agentstate_refuse('NotClaimed', jsonb_build_object('status', pause.status));
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
LANGUAGE plpgsql AS $$
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

-- 30_runs.sql

-- Runs, usage, approval records and approval requests.
--
-- A run is named by its run_id, within the caller's reach: p_reach is the
-- id of the user whose runs the call may touch (their creator), NULL for
-- every run; a run outside it is refused exactly like a missing one.
-- Every change of a run locks the run's row first (FOR UPDATE), before it
-- reads or writes anything else of the run: approve, reject, rebuild,
-- request_approval and decide queue on that row in one order, so none
-- deadlocks another, and a request is filed under the records as they are.
-- Times are statement_timestamp(), Django's Now(), so that the ORM's
-- listings agree with these functions about what has expired.
--
-- A run answers as {"run": its row, "records": [[tool_name, record], ...]}
-- by tool name, each record in the Agents SDK's form
-- {"approved": true | false | [call ids], "rejected": ...}: a boolean side
-- is approved_always / rejected_always, a NULL one the call ids of its
-- decision in agentstate_approvalcall, in the order they were decided.

-- The run within reach, or a refusal.
CREATE FUNCTION agentstate_reached_run(p_run_id text, p_reach bigint) RETURNS agentstate_run
LANGUAGE plpgsql STABLE AS $$
DECLARE
    found_run agentstate_run;
BEGIN
    SELECT * INTO found_run FROM agentstate_run
    WHERE run_id = p_run_id AND (p_reach IS NULL OR created_by_id = p_reach);
    IF NOT FOUND THEN
        PERFORM agentstate_refuse('RunNotFound', jsonb_build_object('run_id', p_run_id));
    END IF;
    RETURN found_run;
END $$;

-- The run within reach, its row locked: the first lock of every change to it.
CREATE FUNCTION agentstate_locked_run(p_run_id text, p_reach bigint) RETURNS agentstate_run
LANGUAGE plpgsql AS $$
DECLARE
    found_run agentstate_run;
BEGIN
    SELECT * INTO found_run FROM agentstate_run
    WHERE run_id = p_run_id AND (p_reach IS NULL OR created_by_id = p_reach) FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM agentstate_refuse('RunNotFound', jsonb_build_object('run_id', p_run_id));
    END IF;
    RETURN found_run;
END $$;

-- One side of a record: its flag, or the call ids decided so, in order.
CREATE FUNCTION agentstate_side(p_record bigint, p_flag boolean, p_decision text) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT coalesce(to_jsonb(p_flag), (
        SELECT coalesce(jsonb_agg(c.call_id ORDER BY c.id), '[]') FROM agentstate_approvalcall c
        WHERE c.record_id = p_record AND c.decision = p_decision))
$$;

-- The run's records, [[tool_name, record], ...] by tool name.
CREATE FUNCTION agentstate_records_of(p_run bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_array(r.tool_name, jsonb_build_object(
               'approved', agentstate_side(r.id, r.approved_always, 'approve'),
               'rejected', agentstate_side(r.id, r.rejected_always, 'reject')))
           ORDER BY r.tool_name), '[]')
    FROM agentstate_approvalrecord r WHERE r.run_id = p_run
$$;

CREATE FUNCTION agentstate_run_state(p_run agentstate_run) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('run', to_jsonb(p_run), 'records', agentstate_records_of(p_run.id))
$$;

-- The SDK's precedence over the tool's record: permanent approval, then
-- permanent rejection, then the call approved, then rejected; else NULL.
CREATE FUNCTION agentstate_decision(p_run bigint, p_tool text, p_call text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN r.approved_always THEN true
        WHEN r.rejected_always THEN false
        WHEN r.approved_always IS NULL AND EXISTS (
            SELECT FROM agentstate_approvalcall c
            WHERE c.record_id = r.id AND c.decision = 'approve' AND c.call_id = p_call) THEN true
        WHEN r.rejected_always IS NULL AND EXISTS (
            SELECT FROM agentstate_approvalcall c
            WHERE c.record_id = r.id AND c.decision = 'reject' AND c.call_id = p_call) THEN false
    END
    FROM agentstate_approvalrecord r WHERE r.run_id = p_run AND r.tool_name = p_tool
$$;

-- The id is taken (also by a concurrent creator, whose commit the insert
-- waits for): RunExists.
CREATE FUNCTION agentstate_create_run(p_run_id text, p_context jsonb, p_created_by bigint)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    made agentstate_run;
BEGIN
    INSERT INTO agentstate_run
        (run_id, context, requests, input_tokens, output_tokens, total_tokens, cached_tokens,
         reasoning_tokens, created_at, updated_at, created_by_id)
    VALUES (p_run_id, p_context, 0, 0, 0, 0, 0, 0, statement_timestamp(), statement_timestamp(),
            p_created_by)
    ON CONFLICT (run_id) DO NOTHING
    RETURNING * INTO made;
    IF made.id IS NULL THEN
        RETURN agentstate_refuse('RunExists', jsonb_build_object('run_id', p_run_id));
    END IF;
    RETURN jsonb_build_object('run', to_jsonb(made), 'records', '[]'::jsonb);
END $$;

CREATE FUNCTION agentstate_get_run(p_run_id text, p_reach bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT agentstate_run_state(agentstate_reached_run(p_run_id, p_reach))
$$;

CREATE FUNCTION agentstate_update_run(p_run_id text, p_context jsonb, p_reach bigint)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    changed agentstate_run;
BEGIN
    UPDATE agentstate_run SET context = p_context, updated_at = statement_timestamp()
    WHERE run_id = p_run_id AND (p_reach IS NULL OR created_by_id = p_reach)
    RETURNING * INTO changed;
    IF NOT FOUND THEN
        RETURN agentstate_refuse('RunNotFound', jsonb_build_object('run_id', p_run_id));
    END IF;
    RETURN agentstate_run_state(changed);
END $$;

-- Adds under the run's row lock, so no concurrent addition is lost; a total
-- past the column (a bigint) refuses naming the first such counter, before
-- anything is added. Every budget covering the run moves with it, or the add
-- is refused (BudgetExceeded, nothing added): the run's own budget (36_budgets
-- .sql) caps the run's totals, read under the run's lock that its setters
-- take too; the creator's budget row is locked next, rolled over when its
-- period is over, and caps what the creator's runs added in the period. A
-- capped counter is refused when used plus the increment passes the cap.
CREATE FUNCTION agentstate_add_usage(
    p_run_id text, p_requests bigint, p_input bigint, p_output bigint, p_total bigint,
    p_cached bigint, p_reasoning bigint, p_reach bigint
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    top constant bigint := 9223372036854775807;
    rn agentstate_run := agentstate_locked_run(p_run_id, p_reach);
    own agentstate_budget;
    shared agentstate_budget;
    over text;
BEGIN
    SELECT counter.name INTO over
    FROM (VALUES (1, 'requests', rn.requests, p_requests),
                 (2, 'input_tokens', rn.input_tokens, p_input),
                 (3, 'output_tokens', rn.output_tokens, p_output),
                 (4, 'total_tokens', rn.total_tokens, p_total),
                 (5, 'cached_tokens', rn.cached_tokens, p_cached),
                 (6, 'reasoning_tokens', rn.reasoning_tokens, p_reasoning))
         AS counter (n, name, held, added)
    WHERE counter.held > top - counter.added
    ORDER BY counter.n LIMIT 1;
    IF over IS NOT NULL THEN
        RETURN agentstate_refuse('UsageOverflow', jsonb_build_object('field', over));
    END IF;
    -- A NULL cap compares as NULL, which IF takes as false: uncapped.
    SELECT * INTO own FROM agentstate_budget WHERE run_id = rn.id;
    IF own.id IS NULL THEN
        NULL;
    ELSIF rn.requests + p_requests > own.max_requests THEN
        RETURN agentstate_exceeded('run', 'requests', p_requests, own.max_requests, rn.requests);
    ELSIF rn.input_tokens + p_input > own.max_input_tokens THEN
        RETURN agentstate_exceeded('run', 'input_tokens', p_input, own.max_input_tokens,
                                   rn.input_tokens);
    ELSIF rn.output_tokens + p_output > own.max_output_tokens THEN
        RETURN agentstate_exceeded('run', 'output_tokens', p_output, own.max_output_tokens,
                                   rn.output_tokens);
    ELSIF rn.total_tokens + p_total > own.max_total_tokens THEN
        RETURN agentstate_exceeded('run', 'total_tokens', p_total, own.max_total_tokens,
                                   rn.total_tokens);
    END IF;
    IF rn.created_by_id IS NOT NULL THEN
        SELECT * INTO shared FROM agentstate_budget WHERE user_id = rn.created_by_id FOR UPDATE;
    END IF;
    IF shared.id IS NOT NULL THEN
        IF agentstate_period_over(shared.period, shared.period_start) THEN
            shared.used_requests := 0; shared.used_input_tokens := 0;
            shared.used_output_tokens := 0; shared.used_total_tokens := 0;
            shared.period_start := agentstate_period_start(shared.period);
        END IF;
        over := CASE WHEN shared.used_requests > top - p_requests THEN 'requests'
                     WHEN shared.used_input_tokens > top - p_input THEN 'input_tokens'
                     WHEN shared.used_output_tokens > top - p_output THEN 'output_tokens'
                     WHEN shared.used_total_tokens > top - p_total THEN 'total_tokens' END;
        IF over IS NOT NULL THEN
            RETURN agentstate_refuse('UsageOverflow', jsonb_build_object('field', over));
        ELSIF shared.used_requests + p_requests > shared.max_requests THEN
            RETURN agentstate_exceeded('user', 'requests', p_requests, shared.max_requests,
                                       shared.used_requests);
        ELSIF shared.used_input_tokens + p_input > shared.max_input_tokens THEN
            RETURN agentstate_exceeded('user', 'input_tokens', p_input, shared.max_input_tokens,
                                       shared.used_input_tokens);
        ELSIF shared.used_output_tokens + p_output > shared.max_output_tokens THEN
            RETURN agentstate_exceeded('user', 'output_tokens', p_output,
                                       shared.max_output_tokens, shared.used_output_tokens);
        ELSIF shared.used_total_tokens + p_total > shared.max_total_tokens THEN
            RETURN agentstate_exceeded('user', 'total_tokens', p_total, shared.max_total_tokens,
                                       shared.used_total_tokens);
        END IF;
        UPDATE agentstate_budget
        SET used_requests = shared.used_requests + p_requests,
            used_input_tokens = shared.used_input_tokens + p_input,
            used_output_tokens = shared.used_output_tokens + p_output,
            used_total_tokens = shared.used_total_tokens + p_total,
            period_start = shared.period_start, updated_at = statement_timestamp()
        WHERE id = shared.id;
    END IF;
    UPDATE agentstate_run
    SET requests = rn.requests + p_requests, input_tokens = rn.input_tokens + p_input,
        output_tokens = rn.output_tokens + p_output, total_tokens = rn.total_tokens + p_total,
        cached_tokens = rn.cached_tokens + p_cached,
        reasoning_tokens = rn.reasoning_tokens + p_reasoning, updated_at = statement_timestamp()
    WHERE id = rn.id;
    RETURN jsonb_build_object(
        'requests', rn.requests + p_requests, 'input_tokens', rn.input_tokens + p_input,
        'output_tokens', rn.output_tokens + p_output, 'total_tokens', rn.total_tokens + p_total,
        'cached_tokens', rn.cached_tokens + p_cached,
        'reasoning_tokens', rn.reasoning_tokens + p_reasoning);
END $$;

CREATE FUNCTION agentstate_records(p_run_id text, p_reach bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT agentstate_records_of((agentstate_reached_run(p_run_id, p_reach)).id)
$$;

-- The records first; left undecided, the active policies (35_policies.sql).
CREATE FUNCTION agentstate_is_tool_approved(
    p_run_id text, p_tool text, p_call text, p_arguments jsonb, p_reach bigint
) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('approved', coalesce(agentstate_decision(rn.id, p_tool, p_call),
                                                   agentstate_policy_decision(rn, p_tool, p_arguments)))
    FROM agentstate_reached_run(p_run_id, p_reach) AS rn
$$;

-- Write a decision into the tool's record (the caller holds the run's row
-- lock); answers its approvals.changed event. Always: {"approved": true,
-- "rejected": []} or {"approved": false, "rejected": true}, the call ids
-- dropped; else the call id is added to its side when that side is a list
-- (a permanent decision either way is not overridden per call).
CREATE FUNCTION agentstate_write_decision(
    p_run agentstate_run, p_tool text, p_call text, p_approve boolean, p_always boolean,
    p_reason text, p_user bigint, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    verdict text := CASE WHEN p_approve THEN 'approve' ELSE 'reject' END;
    rec record;
BEGIN
    INSERT INTO agentstate_approvalrecord
        (run_id, tool_name, approved_always, rejected_always, updated_at, updated_by_id)
    VALUES (p_run.id, p_tool,
            CASE WHEN p_always THEN p_approve END,
            CASE WHEN p_always AND NOT p_approve THEN true END,
            statement_timestamp(), p_user)
    ON CONFLICT (run_id, tool_name) DO UPDATE SET
        approved_always = CASE WHEN p_always THEN excluded.approved_always
                               ELSE agentstate_approvalrecord.approved_always END,
        rejected_always = CASE WHEN p_always THEN excluded.rejected_always
                               ELSE agentstate_approvalrecord.rejected_always END,
        updated_at = excluded.updated_at, updated_by_id = excluded.updated_by_id
    RETURNING id, approved_always, rejected_always INTO rec;
    IF p_always THEN
        DELETE FROM agentstate_approvalcall WHERE record_id = rec.id;
    ELSIF (CASE WHEN p_approve THEN rec.approved_always ELSE rec.rejected_always END) IS NULL THEN
        INSERT INTO agentstate_approvalcall
            (record_id, call_id, decision, decided_by_id, reason, created_at)
        VALUES (rec.id, p_call, verdict, p_user, p_reason, statement_timestamp())
        ON CONFLICT (record_id, decision, call_id) DO NOTHING;
    END IF;
    RETURN agentstate_record('approvals.changed', 'run', p_run.run_id, p_user, p_actor,
        p_run.created_by_id, '', jsonb_build_object(
            'tool_name', p_tool, 'call_id', p_call, 'decision', verdict, 'always', p_always,
            'reason', p_reason));
END $$;

CREATE FUNCTION agentstate_record_decision(
    p_run_id text, p_tool text, p_call text, p_approve boolean, p_always boolean, p_reason text,
    p_reach bigint, p_user bigint, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    rn agentstate_run := agentstate_locked_run(p_run_id, p_reach);
    changed jsonb := agentstate_write_decision(
        rn, p_tool, p_call, p_approve, p_always, p_reason, p_user, p_actor);
BEGIN
    RETURN agentstate_run_state(rn) || jsonb_build_object('events', jsonb_build_array(changed));
END $$;

-- p_records: a checked map in the SDK's form, every side given.
CREATE FUNCTION agentstate_rebuild_approvals(
    p_run_id text, p_records jsonb, p_reach bigint, p_user bigint, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    rn agentstate_run := agentstate_locked_run(p_run_id, p_reach);
    rebuilt jsonb;
BEGIN
    DELETE FROM agentstate_approvalcall c USING agentstate_approvalrecord r
    WHERE c.record_id = r.id AND r.run_id = rn.id;
    DELETE FROM agentstate_approvalrecord WHERE run_id = rn.id;
    INSERT INTO agentstate_approvalrecord
        (run_id, tool_name, approved_always, rejected_always, updated_at, updated_by_id)
    SELECT rn.id, tool.key,
           CASE WHEN jsonb_typeof(tool.value -> 'approved') = 'boolean'
                THEN (tool.value -> 'approved')::boolean END,
           CASE WHEN jsonb_typeof(tool.value -> 'rejected') = 'boolean'
                THEN (tool.value -> 'rejected')::boolean END,
           statement_timestamp(), p_user
    FROM jsonb_each(p_records) AS tool;
    INSERT INTO agentstate_approvalcall
        (record_id, call_id, decision, decided_by_id, reason, created_at)
    SELECT r.id, listed.call_id, side.verdict, p_user, '', statement_timestamp()
    FROM jsonb_each(p_records) AS tool
    JOIN agentstate_approvalrecord r ON r.run_id = rn.id AND r.tool_name = tool.key
    CROSS JOIN (VALUES (1, 'approved', 'approve'), (2, 'rejected', 'reject'))
        AS side (n, name, verdict)
    CROSS JOIN LATERAL jsonb_array_elements_text(
        CASE WHEN jsonb_typeof(tool.value -> side.name) = 'array'
             THEN tool.value -> side.name ELSE '[]' END) WITH ORDINALITY AS listed (call_id, i)
    ORDER BY tool.key, side.n, listed.i;
    rebuilt := agentstate_record('approvals.rebuilt', 'run', rn.run_id, p_user, p_actor,
        rn.created_by_id, '', jsonb_build_object('tools', (SELECT count(*) FROM jsonb_object_keys(p_records))));
    RETURN agentstate_run_state(rn) || jsonb_build_object('events', jsonb_build_array(rebuilt));
END $$;

-- A request's status as listings show it: pending past the TTL is expired.
CREATE FUNCTION agentstate_current_status(p_status text, p_created_at timestamptz, p_ttl interval)
RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_status = 'pending' AND p_created_at <= statement_timestamp() - p_ttl
                THEN 'expired' ELSE p_status END
$$;

-- The run's request for p_call, filed now unless one exists (answered as it
-- is, no event); filed already decided when the run's records decide the
-- call (p_decided_reason, no decider) or, left undecided by them, when an
-- active policy does (its row locked FOR SHARE by agentstate_deciding_policy;
-- its reason or p_policy_reason naming it; the run's record of the call
-- written as a decision would, by p_policy_actor naming it).
CREATE FUNCTION agentstate_request_approval(
    p_run_id text, p_tool text, p_call text, p_arguments jsonb, p_decided_reason text,
    p_policy_reason text, p_policy_actor text, p_ttl interval, p_reach bigint, p_user bigint,
    p_actor text
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    rn agentstate_run := agentstate_locked_run(p_run_id, p_reach);
    req agentstate_approvalrequest;
    pol_id bigint;
    pol_approve boolean;
    pol_reason text;
    decided boolean;
    permanent boolean;
    requested jsonb;
    changed jsonb;
BEGIN
    SELECT * INTO req FROM agentstate_approvalrequest WHERE run_id = rn.id AND call_id = p_call;
    IF FOUND THEN
        RETURN jsonb_build_object(
            'request', to_jsonb(req) || jsonb_build_object('current_status',
                agentstate_current_status(req.status, req.created_at, p_ttl)),
            'run', to_jsonb(rn), 'created', false, 'events', '[]'::jsonb);
    END IF;
    decided := agentstate_decision(rn.id, p_tool, p_call);
    SELECT r.approved_always IS TRUE OR r.rejected_always IS TRUE INTO permanent
    FROM agentstate_approvalrecord r WHERE r.run_id = rn.id AND r.tool_name = p_tool;
    IF decided IS NULL THEN
        SELECT d.policy_id, d.approve, d.reason INTO pol_id, pol_approve, pol_reason
        FROM agentstate_deciding_policy(rn, p_tool, p_arguments) AS d;
        decided := pol_approve;
    END IF;
    INSERT INTO agentstate_approvalrequest
        (run_id, tool_name, call_id, arguments, status, always, created_by_id, decided_at,
         reason, policy_id, created_at)
    VALUES (rn.id, p_tool, p_call, p_arguments,
            CASE decided WHEN true THEN 'approved' WHEN false THEN 'rejected' ELSE 'pending' END,
            decided IS NOT NULL AND pol_id IS NULL AND coalesce(permanent, false), p_user,
            CASE WHEN decided IS NOT NULL THEN statement_timestamp() END,
            CASE WHEN pol_id IS NOT NULL THEN coalesce(nullif(pol_reason, ''),
                                                       format(p_policy_reason, pol_id))
                 WHEN decided IS NOT NULL THEN p_decided_reason ELSE '' END,
            pol_id, statement_timestamp())
    RETURNING * INTO req;
    requested := agentstate_record('approval.requested', 'approvalrequest', req.id::text, p_user,
        p_actor, req.created_by_id, '', jsonb_build_object(
            'run_id', rn.run_id, 'tool_name', p_tool, 'call_id', p_call, 'status', req.status,
            'policy', req.policy_id));
    IF pol_id IS NOT NULL THEN
        changed := agentstate_write_decision(rn, p_tool, p_call, decided, false, req.reason,
            NULL, format(p_policy_actor, pol_id));
    END IF;
    RETURN jsonb_build_object(
        'request', to_jsonb(req) || jsonb_build_object('current_status',
            agentstate_current_status(req.status, req.created_at, p_ttl)),
        'run', to_jsonb(rn), 'created', true,
        'events', CASE WHEN changed IS NULL THEN jsonb_build_array(requested)
                       ELSE jsonb_build_array(requested, changed) END);
END $$;

-- Decide a pending request exactly once: the run's row locked first, then
-- the request's, whose status is then read as it is (a racing decision
-- committed meanwhile is seen: AlreadyDecided).
-- p_arguments (NULL: none) is what the reviewer approved instead of the filed
-- arguments, kept as approved_arguments unless it equals them.
CREATE FUNCTION agentstate_decide(
    p_id bigint, p_approve boolean, p_always boolean, p_reason text, p_arguments jsonb,
    p_ttl interval, p_user bigint, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    rn agentstate_run;
    req agentstate_approvalrequest;
    changed jsonb;
    decided jsonb;
    edited jsonb;
BEGIN
    SELECT r.* INTO rn FROM agentstate_run r
    WHERE r.id = (SELECT q.run_id FROM agentstate_approvalrequest q WHERE q.id = p_id) FOR UPDATE;
    SELECT * INTO req FROM agentstate_approvalrequest WHERE id = p_id FOR UPDATE;
    IF rn.id IS NULL OR req.id IS NULL THEN
        RETURN agentstate_refuse('ApprovalRequestNotFound', jsonb_build_object('id', p_id));
    END IF;
    IF agentstate_current_status(req.status, req.created_at, p_ttl) = 'expired' THEN
        RETURN agentstate_refuse('ApprovalRequestExpired', '{}');
    END IF;
    IF req.status <> 'pending' THEN
        RETURN agentstate_refuse('AlreadyDecided', jsonb_build_object(
            'status', req.status, 'decided_by_id', req.decided_by_id));
    END IF;
    changed := agentstate_write_decision(
        rn, req.tool_name, req.call_id, p_approve, p_always, p_reason, p_user, p_actor);
    IF p_arguments IS DISTINCT FROM req.arguments THEN
        edited := p_arguments;
    END IF;
    UPDATE agentstate_approvalrequest
    SET status = CASE WHEN p_approve THEN 'approved' ELSE 'rejected' END, always = p_always,
        decided_by_id = p_user, reason = p_reason, decided_at = statement_timestamp(),
        approved_arguments = edited
    WHERE id = req.id
    RETURNING * INTO req;
    decided := agentstate_record('approval.decided', 'approvalrequest', req.id::text, p_user,
        p_actor, req.created_by_id, '', jsonb_build_object(
            'run_id', rn.run_id, 'tool_name', req.tool_name, 'call_id', req.call_id,
            'decision', CASE WHEN p_approve THEN 'approve' ELSE 'reject' END,
            'always', p_always, 'reason', p_reason)
        || CASE WHEN edited IS NULL THEN '{}'::jsonb ELSE jsonb_build_object(
            'arguments', req.arguments, 'approved_arguments', edited) END);
    RETURN jsonb_build_object(
        'request', to_jsonb(req) || jsonb_build_object('current_status', req.status),
        'run', to_jsonb(rn), 'events', jsonb_build_array(changed, decided));
END $$;

-- 35_policies.sql

-- Approval policies: standing decisions of later calls, so people are not asked twice.
--
-- A policy matches a call of its tool_name in a run whose creator is its
-- user_id (NULL: any run's), whose arguments contain its arguments pattern
-- (NULL: any arguments), by agentstate_json_contains: the rules of
-- agentstate/policies.py, which a property test holds to the same answers.
-- It is active while revoked_at is NULL and expires_at (if any) is later
-- than statement_timestamp(), Django's Now().
--
-- Revocation against filing: request_approval locks the deciding policy's
-- row FOR SHARE in the statement that finds it, and a revocation first locks
-- the row FOR UPDATE, which waits for every such share lock to commit, and
-- only then takes revoked_at from clock_timestamp(). So every request a
-- policy decided has decided_at (its statement's start) before the policy's
-- revoked_at; and a request whose lock waits for a revocation re-checks the
-- row once it commits (READ COMMITTED), finds it revoked and does without it.

-- Whether p_value contains p_pattern: a pattern object needs an object holding
-- each of its keys with a value that contains the pattern's; any other pattern
-- needs an equal value (jsonb equality: true is no 1, 1 is 1.0, arrays in order).
-- A NULL value (arguments not given) contains nothing.
CREATE FUNCTION agentstate_json_contains(p_value jsonb, p_pattern jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(CASE
        WHEN jsonb_typeof(p_pattern) = 'object' THEN
            jsonb_typeof(p_value) = 'object' AND NOT EXISTS (
                SELECT FROM jsonb_each(p_pattern) AS wanted (key, value)
                WHERE NOT (p_value ? wanted.key
                           AND agentstate_json_contains(p_value -> wanted.key, wanted.value)))
        ELSE p_value = p_pattern
    END, false)
$$;

-- What an active policy decides of a call in p_run the records leave undecided:
-- true, false (a matching reject policy wins), or NULL. Not locked: an answer.
CREATE FUNCTION agentstate_policy_decision(p_run agentstate_run, p_tool text, p_arguments jsonb)
RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT p.decision = 'approve' FROM agentstate_approvalpolicy p
    WHERE p.tool_name = p_tool AND p.revoked_at IS NULL
      AND (p.expires_at IS NULL OR p.expires_at > statement_timestamp())
      AND (p.user_id IS NULL OR p.user_id = p_run.created_by_id)
      AND (p.arguments IS NULL OR agentstate_json_contains(p_arguments, p.arguments))
    ORDER BY p.decision = 'reject' DESC, p.id LIMIT 1
$$;

-- The active policy that decides such a call, its row locked FOR SHARE until the
-- caller commits: its id, whether it approves, its reason; all NULL when none
-- does. The rows are locked in the order chosen, one by one: a row a concurrent
-- revocation changed is checked again when that commits and, revoked, passed
-- over for the next. (No policy row type in a signature: the migrations that
-- install these functions before the policy table exists must accept them.)
CREATE FUNCTION agentstate_deciding_policy(
    p_run agentstate_run, p_tool text, p_arguments jsonb,
    OUT policy_id bigint, OUT approve boolean, OUT reason text
)
LANGUAGE plpgsql AS $$
BEGIN
    SELECT p.id, p.decision = 'approve', p.reason INTO policy_id, approve, reason
    FROM agentstate_approvalpolicy p
    WHERE p.tool_name = p_tool AND p.revoked_at IS NULL
      AND (p.expires_at IS NULL OR p.expires_at > statement_timestamp())
      AND (p.user_id IS NULL OR p.user_id = p_run.created_by_id)
      AND (p.arguments IS NULL OR agentstate_json_contains(p_arguments, p.arguments))
    ORDER BY p.decision = 'reject' DESC, p.id LIMIT 1
    FOR SHARE OF p;
END $$;

-- A policy as the backend answers it (p_policy: its row as JSON), with its user's
-- and its creator's usernames.
CREATE FUNCTION agentstate_policy_state(p_policy jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT p_policy || jsonb_build_object(
        'user_name', agentstate_username((p_policy ->> 'user_id')::bigint),
        'created_by_name', agentstate_username((p_policy ->> 'created_by_id')::bigint))
$$;

-- p_user_id or, given instead, p_username (looked up: UnknownOwner on field user).
CREATE FUNCTION agentstate_create_policy(
    p_tool text, p_approve boolean, p_user_id bigint, p_username text, p_arguments jsonb,
    p_expires_at timestamptz, p_reason text, p_by bigint, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    for_user bigint := p_user_id;
    made agentstate_approvalpolicy;
    created jsonb;
BEGIN
    IF p_username IS NOT NULL THEN
        for_user := agentstate_user_id(p_username);
        IF for_user IS NULL THEN
            RETURN agentstate_refuse('UnknownOwner',
                jsonb_build_object('username', p_username, 'field', 'user'));
        END IF;
    END IF;
    INSERT INTO agentstate_approvalpolicy
        (tool_name, user_id, arguments, decision, expires_at, reason, created_by_id, created_at)
    VALUES (p_tool, for_user, p_arguments, CASE WHEN p_approve THEN 'approve' ELSE 'reject' END,
            p_expires_at, p_reason, p_by, statement_timestamp())
    RETURNING * INTO made;
    created := agentstate_record('policy.created', 'approvalpolicy', made.id::text, p_by, p_actor,
        made.created_by_id, '', jsonb_build_object(
            'tool_name', made.tool_name, 'decision', made.decision, 'user_id', made.user_id,
            'arguments', made.arguments, 'expires_at', made.expires_at, 'reason', made.reason));
    RETURN jsonb_build_object('policy', agentstate_policy_state(to_jsonb(made)),
        'events', jsonb_build_array(created));
END $$;

-- The row locked first (waiting for the requests it is deciding), then revoked by
-- the clock: see the top of this file.
CREATE FUNCTION agentstate_revoke_policy(p_id bigint, p_by bigint, p_actor text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    pol agentstate_approvalpolicy;
    revoked jsonb;
BEGIN
    SELECT * INTO pol FROM agentstate_approvalpolicy WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN agentstate_refuse('PolicyNotFound', jsonb_build_object('policy_id', p_id));
    END IF;
    IF pol.revoked_at IS NOT NULL THEN
        RETURN agentstate_refuse('AlreadyRevoked', jsonb_build_object('policy_id', p_id));
    END IF;
    UPDATE agentstate_approvalpolicy SET revoked_at = clock_timestamp(), revoked_by_id = p_by
    WHERE id = p_id AND revoked_at IS NULL
    RETURNING * INTO pol;
    revoked := agentstate_record('policy.revoked', 'approvalpolicy', pol.id::text, p_by, p_actor,
        pol.created_by_id, '', jsonb_build_object(
            'tool_name', pol.tool_name, 'decision', pol.decision, 'revoked_at', pol.revoked_at));
    RETURN jsonb_build_object('policy', agentstate_policy_state(to_jsonb(pol)),
        'events', jsonb_build_array(revoked));
END $$;

-- 36_budgets.sql

-- Budgets: caps on the usage of one run, or of every run one user created.
--
-- A run's budget (run_id set) caps the run's own counters (agentstate_run),
-- so its used_* columns stay 0; a user's (user_id set) counts in used_* what
-- was added to the user's runs since it was set or its period began. The caps
-- are enforced by agentstate_add_usage (30_runs.sql), which locks the run's
-- row, reads the run's budget, then locks the creator's budget row: setting a
-- run's budget locks the run's row first too, setting a user's locks only its
-- own row, so the locks are taken in one order and none deadlocks another.
--
-- Periods are calendar days and months in UTC by the database clock
-- (statement_timestamp(), Django's Now()). A period that is over is rolled
-- over (counters zeroed, period_start moved to the current period's start) by
-- the next add or change, and read as rolled over before that.
--
-- A budget answers as {"budget": its row or null, "used": {counter: n, ...},
-- "resets_at": the end of the current period or null}.

-- The start of the current UTC day or month ('day', 'month'); NULL for ''.
CREATE FUNCTION agentstate_period_start(p_period text) RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_period IN ('day', 'month') THEN
        date_trunc(p_period, statement_timestamp() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' END
$$;

-- The start of the next UTC day or month: when the current period resets.
CREATE FUNCTION agentstate_period_end(p_period text) RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_period IN ('day', 'month') THEN
        (date_trunc(p_period, statement_timestamp() AT TIME ZONE 'UTC')
         + ('1 ' || p_period)::interval) AT TIME ZONE 'UTC' END
$$;

-- Whether a budget of p_period that began at p_start is past its period.
CREATE FUNCTION agentstate_period_over(p_period text, p_start timestamptz) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT coalesce(p_start < agentstate_period_start(p_period), false)
$$;

-- Refuse an add that takes p_budget ('run' or 'user') past its cap on p_counter.
CREATE FUNCTION agentstate_exceeded(
    p_budget text, p_counter text, p_increment bigint, p_cap bigint, p_used bigint
) RETURNS jsonb
LANGUAGE sql AS $$
    SELECT agentstate_refuse('BudgetExceeded', jsonb_build_object('budget', p_budget,
        'counter', p_counter, 'increment', p_increment, 'cap', p_cap, 'used', p_used))
$$;

-- The counters of a budget's row as JSON (a run's: its own usage instead).
CREATE FUNCTION agentstate_counters(
    p_requests bigint, p_input bigint, p_output bigint, p_total bigint
) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('requests', p_requests, 'input_tokens', p_input,
        'output_tokens', p_output, 'total_tokens', p_total)
$$;

-- The caps as event details hold them: every counter, null where uncapped.
CREATE FUNCTION agentstate_caps(p_budget jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('requests', p_budget -> 'max_requests',
        'input_tokens', p_budget -> 'max_input_tokens',
        'output_tokens', p_budget -> 'max_output_tokens',
        'total_tokens', p_budget -> 'max_total_tokens')
$$;

-- p_caps as the request gave it: the counters it names, each a cap or null.
CREATE FUNCTION agentstate_cap(p_caps jsonb, p_counter text, p_held bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_caps ? p_counter THEN (p_caps ->> p_counter)::bigint ELSE p_held END
$$;

CREATE FUNCTION agentstate_run_budget(p_run_id text, p_reach bigint) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    rn agentstate_run := agentstate_reached_run(p_run_id, p_reach);
    b agentstate_budget;
BEGIN
    SELECT * INTO b FROM agentstate_budget WHERE run_id = rn.id;
    RETURN jsonb_build_object(
        'budget', CASE WHEN b.id IS NOT NULL THEN to_jsonb(b) END,
        'used', agentstate_counters(rn.requests, rn.input_tokens, rn.output_tokens,
                                    rn.total_tokens),
        'resets_at', NULL);
END $$;

-- Create or change the run's budget under the run's row lock (which every
-- writer of a run's budget holds); an event unless the caps are as they were.
CREATE FUNCTION agentstate_set_run_budget(
    p_run_id text, p_caps jsonb, p_reach bigint, p_user bigint, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    rn agentstate_run := agentstate_locked_run(p_run_id, p_reach);
    before agentstate_budget;
    b agentstate_budget;
    changed jsonb := '[]';
BEGIN
    SELECT * INTO before FROM agentstate_budget WHERE run_id = rn.id;
    IF before.id IS NULL THEN
        INSERT INTO agentstate_budget
            (run_id, user_id, period, max_requests, max_input_tokens, max_output_tokens,
             max_total_tokens, used_requests, used_input_tokens, used_output_tokens,
             used_total_tokens, period_start, updated_at)
        VALUES (rn.id, NULL, '',
                agentstate_cap(p_caps, 'requests', NULL),
                agentstate_cap(p_caps, 'input_tokens', NULL),
                agentstate_cap(p_caps, 'output_tokens', NULL),
                agentstate_cap(p_caps, 'total_tokens', NULL),
                0, 0, 0, 0, statement_timestamp(), statement_timestamp())
        RETURNING * INTO b;
    ELSE
        b := before;
        b.max_requests := agentstate_cap(p_caps, 'requests', b.max_requests);
        b.max_input_tokens := agentstate_cap(p_caps, 'input_tokens', b.max_input_tokens);
        b.max_output_tokens := agentstate_cap(p_caps, 'output_tokens', b.max_output_tokens);
        b.max_total_tokens := agentstate_cap(p_caps, 'total_tokens', b.max_total_tokens);
        IF b IS DISTINCT FROM before THEN
            UPDATE agentstate_budget SET
                max_requests = b.max_requests, max_input_tokens = b.max_input_tokens,
                max_output_tokens = b.max_output_tokens, max_total_tokens = b.max_total_tokens,
                updated_at = statement_timestamp()
            WHERE id = b.id
            RETURNING * INTO b;
        END IF;
    END IF;
    IF before.id IS NULL OR b IS DISTINCT FROM before THEN
        changed := jsonb_build_array(agentstate_record('budget.changed', 'budget',
            'run:' || rn.run_id, p_user, p_actor, rn.created_by_id, '', jsonb_build_object(
                'caps', agentstate_caps(to_jsonb(b)), 'period', NULL, 'run_id', rn.run_id)));
    END IF;
    RETURN jsonb_build_object(
        'budget', to_jsonb(b),
        'used', agentstate_counters(rn.requests, rn.input_tokens, rn.output_tokens,
                                    rn.total_tokens),
        'resets_at', NULL, 'events', changed);
END $$;

-- The user's budget as it stands now: a period that is over reads as rolled over.
CREATE FUNCTION agentstate_user_budget(p_username text) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    uid bigint := agentstate_user_id(p_username);
    b agentstate_budget;
BEGIN
    IF uid IS NULL THEN
        RETURN agentstate_refuse('UserNotFound', jsonb_build_object('username', p_username));
    END IF;
    SELECT * INTO b FROM agentstate_budget WHERE user_id = uid;
    IF b.id IS NULL THEN
        RETURN jsonb_build_object('budget', NULL, 'used', agentstate_counters(0, 0, 0, 0),
                                  'resets_at', NULL);
    END IF;
    IF agentstate_period_over(b.period, b.period_start) THEN
        b.used_requests := 0; b.used_input_tokens := 0;
        b.used_output_tokens := 0; b.used_total_tokens := 0;
        b.period_start := agentstate_period_start(b.period);
    END IF;
    RETURN jsonb_build_object(
        'budget', to_jsonb(b),
        'used', agentstate_counters(b.used_requests, b.used_input_tokens,
                                    b.used_output_tokens, b.used_total_tokens),
        'resets_at', agentstate_period_end(b.period));
END $$;

-- Create or change the user's budget under its row lock. p_period: '', 'day'
-- or 'month', NULL to keep it; a new budget or a new period counts from 0 now.
-- A period that is over is rolled over as it is written. An event unless the
-- caps and the period are as they were.
CREATE FUNCTION agentstate_set_user_budget(
    p_username text, p_caps jsonb, p_period text, p_user bigint, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    uid bigint := agentstate_user_id(p_username);
    created boolean;
    before agentstate_budget;
    b agentstate_budget;
    changed jsonb := '[]';
BEGIN
    IF uid IS NULL THEN
        RETURN agentstate_refuse('UserNotFound', jsonb_build_object('username', p_username));
    END IF;
    -- an upsert: a concurrent first setter's row is waited for, then locked
    INSERT INTO agentstate_budget
        (run_id, user_id, period, max_requests, max_input_tokens, max_output_tokens,
         max_total_tokens, used_requests, used_input_tokens, used_output_tokens,
         used_total_tokens, period_start, updated_at)
    VALUES (NULL, uid, '', NULL, NULL, NULL, NULL, 0, 0, 0, 0, statement_timestamp(),
            statement_timestamp())
    ON CONFLICT (user_id) DO NOTHING;
    created := FOUND;
    SELECT * INTO before FROM agentstate_budget WHERE user_id = uid FOR UPDATE;
    b := before;
    IF agentstate_period_over(b.period, b.period_start) THEN
        b.used_requests := 0; b.used_input_tokens := 0;
        b.used_output_tokens := 0; b.used_total_tokens := 0;
        b.period_start := agentstate_period_start(b.period);
    END IF;
    IF p_period IS NOT NULL AND p_period <> b.period THEN
        b.period := p_period;
        b.used_requests := 0; b.used_input_tokens := 0;
        b.used_output_tokens := 0; b.used_total_tokens := 0;
        b.period_start := statement_timestamp();
    END IF;
    b.max_requests := agentstate_cap(p_caps, 'requests', b.max_requests);
    b.max_input_tokens := agentstate_cap(p_caps, 'input_tokens', b.max_input_tokens);
    b.max_output_tokens := agentstate_cap(p_caps, 'output_tokens', b.max_output_tokens);
    b.max_total_tokens := agentstate_cap(p_caps, 'total_tokens', b.max_total_tokens);
    IF b IS DISTINCT FROM before THEN
        UPDATE agentstate_budget SET
            period = b.period, max_requests = b.max_requests,
            max_input_tokens = b.max_input_tokens, max_output_tokens = b.max_output_tokens,
            max_total_tokens = b.max_total_tokens, used_requests = b.used_requests,
            used_input_tokens = b.used_input_tokens, used_output_tokens = b.used_output_tokens,
            used_total_tokens = b.used_total_tokens, period_start = b.period_start,
            updated_at = statement_timestamp()
        WHERE id = b.id
        RETURNING * INTO b;
    END IF;
    IF created OR (before.period, before.max_requests, before.max_input_tokens,
                   before.max_output_tokens, before.max_total_tokens)
                  IS DISTINCT FROM (b.period, b.max_requests, b.max_input_tokens,
                                    b.max_output_tokens, b.max_total_tokens) THEN
        changed := jsonb_build_array(agentstate_record('budget.changed', 'budget',
            'user:' || p_username, p_user, p_actor, uid, '', jsonb_build_object(
                'caps', agentstate_caps(to_jsonb(b)), 'period', nullif(b.period, ''),
                'username', p_username)));
    END IF;
    RETURN jsonb_build_object(
        'budget', to_jsonb(b),
        'used', agentstate_counters(b.used_requests, b.used_input_tokens,
                                    b.used_output_tokens, b.used_total_tokens),
        'resets_at', agentstate_period_end(b.period), 'events', changed);
END $$;

-- 40_sweep.sql

-- The sweep: each call one batch of at most p_size rows, as one statement.
--
-- A batch takes its due rows FOR UPDATE SKIP LOCKED, so two sweeps at once
-- take disjoint batches and neither waits for a claim or a decision in
-- progress; a row changed meanwhile no longer matches once it is locked, so
-- a pause is claimed or expired, never both. The expiring statements write
-- one event per row they changed and answer {"count", "events"}.

CREATE FUNCTION agentstate_expire_pauses(p_size integer, p_actor text) RETURNS jsonb
LANGUAGE sql AS $$
    WITH batch AS (
        SELECT id FROM agentstate_pausedrun
        WHERE status = 'pending' AND expires_at <= now()
        ORDER BY expires_at LIMIT p_size
        FOR UPDATE SKIP LOCKED
    ), expired AS (
        UPDATE agentstate_pausedrun pause SET status = 'expired' FROM batch
        WHERE pause.id = batch.id
        RETURNING pause.chat_id, pause.tool_call_id, pause.owner, pause.created_by_id,
                  pause.question_id
    ), logged AS (
        INSERT INTO agentstate_event
            (kind, actor, user_id, object_type, object_id, created_by_id, owner, details,
             created_at)
        SELECT 'pause.expired', p_actor, NULL, 'pausedrun', chat_id || '#' || tool_call_id,
               created_by_id, owner, jsonb_build_object('question_id', question_id), now()
        FROM expired
        RETURNING agentstate_event.*
    )
    SELECT jsonb_build_object(
        'count', count(*), 'events', coalesce(jsonb_agg(to_jsonb(logged) ORDER BY id), '[]'))
    FROM logged
$$;

CREATE FUNCTION agentstate_expire_approval_requests(
    p_size integer, p_ttl interval, p_actor text
) RETURNS jsonb
LANGUAGE sql AS $$
    WITH batch AS (
        SELECT id FROM agentstate_approvalrequest
        WHERE status = 'pending' AND created_at <= now() - p_ttl
        ORDER BY created_at LIMIT p_size
        FOR UPDATE SKIP LOCKED
    ), expired AS (
        UPDATE agentstate_approvalrequest request SET status = 'expired' FROM batch
        WHERE request.id = batch.id
        RETURNING request.id, request.run_id, request.created_by_id, request.tool_name,
                  request.call_id
    ), logged AS (
        INSERT INTO agentstate_event
            (kind, actor, user_id, object_type, object_id, created_by_id, owner, details,
             created_at)
        SELECT 'approval.expired', p_actor, NULL, 'approvalrequest', expired.id::text,
               expired.created_by_id, '',
               jsonb_build_object('run_id', run.run_id, 'tool_name', expired.tool_name,
                                  'call_id', expired.call_id),
               now()
        FROM expired JOIN agentstate_run run ON run.id = expired.run_id
        RETURNING agentstate_event.*
    )
    SELECT jsonb_build_object(
        'count', count(*), 'events', coalesce(jsonb_agg(to_jsonb(logged) ORDER BY id), '[]'))
    FROM logged
$$;

-- Resolved and expired pauses last changed more than p_retention ago; how many.
CREATE FUNCTION agentstate_purge_pauses(p_size integer, p_retention interval) RETURNS jsonb
LANGUAGE sql AS $$
    WITH batch AS (
        SELECT id FROM agentstate_pausedrun
        WHERE (status = 'resolved' AND resolved_at < now() - p_retention)
           OR (status = 'expired' AND expires_at < now() - p_retention)
        LIMIT p_size
        FOR UPDATE SKIP LOCKED
    ), purged AS (
        DELETE FROM agentstate_pausedrun pause USING batch WHERE pause.id = batch.id
        RETURNING pause.id
    )
    SELECT jsonb_build_object('count', count(*)) FROM purged
$$;

-- Events older than p_retention, with their webhook deliveries and attempts; how many.
CREATE FUNCTION agentstate_purge_events(p_size integer, p_retention interval) RETURNS jsonb
LANGUAGE sql AS $$
    WITH batch AS (
        SELECT id FROM agentstate_event WHERE created_at < now() - p_retention
        ORDER BY created_at LIMIT p_size
        FOR UPDATE SKIP LOCKED
    ), attempts AS (
        DELETE FROM agentstate_deliveryattempt attempt USING agentstate_delivery delivery, batch
        WHERE attempt.delivery_id = delivery.id AND delivery.event_id = batch.id
    ), deliveries AS (
        DELETE FROM agentstate_delivery delivery USING batch WHERE delivery.event_id = batch.id
    ), purged AS (
        DELETE FROM agentstate_event event USING batch WHERE event.id = batch.id
        RETURNING event.id
    )
    SELECT jsonb_build_object('count', count(*)) FROM purged
$$;

-- 50_langgraph.sql

-- LangGraph checkpoints (agentstate.contrib.langgraph.AgentStateSaver): the hot
-- path, each one call. The rarer operations (list, delete, copy, prune) run on
-- the ORM on every database: one function would save them nothing that counts.

-- The thread's row id, made or locked (FOR NO KEY UPDATE, as an update locks it), so
-- that the puts of one thread queue on it. Its updated_at is indexed (THREAD_TTL), so
-- setting it is never a HOT update: it is set to now only when more than a minute old
-- (base.THREAD_TOUCH), and the sweep allows for that minute.
CREATE FUNCTION agentstate_touch_thread(p_thread text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    tid bigint;
    touched timestamptz;
BEGIN
    SELECT id, updated_at INTO tid, touched FROM agentstate_thread
    WHERE thread_id = p_thread FOR NO KEY UPDATE;
    IF tid IS NULL THEN
        INSERT INTO agentstate_thread AS t (thread_id, created_at, updated_at)
        VALUES (p_thread, now(), now())
        ON CONFLICT (thread_id) DO UPDATE SET updated_at = now()
        RETURNING t.id INTO tid;
    ELSIF touched < now() - interval '1 minute' THEN
        UPDATE agentstate_thread SET updated_at = now() WHERE id = tid;
    END IF;
    RETURN tid;
END $$;

-- A checkpoint and its new channel values; a fork (its parent already has
-- another child, or a second root) is marked, or refused with p_refuse.
CREATE FUNCTION agentstate_put_checkpoint(
    p_thread text, p_ns text, p_id text, p_parent text, p_checkpoint jsonb, p_metadata jsonb,
    p_channels text[], p_versions text[], p_types text[], p_blobs bytea[], p_refuse boolean
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_thread bigint := agentstate_touch_thread(p_thread);
    v_sibling text;
    v_step text := p_metadata ->> 'step';
BEGIN
    IF p_parent IS NULL THEN
        SELECT checkpoint_id INTO v_sibling FROM agentstate_checkpoint
        WHERE thread_id = v_thread AND checkpoint_ns = p_ns AND parent_checkpoint_id IS NULL
          AND checkpoint_id <> p_id
        LIMIT 1;
    ELSE
        SELECT checkpoint_id INTO v_sibling FROM agentstate_checkpoint
        WHERE thread_id = v_thread AND checkpoint_ns = p_ns AND parent_checkpoint_id = p_parent
          AND checkpoint_id <> p_id
        LIMIT 1;
    END IF;
    IF v_sibling IS NOT NULL AND p_refuse THEN
        RETURN agentstate_refuse('HistoryForked', jsonb_build_object(
            'thread_id', p_thread, 'checkpoint_ns', p_ns, 'parent', p_parent,
            'head', v_sibling));
    END IF;
    INSERT INTO agentstate_checkpointblob (thread_id, checkpoint_ns, channel, version, type, blob)
    SELECT v_thread, p_ns, b.channel, b.version, b.type, b.blob
    FROM unnest(p_channels, p_versions, p_types, p_blobs) AS b(channel, version, type, blob)
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING;
    INSERT INTO agentstate_checkpoint AS c
        (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata,
         run_id, step, forked, created_at)
    VALUES (v_thread, p_ns, p_id, p_parent, p_checkpoint, p_metadata,
            p_metadata ->> 'run_id',
            CASE WHEN jsonb_typeof(p_metadata -> 'step') = 'number'
                      AND v_step ~ '^-?[0-9]{1,9}$' THEN v_step::integer END,
            v_sibling IS NOT NULL, now())
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET
        parent_checkpoint_id = EXCLUDED.parent_checkpoint_id, checkpoint = EXCLUDED.checkpoint,
        metadata = EXCLUDED.metadata, run_id = EXCLUDED.run_id, step = EXCLUDED.step;
    RETURN jsonb_build_object('forked', v_sibling IS NOT NULL);
END $$;

-- A task's pending writes: a special channel's (negative idx) replaces the
-- stored one, any other is kept as first written.
CREATE FUNCTION agentstate_put_checkpoint_writes(
    p_thread text, p_ns text, p_id text, p_task text, p_path text,
    p_idx integer[], p_channels text[], p_types text[], p_blobs bytea[]
) RETURNS jsonb
LANGUAGE sql AS $$
    INSERT INTO agentstate_checkpointwrite AS w
        (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob)
    SELECT agentstate_touch_thread(p_thread), p_ns, p_id, p_task, p_path,
           x.idx, x.channel, x.type, x.blob
    FROM unnest(p_idx, p_channels, p_types, p_blobs) AS x(idx, channel, type, blob)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET
        channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob,
        task_path = EXCLUDED.task_path
    WHERE EXCLUDED.idx < 0;
    SELECT '{}'::jsonb
$$;

-- A checkpoint (p_id NULL: the namespace's latest) with its channel values and
-- pending writes as parallel arrays; no row when there is none.
CREATE FUNCTION agentstate_checkpoint(p_thread text, p_ns text, p_id text)
RETURNS TABLE (
    checkpoint_id text, parent_checkpoint_id text, checkpoint jsonb, metadata jsonb,
    blob_channels text[], blob_types text[], blobs bytea[],
    write_tasks text[], write_channels text[], write_types text[], write_blobs bytea[],
    write_paths text[], write_idx integer[]
)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    c agentstate_checkpoint%ROWTYPE;
BEGIN
    IF p_id IS NULL THEN
        SELECT cp.* INTO c FROM agentstate_checkpoint cp
        WHERE cp.thread_id = (SELECT t.id FROM agentstate_thread t WHERE t.thread_id = p_thread)
          AND cp.checkpoint_ns = p_ns
        ORDER BY cp.checkpoint_id DESC LIMIT 1;
    ELSE
        SELECT cp.* INTO c FROM agentstate_checkpoint cp
        WHERE cp.thread_id = (SELECT t.id FROM agentstate_thread t WHERE t.thread_id = p_thread)
          AND cp.checkpoint_ns = p_ns AND cp.checkpoint_id = p_id;
    END IF;
    IF c.id IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT c.checkpoint_id::text, c.parent_checkpoint_id::text, c.checkpoint, c.metadata,
           b.channels, b.types, b.blobs,
           w.tasks, w.channels, w.types, w.blobs, w.paths, w.idx
    FROM (
        SELECT array_agg(bl.channel::text) AS channels, array_agg(bl.type::text) AS types,
               array_agg(bl.blob) AS blobs
        FROM jsonb_each_text(c.checkpoint -> 'channel_versions') AS v(channel, version)
        JOIN agentstate_checkpointblob bl
          ON bl.thread_id = c.thread_id AND bl.checkpoint_ns = c.checkpoint_ns
         AND bl.channel = v.channel AND bl.version = v.version
        WHERE bl.type <> 'empty'
    ) b, (
        SELECT array_agg(wr.task_id::text) AS tasks, array_agg(wr.channel::text) AS channels,
               array_agg(wr.type::text) AS types, array_agg(wr.blob) AS blobs,
               array_agg(wr.task_path) AS paths, array_agg(wr.idx) AS idx
        FROM agentstate_checkpointwrite wr
        WHERE wr.thread_id = c.thread_id AND wr.checkpoint_ns = c.checkpoint_ns
          AND wr.checkpoint_id = c.checkpoint_id
    ) w;
END $$;

-- The sweep: one batch of threads last put more than p_ttl ago (updated_at older than
-- p_ttl and the minute a put may leave it unchanged), with everything they hold (a
-- thread being written is locked, so skipped).
CREATE FUNCTION agentstate_purge_threads(p_size integer, p_ttl interval) RETURNS jsonb
LANGUAGE sql AS $$
    WITH batch AS (
        SELECT id FROM agentstate_thread
        WHERE updated_at < now() - p_ttl - interval '1 minute'
        ORDER BY updated_at LIMIT p_size
        FOR UPDATE SKIP LOCKED
    ), writes AS (
        DELETE FROM agentstate_checkpointwrite w USING batch WHERE w.thread_id = batch.id
    ), blobs AS (
        DELETE FROM agentstate_checkpointblob b USING batch WHERE b.thread_id = batch.id
    ), checkpoints AS (
        DELETE FROM agentstate_checkpoint c USING batch WHERE c.thread_id = batch.id
    ), gone AS (
        DELETE FROM agentstate_thread t USING batch WHERE t.id = batch.id RETURNING 1
    )
    SELECT jsonb_build_object('count', count(*)) FROM gone
$$;

-- The sweep: one batch of the store's items (AgentStateStore: the variables of
-- the site's scopes keyed p_prefix...) whose expires_at (epoch seconds) is at
-- most p_now (an item being written is locked, so skipped).
CREATE FUNCTION agentstate_purge_store_items(
    p_size integer, p_prefix text, p_now double precision
) RETURNS jsonb
LANGUAGE sql AS $$
    WITH batch AS (
        SELECT v.id FROM agentstate_variable v
        JOIN agentstate_scope s ON s.id = v.scope_id
        WHERE s.owner_id IS NULL AND starts_with(s.key, p_prefix)
          AND jsonb_typeof(v.value -> 'expires_at') = 'number'
          AND (v.value ->> 'expires_at')::double precision <= p_now
        LIMIT p_size
        FOR UPDATE OF v SKIP LOCKED
    ), elements AS (
        DELETE FROM agentstate_element e USING batch WHERE e.variable_id = batch.id
    ), gone AS (
        DELETE FROM agentstate_variable v USING batch WHERE v.id = batch.id RETURNING 1
    )
    SELECT jsonb_build_object('count', count(*)) FROM gone
$$;

-- 55_langgraph_store.sql

-- LangGraph's store (agentstate.contrib.langgraph.AgentStateStore): an item is a
-- variable of one of the site's scopes (no owner) keyed 'langgraph:'..., its value
-- {"value", "created_at", "updated_at"} and, with a TTL, "ttl" (minutes) and
-- "expires_at" (epoch seconds). A get (a batch of them) and a put are one call
-- each, the hot path; search and list_namespaces run on the ORM.

-- Whether an item's value is live at p_now: no expires_at, or one after p_now.
CREATE FUNCTION agentstate_store_live(p_value jsonb, p_now double precision) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_typeof(p_value -> 'expires_at') IS DISTINCT FROM 'number'
        OR (p_value ->> 'expires_at')::double precision > p_now
$$;

-- The live items that p_items ([[scope, name, refresh], ...]) name, as {"items": [value
-- or null, ...]} in that order (JSON in: one parameter, cheap to send). An item asked
-- with refresh that has a TTL gets its expires_at pushed to p_now + ttl minutes, its
-- row locked (a write that got there first stands, and the refresh applies to it).
-- One item at a time: a statement per item whose plan PL/pgSQL keeps is far cheaper
-- than one planned over the whole batch.
CREATE FUNCTION agentstate_store_get(p_items jsonb, p_now double precision, p_actor text)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    answer jsonb := '[]';
    item jsonb;
    scope_key text;
    item_name text;
    vid bigint;
    held jsonb;
    refreshed jsonb;
BEGIN
    FOR i IN 0 .. jsonb_array_length(p_items) - 1 LOOP
        item := p_items -> i;
        scope_key := item ->> 0;
        item_name := item ->> 1;
        SELECT v.id, v.value INTO vid, held FROM agentstate_variable v
        WHERE v.scope_id = (SELECT s.id FROM agentstate_scope s
                            WHERE s.key = scope_key AND s.owner_id IS NULL)
          AND v.name = item_name AND NOT v.is_list;
        IF vid IS NULL OR NOT agentstate_store_live(held, p_now) THEN
            held := NULL;
        ELSIF item -> 2 = 'true' AND jsonb_typeof(held -> 'ttl') = 'number'
              AND (held ->> 'ttl')::double precision <> 0 THEN
            UPDATE agentstate_variable v
            SET value = jsonb_set(v.value, '{expires_at}',
                                  to_jsonb(p_now + 60 * (v.value ->> 'ttl')::double precision)),
                version = v.version + 1, updated_at = now(), updated_by = p_actor
            WHERE v.id = vid AND NOT v.is_list
              AND jsonb_typeof(v.value -> 'ttl') = 'number'
              AND (v.value ->> 'ttl')::double precision <> 0
              AND agentstate_store_live(v.value, p_now)
            RETURNING v.value INTO refreshed;
            IF FOUND THEN
                held := refreshed;
            END IF;
        END IF;
        answer := answer || jsonb_build_array(held);
    END LOOP;
    RETURN jsonb_build_object('items', answer);
END $$;

-- Put an item's value, keeping the created_at of the item already there (expired and
-- not yet swept too). An item already there is one UPDATE: it locks the variable's
-- row, which is all agentstate_delete_scope waits for (the scope's row is not
-- touched). Else the scope is held FOR KEY SHARE (agentstate_ensure_scope) and the
-- variable upserted, as agentstate_put does; a list written there through the
-- context API is replaced, its elements deleted.
CREATE FUNCTION agentstate_store_put(
    p_scope text, p_name text, p_value jsonb, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    sid bigint;
    vid bigint;
BEGIN
    UPDATE agentstate_variable v
    SET value = p_value || jsonb_build_object(
            'created_at', coalesce(nullif(v.value -> 'created_at', 'null'), p_value -> 'created_at')),
        version = v.version + 1, updated_at = now(), updated_by = p_actor
    WHERE v.scope_id = (SELECT s.id FROM agentstate_scope s
                        WHERE s.key = p_scope AND s.owner_id IS NULL)
      AND v.name = p_name AND NOT v.is_list;
    IF FOUND THEN
        RETURN '{}';
    END IF;
    sid := agentstate_ensure_scope(p_scope, NULL);
    INSERT INTO agentstate_variable AS v
        (scope_id, name, is_list, value, head, tail, version, updated_at, updated_by)
    VALUES (sid, p_name, false, p_value, 0, 0, 1, now(), p_actor)
    ON CONFLICT (scope_id, name) DO UPDATE
    SET value = EXCLUDED.value || jsonb_build_object(
            'created_at', coalesce(nullif(v.value -> 'created_at', 'null'),
                                   EXCLUDED.value -> 'created_at')),
        version = v.version + 1, updated_at = now(), updated_by = p_actor
    WHERE NOT v.is_list
    RETURNING v.id INTO vid;
    IF vid IS NULL THEN  -- a list (the upsert left its row locked)
        SELECT id INTO vid FROM agentstate_variable WHERE scope_id = sid AND name = p_name;
        DELETE FROM agentstate_element WHERE variable_id = vid;
        UPDATE agentstate_variable
        SET is_list = false, value = p_value, head = 0, tail = 0, version = version + 1,
            updated_at = now(), updated_by = p_actor
        WHERE id = vid;
    END IF;
    RETURN '{}';
END $$;
