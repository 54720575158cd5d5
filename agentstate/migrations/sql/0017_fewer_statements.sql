-- 0017: fewer statements in the writes' functions. The event's row trigger
-- takes each step as a simple expression; the outbox starts no insert with no
-- active webhook; a filing reads all it needs in one statement after the run's
-- lock, the policies and the rule only when one names the tool, and inserts
-- its event itself; a decision inserts its two events itself, the record
-- written by agentstate_write_record (new: agentstate_write_decision without
-- its event). Four CHECK constraints stored in a shorter, equal form.

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

CREATE OR REPLACE FUNCTION agentstate_write_record(
    p_run agentstate_run, p_tool text, p_call text, p_approve boolean, p_always boolean,
    p_reason text, p_user bigint
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
    RETURN jsonb_build_object('tool_name', p_tool, 'call_id', p_call, 'decision', verdict,
                              'always', p_always, 'reason', p_reason);
END $$;

CREATE OR REPLACE FUNCTION agentstate_write_decision(
    p_run agentstate_run, p_tool text, p_call text, p_approve boolean, p_always boolean,
    p_reason text, p_user bigint, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
    RETURN agentstate_record('approvals.changed', 'run', p_run.run_id, p_user, p_actor,
        p_run.created_by_id, '', agentstate_write_record(
            p_run, p_tool, p_call, p_approve, p_always, p_reason, p_user));
END $$;

CREATE OR REPLACE FUNCTION agentstate_request_approval(
    p_run_id text, p_tool text, p_call text, p_arguments jsonb, p_decided_reason text,
    p_policy_reason text, p_policy_actor text, p_ttl interval, p_reach bigint, p_user bigint,
    p_actor text, p_digest text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    rn agentstate_run;
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
    SELECT * INTO rn FROM agentstate_run
    WHERE run_id = p_run_id AND (p_reach IS NULL OR created_by_id = p_reach) FOR UPDATE;
    IF NOT FOUND THEN
        RETURN agentstate_refuse('RunNotFound', jsonb_build_object('run_id', p_run_id));
    END IF;
    -- After the lock, in a statement of its own (so that its snapshot is taken
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
    INSERT INTO agentstate_event
        (kind, actor, user_id, object_type, object_id, created_by_id, owner, details, created_at)
    VALUES ('approval.requested', p_actor, p_user, 'approvalrequest', req.id::text,
            req.created_by_id, '', jsonb_build_object(
            'run_id', rn.run_id, 'tool_name', p_tool, 'call_id', p_call, 'status', req.status,
            'policy', req.policy_id)
        || CASE WHEN rl.id IS NULL THEN '{}'::jsonb ELSE jsonb_build_object(
            'arguments', p_arguments, 'arguments_digest', p_digest, 'rule', rl.id,
            'approvals_required', req.approvals_required, 'deadline', req.deadline) END, now())
    RETURNING to_jsonb(agentstate_event.*) INTO requested;
    IF pol_id IS NOT NULL THEN
        changed := agentstate_write_decision(rn, p_tool, p_call, decided, false, req.reason,
            NULL, format(p_policy_actor, pol_id));
    END IF;
    -- the event's webhook deliveries (agentstate_record's "delivery_ids") read
    -- in the answer's statement
    requested := requested || jsonb_build_object('delivery_ids', (
        SELECT coalesce(jsonb_agg(d.id), '[]') FROM agentstate_delivery d
        WHERE d.event_id = (requested ->> 'id')::bigint));
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
    verdict text := CASE WHEN p_approve THEN 'approve' ELSE 'reject' END;
    changes jsonb;
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
        VALUES (req.id, p_user, verdict, coalesce(edited, req.arguments), digest, p_reason,
                statement_timestamp());
        SELECT count(*) INTO approvals FROM agentstate_vote v
        WHERE v.request_id = req.id AND v.decision = 'approve' AND v.arguments_digest = digest;
        voted := agentstate_record('approval.voted', 'approvalrequest', req.id::text, p_user,
            p_actor, req.created_by_id, '', jsonb_build_object(
                'run_id', rn.run_id, 'tool_name', req.tool_name, 'call_id', req.call_id,
                'decision', verdict, 'arguments_digest', digest, 'reason', p_reason,
                'approvals', approvals, 'approvals_required', req.approvals_required));
        IF p_approve AND approvals < req.approvals_required THEN
            RETURN jsonb_build_object(
                'request', to_jsonb(req) || jsonb_build_object('current_status', req.status),
                'run', to_jsonb(rn), 'events', jsonb_build_array(voted));
        END IF;
    END IF;
    changes := agentstate_write_record(
        rn, req.tool_name, req.call_id, p_approve, p_always, p_reason, p_user);
    UPDATE agentstate_approvalrequest
    SET status = CASE WHEN p_approve THEN 'approved' ELSE 'rejected' END, always = p_always,
        decided_by_id = p_user, reason = p_reason, decided_at = statement_timestamp(),
        approved_arguments = edited,
        arguments_digest = CASE WHEN p_approve THEN digest ELSE req.arguments_digest END
    WHERE id = req.id
    RETURNING * INTO req;
    INSERT INTO agentstate_event
        (kind, actor, user_id, object_type, object_id, created_by_id, owner, details, created_at)
    VALUES ('approvals.changed', p_actor, p_user, 'run', rn.run_id, rn.created_by_id, '',
            changes, now())
    RETURNING to_jsonb(agentstate_event.*) INTO changed;
    INSERT INTO agentstate_event
        (kind, actor, user_id, object_type, object_id, created_by_id, owner, details, created_at)
    VALUES ('approval.decided', p_actor, p_user, 'approvalrequest', req.id::text,
            req.created_by_id, '', jsonb_build_object(
                'run_id', rn.run_id, 'tool_name', req.tool_name, 'call_id', req.call_id,
                'decision', verdict, 'always', p_always, 'reason', p_reason)
            || CASE WHEN edited IS NULL THEN '{}'::jsonb ELSE jsonb_build_object(
                'arguments', req.arguments, 'approved_arguments', edited) END
            || CASE WHEN req.rule_id IS NULL THEN '{}'::jsonb ELSE jsonb_build_object(
                'arguments_digest', req.arguments_digest) END, now())
    RETURNING to_jsonb(agentstate_event.*) INTO decided;
    -- the events' webhook deliveries (agentstate_record's "delivery_ids"), read
    -- in the answer's statement
    RETURN jsonb_build_object(
        'request', to_jsonb(req) || jsonb_build_object('current_status', req.status),
        'run', to_jsonb(rn), 'events', CASE WHEN voted IS NULL THEN '[]'::jsonb
                                            ELSE jsonb_build_array(voted) END
            || jsonb_build_array(
                changed || jsonb_build_object('delivery_ids', (
                    SELECT coalesce(jsonb_agg(d.id), '[]') FROM agentstate_delivery d
                    WHERE d.event_id = (changed ->> 'id')::bigint)),
                decided || jsonb_build_object('delivery_ids', (
                    SELECT coalesce(jsonb_agg(d.id), '[]') FROM agentstate_delivery d
                    WHERE d.event_id = (decided ->> 'id')::bigint))));
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
