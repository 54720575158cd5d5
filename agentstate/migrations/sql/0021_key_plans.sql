-- 0021: every operation's function (and LangGraph's writes and store) keeps its
-- statements off sequential scans (enable_seqscan = off). A plan made while a table
-- is empty scans it, and a kept (generic) plan stays so until the table's statistics
-- change: each call reads the whole table as it grows. jit = off with it: a scan
-- left as the only way (a table without a usable index) is costed so high that the
-- statement would be compiled at every call.

CREATE OR REPLACE FUNCTION agentstate_put(
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

CREATE OR REPLACE FUNCTION agentstate_get(p_scope text, p_names text[], p_owner_id bigint, p_owner_name text) RETURNS jsonb
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
        FROM agentstate_variable v
        WHERE v.scope_id = sid AND (p_names IS NULL OR v.name = ANY (p_names))
    ), '[]'));
END $$;

CREATE OR REPLACE FUNCTION agentstate_append(
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

CREATE OR REPLACE FUNCTION agentstate_get_list(
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

CREATE OR REPLACE FUNCTION agentstate_pop(
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

CREATE OR REPLACE FUNCTION agentstate_delete(p_scope text, p_name text, p_owner_id bigint, p_owner_name text) RETURNS jsonb
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

CREATE OR REPLACE FUNCTION agentstate_delete_scope(p_scope text, p_owner_id bigint, p_owner_name text) RETURNS jsonb
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

CREATE OR REPLACE FUNCTION agentstate_put_pause(
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

CREATE OR REPLACE FUNCTION agentstate_claim(
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

CREATE OR REPLACE FUNCTION agentstate_resolve(
    p_chat text, p_call text, p_reach_user bigint, p_reach_name text, p_user_id bigint,
    p_actor text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
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

CREATE OR REPLACE FUNCTION agentstate_cancel(
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

CREATE OR REPLACE FUNCTION agentstate_create_run(p_run_id text, p_context jsonb, p_created_by bigint)
RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
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

CREATE OR REPLACE FUNCTION agentstate_update_run(p_run_id text, p_context jsonb, p_reach bigint)
RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
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

CREATE OR REPLACE FUNCTION agentstate_add_usage(
    p_run_id text, p_requests bigint, p_input bigint, p_output bigint, p_total bigint,
    p_cached bigint, p_reasoning bigint, p_reach bigint
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    top constant bigint := 9223372036854775807;
    rn agentstate_run := agentstate_locked_run(p_run_id, p_reach);
    own agentstate_budget;
    shared agentstate_budget;
    over text;
BEGIN
    -- the first counter, in this order, that the add would take past top
    over := CASE WHEN rn.requests > top - p_requests THEN 'requests'
                 WHEN rn.input_tokens > top - p_input THEN 'input_tokens'
                 WHEN rn.output_tokens > top - p_output THEN 'output_tokens'
                 WHEN rn.total_tokens > top - p_total THEN 'total_tokens'
                 WHEN rn.cached_tokens > top - p_cached THEN 'cached_tokens'
                 WHEN rn.reasoning_tokens > top - p_reasoning THEN 'reasoning_tokens' END;
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

CREATE OR REPLACE FUNCTION agentstate_record_decision(
    p_run_id text, p_tool text, p_call text, p_approve boolean, p_always boolean, p_reason text,
    p_reach bigint, p_user bigint, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    rn agentstate_run := agentstate_locked_run(p_run_id, p_reach);
    changed jsonb := agentstate_write_decision(
        rn, p_tool, p_call, p_approve, p_always, p_reason, p_user, p_actor);
BEGIN
    RETURN agentstate_run_state(rn) || jsonb_build_object('events', jsonb_build_array(changed));
END $$;

CREATE OR REPLACE FUNCTION agentstate_rebuild_approvals(
    p_run_id text, p_records jsonb, p_reach bigint, p_user bigint, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
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

CREATE OR REPLACE FUNCTION agentstate_request_approval(
    p_run_id text, p_tool text, p_call text, p_arguments jsonb, p_decided_reason text,
    p_policy_reason text, p_policy_actor text, p_ttl interval, p_reach bigint, p_user bigint,
    p_actor text, p_digest text
) RETURNS json
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    rn agentstate_run := agentstate_locked_run(p_run_id, p_reach);
    got record;
    req agentstate_approvalrequest;
    rl agentstate_approvalrule;
    due timestamptz;
    pol record;
    pol_id bigint;
    pol_approve boolean;
    pol_reason text;
    decided boolean;
    requested jsonb;
    changed jsonb;
BEGIN
    -- After the run's lock, in a statement of its own (so that its snapshot is taken
    -- once the lock is held: a filing the lock waited for is seen), all that
    -- the filing reads: the call's request if one exists, what the records
    -- decide of it and whether for good, and whether any active policy or any
    -- rule names the tool, whose rows are then read and locked (FOR SHARE) in
    -- statements run only when one does.
    SELECT (SELECT q FROM agentstate_approvalrequest q
            WHERE q.run_id = rn.id AND q.call_id = p_call) AS req,
           agentstate_decision(rn.id, p_tool, p_call) AS decided,
           r.approved_always IS TRUE OR r.rejected_always IS TRUE AS permanent,
           EXISTS (SELECT FROM agentstate_approvalpolicy p
                   WHERE p.tool_name = p_tool AND p.revoked_at IS NULL) AS policed,
           EXISTS (SELECT FROM agentstate_approvalrule u WHERE u.tool_name = p_tool) AS ruled
    INTO got
    FROM (SELECT) AS one
    LEFT JOIN agentstate_approvalrecord r ON r.run_id = rn.id AND r.tool_name = p_tool;
    req := got.req;
    IF req.id IS NOT NULL THEN
        RETURN json_build_object(
            'request', row_to_json(req),
            'current_status',
                agentstate_current_status(req.status, req.created_at, req.deadline, p_ttl),
            'run', row_to_json(rn), 'created', false, 'events', '[]'::json);
    END IF;
    decided := got.decided;
    -- undecided by the records, an active policy's decision (the request's
    -- "always" is the records' only when they decided it)
    IF decided IS NULL AND got.policed THEN
        pol := agentstate_deciding_policy(rn, p_tool, p_arguments);  -- no function scan
        pol_id := pol.policy_id;
        pol_approve := pol.approve;
        pol_reason := pol.reason;
        decided := pol_approve;
    END IF;
    IF got.ruled THEN
        -- The tool's rule as it stands now (shared lock: a change of it waits), copied.
        SELECT * INTO rl FROM agentstate_approvalrule WHERE tool_name = p_tool FOR SHARE;
        IF rl.id IS NOT NULL THEN
            due := statement_timestamp() + coalesce(make_interval(secs => rl.deadline), p_ttl);
        END IF;
    END IF;
    INSERT INTO agentstate_approvalrequest
        (run_id, tool_name, call_id, arguments, status, always, created_by_id, decided_at,
         reason, policy_id, created_at, rule_id, approvals_required, reviewers_id,
         allow_self_approval, deadline, on_deadline, remind_at, escalate_at, escalate_to_id,
         arguments_digest)
    VALUES (rn.id, p_tool, p_call, p_arguments,
            CASE decided WHEN true THEN 'approved' WHEN false THEN 'rejected' ELSE 'pending' END,
            decided IS NOT NULL AND pol_id IS NULL AND coalesce(got.permanent, false), p_user,
            CASE WHEN decided IS NOT NULL THEN statement_timestamp() END,
            CASE WHEN pol_id IS NOT NULL THEN coalesce(nullif(pol_reason, ''),
                                                       format(p_policy_reason, pol_id))
                 WHEN decided IS NOT NULL THEN p_decided_reason ELSE '' END,
            pol_id, statement_timestamp(), rl.id, coalesce(rl.approvals_required, 1),
            rl.reviewers_id, coalesce(rl.allow_self_approval, true), due,
            coalesce(rl.on_deadline, 'expire'), due - make_interval(secs => rl.remind_before),
            statement_timestamp() + make_interval(secs => rl.escalate_after), rl.escalate_to_id,
            p_digest)
    RETURNING * INTO req;
    requested := agentstate_record('approval.requested', 'approvalrequest', req.id::text, p_user,
        p_actor, req.created_by_id, '', jsonb_build_object(
            'run_id', rn.run_id, 'tool_name', p_tool, 'call_id', p_call, 'status', req.status,
            'policy', req.policy_id)
        || CASE WHEN rl.id IS NULL THEN '{}'::jsonb ELSE jsonb_build_object(
            'arguments', p_arguments, 'arguments_digest', p_digest, 'rule', rl.id,
            'approvals_required', req.approvals_required, 'deadline', req.deadline) END);
    IF pol_id IS NOT NULL THEN
        changed := agentstate_write_decision(rn, p_tool, p_call, decided, false, req.reason,
            NULL, format(p_policy_actor, pol_id));
    END IF;
    RETURN json_build_object(
        'request', row_to_json(req),
        'current_status',
            agentstate_current_status(req.status, req.created_at, req.deadline, p_ttl),
        'run', row_to_json(rn), 'created', true,
        'events', CASE WHEN changed IS NULL THEN jsonb_build_array(requested)
                       ELSE jsonb_build_array(requested, changed) END);
END $$;

CREATE OR REPLACE FUNCTION agentstate_decide(
    p_id bigint, p_approve boolean, p_always boolean, p_reason text, p_arguments jsonb,
    p_ttl interval, p_user bigint, p_actor text, p_digest text, p_membership text[]
) RETURNS json
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    rn agentstate_run;
    req agentstate_approvalrequest;
    changed jsonb;
    decided jsonb;
    voted jsonb;
    edited jsonb;
    approvals integer;
    digest text;
BEGIN
    SELECT r.* INTO rn FROM agentstate_run r
    WHERE r.id = (SELECT q.run_id FROM agentstate_approvalrequest q WHERE q.id = p_id) FOR UPDATE;
    SELECT * INTO req FROM agentstate_approvalrequest WHERE id = p_id FOR UPDATE;
    IF rn.id IS NULL OR req.id IS NULL THEN
        RETURN agentstate_refuse('ApprovalRequestNotFound', jsonb_build_object('id', p_id));
    END IF;
    IF NOT req.allow_self_approval AND p_user IS NOT NULL AND rn.created_by_id = p_user THEN
        RETURN agentstate_refuse('SelfApproval', '{}');
    END IF;
    IF (req.reviewers_id IS NOT NULL OR (req.approvals_required > 1 AND p_user IS NULL))
       AND NOT agentstate_in_group(p_user, req.reviewers_id, p_membership)
       AND NOT (coalesce(req.escalate_at <= statement_timestamp(), false)
                AND agentstate_in_group(p_user, req.escalate_to_id, p_membership)) THEN
        RETURN agentstate_refuse('NotAReviewer', jsonb_build_object('tool_name', req.tool_name));
    END IF;
    IF coalesce(req.deadline <= statement_timestamp(), false)
       OR agentstate_current_status(req.status, req.created_at, req.deadline, p_ttl) = 'expired' THEN
        RETURN agentstate_refuse('ApprovalRequestExpired', '{}');
    END IF;
    IF req.status <> 'pending' THEN
        RETURN agentstate_refuse('AlreadyDecided', jsonb_build_object(
            'status', req.status, 'decided_by_id', req.decided_by_id));
    END IF;
    IF p_arguments IS DISTINCT FROM req.arguments THEN
        edited := p_arguments;
    END IF;
    digest := coalesce(p_digest, req.arguments_digest);
    IF req.rule_id IS NOT NULL THEN
        IF EXISTS (SELECT FROM agentstate_vote v WHERE v.request_id = req.id AND v.by_id = p_user)
        THEN
            RETURN agentstate_refuse('AlreadyVoted', jsonb_build_object('id', req.id));
        END IF;
        INSERT INTO agentstate_vote (request_id, by_id, decision, arguments, arguments_digest,
                                     reason, at)
        VALUES (req.id, p_user, CASE WHEN p_approve THEN 'approve' ELSE 'reject' END,
                coalesce(edited, req.arguments), digest, p_reason, statement_timestamp());
        SELECT count(*) INTO approvals FROM agentstate_vote v
        WHERE v.request_id = req.id AND v.decision = 'approve' AND v.arguments_digest = digest;
        voted := agentstate_record('approval.voted', 'approvalrequest', req.id::text, p_user,
            p_actor, req.created_by_id, '', jsonb_build_object(
                'run_id', rn.run_id, 'tool_name', req.tool_name, 'call_id', req.call_id,
                'decision', CASE WHEN p_approve THEN 'approve' ELSE 'reject' END,
                'arguments_digest', digest, 'reason', p_reason,
                'approvals', approvals, 'approvals_required', req.approvals_required));
        IF p_approve AND approvals < req.approvals_required THEN
            RETURN json_build_object(
                'request', row_to_json(req), 'current_status', req.status,
                'run', row_to_json(rn), 'events', jsonb_build_array(voted));
        END IF;
    END IF;
    changed := agentstate_write_decision(
        rn, req.tool_name, req.call_id, p_approve, p_always, p_reason, p_user, p_actor);
    UPDATE agentstate_approvalrequest
    SET status = CASE WHEN p_approve THEN 'approved' ELSE 'rejected' END, always = p_always,
        decided_by_id = p_user, reason = p_reason, decided_at = statement_timestamp(),
        approved_arguments = edited,
        arguments_digest = CASE WHEN p_approve THEN digest ELSE req.arguments_digest END
    WHERE id = req.id
    RETURNING * INTO req;
    decided := agentstate_record('approval.decided', 'approvalrequest', req.id::text, p_user,
        p_actor, req.created_by_id, '', jsonb_build_object(
            'run_id', rn.run_id, 'tool_name', req.tool_name, 'call_id', req.call_id,
            'decision', CASE WHEN p_approve THEN 'approve' ELSE 'reject' END,
            'always', p_always, 'reason', p_reason)
        || CASE WHEN edited IS NULL THEN '{}'::jsonb ELSE jsonb_build_object(
            'arguments', req.arguments, 'approved_arguments', edited) END
        || CASE WHEN req.rule_id IS NULL THEN '{}'::jsonb ELSE jsonb_build_object(
            'arguments_digest', req.arguments_digest) END);
    RETURN json_build_object(
        'request', row_to_json(req), 'current_status', req.status,
        'run', row_to_json(rn), 'events', CASE WHEN voted IS NULL
            THEN jsonb_build_array(changed, decided)
            ELSE jsonb_build_array(voted, changed, decided) END);
END $$;

CREATE OR REPLACE FUNCTION agentstate_consume(
    p_run_id text, p_tool text, p_call text, p_digest text, p_reach bigint, p_user bigint,
    p_actor text
) RETURNS json
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    rn agentstate_run := agentstate_locked_run(p_run_id, p_reach);
    req agentstate_approvalrequest;
    facts jsonb := jsonb_build_object('tool_name', p_tool, 'call_id', p_call);
BEGIN
    SELECT * INTO req FROM agentstate_approvalrequest
    WHERE run_id = rn.id AND call_id = p_call AND tool_name = p_tool
    ORDER BY id LIMIT 1 FOR UPDATE;
    IF req.id IS NULL OR req.status <> 'approved' THEN
        RETURN agentstate_refuse('NotApproved', facts);
    END IF;
    IF req.arguments_digest <> '' AND req.arguments_digest <> p_digest THEN
        RETURN agentstate_refuse('ArgumentsChanged', facts);
    END IF;
    IF req.consumed_at IS NOT NULL THEN
        RETURN agentstate_refuse('AlreadyConsumed', facts);
    END IF;
    UPDATE agentstate_approvalrequest SET consumed_at = now() WHERE id = req.id
    RETURNING * INTO req;
    RETURN json_build_object(
        'request', row_to_json(req), 'run', row_to_json(rn),
        'events', jsonb_build_array(agentstate_record('approval.consumed', 'approvalrequest',
            req.id::text, p_user, p_actor, req.created_by_id, '', jsonb_build_object(
                'run_id', rn.run_id, 'tool_name', req.tool_name, 'call_id', req.call_id,
                'arguments_digest', p_digest, 'consumed_at', req.consumed_at))));
END $$;

CREATE OR REPLACE FUNCTION agentstate_create_policy(
    p_tool text, p_approve boolean, p_user_id bigint, p_username text, p_arguments jsonb,
    p_expires_at timestamptz, p_reason text, p_by bigint, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
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

CREATE OR REPLACE FUNCTION agentstate_revoke_policy(p_id bigint, p_by bigint, p_actor text) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
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

CREATE OR REPLACE FUNCTION agentstate_run_budget(p_run_id text, p_reach bigint) RETURNS jsonb
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
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

CREATE OR REPLACE FUNCTION agentstate_set_run_budget(
    p_run_id text, p_caps jsonb, p_reach bigint, p_user bigint, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
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

CREATE OR REPLACE FUNCTION agentstate_user_budget(p_username text) RETURNS jsonb
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
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

CREATE OR REPLACE FUNCTION agentstate_set_user_budget(
    p_username text, p_caps jsonb, p_period text, p_user bigint, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
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

CREATE OR REPLACE FUNCTION agentstate_apply_deadlines(
    p_size integer, p_sweeper text, p_rule_actor text, p_reason text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    due bigint;
    rn agentstate_run;
    req agentstate_approvalrequest;
    ts timestamptz := statement_timestamp();
    actor text;
    approve boolean;
    facts jsonb;
    written jsonb := '[]';
    changed integer := 0;
BEGIN
    FOR due IN
        SELECT q.id FROM agentstate_approvalrequest q
        WHERE q.status = 'pending' AND q.deadline IS NOT NULL
          AND (q.deadline <= ts OR (q.remind_at <= ts AND q.reminded_at IS NULL)
               OR (q.escalate_at <= ts AND q.escalated_at IS NULL))
        ORDER BY q.deadline, q.id LIMIT p_size
    LOOP
        SELECT r.* INTO rn FROM agentstate_run r
        WHERE r.id = (SELECT q.run_id FROM agentstate_approvalrequest q WHERE q.id = due)
        FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN rn.id IS NULL;
        SELECT * INTO req FROM agentstate_approvalrequest WHERE id = due AND status = 'pending'
        FOR UPDATE;
        CONTINUE WHEN req.id IS NULL;
        changed := changed + 1;
        facts := jsonb_build_object(
            'run_id', rn.run_id, 'tool_name', req.tool_name, 'call_id', req.call_id);
        actor := CASE WHEN req.rule_id IS NULL THEN p_sweeper
                      ELSE format(p_rule_actor, req.rule_id) END;
        IF req.deadline <= ts THEN
            IF req.on_deadline = 'expire' THEN
                UPDATE agentstate_approvalrequest SET status = 'expired' WHERE id = req.id;
                written := written || agentstate_record('approval.expired', 'approvalrequest',
                    req.id::text, NULL, actor, req.created_by_id, '', facts);
                CONTINUE;
            END IF;
            approve := req.on_deadline = 'approve';
            written := written || agentstate_write_decision(
                rn, req.tool_name, req.call_id, approve, false, p_reason, NULL, actor);
            UPDATE agentstate_approvalrequest
            SET status = CASE WHEN approve THEN 'approved' ELSE 'rejected' END,
                decided_at = ts, reason = p_reason
            WHERE id = req.id;
            written := written || agentstate_record('approval.decided', 'approvalrequest',
                req.id::text, NULL, actor, req.created_by_id, '', facts || jsonb_build_object(
                    'decision', CASE WHEN approve THEN 'approve' ELSE 'reject' END,
                    'always', false, 'reason', p_reason, 'rule', req.rule_id,
                    'arguments_digest', req.arguments_digest));
            CONTINUE;
        END IF;
        IF req.remind_at <= ts AND req.reminded_at IS NULL THEN
            UPDATE agentstate_approvalrequest SET reminded_at = ts WHERE id = req.id;
            written := written || agentstate_record('approval.expiring', 'approvalrequest',
                req.id::text, NULL, p_sweeper, req.created_by_id, '',
                facts || jsonb_build_object('deadline', req.deadline));
        END IF;
        IF req.escalate_at <= ts AND req.escalated_at IS NULL THEN
            UPDATE agentstate_approvalrequest SET escalated_at = ts WHERE id = req.id;
            written := written || agentstate_record('approval.escalated', 'approvalrequest',
                req.id::text, NULL, p_sweeper, req.created_by_id, '',
                facts || jsonb_build_object('escalate_to', req.escalate_to_id));
        END IF;
    END LOOP;
    RETURN jsonb_build_object('count', changed, 'events', written);
END $$;

CREATE OR REPLACE FUNCTION agentstate_put_checkpoint(
    p_thread text, p_ns text, p_id text, p_parent text, p_checkpoint jsonb, p_metadata jsonb,
    p_values bytea, p_base text, p_refuse boolean, p_writes bytea
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    v_locked boolean;
    v_thread bigint;
    v_touched timestamptz;
    v_sibling text;
    v_based boolean;
    v_early boolean;
    v_step integer := CASE WHEN jsonb_typeof(p_metadata -> 'step') = 'number'
                                AND (p_metadata ->> 'step') ~ '^-?[0-9]{1,9}$'
                           THEN (p_metadata ->> 'step')::integer END;
    v_writes bytea;
BEGIN
    v_locked := pg_advisory_xact_lock(agentstate_put_lock(), hashtext(p_thread)) IS NULL;
    SELECT id, updated_at INTO v_thread, v_touched FROM agentstate_thread
    WHERE thread_id = p_thread FOR NO KEY UPDATE;
    IF v_thread IS NULL THEN
        INSERT INTO agentstate_thread AS t (thread_id, created_at, updated_at)
        VALUES (p_thread, now(), now())
        ON CONFLICT (thread_id) DO UPDATE SET updated_at = now()
        RETURNING t.id INTO v_thread;
    ELSIF v_touched < now() - interval '1 minute' THEN
        UPDATE agentstate_thread SET updated_at = now() WHERE id = v_thread;
    END IF;
    -- a statement of its own, after the row's lock: it sees what the lock waited for
    SELECT (SELECT s.checkpoint_id FROM agentstate_checkpoint s
            WHERE s.thread_id = v_thread AND s.checkpoint_ns = p_ns
              AND s.parent_checkpoint_id = p_parent AND s.checkpoint_id <> p_id
            LIMIT 1),
           p_base IS NULL OR EXISTS (
               SELECT FROM agentstate_checkpoint b
               WHERE b.thread_id = v_thread AND b.checkpoint_ns = p_ns
                 AND b.checkpoint_id = p_base),
           EXISTS (
               SELECT FROM agentstate_checkpointwrite w
               WHERE w.thread_id = v_thread AND w.checkpoint_ns = p_ns
                 AND w.checkpoint_id = p_id)
    INTO v_sibling, v_based, v_early;
    IF p_parent IS NULL THEN
        -- a second root (the parent index holds the checkpoints with a parent only)
        SELECT s.checkpoint_id INTO v_sibling FROM agentstate_checkpoint s
        WHERE s.thread_id = v_thread AND s.checkpoint_ns = p_ns
          AND s.parent_checkpoint_id IS NULL AND s.checkpoint_id <> p_id
        LIMIT 1;
    END IF;
    IF v_sibling IS NOT NULL AND p_refuse THEN
        RETURN agentstate_refuse('HistoryForked', jsonb_build_object(
            'thread_id', p_thread, 'checkpoint_ns', p_ns, 'parent', p_parent,
            'head', v_sibling));
    END IF;
    IF NOT v_based THEN
        RETURN CASE WHEN v_sibling IS NULL THEN '{"forked": false, "rebase": true}'::jsonb
                    ELSE '{"forked": true, "rebase": true}'::jsonb END;
    END IF;
    IF v_early THEN
        -- the writes of its tasks stored before it (LangGraph may put them first) join it
        WITH moved AS (
            DELETE FROM agentstate_checkpointwrite w
            WHERE w.thread_id = v_thread AND w.checkpoint_ns = p_ns AND w.checkpoint_id = p_id
            RETURNING w.id, w.task_id, w.task_path, w.idx, w.channel, w.type, w.blob
        )
        SELECT string_agg(
            agentstate_chain_field(m.task_id) || agentstate_chain_field(m.task_path)
            || int4send(m.idx) || agentstate_chain_field(m.channel)
            || agentstate_chain_field(m.type)
            || int4send(length(coalesce(m.blob, ''::bytea))) || coalesce(m.blob, ''::bytea),
            ''::bytea ORDER BY m.id)
        INTO v_writes FROM moved m;
    END IF;
    IF p_writes IS NOT NULL THEN
        v_writes := coalesce(v_writes, ''::bytea) || p_writes;
    END IF;
    -- DO NOTHING, then an update when stored already: an insert that may update
    -- builds its update at every call
    INSERT INTO agentstate_checkpoint
        (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata,
         run_id, step, forked, created_at, values, base_checkpoint_id, writes)
    VALUES (v_thread, p_ns, p_id, p_parent, p_checkpoint, p_metadata, p_metadata ->> 'run_id',
            v_step, v_sibling IS NOT NULL, now(), p_values, p_base, v_writes)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO NOTHING;
    IF NOT FOUND THEN
        UPDATE agentstate_checkpoint c SET
            parent_checkpoint_id = p_parent, checkpoint = p_checkpoint, metadata = p_metadata,
            run_id = p_metadata ->> 'run_id', step = v_step, values = p_values,
            base_checkpoint_id = p_base,
            writes = CASE WHEN v_writes IS NULL THEN c.writes
                          ELSE coalesce(c.writes, ''::bytea) || v_writes END
        WHERE c.thread_id = v_thread AND c.checkpoint_ns = p_ns AND c.checkpoint_id = p_id;
    END IF;
    RETURN CASE WHEN v_sibling IS NULL THEN '{"forked": false}'::jsonb
                ELSE '{"forked": true}'::jsonb END;
END $$;

CREATE OR REPLACE FUNCTION agentstate_put_checkpoint_writes(
    p_thread text, p_ns text, p_id text, p_writes bytea, p_special boolean
) RETURNS jsonb
LANGUAGE plpgsql SET enable_seqscan = off SET jit = off AS $$
DECLARE
    v_thread bigint;
    v_row bigint;
    v_writes bytea;
BEGIN
    SELECT id INTO v_thread FROM agentstate_thread WHERE thread_id = p_thread;
    IF v_thread IS NOT NULL THEN
        SELECT c.id, c.writes INTO v_row, v_writes FROM agentstate_checkpoint c
        WHERE c.thread_id = v_thread AND c.checkpoint_ns = p_ns AND c.checkpoint_id = p_id
        FOR NO KEY UPDATE;
    END IF;
    IF v_row IS NULL THEN
        -- the wait comes before anything is written or locked here, so that the put
        -- waited for never waits for this call in turn
        PERFORM pg_advisory_lock_shared(agentstate_put_lock(), hashtext(p_thread));
        PERFORM pg_advisory_unlock_shared(agentstate_put_lock(), hashtext(p_thread));
        IF v_thread IS NULL THEN
            INSERT INTO agentstate_thread AS t (thread_id, created_at, updated_at)
            VALUES (p_thread, now(), now())
            ON CONFLICT (thread_id) DO NOTHING
            RETURNING t.id INTO v_thread;
            IF v_thread IS NULL THEN
                SELECT id INTO v_thread FROM agentstate_thread WHERE thread_id = p_thread;
            END IF;
        END IF;
        SELECT c.id, c.writes INTO v_row, v_writes FROM agentstate_checkpoint c
        WHERE c.thread_id = v_thread AND c.checkpoint_ns = p_ns AND c.checkpoint_id = p_id
        FOR NO KEY UPDATE;
    END IF;
    IF v_row IS NOT NULL THEN
        IF v_writes IS NULL OR position(p_writes IN v_writes) = 0 OR p_special THEN
            UPDATE agentstate_checkpoint SET writes = coalesce(writes, ''::bytea) || p_writes
            WHERE id = v_row;
        END IF;
        RETURN '{}'::jsonb;
    END IF;
    INSERT INTO agentstate_checkpointwrite
        (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob)
    SELECT v_thread, p_ns, p_id, x.task_id, x.task_path, x.idx, x.channel, x.type, x.blob
    FROM agentstate_chain_writes(p_writes) AS x
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET
        channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob,
        task_path = EXCLUDED.task_path
    WHERE EXCLUDED.idx < 0;
    RETURN '{}'::jsonb;
END $$;

CREATE OR REPLACE FUNCTION agentstate_checkpoint_chain(p_thread bigint, p_ns text, p_base text)
RETURNS bytea[]
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    v_chain bytea[];
BEGIN
    WITH RECURSIVE chain AS (
        SELECT x.base_checkpoint_id, x.values, 1 AS depth FROM agentstate_checkpoint x
        WHERE x.thread_id = p_thread AND x.checkpoint_ns = p_ns AND x.checkpoint_id = p_base
        UNION ALL
        -- each base by its key (LIMIT 1 keeps the lookup from becoming a join that
        -- scans the thread's checkpoints once per base)
        SELECT x.base_checkpoint_id, x.values, chain.depth + 1
        FROM chain CROSS JOIN LATERAL (
            SELECT b.base_checkpoint_id, b.values FROM agentstate_checkpoint b
            WHERE b.thread_id = p_thread AND b.checkpoint_ns = p_ns
              AND b.checkpoint_id = chain.base_checkpoint_id
            LIMIT 1
        ) x
        WHERE chain.depth < 64
    )
    SELECT array_agg(chain.values ORDER BY chain.depth) INTO v_chain FROM chain;
    RETURN v_chain;
END $$;

CREATE OR REPLACE FUNCTION agentstate_checkpoint(p_thread text, p_ns text, p_id text)
RETURNS TABLE (
    checkpoint_id text, parent_checkpoint_id text, checkpoint jsonb, metadata jsonb,
    "values" bytea, chain bytea[], writes bytea,
    blob_channels text[], blob_types text[], blobs bytea[],
    write_tasks text[], write_channels text[], write_types text[], write_blobs bytea[],
    write_paths text[], write_idx integer[]
)
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    c agentstate_checkpoint%ROWTYPE;
    v_chain bytea[];
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
    IF c.values IS NOT NULL THEN
        -- the bases' values read here, not by a call of agentstate_checkpoint_chain
        IF c.base_checkpoint_id IS NOT NULL THEN
            WITH RECURSIVE bases AS (
                SELECT x.base_checkpoint_id, x.values, 1 AS depth FROM agentstate_checkpoint x
                WHERE x.thread_id = c.thread_id AND x.checkpoint_ns = c.checkpoint_ns
                  AND x.checkpoint_id = c.base_checkpoint_id
                UNION ALL
                -- each base by its key (as agentstate_checkpoint_chain)
                SELECT x.base_checkpoint_id, x.values, bases.depth + 1
                FROM bases CROSS JOIN LATERAL (
                    SELECT b.base_checkpoint_id, b.values FROM agentstate_checkpoint b
                    WHERE b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns
                      AND b.checkpoint_id = bases.base_checkpoint_id
                    LIMIT 1
                ) x
                WHERE bases.depth < 64
            )
            SELECT array_agg(bases.values ORDER BY bases.depth) INTO v_chain FROM bases;
        END IF;
        RETURN QUERY
        SELECT c.checkpoint_id::text, c.parent_checkpoint_id::text, c.checkpoint, c.metadata,
               c.values, v_chain, c.writes, NULL::text[], NULL::text[], NULL::bytea[],
               w.tasks, w.channels, w.types, w.blobs, w.paths, w.idx
        FROM (
            SELECT array_agg(wr.task_id::text) AS tasks,
                   array_agg(wr.channel::text) AS channels, array_agg(wr.type::text) AS types,
                   array_agg(wr.blob) AS blobs, array_agg(wr.task_path) AS paths,
                   array_agg(wr.idx) AS idx
            FROM agentstate_checkpointwrite wr
            WHERE wr.thread_id = c.thread_id AND wr.checkpoint_ns = c.checkpoint_ns
              AND wr.checkpoint_id = c.checkpoint_id
        ) w;
        RETURN;
    END IF;
    RETURN QUERY
    SELECT c.checkpoint_id::text, c.parent_checkpoint_id::text, c.checkpoint, c.metadata,
           c.values, NULL::bytea[], c.writes,
           b.channels, b.types, b.blobs,
           w.tasks, w.channels, w.types, w.blobs, w.paths, w.idx
    FROM (
        SELECT array_agg(bl.channel) AS channels, array_agg(bl.type) AS types,
               array_agg(bl.blob) AS blobs
        FROM jsonb_each_text(c.checkpoint -> 'channel_versions') AS v(channel, version)
        CROSS JOIN LATERAL (
            SELECT x.channel::text, x.type::text, x.blob FROM agentstate_checkpointblob x
            WHERE x.thread_id = c.thread_id AND x.checkpoint_ns = c.checkpoint_ns
              AND x.channel = v.channel AND x.version = v.version AND x.type <> 'empty'
            LIMIT 1
        ) bl
        WHERE NOT coalesce(c.checkpoint -> 'channel_values' ? v.channel, false)
    ) b, (
        SELECT array_agg(wr.task_id::text) AS tasks, array_agg(wr.channel::text) AS channels,
               array_agg(wr.type::text) AS types, array_agg(wr.blob) AS blobs,
               array_agg(wr.task_path) AS paths, array_agg(wr.idx) AS idx
        FROM agentstate_checkpointwrite wr
        WHERE wr.thread_id = c.thread_id AND wr.checkpoint_ns = c.checkpoint_ns
          AND wr.checkpoint_id = c.checkpoint_id
    ) w;
END $$;

CREATE OR REPLACE FUNCTION agentstate_store_get(p_items jsonb, p_now double precision, p_actor text)
RETURNS jsonb
LANGUAGE plpgsql SET enable_seqscan = off SET jit = off AS $$
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

CREATE OR REPLACE FUNCTION agentstate_store_put(
    p_scope text, p_name text, p_value jsonb, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql SET enable_seqscan = off SET jit = off AS $$
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

CREATE OR REPLACE FUNCTION agentstate_token(p_key text)
RETURNS TABLE (o_user jsonb, o_created timestamptz, o_own text[], o_grouped text[])
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
BEGIN
    RETURN QUERY
    SELECT to_jsonb(u), t.created,
        ARRAY(SELECT ct.app_label || '.' || p.codename FROM auth_permission p
              JOIN django_content_type ct ON ct.id = p.content_type_id
              WHERE p.id IN (SELECT permission_id FROM auth_user_user_permissions
                             WHERE user_id = u.id)),
        ARRAY(SELECT ct.app_label || '.' || p.codename FROM auth_permission p
              JOIN django_content_type ct ON ct.id = p.content_type_id
              WHERE p.id IN (SELECT g.permission_id FROM auth_group_permissions g
                             JOIN auth_user_groups m ON m.group_id = g.group_id
                             WHERE m.user_id = u.id))
    FROM authtoken_token t JOIN auth_user u ON u.id = t.user_id WHERE t.key = p_key;
END $$;
