-- Undoes 0025: the functions as 0021 left them.

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
