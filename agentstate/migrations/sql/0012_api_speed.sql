-- 0012: the Python API's calls, cheaper on the server (docs/performance.md,
-- "Python API: where a call's time goes"). The reads of runs and policies that
-- query tables become PL/pgSQL, which keeps their plans for the session (an SQL
-- function the planner cannot inline is planned again on every call);
-- agentstate_json_time is STABLE, so that it is inlined.

-- The scope's id, created if needed, its row locked FOR KEY SHARE so that it
-- cannot be deleted before this transaction adds a variable to it. The id is
-- looked up first, then its row locked: a function in the locking statement's
-- WHERE would be called for every row a sequential scan reads (the plan the
-- planner picks while the table is small).
CREATE OR REPLACE FUNCTION agentstate_ensure_scope(p_key text, p_owner bigint) RETURNS bigint
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

-- The scope's row lo (writers adding a variable hold it FOR KEY SHARE),
-- then its variables (writers of each hold it FOR UPDATE): what they wrote
-- before is deleted with it, what they write after finds no scope.
CREATE OR REPLACE FUNCTION agentstate_delete_scope(p_scope text, p_owner_id bigint, p_owner_name text) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan AS $$
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

-- A time as event details hold it: PostgreSQL's JSON form of the time in UTC
-- (microseconds without trailing zeros), whatever the session's time zone;
-- agentstate.events.json_time writes the same. STABLE, as to_jsonb is, so that
-- the planner inlines it (an IMMUTABLE function calling a STABLE one is called).
CREATE OR REPLACE FUNCTION agentstate_json_time(p_time timestamptz) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT (to_jsonb(p_time AT TIME ZONE 'UTC') #>> '{}') || '+00:00'
$$;

-- The run's records, [[tool_name, record], ...] by tool name; a record's side
-- is its flag, or the call ids decided so, in order.
--
-- This function and the other reads of 30_runs.sql and 35_policies.sql that
-- query tables are PL/pgSQL, which keeps each statement's plan for the session:
-- an SQL function is planned again on every call unless the planner inlines
-- it, and it inlines no scalar function whose body has a FROM or a subquery.
CREATE OR REPLACE FUNCTION agentstate_records_of(p_run bigint) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
        SELECT coalesce(jsonb_agg(jsonb_build_array(r.tool_name, jsonb_build_object(
                   'approved', coalesce(to_jsonb(r.approved_always), (
                       SELECT coalesce(jsonb_agg(c.call_id ORDER BY c.id), '[]')
                       FROM agentstate_approvalcall c
                       WHERE c.record_id = r.id AND c.decision = 'approve')),
                   'rejected', coalesce(to_jsonb(r.rejected_always), (
                       SELECT coalesce(jsonb_agg(c.call_id ORDER BY c.id), '[]')
                       FROM agentstate_approvalcall c
                       WHERE c.record_id = r.id AND c.decision = 'reject'))))
               ORDER BY r.tool_name), '[]')
        FROM agentstate_approvalrecord r WHERE r.run_id = p_run);
END $$;

-- The SDK's precedence over the tool's record: permanent approval, then
-- permanent rejection, then the call approved, then rejected; else NULL.
CREATE OR REPLACE FUNCTION agentstate_decision(p_run bigint, p_tool text, p_call text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
        SELECT CASE
            WHEN r.approved_always THEN true
            WHEN r.rejected_always THEN false
            WHEN r.approved_always IS NULL AND EXISTS (
                SELECT FROM agentstate_approvalcall c
                WHERE c.record_id = r.id AND c.decision = 'approve' AND c.call_id = p_call)
                THEN true
            WHEN r.rejected_always IS NULL AND EXISTS (
                SELECT FROM agentstate_approvalcall c
                WHERE c.record_id = r.id AND c.decision = 'reject' AND c.call_id = p_call)
                THEN false
        END
        FROM agentstate_approvalrecord r WHERE r.run_id = p_run AND r.tool_name = p_tool);
END $$;

-- What an active policy decides of a call in p_run the records leave undecided:
-- true, false (a matching reject policy wins), or NULL. Not locked: an answer.
CREATE OR REPLACE FUNCTION agentstate_policy_decision(p_run agentstate_run, p_tool text, p_arguments jsonb)
RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
        SELECT p.decision = 'approve' FROM agentstate_approvalpolicy p
        WHERE p.tool_name = p_tool AND p.revoked_at IS NULL
          AND (p.expires_at IS NULL OR p.expires_at > statement_timestamp())
          AND (p.user_id IS NULL OR p.user_id = p_run.created_by_id)
          AND (p.arguments IS NULL OR agentstate_json_contains(p_arguments, p.arguments))
        ORDER BY p.decision = 'reject' DESC, p.id LIMIT 1);
END $$;

