-- Oversight (approval rules, votes, deadlines, arguments digests): the functions
-- whose signature changes dropped first, then every changed or added one.
DROP FUNCTION agentstate_is_tool_approved(text, text, text, jsonb, bigint);

DROP FUNCTION agentstate_current_status(text, timestamptz, interval);

DROP FUNCTION agentstate_request_approval(text, text, text, jsonb, text, text, text, interval, bigint, bigint, text);

DROP FUNCTION agentstate_decide(bigint, boolean, boolean, text, jsonb, interval, bigint, text);

CREATE OR REPLACE FUNCTION agentstate_current_status(
    p_status text, p_created_at timestamptz, p_deadline timestamptz, p_ttl interval
) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_status = 'pending'
                     AND coalesce(p_deadline, p_created_at + p_ttl) <= statement_timestamp()
                THEN 'expired' ELSE p_status END
$$;

CREATE OR REPLACE FUNCTION agentstate_in_group(p_user bigint, p_group bigint, p_membership text[])
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

CREATE OR REPLACE FUNCTION agentstate_is_tool_approved(
    p_run_id text, p_tool text, p_call text, p_arguments jsonb, p_digest text, p_reach bigint
) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    -- Approved, and p_digest given: approved only for the arguments the call's
    -- request was approved with (its arguments_digest); other ones answer false,
    -- arguments_changed.
    SELECT CASE WHEN verdict.approved AND p_digest IS NOT NULL AND EXISTS (
                    SELECT FROM agentstate_approvalrequest q
                    WHERE q.run_id = verdict.run AND q.call_id = p_call AND q.status = 'approved'
                      AND q.arguments_digest <> '' AND q.arguments_digest <> p_digest)
                THEN jsonb_build_object('approved', false, 'reason', 'arguments_changed')
                ELSE jsonb_build_object('approved', verdict.approved) END
    FROM (SELECT rn.id AS run, coalesce(agentstate_decision(rn.id, p_tool, p_call),
                                        agentstate_policy_decision(rn, p_tool, p_arguments))
                 AS approved
          FROM agentstate_reached_run(p_run_id, p_reach) AS rn) AS verdict
$$;

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
        SELECT d.policy_id, d.approve, d.reason INTO pol_id, pol_approve, pol_reason
        FROM agentstate_deciding_policy(rn, p_tool, p_arguments) AS d;
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

CREATE OR REPLACE FUNCTION agentstate_decide(
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

CREATE OR REPLACE FUNCTION agentstate_expire_approval_requests(
    p_size integer, p_ttl interval, p_actor text
) RETURNS jsonb
LANGUAGE sql AS $$
    WITH batch AS (
        SELECT id FROM agentstate_approvalrequest
        WHERE status = 'pending' AND deadline IS NULL AND created_at <= now() - p_ttl
        ORDER BY created_at LIMIT p_size
        FOR UPDATE SKIP LOCKED
    ), expired AS (
        UPDATE agentstate_approvalrequest request SET status = 'expired' FROM batch
        WHERE request.id = batch.id
        RETURNING request.id, request.run_id, request.created_by_id, request.tool_name,
                  request.call_id
    ), logged AS (
        INSERT INTO agentstate_event
            (kind, actor, user_id, object_type, object_id, created_by_id, owner, details,
             created_at)
        SELECT 'approval.expired', p_actor, NULL, 'approvalrequest', expired.id::text,
               expired.created_by_id, '',
               jsonb_build_object('run_id', run.run_id, 'tool_name', expired.tool_name,
                                  'call_id', expired.call_id),
               now()
        FROM expired JOIN agentstate_run run ON run.id = expired.run_id
        RETURNING agentstate_event.*
    )
    SELECT jsonb_build_object(
        'count', count(*), 'events', coalesce(jsonb_agg(to_jsonb(logged) ORDER BY id), '[]'))
    FROM logged
$$;

-- Use a run's approval of a call once: the run's row locked first, then the
-- request's. Refused unless the request is approved (NotApproved), for this
-- digest when it has one (ArgumentsChanged), and not used yet (AlreadyConsumed).
CREATE OR REPLACE FUNCTION agentstate_consume(
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

-- The deadlines of the requests filed under a rule, at most p_size of them by
-- deadline: each one's due steps, under its run's row lock then its own, as a
-- decision takes them. A request whose run is locked (a decision or a claim in
-- progress) is left to the next sweep, never waited for; its row, once locked,
-- is read as it now is, so that each step is taken once. Past the deadline:
-- on_deadline applied (expire: approval.expired; reject, approve: decided with
-- no decider, for p_reason, the run's record written, approval.decided), by
-- actor format(p_rule_actor, rule) (the rule deleted since: p_sweeper). Else past
-- remind_at: approval.expiring once; past escalate_at: approval.escalated once.
-- Answers {"count": the requests it locked, "events"}.
CREATE OR REPLACE FUNCTION agentstate_apply_deadlines(
    p_size integer, p_sweeper text, p_rule_actor text, p_reason text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan AS $$
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
