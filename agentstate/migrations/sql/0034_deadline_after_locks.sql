-- 0034: a decision that waited for the sweep's lock on its run, from before its
-- request's deadline, answered AlreadyDecided when the sweep had decided the request
-- at the deadline meanwhile. The deadline and the escalation are now read by the
-- clock once the locks are held: that decision answers Expired, as any decision
-- after the deadline does.

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
