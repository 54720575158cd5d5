-- Migration 0009 undone: its functions dropped, the ones it changed as 0008 left them.
DROP FUNCTION agentstate_is_tool_approved(text, text, text, jsonb, text, bigint);
DROP FUNCTION agentstate_current_status(text, timestamptz, timestamptz, interval);
DROP FUNCTION agentstate_request_approval(text, text, text, jsonb, text, text, text, interval, bigint, bigint, text, text);
DROP FUNCTION agentstate_decide(bigint, boolean, boolean, text, jsonb, interval, bigint, text, text, text[]);
DROP FUNCTION agentstate_in_group(bigint, bigint, text[]);
DROP FUNCTION agentstate_consume(text, text, text, text, bigint, bigint, text);
DROP FUNCTION agentstate_apply_deadlines(integer, text, text, text);

CREATE OR REPLACE FUNCTION agentstate_current_status(p_status text, p_created_at timestamptz, p_ttl interval)
RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_status = 'pending' AND p_created_at <= statement_timestamp() - p_ttl
                THEN 'expired' ELSE p_status END
$$;

CREATE OR REPLACE FUNCTION agentstate_is_tool_approved(
    p_run_id text, p_tool text, p_call text, p_arguments jsonb, p_reach bigint
) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('approved', coalesce(agentstate_decision(rn.id, p_tool, p_call),
                                                   agentstate_policy_decision(rn, p_tool, p_arguments)))
    FROM agentstate_reached_run(p_run_id, p_reach) AS rn
$$;

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

CREATE OR REPLACE FUNCTION agentstate_expire_approval_requests(
    p_size integer, p_ttl interval, p_actor text
) RETURNS jsonb
LANGUAGE sql AS $$
    WITH batch AS (
        SELECT id FROM agentstate_approvalrequest
        WHERE status = 'pending' AND created_at <= now() - p_ttl
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
