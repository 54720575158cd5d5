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

-- The run's records, [[tool_name, record], ...] by tool name; a record's side
-- is its flag, or the call ids decided so, in order.
--
-- This function and the other reads of 30_runs.sql and 35_policies.sql that
-- query tables are PL/pgSQL, which keeps each statement's plan for the session:
-- an SQL function is planned again on every call unless the planner inlines
-- it, and it inlines no scalar function whose body has a FROM or a subquery.
CREATE FUNCTION agentstate_records_of(p_run bigint) RETURNS jsonb
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

CREATE FUNCTION agentstate_run_state(p_run agentstate_run) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN jsonb_build_object('run', to_jsonb(p_run), 'records', agentstate_records_of(p_run.id));
END $$;

-- The SDK's precedence over the tool's record: permanent approval, then
-- permanent rejection, then the call approved, then rejected; else NULL.
CREATE FUNCTION agentstate_decision(p_run bigint, p_tool text, p_call text) RETURNS boolean
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

-- The id is taken (also by a concurrent creator, whose commit the insert
-- waits for): RunExists.
CREATE FUNCTION agentstate_create_run(p_run_id text, p_context jsonb, p_created_by bigint)
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

CREATE FUNCTION agentstate_get_run(p_run_id text, p_reach bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT agentstate_run_state(agentstate_reached_run(p_run_id, p_reach))
$$;

CREATE FUNCTION agentstate_update_run(p_run_id text, p_context jsonb, p_reach bigint)
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

CREATE FUNCTION agentstate_records(p_run_id text, p_reach bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT agentstate_records_of((agentstate_reached_run(p_run_id, p_reach)).id)
$$;

-- The records first; left undecided, the active policies (35_policies.sql).
CREATE FUNCTION agentstate_is_tool_approved(
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

-- An approval of a tool under a rule is written only by whom the rule lets
-- decide alone (agentstate_check_standing); a rejection by anyone who may
-- change the run.
CREATE FUNCTION agentstate_record_decision(
    p_run_id text, p_tool text, p_call text, p_approve boolean, p_always boolean, p_reason text,
    p_reach bigint, p_user bigint, p_actor text, p_membership text[]
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    rn agentstate_run := agentstate_locked_run(p_run_id, p_reach);
    changed jsonb;
BEGIN
    IF p_approve THEN
        PERFORM agentstate_check_standing(p_tool, true, p_user, rn.created_by_id, p_membership);
    END IF;
    changed := agentstate_write_decision(
        rn, p_tool, p_call, p_approve, p_always, p_reason, p_user, p_actor);
    RETURN agentstate_run_state(rn) || jsonb_build_object('events', jsonb_build_array(changed));
END $$;

-- p_records: a checked map in the SDK's form, every side given. An approval the
-- run's records do not hold yet, of a tool under a rule, is written as
-- agentstate_record_decision writes one; those they hold are kept by anyone.
CREATE FUNCTION agentstate_rebuild_approvals(
    p_run_id text, p_records jsonb, p_reach bigint, p_user bigint, p_actor text,
    p_membership text[]
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    rn agentstate_run := agentstate_locked_run(p_run_id, p_reach);
    added text;
    rebuilt jsonb;
BEGIN
    FOR added IN
        SELECT tool.key FROM jsonb_each(p_records) AS tool
        WHERE EXISTS (SELECT FROM agentstate_approvalrule r WHERE r.tool_name = tool.key)
          AND CASE WHEN tool.value -> 'approved' = 'true' THEN NOT EXISTS (
                       SELECT FROM agentstate_approvalrecord r
                       WHERE r.run_id = rn.id AND r.tool_name = tool.key AND r.approved_always)
                   WHEN jsonb_typeof(tool.value -> 'approved') = 'array' THEN EXISTS (
                       SELECT FROM jsonb_array_elements_text(tool.value -> 'approved') AS c (id)
                       WHERE agentstate_decision(rn.id, tool.key, c.id) IS NOT TRUE)
                   ELSE false END
        ORDER BY tool.key
    LOOP
        PERFORM agentstate_check_standing(added, true, p_user, rn.created_by_id, p_membership);
    END LOOP;
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
CREATE FUNCTION agentstate_current_status(
    p_status text, p_created_at timestamptz, p_deadline timestamptz, p_ttl interval
) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_status = 'pending'
                     AND coalesce(p_deadline, p_created_at + p_ttl) <= statement_timestamp()
                THEN 'expired' ELSE p_status END
$$;

-- Whether user p_user is a member of group p_group, by the site's user model's
-- membership table: p_membership is {table, user column, group column} (NULL:
-- the user model has no groups).
CREATE FUNCTION agentstate_in_group(p_user bigint, p_group bigint, p_membership text[])
RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
DECLARE
    member boolean;
BEGIN
    IF p_user IS NULL OR p_group IS NULL OR p_membership IS NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('SELECT EXISTS (SELECT FROM %I WHERE %I = $1 AND %I = $2)',
                   p_membership[1], p_membership[2], p_membership[3])
        INTO member USING p_user, p_group;
    RETURN member;
END $$;

-- Refuses a standing decision of p_tool by p_user (a policy for the runs of
-- p_creator, or an approval written into the records of a run p_creator created)
-- unless the tool has no rule or its rule lets p_user decide alone, in
-- agentstate_decide's words: SelfApproval for the run's creator unless the rule
-- allows it; NotAReviewer outside its reviewers (escalation is a request's, and
-- a standing decision has none); VotesRequired for an approval where the rule
-- wants more than one reviewer.
CREATE FUNCTION agentstate_check_standing(
    p_tool text, p_approve boolean, p_user bigint, p_creator bigint, p_membership text[]
) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
    rl agentstate_approvalrule;
BEGIN
    SELECT * INTO rl FROM agentstate_approvalrule WHERE tool_name = p_tool;
    IF NOT FOUND THEN
        RETURN;
    ELSIF NOT rl.allow_self_approval AND p_user IS NOT NULL AND p_user = p_creator THEN
        PERFORM agentstate_refuse('SelfApproval', '{}');
    ELSIF rl.reviewers_id IS NOT NULL
          AND NOT agentstate_in_group(p_user, rl.reviewers_id, p_membership) THEN
        PERFORM agentstate_refuse('NotAReviewer', jsonb_build_object('tool_name', p_tool));
    ELSIF p_approve AND rl.approvals_required > 1 THEN
        PERFORM agentstate_refuse('VotesRequired', jsonb_build_object(
            'tool_name', p_tool, 'approvals_required', rl.approvals_required));
    END IF;
END $$;

-- The run's request for p_call, filed now unless one exists (answered as it
-- is, no event); filed already decided when the run's records decide the
-- call (p_decided_reason, no decider) or, left undecided by them, when an
-- active policy does (its row locked FOR SHARE by agentstate_deciding_policy;
-- its reason or p_policy_reason naming it; the run's record of the call
-- written as a decision would, by p_policy_actor naming it).
--
-- A request's operations (filing, deciding, consuming) answer json rather
-- than jsonb: {"request": its row, "current_status": ..., "run": its run's
-- row, "events": [...]}, the rows by row_to_json, whose text goes out as it
-- is built, where to_jsonb builds a tree that jsonb_out then writes out again
-- (about 180,000 of a filing's 1,670,000 instructions in the server).
CREATE FUNCTION agentstate_request_approval(
    p_run_id text, p_tool text, p_call text, p_arguments jsonb, p_decided_reason text,
    p_policy_reason text, p_policy_actor text, p_records_actor text, p_ttl interval,
    p_reach bigint, p_user bigint, p_actor text, p_digest text
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
    decision jsonb;
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
            'policy', req.policy_id, 'arguments', p_arguments, 'arguments_digest', p_digest)
        || CASE WHEN rl.id IS NULL THEN '{}'::jsonb ELSE jsonb_build_object(
            'rule', rl.id, 'approvals_required', req.approvals_required,
            'deadline', req.deadline) END);
    IF decided IS NULL THEN
        RETURN json_build_object(
            'request', row_to_json(req),
            'current_status',
                agentstate_current_status(req.status, req.created_at, req.deadline, p_ttl),
            'run', row_to_json(rn), 'created', true, 'events', jsonb_build_array(requested));
    END IF;
    -- Decided as it is filed: by an active policy or by the run's records, no decider.
    decision := agentstate_record('approval.decided', 'approvalrequest', req.id::text, NULL,
        CASE WHEN pol_id IS NULL THEN p_records_actor ELSE format(p_policy_actor, pol_id) END,
        req.created_by_id, '', jsonb_build_object(
            'run_id', rn.run_id, 'tool_name', p_tool, 'call_id', p_call,
            'decision', CASE WHEN decided THEN 'approve' ELSE 'reject' END,
            'always', req.always, 'reason', req.reason, 'policy', req.policy_id));
    IF pol_id IS NOT NULL THEN
        changed := agentstate_write_decision(rn, p_tool, p_call, decided, false, req.reason,
            NULL, format(p_policy_actor, pol_id));
    END IF;
    RETURN json_build_object(
        'request', row_to_json(req),
        'current_status',
            agentstate_current_status(req.status, req.created_at, req.deadline, p_ttl),
        'run', row_to_json(rn), 'created', true,
        'events', CASE WHEN changed IS NULL THEN jsonb_build_array(requested, decision)
                       ELSE jsonb_build_array(requested, decision, changed) END);
END $$;

-- Decide a pending request exactly once: the run's row locked first, then
-- the request's, whose status is then read as it is (a racing decision
-- committed meanwhile is seen: AlreadyDecided).
-- p_arguments (NULL: none) is what the reviewer approved instead of the filed
-- arguments, kept as approved_arguments unless it equals them; p_digest is its
-- digest (NULL: the filed arguments', the request's arguments_digest).
-- Separation of duties first: the run's creator unless the request allows it
-- (SelfApproval); outside its reviewers, and its escalation group once due
-- (NotAReviewer). A request filed under a rule past its deadline is Expired
-- whatever the sweep did. Escalation and deadline are read by the clock once
-- the locks are held (held): a decision that waited for the sweep's lock comes
-- after the sweep's decision, as on the ORM.
-- Under a rule each decision is a vote (one per reviewer: AlreadyVoted); an
-- approve decides once approvals_required votes approved the same digest, a
-- reject at once.
CREATE FUNCTION agentstate_decide(
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
    reviewer boolean;  -- p_user among the request's reviewers
    held timestamptz;  -- when the locks were taken
BEGIN
    SELECT r.* INTO rn FROM agentstate_run r
    WHERE r.id = (SELECT q.run_id FROM agentstate_approvalrequest q WHERE q.id = p_id) FOR UPDATE;
    SELECT * INTO req FROM agentstate_approvalrequest WHERE id = p_id FOR UPDATE;
    held := clock_timestamp();
    IF rn.id IS NULL OR req.id IS NULL THEN
        RETURN agentstate_refuse('ApprovalRequestNotFound', jsonb_build_object('id', p_id));
    END IF;
    IF NOT req.allow_self_approval AND p_user IS NOT NULL AND rn.created_by_id = p_user THEN
        RETURN agentstate_refuse('SelfApproval', '{}');
    END IF;
    reviewer := agentstate_in_group(p_user, req.reviewers_id, p_membership);
    IF (req.reviewers_id IS NOT NULL OR (req.approvals_required > 1 AND p_user IS NULL))
       AND NOT reviewer
       AND NOT (coalesce(req.escalate_at <= held, false)
                AND agentstate_in_group(p_user, req.escalate_to_id, p_membership)) THEN
        RETURN agentstate_refuse('NotAReviewer', jsonb_build_object('tool_name', req.tool_name));
    END IF;
    IF coalesce(req.deadline <= held, false)
       OR agentstate_current_status(req.status, req.created_at, req.deadline, p_ttl) = 'expired' THEN
        RETURN agentstate_refuse('ApprovalRequestExpired', '{}');
    END IF;
    IF req.status <> 'pending' THEN
        RETURN agentstate_refuse('AlreadyDecided', jsonb_build_object(
            'status', req.status, 'decided_by_id', req.decided_by_id));
    END IF;
    IF p_approve AND p_always AND req.approvals_required > 1 THEN
        -- "Always" would approve the tool's later calls on one vote.
        RETURN agentstate_refuse('VotesRequired', jsonb_build_object(
            'tool_name', req.tool_name, 'approvals_required', req.approvals_required));
    END IF;
    IF p_approve AND p_always AND req.reviewers_id IS NOT NULL AND NOT reviewer THEN
        -- Escalation lets its group decide this request, not the tool's later calls.
        RETURN agentstate_refuse('NotAReviewer', jsonb_build_object(
            'tool_name', req.tool_name, 'escalated', true));
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

-- Use a run's approval of a call once: the run's row locked first, then the
-- request's. Refused unless the request is approved (NotApproved), for this
-- digest when it has one (ArgumentsChanged), and not used yet (AlreadyConsumed).
CREATE FUNCTION agentstate_consume(
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
