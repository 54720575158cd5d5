-- The sweep: each call one batch of at most p_size rows, as one statement.
--
-- A batch takes its due rows FOR UPDATE SKIP LOCKED, so two sweeps at once
-- take disjoint batches and neither waits for a claim or a decision in
-- progress; a row changed meanwhile no longer matches once it is locked, so
-- a pause is claimed or expired, never both. The expiring statements write
-- one event per row they changed and answer {"count", "events"}.
--
-- A batch changes its rows, and their dependent rows, by the batch's ids (= ANY
-- of an array: an index lookup each), never by a join with the batch: over a
-- table not much larger than a batch the planner hashes the whole table for the
-- join, so that every batch would read it all again and a sweep would grow with
-- the square of its backlog (tests/backends/test_sweep_plans.py).

-- Pauses by expiry then id, from the one after (p_after_expires, p_after_id) (NULL:
-- the first): each batch starts where the last ended, so that it reads its own rows
-- only, never the index entries of the rows batches before it expired (dead until
-- vacuumed). Answers "after", where the next batch starts, and with p_events the
-- events.
CREATE FUNCTION agentstate_expire_pauses(
    p_size integer, p_actor text, p_after_expires timestamptz, p_after_id bigint,
    p_events boolean
) RETURNS jsonb
LANGUAGE sql AS $$
    WITH batch AS (
        SELECT id, expires_at FROM agentstate_pausedrun
        WHERE status = 'pending' AND expires_at <= now()
          AND (expires_at, id) > (coalesce(p_after_expires, '-infinity'), coalesce(p_after_id, 0))
        ORDER BY expires_at, id LIMIT p_size
        FOR UPDATE SKIP LOCKED
    ), expired AS (
        UPDATE agentstate_pausedrun pause SET status = 'expired'
        WHERE pause.id = ANY (ARRAY(SELECT id FROM batch))
        RETURNING pause.chat_id, pause.tool_call_id, pause.owner, pause.created_by_id,
                  pause.question_id
    ), logged AS (
        INSERT INTO agentstate_event
            (kind, actor, user_id, object_type, object_id, created_by_id, owner, details,
             created_at)
        SELECT 'pause.expired', p_actor, NULL, 'pausedrun', chat_id || '#' || tool_call_id,
               created_by_id, owner, jsonb_build_object('question_id', question_id), now()
        FROM expired
        RETURNING agentstate_event.*
    )
    SELECT jsonb_build_object(
        'count', (SELECT count(*) FROM logged),
        'events', CASE WHEN p_events THEN (
            SELECT coalesce(jsonb_agg(to_jsonb(logged) ORDER BY id), '[]') FROM logged)
            ELSE '[]' END,
        'after', (SELECT jsonb_build_array(expires_at, id) FROM batch
                  ORDER BY expires_at DESC, id DESC LIMIT 1))
$$;

CREATE FUNCTION agentstate_expire_approval_requests(
    p_size integer, p_ttl interval, p_actor text
) RETURNS jsonb
LANGUAGE sql AS $$
    WITH batch AS (
        SELECT id FROM agentstate_approvalrequest
        WHERE status = 'pending' AND deadline IS NULL AND created_at <= now() - p_ttl
        ORDER BY created_at LIMIT p_size
        FOR UPDATE SKIP LOCKED
    ), expired AS (
        UPDATE agentstate_approvalrequest request SET status = 'expired'
        WHERE request.id = ANY (ARRAY(SELECT id FROM batch))
        RETURNING request.id, request.run_id, request.created_by_id, request.tool_name,
                  request.call_id
    ), logged AS (
        INSERT INTO agentstate_event
            (kind, actor, user_id, object_type, object_id, created_by_id, owner, details,
             created_at)
        SELECT 'approval.expired', p_actor, NULL, 'approvalrequest', expired.id::text,
               expired.created_by_id, '',
               jsonb_build_object(
                   'run_id', (SELECT run.run_id FROM agentstate_run run
                              WHERE run.id = expired.run_id),
                   'tool_name', expired.tool_name, 'call_id', expired.call_id),
               now()
        FROM expired
        RETURNING agentstate_event.*
    )
    SELECT jsonb_build_object(
        'count', count(*), 'events', coalesce(jsonb_agg(to_jsonb(logged) ORDER BY id), '[]'))
    FROM logged
$$;

-- Resolved and expired pauses last changed more than p_retention ago; how many. The
-- resolved first, then the expired, each read in the order of its own index: as one
-- OR, the planner may build a bitmap of every entry of both for each batch.
CREATE FUNCTION agentstate_purge_pauses(p_size integer, p_retention interval) RETURNS jsonb
LANGUAGE sql AS $$
    WITH resolved AS (
        SELECT id FROM agentstate_pausedrun
        WHERE status = 'resolved' AND resolved_at < now() - p_retention
        ORDER BY resolved_at LIMIT p_size
        FOR UPDATE SKIP LOCKED
    ), expired AS (
        SELECT id FROM agentstate_pausedrun
        WHERE status = 'expired' AND expires_at < now() - p_retention
        ORDER BY expires_at LIMIT p_size - (SELECT count(*) FROM resolved)
        FOR UPDATE SKIP LOCKED
    ), purged AS (
        DELETE FROM agentstate_pausedrun pause
        WHERE pause.id = ANY (ARRAY(SELECT id FROM resolved UNION ALL SELECT id FROM expired))
        RETURNING pause.id
    )
    SELECT jsonb_build_object('count', count(*)) FROM purged
