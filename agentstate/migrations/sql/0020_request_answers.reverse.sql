-- 0020, undone: the functions as the migrations before it left them.

CREATE OR REPLACE FUNCTION agentstate_record(
    p_kind text, p_object_type text, p_object_id text, p_user_id bigint, p_actor text,
    p_created_by_id bigint, p_owner text, p_details jsonb
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    recorded jsonb;
BEGIN
    INSERT INTO agentstate_event
        (kind, actor, user_id, object_type, object_id, created_by_id, owner, details, created_at)
    VALUES (p_kind, p_actor, p_user_id, p_object_type, p_object_id, p_created_by_id,
            coalesce(p_owner, ''), coalesce(p_details, '{}'), now())
    RETURNING to_jsonb(agentstate_event.*) INTO recorded;
    RETURN recorded || jsonb_build_object('delivery_ids', (
        SELECT coalesce(jsonb_agg(d.id), '[]') FROM agentstate_delivery d
        WHERE d.event_id = (recorded ->> 'id')::bigint));
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

DROP FUNCTION agentstate_request_approval(text, text, text, jsonb, text, text, text, interval, bigint, bigint, text, text);

CREATE FUNCTION agentstate_request_approval(
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

DROP FUNCTION agentstate_decide(bigint, boolean, boolean, text, jsonb, interval, bigint, text, text, text[]);

CREATE FUNCTION agentstate_decide(
    p_id bigint, p_approve boolean, p_always boolean, p_reason text, p_arguments jsonb,
    p_ttl interval, p_user bigint, p_actor text, p_digest text, p_membership text[]
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan AS $$
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
            RETURN jsonb_build_object(
                'request', to_jsonb(req) || jsonb_build_object('current_status', req.status),
                'run', to_jsonb(rn), 'events', jsonb_build_array(voted));
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
    RETURN jsonb_build_object(
        'request', to_jsonb(req) || jsonb_build_object('current_status', req.status),
        'run', to_jsonb(rn), 'events', CASE WHEN voted IS NULL
            THEN jsonb_build_array(changed, decided)
            ELSE jsonb_build_array(voted, changed, decided) END);
END $$;

DROP FUNCTION agentstate_consume(text, text, text, text, bigint, bigint, text);

CREATE FUNCTION agentstate_consume(
    p_run_id text, p_tool text, p_call text, p_digest text, p_reach bigint, p_user bigint,
    p_actor text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan AS $$
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
    RETURN jsonb_build_object(
        'request', to_jsonb(req), 'run', to_jsonb(rn),
        'events', jsonb_build_array(agentstate_record('approval.consumed', 'approvalrequest',
            req.id::text, p_user, p_actor, req.created_by_id, '', jsonb_build_object(
                'run_id', rn.run_id, 'tool_name', req.tool_name, 'call_id', req.call_id,
                'arguments_digest', p_digest, 'consumed_at', req.consumed_at))));
END $$;
