-- 0013: a run's state in PL/pgSQL, which keeps its plan (a SQL function that is
-- not inlined is planned on every call). The lookups of a user by username and
-- of a username by id follow in the migration (RunPython: they name the site's
-- user model).

CREATE OR REPLACE FUNCTION agentstate_run_state(p_run agentstate_run) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN jsonb_build_object('run', to_jsonb(p_run), 'records', agentstate_records_of(p_run.id));
END $$;
