-- 0017, undone: the functions and constraints as the migrations before it left them.

CREATE OR REPLACE FUNCTION agentstate_event_drawn() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    drawn bigint;
BEGIN
    IF coalesce(current_setting('agentstate.feed_lock', true), '') = '' THEN
        SELECT last_value INTO drawn FROM agentstate_event_id_seq;
        PERFORM pg_advisory_xact_lock_shared(1634038643, (drawn % 2147483648)::integer);
        PERFORM set_config('agentstate.feed_lock', drawn::text, true);
    END IF;
    NEW.id := nextval('agentstate_event_id_seq');
    PERFORM pg_notify('agentstate_events', json_build_object(
        'id', NEW.id, 'kind', NEW.kind, 'object_type', NEW.object_type,
        'object_id', NEW.object_id,
        'run_id', CASE WHEN NEW.object_type = 'run' THEN NEW.object_id
                       ELSE NEW.details ->> 'run_id' END)::text);
    RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION agentstate_outbox() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO agentstate_delivery
        (webhook_id, event_id, status, attempts, next_attempt_at, created_at)
    SELECT w.id, e.id, 'pending', 0, now(), now()
    FROM new_events e
    JOIN agentstate_webhook w ON w.active AND (w.kinds = '[]'::jsonb OR w.kinds ? e.kind);
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
    -- whether the records decided it for good: read only when they decided it
    -- (undecided, the request's "always" is false whatever the record holds)
    IF decided IS NOT NULL THEN
        SELECT r.approved_always IS TRUE OR r.rejected_always IS TRUE INTO permanent
        FROM agentstate_approvalrecord r WHERE r.run_id = rn.id AND r.tool_name = p_tool;
    ELSE
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

ALTER TABLE agentstate_approvalrequest
    DROP CONSTRAINT agentstate_request_decided_at,
    ADD CONSTRAINT agentstate_request_decided_at CHECK (((((status)::text = ANY ('{approved,rejected}'::text[])) AND (decided_at IS NOT NULL)) OR ((NOT ((status)::text = ANY ('{approved,rejected}'::text[]))) AND (decided_at IS NULL))));

ALTER TABLE agentstate_pausedrun
    DROP CONSTRAINT agentstate_pause_claimed_at,
    ADD CONSTRAINT agentstate_pause_claimed_at CHECK (((((status)::text = ANY ('{claimed,resolved}'::text[])) AND (claimed_at IS NOT NULL)) OR ((NOT ((status)::text = ANY ('{claimed,resolved}'::text[]))) AND (claimed_at IS NULL)))),
    DROP CONSTRAINT agentstate_pause_resolved_at,
    ADD CONSTRAINT agentstate_pause_resolved_at CHECK (((((status)::text = 'resolved'::text) AND (resolved_at IS NOT NULL)) OR ((NOT ((status)::text = 'resolved'::text)) AND (resolved_at IS NULL))));

ALTER TABLE agentstate_delivery
    DROP CONSTRAINT agentstate_delivery_delivered_at,
    ADD CONSTRAINT agentstate_delivery_delivered_at CHECK (((((status)::text = 'delivered'::text) AND (delivered_at IS NOT NULL)) OR ((NOT ((status)::text = 'delivered'::text)) AND (delivered_at IS NULL))));
