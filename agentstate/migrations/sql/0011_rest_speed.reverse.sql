-- 0011 undone: the functions as SQL functions, as 0003 and 0009 left them.

CREATE OR REPLACE FUNCTION agentstate_side(p_record bigint, p_flag boolean, p_decision text) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT coalesce(to_jsonb(p_flag), (
        SELECT coalesce(jsonb_agg(c.call_id ORDER BY c.id), '[]') FROM agentstate_approvalcall c
        WHERE c.record_id = p_record AND c.decision = p_decision))
$$;

CREATE OR REPLACE FUNCTION agentstate_records_of(p_run bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_array(r.tool_name, jsonb_build_object(
               'approved', agentstate_side(r.id, r.approved_always, 'approve'),
               'rejected', agentstate_side(r.id, r.rejected_always, 'reject')))
           ORDER BY r.tool_name), '[]')
    FROM agentstate_approvalrecord r WHERE r.run_id = p_run
$$;

CREATE OR REPLACE FUNCTION agentstate_run_state(p_run agentstate_run) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('run', to_jsonb(p_run), 'records', agentstate_records_of(p_run.id))
$$;

CREATE OR REPLACE FUNCTION agentstate_decision(p_run bigint, p_tool text, p_call text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN r.approved_always THEN true
        WHEN r.rejected_always THEN false
        WHEN r.approved_always IS NULL AND EXISTS (
            SELECT FROM agentstate_approvalcall c
            WHERE c.record_id = r.id AND c.decision = 'approve' AND c.call_id = p_call) THEN true
        WHEN r.rejected_always IS NULL AND EXISTS (
            SELECT FROM agentstate_approvalcall c
            WHERE c.record_id = r.id AND c.decision = 'reject' AND c.call_id = p_call) THEN false
    END
    FROM agentstate_approvalrecord r WHERE r.run_id = p_run AND r.tool_name = p_tool
$$;

CREATE OR REPLACE FUNCTION agentstate_policy_decision(p_run agentstate_run, p_tool text, p_arguments jsonb)
RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT p.decision = 'approve' FROM agentstate_approvalpolicy p
    WHERE p.tool_name = p_tool AND p.revoked_at IS NULL
      AND (p.expires_at IS NULL OR p.expires_at > statement_timestamp())
      AND (p.user_id IS NULL OR p.user_id = p_run.created_by_id)
      AND (p.arguments IS NULL OR agentstate_json_contains(p_arguments, p.arguments))
    ORDER BY p.decision = 'reject' DESC, p.id LIMIT 1
$$;

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

CREATE OR REPLACE FUNCTION agentstate_json_time(p_time timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT (to_jsonb(p_time AT TIME ZONE 'UTC') #>> '{}') || '+00:00'
$$;
