-- 0017: fewer statements in the writes' functions. The event's row trigger
-- takes each step as a simple expression; the outbox starts no insert with no
-- active webhook; a filing reads all it needs in one statement after the run's
-- lock, the policies and the rule only when one names the tool. Four CHECK
-- constraints stored in a shorter, equal form.

CREATE OR REPLACE FUNCTION agentstate_event_drawn() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    drawn bigint;
    done boolean;
BEGIN
    -- Each step an assignment, which PL/pgSQL evaluates as a simple expression,
    -- where a SELECT or a PERFORM runs a statement through the executor; the
    -- sequence's last value by pg_sequence_last_value (NULL before its first
    -- draw, when the first id drawn is 1: every id is above 0).
    IF coalesce(current_setting('agentstate.feed_lock', true), '') = '' THEN
        drawn := coalesce(pg_sequence_last_value('agentstate_event_id_seq'), 0);
        done := pg_advisory_xact_lock_shared(1634038643, (drawn % 2147483648)::integer) IS NULL;
        done := set_config('agentstate.feed_lock', drawn::text, true) IS NULL;
    END IF;
    NEW.id := nextval('agentstate_event_id_seq');
    done := pg_notify('agentstate_events', json_build_object(
        'id', NEW.id, 'kind', NEW.kind, 'object_type', NEW.object_type,
        'object_id', NEW.object_id,
        'run_id', CASE WHEN NEW.object_type = 'run' THEN NEW.object_id
                       ELSE NEW.details ->> 'run_id' END)::text) IS NULL;
    RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION agentstate_outbox() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT FROM agentstate_webhook w WHERE w.active) THEN
        INSERT INTO agentstate_delivery
            (webhook_id, event_id, status, attempts, next_attempt_at, created_at)
        SELECT w.id, e.id, 'pending', 0, now(), now()
        FROM new_events e
        JOIN agentstate_webhook w ON w.active AND (w.kinds = '[]'::jsonb OR w.kinds ? e.kind);
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION agentstate_request_approval(
    p_run_id text, p_tool text, p_call text, p_arguments jsonb, p_decided_reason text,
    p_policy_reason text, p_policy_actor text, p_ttl interval, p_reach bigint, p_user bigint,
    p_actor text, p_digest text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan AS $$
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
        RETURN jsonb_build_object(
            'request', to_jsonb(req) || jsonb_build_object('current_status',
                agentstate_current_status(req.status, req.created_at, req.deadline, p_ttl)),
            'run', to_jsonb(rn), 'created', false, 'events', '[]'::jsonb);
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
    RETURN jsonb_build_object(
        'request', to_jsonb(req) || jsonb_build_object('current_status',
            agentstate_current_status(req.status, req.created_at, req.deadline, p_ttl)),
        'run', to_jsonb(rn), 'created', true,
        'events', CASE WHEN changed IS NULL THEN jsonb_build_array(requested)
                       ELSE jsonb_build_array(requested, changed) END);
END $$;

-- CHECK constraints of the form (A AND B) OR (NOT A AND NOT B), A a status test
-- that is never NULL (status is NOT NULL), stored as A = B: the same rule, the
-- same names, the rows refused the same; every statement that writes the table
-- parses its constraints anew (ExecRelCheck), and these were its longest. The
-- models keep Django's form, which the other databases get.
ALTER TABLE agentstate_approvalrequest
    DROP CONSTRAINT agentstate_request_decided_at,
    ADD CONSTRAINT agentstate_request_decided_at CHECK ((((status)::text = ANY ('{approved,rejected}'::text[])) = (decided_at IS NOT NULL)));

ALTER TABLE agentstate_pausedrun
    DROP CONSTRAINT agentstate_pause_claimed_at,
    ADD CONSTRAINT agentstate_pause_claimed_at CHECK ((((status)::text = ANY ('{claimed,resolved}'::text[])) = (claimed_at IS NOT NULL))),
    DROP CONSTRAINT agentstate_pause_resolved_at,
    ADD CONSTRAINT agentstate_pause_resolved_at CHECK ((((status)::text = 'resolved'::text) = (resolved_at IS NOT NULL)));

ALTER TABLE agentstate_delivery
    DROP CONSTRAINT agentstate_delivery_delivered_at,
    ADD CONSTRAINT agentstate_delivery_delivered_at CHECK ((((status)::text = 'delivered'::text) = (delivered_at IS NOT NULL)));
