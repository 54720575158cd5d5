-- Approval policies: standing decisions of later calls, so people are not asked twice.
--
-- A policy matches a call of its tool_name in a run whose creator is its
-- user_id (NULL: any run's), whose arguments contain its arguments pattern
-- (NULL: any arguments), by agentstate_json_contains: the rules of
-- agentstate/policies.py, which a property test holds to the same answers.
-- It is active while revoked_at is NULL and expires_at (if any) is later
-- than statement_timestamp(), Django's Now().
--
-- Revocation against filing: request_approval locks the deciding policy's
-- row FOR SHARE in the statement that finds it, and a revocation first locks
-- the row FOR UPDATE, which waits for every such share lock to commit, and
-- only then takes revoked_at from clock_timestamp(). So every request a
-- policy decided has decided_at (its statement's start) before the policy's
-- revoked_at; and a request whose lock waits for a revocation re-checks the
-- row once it commits (READ COMMITTED), finds it revoked and does without it.

-- Whether p_value contains p_pattern: a pattern object needs an object holding
-- each of its keys with a value that contains the pattern's; any other pattern
-- needs an equal value (jsonb equality: true is no 1, 1 is 1.0, arrays in order).
-- A NULL value (arguments not given) contains nothing.
CREATE FUNCTION agentstate_json_contains(p_value jsonb, p_pattern jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(CASE
        WHEN jsonb_typeof(p_pattern) = 'object' THEN
            jsonb_typeof(p_value) = 'object' AND NOT EXISTS (
                SELECT FROM jsonb_each(p_pattern) AS wanted (key, value)
                WHERE NOT (p_value ? wanted.key
                           AND agentstate_json_contains(p_value -> wanted.key, wanted.value)))
        ELSE p_value = p_pattern
    END, false)
$$;

-- Whether a policy of p_tool (approving or not: p_approve; made by p_by) decides
-- a call in a run p_creator created, under the tool's rule as it stands now: not
-- an approval where the rule wants more than one reviewer, nor a policy made by
-- the run's own creator where the rule refuses self-approval. (Its maker's right
-- was checked when it was made: agentstate_check_standing.)
CREATE FUNCTION agentstate_policy_stands(
    p_tool text, p_approve boolean, p_by bigint, p_creator bigint
) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT NOT EXISTS (
        SELECT FROM agentstate_approvalrule r
        WHERE r.tool_name = p_tool
          AND ((p_approve AND r.approvals_required > 1)
               OR (NOT r.allow_self_approval AND p_by = p_creator)))
$$;

-- What an active policy decides of a call in p_run the records leave undecided:
-- true, false (a matching reject policy wins), or NULL. Not locked: an answer.
-- PL/pgSQL, so that its statement's plan is kept (30_runs.sql).
CREATE FUNCTION agentstate_policy_decision(p_run agentstate_run, p_tool text, p_arguments jsonb)
RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
        SELECT p.decision = 'approve' FROM agentstate_approvalpolicy p
        WHERE p.tool_name = p_tool AND p.revoked_at IS NULL
          AND (p.expires_at IS NULL OR p.expires_at > statement_timestamp())
          AND (p.user_id IS NULL OR p.user_id = p_run.created_by_id)
          AND (p.arguments IS NULL OR agentstate_json_contains(p_arguments, p.arguments))
          AND agentstate_policy_stands(p_tool, p.decision = 'approve', p.created_by_id,
                                       p_run.created_by_id)
        ORDER BY p.decision = 'reject' DESC, p.id LIMIT 1);
END $$;

-- The active policy that decides such a call, its row locked FOR SHARE until the
-- caller commits: its id, whether it approves, its reason; all NULL when none
-- does. The rows are locked in the order chosen, one by one: a row a concurrent
-- revocation changed is checked again when that commits and, revoked, passed
-- over for the next. (No policy row type in a signature: the migrations that
-- install these functions before the policy table exists must accept them.)
CREATE FUNCTION agentstate_deciding_policy(
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
      AND agentstate_policy_stands(p_tool, p.decision = 'approve', p.created_by_id,
                                   p_run.created_by_id)
    ORDER BY p.decision = 'reject' DESC, p.id LIMIT 1
    FOR SHARE OF p;
END $$;

-- A policy as the backend answers it (p_policy: its row as JSON), with its user's
-- and its creator's usernames.
CREATE FUNCTION agentstate_policy_state(p_policy jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT p_policy || jsonb_build_object(
        'user_name', agentstate_username((p_policy ->> 'user_id')::bigint),
        'created_by_name', agentstate_username((p_policy ->> 'created_by_id')::bigint))
$$;

-- p_user_id or, given instead, p_username (looked up: UnknownOwner on field user).
-- Under the tool's rule, made only by whom it lets decide alone, for the runs of
-- that user (agentstate_check_standing: p_by is the run's creator when it is
-- the policy's user). In force until p_expires_at or, given instead, p_expires_in
-- from now: after now by this clock, by which it is in force (PastExpiry).
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

-- The row locked first (waiting for the requests it is deciding), then revoked by
-- the clock: see the top of this file.
CREATE FUNCTION agentstate_revoke_policy(p_id bigint, p_by bigint, p_actor text) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    pol agentstate_approvalpolicy;
    revoked jsonb;
BEGIN
    SELECT * INTO pol FROM agentstate_approvalpolicy WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN agentstate_refuse('PolicyNotFound', jsonb_build_object('policy_id', p_id));
    END IF;
    IF pol.revoked_at IS NOT NULL THEN
        RETURN agentstate_refuse('AlreadyRevoked', jsonb_build_object('policy_id', p_id));
    END IF;
    UPDATE agentstate_approvalpolicy SET revoked_at = clock_timestamp(), revoked_by_id = p_by
    WHERE id = p_id AND revoked_at IS NULL
    RETURNING * INTO pol;
    revoked := agentstate_record('policy.revoked', 'approvalpolicy', pol.id::text, p_by, p_actor,
        pol.created_by_id, '', jsonb_build_object(
            'tool_name', pol.tool_name, 'decision', pol.decision, 'revoked_at', pol.revoked_at));
    RETURN jsonb_build_object('policy', agentstate_policy_state(to_jsonb(pol)),
        'events', jsonb_build_array(revoked));
END $$;
