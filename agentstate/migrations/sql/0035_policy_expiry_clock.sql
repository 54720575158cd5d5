-- 0035: a policy's expires_at given as a timedelta (p_expires_in) is counted from
-- the database's clock, and whether it is in the future is checked by that clock,
-- by which a policy is in force; both were the clock of the process creating it.

DROP FUNCTION agentstate_create_policy(
    text, boolean, bigint, text, jsonb, timestamptz, text, bigint, text, text[]);

CREATE FUNCTION agentstate_create_policy(
    p_tool text, p_approve boolean, p_user_id bigint, p_username text, p_arguments jsonb,
    p_expires_at timestamptz, p_expires_in interval, p_reason text, p_by bigint, p_actor text,
    p_membership text[]
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    for_user bigint := p_user_id;
    expires timestamptz := coalesce(p_expires_at, statement_timestamp() + p_expires_in);
    made agentstate_approvalpolicy;
    created jsonb;
BEGIN
    IF expires <= statement_timestamp() THEN
        RETURN agentstate_refuse('PastExpiry', '{}');
    END IF;
    IF p_username IS NOT NULL THEN
        for_user := agentstate_user_id(p_username);
        IF for_user IS NULL THEN
            RETURN agentstate_refuse('UnknownOwner',
                jsonb_build_object('username', p_username, 'field', 'user'));
        END IF;
    END IF;
    PERFORM agentstate_check_standing(p_tool, p_approve, p_by, for_user, p_membership);
    INSERT INTO agentstate_approvalpolicy
        (tool_name, user_id, arguments, decision, expires_at, reason, created_by_id, created_at)
    VALUES (p_tool, for_user, p_arguments, CASE WHEN p_approve THEN 'approve' ELSE 'reject' END,
            expires, p_reason, p_by, statement_timestamp())
    RETURNING * INTO made;
    created := agentstate_record('policy.created', 'approvalpolicy', made.id::text, p_by, p_actor,
        made.created_by_id, '', jsonb_build_object(
            'tool_name', made.tool_name, 'decision', made.decision, 'user_id', made.user_id,
            'arguments', made.arguments, 'expires_at', made.expires_at, 'reason', made.reason));
    RETURN jsonb_build_object('policy', agentstate_policy_state(to_jsonb(made)),
        'events', jsonb_build_array(created));
END $$;
