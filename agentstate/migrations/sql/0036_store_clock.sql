-- 0036: the LangGraph store's times by the database's clock. A put writes an item's
-- created_at, updated_at and expires_at from it; a get, a refresh and the sweep
-- compare expires_at with it. All three were the clock of the process calling.

CREATE FUNCTION agentstate_store_now() RETURNS double precision
LANGUAGE sql STABLE AS $$
    SELECT extract(epoch FROM statement_timestamp())::double precision
$$;

DROP FUNCTION agentstate_store_get(jsonb, double precision, text);

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

CREATE OR REPLACE FUNCTION agentstate_store_put(
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

DROP FUNCTION agentstate_purge_store_items(integer, text, double precision, bigint, text);

CREATE FUNCTION agentstate_purge_store_items(
    p_size integer, p_prefix text, p_after_scope bigint, p_after_name text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    epoch_now double precision := agentstate_store_now();
    sid bigint;
    from_name text;  -- the item the scope is read after ('': its first; names are never '')
    found bigint[];
    last_name text;
    ids bigint[] := '{}';
    resume jsonb;  -- where the next batch starts: none once the items are read to the end
BEGIN
    FOR sid IN
        SELECT s.id FROM agentstate_scope s
        WHERE s.owner_id IS NULL AND starts_with(s.key, p_prefix)
          AND s.id >= coalesce(p_after_scope, 0)
        ORDER BY s.id
    LOOP
        from_name := CASE WHEN sid = p_after_scope THEN p_after_name ELSE '' END;
        SELECT coalesce(array_agg(v.id ORDER BY v.name), '{}'), max(v.name)
        INTO found, last_name
        FROM (
            SELECT v.id, v.name FROM agentstate_variable v
            WHERE v.scope_id = sid AND v.name > from_name
              AND jsonb_typeof(v.value -> 'expires_at') = 'number'
              AND (v.value ->> 'expires_at')::double precision <= epoch_now
            ORDER BY v.name LIMIT p_size - cardinality(ids)
            FOR UPDATE SKIP LOCKED
        ) v;
        ids := ids || found;
        IF cardinality(ids) >= p_size THEN
            resume := jsonb_build_array(sid, last_name);
            EXIT;
        END IF;
    END LOOP;
    DELETE FROM agentstate_element WHERE variable_id = ANY (ids);
    DELETE FROM agentstate_variable WHERE id = ANY (ids);
    RETURN jsonb_build_object('count', cardinality(ids), 'after', resume);
END $$;
