-- LangGraph's store (agentstate.contrib.langgraph.AgentStateStore): an item is a
-- variable of one of the site's scopes (no owner) keyed 'langgraph:'..., its value
-- {"value", "created_at", "updated_at"} and, with a TTL, "ttl" (minutes) and
-- "expires_at" (epoch seconds). Its times are the database's clock, written by the
-- put and compared by reads and the sweep. A get (a batch of them) and a put are
-- one call each, the hot path; search and list_namespaces run on the ORM.

-- Whether an item's value is live at p_now: no expires_at, or one after p_now.
CREATE FUNCTION agentstate_store_live(p_value jsonb, p_now double precision) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_typeof(p_value -> 'expires_at') IS DISTINCT FROM 'number'
        OR (p_value ->> 'expires_at')::double precision > p_now
$$;

-- The database's clock now (the statement's start) in epoch seconds, what an item's
-- expires_at counts in.
CREATE FUNCTION agentstate_store_now() RETURNS double precision
LANGUAGE sql STABLE AS $$
    SELECT extract(epoch FROM statement_timestamp())::double precision
$$;

-- The live items that p_items ([[scope, name, refresh], ...]) name, as {"items": [value
-- or null, ...]} in that order (JSON in: one parameter, cheap to send). An item asked
-- with refresh that has a TTL gets its expires_at pushed to now + ttl minutes, its
-- row locked (a write that got there first stands, and the refresh applies to it).
-- One item at a time: a statement per item whose plan PL/pgSQL keeps is far cheaper
-- than one planned over the whole batch. The answers are gathered in an array
-- (array_append on a PL/pgSQL variable appends in place), made JSON once: each ||
-- on a jsonb array copies it whole, the batch's time growing with its square.
CREATE FUNCTION agentstate_store_get(p_items jsonb, p_actor text)
RETURNS jsonb
LANGUAGE plpgsql SET enable_seqscan = off SET jit = off AS $$
DECLARE
    epoch_now double precision := agentstate_store_now();
    answer jsonb[] := '{}';
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
        IF vid IS NULL OR NOT agentstate_store_live(held, epoch_now) THEN
            held := NULL;
        ELSIF item -> 2 = 'true' AND jsonb_typeof(held -> 'ttl') = 'number'
              AND (held ->> 'ttl')::double precision <> 0 THEN
            UPDATE agentstate_variable v
            SET value = jsonb_set(v.value, '{expires_at}',
                                  to_jsonb(epoch_now + 60 * (v.value ->> 'ttl')::double precision)),
                version = v.version + 1, updated_at = now(), updated_by = p_actor
            WHERE v.id = vid AND NOT v.is_list
              AND jsonb_typeof(v.value -> 'ttl') = 'number'
              AND (v.value ->> 'ttl')::double precision <> 0
              AND agentstate_store_live(v.value, epoch_now)
            RETURNING v.value INTO refreshed;
            IF FOUND THEN
                held := refreshed;
            END IF;
        END IF;
        answer := array_append(answer, held);
    END LOOP;
    RETURN jsonb_build_object('items', to_jsonb(answer));
END $$;

-- Put an item: p_value is {"value"} and, with a TTL, "ttl" (minutes); its
-- created_at and updated_at are now, its expires_at now + ttl minutes, by the
-- database's clock; the created_at of the item already there is kept (expired and
-- not yet swept too). An item already there is one UPDATE: it locks the variable's
-- row, which is all agentstate_delete_scope waits for (the scope's row is not
-- touched). Else the scope is held FOR KEY SHARE (agentstate_ensure_scope) and the
-- variable upserted, as agentstate_put does; a list written there through the
-- context API is replaced, its elements deleted.
CREATE FUNCTION agentstate_store_put(
    p_scope text, p_name text, p_value jsonb, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql SET enable_seqscan = off SET jit = off AS $$
DECLARE
    sid bigint;
    vid bigint;
    stamp jsonb := to_jsonb(agentstate_json_time(statement_timestamp()));
BEGIN
    p_value := p_value || jsonb_build_object('created_at', stamp, 'updated_at', stamp)
        || CASE WHEN jsonb_typeof(p_value -> 'ttl') = 'number' THEN jsonb_build_object(
               'expires_at',
               agentstate_store_now() + 60 * (p_value ->> 'ttl')::double precision)
           ELSE '{}' END;
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
