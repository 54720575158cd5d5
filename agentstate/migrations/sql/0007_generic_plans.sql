-- Operations planned once per connection: their statements' generic plans
-- (plan_cache_mode = force_generic_plan) instead of a custom plan per call.

CREATE OR REPLACE FUNCTION agentstate_put(
    p_scope text, p_name text, p_value jsonb, p_if_version bigint, p_owner_id bigint, p_owner_name text, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan AS $$
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
SET plan_cache_mode = force_generic_plan AS $$
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

CREATE OR REPLACE FUNCTION agentstate_get_list(
    p_scope text, p_name text, p_last bigint, p_owner_id bigint, p_owner_name text
) RETURNS jsonb
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan AS $$
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
SET plan_cache_mode = force_generic_plan AS $$
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
SET plan_cache_mode = force_generic_plan AS $$
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
SET plan_cache_mode = force_generic_plan AS $$
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

CREATE OR REPLACE FUNCTION agentstate_append(
    p_scope text, p_name text, p_values jsonb, p_owner_id bigint, p_owner_name text, p_actor text,
    p_operation text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan AS $$
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

CREATE OR REPLACE FUNCTION agentstate_put_pause(
    p_chat text, p_call text, p_owner text, p_payload jsonb, p_ttl interval,
    p_question uuid, p_reach_user bigint, p_reach_name text, p_user_id bigint, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan AS $$
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
SET plan_cache_mode = force_generic_plan AS $$
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
SET plan_cache_mode = force_generic_plan AS $$
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
SET plan_cache_mode = force_generic_plan AS $$
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
SET plan_cache_mode = force_generic_plan AS $$
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
SET plan_cache_mode = force_generic_plan AS $$
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
SET plan_cache_mode = force_generic_plan AS $$
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

CREATE OR REPLACE FUNCTION agentstate_record_decision(
    p_run_id text, p_tool text, p_call text, p_approve boolean, p_always boolean, p_reason text,
    p_reach bigint, p_user bigint, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan AS $$
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
SET plan_cache_mode = force_generic_plan AS $$
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
    p_actor text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan AS $$
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

CREATE OR REPLACE FUNCTION agentstate_decide(
    p_id bigint, p_approve boolean, p_always boolean, p_reason text, p_arguments jsonb,
    p_ttl interval, p_user bigint, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan AS $$
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

CREATE OR REPLACE FUNCTION agentstate_create_policy(
    p_tool text, p_approve boolean, p_user_id bigint, p_username text, p_arguments jsonb,
    p_expires_at timestamptz, p_reason text, p_by bigint, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan AS $$
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
SET plan_cache_mode = force_generic_plan AS $$
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
SET plan_cache_mode = force_generic_plan AS $$
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
SET plan_cache_mode = force_generic_plan AS $$
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
SET plan_cache_mode = force_generic_plan AS $$
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
SET plan_cache_mode = force_generic_plan AS $$
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
