-- The REST API's token lookup (agentstate.api.authentication), for a site with
-- Django's own user model and DRF's token model (their tables as Django names
-- them): the token, its user as JSON, and the user's own and its groups'
-- permissions as app_label.codename. The statement is
-- backends/postgresql/auth.py's STANDARD, run here so that its plan is kept
-- (PL/pgSQL keeps a statement's plan for the session): sent as it is, it was
-- planned anew on every request, its seven tables taking the planner about four
-- times what running it takes. A site with other models sends the statement.
CREATE FUNCTION agentstate_token(p_key text)
RETURNS TABLE (o_user jsonb, o_created timestamptz, o_own text[], o_grouped text[])
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
BEGIN
    RETURN QUERY
    SELECT to_jsonb(u), t.created,
        ARRAY(SELECT ct.app_label || '.' || p.codename FROM auth_permission p
              JOIN django_content_type ct ON ct.id = p.content_type_id
              WHERE p.id IN (SELECT permission_id FROM auth_user_user_permissions
                             WHERE user_id = u.id)),
        ARRAY(SELECT ct.app_label || '.' || p.codename FROM auth_permission p
              JOIN django_content_type ct ON ct.id = p.content_type_id
              WHERE p.id IN (SELECT g.permission_id FROM auth_group_permissions g
                             JOIN auth_user_groups m ON m.group_id = g.group_id
                             WHERE m.user_id = u.id))
    FROM authtoken_token t JOIN auth_user u ON u.id = t.user_id WHERE t.key = p_key;
END $$;
