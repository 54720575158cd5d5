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
-- cannot be deleted before this transaction adds a variable to it. The id is
-- looked up first, then its row locked: a function in the locking statement's
-- WHERE would be called for every row a sequential scan reads (the plan the
-- planner picks while the table is small).
CREATE FUNCTION agentstate_ensure_scope(p_key text, p_owner bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    found_id bigint;
BEGIN
    LOOP
        found_id := agentstate_scope_id(p_key, p_owner);
        SELECT id INTO found_id FROM agentstate_scope WHERE id = found_id FOR KEY SHARE;
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
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
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

-- [[name, value], ...] by name: lists whole, in order. The named variables and the
-- whole scope are two parts of a UNION ALL, each with its own plan (the one not
-- asked for answers nothing without reading): as one WHERE (p_names IS NULL OR
-- name = ANY (p_names)), the generic plan could not look the names up in the index
-- and read every variable of the scope for one name.
CREATE FUNCTION agentstate_get(p_scope text, p_names text[], p_owner_id bigint, p_owner_name text) RETURNS jsonb
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
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
        FROM (
            SELECT * FROM agentstate_variable WHERE scope_id = sid AND p_names IS NULL
            UNION ALL
            SELECT * FROM agentstate_variable WHERE scope_id = sid AND name = ANY (p_names)
        ) v
    ), '[]'));
END $$;

-- Append p_values (a non-empty array), each one element, in order, under the
-- variable's lock: push and extend. p_operation names the refused operation.
CREATE FUNCTION agentstate_append(
    p_scope text, p_name text, p_values jsonb, p_owner_id bigint, p_owner_name text, p_actor text,
    p_operation text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
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
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
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
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
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
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
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
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    who bigint := agentstate_owner_id(p_owner_id, p_owner_name);
    sid bigint;
BEGIN
    sid := agentstate_scope_id(p_scope, who);  -- then its row (agentstate_ensure_scope)
    SELECT id INTO sid FROM agentstate_scope WHERE id = sid FOR UPDATE;
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