-- The records first; left undecided, the active policies (35_policies.sql).
CREATE OR REPLACE FUNCTION agentstate_is_tool_approved(
    p_run_id text, p_tool text, p_call text, p_arguments jsonb, p_digest text, p_reach bigint
) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    rn agentstate_run := agentstate_reached_run(p_run_id, p_reach);
    approved boolean := coalesce(agentstate_decision(rn.id, p_tool, p_call),
                                 agentstate_policy_decision(rn, p_tool, p_arguments));
BEGIN
    -- Approved, and p_digest given: approved only for the arguments the call's
    -- request was approved with (its arguments_digest); other ones answer false,
    -- arguments_changed.
    IF approved AND p_digest IS NOT NULL AND EXISTS (
        SELECT FROM agentstate_approvalrequest q
        WHERE q.run_id = rn.id AND q.call_id = p_call AND q.status = 'approved'
          AND q.arguments_digest <> '' AND q.arguments_digest <> p_digest)
    THEN
        RETURN jsonb_build_object('approved', false, 'reason', 'arguments_changed');
    END IF;
    RETURN jsonb_build_object('approved', approved);
END $$;

-- Adds under the run's row lock, so no concurrent addition is lost; a total
-- past the column (a bigint) refuses naming the first such counter, before
-- anything is added. Every budget covering the run moves with it, or the add
-- is refused (BudgetExceeded, nothing added): the run's own budget (36_budgets
-- .sql) caps the run's totals, read under the run's lock that its setters
-- take too; the creator's budget row is locked next, rolled over when its
-- period is over, and caps what the creator's runs added in the period. A
-- capped counter is refused when used plus the increment passes the cap.
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

-- The run's request for p_call, filed now unless one exists (answered as it
-- is, no event); filed already decided when the run's records decide the
-- call (p_decided_reason, no decider) or, left undecided by them, when an
-- active policy does (its row locked FOR SHARE by agentstate_deciding_policy;
-- its reason or p_policy_reason naming it; the run's record of the call
-- written as a decision would, by p_policy_actor naming it).
CREATE OR REPLACE FUNCTION agentstate_request_approval(
    p_run_id text, p_tool text, p_call text, p_arguments jsonb, p_decided_reason text,
    p_policy_reason text, p_policy_actor text, p_ttl interval, p_reach bigint, p_user bigint,
    p_actor text, p_digest text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    rn agentstate_run := agentstate_locked_run(p_run_id, p_reach);
    req agentstate_approvalrequest;
    rl agentstate_approvalrule;
    due timestamptz;
    pol record;
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
                agentstate_current_status(req.status, req.created_at, req.deadline, p_ttl)),
            'run', to_jsonb(rn), 'created', false, 'events', '[]'::jsonb);
    END IF;
    decided := agentstate_decision(rn.id, p_tool, p_call);
    SELECT r.approved_always IS TRUE OR r.rejected_always IS TRUE INTO permanent
    FROM agentstate_approvalrecord r WHERE r.run_id = rn.id AND r.tool_name = p_tool;
    IF decided IS NULL THEN
        pol := agentstate_deciding_policy(rn, p_tool, p_arguments);  -- no function scan
        pol_id := pol.policy_id;
        pol_approve := pol.approve;
        pol_reason := pol.reason;
        decided := pol_approve;
    END IF;
    -- The tool's rule as it stands now (shared lock: a change of it waits), copied.
    SELECT * INTO rl FROM agentstate_approvalrule WHERE tool_name = p_tool FOR SHARE;
    IF rl.id IS NOT NULL THEN
        due := statement_timestamp() + coalesce(make_interval(secs => rl.deadline), p_ttl);
    END IF;
    INSERT INTO agentstate_approvalrequest
        (run_id, tool_name, call_id, arguments, status, always, created_by_id, decided_at,
         reason, policy_id, created_at, rule_id, approvals_required, reviewers_id,
         allow_self_approval, deadline, on_deadline, remind_at, escalate_at, escalate_to_id,
         arguments_digest)
    VALUES (rn.id, p_tool, p_call, p_arguments,
            CASE decided WHEN true THEN 'approved' WHEN false THEN 'rejected' ELSE 'pending' END,
            decided IS NOT NULL AND pol_id IS NULL AND coalesce(permanent, false), p_user,
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
    RETURN jsonb_build_object(
        'request', to_jsonb(req) || jsonb_build_object('current_status',
            agentstate_current_status(req.status, req.created_at, req.deadline, p_ttl)),
        'run', to_jsonb(rn), 'created', true,
        'events', CASE WHEN changed IS NULL THEN jsonb_build_array(requested)
                       ELSE jsonb_build_array(requested, changed) END);
END $$;

DROP FUNCTION agentstate_side(bigint, boolean, text);