$$;

-- Events older than p_retention, with their webhook deliveries and attempts; how many.
CREATE FUNCTION agentstate_purge_events(p_size integer, p_retention interval) RETURNS jsonb
LANGUAGE sql AS $$
    WITH batch AS (
        SELECT id FROM agentstate_event WHERE created_at < now() - p_retention
        ORDER BY created_at LIMIT p_size
        FOR UPDATE SKIP LOCKED
    ), attempts AS (
        DELETE FROM agentstate_deliveryattempt attempt
        WHERE attempt.delivery_id = ANY (ARRAY(
            SELECT delivery.id FROM agentstate_delivery delivery
            WHERE delivery.event_id = ANY (ARRAY(SELECT id FROM batch))))
    ), deliveries AS (
        DELETE FROM agentstate_delivery delivery
        WHERE delivery.event_id = ANY (ARRAY(SELECT id FROM batch))
    ), purged AS (
        DELETE FROM agentstate_event event WHERE event.id = ANY (ARRAY(SELECT id FROM batch))
        RETURNING event.id
    )
    SELECT jsonb_build_object('count', count(*)) FROM purged
$$;

-- The deadlines of the requests filed under a rule, at most p_size of them by
-- deadline: each one's due steps, under its run's row lock then its own, as a
-- decision takes them. A request whose run is locked (a decision or a claim in
-- progress) is left to the next sweep, never waited for; its row, once locked,
-- is read as it now is, so that each step is taken once. Past the deadline:
-- on_deadline applied (expire: approval.expired; reject, approve: decided with
-- no decider, for p_reason, the run's record written, approval.decided), by
-- actor format(p_rule_actor, rule) (the rule deleted since: p_sweeper). Else past
-- remind_at: approval.expiring once; past escalate_at: approval.escalated once.
-- Each batch starts after (p_after_deadline, p_after_id) (NULL: the first), where
-- the last ended: the requests it reminded or escalated stay pending before it, and
-- would be read again by every batch. The events are gathered in an array
-- (agentstate_store_get says why). Answers {"count": the
-- requests it locked, "events", "after": where the next batch starts}.
CREATE FUNCTION agentstate_apply_deadlines(
    p_size integer, p_sweeper text, p_rule_actor text, p_reason text,
    p_after_deadline timestamptz, p_after_id bigint
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    due record;
    rn agentstate_run;
    req agentstate_approvalrequest;
    ts timestamptz := statement_timestamp();
    actor text;
    approve boolean;
    facts jsonb;
    written jsonb[] := '{}';
    changed integer := 0;
    after jsonb;
BEGIN
    FOR due IN
        SELECT q.id, q.deadline, q.run_id FROM agentstate_approvalrequest q
        WHERE q.status = 'pending' AND q.deadline IS NOT NULL
          AND (q.deadline, q.id)
              > (coalesce(p_after_deadline, '-infinity'), coalesce(p_after_id, 0))
          AND (q.deadline <= ts OR (q.remind_at <= ts AND q.reminded_at IS NULL)
               OR (q.escalate_at <= ts AND q.escalated_at IS NULL))
        ORDER BY q.deadline, q.id LIMIT p_size
    LOOP
        after := jsonb_build_array(due.deadline, due.id);
        SELECT r.* INTO rn FROM agentstate_run r WHERE r.id = due.run_id
        FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN rn.id IS NULL;
        SELECT * INTO req FROM agentstate_approvalrequest WHERE id = due.id AND status = 'pending'
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
                written := array_append(written, agentstate_record(
                    'approval.expired', 'approvalrequest', req.id::text, NULL, actor,
                    req.created_by_id, '', facts));
                CONTINUE;
            END IF;
            approve := req.on_deadline = 'approve';
            written := array_append(written, agentstate_write_decision(
                rn, req.tool_name, req.call_id, approve, false, p_reason, NULL, actor));
            UPDATE agentstate_approvalrequest
            SET status = CASE WHEN approve THEN 'approved' ELSE 'rejected' END,
                decided_at = ts, reason = p_reason
            WHERE id = req.id;
            written := array_append(written, agentstate_record(
                'approval.decided', 'approvalrequest', req.id::text, NULL, actor,
                req.created_by_id, '', facts || jsonb_build_object(
                    'decision', CASE WHEN approve THEN 'approve' ELSE 'reject' END,
                    'always', false, 'reason', p_reason, 'rule', req.rule_id,
                    'arguments_digest', req.arguments_digest)));
            CONTINUE;
        END IF;
        IF req.remind_at <= ts AND req.reminded_at IS NULL THEN
            UPDATE agentstate_approvalrequest SET reminded_at = ts WHERE id = req.id;
            written := array_append(written, agentstate_record(
                'approval.expiring', 'approvalrequest', req.id::text, NULL, p_sweeper,
                req.created_by_id, '', facts || jsonb_build_object('deadline', req.deadline)));
        END IF;
        IF req.escalate_at <= ts AND req.escalated_at IS NULL THEN
            UPDATE agentstate_approvalrequest SET escalated_at = ts WHERE id = req.id;
            written := array_append(written, agentstate_record(
                'approval.escalated', 'approvalrequest', req.id::text, NULL, p_sweeper,
                req.created_by_id, '', facts || jsonb_build_object('escalate_to', req.escalate_to_id)));
        END IF;
    END LOOP;
    RETURN jsonb_build_object('count', changed, 'events', to_jsonb(written), 'after', after);
END $$;
