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

-- Create or change the run's budget under the run's row lock (which every
-- writer of a run's budget holds); an event unless the caps are as they were.
CREATE FUNCTION agentstate_set_run_budget(
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
        changed := jsonb_build_array(agentstate_record('budget.set', 'budget',
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

-- Create or change the user's budget under its row lock. p_period: '', 'day'
-- or 'month', NULL to keep it; a new budget or a new period counts from 0 now.
-- A period that is over is rolled over as it is written. An event unless the
-- caps and the period are as they were.
CREATE FUNCTION agentstate_set_user_budget(
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
        changed := jsonb_build_array(agentstate_record('budget.set', 'budget',
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
