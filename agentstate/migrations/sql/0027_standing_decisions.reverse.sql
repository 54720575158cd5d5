-- Undoes 0027: the standing decisions as 0026 left them.

DROP FUNCTION agentstate_record_decision(text, text, text, boolean, boolean, text, bigint, bigint, text, text[]);

DROP FUNCTION agentstate_rebuild_approvals(text, jsonb, bigint, bigint, text, text[]);

DROP FUNCTION agentstate_create_policy(text, boolean, bigint, text, jsonb, timestamptz, text, bigint, text, text[]);

DROP FUNCTION agentstate_check_standing(text, boolean, bigint, bigint, text[]);

DROP FUNCTION agentstate_policy_stands(text, boolean, bigint, bigint);

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

-- The active policy that decides such a call, its row locked FOR SHARE until the
-- caller commits: its id, whether it approves, its reason; all NULL when none
-- does. The rows are locked in the order chosen, one by one: a row a concurrent
-- revocation changed is checked again when that commits and, revoked, passed
-- over for the next. (No policy row type in a signature: the migrations that
-- install these functions before the policy table exists must accept them.)
CREATE OR REPLACE FUNCTION agentstate_deciding_policy(
    p_run agentstate_run, p_tool text, p_arguments jsonb,
    OUT policy_id bigint, OUT approve boolean, OUT reason text
)
LANGUAGE plpgsql AS $$
BEGIN
    SELECT p.id, p.decision = 'approve', p.reason INTO policy_id, approve, reason
    FROM agentstate_approvalpolicy p
    WHERE p.tool_name = p_tool AND p.revoked_at IS NULL
      AND (p.expires_at IS NULL OR p.expires_at > statement_timestamp())
      AND (p.user_id IS NULL OR p.user_id = p_run.created_by_id)
      AND (p.arguments IS NULL OR agentstate_json_contains(p_arguments, p.arguments))
    ORDER BY p.decision = 'reject' DESC, p.id LIMIT 1
    FOR SHARE OF p;
END $$;

CREATE OR REPLACE FUNCTION agentstate_record_decision(
    p_run_id text, p_tool text, p_call text, p_approve boolean, p_always boolean, p_reason text,
    p_reach bigint, p_user bigint, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    rn agentstate_run := agentstate_locked_run(p_run_id, p_reach);
    changed jsonb := agentstate_write_decision(
        rn, p_tool, p_call, p_approve, p_always, p_reason, p_user, p_actor);
BEGIN
    RETURN agentstate_run_state(rn) || jsonb_build_object('events', jsonb_build_array(changed));
END $$;

CREATE OR REPLACE FUNCTION agentstate_rebuild_approvals(
    p_run_id text, p_records jsonb, p_reach bigint, p_user bigint, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    rn agentstate_run := agentstate_locked_run(p_run_id, p_reach);
    rebuilt jsonb;
BEGIN
    DELETE FROM agentstate_approvalcall c USING agentstate_approvalrecord r
    WHERE c.record_id = r.id AND r.run_id = rn.id;
    DELETE FROM agentstate_approvalrecord WHERE run_id = rn.id;
    INSERT INTO agentstate_approvalrecord
        (run_id, tool_name, approved_always, rejected_always, updated_at, updated_by_id)
    SELECT rn.id, tool.key,
           CASE WHEN jsonb_typeof(tool.value -> 'approved') = 'boolean'
                THEN (tool.value -> 'approved')::boolean END,
           CASE WHEN jsonb_typeof(tool.value -> 'rejected') = 'boolean'
                THEN (tool.value -> 'rejected')::boolean END,
           statement_timestamp(), p_user
    FROM jsonb_each(p_records) AS tool;
    INSERT INTO agentstate_approvalcall
        (record_id, call_id, decision, decided_by_id, reason, created_at)
    SELECT r.id, listed.call_id, side.verdict, p_user, '', statement_timestamp()
    FROM jsonb_each(p_records) AS tool
    JOIN agentstate_approvalrecord r ON r.run_id = rn.id AND r.tool_name = tool.key
    CROSS JOIN (VALUES (1, 'approved', 'approve'), (2, 'rejected', 'reject'))
        AS side (n, name, verdict)
    CROSS JOIN LATERAL jsonb_array_elements_text(
        CASE WHEN jsonb_typeof(tool.value -> side.name) = 'array'
             THEN tool.value -> side.name ELSE '[]' END) WITH ORDINALITY AS listed (call_id, i)
    ORDER BY tool.key, side.n, listed.i;
    rebuilt := agentstate_record('approvals.rebuilt', 'run', rn.run_id, p_user, p_actor,
        rn.created_by_id, '', jsonb_build_object('tools', (SELECT count(*) FROM jsonb_object_keys(p_records))));
    RETURN agentstate_run_state(rn) || jsonb_build_object('events', jsonb_build_array(rebuilt));
END $$;

CREATE OR REPLACE FUNCTION agentstate_create_policy(
    p_tool text, p_approve boolean, p_user_id bigint, p_username text, p_arguments jsonb,
    p_expires_at timestamptz, p_reason text, p_by bigint, p_actor text
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    for_user bigint := p_user_id;
    made agentstate_approvalpolicy;
    created jsonb;
BEGIN
    IF p_username IS NOT NULL THEN
        for_user := agentstate_user_id(p_username);
        IF for_user IS NULL THEN
            RETURN agentstate_refuse('UnknownOwner',
                jsonb_build_object('username', p_username, 'field', 'user'));
        END IF;
    END IF;
    INSERT INTO agentstate_approvalpolicy
        (tool_name, user_id, arguments, decision, expires_at, reason, created_by_id, created_at)
    VALUES (p_tool, for_user, p_arguments, CASE WHEN p_approve THEN 'approve' ELSE 'reject' END,
            p_expires_at, p_reason, p_by, statement_timestamp())
    RETURNING * INTO made;
    created := agentstate_record('policy.created', 'approvalpolicy', made.id::text, p_by, p_actor,
        made.created_by_id, '', jsonb_build_object(
            'tool_name', made.tool_name, 'decision', made.decision, 'user_id', made.user_id,
            'arguments', made.arguments, 'expires_at', made.expires_at, 'reason', made.reason));
    RETURN jsonb_build_object('policy', agentstate_policy_state(to_jsonb(made)),
        'events', jsonb_build_array(created));
END $$;
