-- 0027: a standing decision of a tool under an approval rule takes the rule's right.
-- An approval written into a run's records, and a policy, are made only by whom the
-- rule lets decide alone (agentstate_check_standing); a policy decides no call the
-- rule keeps from it (agentstate_policy_stands): an approval where the rule wants
-- several reviewers, or a policy of the run's own creator where the rule refuses
-- self-approval. A decision's "always" approve is refused where the request wants
-- more than one approval (it would approve later calls on one vote).

DROP FUNCTION agentstate_record_decision(text, text, text, boolean, boolean, text, bigint, bigint, text);

DROP FUNCTION agentstate_rebuild_approvals(text, jsonb, bigint, bigint, text);

DROP FUNCTION agentstate_create_policy(text, boolean, bigint, text, jsonb, timestamptz, text, bigint, text);

-- Refuses a standing decision of p_tool by p_user (a policy for the runs of
-- p_creator, or an approval written into the records of a run p_creator created)
-- unless the tool has no rule or its rule lets p_user decide alone, in
-- agentstate_decide's words: SelfApproval for the run's creator unless the rule
-- allows it; NotAReviewer outside its reviewers (escalation is a request's, and
-- a standing decision has none); VotesRequired for an approval where the rule
-- wants more than one reviewer.
CREATE FUNCTION agentstate_check_standing(
    p_tool text, p_approve boolean, p_user bigint, p_creator bigint, p_membership text[]
) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
    rl agentstate_approvalrule;
BEGIN
    SELECT * INTO rl FROM agentstate_approvalrule WHERE tool_name = p_tool;
    IF NOT FOUND THEN
        RETURN;
    ELSIF NOT rl.allow_self_approval AND p_user IS NOT NULL AND p_user = p_creator THEN
        PERFORM agentstate_refuse('SelfApproval', '{}');
    ELSIF rl.reviewers_id IS NOT NULL
          AND NOT agentstate_in_group(p_user, rl.reviewers_id, p_membership) THEN
        PERFORM agentstate_refuse('NotAReviewer', jsonb_build_object('tool_name', p_tool));
    ELSIF p_approve AND rl.approvals_required > 1 THEN
        PERFORM agentstate_refuse('VotesRequired', jsonb_build_object(
            'tool_name', p_tool, 'approvals_required', rl.approvals_required));
    END IF;
END $$;

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
      AND agentstate_policy_stands(p_tool, p.decision = 'approve', p.created_by_id,
                                   p_run.created_by_id)
    ORDER BY p.decision = 'reject' DESC, p.id LIMIT 1
    FOR SHARE OF p;
END $$;

-- Decide a pending request exactly once: the run's row locked first, then
-- the request's, whose status is then read as it is (a racing decision
-- committed meanwhile is seen: AlreadyDecided).
-- p_arguments (NULL: none) is what the reviewer approved instead of the filed
-- arguments, kept as approved_arguments unless it equals them; p_digest is its
-- digest (NULL: the filed arguments', the request's arguments_digest).
-- Separation of duties first: the run's creator unless the request allows it
-- (SelfApproval); outside its reviewers, and its escalation group once due
-- (NotAReviewer). A request filed under a rule past its deadline is Expired
-- whatever the sweep did. Under a rule each decision is a vote (one per
-- reviewer: AlreadyVoted); an approve decides once approvals_required votes
-- approved the same digest, a reject at once.
CREATE OR REPLACE FUNCTION agentstate_decide(
    p_id bigint, p_approve boolean, p_always boolean, p_reason text, p_arguments jsonb,
    p_ttl interval, p_user bigint, p_actor text, p_digest text, p_membership text[]
) RETURNS json
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    rn agentstate_run;
    req agentstate_approvalrequest;
    changed jsonb;
    decided jsonb;
    voted jsonb;
    edited jsonb;
    approvals integer;
    digest text;
    reviewer boolean;  -- p_user among the request's reviewers
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
    reviewer := agentstate_in_group(p_user, req.reviewers_id, p_membership);
    IF (req.reviewers_id IS NOT NULL OR (req.approvals_required > 1 AND p_user IS NULL))
       AND NOT reviewer
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
    IF p_approve AND p_always AND req.approvals_required > 1 THEN
        -- "Always" would approve the tool's later calls on one vote.
        RETURN agentstate_refuse('VotesRequired', jsonb_build_object(
            'tool_name', req.tool_name, 'approvals_required', req.approvals_required));
    END IF;
    IF p_approve AND p_always AND req.reviewers_id IS NOT NULL AND NOT reviewer THEN
        -- Escalation lets its group decide this request, not the tool's later calls.
        RETURN agentstate_refuse('NotAReviewer', jsonb_build_object(
            'tool_name', req.tool_name, 'escalated', true));
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
            RETURN json_build_object(
                'request', row_to_json(req), 'current_status', req.status,
                'run', row_to_json(rn), 'events', jsonb_build_array(voted));
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
    RETURN json_build_object(
        'request', row_to_json(req), 'current_status', req.status,
        'run', row_to_json(rn), 'events', CASE WHEN voted IS NULL
            THEN jsonb_build_array(changed, decided)
            ELSE jsonb_build_array(voted, changed, decided) END);
