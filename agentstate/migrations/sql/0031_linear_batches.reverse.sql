-- Undoes 0031: the approval deadlines' batches each from the first, and the
-- answers of both functions appended to a jsonb array, as 0030 left them.

DROP FUNCTION agentstate_apply_deadlines(integer, text, text, text, timestamptz, bigint);

CREATE FUNCTION agentstate_apply_deadlines(
    p_size integer, p_sweeper text, p_rule_actor text, p_reason text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
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

CREATE OR REPLACE FUNCTION agentstate_store_get(p_items jsonb, p_now double precision, p_actor text)
RETURNS jsonb
LANGUAGE plpgsql SET enable_seqscan = off SET jit = off AS $$
DECLARE
    answer jsonb := '[]';
    item jsonb;
    scope_key text;
    item_name text;
    vid bigint;
    held jsonb;
    refreshed jsonb;
BEGIN
    FOR i IN 0 .. jsonb_array_length(p_items) - 1 LOOP
        item := p_items -> i;
        scope_key := item ->> 0;
        item_name := item ->> 1;
        SELECT v.id, v.value INTO vid, held FROM agentstate_variable v
        WHERE v.scope_id = (SELECT s.id FROM agentstate_scope s
                            WHERE s.key = scope_key AND s.owner_id IS NULL)
          AND v.name = item_name AND NOT v.is_list;
        IF vid IS NULL OR NOT agentstate_store_live(held, p_now) THEN
            held := NULL;
        ELSIF item -> 2 = 'true' AND jsonb_typeof(held -> 'ttl') = 'number'
              AND (held ->> 'ttl')::double precision <> 0 THEN
            UPDATE agentstate_variable v
            SET value = jsonb_set(v.value, '{expires_at}',
                                  to_jsonb(p_now + 60 * (v.value ->> 'ttl')::double precision)),
                version = v.version + 1, updated_at = now(), updated_by = p_actor
            WHERE v.id = vid AND NOT v.is_list
              AND jsonb_typeof(v.value -> 'ttl') = 'number'
              AND (v.value ->> 'ttl')::double precision <> 0
              AND agentstate_store_live(v.value, p_now)
            RETURNING v.value INTO refreshed;
            IF FOUND THEN
                held := refreshed;
            END IF;
        END IF;
        answer := answer || jsonb_build_array(held);
    END LOOP;
    RETURN jsonb_build_object('items', answer);
END $$;
