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

CREATE OR REPLACE FUNCTION agentstate_write_decision(
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

DROP FUNCTION agentstate_write_record(agentstate_run, text, text, boolean, boolean, text, bigint);

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
