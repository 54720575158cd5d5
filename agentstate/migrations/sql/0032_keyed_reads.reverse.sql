-- Undoes 0032: the reads with an OR, as 0031 left them.

CREATE OR REPLACE FUNCTION agentstate_get(p_scope text, p_names text[], p_owner_id bigint, p_owner_name text) RETURNS jsonb
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    who bigint := agentstate_owner_id(p_owner_id, p_owner_name);
    sid bigint := agentstate_scope_id(p_scope, who);
BEGIN
    IF sid IS NULL THEN
        RETURN agentstate_refuse('ScopeNotFound', jsonb_build_object('scope', p_scope));
    END IF;
    RETURN jsonb_build_object('values', coalesce((
        SELECT jsonb_agg(jsonb_build_array(v.name, CASE WHEN v.is_list THEN coalesce((
                   SELECT jsonb_agg(e.value ORDER BY e.position) FROM agentstate_element e
                   WHERE e.variable_id = v.id), '[]') ELSE coalesce(v.value, 'null') END)
               ORDER BY v.name)
        FROM agentstate_variable v
        WHERE v.scope_id = sid AND (p_names IS NULL OR v.name = ANY (p_names))
    ), '[]'));
END $$;

CREATE OR REPLACE FUNCTION agentstate_purge_pauses(p_size integer, p_retention interval) RETURNS jsonb
LANGUAGE sql AS $$
    WITH batch AS (
        SELECT id FROM agentstate_pausedrun
        WHERE (status = 'resolved' AND resolved_at < now() - p_retention)
           OR (status = 'expired' AND expires_at < now() - p_retention)
        LIMIT p_size
        FOR UPDATE SKIP LOCKED
    ), purged AS (
        DELETE FROM agentstate_pausedrun pause WHERE pause.id = ANY (ARRAY(SELECT id FROM batch))
        RETURNING pause.id
    )
    SELECT jsonb_build_object('count', count(*)) FROM purged
$$;
