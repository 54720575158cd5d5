-- 0011: the Python API's calls, cheaper on the server (docs/performance.md,
-- "Python API: where a call's time goes"). The reads of runs and policies that
-- query tables become PL/pgSQL, which keeps their plans for the session (an SQL
-- function the planner cannot inline is planned again on every call);
-- agentstate_json_time is STABLE, so that it is inlined.

-- A time as event details hold it: PostgreSQL's JSON form of the time in UTC
-- (microseconds without trailing zeros), whatever the session's time zone;
-- agentstate.events.json_time writes the same. STABLE, as to_jsonb is, so that
-- the planner inlines it (an IMMUTABLE function calling a STABLE one is called).
CREATE OR REPLACE FUNCTION agentstate_json_time(p_time timestamptz) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT (to_jsonb(p_time AT TIME ZONE 'UTC') #>> '{}') || '+00:00'
$$;

-- The run's records, [[tool_name, record], ...] by tool name; a record's side
-- is its flag, or the call ids decided so, in order.
--
-- This function and the other reads of 30_runs.sql and 35_policies.sql that
-- query tables are PL/pgSQL, which keeps each statement's plan for the session:
-- an SQL function is planned again on every call unless the planner inlines
-- it, and it inlines no scalar function whose body has a FROM or a subquery.
CREATE OR REPLACE FUNCTION agentstate_records_of(p_run bigint) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
        SELECT coalesce(jsonb_agg(jsonb_build_array(r.tool_name, jsonb_build_object(
                   'approved', coalesce(to_jsonb(r.approved_always), (
                       SELECT coalesce(jsonb_agg(c.call_id ORDER BY c.id), '[]')
                       FROM agentstate_approvalcall c
                       WHERE c.record_id = r.id AND c.decision = 'approve')),
                   'rejected', coalesce(to_jsonb(r.rejected_always), (
                       SELECT coalesce(jsonb_agg(c.call_id ORDER BY c.id), '[]')
                       FROM agentstate_approvalcall c
                       WHERE c.record_id = r.id AND c.decision = 'reject'))))
               ORDER BY r.tool_name), '[]')
        FROM agentstate_approvalrecord r WHERE r.run_id = p_run);
END $$;

-- The SDK's precedence over the tool's record: permanent approval, then
-- permanent rejection, then the call approved, then rejected; else NULL.
CREATE OR REPLACE FUNCTION agentstate_decision(p_run bigint, p_tool text, p_call text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
        SELECT CASE
            WHEN r.approved_always THEN true
            WHEN r.rejected_always THEN false
            WHEN r.approved_always IS NULL AND EXISTS (
                SELECT FROM agentstate_approvalcall c
                WHERE c.record_id = r.id AND c.decision = 'approve' AND c.call_id = p_call)
                THEN true
            WHEN r.rejected_always IS NULL AND EXISTS (
                SELECT FROM agentstate_approvalcall c
                WHERE c.record_id = r.id AND c.decision = 'reject' AND c.call_id = p_call)
                THEN false
        END
        FROM agentstate_approvalrecord r WHERE r.run_id = p_run AND r.tool_name = p_tool);
END $$;

-- What an active policy decides of a call in p_run the records leave undecided:
-- true, false (a matching reject policy wins), or NULL. Not locked: an answer.
CREATE OR REPLACE FUNCTION agentstate_policy_decision(p_run agentstate_run, p_tool text, p_arguments jsonb)
RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
        SELECT p.decision = 'approve' FROM agentstate_approvalpolicy p
        WHERE p.tool_name = p_tool AND p.revoked_at IS NULL
          AND (p.expires_at IS NULL OR p.expires_at > statement_timestamp())
          AND (p.user_id IS NULL OR p.user_id = p_run.created_by_id)
          AND (p.arguments IS NULL OR agentstate_json_contains(p_arguments, p.arguments))
        ORDER BY p.decision = 'reject' DESC, p.id LIMIT 1);
END $$;

-- The records first; left undecided, the active policies (35_policies.sql).
CREATE OR REPLACE FUNCTION agentstate_is_tool_approved(
    p_run_id text, p_tool text, p_call text, p_arguments jsonb, p_digest text, p_reach bigint
) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    rn agentstate_run := agentstate_reached_run(p_run_id, p_reach);
    approved boolean := coalesce(agentstate_decision(rn.id, p_tool, p_call),
                                 agentstate_policy_decision(rn, p_tool, p_arguments));
BEGIN
    -- Approved, and p_digest given: approved only for the arguments the call's
    -- request was approved with (its arguments_digest); other ones answer false,
    -- arguments_changed.
    IF approved AND p_digest IS NOT NULL AND EXISTS (
        SELECT FROM agentstate_approvalrequest q
        WHERE q.run_id = rn.id AND q.call_id = p_call AND q.status = 'approved'
          AND q.arguments_digest <> '' AND q.arguments_digest <> p_digest)
    THEN
        RETURN jsonb_build_object('approved', false, 'reason', 'arguments_changed');
    END IF;
    RETURN jsonb_build_object('approved', approved);
END $$;

DROP FUNCTION agentstate_side(bigint, boolean, text);