END $$;

-- An approval of a tool under a rule is written only by whom the rule lets
-- decide alone (agentstate_check_standing); a rejection by anyone who may
-- change the run.
CREATE FUNCTION agentstate_record_decision(
    p_run_id text, p_tool text, p_call text, p_approve boolean, p_always boolean, p_reason text,
    p_reach bigint, p_user bigint, p_actor text, p_membership text[]
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    rn agentstate_run := agentstate_locked_run(p_run_id, p_reach);
    changed jsonb;
BEGIN
    IF p_approve THEN
        PERFORM agentstate_check_standing(p_tool, true, p_user, rn.created_by_id, p_membership);
    END IF;
    changed := agentstate_write_decision(
        rn, p_tool, p_call, p_approve, p_always, p_reason, p_user, p_actor);
    RETURN agentstate_run_state(rn) || jsonb_build_object('events', jsonb_build_array(changed));
END $$;

-- p_records: a checked map in the SDK's form, every side given. An approval the
-- run's records do not hold yet, of a tool under a rule, is written as
-- agentstate_record_decision writes one; those they hold are kept by anyone.
CREATE FUNCTION agentstate_rebuild_approvals(
    p_run_id text, p_records jsonb, p_reach bigint, p_user bigint, p_actor text,
    p_membership text[]
) RETURNS jsonb
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    rn agentstate_run := agentstate_locked_run(p_run_id, p_reach);
    added text;
    rebuilt jsonb;
BEGIN
    FOR added IN
        SELECT tool.key FROM jsonb_each(p_records) AS tool
        WHERE EXISTS (SELECT FROM agentstate_approvalrule r WHERE r.tool_name = tool.key)
          AND CASE WHEN tool.value -> 'approved' = 'true' THEN NOT EXISTS (
                       SELECT FROM agentstate_approvalrecord r
                       WHERE r.run_id = rn.id AND r.tool_name = tool.key AND r.approved_always)
                   WHEN jsonb_typeof(tool.value -> 'approved') = 'array' THEN EXISTS (
                       SELECT FROM jsonb_array_elements_text(tool.value -> 'approved') AS c (id)
                       WHERE agentstate_decision(rn.id, tool.key, c.id) IS NOT TRUE)
                   ELSE false END
        ORDER BY tool.key
    LOOP
        PERFORM agentstate_check_standing(added, true, p_user, rn.created_by_id, p_membership);
    END LOOP;
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

-- p_user_id or, given instead, p_username (looked up: UnknownOwner on field user).
-- Under the tool's rule, made only by whom it lets decide alone, for the runs of
-- that user (agentstate_check_standing: p_by is the run's creator when it is
-- the policy's user).
CREATE FUNCTION agentstate_create_policy(
    p_tool text, p_approve boolean, p_user_id bigint, p_username text, p_arguments jsonb,
    p_expires_at timestamptz, p_reason text, p_by bigint, p_actor text, p_membership text[]
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
    PERFORM agentstate_check_standing(p_tool, p_approve, p_by, for_user, p_membership);
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
