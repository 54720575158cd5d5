-- 0016: the REST API's token lookup as a function, whose plan PL/pgSQL keeps,
-- for a site with Django's user model and DRF's token model (see
-- backends/postgresql/sql/60_auth.sql).

CREATE FUNCTION agentstate_token(p_key text)
RETURNS TABLE (o_user jsonb, o_created timestamptz, o_own text[], o_grouped text[])
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan AS $$
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
